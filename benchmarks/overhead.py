"""Supervisor overhead: what lyra costs per delegation of a child that does nothing,
against the strictest honest floors of the same shape.

A no-op child (one in ten fails at once: classification and a failure report)
is delegated 10,000 times at concurrency 100, lyra's events written to a file
exactly as the command line configures them (``lyra.events.configure(path)``).
Each lyra contender is timed against two bare floors of the *same shape*, each
doing the least a supervisor under deadlines must: call the child under a
per-item deadline, survive its exception, and write the same two events per
delegation as lyra (``delegation_started``, then ``delegation_completed`` or
``delegation_failed``, with the same fields, a timestamp and a session id,
orjson to a file through a buffered writer: ``_common.BareLog``):

- the **anyio floor**: an anyio task group, ``anyio.move_on_after`` per item;
- the **asyncio floor**: ``asyncio.TaskGroup``, ``asyncio.timeout`` per item.

Shapes:

- **worker pool vs worker pool**: ``LocalExecutor().map`` over
  ``Supervisor.delegate`` against a bare pool of as many workers pulling from
  the same iterator (an anyio task group's, and an ``asyncio.TaskGroup``'s).
- **task per item vs task per item**: one task per item behind a semaphore of
  the same size. The harness is the caller's, not lyra's, so lyra is timed in
  each floor's own: ``Supervisor.delegate`` in an anyio task group behind an
  ``anyio.Semaphore`` against the anyio floor, and in an ``asyncio.TaskGroup``
  behind an ``asyncio.Semaphore`` against the asyncio floor.
- **LangGraph**: the same fan-out as one ``Send`` per item to a no-op node,
  ``max_concurrency`` 100, at 1,000, 5,000 and 10,000 items, against lyra's
  pool on the same items (LangGraph's cost per ``Send`` grows with the fan-out).

For information: lyra with events off, with an unused budget and idle timeout
(the delegation tree's cost when nothing runs out), ``Supervisor.run`` (a
recovery loop per task), and each floor's pool with events off. Runs are
interleaved (lyra, floors, lyra, floors, …) in one process, each in a fresh
event loop after a garbage collection, and timed in CPU time of the process
(``time.process_time``: the loop never waits, so load from other processes
does not count; wall time is printed too); medians are compared, min and max
shown.

Targets (DESIGN §9): lyra ≤ 2.0× the anyio floor and ≤ 3.0× the asyncio floor
in both shapes; LangGraph ≥ 5× lyra's cost at 1k, 5k and 10k items.

    python benchmarks/overhead.py [--quick | --smoke]
    python benchmarks/overhead.py --profile   # where lyra's time goes, by function
"""

from __future__ import annotations

import asyncio
import gc
import operator
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

import anyio
from _common import BareLog, Row, Size, floor_ended, floor_started, median, standalone

from lyra import Budget, ChildContext, Supervisor, Task, events
from lyra.errors import TransientError
from lyra.supervisor import LocalExecutor

N, QUICK_N, SMOKE_N = 10_000, 500, 100
CONCURRENCY = 100
FAIL_EVERY = 10
REPEATS, QUICK_REPEATS, SMOKE_REPEATS = 7, 3, 1
LANGGRAPH_SIZES, QUICK_LANGGRAPH_SIZES = (1_000, 5_000, 10_000), (1_000,)
SMOKE_LANGGRAPH_SIZES = (100,)
TIMEOUT = 60.0

Runner = Callable[[list[str], BareLog | None], Awaitable[int]]
Events = Literal["lyra", "bare", "off"]


@dataclass(frozen=True)
class Contender:
    run: Runner
    events: Events  # lyra's configured to a file, a BareLog, or none at all


async def noop_child(prompt: str, ctx: ChildContext | None) -> str:
    """Returns at once, or fails at once for one item in ten."""
    if prompt[-1] == "!":
        raise TransientError("HTTP 503 from the tool", status=503)
    return "ok"


def prompts(n: int) -> list[str]:
    return [f"task {i}!" if i % FAIL_EVERY == 0 else f"task {i}" for i in range(n)]


# -- lyra ------------------------------------------------------------------------------


def lyra_pool(supervisor: Supervisor, **limits: Any) -> Runner:
    async def run(items: list[str], log: BareLog | None) -> int:
        async def work(prompt: str) -> Any:
            return await supervisor.delegate(prompt, timeout=TIMEOUT, **limits)

        results = await LocalExecutor().map(
            work, items, max_concurrency=CONCURRENCY, on_error=lambda item, exc: None
        )
        return sum(1 for r in results if r is None or r.failure is not None)

    return run


def lyra_anyio_tasks(supervisor: Supervisor) -> Runner:
    async def run(items: list[str], log: BareLog | None) -> int:
        gate, failures = anyio.Semaphore(CONCURRENCY), 0

        async def one(prompt: str) -> None:
            nonlocal failures
            async with gate:
                result = await supervisor.delegate(prompt, timeout=TIMEOUT)
            failures += result.failure is not None

        async with anyio.create_task_group() as group:
            for prompt in items:
                group.start_soon(one, prompt)
        return failures

    return run


def lyra_asyncio_tasks(supervisor: Supervisor) -> Runner:
    async def run(items: list[str], log: BareLog | None) -> int:
        gate, failures = asyncio.Semaphore(CONCURRENCY), 0

        async def one(prompt: str) -> None:
            nonlocal failures
            async with gate:
                result = await supervisor.delegate(prompt, timeout=TIMEOUT)
            failures += result.failure is not None

        async with asyncio.TaskGroup() as group:
            for prompt in items:
                group.create_task(one(prompt))
        return failures

    return run


def lyra_supervisor_run(supervisor: Supervisor) -> Runner:
    async def run(items: list[str], log: BareLog | None) -> int:
        outcomes = await supervisor.run(
            [Task(prompt=p) for p in items], max_concurrency=CONCURRENCY
        )
        return sum(1 for o in outcomes if not o.result.ok)

    return run


# -- the floors: bare anyio and bare asyncio, the same shapes -------------------------------


async def anyio_item(prompt: str, log: BareLog | None) -> bool:
    """The child under ``anyio.move_on_after``, its exception survived, two events."""
    session, started = floor_started(log, TIMEOUT)
    error = None
    with anyio.move_on_after(TIMEOUT) as scope:
        try:
            await noop_child(prompt, None)
        except Exception as exc:  # noqa: BLE001 - the same isolation lyra gives
            error = f"{type(exc).__name__}: {exc}"
    if scope.cancelled_caught:
        error = f"timed out after {TIMEOUT:g}s"
    return floor_ended(log, session, started, error)


async def asyncio_item(prompt: str, log: BareLog | None) -> bool:
    """The child under ``asyncio.timeout``, its exception survived, two events."""
    session, started = floor_started(log, TIMEOUT)
    error = None
    deadline = asyncio.timeout(TIMEOUT)
    try:
        async with deadline:
            await noop_child(prompt, None)
    except Exception as exc:  # noqa: BLE001 - the same isolation lyra gives
        error = (
            f"timed out after {TIMEOUT:g}s"
            if deadline.expired()
            else f"{type(exc).__name__}: {exc}"
        )
    return floor_ended(log, session, started, error)


def anyio_pool() -> Runner:
    async def run(items: list[str], log: BareLog | None) -> int:
        pending, failures = iter(items), 0

        async def worker() -> None:
            nonlocal failures
            for prompt in pending:
                failures += await anyio_item(prompt, log)

        async with anyio.create_task_group() as group:
            for _ in range(min(CONCURRENCY, len(items))):
                group.start_soon(worker)
        return failures

    return run


def asyncio_pool() -> Runner:
    async def run(items: list[str], log: BareLog | None) -> int:
        pending, failures = iter(items), 0

        async def worker() -> None:
            nonlocal failures
            for prompt in pending:
                failures += await asyncio_item(prompt, log)

        async with asyncio.TaskGroup() as group:
            for _ in range(min(CONCURRENCY, len(items))):
                group.create_task(worker())
        return failures

    return run


def anyio_tasks() -> Runner:
    async def run(items: list[str], log: BareLog | None) -> int:
        gate, failures = anyio.Semaphore(CONCURRENCY), 0

        async def one(prompt: str) -> None:
            nonlocal failures
            async with gate:
                failures += await anyio_item(prompt, log)

        async with anyio.create_task_group() as group:
            for prompt in items:
                group.start_soon(one, prompt)
        return failures

    return run


def asyncio_tasks() -> Runner:
    async def run(items: list[str], log: BareLog | None) -> int:
        gate, failures = asyncio.Semaphore(CONCURRENCY), 0

        async def one(prompt: str) -> None:
            nonlocal failures
            async with gate:
                failures += await asyncio_item(prompt, log)

        async with asyncio.TaskGroup() as group:
            for prompt in items:
                group.create_task(one(prompt))
        return failures

    return run


# -- LangGraph ---------------------------------------------------------------------------


class State(TypedDict):
    prompts: list[str]
    failures: Annotated[int, operator.add]


class Item(TypedDict):
    prompt: str


def langgraph_run() -> Runner | None:
    """One ``Send`` per item to a no-op node, or None without LangGraph."""
    try:
        from langgraph.graph import END, START, StateGraph
        from langgraph.types import Send
    except ImportError:
        return None

    async def node(item: Item) -> dict[str, int]:
        try:
            await noop_child(item["prompt"], None)
        except Exception:  # noqa: BLE001 - the same isolation lyra gives
            return {"failures": 1}
        return {"failures": 0}

    def fan_out(state: State) -> list[Any]:
        return [Send("noop", {"prompt": prompt}) for prompt in state["prompts"]]

    graph = StateGraph(State)
    # LangGraph bounds a node's input by protocols that mypy finds no TypedDict meets.
    graph.add_node("noop", node)  # type: ignore[call-overload]
    graph.add_conditional_edges(START, fan_out, ["noop"])
    graph.add_edge("noop", END)
    app = graph.compile()

    async def run(items: list[str], log: BareLog | None) -> int:
        state: State = {"prompts": items, "failures": 0}
        out = await app.ainvoke(state, {"max_concurrency": CONCURRENCY})
        return int(out["failures"])

    return run


# -- timing ---------------------------------------------------------------------------------


def timed(contender: Contender, items: list[str], log: Path) -> tuple[float, float]:
    """CPU and wall seconds of one run over ``items`` in a fresh event loop, its events
    written as the contender writes them; checks the failures."""
    bare = BareLog(log) if contender.events == "bare" else None
    if contender.events == "lyra":
        events.configure(log)  # as the command line writes a run's events
    gc.collect()

    async def body() -> tuple[float, float, int]:
        cpu, wall = time.process_time(), time.perf_counter()
        failures = await contender.run(items, bare)
        if bare is not None:
            bare.file.flush()
        events.flush()
        return time.process_time() - cpu, time.perf_counter() - wall, failures

    try:
        cpu, wall, failures = asyncio.run(body())
    finally:
        events.configure()
        if bare is not None:
            bare.close()
    expected = len(range(0, len(items), FAIL_EVERY))
    if failures != expected:
        raise RuntimeError(f"{failures} failures seen, {expected} expected")
    return cpu, wall


def interleaved(
    contenders: dict[str, Contender], items: list[str], repeats: int, log: Path
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """µs per item of each contender (CPU, wall), runs interleaved."""
    for contender in contenders.values():
        timed(contender, items[: len(items) // 10], log)  # warm-up: imports, caches
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    wall: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, contender in contenders.items():
            spent, elapsed = timed(contender, items, log)
            cpu[name].append(spent / len(items) * 1e6)
            wall[name].append(elapsed / len(items) * 1e6)
    return cpu, wall


def spread(values: list[float]) -> str:
    return f"min {min(values):.1f}, max {max(values):.1f}"


def ratio_row(name: str, lyra: list[float], base: list[float], target: float) -> Row:
    ratio = median(lyra) / median(base)
    note = f"lyra {median(lyra):.1f} µs, floor {median(base):.1f} µs (CPU, medians)"
    return Row("overhead", name, ratio, "×", f"≤ {target:g}×", ratio <= target, note)


RATIOS = (  # (row, lyra contender, floor contender, target)
    ("worker pool: lyra / anyio floor", "lyra pool", "anyio pool", 2.0),
    ("worker pool: lyra / asyncio floor", "lyra pool", "asyncio pool", 3.0),
    ("task per item: lyra / anyio floor", "lyra tasks (anyio harness)", "anyio tasks", 2.0),
    ("task per item: lyra / asyncio floor", "lyra tasks (asyncio harness)", "asyncio tasks", 3.0),
)


def run(size: Size) -> list[Row]:
    n = size.pick(N, QUICK_N, SMOKE_N)
    repeats = size.pick(REPEATS, QUICK_REPEATS, SMOKE_REPEATS)
    items = prompts(n)
    plain = Supervisor(noop_child)
    tree = Supervisor(noop_child, budget=Budget(max_tokens=10**12))
    contenders = {
        "lyra pool": Contender(lyra_pool(plain), "lyra"),
        "anyio pool": Contender(anyio_pool(), "bare"),
        "asyncio pool": Contender(asyncio_pool(), "bare"),
        "lyra tasks (anyio harness)": Contender(lyra_anyio_tasks(plain), "lyra"),
        "anyio tasks": Contender(anyio_tasks(), "bare"),
        "lyra tasks (asyncio harness)": Contender(lyra_asyncio_tasks(plain), "lyra"),
        "asyncio tasks": Contender(asyncio_tasks(), "bare"),
        "lyra pool, events off": Contender(lyra_pool(plain), "off"),
        "lyra pool, budget + idle timeout unused": Contender(
            lyra_pool(tree, idle_timeout=TIMEOUT), "lyra"
        ),
        "lyra Supervisor.run (a recovery loop per task)": Contender(
            lyra_supervisor_run(plain), "lyra"
        ),
        "anyio pool, events off": Contender(anyio_pool(), "off"),
        "asyncio pool, events off": Contender(asyncio_pool(), "off"),
    }
    with tempfile.TemporaryDirectory() as folder:
        cpu, wall = interleaved(contenders, items, repeats, Path(folder) / "events.jsonl")
    print(
        f"{n:,} delegations per run at concurrency {CONCURRENCY}, {n // FAIL_EVERY:,} failing; "
        f"µs per item, median of {repeats} interleaved runs, CPU (min, max) and wall:"
    )
    for name, values in cpu.items():
        cpu_us, wall_us = median(values), median(wall[name])
        print(f"  {name:<48} {cpu_us:8.1f}  ({spread(values)})  wall {wall_us:6.1f}")
    rows = [
        Row("overhead", name, median(values), "µs", note=f"CPU; {spread(values)}")
        for name, values in cpu.items()
    ]
    unused = median(cpu["lyra pool, budget + idle timeout unused"]) - median(cpu["lyra pool"])
    rows.append(Row("overhead", "cost of an unused budget + idle timeout", unused, "µs"))
    ratios = [
        ratio_row(name, cpu[lyra], cpu[floor], target) for name, lyra, floor, target in RATIOS
    ]
    mixed = median(cpu["lyra tasks (anyio harness)"]) / median(cpu["asyncio tasks"])
    ratios.append(  # what a skeptic computes first: anyio's harness and lyra against asyncio
        Row(
            "overhead",
            "task per item: lyra in an anyio harness / asyncio floor",
            mixed,
            "×",
            note="for information: the anyio task group and Semaphore count against lyra",
        )
    )
    ratios += langgraph_rows(size, repeats)
    for row in ratios:
        print(f"{row.metric}: {row.value:.2f}× (target {row.target or 'none'})")
    return rows + ratios


def langgraph_rows(size: Size, repeats: int) -> list[Row]:
    graph = langgraph_run()
    if graph is None:
        print("LangGraph is not installed (pip install -e '.[bench]'): skipped")
        return [
            Row("overhead", "LangGraph / lyra", float("nan"), "×", "≥ 5×", None, "not installed")
        ]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for items_n in size.pick(LANGGRAPH_SIZES, QUICK_LANGGRAPH_SIZES, SMOKE_LANGGRAPH_SIZES):
            items = prompts(items_n)
            contenders = {
                "lyra pool": Contender(lyra_pool(Supervisor(noop_child)), "lyra"),
                "LangGraph": Contender(graph, "off"),
            }
            rounds = max(min(3, repeats), repeats // 2)
            us, _ = interleaved(contenders, items, rounds, Path(folder) / "e.jsonl")
            ratio = median(us["LangGraph"]) / median(us["lyra pool"])
            print(
                f"  {items_n:>6,} items: LangGraph {median(us['LangGraph']):.1f} µs per Send, "
                f"lyra {median(us['lyra pool']):.1f} µs per delegation (CPU)"
            )
            rows.append(
                Row(
                    "overhead",
                    f"LangGraph / lyra at {items_n:,} items",
                    ratio,
                    "×",
                    "≥ 5×",
                    ratio >= 5,
                    f"LangGraph {median(us['LangGraph']):.0f} µs per Send",
                )
            )
    return rows


def profile(n: int = N) -> None:
    """cProfile of lyra's worker pool (events on, as the command line writes them):
    where a delegation's time goes, by function."""
    import cProfile
    import pstats

    pool, items = Contender(lyra_pool(Supervisor(noop_child)), "lyra"), prompts(n)
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "events.jsonl"
        timed(pool, items[: n // 10], log)  # warm-up
        profiler = cProfile.Profile()
        profiler.runcall(timed, pool, items, log)
    print(f"{n:,} delegations, lyra pool, events on; by own time:")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    if "--profile" in sys.argv[1:]:
        profile()
    else:
        standalone(run, __doc__)
