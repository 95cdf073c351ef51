"""LangGraph graphs as lyra children: ``LangGraphChild(graph)``.

Install the ``langgraph`` extra (``pip install -e '.[langgraph]'`` in a lyra
checkout: LangGraph and langchain-core) and hand lyra the compiled graph you already
have::

    from lyra import Budget, adelegate_task
    from lyra.children.langgraph import LangGraphChild

    report = await adelegate_task(
        "Triage issue 42",
        child=LangGraphChild(graph, recursion_limit=40),
        timeout=600, idle_timeout=60, budget=Budget(max_tokens=200_000),
    )

The graph goes in unchanged and runs as ``graph.ainvoke`` would run it:
``config``, ``context`` (LangGraph's runtime context), ``recursion_limit`` and any
other run option (``durability=``, ``interrupt_before=``, …) are passed through.
``input(prompt)`` makes the graph's input (default: ``{"messages": [HumanMessage(prompt)]}``)
and ``output(state)`` the result from the final state (default: the
``structured_response`` if there is one, else the last AI message's text);
structured output becomes JSON text.

**The limits hold inside the run.** A langchain-core callback handler rides in
the run's config (beside the callbacks you pass) and reaches every model and
tool of the graph, its subgraphs and chains included:

- each model request is a turn charged *ahead*: a spent budget refuses it
  before it is sent; each response charges its tokens (``usage_metadata``) and
  cost (lyra's price table, or ``prices=``) once, and is a heartbeat;
- each tool call is progress at its start and end and, when it succeeds, a
  completed step (``✓ Ran lookup``), so the idle timeout works on a real agent
  and a stuck tool is ended by it;
- a node's own ``TimeoutPolicy`` heartbeats (``runtime.heartbeat()``) are
  progress too (see :func:`_node_observer_key`);
- going over the budget, the deadline or the idle timeout cancels the run at
  once: LangGraph cancels its node tasks, and the spend so far is in the report.

**How a run ends.** The recursion limit (``GraphRecursionError``), and a prebuilt
agent's "Sorry, need more steps" answer, are ``timeout`` / ``budget``, never a
success; a node's ``NodeTimeoutError`` is ``timeout`` (``idle`` for its idle
timeout); an interrupt (``interrupt()``, human in the loop) is ``missing_context``
with the question as the blocker, a static one (``interrupt_before=`` /
``interrupt_after=``) with the node it stopped at; ``ctx.block(...)`` in a tool holds even when a
``ToolNode`` turns the exception into a message (the run ends at its next model
request or tool call). Every exception is classified by
:mod:`lyra.delegation._foreign` (LangGraph's and langchain-core's, and the chat
models' provider SDK errors, which reach lyra unwrapped).

**The ChildContext in the graph.** It rides in LangGraph's own config, at
``config["configurable"]["lyra_context"]``, beside your configurable keys and
your runtime ``context`` (which lyra never touches). A node or tool that takes a
``config: RunnableConfig`` parameter (or a ``ToolRuntime``) gets it with
:func:`child_context`, and may ``await ctx.delegate(...)`` a grandchild under
the same tree and limits (a LangGraph grandchild inherits this run's callbacks,
lyra's handler included; its calls are charged once, by its own handler)::

    @tool
    async def research(topic: str, config: RunnableConfig) -> str:
        '''Research a topic.'''
        result = await child_context(config).delegate(topic, child=researcher)
        return result.output or f"research failed: {result.failure.category}"

**Continuation.** A retry of the same task (``ctx.attempt > 1``) goes on from
the work done. A graph compiled with a checkpointer runs on a thread whose id
is kept in ``ctx.state``; the retry resumes that thread: an interrupted graph
gets the retry's prompt (after ``missing_context``, the prompt enriched by
your ``context_provider``) as the answer, ``Command(resume=prompt)``; where the
last run stopped inside a step, LangGraph runs that step again (nothing
finished is redone); otherwise, or when the prompt was enriched, the new
prompt joins the thread's history. A graph without a checkpointer but with a ``messages`` state
key gets its messages saved in ``ctx.state`` as JSON data
(``messages_to_dict``) and handed back, before the new prompt, on the retry. A
tool call the stopped run left unanswered gets an error answer, so the history
stays one a provider accepts.

**Traces.** LangGraph and langchain-core emit no OpenTelemetry spans (their
tracing is LangSmith's); lyra's ``invoke_agent`` span of each attempt carries
the run's usage, charged once per model response.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from lyra.children._framework import (
    ASK_DESCRIPTION,
    ASK_TOOL,
    check_at_least_one,
    check_flags,
    check_options,
    check_prices,
    check_wraps,
    contained,
    framework,
    labelled,
    limits_text,
    output_text,
)
from lyra.children._meter import Meter
from lyra.children._pricing import PriceList
from lyra.delegation import ChildContext, FailureCategory
from lyra.errors import ConfigurationError, ForeignCancellation, IncompleteOutput, TaskRejected

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool
    from langgraph.pregel import Pregel

    from lyra.children._pricing import Price

__all__ = ["CONTEXT_KEY", "LangGraphChild", "ask_tool", "child_context"]

CONTEXT_KEY = "lyra_context"
"""Where the ChildContext rides in a run's ``config["configurable"]``."""
_STATE_KEY = "langgraph"
_OUT_OF_STEPS = "Sorry, need more steps to process this request."
"""What LangGraph's prebuilt ReAct agent answers when its ``remaining_steps`` run out."""
_NOT_RUN = "Not run: the previous attempt stopped before this tool call finished."


class LangGraphChild:
    """A compiled LangGraph graph (``StateGraph(...).compile()``, a prebuilt agent,
    an ``@entrypoint``) as a lyra child.

    ``input(prompt)`` builds the graph's input and ``output(state)`` the result
    from its final state (text, or structured data serialised as JSON).
    ``config``, ``context``, ``recursion_limit`` and ``**options``
    (``durability``, ``interrupt_before``, …) are ``graph.ainvoke``'s own.
    ``prices`` adds or replaces entries of lyra's price table, for the cost of
    models it does not know (a cost budget needs a price for every model).
    ``show_limits=True`` starts the default messages input with a system message
    saying the time and budget the task has left (a node reads them live from
    :func:`child_context`: ``time_left``, ``budget_left``). A graph asks questions
    with :func:`ask_tool` among its tools.
    """

    def __init__(
        self,
        graph: Pregel[Any, Any, Any, Any],
        *,
        input: Callable[[str], Any] | None = None,
        output: Callable[[Any], Any] | None = None,
        config: RunnableConfig | None = None,
        context: Any = None,
        recursion_limit: int | None = None,
        prices: Mapping[str, Price] | None = None,
        show_limits: bool = False,
        **options: Any,
    ) -> None:
        graphs = framework("langgraph.pregel.protocol", extra="langgraph", child="LangGraphChild")
        what = "a compiled LangGraph graph"  # a Pregel, or a RemoteGraph
        builder = hasattr(graph, "compile")  # a StateGraph, not yet compiled
        remedy = ": call its .compile() first" if builder else ""
        check_wraps(graph, graphs.PregelProtocol, child="LangGraphChild", what=what, remedy=remedy)
        framework("langchain_core.callbacks", extra="langgraph", child="LangGraphChild")
        from lyra.children import _langgraph_hooks

        check_options(
            "LangGraphChild",
            input=(input, None),
            output=(output, None),
            config=(config, Mapping),
            recursion_limit=(recursion_limit, int),
        )
        check_at_least_one("LangGraphChild", recursion_limit=recursion_limit)
        check_prices("LangGraphChild", prices)
        check_flags("LangGraphChild", show_limits=show_limits)
        _langgraph_hooks.quiet_own_stops()
        self._hooks = _langgraph_hooks.LyraCallbacks
        self.graph = graph
        self.show_limits = show_limits
        self.input = input
        self.output = output
        self.config = config
        self.context = context
        self.recursion_limit = recursion_limit
        self.prices = prices
        self._price = PriceList(prices)
        self.options = _checked_options(type(graph), options)
        self._observer = _node_observer_key()
        from langgraph.checkpoint.base import BaseCheckpointSaver

        self.checkpointed = isinstance(getattr(graph, "checkpointer", None), BaseCheckpointSaver)
        """True when the graph keeps its state in a checkpointer (a thread to resume)."""
        # (a static interrupt's stop shows only in "updates": streamed only where one can be)
        self._modes: Any = ["values", "updates"] if self._can_halt() else "values"

    @property
    def name(self) -> str:
        """The child as a report names it (its graph's name)."""
        return labelled("LangGraphChild", getattr(self.graph, "name", None))

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        """Run the graph once under ``ctx``'s limits and return its result text."""
        hooks = self._hooks(Meter(ctx, self._price, child="LangGraphChild"))
        config = self._config(ctx, hooks)
        graph_input = await self._input(prompt, ctx, config)
        seen: dict[str, Any] = {"state": None, "interrupts": (), "stopped": False, "ran": None}

        async def stream() -> None:
            with hooks.running():
                async for part in self.graph.astream(
                    graph_input,
                    config,
                    context=self.context,
                    stream_mode=self._modes,
                    version="v2",
                    **self.options,
                ):
                    if part["type"] == "values":
                        seen["state"] = part["data"]
                        seen["interrupts"] = part.get("interrupts") or seen["interrupts"]
                    else:
                        _updated(seen, part["data"])

        from langgraph.errors import NodeCancelledError

        try:
            try:
                await contained(stream())
            except NodeCancelledError as exc:  # a CancelledError a node raised, nobody's
                where = f"raised inside the graph's run, by its node {getattr(exc, 'node', '?')!r}"
                raise ForeignCancellation(where) from exc.__cause__ or exc
            state = seen["state"]
            if seen["interrupts"]:
                ctx.block(FailureCategory.MISSING_CONTEXT, _asked(seen["interrupts"]))
            if seen["stopped"]:  # a static interrupt: no question, a node to resume at
                ctx.block(FailureCategory.MISSING_CONTEXT, await self._halted(config, seen))
            return output_text(self.output(state) if self.output else _answer(state))
        except BaseException:  # cancellation included: keep the work for a retry
            self._remember(ctx, seen["state"])
            raise

    async def _halted(self, config: RunnableConfig, seen: Mapping[str, Any]) -> str:
        """The blocker of a run that stopped at a static interrupt (``interrupt_before``
        / ``interrupt_after``, the run's or the compiled graph's): the node it names."""
        after = self._breakpoints("interrupt_after")
        if seen["ran"] is not None and (after == "*" or seen["ran"] in after):
            where = f"after node {seen['ran']!r} (interrupt_after)"
        else:
            before = self._breakpoints("interrupt_before")
            waiting = (await self.graph.aget_state(config)).next if self.checkpointed else ()
            nodes = [n for n in waiting if before == "*" or n in before] or list(waiting)
            nodes = nodes or ([] if before == "*" else list(before))  # (no checkpointer)
            named = f"node {' or '.join(map(repr, nodes))}" if nodes else "its next node"
            where = f"before {named} (interrupt_before)"
        return f"The graph stopped {where}, waiting for a human to review and resume it"

    def _can_halt(self) -> bool:
        """True when the run may stop at a breakpoint: the run's, or one compiled into the
        graph or any subgraph it holds (one a node builds as it runs is not seen)."""
        if self._breakpoints("interrupt_before") or self._breakpoints("interrupt_after"):
            return True
        with suppress(Exception):  # (a graph that cannot list its subgraphs: none known)
            for _, sub in self.graph.get_subgraphs(recurse=True):
                if getattr(sub, "interrupt_before_nodes", None) or getattr(
                    sub, "interrupt_after_nodes", None
                ):
                    return True
        return False

    def _breakpoints(self, option: str) -> Any:
        """The run's ``interrupt_before``/``_after`` (else the graph's, as LangGraph reads
        them): ``"*"`` or node names."""
        return self.options.get(option) or getattr(self.graph, f"{option}_nodes", None) or ()

    # -- the run's config --------------------------------------------------------------

    def _config(self, ctx: ChildContext, hooks: Any) -> RunnableConfig:
        """The user's config with lyra's callbacks, the context, and a thread to resume."""
        config: dict[str, Any] = dict(self.config or {})
        configurable = dict(config.get("configurable") or {})
        configurable[CONTEXT_KEY] = ctx
        if self.checkpointed:
            saved = _saved(ctx)
            kept = saved.get("thread_id") if saved and not ctx.fresh else None
            configurable.setdefault("thread_id", kept or f"lyra-{ctx.session_id}")
            ctx.state[_STATE_KEY] = {"thread_id": configurable["thread_id"]}
        if self._observer is not None:
            configurable[self._observer] = _observers(
                configurable.get(self._observer), hooks.node_progress
            )
        config["configurable"] = configurable
        config["callbacks"] = _with_handler(config.get("callbacks"), hooks)
        if self.recursion_limit is not None:
            config["recursion_limit"] = self.recursion_limit
        return config  # type: ignore[return-value]

    # -- continuation -------------------------------------------------------------------

    async def _input(self, prompt: str, ctx: ChildContext, config: RunnableConfig) -> Any:
        """The graph's input: the prompt's, after the work a previous attempt kept."""

        fresh = self.input(prompt) if self.input else self._messages(prompt, ctx)
        saved = _saved(ctx)
        if saved is None or ctx.fresh:  # (ctx.fresh: the transcript outgrew the window)
            return fresh
        if self.checkpointed:
            snapshot = await self.graph.aget_state(config)
            if snapshot.interrupts:  # the graph asked; the retry's prompt (enriched) answers
                from langgraph.types import Command

                return Command(resume=prompt)
            if snapshot.next and ctx.context.get("strategy") != "enrichment":
                return None  # LangGraph runs again the step that did not finish
            values = snapshot.values if isinstance(snapshot.values, Mapping) else {}
            return _before(fresh, _unanswered(values.get("messages")))
        history = _restored(saved.get("messages"))
        return _before(fresh, [*history, *_unanswered(history)]) if history else fresh

    def _messages(self, prompt: str, ctx: ChildContext) -> dict[str, Any]:
        """The default input: the prompt as a human message (after the limits, as a
        system message, with ``show_limits``)."""
        from langchain_core.messages import HumanMessage, SystemMessage

        messages: list[BaseMessage] = [HumanMessage(prompt)]
        if self.show_limits:
            messages.insert(0, SystemMessage(limits_text(ctx)))
        return {"messages": messages}

    def _remember(self, ctx: ChildContext, state: Any) -> None:
        """Keep the messages of a failed run (no checkpointer) as JSON data in ctx.state."""
        if self.checkpointed or not isinstance(state, Mapping):
            return
        from langchain_core.messages import BaseMessage, messages_to_dict

        messages = state.get("messages")
        if not isinstance(messages, list) or not messages:
            return
        if not all(isinstance(message, BaseMessage) for message in messages):
            return
        try:
            data = json.loads(json.dumps(messages_to_dict(messages), default=str))
        except (TypeError, ValueError):  # never let saving hide the run's own failure
            return
        ctx.state[_STATE_KEY] = {"messages": data}


def ask_tool() -> BaseTool:
    """A LangChain tool, ``ask_question``, that asks the running attempt's question
    through ``ctx.ask`` (answered by the delegation's ``answer=``, a parent, an MCP
    or A2A client): add it to the graph's tools, as ``ToolNode([..., ask_tool()])``."""
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import StructuredTool

    async def ask_question(question: str, config: RunnableConfig) -> str:
        return await child_context(config).ask(question)

    # Read by langchain-core when it builds the tool's schema (this module's
    # annotations are strings, and RunnableConfig is imported here only).
    ask_question.__annotations__ = {"question": str, "config": RunnableConfig, "return": str}

    return StructuredTool.from_function(
        coroutine=ask_question, name=ASK_TOOL, description=ASK_DESCRIPTION
    )


def child_context(config: Mapping[str, Any] | None = None) -> ChildContext:
    """The ChildContext of the attempt running this graph, from a node's or tool's
    ``config`` (without one, from LangGraph's ``get_config()``)."""
    if config is None:
        from langgraph.config import get_config

        config = get_config()
    ctx = (config.get("configurable") or {}).get(CONTEXT_KEY)
    if not isinstance(ctx, ChildContext):
        raise ConfigurationError("this graph is not running as a lyra LangGraphChild")
    return ctx


def _node_observer_key() -> str | None:
    """The config key of LangGraph's observer of timed node attempts, or ``None``.

    LangGraph has no public hook for a node's progress: ``runtime.heartbeat()``
    refreshes only the node's own ``TimeoutPolicy``. Its runner reports the start,
    progress and end of every timed attempt to the observer at this key
    (LangGraph Server's hook; a private module, so a release may drop it, and
    then node heartbeats simply stop counting for lyra). Progress reports come at
    most four times per node idle window.
    """
    try:
        from langgraph._internal._constants import CONFIG_KEY_TIMED_ATTEMPT_OBSERVER
    except ImportError:
        return None
    return CONFIG_KEY_TIMED_ATTEMPT_OBSERVER


def _observers(previous: Any, ours: Callable[[Any], None]) -> Callable[[Any], None]:
    """Our node observer, after one the caller had set already."""
    if not callable(previous):
        return ours

    def both(event: Any) -> None:
        previous(event)
        ours(event)

    return both


def _with_handler(callbacks: Any, handler: Any) -> Any:
    """The run's callbacks (a list, a callback manager or none) with ``handler`` added."""
    if callbacks is None:
        return [handler]
    if isinstance(callbacks, list | tuple):
        return [*callbacks, handler]
    manager = callbacks.copy()
    manager.add_handler(handler, inherit=True)
    return manager


def _saved(ctx: ChildContext) -> dict[str, Any] | None:
    """What an earlier attempt of this task kept, on a retry."""
    saved = ctx.state.get(_STATE_KEY) if ctx.attempt > 1 else None
    return saved if isinstance(saved, dict) else None


def _restored(data: Any) -> list[BaseMessage]:
    """Messages kept as JSON data; none when they no longer read as messages."""
    from langchain_core.messages import messages_from_dict

    if not isinstance(data, list):
        return []
    try:
        return messages_from_dict(data)
    except (KeyError, TypeError, ValueError):
        return []


def _unanswered(messages: Any) -> list[BaseMessage]:
    """Error answers for the tool calls of the last AI message that no tool answered
    (the run stopped while they ran), so the history stays one providers accept."""
    from langchain_core.messages import AIMessage, ToolMessage

    if not isinstance(messages, list):
        return []
    ai = [i for i, message in enumerate(messages) if isinstance(message, AIMessage)]
    if not ai:
        return []
    last = ai[-1]
    answered = {m.tool_call_id for m in messages[last:] if isinstance(m, ToolMessage)}
    return [
        ToolMessage(_NOT_RUN, tool_call_id=call["id"], name=call["name"], status="error")
        for call in messages[last].tool_calls
        if call.get("id") and call["id"] not in answered
    ]


def _before(graph_input: Any, messages: list[BaseMessage]) -> Any:
    """``graph_input`` with ``messages`` ahead of its own (when it has a messages list)."""
    if not messages or not isinstance(graph_input, Mapping):
        return graph_input
    own = graph_input.get("messages")
    if not isinstance(own, list | tuple):
        return graph_input
    return {**graph_input, "messages": [*messages, *own]}


def _answer(state: Any) -> Any:
    """The default result: a structured response, else the last AI message's text."""
    from langchain_core.messages import AIMessage
    from langgraph.errors import GraphRecursionError

    if state is None:
        raise IncompleteOutput("The graph ended without a state")
    if not isinstance(state, Mapping):
        return state  # a state model: serialised as JSON
    if state.get("structured_response") is not None:
        return state["structured_response"]
    messages = state.get("messages")
    if not isinstance(messages, list):
        return dict(state)
    message = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    if message is None:
        raise IncompleteOutput("The graph ended without an answer (no AI message)")
    refused = _said(message, _REFUSED)
    if refused is not None:
        raise TaskRejected(f"The model refused the request ({refused})")
    if _said(message, _CUT_OFF) is not None:
        raise IncompleteOutput("The model stopped early (max_tokens): the output is cut off")
    text = str(message.text)
    if text == _OUT_OF_STEPS:  # the prebuilt agent ran out of remaining_steps
        raise GraphRecursionError(f"The agent ran out of steps and answered {text!r}")
    return text


_CUT_OFF: dict[str, tuple[str, ...]] = {
    "stop_reason": ("max_tokens",),  # Anthropic's (ChatAnthropic, Bedrock)
    "finish_reason": ("length", "MAX_TOKENS"),  # OpenAI's, Gemini's
    "done_reason": ("length",),  # Ollama's
}
"""How chat-model integrations say, in a message's ``response_metadata``, that the
output limit cut the answer off."""


_REFUSED: dict[str, tuple[str, ...]] = {
    "stop_reason": ("refusal",),  # Anthropic's
    "finish_reason": (  # OpenAI's (and Azure's) content filter; Gemini's blocks
        "content_filter",
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
    ),
}
"""How they say that the provider withheld the answer (a refusal, a content filter)."""


def _said(message: Any, reasons: Mapping[str, tuple[str, ...]]) -> str | None:
    """The stop reason of ``message``'s ``response_metadata`` among ``reasons``, if any
    (``"finish_reason content_filter"``)."""
    meta = getattr(message, "response_metadata", None)
    if not isinstance(meta, Mapping):
        return None
    for key, said in reasons.items():
        if meta.get(key) in said:
            return f"{key} {meta[key]}"
    return None


def _updated(seen: dict[str, Any], update: Any) -> None:
    """Keep what an ``updates`` part says: a static interrupt's stop, else the node that
    ran (a dynamic interrupt's ``values`` part names it too)."""
    if "__interrupt__" in update:
        seen["stopped"] = True
    elif update:
        seen["ran"] = next(iter(update))


def _asked(interrupts: Sequence[Any]) -> str:
    """The blocker of an interrupted graph: what it is waiting for."""
    asked = "; ".join(str(getattr(item, "value", item)) for item in interrupts)
    return f"The graph is waiting for input (interrupt): {asked}"


_SET_BY_LYRA = frozenset({"self", "input", "config", "context", "stream_mode", "version"})
_DEPRECATED = frozenset({"checkpoint_during"})
"""Keywords LangGraph still takes through ``**kwargs`` (with a warning of its own)."""


def _checked_options(graph: type, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` for ``astream``, refused when it takes no such keyword (its
    ``**kwargs`` would swallow a misspelt ``durabilty=`` without a word)."""
    parameters = inspect.signature(graph.astream).parameters  # type: ignore[attr-defined]
    keywords = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    known = sorted(
        name
        for name, parameter in parameters.items()
        if parameter.kind in keywords and name not in _SET_BY_LYRA
    )
    unknown = sorted(set(options) - set(known) - _DEPRECATED)
    if unknown:
        raise TypeError(
            f"LangGraphChild got unexpected options {unknown}; "
            f"the graph's astream takes {', '.join(known)}"
        )
    return options
