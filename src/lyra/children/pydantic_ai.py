"""pydantic-ai agents as lyra children: ``PydanticAIChild(agent)``.

Install the ``pydantic-ai`` extra (``pip install -e '.[pydantic-ai]'`` in a lyra
checkout, or ``pip install 'pydantic-ai-slim>=2.68,<3'``); the framework is
imported when a child is built, never when this module is. The agent goes in
unchanged, with the options of ``agent.run``::

    from pydantic_ai import Agent, RunContext, UsageLimits
    from lyra import Budget, ChildContext, adelegate_task
    from lyra.children.pydantic_ai import PydanticAIChild

    agent = Agent("anthropic:claude-sonnet-4-6", deps_type=ChildContext)

    @agent.tool
    async def ask_expert(ctx: RunContext[ChildContext], question: str) -> str:
        answer = await ctx.deps.delegate(question, child=expert, timeout=120)
        return answer.output if answer.ok else answer.report

    report = await adelegate_task(
        "Triage issue 42", child=PydanticAIChild(agent, usage_limits=UsageLimits(request_limit=20)),
        timeout=600, idle_timeout=60, budget=Budget(max_cost_usd=1.0),
    )

**The tree's limits hold inside the run.** A capability of lyra's joins the
run (see :mod:`._pydantic_ai_hooks`): each step of the agent loop charges its
model turn *ahead*, so a spent account refuses the request before it is made
(and a token budget with little left caps ``max_tokens``); each response's
usage, from
pydantic-ai's own figures (tokens with the cache's; cost from genai-prices,
else lyra's price table), is charged as it arrives and is a heartbeat; each
tool call is progress (started, ended; a successful one is the step
``Ran <tool>``). The budget, the deadline and the idle timeout cancel the run
at once; pydantic-ai passes the cancellation through and leaves no task
behind, and sync code of the agent's stuck in a worker thread is abandoned,
not waited for. The spend so far is in the report.

**How failures read.** pydantic-ai's exceptions are classified in
:mod:`lyra.delegation._foreign._pydantic_ai`: its own ``usage_limits``
(``UsageLimitExceeded``: default 50 requests) are timeout / budget, never a
success; provider errors keep their status and ``retry-after``; a tool whose
retries ran out is tool_error. Three endings that pydantic-ai counts as a
result are failures here: a refusal (``finish_reason='content_filter'``,
invalid_task), text cut off at ``max_tokens`` (partial), and deferred tool
calls waiting for approval (a ``DeferredToolRequests`` output,
missing_context). A tool's ``ctx.block(...)`` ends the run as declared even
if the tool or the framework catches it.

**The context reaches the tools through deps.** With neither ``deps`` nor
``make_deps``, the run's deps *is* the :class:`~lyra.ChildContext`
(``RunContext[ChildContext]``: ``ctx.deps.delegate(...)``, ``ctx.deps.step``).
An agent with deps of its own passes them as ``deps=`` (unchanged, the same
for every attempt), or builds them per attempt around the context with
``make_deps=lambda ctx: MyDeps(http=client, lyra=ctx)``.

**Continuation.** When an attempt fails after the model answered at least
once, the run's message history (everything it completed, an interrupted tool
call closed out by pydantic-ai) is kept in ``ctx.state`` as JSON data; the
next attempt of the same task (a recovery loop's continuation, a durable
run's retry) hands it to pydantic-ai as ``message_history`` with its own
prompt, so the work done is not redone. A success clears it.

**Traces.** pydantic-ai's spans (its ``Instrumentation`` capability, or
``Agent.instrument_all()``) nest under lyra's ``invoke_agent`` span of the
attempt; lyra adds no model or tool spans of its own for this child, so no
call is counted twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from lyra.children._framework import (
    ASK_DESCRIPTION,
    check_flags,
    check_options,
    check_prices,
    check_wraps,
    contained,
    framework,
    labelled,
    limits_text,
    model_named,
    output_text,
    warm,
)
from lyra.children._meter import Meter
from lyra.children._pricing import Price, PriceList
from lyra.delegation import ChildContext, FailureCategory
from lyra.errors import IncompleteOutput

if TYPE_CHECKING:
    from pydantic_ai import AgentModelSettings, AgentRetries, ModelMessage, UsageLimits
    from pydantic_ai.agent import AbstractAgent, EventStreamHandler
    from pydantic_ai.capabilities import AgentCapability
    from pydantic_ai.messages import AgentStreamEvent
    from pydantic_ai.models import Model
    from pydantic_ai.output import OutputSpec
    from pydantic_ai.tools import RunContext
    from pydantic_ai.toolsets import AbstractToolset

__all__ = ["HISTORY", "PydanticAIChild"]

HISTORY = "pydantic_ai.messages"
"""The ``ctx.state`` key of a failed attempt's message history (JSON data)."""

_CONTEXT: Any = object()
"""``deps`` not given: the run's deps is the attempt's ChildContext."""


class PydanticAIChild:
    """A pydantic-ai agent (``Agent``, or any ``AbstractAgent``) as a lyra child.

    The keyword options are ``agent.run``'s own, given to every run: ``model``,
    ``model_settings``, ``usage_limits``, ``output_type``, ``instructions``,
    ``toolsets``, ``capabilities``, ``metadata``, ``retries`` and
    ``event_stream_handler`` (its events are heartbeats too). ``deps`` is the
    run's deps as it is; ``make_deps(ctx)`` builds them for each attempt from
    its :class:`~lyra.ChildContext`; with neither, the deps is the context.
    ``prices`` adds to lyra's price table, for models genai-prices cannot price.
    ``ask_tool=True`` gives the agent a tool, ``ask_question``, that asks its
    question through ``ctx.ask`` (answered by the delegation's ``answer=``, a
    parent, an MCP or A2A client); ``show_limits=True`` tells the model, with each
    request, the time and budget the task has left. The run's own ``timeout`` and
    cancellation are lyra's: set ``timeout=`` and ``idle_timeout=`` on the
    delegation.
    """

    def __init__(
        self,
        agent: AbstractAgent[Any, Any],
        *,
        deps: Any = _CONTEXT,
        make_deps: Callable[[ChildContext], Any] | None = None,
        model: Model | str | None = None,
        model_settings: AgentModelSettings[Any] | None = None,
        usage_limits: UsageLimits | None = None,
        output_type: OutputSpec[Any] | None = None,
        instructions: str | Sequence[str] | None = None,
        toolsets: Sequence[AbstractToolset[Any]] | None = None,
        capabilities: Sequence[AgentCapability[Any]] = (),
        metadata: dict[str, Any] | None = None,
        retries: int | AgentRetries | None = None,
        event_stream_handler: EventStreamHandler[Any] | None = None,
        prices: Mapping[str, Price] | None = None,
        ask_tool: bool = False,
        show_limits: bool = False,
    ) -> None:
        self._pai = framework("pydantic_ai", extra="pydantic-ai", child="PydanticAIChild")
        from lyra.children._pydantic_ai_hooks import Limits

        if deps is not _CONTEXT and make_deps is not None:
            raise ValueError("give deps= or make_deps=, not both")
        check_wraps(
            agent,
            self._pai.agent.AbstractAgent,
            child="PydanticAIChild",
            what="a pydantic_ai.Agent",
        )
        check_options(
            "PydanticAIChild",
            make_deps=(make_deps, None),
            event_stream_handler=(event_stream_handler, None),
            model_settings=(model_settings, (Mapping, Callable)),
            usage_limits=(usage_limits, self._pai.UsageLimits),
        )
        check_prices("PydanticAIChild", prices)
        check_flags("PydanticAIChild", ask_tool=ask_tool, show_limits=show_limits)
        if deps is _CONTEXT and make_deps is None:
            _check_deps_type(agent)
        named = model if model is not None else getattr(agent, "model", None)
        if isinstance(named, str):  # built at the first run otherwise: its SDK imported then
            warm(lambda: self._pai.models.infer_model(named))
        self.agent = agent
        self.deps = deps
        self.make_deps = make_deps
        self.capabilities = tuple(capabilities)
        self.event_stream_handler = event_stream_handler
        self.prices = prices
        self.ask_tool = ask_tool
        self.show_limits = show_limits
        self._price = PriceList(prices)
        self.options: dict[str, Any] = {
            "model": model,
            "model_settings": model_settings,
            "usage_limits": usage_limits,
            "output_type": output_type,
            "instructions": instructions,
            "toolsets": toolsets,
            "metadata": metadata,
            "retries": retries,
        }
        """The rest of ``agent.run``'s keywords, as given."""
        self._limits = Limits
        # pydantic-ai runs the agent's sync code (tools, instructions, output
        # functions) in worker threads and, unless told otherwise, a cancellation of
        # the run's own task waits until such a thread returns: stuck sync code would
        # hold the deadline. Abandoned instead, as ctx.tool abandons it (the thread
        # finishes in the background; no thread can be killed). A private helper of
        # pydantic-ai's; without it (a later release), the test of it fails.
        self._abandoning: Callable[[], AbstractContextManager[None]] = getattr(
            self._pai._utils, "abandon_threads_on_cancel", nullcontext
        )

    @property
    def name(self) -> str:
        """The child as a report names it (its agent's name and model)."""
        return labelled(
            "PydanticAIChild",
            self.agent.name,
            model_named(self.options["model"] or getattr(self.agent, "model", None)),
        )

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        """Run the agent once under the attempt's limits; its output as text."""
        pai = self._pai
        limits = self._limits(Meter(ctx, self._price, child="PydanticAIChild"))
        history = None if ctx.fresh else self._history(ctx)
        with pai.capture_run_messages() as messages, self._abandoning():
            try:
                result = await contained(
                    self.agent.run(
                        prompt,
                        message_history=history,
                        deps=self._deps(ctx),
                        usage=limits.usage,
                        capabilities=[limits, *self.capabilities],
                        event_stream_handler=self._handler(ctx),
                        infer_name=False,
                        **self._run_options(ctx),
                    )
                )
            except BaseException:
                limits.settle()
                self._keep(ctx, messages, history)
                raise
        limits.settle()
        output = result.output
        if result.response.finish_reason == "length":
            self._keep(ctx, messages, history)
            raise IncompleteOutput("The model stopped early (max_tokens): the output is cut off")
        if isinstance(output, pai.DeferredToolRequests):
            self._keep(ctx, messages, history)
            names = ", ".join(call.tool_name for call in [*output.approvals, *output.calls])
            ctx.block(
                FailureCategory.MISSING_CONTEXT,
                f"The agent waits for approval or results of tool calls: {names}",
            )
        ctx.state.pop(HISTORY, None)
        return output_text(output)

    def _run_options(self, ctx: ChildContext) -> dict[str, Any]:
        """``agent.run``'s options as given, with lyra's question tool and the limits
        (read again for every request) when asked for."""
        options = self.options
        if not (self.ask_tool or self.show_limits):
            return options
        options = dict(options)
        if self.show_limits:
            given = options["instructions"]
            mine = [] if given is None else [given] if isinstance(given, str) else list(given)
            options["instructions"] = [*mine, lambda: limits_text(ctx)]
        if self.ask_tool:

            async def ask_question(question: str) -> str:
                return await ctx.ask(question)

            ask_question.__doc__ = ASK_DESCRIPTION
            asking = self._pai.FunctionToolset([ask_question])
            options["toolsets"] = [*(options["toolsets"] or ()), asking]
        return options

    def _history(self, ctx: ChildContext) -> list[ModelMessage] | None:
        """The message history an earlier attempt of this task kept, if any."""
        stored = ctx.state.get(HISTORY)
        if not stored:
            return None
        history: list[ModelMessage] = self._pai.ModelMessagesTypeAdapter.validate_python(stored)
        return history

    def _keep(
        self,
        ctx: ChildContext,
        messages: list[ModelMessage],
        history: list[ModelMessage] | None,
    ) -> None:
        """Keep the run's messages for the next attempt, when the model answered in this one
        (else what an earlier attempt kept stays)."""
        new = messages[len(history or ()) :]
        if any(isinstance(message, self._pai.ModelResponse) for message in new):
            adapter = self._pai.ModelMessagesTypeAdapter
            ctx.state[HISTORY] = adapter.dump_python(messages, mode="json")

    def _deps(self, ctx: ChildContext) -> Any:
        if self.make_deps is not None:
            return self.make_deps(ctx)
        return ctx if self.deps is _CONTEXT else self.deps

    def _handler(self, ctx: ChildContext) -> EventStreamHandler[Any] | None:
        """The user's event stream handler, each event a heartbeat on its way."""
        handler = self.event_stream_handler
        if handler is None:
            return None

        async def beating(run: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
            async def heartbeats() -> AsyncIterable[AgentStreamEvent]:
                async for event in events:
                    ctx.heartbeat()
                    yield event

            await handler(run, heartbeats())

        return beating


def _check_deps_type(agent: Any) -> None:
    """An agent that declares deps of its own type gets them from ``deps=`` or
    ``make_deps=``: refused now, not after a paid model call when a tool reads them."""
    declared = getattr(agent, "deps_type", None)
    if not isinstance(declared, type) or declared is type(None):
        return
    if issubclass(ChildContext, declared):
        return  # the run's deps is the context: what the agent asks for
    name = declared.__qualname__
    raise TypeError(
        f"the agent's deps_type is {name}, so its tools expect a {name}: pass deps={name}(...) "
        f"to PydanticAIChild, or make_deps=lambda ctx: {name}(..., lyra=ctx) to build them "
        "per attempt around lyra's context"
    )
