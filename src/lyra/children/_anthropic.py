"""The Anthropic child: a Messages API tool-use loop behind the child contract.

Every ``tool_use`` block runs through ``ctx.tool`` (usage counted, sync
tools in a worker thread). The model ends the task with the ``finish`` tool
(its result text) or the ``report_blocker`` tool (a category and a reason).
Each model call is a turn charged to the delegation tree's budget before it is
made, and its tokens and cost (from the response's ``usage`` and the price
table, :mod:`._pricing`) after; a token budget also caps ``max_tokens``.
Stop reasons: ``max_tokens`` → partial, ``refusal`` → invalid_task,
``pause_turn`` → continue the turn. SDK errors propagate untouched and are
classified in :mod:`lyra.delegation._foreign`.

Responses are streamed: each event that arrives is a sign of life, so a model
writing a long answer is not taken for an idle one (a response awaited whole
showed nothing until it ended), and the SDK refuses a ``max_tokens`` whose
answer could take more than ten minutes unless it is streamed.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pydantic

from lyra import tracing
from lyra.children._framework import ASK_DESCRIPTION, ASK_TOOL, limits_text
from lyra.children._meter import Meter, Tokens, count, text_bytes
from lyra.children._pricing import Price, PriceList, tokens_of
from lyra.delegation import ChildContext, FailureCategory
from lyra.errors import (
    BudgetExhausted,
    ConfigurationError,
    IncompleteOutput,
    TaskRejected,
    TransientError,
)
from lyra.settings import settings
from lyra.templates import render

if TYPE_CHECKING:
    import anthropic

FINISH = "finish"
REPORT_BLOCKER = "report_blocker"
_CONTROL_TOOLS: list[dict[str, Any]] = [
    {
        "name": FINISH,
        "description": "Call exactly once when the task is done, with the complete result.",
        "input_schema": {
            "type": "object",
            "properties": {"result": {"type": "string", "description": "The final result."}},
            "required": ["result"],
        },
    },
    {
        "name": REPORT_BLOCKER,
        "description": (
            "Call when you cannot complete the task: missing_context (the prompt lacks "
            "information you need), invalid_task (the task is contradictory or impossible), "
            "tool_error (a tool keeps failing)."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "category": {
                    "type": "string",
                    "enum": ["missing_context", "invalid_task", "tool_error"],
                },
                "reason": {"type": "string", "description": "What blocks you, specifically."},
            },
            "required": ["category", "reason"],
        },
    },
]


_ASK: dict[str, Any] = {
    "name": ASK_TOOL,
    "description": ASK_DESCRIPTION,
    "input_schema": {
        "type": "object",
        "properties": {"question": {"type": "string", "description": "One clear question."}},
        "required": ["question"],
    },
}


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the model may call, with its JSON input schema."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    fn: Callable[..., Any] = field(repr=False)
    input_model: type[pydantic.BaseModel] | None = field(default=None, repr=False)
    """Validates the model's input before ``fn`` runs (set by :meth:`from_function`)."""

    @classmethod
    def from_function(
        cls, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None
    ) -> Tool:
        """A tool from a typed function: its name, docstring and parameters."""
        params = inspect.signature(fn).parameters
        fields: dict[str, Any] = {
            p.name: (
                p.annotation if p.annotation is not inspect.Parameter.empty else Any,
                ... if p.default is inspect.Parameter.empty else p.default,
            )
            for p in params.values()
        }
        model = pydantic.create_model(f"{fn.__name__}_input", **fields)
        schema = model.model_json_schema()
        schema.pop("title", None)
        return cls(
            name=name or fn.__name__,
            description=description or inspect.getdoc(fn) or fn.__name__,
            input_schema=schema,
            fn=fn,
            input_model=model,
        )

    def arguments(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The model's input checked against the schema (ValueError when it is wrong)."""
        if self.input_model is None:
            return dict(raw)
        return dict(self.input_model.model_validate(raw))

    def param(self) -> dict[str, Any]:
        """The tool as the Messages API expects it."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }


class AnthropicChild:
    """A child agent backed by an Anthropic model with tools.

    ``client`` defaults to ``anthropic.AsyncAnthropic`` configured from the
    environment, with the SDK's own retries off: lyra's recovery policy owns
    retrying, so a 429 becomes a report with its ``retry-after`` instead of
    a silent wait inside the deadline.
    """

    def __init__(
        self,
        *,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        model: str | None = None,
        system: str | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        max_tokens: int = 4096,
        max_turns: int = 24,
        prices: Mapping[str, Price] | None = None,
        ask_tool: bool = False,
        show_limits: bool = False,
        stream: bool = True,
    ) -> None:
        self.tools = {t.name: t for t in map(_as_tool, tools)}
        clash = self.tools.keys() & {FINISH, REPORT_BLOCKER, ASK_TOOL}
        if clash:
            raise ValueError(f"tool names reserved by lyra: {sorted(clash)}")
        self.model = model or settings().model
        self.system = system
        self.max_tokens = max_tokens
        self.max_turns = max_turns
        self._prices = PriceList(prices)
        self.price = self._prices(self.model)
        """What this model costs (``None``: not in the table; a cost budget is refused)."""
        self._client = client
        self.ask_tool = ask_tool
        """Give the model ``ask_question``: its question goes through ``ctx.ask``."""
        self.show_limits = show_limits
        """Tell the model, with each request, the time and budget the task has left."""
        self.stream = stream
        """Stream each response (see the module docstring); ``False`` for a server that
        cannot stream: a response then shows no sign of life until it has ended."""

    @property
    def name(self) -> str:
        """The child as a report names it (a fallback chain's children differ by model)."""
        return f"AnthropicChild({self.model})"

    @asynccontextmanager
    async def session(self) -> AsyncIterator[anthropic.AsyncAnthropic]:
        """The SDK client: the one given, or a fresh one closed after use.

        The SDK is imported here, on first use, so importing lyra stays fast.
        """
        if self._client is not None:
            yield self._client
            return
        import anthropic

        options = settings().anthropic_client_options()
        async with anthropic.AsyncAnthropic(max_retries=0, **options) as client:
            yield client

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        """Run the tool-use loop until ``finish``, ``report_blocker`` or a stop reason."""
        meter = Meter(ctx, self._prices, child="AnthropicChild")
        if meter.cost_limited and self.price is None:  # a cost budget it cannot keep
            raise meter.unpriced(self.model)
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        tools = [t.param() for t in self.tools.values()] + _CONTROL_TOOLS
        if self.ask_tool:
            tools.append(_ASK)
        system = self.system or render(
            "child_system.txt.j2", tools=list(self.tools.values()), subject=ctx.subject
        )
        async with self.session() as client:
            return await self._loop(client, messages, tools, system, meter)

    async def _loop(
        self,
        client: anthropic.AsyncAnthropic,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        system: str,
        meter: Meter,
    ) -> str:
        ctx = meter.ctx
        for _turn in range(self.max_turns):
            response = await self._create(client, system, tools, messages, meter)
            content = [block.model_dump(exclude_none=True) for block in response.content]
            stop = response.stop_reason
            _, written = tokens_of(getattr(response, "usage", None))
            if stop == "max_tokens" and meter.token_limited and written < self.max_tokens:
                # cut at the max_tokens the token budget left it: the budget ran out
                raise BudgetExhausted(
                    f"The model stopped at the {written} tokens the token budget left it "
                    "(max_tokens)"
                )
            if stop in ("max_tokens", "model_context_window_exceeded"):
                raise IncompleteOutput(f"The model stopped early ({stop})")
            if stop == "refusal":
                raise TaskRejected("The model refused the task")
            messages.append({"role": "assistant", "content": content})
            if stop == "pause_turn":
                continue
            if stop != "tool_use":
                return _text(response.content)
            finished, results = await self._run_tools(response.content, ctx)
            if finished is not None:
                return finished
            messages.append({"role": "user", "content": results})
        # its own limit of turns ran out, as a framework's does: rule 1, timeout / budget
        raise BudgetExhausted(f"No result after {self.max_turns} model turns (max_turns)")

    @tracing.model_call("anthropic", tokens=tokens_of)
    async def _create(
        self,
        client: anthropic.AsyncAnthropic,
        system: str,
        tools: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        meter: Meter,
    ) -> Any:
        """One Messages API call, charged to the budget: the turn before it is
        made, the tokens and cost after. A body the SDK cannot read is a
        transient failure."""
        ctx = meter.ctx
        # A call the budget has no turn for, or a known cooldown, is never sent into.
        await meter.before_request(self.model, provider="anthropic")
        if self.show_limits:
            system = f"{system}\n\n{limits_text(ctx)}"
        max_tokens = await self._max_tokens(meter, system, tools, messages)
        request = {
            "model": self.model,
            "max_tokens": max_tokens,
            "system": system,
            "tools": tools,
            "messages": messages,
        }
        try:
            response = await self._response(client, meter, request)
        except json.JSONDecodeError as exc:  # the SDK does not wrap a broken JSON body
            raise TransientError(
                f"The Messages API sent a malformed body: {exc}", error_type="data"
            ) from exc
        finally:
            meter.settled()  # what the request held, given back before its usage counts
        if isinstance(response, str):  # a 200 that was not JSON at all
            raise TransientError(
                "The Messages API sent a body that is not a message", error_type="data"
            )
        usage = getattr(response, "usage", None)
        meter.answer(None, _tokens(usage) if usage is not None else None, self.model)
        return response

    async def _response(
        self,
        client: anthropic.AsyncAnthropic,
        meter: Meter,
        request: dict[str, Any],
    ) -> Any:
        """The model's response, streamed: each event a heartbeat (see the module
        docstring); what a stream that broke off had used is charged."""
        if not self.stream:
            return await client.messages.create(**request)
        ended = False
        async with client.messages.stream(**request) as events:
            try:
                async for event in events:
                    meter.ctx.heartbeat()
                    ended = event.type == "message_stop"
            except BaseException:  # (a cancellation too: what was spent stays spent)
                with suppress(BudgetExhausted, ConfigurationError):  # (it must go on as it is)
                    self._spent(events, meter)
                raise
            if ended:
                return await events.get_final_message()
            self._spent(events, meter)
        raise TransientError(  # a body that was no stream, or one cut before its end
            "The Messages API stream ended before its message did", error_type="data"
        )

    def _spent(self, events: Any, meter: Meter) -> None:
        """Charge what a stream that broke off had used by then (its input, the output
        written so far): spent, though no answer came."""
        try:
            usage = events.current_message_snapshot.usage
        except AssertionError:  # (the SDK's: no message began, so none was reported)
            return
        meter.settled()  # what the request held, given back before its usage counts
        meter.add(_tokens(usage), self.model)

    async def _max_tokens(
        self, meter: Meter, system: str, tools: list[dict[str, Any]], messages: list[Any]
    ) -> int:
        """``max_tokens``, capped by what a token budget leaves once the request's worst
        case is held (see :meth:`Meter.reserve`)."""
        if not meter.token_limited:
            return self.max_tokens
        sent = text_bytes(system) + text_bytes(json.dumps([tools, messages], default=str))
        allowed = await meter.reserve(None, text_bytes=sent, output=self.max_tokens, capped=True)
        return self.max_tokens if allowed is None else max(1, min(self.max_tokens, allowed))

    async def _run_tools(
        self, blocks: Sequence[Any], ctx: ChildContext
    ) -> tuple[str | None, list[dict[str, Any]]]:
        results: list[dict[str, Any]] = []
        for block in blocks:
            if block.type != "tool_use":
                continue
            args = dict(block.input or {})
            if block.name == FINISH:
                return str(args.get("result", "")), results
            if block.name == REPORT_BLOCKER:
                ctx.block(_blocker_category(args), str(args.get("reason", "No reason given")))
            if block.name == ASK_TOOL and self.ask_tool:
                answer = await ctx.ask(str(args.get("question", "")))
                results.append(_tool_result(block.id, answer))
                continue
            results.append(await self._call(block.id, block.name, args, ctx))
        return None, results

    async def _call(
        self, tool_use_id: str, name: str, args: dict[str, Any], ctx: ChildContext
    ) -> dict[str, Any]:
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(self.tools) or "none"
            return _tool_result(tool_use_id, f"Unknown tool {name!r}; tools: {known}", error=True)
        try:
            args = tool.arguments(args)
        except pydantic.ValidationError as exc:  # let the model correct its call
            return _tool_result(tool_use_id, f"Invalid input for {name}: {exc}", error=True)
        output = await ctx.tool(name, tool.fn, **args)
        ctx.step(f"Ran {name}")
        text = output if isinstance(output, str) else repr(output)
        note = ctx.repeat_note(name, **args)  # the last identical call allowed: say so
        return _tool_result(tool_use_id, f"{text}\n\n{note}" if note else text)


def _as_tool(tool: Tool | Callable[..., Any]) -> Tool:
    return tool if isinstance(tool, Tool) else Tool.from_function(tool)


def _blocker_category(args: Mapping[str, Any]) -> FailureCategory:
    """The declared category; an unknown one means the model found the task unworkable."""
    value = str(args.get("category", ""))
    allowed = _CONTROL_TOOLS[1]["input_schema"]["properties"]["category"]["enum"]
    return FailureCategory(value) if value in allowed else FailureCategory.INVALID_TASK


def _tool_result(tool_use_id: str, content: str, *, error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if error:
        result["is_error"] = True
    return result


def _tokens(usage: Any) -> Tokens:
    """A Messages API ``usage`` as the meter counts it (input with the cache's)."""
    incoming, outgoing = tokens_of(usage)
    read = count(getattr(usage, "cache_read_input_tokens", 0))
    written = count(getattr(usage, "cache_creation_input_tokens", 0))
    return Tokens(incoming, outgoing, read, written)


def _text(blocks: Sequence[Any]) -> str:
    return "\n".join(block.text for block in blocks if block.type == "text")
