"""One run of a Google ADK agent under a lyra ChildContext: ADK's runner, and the
plugin through which the delegation's limits reach into it.

Imported only by :class:`lyra.children.google_adk.GoogleADKChild` once ADK is
known to be installed (this module imports ``google.adk``).

:class:`Limits` is an ADK *plugin* (``BasePlugin``), the app-wide extension
point: ADK calls it before every agent's own callbacks, for every agent of a
workflow. One plugin serves every run of the child; each hook finds its
attempt through :data:`current_run`, which the runner's background task
inherits.

- ``before_model_callback``: the shared meter's block check, unpriced refusal
  and turn charged ahead (ADK calls it before it counts the call toward
  ``max_llm_calls``, so a request lyra refuses is neither sent nor counted, and
  one ADK is about to refuse for its own limit is not charged);
- ``after_model_callback``: the response's ``usage_metadata`` charged (a
  streamed chunk is a heartbeat);
- ``before_tool_callback`` / ``after_tool_callback`` / ``on_tool_error_callback``:
  the tool call as progress.

ADK re-raises an exception from a plugin as ``RuntimeError("Error in plugin
...")`` with the original as its cause: :meth:`Run.__call__` raises the original.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import anyio
import orjson
from google.adk.agents import LlmAgent, RunConfig
from google.adk.agents.run_config import ToolThreadPoolConfig
from google.adk.apps import App
from google.adk.apps.app import validate_app_name
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService, Session
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext
from google.adk.workflow import BaseNode
from google.genai import types

from lyra.children._framework import (
    ASK_DESCRIPTION,
    OWN_STOPS,
    contained,
    limits_text,
    output_text,
    tool_done,
)
from lyra.children._meter import DEFAULT_OUTPUT, Meter, Tokens, text_bytes
from lyra.children._pricing import PriceList
from lyra.delegation import ChildContext, FailureCategory
from lyra.errors import ForeignCancellation, IncompleteOutput, TaskRejected

__all__ = [
    "App",
    "BaseNode",
    "BasePlugin",
    "Limits",
    "Run",
    "RunConfig",
    "check_app_name",
    "tools_in_threads",
    "warm",
]

_CUT_OFF = frozenset({"MAX_TOKENS"})
_REFUSED = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
)
"""Finish and block reasons of a final response: the answer is cut off, or refused."""
_PLUGIN_ERROR = "Error in plugin "
_WAITING = "The agent waits for the results of long-running tool calls: "
_NOT_RUN = "not run: the previous attempt stopped before this call finished"
STATE_KEY = "google_adk"
"""Where a failed attempt keeps its session events in ``ctx.state`` (JSON data)."""

current_run: ContextVar[Attempt | None] = ContextVar("lyra_google_adk_run", default=None)
"""The attempt a task runs an ADK agent for (the plugin's hooks read it)."""


class Attempt:
    """What the hooks of one attempt share: its meter, each agent's model, and whether
    the agent gets lyra's question tool and sees its limits."""

    __slots__ = ("ask", "ctx", "limits", "meter", "models")

    def __init__(self, meter: Meter, *, ask: bool = False, limits: bool = False) -> None:
        self.meter = meter
        self.ctx: ChildContext = meter.ctx
        self.models: dict[str, str | None] = {}
        """The model each agent last asked (a response may not name its model)."""
        self.ask = ask
        self.limits = limits


async def ask_question(question: str) -> str:
    """(ASK_DESCRIPTION, set below)"""
    attempt: Attempt | None = current_run.get()
    if attempt is None:
        raise RuntimeError("ask_question is lyra's tool: it runs inside a GoogleADKChild run")
    return await attempt.ctx.ask(question)


ask_question.__doc__ = ASK_DESCRIPTION
_ASK = FunctionTool(ask_question)


async def _before(meter: Meter, model: str | None, agent: str, llm_request: LlmRequest) -> None:
    """The request's turn, charged ahead; under a token budget its worst case held too,
    and its ``max_output_tokens`` capped to what that leaves."""
    config = llm_request.config
    wanted = config.max_output_tokens if config is not None else None
    limit = wanted if wanted is not None else DEFAULT_OUTPUT
    allowed = await meter.before_request(
        model,
        provider=provider_of(model),
        key=agent,
        text_bytes=_sent(llm_request) if meter.token_limited else None,
        output=limit,
        capped=True,
    )
    if allowed is not None and config is not None and allowed < limit:
        config.max_output_tokens = max(1, allowed)


def _sent(llm_request: LlmRequest) -> int:
    """The bytes a request sends: each part's text, a call's arguments, a function's
    response (as JSON). Measured before every request, the whole history: never a
    getattr of a field the part lacks (pydantic's ``__getattr__`` raises and catches)."""
    sent = 0
    for content in llm_request.contents:
        for part in content.parts or ():
            if part.text:
                sent += text_bytes(part.text)
            call, answer = part.function_call, part.function_response
            if call is not None and call.args:
                sent += _json_bytes(call.args)
            if answer is not None and answer.response:
                sent += _json_bytes(answer.response)
    return sent


def _json_bytes(payload: dict[str, Any]) -> int:
    """The bytes of ``payload`` as JSON."""
    try:
        return len(orjson.dumps(payload, default=str, option=orjson.OPT_NON_STR_KEYS))
    except TypeError:  # (an integer past 64 bits)
        return text_bytes(str(payload))


def _refused_by_adk(callback_context: Any) -> bool:
    """True when ADK will refuse this request itself, right after the callbacks: its
    ``RunConfig.max_llm_calls`` is reached (it counts a call only then, so lyra charges
    no turn for it). Read from ADK's private counter; where a later ADK moves it,
    False: the refused request is charged a turn, and the test of it fails."""
    invocation = getattr(callback_context, "_invocation_context", None)
    made = getattr(
        getattr(invocation, "_invocation_cost_manager", None), "_number_of_llm_calls", None
    )
    limit = getattr(getattr(invocation, "run_config", None), "max_llm_calls", None)
    return type(made) is int and type(limit) is int and 0 < limit <= made


class Limits(BasePlugin):
    """lyra's plugin: the tree's limits and progress in every run of the app."""

    def __init__(self) -> None:
        super().__init__(name="lyra")

    async def before_model_callback(
        self, *, callback_context: Any, llm_request: LlmRequest
    ) -> LlmResponse | None:
        attempt: Attempt | None = current_run.get()
        if attempt is not None and _refused_by_adk(callback_context):
            attempt.ctx.raise_if_stopped()  # (else ADK's refusal ends the run)
        elif attempt is not None:
            model, agent = llm_request.model, callback_context.agent_name  # (a property)
            attempt.models[agent] = model
            await _before(attempt.meter, model, agent, llm_request)
            if attempt.ask:  # ADK runs a call from the request's own tools
                llm_request.append_tools([_ASK])
            if attempt.limits:
                llm_request.append_instructions([limits_text(attempt.ctx)])
        return None

    async def after_model_callback(
        self, *, callback_context: Any, llm_response: LlmResponse
    ) -> LlmResponse | None:
        attempt: Attempt | None = current_run.get()
        if attempt is None:
            return None
        if llm_response.partial:  # a streamed chunk; the whole response is charged
            attempt.ctx.heartbeat()
            return None
        agent = callback_context.agent_name
        model = llm_response.model_version or attempt.models.get(agent)
        attempt.meter.answer(agent, tokens_of(llm_response.usage_metadata), model)
        return None

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        attempt: Attempt | None = current_run.get()
        if attempt is not None:  # a stop a tool caught, a loop, the tool-call budget: raised
            attempt.ctx.tool_started(tool.name, tool_args)
        return None

    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        attempt: Attempt | None = current_run.get()
        if attempt is not None:
            tool_done(attempt.ctx, tool.name)
        return None

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> dict[str, Any] | None:
        attempt: Attempt | None = current_run.get()
        if attempt is not None and not isinstance(error, asyncio.CancelledError):
            tool_done(attempt.ctx, tool.name, error)
        return None  # the error goes on: lyra classifies it


class _Rehearsal(BaseLlm):
    """A model for the warm-up run: one tool call, then an answer."""

    model: str = "lyra-warm-up"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        answered = any(
            part.function_response is not None
            for content in llm_request.contents
            for part in content.parts or ()
        )
        call = types.Part(function_call=types.FunctionCall(name="_rehearse", args={}))
        part = types.Part(text="ok") if answered else call
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1
        )  # ADK logs a warning for a response without usage
        yield LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=usage)


def _rehearse() -> str:
    """Does nothing (the warm-up run's tool)."""
    return "ok"


_warm = threading.Lock()
_warmed = False


def tools_in_threads(config: RunConfig | None) -> RunConfig:
    """``config`` with ADK's tool thread pool on, unless it sets a pool of its own.

    Without one, ADK calls a sync tool on the event loop itself: a tool stuck in
    blocking code stops the loop, so no idle timeout or deadline can fire, for this
    run or any other on the loop. On the pool the loop goes on, and a stopped run
    abandons the thread as ``ctx.tool`` does (no thread can be killed)."""
    if config is None:
        return RunConfig(tool_thread_pool_config=ToolThreadPoolConfig())
    if config.tool_thread_pool_config is not None:
        return config
    return config.model_copy(update={"tool_thread_pool_config": ToolThreadPoolConfig()})


def warm() -> None:
    """Run a throwaway agent once in this process (a model call, a tool call, an answer),
    in a thread of its own: ADK imports most of what a run needs only when it first
    runs (its flows, tool and auth machinery, about 0.5 s), and nothing may be imported
    inside a deadline."""
    global _warmed
    with _warm:
        if _warmed:
            return
        agent = LlmAgent(name="warm_up", model=_Rehearsal(), tools=[_rehearse])
        runner = Runner(
            app=App(name="lyra_warm_up", root_agent=agent), session_service=InMemorySessionService()
        )

        async def rehearse() -> None:
            session = await runner.session_service.create_session(
                app_name="lyra_warm_up", user_id="lyra"
            )
            events = runner.run_async(
                user_id="lyra", session_id=session.id, new_message=types.UserContent("warm up")
            )
            async with contextlib.aclosing(events) as stream:
                async for _ in stream:
                    pass
            await runner.close()

        thread = threading.Thread(target=asyncio.run, args=(rehearse(),), name="lyra-adk-warm-up")
        thread.start()
        thread.join()
        _warmed = True


class _OwnStops(logging.Filter):
    """Drops ADK's error records (with a traceback) for an exception lyra raised on
    purpose to stop the run -- a budget, a blocker, the meter's refusal of a budget it
    cannot keep -- which the report already says. ADK logs every exception a plugin or
    node raises; any other still passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        for _ in range(6):
            if exc is None:
                return True
            if isinstance(exc, OWN_STOPS):
                return False
            exc = exc.__cause__ or exc.__context__
        return True


_LOGGERS = (
    "google_adk.google.adk.runners",
    "google_adk.google.adk.plugins.plugin_manager",
    "google_adk.google.adk.workflow._node_runner",
    "google_adk.google.adk.workflow._node_runner_utils",
)


def quiet_own_stops() -> None:
    """Install :class:`_OwnStops` on the ADK loggers that report a plugin's or a node's
    exception (once)."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(kept, _OwnStops) for kept in logger.filters):
            logger.addFilter(_OwnStops())


def check_app_name(name: str | None) -> None:
    """A ValueError naming the option for an app name ADK refuses (its App would raise
    pydantic's ValidationError, unlike every other option's error)."""
    if name:  # (an empty one: the agent's name, as for None)
        try:
            validate_app_name(name)
        except ValueError as exc:
            raise ValueError(f"GoogleADKChild's app_name= is not one ADK accepts: {exc}") from None


@functools.lru_cache(maxsize=256)  # asked before every request, of a few model names
def provider_of(model: str | None) -> str | None:
    """Whose API a model name of ADK's goes to, for the tree's rate-limit cooldowns:
    Google's for Gemini and Gemma, else a LiteLLM-style ``provider/model`` prefix."""
    if not model:
        return None
    if model.startswith(("gemini", "gemma", "models/", "projects/")):
        return "google"
    provider, slash, _ = model.partition("/")
    return provider if slash else None


def tokens_of(usage: types.GenerateContentResponseUsageMetadata | None) -> Tokens | None:
    """A response's tokens from its ``usage_metadata`` (``None``: it reported none):
    input with the cached and tool-use prompt tokens, output with the thinking."""
    if usage is None:
        return None
    return Tokens.of(
        input=(usage.prompt_token_count or 0) + (usage.tool_use_prompt_token_count or 0),
        output=(usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0),
        cache_read=usage.cached_content_token_count or 0,
    )


class Run:
    """ADK's runner over one agent with lyra's plugin, and the run of an attempt on it."""

    def __init__(
        self, agent: BaseNode | App, *, plugins: Sequence[BasePlugin], app_name: str | None
    ) -> None:
        if isinstance(agent, App):
            app = agent.model_copy(update={"plugins": [Limits(), *plugins, *agent.plugins]})
        else:
            name = app_name or agent.name
            app = App(name=name, root_agent=agent, plugins=[Limits(), *plugins])
        quiet_own_stops()
        self.app_name = app.name
        self.sessions = InMemorySessionService()
        self.runner = Runner(app=app, session_service=self.sessions)

    async def __call__(
        self,
        prompt: str,
        ctx: ChildContext,
        *,
        prices: PriceList,
        user_id: str,
        run_config: RunConfig | None,
        state: Mapping[str, Any] | None,
        output_key: str | None,
        ask: bool = False,
        limits: bool = False,
    ) -> str:
        meter = Meter(ctx, prices, child="GoogleADKChild")
        attempt = Attempt(meter, ask=ask, limits=limits)
        session = await self.sessions.create_session(
            app_name=self.app_name, user_id=user_id, state=dict(state) if state else None
        )
        where: dict[str, Any] = {
            "app_name": self.app_name,
            "user_id": user_id,
            "session_id": session.id,
        }
        token = current_run.set(attempt)
        try:
            await self._restore(session, ctx)
            final, waiting = await contained(
                self._events(ctx, prompt, session.id, user_id, run_config)
            )
            if waiting:  # its result can only come from the caller, after the run
                ctx.block(FailureCategory.MISSING_CONTEXT, _WAITING + ", ".join(waiting))
            if output_key is not None:
                done = await self.sessions.get_session(**where)
                if done is None or output_key not in done.state:
                    raise IncompleteOutput(f"The run left no {output_key!r} in the session state")
                result = output_text(done.state[output_key])
            else:
                result = _answer(ctx, final)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):  # in memory: never waits
                kept = await self.sessions.get_session(**where)
            _keep(ctx, kept)
            cause = exc.__cause__
            if isinstance(exc, RuntimeError) and cause and str(exc).startswith(_PLUGIN_ERROR):
                raise cause from None  # a plugin's exception, ADK's wrapper dropped
            raise
        finally:
            current_run.reset(token)
            with anyio.CancelScope(shield=True):
                await self.sessions.delete_session(**where)
        ctx.state.pop(STATE_KEY, None)
        return result

    async def _restore(self, session: Session, ctx: ChildContext) -> None:
        """On a retry of the task, the session events an earlier attempt kept (and an
        error answer for each call it left unanswered), before the retry's prompt."""
        # ctx.fresh: the transcript outgrew the context window; the prompt says what was done
        saved = ctx.state.get(STATE_KEY) if ctx.attempt > 1 and not ctx.fresh else None
        events = saved.get("events") if isinstance(saved, dict) else None
        if not isinstance(events, list):
            return
        try:
            history = [Event.model_validate(data) for data in events]
        except ValueError:  # no longer events of this ADK: start afresh
            return
        for event in [*history, *_unanswered(history)]:
            await self.sessions.append_event(session, event)

    async def _events(
        self,
        ctx: ChildContext,
        prompt: str,
        session_id: str,
        user_id: str,
        run_config: RunConfig | None,
    ) -> tuple[Event | None, list[str]]:
        """Run the agent; its last final response (``None``: it gave none) and the
        long-running tools it called. An agent's answer is a completed step (a
        workflow's later agent that fails leaves work done). Iterated in ``aclosing``:
        a generator left open would leave ADK's tasks running."""
        final = None
        waiting: dict[str, None] = {}  # (ordered, once each)
        events = self.runner.run_async(
            user_id=user_id,
            session_id=session_id,
            new_message=types.UserContent(prompt),
            run_config=run_config,
        )
        async with contextlib.aclosing(events) as stream:
            async for event in stream:
                if event.partial:
                    continue
                if event.is_final_response():
                    if _answers(event) or final is None or not _answers(final):
                        # (a tool's response standing as final, exit_loop's, is no answer
                        # in place of the one an agent gave before it: a loop's last)
                        final = event
                    if not event.error_code and _text_of(event):  # (an answer, not an error)
                        ctx.step(f"Agent {event.author} answered")
                if event.long_running_tool_ids:  # (most events: none, nor calls to read)
                    for call in event.get_function_calls():
                        if call.id in event.long_running_tool_ids:
                            waiting[call.name or "?"] = None
        return final, list(waiting)


def _keep(ctx: ChildContext, session: Session | None) -> None:
    """Keep a failed run's session events as JSON data in ``ctx.state`` for a retry,
    when a model answered in it (else what an earlier attempt kept stays)."""
    events = session.events if session is not None else []
    if any(event.author != "user" and event.content for event in events):
        ctx.state[STATE_KEY] = {
            "events": [event.model_dump(mode="json", exclude_none=True) for event in events]
        }


def _unanswered(history: list[Event]) -> list[Event]:
    """Error answers for the function calls of the last model turn that nothing
    answered (the run stopped while they ran), so the history is one a model accepts."""
    calls = [event for event in history if event.get_function_calls()]
    if not calls:
        return []
    last = calls[-1]
    answered = {
        response.id
        for event in history[history.index(last) :]
        for response in event.get_function_responses()
    }
    parts = [
        types.Part(
            function_response=types.FunctionResponse(
                id=call.id, name=call.name, response={"error": _NOT_RUN}
            )
        )
        for call in last.get_function_calls()
        if call.id not in answered
    ]
    if not parts:
        return []
    content = types.Content(role="user", parts=parts)
    return [Event(author=last.author, invocation_id=last.invocation_id, content=content)]


def _answer(ctx: ChildContext, final: Event | None) -> str:
    """The run's result from its last final response, or why there is none."""
    if final is None and ctx.current_tool is not None:
        # The tool never returned nor raised, and the run ended quietly: ADK's runner
        # swallows a CancelledError out of its root node (a future someone else
        # cancelled inside the tool), where any other error is raised.
        raise ForeignCancellation(
            f"the tool '{ctx.current_tool}' was cancelled inside the framework's run, "
            "and the agent ended with it"
        ) from asyncio.CancelledError()
    if final is None:
        raise IncompleteOutput("The agent ended without an answer")
    reason = _reason(final.error_code) or _reason(final.finish_reason)
    if reason in _CUT_OFF:
        raise IncompleteOutput("The model stopped early (MAX_TOKENS): the output is cut off")
    if reason in _REFUSED:
        raise TaskRejected(f"The model refused the request ({reason}): {final.error_message or ''}")
    if final.output is not None:
        return output_text(final.output)
    text = _text_of(final)
    if final.error_code is not None and not text:
        raise IncompleteOutput(f"The run ended with {reason}: {final.error_message or ''}")
    return text


def _answers(event: Event) -> bool:
    """True for a final response that says something: text, a structured output, or an
    error; not a tool's response alone."""
    return bool(_text_of(event) or event.output is not None or event.error_code)


def _text_of(event: Event) -> str:
    """An event's answer text (its thoughts left out)."""
    parts = event.content.parts if event.content and event.content.parts else []
    return "".join(part.text for part in parts if part.text and not part.thought)


def _reason(code: Any) -> str | None:
    """A finish or block reason (an enum of google.genai's, or a string) by its name."""
    if code is None:
        return None
    return str(getattr(code, "name", code))
