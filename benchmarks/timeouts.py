"""Timeout precision: how late after its deadline does a child's report come back,
alone and with 200 children expiring at once, against a bare anyio floor?

Two children that never finish on their own: a cooperative one (awaits
forever) and one stuck in blocking sync code inside a tool (``time.sleep`` in
a worker thread). Each runs under a 50 ms deadline through
``Supervisor.delegate``, alone (many trials) and as 200 at once, all expiring
together; the cooperative one also as 200 ``adelegate_task(prompt,
child=cooperative, timeout=0.05)`` calls at once (the one-call API: a
supervisor and a report each). Lateness is the time from the deadline to the
returned result or report. lyra's events are written to a file as the command
line writes them.

The floor of 200 at once is bare anyio of the same shape: 200 tasks started in
one go in a task group, each calling the same child under its own
``anyio.move_on_after`` (the blocking one through
``anyio.to_thread.run_sync(..., abandon_on_cancel=True)``, as ``ctx.tool``
does) and writing the same two events per task as lyra with orjson to a file
(``_common.BareLog``). lyra and the floor alternate, round by round (each
round in a fresh event loop); each side's p99 is taken per round, and the
medians of the rounds are compared (``adelegate_task``: the median of the
per-round differences, lyra's p99 − the floor's, its own rounds).

Targets (DESIGN §9, issue 29): p99 ≤ 20 ms cooperative, ≤ 100 ms blocking, also
with 200 expiring at once; and with 200 cooperative children expiring at once,
lyra's p99 ≤ the floor's p99 + 2 ms, through ``Supervisor.delegate`` (medians
of the interleaved rounds) and through ``adelegate_task`` (median of the
per-round differences).

    python benchmarks/timeouts.py [--quick | --smoke]
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread
from _common import BareLog, Row, Size, events_to, median, percentile, standalone

from lyra import ChildContext, Supervisor, adelegate_task, parse_report

TIMEOUT = 0.05
TRIALS, QUICK_TRIALS, SMOKE_TRIALS = 200, 10, 3
ROUNDS = {"cooperative": (31, 3, 1), "blocking": (5, 1, 1)}  # (full, quick, smoke) rounds of 200
TOGETHER = 200
TARGETS = {"cooperative": 0.020, "blocking": 0.100}
OVER_FLOOR = 0.002  # 200 cooperative at once: ≤ the floor's p99 + 2 ms


async def cooperative(prompt: str, ctx: ChildContext) -> str:
    await anyio.sleep_forever()
    return "never"


async def blocking(prompt: str, ctx: ChildContext) -> str:
    await ctx.tool("stuck", time.sleep, 0.5)
    return "never"


CHILDREN = {"cooperative": cooperative, "blocking": blocking}


async def bare_cooperative() -> None:
    await anyio.sleep_forever()


async def bare_blocking() -> None:
    await anyio.to_thread.run_sync(time.sleep, 0.5, abandon_on_cancel=True)


BARE: dict[str, Callable[[], Awaitable[None]]] = {
    "cooperative": bare_cooperative,
    "blocking": bare_blocking,
}


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


async def lyra_at_once(name: str) -> list[float]:
    """``TOGETHER`` children started in one go, so that their deadlines fall within
    a few milliseconds of each other; each one's lateness is from its own deadline."""
    supervisor = Supervisor(CHILDREN[name])
    late: list[float] = []

    async def one() -> None:
        started = time.perf_counter()
        result = await supervisor.delegate("never ends", timeout=TIMEOUT)
        late.append(time.perf_counter() - started - TIMEOUT)
        assert result.failure is not None

    async with anyio.create_task_group() as group:
        for _ in range(TOGETHER):
            group.start_soon(one)
    return late


async def adelegate_at_once() -> list[float]:
    """``TOGETHER`` cooperative children through ``adelegate_task``, started in one go."""
    late: list[float] = []
    reports: list[str] = []

    async def one() -> None:
        started = time.perf_counter()
        report = await adelegate_task("never ends", child=cooperative, timeout=TIMEOUT)
        late.append(time.perf_counter() - started - TIMEOUT)
        reports.append(report)

    async with anyio.create_task_group() as group:
        for _ in range(TOGETHER):
            group.start_soon(one)
    for report in reports:  # checked once all are back: the check is not lyra's lateness
        if parse_report(report).category != "timeout":
            raise RuntimeError(f"not a timeout: {report[:300]}")
    return late


async def bare_at_once(name: str, log: BareLog) -> list[float]:
    """The floor: the same shape in bare anyio, with the same two events per task."""
    child = BARE[name]
    late: list[float] = []

    async def one() -> None:
        started = time.perf_counter()
        session = log.session_id()
        log.write(
            "delegation_started", session_id=session, subject=None, attempt=1, timeout=TIMEOUT
        )
        with anyio.move_on_after(TIMEOUT) as scope:
            await child()
        duration = round(time.perf_counter() - started, 6)
        assert scope.cancelled_caught
        log.write(
            "delegation_failed",
            error=f"timed out after {TIMEOUT:g}s",
            duration=duration,
            session_id=session,
            subject=None,
            attempt=1,
        )
        late.append(time.perf_counter() - started - TIMEOUT)

    async with anyio.create_task_group() as group:
        for _ in range(TOGETHER):
            group.start_soon(one)
    return late


def interleaved(
    name: str, rounds: int, folder: Path, lyra: Callable[[], Awaitable[list[float]]]
) -> tuple[list[float], list[float]]:
    """p99 lateness of each round, ``lyra``'s and the floor's, alternating (who goes
    first alternates too); the blocking child's abandoned threads finish between rounds."""
    lyra_p99: list[float] = []
    bare_p99: list[float] = []
    for index in range(rounds):
        for side in ("lyra", "bare") if index % 2 == 0 else ("bare", "lyra"):
            if side == "lyra":
                with events_to(folder / "events.jsonl"):
                    lyra_p99.append(percentile(anyio.run(lyra), 0.99))
            else:
                log = BareLog(folder / "bare.jsonl")
                try:
                    bare_p99.append(percentile(anyio.run(bare_at_once, name, log), 0.99))
                finally:
                    log.close()
            if name == "blocking":
                time.sleep(0.6)
    return lyra_p99, bare_p99


def adelegate_rows(rounds: int, folder: Path, judge: bool) -> list[Row]:
    """200 cooperative children through ``adelegate_task`` against the bare anyio floor:
    the median of the per-round differences of the p99s."""
    lyra, bare = interleaved("cooperative", rounds, folder, adelegate_at_once)
    over = [(a - b) * 1000 for a, b in zip(lyra, bare, strict=True)]
    value = median(over)
    print(
        f"cooperative  {TOGETHER} at once, adelegate_task  p99 lyra {median(lyra) * 1000:6.2f} ms "
        f"({ms(lyra)}), bare anyio {median(bare) * 1000:6.2f} ms ({ms(bare)}); "
        f"lyra − bare {value:+.2f} ms, median of {rounds} per-round differences"
    )
    note = f"median of {rounds} per-round differences (min {min(over):.2f}, max {max(over):.2f})"
    return [
        Row(
            "timeouts",
            f"cooperative lateness p99, {TOGETHER} at once (adelegate_task)",
            median(lyra) * 1000,
            "ms",
            note=f"median of {rounds} rounds; {ms(lyra)}",
        ),
        Row(
            "timeouts",
            f"cooperative, {TOGETHER} at once: adelegate_task p99 − bare anyio p99",
            value,
            "ms",
            f"≤ {OVER_FLOOR * 1000:.0f} ms",
            value <= OVER_FLOOR * 1000 if judge else None,
            note,
        ),
    ]


def ms(values: list[float]) -> str:
    return f"min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f} ms"


def run(size: Size) -> list[Row]:
    trials = size.pick(TRIALS, QUICK_TRIALS, SMOKE_TRIALS)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, target in TARGETS.items():
            with events_to(folder / "events.jsonl"):
                late = anyio.run(one_at_a_time, name, trials)
            p50, p99 = percentile(late, 0.50), percentile(late, 0.99)
            print(
                f"{name:12} alone        p50 {p50 * 1000:6.2f} ms  p99 {p99 * 1000:6.2f} ms  "
                f"max {max(late) * 1000:6.2f} ms  (target p99 ≤ {target * 1000:.0f} ms)"
            )
            rows.append(
                Row(
                    "timeouts",
                    f"{name} lateness p99, alone (Supervisor.delegate)",
                    p99 * 1000,
                    "ms",
                    f"≤ {target * 1000:.0f} ms",
                    p99 <= target,
                    f"p50 {p50 * 1000:.1f} ms, max {max(late) * 1000:.1f} ms",
                )
            )
            rounds = size.pick(*ROUNDS[name])
            lyra, bare = interleaved(name, rounds, folder, partial(lyra_at_once, name))
            lyra_p99, bare_p99 = median(lyra), median(bare)
            print(
                f"{name:12} {TOGETHER} at once  p99 lyra {lyra_p99 * 1000:6.2f} ms ({ms(lyra)}), "
                f"bare anyio {bare_p99 * 1000:6.2f} ms ({ms(bare)}); medians of {rounds} rounds"
            )
            rows.append(
                Row(
                    "timeouts",
                    f"{name} lateness p99, {TOGETHER} at once (Supervisor.delegate)",
                    lyra_p99 * 1000,
                    "ms",
                    f"≤ {target * 1000:.0f} ms",
                    lyra_p99 <= target,
                    f"median of {rounds} rounds; {ms(lyra)}",
                )
            )
            rows.append(
                Row(
                    "timeouts",
                    f"{name} lateness p99, {TOGETHER} at once, bare anyio",
                    bare_p99 * 1000,
                    "ms",
                    note=f"median of {rounds} rounds; {ms(bare)}",
                )
            )
            over = (lyra_p99 - bare_p99) * 1000
            rows.append(
                Row(
                    "timeouts",
                    f"{name}, {TOGETHER} at once: Supervisor.delegate p99 − bare anyio p99",
                    over,
                    "ms",
                    f"≤ {OVER_FLOOR * 1000:.0f} ms" if name == "cooperative" else "",
                    over <= OVER_FLOOR * 1000 if name == "cooperative" else None,
                    "medians of interleaved rounds",
                )
            )
        rows += adelegate_rows(size.pick(*ROUNDS["cooperative"]), folder, size is not Size.SMOKE)
    for row in rows:
        if row.target:
            print(f"{row.metric}: {row.value:.2f} ms (target {row.target})")
    return rows


if __name__ == "__main__":
    standalone(run, __doc__)
