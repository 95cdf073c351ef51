"""Google ADK agents as lyra children: ``GoogleADKChild(agent)``.

Install the ``google-adk`` extra (``pip install -e '.[google-adk]'`` in a lyra checkout,
or ``pip install 'google-adk>=2.13,<3'``); importing this module
does not import ADK (building a child does, and warms it: nothing is imported
inside a deadline). The agent goes in as it is -- an ``LlmAgent``, a workflow
agent (``SequentialAgent``, ``ParallelAgent``, ``LoopAgent``; ADK 2 deprecates
them for its graph ``Workflow``, which goes in too), or an ``App`` around one --
and runs on ADK's own ``Runner`` with an in-memory session::

    from google.adk.agents import LlmAgent
    from google.adk.agents.run_config import RunConfig
    from lyra import Budget, adelegate_task
    from lyra.children.google_adk import GoogleADKChild, current_context

    async def ask_expert(question: str) -> str:
        '''Ask the expert agent.'''
        found = await current_context().delegate(question, child=expert, timeout=120)
        return found.output if found.ok else found.report

    agent = LlmAgent(name="triage", model="gemini-2.5-flash", tools=[ask_expert])
    report = await adelegate_task(
        "Triage issue 42", child=GoogleADKChild(agent, run_config=RunConfig(max_llm_calls=20)),
        timeout=600, idle_timeout=60, budget=Budget(max_tokens=200_000),
    )

**The tree's limits hold inside the run.** A plugin of lyra's joins the app
(ADK's own extension point; plugins run before every agent's callbacks, for
every agent of a workflow; see :mod:`._google_adk_run`):

- before each model request a turn is charged *ahead*, so a spent account
  refuses the request before it reaches the model (nor counts toward ADK's
  ``max_llm_calls``); a cost budget on a model lyra cannot price is refused
  before anything is sent;
- each response's ``usage_metadata`` (prompt, cached, thinking and tool-use
  tokens) is charged and priced (lyra's table, or ``prices=``) as it arrives,
  and is a heartbeat, as is each streamed chunk;
- each tool call is progress (``ctx.tool_started`` / ``ctx.tool_ended``; a
  successful one is the step ``Ran <tool>``); a ``ctx.block(...)`` in a tool
  ends the run before the model is asked again, even if the tool caught it;
- the budget, the deadline and the idle timeout cancel the run at once: ADK's
  runner cancels and awaits its background task, so nothing is left behind.

**How a run ends.** ADK's own ``RunConfig.max_llm_calls`` (default 500) is
``timeout`` / ``budget``, never a success; a final answer cut off at
``MAX_TOKENS`` is ``partial``; a safety, recitation or blocklist stop is
``invalid_task``; a long-running tool called in the run is ``missing_context``
naming it (its result comes from the caller after the run, even when it first
answered "pending" and the model went on). ADK wraps an exception raised in a plugin in a
``RuntimeError``; lyra classifies what it wraps. Every public exception of ADK
and of ``google.genai`` (``ClientError`` / ``ServerError`` by their HTTP status)
is mapped in :mod:`lyra.delegation._foreign._google_adk`.

**The result** is the text of the last final response the run yielded (for a
sequential workflow, its last agent's; for a ``ParallelAgent``, the branch that
finished last, whichever that was: merge branches through their ``output_key``
in a following agent); with ``output_key=`` it is that key of the session state
at the end instead (where an ``LlmAgent(output_key=...)`` keeps its answer).
Structured output becomes JSON text.

**Continuation.** When an attempt fails after a model answered, the session's
events (ADK's history: messages, calls, results) are kept in ``ctx.state`` as
JSON data; the next attempt of the task (a recovery loop's continuation, a
durable run's retry) replays them into its new session before its prompt, so
the work done is not redone. A call the stopped run left unanswered gets an
error answer. A success clears them.

**The ChildContext in a tool**: :func:`current_context` (ADK hands a tool its
``ToolContext``, not lyra's; the run's context travels with the task, into
sync tools' worker threads too).

**Traces.** ADK's own OpenTelemetry spans (``invoke_agent``, ``generate_content``,
``execute_tool``) go to the global tracer provider and become children of
lyra's ``invoke_agent`` span of the attempt; lyra makes no model or tool span of
its own for this child.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from lyra.children._framework import (
    check_each,
    check_flags,
    check_options,
    check_prices,
    check_wraps,
    framework,
    labelled,
    model_named,
)
from lyra.children._pricing import Price, PriceList
from lyra.delegation import ChildContext

if TYPE_CHECKING:
    from google.adk.agents import RunConfig
    from google.adk.apps import App
    from google.adk.plugins.base_plugin import BasePlugin
    from google.adk.workflow import BaseNode

__all__ = ["EXTRA", "GoogleADKChild", "current_context"]

EXTRA = "google-adk"
"""The extra that installs Google ADK."""

_current: ContextVar[ChildContext | None] = ContextVar("lyra_google_adk_context", default=None)


def current_context() -> ChildContext:
    """The :class:`~lyra.ChildContext` of the :class:`GoogleADKChild` run that called
    this tool or callback. Raises ``RuntimeError`` outside such a run."""
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError("current_context() is only available inside a GoogleADKChild run")
    return ctx


class GoogleADKChild:
    """A Google ADK agent (any ``BaseNode``: an agent or a ``Workflow``; or an ``App``)
    as a lyra child, run by ADK's ``Runner``.

    ``run_config`` is ADK's ``RunConfig`` for every run (its ``max_llm_calls`` is ADK's
    own turn limit; ADK's tool thread pool is turned on unless it sets one, so that a
    sync tool stuck in blocking code cannot stop the event loop); ``plugins`` are added
    after lyra's (an ``App``'s own plugins are kept); ``state`` is each session's
    initial state; ``output_key`` reads the result from the session state; ``prices``
    adds to lyra's price table, for the models it does not know. ``app_name`` and
    ``user_id`` name the in-memory sessions (default: the agent's name, ``"lyra"``).
    ``ask_tool=True`` gives every model request lyra's ``ask_question`` tool (its
    question goes through ``ctx.ask``); ``show_limits=True`` appends the time and budget
    the task has left to each request's instructions.
    """

    def __init__(
        self,
        agent: BaseNode | App,
        *,
        run_config: RunConfig | None = None,
        plugins: Sequence[BasePlugin] = (),
        state: Mapping[str, Any] | None = None,
        output_key: str | None = None,
        prices: Mapping[str, Price] | None = None,
        app_name: str | None = None,
        user_id: str = "lyra",
        ask_tool: bool = False,
        show_limits: bool = False,
    ) -> None:
        framework("google.adk", extra=EXTRA, child="GoogleADKChild")
        from lyra.children import _google_adk_run as adk

        what = "a Google ADK agent (LlmAgent, a workflow agent, a Workflow) or App"
        check_wraps(agent, (adk.BaseNode, adk.App), child="GoogleADKChild", what=what)
        check_options(
            "GoogleADKChild",
            run_config=(run_config, adk.RunConfig),
            state=(state, Mapping),
            output_key=(output_key, str),
            app_name=(app_name, str),
        )
        if not isinstance(user_id, str) or not user_id:  # (ADK's session needs a user: not None)
            raise TypeError(f"GoogleADKChild's user_id= must be a non-empty str; got {user_id!r}")
        check_each("GoogleADKChild", plugins=(plugins, adk.BasePlugin))
        adk.check_app_name(app_name)
        check_prices("GoogleADKChild", prices)
        check_flags("GoogleADKChild", ask_tool=ask_tool, show_limits=show_limits)
        self.agent = agent
        self.run_config = run_config
        self._run_config = adk.tools_in_threads(run_config)
        """What each run is given: ``run_config`` with ADK's tool thread pool on."""
        self.state = state
        self.output_key = output_key
        self.prices = prices
        self.user_id = user_id
        self.ask_tool = ask_tool
        self.show_limits = show_limits
        self._price = PriceList(prices)
        self._run = adk.Run(agent, plugins=plugins, app_name=app_name)
        """ADK's runner over the agent, with lyra's plugin (made once)."""
        adk.warm()

    @property
    def name(self) -> str:
        """The child as a report names it (its agent's (or App's) name and model)."""
        model = getattr(getattr(self.agent, "root_agent", self.agent), "model", None)
        return labelled("GoogleADKChild", self.agent.name, model_named(model))

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        """Run the agent once on ``prompt`` under ``ctx``'s limits; its result as text."""
        token = _current.set(ctx)  # ADK's tasks and tool threads inherit it
        try:
            return await self._run(
                prompt,
                ctx,
                prices=self._price,
                user_id=self.user_id,
                run_config=self._run_config,
                state=self.state,
                output_key=self.output_key,
                ask=self.ask_tool,
                limits=self.show_limits,
            )
        finally:
            _current.reset(token)
