"""One run of the OpenAI Agents SDK under a lyra ChildContext: where the SDK lets
lyra in, and what lyra does there.

Imported only by :class:`lyra.children.openai_agents.OpenAIAgentsChild` once
the SDK is known to be installed (this module imports ``agents``).

Three seams of the SDK carry lyra's limits into the run:

- ``RunConfig.call_model_input_filter`` runs just before *every* model request,
  of the agent and of every agent it runs as a tool (``Agent.as_tool`` hands its
  nested run the parent's ``RunConfig``): usage not yet charged is charged, then
  a turn is charged ahead, so a spent budget refuses the request (the filter's
  exception ends the run before anything is sent). It also records the model
  input of the top-level agent: the conversation so far, for a continuation.
- ``RunHooks`` (composed with the user's own hooks, which are still called):
  ``on_llm_end`` charges the response's usage as it arrives (a heartbeat);
  ``on_tool_start`` / ``on_tool_end`` report each tool call as progress
  (``ctx.tool_started`` / ``ctx.tool_ended``, a step per successful call).
- ``RunConfig.tool_error_formatter`` (composed with the user's) sees the
  exception of a tool whose errors the SDK turns into text for the model, so
  lyra records it as a tool failure; with ``tool_errors="raise"`` the run ends
  with it instead.

Usage is charged as the difference between the SDK's running total
(``RunContextWrapper.usage``, which nested agent-tool runs add to) and what was
charged already, so no response is counted twice and a nested agent's tokens
are charged at the next seam that fires.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import json
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import anyio
from agents import (
    Agent,
    ItemHelpers,
    ModelSettings,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Tool,
    function_tool,
)
from agents.items import ModelResponse, TResponseInputItem
from agents.logger import logger as sdk_logger
from agents.models.interface import ModelProvider
from agents.run_config import CallModelData, ModelInputData, ToolErrorFormatterArgs
from agents.run_context import AgentHookContext
from agents.usage import Usage as SDKUsage

from lyra.children._framework import (
    ASK_DESCRIPTION,
    ASK_TOOL,
    CLEANUP_GRACE,
    limits_text,
    model_named,
    tool_done,
)
from lyra.children._meter import Meter, text_bytes, worst_case
from lyra.delegation import ChildContext

ToolErrors = Literal["model", "raise"]


class Request(NamedTuple):
    """A model request sent and not yet answered."""

    data: ModelInputData
    limit: int | None
    """Its output limit (``max_tokens``)."""
    model: str | None


class Tap(RunHooks[Any]):
    """What lyra keeps of one SDK run -- the usage charged so far, the tools running,
    the tool errors seen, the conversation of the top-level agent -- and the run hooks
    that keep it (the run's ``hooks``), each calling the user's own (``user_hooks``)
    after lyra's bookkeeping."""

    def __init__(
        self,
        meter: Meter,
        *,
        tool_errors: ToolErrors,
        user_hooks: RunHooks[Any] | None = None,
        user_filter: Callable[[CallModelData[Any]], Any] | None,
        user_formatter: Callable[[ToolErrorFormatterArgs[Any]], Any] | None,
        settings: ModelSettings | None = None,
        show_limits: bool = False,
    ) -> None:
        self.meter = meter
        self.user_hooks = user_hooks
        self.settings = settings
        """The RunConfig's model settings (over every agent's own)."""
        self.show_limits = show_limits
        self.ctx = meter.ctx
        self.tool_errors = tool_errors
        self.user_filter = user_filter
        self.user_formatter = user_formatter
        self.agent: Agent[Any] | None = None
        """The top-level agent now running (a handoff changes it)."""
        self.usage: SDKUsage | None = None
        """The SDK's running total for this run (shared with nested agent-tool runs)."""
        self.model: str | None = None
        """The model that made the last request."""
        self.running: dict[str, str] = {}
        """Tool calls started and not ended: call id → tool name."""
        self.tool_failures: dict[str, BaseException] = {}
        self.raised: BaseException | None = None
        """A tool's exception this tap re-raised to end the run (``tool_errors="raise"``)."""
        self.last_input: list[Any] = []
        self.last_response: ModelResponse | None = None
        """The answer to ``last_input`` (turned into input items only when needed)."""
        self.asked: dict[int, Request] = {}
        """Requests sent and not answered, by number, oldest first (each holds its worst
        case under a token budget, by the same number)."""
        self._numbers = itertools.count()
        self._counted: tuple[int, int, int] = (0, 0, 0)
        """The SDK's running requests and tokens when answers were last counted."""
        self._counted_answered: dict[int, Request] = {}
        """Requests taken as answered by that count since no tool ran: answers in flight
        together are counted, not told apart, so one of these may be the one cut off."""

    # -- the seams ---------------------------------------------------------------------

    async def before_model_call(self, data: CallModelData[Any]) -> ModelInputData:
        """``call_model_input_filter``: charge what is owed, then a turn ahead."""
        self.answered()
        self.settle()  # (the turn taken below is the sign of life, charged or not)
        agent = data.agent
        if agent is self.agent:  # not a nested agent-tool run
            self.last_input, self.last_response = list(data.model_data.input), None
        self.model = model_named(agent.model)
        # A tool's caught block ends the run; a request the budget has no turn (or an
        # unpriced model no cost budget) for is never sent.
        meter, model_data = self.meter, data.model_data
        limit = output_limit(agent, self.settings)
        number = next(self._numbers)
        await meter.before_request(  # under a token budget, its worst case held too
            self.model,
            provider="openai",
            key=number,
            text_bytes=sent_bytes(model_data) if meter.token_limited else None,
            output=limit,
        )
        self.asked[number] = Request(model_data, limit, self.model)
        if self.user_filter is not None:
            try:
                filtered = self.user_filter(data)
                model_data = await filtered if inspect.isawaitable(filtered) else filtered
            except BaseException:  # the request is never sent: nothing of it is owed
                del self.asked[number]
                meter.settled(number)
                self.ctx.give_back_turn()
                raise
        if self.show_limits:
            given = model_data.instructions
            told = limits_text(self.ctx)
            model_data = dataclasses.replace(
                model_data, instructions=f"{given}\n\n{told}" if given else told
            )
        return model_data

    async def format_tool_error(self, args: ToolErrorFormatterArgs[Any]) -> str | None:
        """``tool_error_formatter``: remember a tool's exception the SDK hands the model."""
        if args.kind == "tool_exception" and args.error is not None:
            self.tool_failures[args.call_id] = args.error
        if self.user_formatter is None:
            return None
        message = self.user_formatter(args)
        return await message if inspect.isawaitable(message) else message  # type: ignore[no-any-return]

    # -- the run hooks (lyra's bookkeeping first, then the user's hook) -----------------

    async def on_agent_start(self, context: AgentHookContext[Any], agent: Agent[Any]) -> None:
        self.agent = agent
        self.usage = context.usage
        self.ctx.heartbeat()
        if self.user_hooks is not None:
            await self.user_hooks.on_agent_start(context, agent)

    async def on_agent_end(
        self, context: AgentHookContext[Any], agent: Agent[Any], output: Any
    ) -> None:
        if self.user_hooks is not None:
            await self.user_hooks.on_agent_end(context, agent, output)

    async def on_handoff(
        self, context: RunContextWrapper[Any], from_agent: Agent[Any], to_agent: Agent[Any]
    ) -> None:
        self.ctx.heartbeat()
        if self.user_hooks is not None:
            await self.user_hooks.on_handoff(context, from_agent, to_agent)

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        if self.user_hooks is not None:
            await self.user_hooks.on_llm_start(context, agent, system_prompt, input_items)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        """A response: what its request held given back, then its usage charged (a sign
        of life either way)."""
        self.answered(at_least=1)
        self._counted_answered.clear()  # (its own answer, told by its hook)
        self.meter.answered()
        model = model_named(agent.model)
        usage = response.usage
        if not (usage.input_tokens or usage.output_tokens or usage.total_tokens):
            self.meter.unreported(model)  # (a budget it cannot keep stops)
        if not self.settle(model):
            self.ctx.heartbeat()
        if agent is self.agent:
            self.last_response = response
        if self.user_hooks is not None:
            await self.user_hooks.on_llm_end(context, agent, response)

    async def on_tool_start(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool
    ) -> None:
        self.running[_call_id(context, tool)] = tool.name
        self.ctx.tool_started(tool.name, getattr(context, "tool_arguments", None))
        if self.user_hooks is not None:
            await self.user_hooks.on_tool_start(context, agent, tool)

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        try:
            if self.user_hooks is not None:
                await self.user_hooks.on_tool_end(context, agent, tool, result)
        finally:  # lyra's bookkeeping whatever the user's hook did (and its raise wins)
            self.tool_ended(context, tool)

    def tool_ended(self, context: RunContextWrapper[Any], tool: Tool) -> None:
        call_id = _call_id(context, tool)
        self.running.pop(call_id, None)
        self.answered(every=not self.running)  # (no agent run as a tool is asking now)
        error = self.tool_failures.pop(call_id, None)
        ctx = self.ctx
        tool_done(ctx, tool.name, error)
        if ctx.blocked is not None:
            raise ctx.blocked
        if error is not None and self.tool_errors == "raise":
            self.raised = error
            raise error

    def tool_raised(self, exc: BaseException) -> BaseException | None:
        """The tool exception behind ``exc``, the SDK's ``UserError("Error running tool
        NAME: …")`` for a tool whose errors propagate, recorded as that tool's failure."""
        cause = exc.__cause__
        if self.raised is not None and cause is self.raised:
            return cause
        if cause is None or type(exc).__name__ != "UserError":
            return None
        text = str(exc)
        for call_id, name in list(self.running.items()):
            if text.startswith(f"Error running tool {name}:"):
                del self.running[call_id]
                self.ctx.tool_ended(name, cause)
                return cause
        return None

    # -- usage -------------------------------------------------------------------------

    def answered(self, *, at_least: int = 0, every: bool = False) -> None:
        """Give back what the requests answered since the last look held, oldest first
        (``every``: all requests sent). No hook of lyra's sees the answers of an agent
        run as a tool; the SDK's running total, which those runs add to, counts them:
        its requests (or, from a model that counts none, its tokens growing, one answer;
        ``at_least``: a hook saw that many)."""
        count = at_least
        usage = self.usage
        if usage is not None:
            now = (usage.requests, usage.input_tokens, usage.output_tokens)
            grew = now[0] - self._counted[0] or int(now[1:] != self._counted[1:])
            self._counted = now
            count = max(count, grew)
        if every:
            count = len(self.asked)
            self._counted_answered.clear()
        for number in list(self.asked)[:count]:
            request = self.asked.pop(number)
            if not every:
                self._counted_answered[number] = request
            self.meter.settled(number)

    def dropped(self) -> None:
        """The SDK raised on an answer cut off at its output limit, keeping no usage of
        it: one request is charged its estimate instead -- the input it sent and the
        whole output limit -- the largest of those that may be it, where several were
        in flight together (which of them was cut off cannot be told; the others were
        answered, their usage counted, or cancelled)."""
        candidates = {**self._counted_answered, **self.asked}
        estimates = {
            number: worst_case(sent_bytes(request.data), request.limit)
            for number, request in candidates.items()
        }
        if estimates:
            cut = max(estimates, key=lambda number: sum(estimates[number]))
            self.meter.dropped(cut, estimates[cut], candidates[cut].model)
        self.answered(every=True)

    def settle(self, model: str | None = None) -> bool:
        """Charge the usage the SDK counted since the last charge (nothing twice), at the
        price of ``model`` (else the model of the last request); False when there was
        none (a charge is a sign of life: its absence is for the caller to weigh)."""
        usage = self.usage
        if usage is None:
            return False
        # (the cached share read defensively: total() makes foreign counts whole)
        cached = getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", 0)
        return self.meter.total(
            usage.input_tokens, usage.output_tokens, cached, model=model or self.model
        )

    # -- the conversation --------------------------------------------------------------

    def history(self, start: int, run_data: Any = None) -> list[Any] | None:
        """The top-level agent's conversation so far as JSON data, with tool calls that
        have no output dropped; ``None`` when it holds no more than the run's ``start``
        input items, or is not JSON data.

        From the SDK's ``run_data`` (``RunErrorDetails``, on its own exceptions: the
        input and every item the run made) where there is one, else from what the
        seams saw: the last model input and the answer to it.
        """
        try:
            if run_data is not None:
                made = [item.to_input_item() for item in run_data.new_items]
                items = [*ItemHelpers.input_to_new_input_list(run_data.input), *made]
            else:
                answer = self.last_response.to_input_items() if self.last_response else []
                items = [*self.last_input, *answer]
            items = paired(json.loads(json.dumps(items)))
        except (TypeError, ValueError, AttributeError):
            return None
        return items if len(items) > start else None


def with_ask_tool(agent: Agent[Any], ctx: ChildContext) -> Agent[Any]:
    """A copy of ``agent`` with the ``ask_question`` tool, asking through ``ctx.ask``."""

    async def ask(context: RunContextWrapper[Any], question: str) -> str:
        return await ctx.ask(question)

    tool = function_tool(ask, name_override=ASK_TOOL, description_override=ASK_DESCRIPTION)
    return agent.clone(tools=[*agent.tools, tool])


def run_config(tap: Tap, user: RunConfig | None) -> RunConfig:
    """The user's RunConfig with lyra's filter and tool-error formatter in its seams, or,
    with none of the user's, a new one: its model provider is then the run's own, closed
    with :func:`close_provider` when the run ends.

    (Not a dict of the seams, for the SDK to make the RunConfig and close its provider:
    it checks such a dict against every field of RunConfig, and closes the provider in a
    task of its own, at every run.)
    """
    if user is None:
        return RunConfig(
            call_model_input_filter=tap.before_model_call,
            tool_error_formatter=tap.format_tool_error,
        )
    return dataclasses.replace(
        user,
        call_model_input_filter=tap.before_model_call,
        tool_error_formatter=tap.format_tool_error,
    )


async def close_provider(provider: ModelProvider, *, shielded: bool = False) -> None:
    """Close the model provider of a RunConfig :func:`run_config` made, as the SDK closes
    the one it makes for ``run_config=None``: a failure is the SDK's logged warning, not
    the run's. After a failed run (``shielded``: the attempt may be ending, cancelled)
    the close is shielded, for :data:`CLEANUP_GRACE` at most: the deadline still holds.
    """
    try:
        if not shielded:
            await provider.aclose()  # (a provider no model came from closes at once)
            return
        with anyio.move_on_after(CLEANUP_GRACE, shield=True):
            await provider.aclose()
    except Exception as error:  # noqa: BLE001 - as the SDK's own close
        sdk_logger.warning("Failed to close model provider created for run: %s", error)


def output_limit(agent: Agent[Any], settings: ModelSettings | None) -> int | None:
    """The ``max_tokens`` an agent's requests go with: its own, or the RunConfig's."""
    own = agent.model_settings
    return (own.resolve(settings) if settings is not None else own).max_tokens


def sent_bytes(model_data: ModelInputData) -> int:
    """The size of what a model request carries (its input and instructions, as JSON)."""
    return text_bytes(json.dumps([model_data.input, model_data.instructions], default=str))


def paired(items: list[Any]) -> list[Any]:
    """``items`` without function calls that have no output, nor outputs without their
    call (an API refuses either): a run stopped while its tools ran leaves such calls."""
    calls = {i.get("call_id") for i in items if _type(i) == "function_call"}
    outputs = {i.get("call_id") for i in items if _type(i) == "function_call_output"}
    return [
        i
        for i in items
        if not (_type(i) == "function_call" and i.get("call_id") not in outputs)
        and not (_type(i) == "function_call_output" and i.get("call_id") not in calls)
    ]


def _type(item: Any) -> Any:
    return item.get("type") if isinstance(item, dict) else None


def _call_id(context: RunContextWrapper[Any], tool: Tool) -> str:
    call_id = getattr(context, "tool_call_id", None)
    return call_id if isinstance(call_id, str) else tool.name
