"""Supervisor overhead: what lyra costs per delegation of a child that does nothing.

10,000 delegations of a no-op child through the full path
(``Supervisor(child).delegate`` under ``LocalExecutor().map`` at
``max_concurrency=100``, structlog writing JSON events to a temporary file as
the CLI configures it, and a failure report rendered for the 10% of children
that fail), against the same no-op run by a bare anyio task group behind a
CapacityLimiter of the same size (and, for information, by a bare pool of
anyio workers, the shape ``LocalExecutor`` has; and by lyra with events
off, to price the events), and against the same fan-out in LangGraph
(one ``Send`` per item to a no-op node, ``max_concurrency`` in the run
config). Repetitions are interleaved (lyra, bare, lyra, bare, …) so that load
from other processes hits all sides alike; the medians are compared.

Target (DESIGN §9): lyra ≤ 2.5× bare anyio, and ≥ 5× cheaper than LangGraph.

    python benchmarks/overhead.py [--quick] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import operator
import pstats
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
from _common import Row, events_to, median, standalone

from lyra import ChildContext, Supervisor
from lyra.errors import TransientError
from lyra.supervisor import LocalExecutor

N = 10_000
QUICK_N = 1_000
CONCURRENCY = 100
FAIL_EVERY = 10  # one child in ten fails: classification + a rendered failure report
REPEATS = 5
QUICK_REPEATS = 3


async def noop_child(prompt: str, ctx: ChildContext | None) -> str:
    """The no-op child: returns at once, or fails at once for one item in ten."""
    if prompt[-1] == "!":
        raise TransientError("HTTP 503 from the tool", status=503)
    return "ok"


def prompts(n: int) -> list[str]:
    return [f"task {i}!" if i % FAIL_EVERY == 0 else f"task {i}" for i in range(n)]


# -- the three contenders ---------------------------------------------------------


async def run_lyra(items: list[str]) -> int:
    """Full path: Supervisor.delegate under LocalExecutor.map; returns the failures seen."""
    supervisor = Supervisor(noop_child)

    async def work(prompt: str) -> Any:
        return await supervisor.delegate(prompt, timeout=60.0)

    results = await LocalExecutor().map(
        work, items, max_concurrency=CONCURRENCY, on_error=lambda item, exc: None
    )
    return sum(1 for result in results if result is None or result.failure is not None)


async def run_bare(items: list[str]) -> int:
    """A bare anyio task group, one task per item behind a CapacityLimiter."""
    limiter = anyio.CapacityLimiter(CONCURRENCY)
    failures = 0

    async def one(prompt: str) -> None:
        nonlocal failures
        async with limiter:
            try:
                await noop_child(prompt, None)
            except Exception:  # noqa: BLE001 - the same isolation lyra gives
                failures += 1

    async with anyio.create_task_group() as group:
        for prompt in items:
            group.start_soon(one, prompt)
    return failures


class State(TypedDict):
    """The LangGraph state: the items, and a failure count summed over nodes."""

    prompts: list[str]
    failures: Annotated[int, operator.add]


class Item(TypedDict):
    """What one ``Send`` carries."""

    prompt: str


async def run_bare_pool(items: list[str]) -> int:
    """A bare anyio worker pool, the shape LocalExecutor uses (no task per item)."""
    failures = 0
    pending = iter(items)

    async def worker() -> None:
        nonlocal failures
        for prompt in pending:
            try:
                await noop_child(prompt, None)
            except Exception:  # noqa: BLE001 - the same isolation lyra gives
                failures += 1

    async with anyio.create_task_group() as group:
        for _ in range(min(CONCURRENCY, len(items))):
            group.start_soon(worker)
    return failures


def langgraph_app() -> Any | None:
    """A graph that fans out one ``Send`` per item to a no-op node, or None without LangGraph."""
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
    return graph.compile()


def make_run_langgraph(app: Any, batch: int | None = None) -> Callable[[list[str]], Any]:
    """All items in one invocation (``batch=None``), or in invocations of ``batch`` items."""

    async def run(items: list[str]) -> int:
        config = {"max_concurrency": CONCURRENCY}
        size = batch or len(items)
        failures = 0
        for start in range(0, len(items), size):
            state = {"prompts": items[start : start + size], "failures": 0}
            out = await app.ainvoke(state, config)
            failures += out["failures"]
        return failures

    return run


def timed(fn: Callable[[list[str]], Coroutine[Any, Any, int]], items: list[str]) -> float:
    """Seconds for one run of ``fn`` over ``items`` in a fresh event loop (asyncio)."""

    async def body() -> tuple[float, int]:
        started = time.perf_counter()
        failures = await fn(items)
        return time.perf_counter() - started, failures

    elapsed, failures = asyncio.run(body())
    expected = len(range(0, len(items), FAIL_EVERY))
    if failures != expected:
        raise RuntimeError(f"{fn.__name__}: {failures} failures, expected {expected}")
    return elapsed


# -- the benchmark -------------------------------------------------------------------


def run(quick: bool) -> list[Row]:
    from lyra import events

    n = QUICK_N if quick else N
    repeats = QUICK_REPEATS if quick else REPEATS
    items = prompts(n)
    app = langgraph_app()
    contenders: dict[str, Callable[[list[str]], Coroutine[Any, Any, int]]] = {
        "lyra": run_lyra,
        "lyra, events off": run_lyra,
        "bare anyio": run_bare,
        "bare anyio pool": run_bare_pool,
    }
    seconds: dict[str, list[float]] = {name: [] for name in contenders}
    with tempfile.TemporaryDirectory() as folder:
        log_path = Path(folder) / "events.jsonl"
        with events_to(log_path):
            for fn in (run_lyra, run_bare, run_bare_pool):
                timed(fn, items[: n // 10])  # warm-up: imports, template, caches
            for _ in range(repeats):  # interleaved, so that outside load hits all alike
                for name, fn in contenders.items():
                    if name == "lyra, events off":
                        events.configure()
                    else:
                        events.configure(log_path)
                    seconds[name].append(timed(fn, items))
        events = sum(1 for _ in log_path.open(encoding="utf-8"))
    us = {name: median(values) / n * 1e6 for name, values in seconds.items()}
    lyra_us, bare_us = us["lyra"], us["bare anyio"]
    print(
        f"delegations: {n:,} per run at max_concurrency={CONCURRENCY}, "
        f"{n // FAIL_EVERY:,} failing; median of {repeats} interleaved runs"
    )
    print(
        f"events written: {events:,} JSON lines "
        f"({events / (n * repeats + n // 10):.2f} per delegation with events on)"
    )
    labels = {
        "lyra": "lyra (events on)      µs per delegation",
        "lyra, events off": "lyra (events off)     µs per delegation",
        "bare anyio": "bare anyio (limiter)  µs per task",
        "bare anyio pool": "bare anyio (pool)     µs per task",
    }
    for name, label in labels.items():
        print(f"{us[name]:8.1f} {label}  (runs: {_runs(seconds[name], n)})")
    ratio = lyra_us / bare_us
    rows = [
        Row("overhead", "lyra per delegation (events on)", lyra_us, "µs"),
        Row("overhead", "lyra per delegation (events off)", us["lyra, events off"], "µs"),
        Row("overhead", "bare anyio per task (task group + limiter)", bare_us, "µs"),
        Row("overhead", "bare anyio per task (worker pool)", us["bare anyio pool"], "µs"),
        Row(
            "overhead",
            "lyra / bare anyio worker pool",
            lyra_us / us["bare anyio pool"],
            "×",
            note="informative: lyra's own work per delegation",
        ),
    ]
    lg_ratio_row: Row
    if app is None:
        print("LangGraph: not installed (pip install -e '.[bench]'); column skipped")
        lg_ratio_row = Row(
            "overhead",
            "LangGraph / lyra",
            float("nan"),
            "×",
            "≥ 5×",
            None,
            "LangGraph not installed",
        )
    else:
        whole = make_run_langgraph(app)
        batched = make_run_langgraph(app, batch=1_000)
        timed(whole, items[: n // 10])  # warm-up
        lg_us = timed(whole, items) / n * 1e6  # one run: LangGraph is slow here
        lg_batched_us = lg_us if n <= 1_000 else timed(batched, items) / n * 1e6
        print(f"{lg_us:8.1f} LangGraph             µs per Send ({n:,} Sends in one invocation)")
        print(
            f"{lg_batched_us:8.1f} LangGraph             µs per Send "
            f"(the same items, 1,000 Sends per invocation)"
        )
        rows += [
            Row("overhead", f"LangGraph per Send ({n:,} in one superstep)", lg_us, "µs"),
            Row("overhead", "LangGraph per Send (batches of 1,000)", lg_batched_us, "µs"),
            Row(
                "overhead",
                "LangGraph (batches of 1,000) / lyra",
                lg_batched_us / lyra_us,
                "×",
                "≥ 5×",
                lg_batched_us / lyra_us >= 5,
                "LangGraph's best case",
            ),
        ]
        lg_ratio_row = Row(
            "overhead",
            "LangGraph / lyra",
            lg_us / lyra_us,
            "×",
            "≥ 5×",
            lg_us / lyra_us >= 5,
            "same fan-out",
        )
        print(f"ratio LangGraph (1,000-Send batches) / lyra = {lg_batched_us / lyra_us:.2f}×")
        print(f"ratio LangGraph / lyra = {lg_us / lyra_us:.2f}× (target ≥ 5×)")
    rows += [lg_ratio_row, Row("overhead", "lyra / bare anyio", ratio, "×", "≤ 2.5×", ratio <= 2.5)]
    print(f"ratio lyra / bare anyio = {ratio:.2f}× (target ≤ 2.5×)")
    return rows


def _runs(seconds: list[float], n: int) -> str:
    return ", ".join(f"{s / n * 1e6:.0f}" for s in seconds)


def profile(quick: bool, top: int = 20) -> None:
    """cProfile the lyra side only; print the top costs and a per-delegation breakdown."""
    n = QUICK_N if quick else N
    items = prompts(n)
    with tempfile.TemporaryDirectory() as folder, events_to(Path(folder) / "events.jsonl"):
        timed(run_lyra, items[:500])
        profiler = cProfile.Profile()
        profiler.enable()
        timed(run_lyra, items)
        profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    print(f"--- {n:,} delegations under cProfile, top {top} by own time ---")
    print(out.getvalue().split("\n\n", 1)[-1].rstrip())
    rows = breakdown(stats, n)
    whole = max(micros for _, micros in rows)
    print(
        "--- where the time of one delegation goes (µs under cProfile, which inflates "
        "every call; share of Supervisor.delegate) ---"
    )
    for name, micros in rows:
        print(f"{micros:8.1f} µs {micros / whole:6.1%}  {name}")


def breakdown(stats: pstats.Stats, n: int) -> list[tuple[str, float]]:
    """Cumulative time of each callee of lyra's hot functions, per delegation."""
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    parents = {
        key
        for key in table
        if key[0].endswith(("delegation/_delegate.py", "supervisor/_supervisor.py"))
        and key[2] in ("run_attempt", "_run", "_result", "_failure", "delegate")
    }
    rows = []
    for key, (_cc, _nc, _tt, _ct, callers) in table.items():
        for parent in parents & callers.keys():
            cumulative = callers[parent][3]
            where = f"{_short(parent)} → {_short(key)}"
            rows.append((where, cumulative / n * 1e6))
    for parent in parents:
        rows.append((f"{_short(parent)} (own time)", table[parent][2] / n * 1e6))
    return sorted(rows, key=lambda row: -row[1])[:25]


def _short(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    if "/src/lyra/" in filename:
        filename = "src/lyra/" + filename.split("/src/lyra/", 1)[1]
    elif "site-packages/" in filename:
        filename = filename.split("site-packages/", 1)[1]
    elif filename.startswith("~"):
        return name
    else:
        filename = Path(filename).name
    return f"{name} ({filename}:{line})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--profile", action="store_true")
    known, rest = parser.parse_known_args(argv)
    if known.profile:
        profile("--quick" in rest)
        return
    standalone(run, __doc__, rest)


if __name__ == "__main__":
    main(sys.argv[1:])
