"""Makespan: ten waves of children that each sleep 200 ms, at concurrency 50, 200
and 1,000.

At concurrency c, 10 × c children go through the full path
(``Supervisor.delegate`` under ``LocalExecutor().map``, JSON events to a file
as the command line writes them); the ideal makespan is 10 × 0.2 s = 2.0 s.
Whatever lyra spends per delegation on the event loop's one thread delays the
next wave, so the ratio to the ideal grows with concurrency × the cost of a
delegation. The median of a few runs is compared with the ideal; min and max
are shown.

Targets (DESIGN §9): ≤ 1.03 × the ideal at concurrency 200, ≤ 1.05 × at 1,000
(50: for information).

    python benchmarks/makespan.py [--quick | --smoke]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _common import Row, Size, events_to, median, standalone

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


def run(size: Size) -> list[Row]:
    waves = size.pick(WAVES, QUICK_WAVES, SMOKE_WAVES)
    repeats = size.pick(REPEATS, QUICK_REPEATS, SMOKE_REPEATS)
    ideal = waves * SLEEP
    rows = []
    with tempfile.TemporaryDirectory() as folder, events_to(Path(folder) / "events.jsonl"):
        for concurrency, target in CONCURRENCIES.items():
            children = waves * concurrency
            anyio.run(makespan, concurrency, concurrency)  # warm-up: one wave
            runs = [anyio.run(makespan, children, concurrency) for _ in range(repeats)]
            ratio = median(runs) / ideal
            note = f"{children:,} children; runs {', '.join(f'{r:.3f}' for r in runs)} s"
            print(
                f"concurrency {concurrency:>5,}: {children:,} × {SLEEP * 1000:.0f} ms, ideal "
                f"{ideal:.2f} s, median {median(runs):.3f} s → {ratio:.3f}×"
                + (f" (target ≤ {target}×)" if target else "")
            )
            rows.append(
                Row(
                    "makespan",
                    f"makespan / ideal at concurrency {concurrency:,}",
                    ratio,
                    "×",
                    f"≤ {target}×" if target else "",
                    ratio <= target if target else None,
                    note,
                )
            )
    return rows


if __name__ == "__main__":
    standalone(run, __doc__)
