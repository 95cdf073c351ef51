"""Makespan: 2,000 children that each sleep 200 ms, at concurrency 200.

The ideal is ceil(2,000 / 200) × 0.2 s = 2.0 s. Each child goes through the
full path (``Supervisor.delegate`` under ``LocalExecutor().map``, events to a
temporary file). The makespan is the wall time from the first delegation to
the last result; the median of a few runs is compared with the ideal.

Target (DESIGN §9): ≤ 1.05 × the ideal.

    python benchmarks/makespan.py [--quick]
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _common import Row, events_to, median, standalone

from lyra import ChildContext, Supervisor
from lyra.supervisor import LocalExecutor

CHILDREN, QUICK_CHILDREN = 2_000, 400
CONCURRENCY = 200
SLEEP = 0.2
REPEATS, QUICK_REPEATS = 3, 2


async def sleepy_child(prompt: str, ctx: ChildContext) -> str:
    await anyio.sleep(SLEEP)
    return "slept"


async def makespan(children: int) -> float:
    supervisor = Supervisor(sleepy_child)

    async def work(prompt: str) -> Any:
        return await supervisor.delegate(prompt, timeout=30.0)

    items = [f"child {i}" for i in range(children)]
    started = time.perf_counter()
    results = await LocalExecutor().map(
        work, items, max_concurrency=CONCURRENCY, on_error=lambda item, exc: None
    )
    elapsed = time.perf_counter() - started
    failed = sum(1 for result in results if result is None or not result.ok)
    if failed:
        raise RuntimeError(f"{failed} of {children} sleeping children did not complete")
    return elapsed


def run(quick: bool) -> list[Row]:
    children = QUICK_CHILDREN if quick else CHILDREN
    repeats = QUICK_REPEATS if quick else REPEATS
    ideal = math.ceil(children / CONCURRENCY) * SLEEP
    with tempfile.TemporaryDirectory() as folder, events_to(Path(folder) / "events.jsonl"):
        anyio.run(makespan, CONCURRENCY)  # warm-up: one wave
        runs = [anyio.run(makespan, children) for _ in range(repeats)]
    span = median(runs)
    ratio = span / ideal
    print(
        f"{children:,} children × {SLEEP * 1000:.0f} ms at concurrency {CONCURRENCY}: "
        f"ideal {ideal:.2f} s"
    )
    print(
        f"makespan median {span:.3f} s (runs: {', '.join(f'{r:.3f}' for r in runs)}); "
        f"overhead {(span - ideal) / children * 1e6:.0f} µs per child"
    )
    print(f"ratio makespan / ideal = {ratio:.3f}× (target ≤ 1.05×)")
    return [
        Row("makespan", f"{children:,} × 200 ms at 200", span, "s"),
        Row("makespan", "makespan / ideal", ratio, "×", "≤ 1.05×", ratio <= 1.05),
    ]


if __name__ == "__main__":
    standalone(run, __doc__)
