"""A LangGraph agent bare vs inside lyra: what ``LangGraphChild`` costs per run.

The agent: the usual tool-calling graph (a model node, a ``ToolNode``,
``tools_condition`` called from an async edge: LangGraph runs a sync edge in a
worker thread, whose wake-ups on a busy machine would drown what is measured)
on langchain-core's fake chat model made async and scripted: two turns calling
a tool, then the answer, each with its usage (three model calls, two tool
calls, seven graph steps a run). The sides (``_framework`` runs them,
interleaved):

- **bare**: ``graph.ainvoke(...)`` under ``anyio.fail_after`` (the deadline a
  caller would set), the last message's text taken out;
- **bare + hook**: the same with a langchain-core ``AsyncCallbackHandler`` that
  does nothing, configured as lyra's is (inline, chain events ignored):
  callbacks are lyra's only way into a model call inside a compiled graph;
- **lyra**: ``adelegate_task(prompt, child=LangGraphChild(graph), ...)``;
- **plain child**: ``adelegate_task`` around a child that awaits the bare run.
- **floor child**: the least a supervisor does around the same run (``_framework``).
- **floor + hook**: the floor of lyra's child: the floor child around the run with
  a callback handler holding the same limits in the least code (``_framework.FloorMeter``).

Targets: lyra's share (lyra − bare + hook) ≤ 150 µs CPU per run; with a model
taking 20 ms per request, lyra ≤ 1.01× bare in wall time.

    python benchmarks/framework_langgraph.py [--quick | --smoke] [--json FILE]
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Iterator
from typing import Any

import anyio
from _common import Row, Size, standalone
from _framework import FloorMeter, Framework, Sides, measure, text_size

TIMEOUT = 60.0
OUTPUT = 4096  # the output lyra's child holds for a request without max_tokens
MODEL = "scripted-1"  # the scripted model's name, as an integration reports it


def build_graph(latency: float) -> Any:
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
        said = {"model_name": MODEL}  # (as a provider's integration names its model)
        if index % 3 == 2:
            return AIMessage(
                "P04637 has 393 residues.", usage_metadata=usage, response_metadata=said
            )
        call = {"name": "lookup", "args": {"protein": "P04637"}, "id": f"call_{next(ids)}"}
        return AIMessage("", tool_calls=[call], usage_metadata=usage, response_metadata=said)

    class ScriptedChat(GenericFakeChatModel):
        messages: Iterator[Any]

        def _get_ls_params(self, stop: Any = None, **kwargs: Any) -> Any:
            # What every provider's integration gives a callback: its model's name.
            return {**super()._get_ls_params(stop=stop, **kwargs), "ls_model_name": MODEL}

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        async def _agenerate(self, messages: Any, *args: Any, **kwargs: Any) -> ChatResult:
            if latency:
                await asyncio.sleep(latency)
            return ChatResult(generations=[ChatGeneration(message=next(self.messages))])

    @tool
    async def lookup(protein: str) -> str:
        """Look a protein up."""
        return f"{protein}: 393 residues"

    model = ScriptedChat(messages=(turn(i) for i in itertools.count()))

    async def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await model.bind_tools([lookup]).ainvoke(state["messages"], config)]}

    async def route(state: Any) -> str:
        return tools_condition(state)  # async: a sync edge would run in a worker thread

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([lookup]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile()


def build(latency: float) -> Sides:
    from langchain_core.callbacks import AsyncCallbackHandler
    from langchain_core.messages import HumanMessage

    from lyra.children.langgraph import LangGraphChild

    graph = build_graph(latency)

    class Nothing(AsyncCallbackHandler):
        # What lyra's handler skips, skipped (class attributes, as lyra's: LangChain
        # reads them for every event of every node, and a property is a call each time)
        raise_error = True
        run_inline = True
        ignore_chain = ignore_retriever = ignore_retry = ignore_custom_event = True

    async def invoke(prompt: str, config: Any = None) -> str:
        with anyio.fail_after(TIMEOUT):
            state = await graph.ainvoke({"messages": [HumanMessage(prompt)]}, config)
        return str(state["messages"][-1].text)

    async def hooked(prompt: str) -> str:
        return await invoke(prompt, {"callbacks": [Nothing()]})

    class FloorHandler(AsyncCallbackHandler):
        """The floor's hook: :class:`FloorMeter`'s limits in a callback handler, the
        request's size measured as lyra's child measures it (each message's text)."""

        raise_error = True
        run_inline = True
        ignore_chain = ignore_retriever = ignore_retry = ignore_custom_event = True

        def __init__(self, meter: FloorMeter) -> None:
            self.meter, self.tokens = meter, 0

        async def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
            sent = sum(text_size(str(m.content)) for batch in messages for m in batch)
            self.meter.before(sent, OUTPUT)

        async def on_llm_end(self, response: Any, **kwargs: Any) -> None:
            usage = response.generations[0][0].message.usage_metadata or {}
            self.tokens += usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
            self.meter.after(self.tokens)

        async def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
            self.meter.progress()

        async def on_tool_end(self, output: Any, **kwargs: Any) -> None:
            self.meter.progress()

    async def floor_hooked(prompt: str, meter: FloorMeter) -> str:
        return await invoke(prompt, {"callbacks": [FloorHandler(meter)]})

    return Sides(invoke, hooked, LangGraphChild(graph), floor_hooked=floor_hooked)


FRAMEWORK = Framework(
    bench="framework_langgraph",
    build=build,
    prompt="How long is P04637?",
    answer="393 residues",
    per_run="3 model calls, 2 tool calls, 7 graph steps",
    requests=3,
    hook="a do-nothing callback handler",
)


def run(size: Size) -> list[Row]:
    return measure(FRAMEWORK, size)


def main(argv: list[str] | None = None) -> None:
    standalone(run, __doc__, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
