"""The OpenAI Agents SDK child: an ``agents.Agent`` run by lyra, limits held inside.

Install the ``openai-agents`` extra (``pip install -e '.[openai-agents]'`` in a lyra
checkout, or ``pip install 'openai-agents>=0.24,<0.25'``); importing this
module does not import the SDK (building the child does)::

    import openai
    from agents import Agent, OpenAIResponsesModel, function_tool
    from lyra import Budget, adelegate_task
    from lyra.children.openai_agents import OpenAIAgentsChild

    client = openai.AsyncOpenAI(max_retries=0)   # lyra's recovery owns retrying
    agent = Agent(name="triage", instructions="...", tools=[...],
                  model=OpenAIResponsesModel("gpt-5-mini", openai_client=client))
    report = await adelegate_task("Triage issue 42", child=OpenAIAgentsChild(agent),
                                  timeout=600, idle_timeout=60,
                                  budget=Budget(max_tokens=200_000, max_turns=40))

The agent goes in unchanged; the keywords are ``Runner.run``'s (``context``,
``max_turns``, ``hooks``, ``run_config``, ``error_handlers``, ``session``).

What lyra's limits do inside the run (see :mod:`._openai_agents_run`):

- Before every model request -- the agent's, and those of agents it runs as
  tools (``Agent.as_tool``), which the SDK's own ``max_turns`` does not reach --
  a turn is charged ahead: a spent budget refuses the request, so it is never
  sent. Each response's usage is charged as it arrives (from the SDK's usage
  figures; cost where ``prices`` or lyra's price table knows the model), and is
  a heartbeat for the idle timeout. Each tool call is progress
  (``ctx.tool_started`` / ``ctx.tool_ended``; a successful one is a step).
- Over budget, past the deadline or idle for too long, the run is cancelled
  at once: the SDK cancels its tool tasks with it; what was spent is in the report.
- ``max_turns`` running out (``MaxTurnsExceeded``) is a ``timeout`` / ``budget``
  failure, never a success: an ``error_handlers["max_turns"]`` that would turn
  it into a final output is refused.

How the ChildContext reaches tools: through the SDK's own context
(``RunContextWrapper.context``). With no ``context`` it *is* lyra's
ChildContext, so a tool can delegate a grandchild under the same tree::

    @function_tool
    async def research(wrapper: RunContextWrapper[ChildContext], topic: str) -> str:
        result = await wrapper.context.delegate(f"Research {topic}", child=helper)
        return result.output or result.report

With a context of your own, pass ``context_factory=lambda ctx: MyDeps(db=db,
lyra=ctx)``: it builds your context for each attempt, holding lyra's. A plain
``context=`` object is passed as it is (its tools then have no ChildContext).

Tool errors: by default the SDK turns a tool's exception into text for the
model, and the model goes on; lyra records the failure (the failing tool and
its error). ``tool_errors="raise"`` ends the run with the tool's exception
instead, classified by its cause. ``ctx.block(...)`` inside a tool ends the run
as the declared category either way.

Continuation: when an attempt fails after the model answered, the
conversation (``to_input_list()``-style items, JSON data) is kept in
``ctx.state``; the recovery loop's next attempt of the task sends it back with
the continuation prompt, so the work done is not redone. With a ``session``
the session holds the conversation and only the prompt is sent.

Tracing: the SDK's own tracing is not OpenTelemetry; by default it exports to
OpenAI's backend when an OpenAI key is set. Turn it off with
``agents.set_tracing_disabled(True)``, ``RunConfig(tracing_disabled=True)`` or
``OPENAI_AGENTS_DISABLE_TRACING=1``. lyra's own ``invoke_agent`` span covers
the attempt.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from lyra.children._framework import (
    check_at_least_one,
    check_flags,
    check_options,
    check_prices,
    check_wraps,
    contained,
    framework,
    labelled,
    model_named,
    output_text,
    warm,
)
from lyra.children._meter import Meter
from lyra.children._pricing import Price, PriceList
from lyra.delegation import ChildContext
from lyra.errors import BudgetExhausted, ConfigurationError, IncompleteOutput, TransientError

if TYPE_CHECKING:
    from agents import Agent, RunConfig, RunHooks, RunResult
    from agents.memory import Session
    from agents.run_error_handlers import RunErrorHandlers

    from lyra.children._openai_agents_run import Tap, ToolErrors

__all__ = ["OpenAIAgentsChild"]

STATE_KEY = "openai_agents"
"""Where an attempt keeps the conversation in ``ctx.state`` for the next one."""


class OpenAIAgentsChild:
    """A child that runs an OpenAI Agents SDK ``Agent`` with ``Runner.run``.

    ``max_turns`` is the SDK's (its default, 10; ``None``: no SDK limit, lyra's
    budget and deadline still hold). ``prices`` adds or replaces model prices
    (lyra's table knows Anthropic's models only): without a price, tokens are
    charged but cost is not, and a cost budget is refused. ``ask_tool=True`` gives
    the agent a tool, ``ask_question``, that asks through ``ctx.ask``;
    ``show_limits=True`` adds the time and budget left to the instructions of each
    model request.
    """

    def __init__(
        self,
        agent: Agent[Any],
        *,
        context: Any = None,
        context_factory: Callable[[ChildContext], Any] | None = None,
        max_turns: int | None = 10,
        hooks: RunHooks[Any] | None = None,
        run_config: RunConfig | None = None,
        error_handlers: RunErrorHandlers[Any] | None = None,
        session: Session | None = None,
        prices: Mapping[str, Price] | None = None,
        tool_errors: ToolErrors = "model",
        ask_tool: bool = False,
        show_limits: bool = False,
    ) -> None:
        sdk = framework("agents", extra="openai-agents", child="OpenAIAgentsChild")
        check_wraps(agent, sdk.Agent, child="OpenAIAgentsChild", what="an agents.Agent")
        if context is not None and context_factory is not None:
            raise ConfigurationError(
                "give OpenAIAgentsChild a context or a context_factory, not both"
            )
        if error_handlers is not None and "max_turns" in error_handlers:
            raise ConfigurationError(
                "OpenAIAgentsChild refuses error_handlers['max_turns']: running out of turns "
                "is a failure in lyra (timeout/budget, with a continuation), never a final output"
            )
        if tool_errors not in ("model", "raise"):
            raise ValueError(f"tool_errors must be 'model' or 'raise', not {tool_errors!r}")
        check_options(
            "OpenAIAgentsChild",
            context_factory=(context_factory, None),
            max_turns=(max_turns, int),
            run_config=(run_config, sdk.RunConfig),
        )
        check_at_least_one("OpenAIAgentsChild", max_turns=max_turns)
        check_prices("OpenAIAgentsChild", prices)
        check_flags("OpenAIAgentsChild", ask_tool=ask_tool, show_limits=show_limits)
        from lyra.children import _openai_agents_run

        self._sdk = _openai_agents_run
        named = agent.model
        if named is None or isinstance(named, str):  # the SDK builds it at the run
            warm(lambda: _model_and_client(named))
        self.agent = agent
        self.context = context
        self.context_factory = context_factory
        self.max_turns = max_turns
        self.hooks = hooks
        self.run_config = run_config
        self.error_handlers = error_handlers
        self.session = session
        self.ask_tool = ask_tool
        self.show_limits = show_limits
        self.prices = prices
        self.tool_errors: ToolErrors = tool_errors
        self._price = PriceList(prices)

    @property
    def name(self) -> str:
        """The child as a report names it (its agent's name and model)."""
        return labelled("OpenAIAgentsChild", self.agent.name, model_named(self.agent.model))

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        """Run the agent on ``prompt`` (or continue its saved conversation) under ``ctx``."""
        sdk = self._sdk
        config = self.run_config
        tap = sdk.Tap(
            Meter(ctx, self._price, child="OpenAIAgentsChild"),
            tool_errors=self.tool_errors,
            user_hooks=self.hooks,
            user_filter=config.call_model_input_filter if config is not None else None,
            user_formatter=config.tool_error_formatter if config is not None else None,
            settings=config.model_settings if config is not None else None,
            show_limits=self.show_limits,
        )
        run_input, start = self._input(prompt, ctx)
        try:
            result = await self._run(run_input, tap, ctx)
        except Exception as exc:
            if _cut_off_unread(exc):
                with suppress(BudgetExhausted):  # recorded; the attempt is ending anyway
                    tap.dropped()
            self._keep(tap, ctx, start, getattr(exc, "run_data", None))
            cause = tap.tool_raised(exc)
            if cause is not None:  # the tool's own exception, not the SDK's wrapper
                raise cause from None
            if isinstance(exc, json.JSONDecodeError):  # the openai client does not wrap it
                raise TransientError(
                    f"The model API sent a malformed body: {exc}", error_type="data"
                ) from exc
            raise
        except BaseException:  # cancelled: our deadline, idle timeout or budget
            self._keep(tap, ctx, start)
            raise
        tap.settle()  # usage of a nested agent-tool run no hook has seen yet
        if _cut_off(result, sdk.output_limit(result.last_agent, tap.settings)):
            self._keep(tap, ctx, start, result)
            raise IncompleteOutput("The model stopped early (max_tokens): the output is cut off")
        ctx.state.pop(STATE_KEY, None)
        return output_text(result.final_output)

    async def _run(self, run_input: str | list[Any], tap: Tap, ctx: ChildContext) -> RunResult:
        """``Runner.run`` with lyra's seams, in a task of its own (:func:`contained`). A
        RunConfig lyra made (the user gave none) has its model provider closed as the
        run ends, as the SDK closes the one it makes for ``run_config=None``."""
        from agents import Runner

        sdk = self._sdk
        config = sdk.run_config(tap, self.run_config)
        run = Runner.run(
            sdk.with_ask_tool(self.agent, ctx) if self.ask_tool else self.agent,
            run_input,
            context=self._context(ctx),
            max_turns=self.max_turns,
            hooks=tap,
            run_config=config,
            error_handlers=self.error_handlers,
            # A fresh attempt (after a context overflow) runs without the
            # session: it holds the transcript that outgrew the window.
            session=None if ctx.fresh else self.session,
        )
        if self.run_config is not None:  # the user's, and so is its provider
            return await contained(run)
        try:
            result = await contained(run)
        except BaseException:
            await sdk.close_provider(config.model_provider, shielded=True)
            raise
        await sdk.close_provider(config.model_provider)
        return result

    def _context(self, ctx: ChildContext) -> Any:
        """The SDK context: the user's, one built from ``ctx``, or ``ctx`` itself."""
        if self.context_factory is not None:
            return self.context_factory(ctx)
        return self.context if self.context is not None else ctx

    def _input(self, prompt: str, ctx: ChildContext) -> tuple[str | list[Any], int]:
        """The run's input and how many items it has: on a later attempt of the task, the
        saved conversation with the prompt (the continuation) as the next user message."""
        resumes = ctx.attempt > 1 and self.session is None and not ctx.fresh
        saved = ctx.state.get(STATE_KEY) if resumes else None
        history = saved.get("history") if isinstance(saved, dict) else None
        if not isinstance(history, list) or not history:
            return prompt, 1
        return [*history, {"role": "user", "content": prompt}], len(history) + 1

    def _keep(self, tap: Tap, ctx: ChildContext, start: int, run_data: Any = None) -> None:
        """On a failure: charge what the SDK counted and no hook charged yet, and keep
        the conversation for the next attempt (when the model answered at all)."""
        with suppress(BudgetExhausted):  # recorded; the attempt is ending anyway
            tap.settle()
        if self.session is not None:
            return
        history = tap.history(start, run_data)
        if history is not None:
            ctx.state[STATE_KEY] = {"history": history}


def _cut_off_unread(exc: Exception) -> bool:
    """True for the SDK's error on an answer cut off at its output limit, raised before
    any hook saw the answer's usage: any cut-off answer of the Responses API, one of
    Chat Completions with no text (``lyra.delegation._foreign._openai_agents`` reads
    the same words to call it partial)."""
    said = str(exc)
    return type(exc).__name__ == "ModelBehaviorError" and (
        "reason='max_output_tokens'" in said or "finish_reason='length'" in said
    )


def _cut_off(result: Any, limit: int | None) -> bool:
    """True when the run's last response ended in a message the model did not finish:
    ``status="incomplete"`` (the Responses API), or as many output tokens as its
    ``max_tokens`` (``limit``) allowed (over Chat Completions the SDK keeps no
    ``finish_reason='length'`` for an answer with text: the count is what tells)."""
    responses = getattr(result, "raw_responses", None) or ()
    if not responses:
        return False
    last = responses[-1]
    if any(
        getattr(item, "type", None) == "message" and getattr(item, "status", None) == "incomplete"
        for item in last.output
    ):
        return True
    return limit is not None and last.usage.output_tokens >= limit


def _model_and_client(name: str | None) -> None:
    """Build the model the SDK would build for ``name`` at the run, and touch its
    client's APIs, whose modules the openai SDK imports on first use (the client is
    not public: it is read defensively)."""
    from agents.models.multi_provider import MultiProvider

    client = getattr(MultiProvider().get_model(name), "_client", None)
    if client is not None:
        _ = client.responses, client.chat.completions
