"""Makespan: ten waves of children that each sleep 200 ms, at concurrency 50, 200
and 1,000.

At concurrency c, 10 × c children go through the full path
(``Supervisor.delegate`` under ``LocalExecutor().map``, JSON events to a file
as the command line writes them); the ideal makespan is 10 × 0.2 s = 2.0 s.
Whatever lyra spends per delegation on the event loop's one thread delays the
next wave, so the ratio to the ideal grows with concurrency × the cost of a
delegation. The median of a few runs is compared with the ideal; min and max
are shown.

Beside it, interleaved run by run, the floor of the same shape: bare anyio, a
pool of as many workers pulling the same children, each under its own
``anyio.move_on_after`` and writing the same two events per child with orjson
to a file (``_common.BareLog``). The floor misses the ideal too (the event loop
wakes 1,000 timers at once and runs each task's step in turn), so the floor's
ratio says how much of the distance is lyra's.

Targets (DESIGN §9): ≤ 1.03 × the ideal at concurrency 200, ≤ 1.05 × at 1,000
(50: for information; the floor and lyra / floor: for information).

    python benchmarks/makespan.py [--quick | --smoke]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _common import BareLog, Row, Size, events_to, floor_ended, floor_started, median, standalone

from lyra import ChildContext, Supervisor
from lyra.supervisor import LocalExecutor

WAVES, QUICK_WAVES, SMOKE_WAVES = 10, 2, 1
SLEEP = 0.2
CONCURRENCIES = {50: None, 200: 1.03, 1_000: 1.05}
REPEATS, QUICK_REPEATS, SMOKE_REPEATS = 3, 1, 1


async def sleepy_child(prompt: str, ctx: ChildContext) -> str:
    await anyio.sleep(SLEEP)
    return "slept"


async def makespan(children: int, concurrency: int) -> float:
    supervisor = Supervisor(sleepy_child)

    async def work(prompt: str) -> Any:
        return await supervisor.delegate(prompt, timeout=30.0)

    items = [f"child {i}" for i in range(children)]
    started = time.perf_counter()
    results = await LocalExecutor().map(
        work, items, max_concurrency=concurrency, on_error=lambda item, exc: None
    )
    elapsed = time.perf_counter() - started
    failed = sum(1 for result in results if result is None or not result.ok)
    if failed:
        raise RuntimeError(f"{failed} of {children} sleeping children did not complete")
    return elapsed


async def bare_makespan(children: int, concurrency: int, log: BareLog) -> float:
    """The floor: ``concurrency`` workers in a task group pulling the same children,
    each under ``anyio.move_on_after``, with the same two events per child."""
    items = iter(range(children))

    async def worker() -> None:
        for _ in items:
            session, started = floor_started(log, 30.0)
            with anyio.move_on_after(30.0):
                await anyio.sleep(SLEEP)  # (the child's own work)
            floor_ended(log, session, started, None)

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(concurrency):
            group.start_soon(worker)
    return time.perf_counter() - started


def run(size: Size) -> list[Row]:
    waves = size.pick(WAVES, QUICK_WAVES, SMOKE_WAVES)
    repeats = size.pick(REPEATS, QUICK_REPEATS, SMOKE_REPEATS)
    rows = []
    with tempfile.TemporaryDirectory() as folder, events_to(Path(folder) / "events.jsonl"):
        log = BareLog(Path(folder) / "bare.jsonl")
        try:
            for concurrency, target in CONCURRENCIES.items():
                rows += _rows(concurrency, target, waves, repeats, log)
        finally:
            log.close()
    return rows


def _rows(
    concurrency: int, target: float | None, waves: int, repeats: int, log: BareLog
) -> list[Row]:
    children = waves * concurrency
    ideal = waves * SLEEP
    anyio.run(makespan, concurrency, concurrency)  # warm-up: one wave each
    anyio.run(bare_makespan, concurrency, concurrency, log)
    runs: list[float] = []
    floors: list[float] = []
    for index in range(repeats):  # interleaved, who goes first alternating
        for side in ("lyra", "bare") if index % 2 == 0 else ("bare", "lyra"):
            if side == "lyra":
                runs.append(anyio.run(makespan, children, concurrency))
            else:
                floors.append(anyio.run(bare_makespan, children, concurrency, log))
    ratio, floor = median(runs) / ideal, median(floors) / ideal
    print(
        f"concurrency {concurrency:>5,}: {children:,} × {SLEEP * 1000:.0f} ms, ideal "
        f"{ideal:.2f} s, median {median(runs):.3f} s → {ratio:.3f}×"
        + (f" (target ≤ {target}×)" if target else "")
        + f"; bare anyio floor {median(floors):.3f} s → {floor:.3f}×"
    )
    return [
        Row(
            "makespan",
            f"makespan / ideal at concurrency {concurrency:,}",
            ratio,
            "×",
            f"≤ {target}×" if target else "",
            ratio <= target if target else None,
            f"{children:,} children; runs {', '.join(f'{r:.3f}' for r in runs)} s",
        ),
        Row(
            "makespan",
            f"bare anyio floor / ideal at concurrency {concurrency:,}",
            floor,
            "×",
            note=f"runs {', '.join(f'{r:.3f}' for r in floors)} s",
        ),
        Row(
            "makespan",
            f"makespan / bare anyio floor at concurrency {concurrency:,}",
            median(runs) / median(floors),
            "×",
            note="medians of interleaved runs",
        ),
    ]


if __name__ == "__main__":
    standalone(run, __doc__)
