"""Timeout precision: how late after its deadline does a child's report come back,
alone and with 200 children expiring at once?

Two children that never finish on their own: a cooperative one (awaits
forever) and one stuck in blocking sync code inside a tool (``time.sleep`` in
a worker thread). Each runs under a 50 ms deadline, alone (many trials) and as
200 at once, all expiring together (a few rounds); lateness is the time from
the deadline to the returned report. Events are written to a file as the
command line writes them.

Targets (DESIGN §9): p99 ≤ 20 ms cooperative, ≤ 100 ms blocking, also with 200
expiring at once.

    python benchmarks/timeouts.py [--quick]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import anyio
from _common import Row, events_to, percentile, standalone

from lyra import ChildContext, Supervisor

TIMEOUT = 0.05
TRIALS, QUICK_TRIALS = 200, 20
ROUNDS, QUICK_ROUNDS = 5, 1
TOGETHER = 200
TARGETS = {"cooperative": 0.020, "blocking": 0.100}


async def cooperative(prompt: str, ctx: ChildContext) -> str:
    await anyio.sleep_forever()
    return "never"


async def blocking(prompt: str, ctx: ChildContext) -> str:
    await ctx.tool("stuck", time.sleep, 0.5)
    return "never"


CHILDREN = {"cooperative": cooperative, "blocking": blocking}


async def one_at_a_time(name: str, trials: int) -> list[float]:
    supervisor = Supervisor(CHILDREN[name])
    late = []
    for _ in range(trials):
        started = time.perf_counter()
        result = await supervisor.delegate("never ends", timeout=TIMEOUT)
        late.append(time.perf_counter() - started - TIMEOUT)
        assert result.failure is not None
        assert result.failure.category == "timeout"
    return late


async def all_at_once(name: str, rounds: int) -> list[float]:
    """``TOGETHER`` children started in one go, so that their deadlines fall within
    a few milliseconds of each other; each one's lateness is from its own deadline."""
    supervisor = Supervisor(CHILDREN[name])
    late: list[float] = []

    async def one() -> None:
        started = time.perf_counter()
        result = await supervisor.delegate("never ends", timeout=TIMEOUT)
        late.append(time.perf_counter() - started - TIMEOUT)
        assert result.failure is not None

    for _ in range(rounds):
        async with anyio.create_task_group() as group:
            for _ in range(TOGETHER):
                group.start_soon(one)
        await anyio.sleep(0.6)  # let abandoned blocking threads finish their sleep
    return late


def run(quick: bool) -> list[Row]:
    trials = QUICK_TRIALS if quick else TRIALS
    rounds = QUICK_ROUNDS if quick else ROUNDS
    rows = []
    with tempfile.TemporaryDirectory() as folder, events_to(Path(folder) / "events.jsonl"):
        for name, target in TARGETS.items():
            for shape, late in (
                ("alone", anyio.run(one_at_a_time, name, trials)),
                (f"{TOGETHER} at once", anyio.run(all_at_once, name, rounds)),
            ):
                p50, p99 = percentile(late, 0.50), percentile(late, 0.99)
                print(
                    f"{name:12} {shape:12} p50 {p50 * 1000:6.2f} ms  p99 {p99 * 1000:6.2f} ms  "
                    f"max {max(late) * 1000:6.2f} ms  (target p99 ≤ {target * 1000:.0f} ms)"
                )
                rows.append(
                    Row(
                        "timeouts",
                        f"{name} lateness p99, {shape}",
                        p99 * 1000,
                        "ms",
                        f"≤ {target * 1000:.0f} ms",
                        p99 <= target,
                        f"p50 {p50 * 1000:.1f} ms, max {max(late) * 1000:.1f} ms",
                    )
                )
    return rows


if __name__ == "__main__":
    standalone(run, __doc__)
