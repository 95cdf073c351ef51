"""A LangGraph agent inside lyra against the same agent bare: what ``LangGraphChild``
costs per run.

The agent is the usual tool-calling graph (a model node, a ``ToolNode``,
``tools_condition`` called from an async edge: LangGraph runs a sync edge in a
worker thread, whose wake-ups on a busy machine would drown what is measured),
on langchain-core's fake chat model made async and scripted: two turns calling
a tool, then an answer, each with its usage, so a run is three model calls,
two tool calls and seven graph steps, and no time is spent waiting. Two sides,
the same compiled graph, the same script:

- **bare**: ``graph.ainvoke(...)`` under ``anyio.fail_after`` (the deadline a
  caller would set), the last message's text taken out;
- **lyra**: ``adelegate_task(prompt, child=LangGraphChild(graph), timeout=...,
  idle_timeout=..., budget=...)`` with lyra's events written to a file as the
  command line writes them: every response charged, every tool call progress,
  the report rendered.

For information, two more sides. **bare + a callback**: the bare run with a
langchain-core ``AsyncCallbackHandler`` that does nothing, configured as
lyra's is (inline, chain events ignored). It is what langchain-core and
LangGraph charge any run for being observed through callbacks, lyra's way
into the run (a turn charged before each model request needs that hook).
**plain child**: ``adelegate_task`` (same limits, same events) around a child
that only awaits ``graph.ainvoke``: the delegation's own cost around the run,
without any hook inside it.

Runs go one after another (a run is milliseconds of CPU work: concurrency
would only add the event loop's noise); rounds are interleaved (lyra, bare,
bare + a callback, …) so load from other processes hits every side alike, and
the medians of the rounds are compared (min and max shown), in wall time and
in CPU time of the process (steadier on a busy machine).

Target (DESIGN §9): lyra ≤ 1.02× bare (wall time).

    python benchmarks/framework_langgraph.py [--quick | --smoke] [--json FILE]
"""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
from _common import Row, Size, median, standalone

from lyra import Budget, adelegate_task, events

RUNS, QUICK_RUNS, SMOKE_RUNS = 300, 15, 2
ROUNDS, QUICK_ROUNDS, SMOKE_ROUNDS = 9, 3, 1
TIMEOUT, IDLE_TIMEOUT = 60.0, 30.0
PROMPT = "How long is P04637?"
BENCH = "framework_langgraph"

Runner = Callable[[], Awaitable[str]]


def build() -> Any:
    """The compiled agent graph on its scripted fake model (imports LangGraph)."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    ids = itertools.count()

    def turn(index: int) -> AIMessage:
        usage = {"input_tokens": 300, "output_tokens": 40, "total_tokens": 340}
        if index % 3 == 2:
            return AIMessage("P04637 has 393 residues.", usage_metadata=usage)
        call = {"name": "lookup", "args": {"protein": "P04637"}, "id": f"call_{next(ids)}"}
        return AIMessage("", tool_calls=[call], usage_metadata=usage)

    class ScriptedChat(GenericFakeChatModel):
        messages: Iterator[Any]

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        async def _agenerate(self, messages: Any, *args: Any, **kwargs: Any) -> ChatResult:
            return ChatResult(generations=[ChatGeneration(message=next(self.messages))])

    @tool
    async def lookup(protein: str) -> str:
        """Look a protein up."""
        return f"{protein}: 393 residues"

    model = ScriptedChat(messages=(turn(i) for i in itertools.count()))

    async def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await model.bind_tools([lookup]).ainvoke(state["messages"], config)]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([lookup]))
    graph.add_edge(START, "agent")

    async def route(state: Any) -> str:
        return tools_condition(state)  # async: a sync edge would run in a worker thread

    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile()


def bare(graph: Any) -> Runner:
    from langchain_core.messages import HumanMessage

    async def run() -> str:
        with anyio.fail_after(TIMEOUT):
            state = await graph.ainvoke({"messages": [HumanMessage(PROMPT)]})
        return str(state["messages"][-1].text)

    return run


def observed(graph: Any) -> Runner:
    """The bare run with a callback handler that does nothing (configured as lyra's)."""
    from langchain_core.callbacks import AsyncCallbackHandler
    from langchain_core.messages import HumanMessage

    class Nothing(AsyncCallbackHandler):
        raise_error = True
        run_inline = True

        @property
        def ignore_chain(self) -> bool:
            return True

    async def run() -> str:
        config: Any = {"callbacks": [Nothing()]}
        with anyio.fail_after(TIMEOUT):
            state = await graph.ainvoke({"messages": [HumanMessage(PROMPT)]}, config)
        return str(state["messages"][-1].text)

    return run


def inside_lyra(graph: Any) -> Runner:
    from lyra.children.langgraph import LangGraphChild

    child = LangGraphChild(graph)
    budget = Budget(max_tokens=10**12, max_turns=10**9)

    async def run() -> str:
        return await adelegate_task(
            PROMPT, child=child, timeout=TIMEOUT, idle_timeout=IDLE_TIMEOUT, budget=budget
        )

    return run


def plain_child(graph: Any) -> Runner:
    """lyra around the bare run: a child that only awaits ``graph.ainvoke``."""
    from langchain_core.messages import HumanMessage

    async def child(prompt: str, ctx: Any) -> str:
        state = await graph.ainvoke({"messages": [HumanMessage(prompt)]})
        return str(state["messages"][-1].text)

    budget = Budget(max_tokens=10**12, max_turns=10**9)

    async def run() -> str:
        return await adelegate_task(
            PROMPT, child=child, timeout=TIMEOUT, idle_timeout=IDLE_TIMEOUT, budget=budget
        )

    return run


def timed(run: Runner, runs: int) -> tuple[float, float]:
    """Wall and CPU µs per run, ``runs`` runs one after another in a fresh event loop."""

    async def body() -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(runs):
            out = await run()
            if "393 residues" not in out:
                raise RuntimeError(f"unexpected output: {out[:200]!r}")
        return time.perf_counter() - wall, time.process_time() - cpu

    wall, cpu = anyio.run(body)
    return wall / runs * 1e6, cpu / runs * 1e6


def run(size: Size) -> list[Row]:
    runs = size.pick(RUNS, QUICK_RUNS, SMOKE_RUNS)
    rounds = size.pick(ROUNDS, QUICK_ROUNDS, SMOKE_ROUNDS)
    graph = build()
    sides = {
        "lyra": inside_lyra(graph),
        "bare": bare(graph),
        "bare + a callback": observed(graph),
        "plain child": plain_child(graph),
    }
    wall: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as folder:
        events.configure(Path(folder) / "events.jsonl")  # as the command line writes them
        try:
            for side in sides.values():
                timed(side, max(5, runs // 10))  # warm-up: imports, templates, caches
            for _ in range(rounds):
                for name, side in sides.items():
                    us_wall, us_cpu = timed(side, runs)
                    wall[name].append(us_wall)
                    cpu[name].append(us_cpu)
        finally:
            events.configure()
    print(
        f"{runs} runs per round (3 model calls, 2 tool calls each), {rounds} interleaved "
        "rounds; µs per run, median (min, max):"
    )
    rows: list[Row] = []
    for clock, us in (("wall", wall), ("CPU", cpu)):
        for name, values in us.items():
            spread = f"min {min(values):.0f}, max {max(values):.0f}"
            print(f"  {clock:<4} {name:<18} {median(values):9.0f}  ({spread})")
            metric = f"{name}, {clock} µs per run"
            rows.append(Row(BENCH, metric, median(values), "µs", note=spread))
    ratio = median(wall["lyra"]) / median(wall["bare"])
    cpu_ratio = median(cpu["lyra"]) / median(cpu["bare"])
    hook = median(cpu["bare + a callback"]) / median(cpu["bare"])
    over_hook = median(cpu["lyra"]) / median(cpu["bare + a callback"])
    extra = median(cpu["lyra"]) - median(cpu["bare"])
    plain = median(cpu["plain child"]) / median(cpu["bare"])
    print(f"lyra / bare + a callback, CPU: {over_hook:.3f}×; a callback alone: {hook:.3f}×")
    print(f"lyra costs {extra:.0f} µs of CPU per run; lyra / bare, CPU: {cpu_ratio:.3f}×")
    print(f"lyra / bare, wall: {ratio:.3f}× (target ≤ 1.02×)")
    rows += [
        Row(BENCH, "lyra / bare + a callback, CPU", over_hook, "×"),
        Row(BENCH, "bare + a callback / bare, CPU", hook, "×"),
        Row(BENCH, "plain child / bare, CPU", plain, "×", note="lyra around the run, no hook"),
        Row(BENCH, "lyra / bare, CPU", cpu_ratio, "×", note=f"{extra:.0f} µs per run"),
        Row(BENCH, "lyra / bare", ratio, "×", "≤ 1.02×", ratio <= 1.02, "wall time"),
    ]
    return rows


if __name__ == "__main__":
    standalone(run, __doc__)
