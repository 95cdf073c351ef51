"""langchain-core's fake chat model, scripted for LangGraph tests, and the graph they drive.

:class:`ScriptedModel` is langchain-core's ``GenericFakeChatModel`` made async
(so a cancelled run leaves no worker thread behind), able to bind tools, and
scripted turn by turn; each turn is one of:

- an ``AIMessage`` (see :func:`reply`: text, tool calls, ``usage_metadata``),
  answered as it is (a copy, so ids never repeat);
- an exception, raised from the model call;
- :data:`ASK_API`: the turn is asked of the local fake Messages API
  (``ScriptedModel(api=...)``, which scripts its replies) with the real
  ``anthropic`` SDK, so provider errors (429 with ``retry-after``, 529, 401,
  5xx) are the SDK's own, raised unwrapped as a LangChain chat model raises
  them; a 200 answer becomes an ``AIMessage``;
- a number: wait that many seconds first (cancellable), then the next entry.

Every request's messages are recorded in :attr:`ScriptedModel.requests`.
:func:`react_graph` builds the agent a user would: a ``StateGraph`` over
``MessagesState`` with the model node, a ``ToolNode`` and ``tools_condition``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import anthropic
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field

from fakes.messages_api import MessagesAPI

_ids = itertools.count(1)

ASK_API = "ask the local Messages API"
"""A turn that the local fake Messages API answers (through the real SDK)."""


def reply(
    text: str = "",
    *calls: tuple[str, dict[str, Any]],
    tokens: tuple[int, int] = (100, 20),
    model: str = "claude-sonnet-5",
) -> AIMessage:
    """An AI turn: ``text``, tool calls ``(name, args)``, and usage (input, output tokens)."""
    return AIMessage(
        text,
        tool_calls=[
            {"name": name, "args": args, "id": f"call_{next(_ids)}", "type": "tool_call"}
            for name, args in calls
        ],
        usage_metadata={
            "input_tokens": tokens[0],
            "output_tokens": tokens[1],
            "total_tokens": sum(tokens),
        },
        response_metadata={"model_name": model},
    )


class ScriptedModel(GenericFakeChatModel):
    """A scripted async chat model (see the module docstring)."""

    messages: Iterator[Any]
    model: str = "claude-sonnet-5"
    """Its name, as ``ls_model_name`` (what lyra prices a request by)."""
    api: MessagesAPI | None = None
    """The local Messages API that :data:`ASK_API` turns are asked of."""
    requests: list[list[BaseMessage]] = Field(default_factory=list)

    @classmethod
    def of(
        cls, *turns: Any, api: MessagesAPI | None = None, model: str = "claude-sonnet-5"
    ) -> ScriptedModel:
        """A model answering ``turns`` in order (an ``Iterator`` for an endless script)."""
        script = turns[0] if len(turns) == 1 and isinstance(turns[0], Iterator) else iter(turns)
        return cls(messages=script, api=api, model=model)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        """Tools are the script's business: the same model."""
        return self

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.requests.append(list(messages))
        turn = next(self.messages)
        while isinstance(turn, int | float):
            await asyncio.sleep(turn)
            turn = next(self.messages)
        if isinstance(turn, BaseException):
            raise turn
        if turn is ASK_API:
            turn = await self._ask_api()
        return ChatResult(generations=[ChatGeneration(message=turn.model_copy(deep=True))])

    async def _ask_api(self) -> AIMessage:
        """One Messages API call with the real SDK; its errors propagate unwrapped."""
        assert self.api is not None, "an ASK_API turn needs ScriptedModel(api=...)"
        async with anthropic.AsyncAnthropic(
            base_url=self.api.url, api_key="test-key", max_retries=0
        ) as client:
            answer = await client.messages.create(
                model=self.model,
                max_tokens=256,
                messages=[{"role": "user", "content": "go on"}],
            )
        calls = [(b.name, dict(b.input)) for b in answer.content if b.type == "tool_use"]
        text = "".join(b.text for b in answer.content if b.type == "text")
        usage = (answer.usage.input_tokens, answer.usage.output_tokens)
        return reply(text, *calls, tokens=usage, model=answer.model)


def react_graph(
    model: ScriptedModel,
    tools: Sequence[Any],
    *,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    handle_tool_errors: Any = None,
    **compile: Any,
) -> Any:
    """The usual tool-calling agent: model node, ToolNode, tools_condition, back to the model
    (``compile``: more of ``compile``'s options, ``interrupt_before=``)."""

    async def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        answer = await model.bind_tools(tools).ainvoke(state["messages"], config)
        return {"messages": [answer]}

    options = {} if handle_tool_errors is None else {"handle_tool_errors": handle_tool_errors}
    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools, **options))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer, **compile)
