"""Supervisor overhead: what lyra costs per delegation of a child that does nothing,
against baselines of the same shape.

A no-op child (one in ten fails at once: classification and a failure report)
is delegated 10,000 times at concurrency 100, with JSON events written to a file
exactly as the command line configures them. Each lyra contender is timed
against a bare anyio fan-out of the *same shape*, doing the least a supervisor
under deadlines must: call the child under a per-item deadline
(``anyio.move_on_after``) and survive its exception.

- **worker pool vs worker pool**: ``LocalExecutor().map`` over
  ``Supervisor.delegate`` against a bare pool of as many anyio workers pulling
  from the same iterator.
- **task per item vs task per item**: one task per item behind an
  ``anyio.Semaphore`` of the same size, calling ``Supervisor.delegate`` or the
  bare child.
- **LangGraph**: the same fan-out as one ``Send`` per item to a no-op node,
  ``max_concurrency`` 100, at 1,000, 5,000 and 10,000 items, against lyra's
  pool on the same items (LangGraph's cost per ``Send`` grows with the fan-out).

For information: lyra with events off, with an unused budget and idle timeout
(the delegation tree's cost when nothing runs out), the bare pool without a
deadline, and ``Supervisor.run`` (a recovery loop per task). Runs are
interleaved (lyra, bare, lyra, bare, …) in one process so that load from
other processes hits every side alike; medians are compared, min and max shown.

Targets (DESIGN §9): lyra ≤ 2.0× the same-shape bare anyio fan-out; LangGraph
≥ 5× lyra's cost at 1k, 5k and 10k items.

    python benchmarks/overhead.py [--quick]
    python benchmarks/overhead.py --profile   # where lyra's time goes, by function
"""

from __future__ import annotations

import asyncio
import operator
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
from _common import Row, median, standalone

from lyra import Budget, ChildContext, Supervisor, Task, events
from lyra.errors import TransientError
from lyra.supervisor import LocalExecutor

N, QUICK_N = 10_000, 1_000
CONCURRENCY = 100
FAIL_EVERY = 10
REPEATS, QUICK_REPEATS = 7, 3
LANGGRAPH_SIZES, QUICK_LANGGRAPH_SIZES = (1_000, 5_000, 10_000), (1_000,)
TIMEOUT = 60.0

Runner = Callable[[list[str]], Awaitable[int]]


async def noop_child(prompt: str, ctx: ChildContext | None) -> str:
    """Returns at once, or fails at once for one item in ten."""
    if prompt[-1] == "!":
        raise TransientError("HTTP 503 from the tool", status=503)
    return "ok"


def prompts(n: int) -> list[str]:
    return [f"task {i}!" if i % FAIL_EVERY == 0 else f"task {i}" for i in range(n)]


# -- lyra ------------------------------------------------------------------------------


def lyra_pool(supervisor: Supervisor, **limits: Any) -> Runner:
    async def run(items: list[str]) -> int:
        async def work(prompt: str) -> Any:
            return await supervisor.delegate(prompt, timeout=TIMEOUT, **limits)

        results = await LocalExecutor().map(
            work, items, max_concurrency=CONCURRENCY, on_error=lambda item, exc: None
        )
        return sum(1 for r in results if r is None or r.failure is not None)

    return run


def lyra_tasks(supervisor: Supervisor) -> Runner:
    async def run(items: list[str]) -> int:
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


def lyra_supervisor_run(supervisor: Supervisor) -> Runner:
    async def run(items: list[str]) -> int:
        outcomes = await supervisor.run(
            [Task(prompt=p) for p in items], max_concurrency=CONCURRENCY
        )
        return sum(1 for o in outcomes if not o.result.ok)

    return run


# -- bare anyio, the same shapes ----------------------------------------------------------


async def _call(prompt: str, deadline: bool) -> bool:
    """The child under a deadline (or not); True when it failed."""
    try:
        if deadline:
            with anyio.move_on_after(TIMEOUT):
                await noop_child(prompt, None)
        else:
            await noop_child(prompt, None)
    except Exception:  # noqa: BLE001 - the same isolation lyra gives
        return True
    return False


def bare_pool(*, deadline: bool = True) -> Runner:
    async def run(items: list[str]) -> int:
        pending, failures = iter(items), 0

        async def worker() -> None:
            nonlocal failures
            for prompt in pending:
                failures += await _call(prompt, deadline)

        async with anyio.create_task_group() as group:
            for _ in range(min(CONCURRENCY, len(items))):
                group.start_soon(worker)
        return failures

    return run


def bare_tasks() -> Runner:
    async def run(items: list[str]) -> int:
        gate, failures = anyio.Semaphore(CONCURRENCY), 0

        async def one(prompt: str) -> None:
            nonlocal failures
            async with gate:
                failures += await _call(prompt, True)

        async with anyio.create_task_group() as group:
            for prompt in items:
                group.start_soon(one, prompt)
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
    graph.add_node("noop", node)
    graph.add_conditional_edges(START, fan_out, ["noop"])
    graph.add_edge("noop", END)
    app = graph.compile()

    async def run(items: list[str]) -> int:
        state = {"prompts": items, "failures": 0}
        out = await app.ainvoke(state, {"max_concurrency": CONCURRENCY})
        return int(out["failures"])

    return run


# -- timing ---------------------------------------------------------------------------------


def timed(run: Runner, items: list[str]) -> float:
    """Seconds for one run over ``items`` in a fresh event loop; checks the failures."""

    async def body() -> tuple[float, int]:
        started = time.perf_counter()
        failures = await run(items)
        return time.perf_counter() - started, failures

    elapsed, failures = asyncio.run(body())
    expected = len(range(0, len(items), FAIL_EVERY))
    if failures != expected:
        raise RuntimeError(f"{failures} failures seen, {expected} expected")
    return elapsed


def interleaved(
    contenders: dict[str, Runner], items: list[str], repeats: int, log: Path
) -> dict[str, list[float]]:
    """µs per item of each contender, runs interleaved; events on unless 'events off'."""
    for run in contenders.values():
        timed(run, items[: len(items) // 10])  # warm-up: imports, templates, caches
    us: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, run in contenders.items():
            if "events off" in name:
                events.configure()
            else:
                events.configure(log)  # as the command line writes a run's events
            us[name].append(timed(run, items) / len(items) * 1e6)
    events.configure()
    return us


def spread(values: list[float]) -> str:
    return f"min {min(values):.1f}, max {max(values):.1f}"


def ratio_row(
    name: str, lyra: list[float], base: list[float], target: float, note: str = ""
) -> Row:
    ratio = median(lyra) / median(base)
    return Row("overhead", name, ratio, "×", f"≤ {target:g}×", ratio <= target, note)


def run(quick: bool) -> list[Row]:
    n = QUICK_N if quick else N
    repeats = QUICK_REPEATS if quick else REPEATS
    items = prompts(n)
    plain = Supervisor(noop_child)
    tree = Supervisor(noop_child, budget=Budget(max_tokens=10**12))
    contenders: dict[str, Runner] = {
        "lyra pool": lyra_pool(plain),
        "bare pool": bare_pool(),
        "lyra tasks": lyra_tasks(plain),
        "bare tasks": bare_tasks(),
        "lyra pool, events off": lyra_pool(plain),
        "lyra pool, budget + idle timeout unused": lyra_pool(tree, idle_timeout=TIMEOUT),
        "bare pool, no deadline": bare_pool(deadline=False),
        "lyra Supervisor.run (a recovery loop per task)": lyra_supervisor_run(plain),
    }
    with tempfile.TemporaryDirectory() as folder:
        us = interleaved(contenders, items, repeats, Path(folder) / "events.jsonl")
    print(
        f"{n:,} delegations per run at concurrency {CONCURRENCY}, {n // FAIL_EVERY:,} failing; "
        f"µs per item, median of {repeats} interleaved runs (min, max):"
    )
    for name, values in us.items():
        print(f"  {name:<48} {median(values):8.1f}  ({spread(values)})")
    rows = [
        Row("overhead", name, median(values), "µs", note=spread(values))
        for name, values in us.items()
    ]
    unused = median(us["lyra pool, budget + idle timeout unused"]) - median(us["lyra pool"])
    rows.append(Row("overhead", "cost of an unused budget + idle timeout", unused, "µs"))
    rows.append(
        ratio_row("lyra / bare, worker pool vs worker pool", us["lyra pool"], us["bare pool"], 2.0)
    )
    rows.append(
        ratio_row(
            "lyra / bare, task per item vs task per item", us["lyra tasks"], us["bare tasks"], 2.0
        )
    )
    rows += langgraph_rows(quick, repeats)
    for row in rows[-6:]:
        if row.unit == "×":
            print(f"{row.metric}: {row.value:.2f}× (target {row.target})")
    return rows


def langgraph_rows(quick: bool, repeats: int) -> list[Row]:
    graph = langgraph_run()
    if graph is None:
        print("LangGraph is not installed (pip install -e '.[bench]'): skipped")
        return [
            Row("overhead", "LangGraph / lyra", float("nan"), "×", "≥ 5×", None, "not installed")
        ]
    rows = []
    sizes = QUICK_LANGGRAPH_SIZES if quick else LANGGRAPH_SIZES
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            items = prompts(size)
            contenders = {"lyra pool": lyra_pool(Supervisor(noop_child)), "LangGraph": graph}
            us = interleaved(contenders, items, max(3, repeats // 2), Path(folder) / "e.jsonl")
            ratio = median(us["LangGraph"]) / median(us["lyra pool"])
            print(
                f"  {size:>6,} items: LangGraph {median(us['LangGraph']):.1f} µs per Send, "
                f"lyra {median(us['lyra pool']):.1f} µs per delegation"
            )
            rows.append(
                Row(
                    "overhead",
                    f"LangGraph / lyra at {size:,} items",
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

    run_pool, items = lyra_pool(Supervisor(noop_child)), prompts(n)
    with tempfile.TemporaryDirectory() as folder:
        events.configure(Path(folder) / "events.jsonl")
        timed(run_pool, items[: n // 10])  # warm-up
        profiler = cProfile.Profile()
        profiler.runcall(timed, run_pool, items)
        events.configure()
    print(f"{n:,} delegations, lyra pool, events on; by own time:")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    if "--profile" in sys.argv[1:]:
        profile()
    else:
        standalone(run, __doc__)
