"""A LangGraph agent under lyra: a budget and an idle timeout that hold inside the
graph's run, and a retry that picks the work up where it stopped.

The agent is the usual LangGraph tool-calling graph (a model node, a
``ToolNode``, ``tools_condition``), driven by langchain-core's fake chat model
with a scripted conversation (a real application passes ``ChatAnthropic`` or
any chat model; nothing else changes). Three runs:

1. A runaway agent that never stops calling its tool, under
   ``Budget(max_tokens=1_000)``: lyra charges each model response as it
   arrives and stops the graph at the one that crosses the limit
   (``timeout`` / ``budget``, the spend in the report).
2. A tool that hangs, under ``idle_timeout=0.3``: no progress, so lyra ends
   the run (``timeout`` / ``idle``) long before its 30 s deadline.
3. The connection to the model drops after the agent looked a protein up
   (``partial``); ``adelegate_with_retry`` sends a continuation, and the
   second attempt's model request carries the first attempt's messages, so
   the lookup is not done again.

The script prints what happened and exits 0 when every run behaved.

Run: ``python examples/langgraph_agent.py [-v]`` (``-v`` shows lyra's events).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
from collections.abc import Iterator
from typing import Any

import anyio
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field

from lyra import Budget, adelegate_task, adelegate_with_retry, events, parse_report
from lyra.children.langgraph import LangGraphChild
from lyra.recovery import RecoveryPolicy

_ids = itertools.count(1)


class ScriptedChat(GenericFakeChatModel):
    """langchain-core's fake chat model, async, answering a scripted conversation."""

    messages: Iterator[Any]
    model: str = "claude-sonnet-5"
    requests: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:  # type: ignore[override]
        return self

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.requests.append(list(messages))
        turn = next(self.messages)
        if isinstance(turn, BaseException):
            raise turn
        return ChatResult(generations=[ChatGeneration(message=turn)])


def lookup_call(name: str = "lookup") -> AIMessage:
    """A model turn asking for a lookup tool (300 tokens in, 50 out)."""
    call = {"name": name, "args": {"protein": "P04637"}, "id": f"call_{next(_ids)}"}
    usage = {"input_tokens": 300, "output_tokens": 50, "total_tokens": 350}
    return AIMessage("", tool_calls=[call], usage_metadata=usage)  # type: ignore[arg-type]


def answer(text: str) -> AIMessage:
    return AIMessage(
        text, usage_metadata={"input_tokens": 400, "output_tokens": 30, "total_tokens": 430}
    )


@tool
async def lookup(protein: str) -> str:
    """Look a protein up."""
    return f"{protein}: cellular tumor antigen p53, 393 residues"


@tool
async def slow_lookup(protein: str) -> str:
    """Look a protein up in a database that has stopped answering."""
    await asyncio.sleep(3600)
    return "never"


def agent(model: ScriptedChat, tools: list[Any]) -> Any:
    """The usual LangGraph tool-calling graph, compiled."""

    async def call_model(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await model.bind_tools(tools).ainvoke(state["messages"], config)]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def runaway() -> Iterator[AIMessage]:
    while True:
        yield lookup_call()


async def main_async() -> bool:
    ok = True

    # 1. A runaway agent under a token budget.
    model = ScriptedChat(messages=runaway())
    report = parse_report(
        await adelegate_task(
            "How long is P04637?",
            child=LangGraphChild(agent(model, [lookup])),
            timeout=30,
            idle_timeout=5,
            budget=Budget(max_tokens=1_000),
        )
    )
    print(f"runaway: {report.category}/{report.error_type}, {report.tokens_used} tokens used")
    print(f"  {len(model.requests)} model requests; {report.message}")
    ok = ok and report.error_type == "budget" and (report.tokens_used or 0) <= 1_000 + 350

    # 2. A stuck tool under an idle timeout.
    model = ScriptedChat(messages=iter([lookup_call("slow_lookup")]))
    started = anyio.current_time()
    report = parse_report(
        await adelegate_task(
            "How long is P04637?",
            child=LangGraphChild(agent(model, [slow_lookup])),
            timeout=30,
            idle_timeout=0.3,
        )
    )
    took = anyio.current_time() - started
    print(f"stuck tool: {report.category}/{report.error_type} after {took:.1f}s")
    ok = ok and report.error_type == "idle" and took < 5

    # 3. A dropped connection, then a continuation that keeps the work done.
    model = ScriptedChat(
        messages=iter(
            [lookup_call(), ConnectionError("connection reset"), answer("P04637 is p53.")]
        )
    )
    final = parse_report(
        await adelegate_with_retry(
            "How long is P04637?",
            child=LangGraphChild(agent(model, [lookup])),
            base_timeout=30,
            policy=RecoveryPolicy(max_retries=2),
        )
    )
    resumed = [type(m).__name__ for m in model.requests[-1]]
    print(f"continuation: status={final.status} attempt={final.attempt}")
    print(f"  second attempt's model request: {', '.join(resumed)}")
    return (
        ok
        and final.status == "completed"
        and resumed[:3]
        == [
            "HumanMessage",
            "AIMessage",
            "ToolMessage",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print lyra's events")
    args = parser.parse_args(argv)
    if args.verbose:  # lyra writes nothing until told where its events go
        events.configure(sys.stderr)
    ok = anyio.run(main_async)
    print("OK: the budget and the idle timeout held inside the graph" if ok else "UNEXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
