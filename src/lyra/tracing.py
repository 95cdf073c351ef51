"""OpenTelemetry traces of delegation trees (DESIGN §12), named and attributed
after the OpenTelemetry GenAI semantic conventions; free when nobody listens.

With the ``otel`` extra installed and a tracer provider configured by the
application (the global one, ``opentelemetry.trace.set_tracer_provider``, or
one given to :func:`configure`), lyra's work becomes spans::

    invoke_workflow recover            one recovery loop (lyra.recovery.recover)
    ├── invoke_agent MyChild           attempt 1
    │   ├── chat claude-sonnet-5-5     a model call (kind CLIENT; the SDK's own
    │   │                              span instead, where it makes one)
    │   ├── execute_tool get_plddt     a ctx.tool call
    │   └── invoke_agent Helper        a ctx.delegate grandchild, nested as the tree is
    └── invoke_agent MyChild           attempt 2, linked to attempt 1

A failed attempt has ``error.type`` = its failure category and status ERROR;
``lyra.retryable``, ``lyra.error_type`` (the fine cause) and the token usage
(``gen_ai.usage.*``, everything below it included) ride along.

Tracing never breaks a delegation: every call into OpenTelemetry (a span
processor's ``on_start`` or ``on_end``, an attribute, the context) is contained;
its first failure of each kind becomes one ``tracing_failed`` warning event and
the work goes on, its report intact.

Without a tracer provider, or without the OpenTelemetry API installed, nothing
is imported and no span or context object is made: a tool or model-call hook
is one ``None`` check; an attempt or a loop also asks ``sys.modules`` whether
any code imported the API (and if so, reads whether a global provider was set,
as the API's own proxy tracer does), so that a provider the application sets
after importing lyra is picked up.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from lyra import events
from lyra._extras import DISTRIBUTION, missing_extra

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanContext, Tracer, TracerProvider

__all__ = ["attempt", "configure", "enabled", "model_call", "recovery", "tool"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
Coro = Coroutine[Any, Any, R]

_tracer: Tracer | None = None
"""The tracer spans are made with; ``None``: tracing is off."""
_provider: TracerProvider | None = None
"""The provider :func:`configure` chose (then the global one is not looked at)."""
_api: Any = None
"""``opentelemetry.trace``, once tracing is on."""
_API = "opentelemetry.trace"
_modules = sys.modules


class _Loop:
    """The span of the recovery loop running in this context, and its last attempt's."""

    __slots__ = ("previous", "span")

    def __init__(self, span: _Guarded) -> None:
        self.span = span
        self.previous: SpanContext | None = None


_loop: ContextVar[_Loop | None] = ContextVar("lyra_recovery_span", default=None)


def configure(tracer_provider: TracerProvider | None = None) -> None:
    """Make spans with ``tracer_provider`` rather than the global one; with no
    argument, go back to the global provider (lyra's default).

    Raises :class:`~lyra.errors.ConfigurationError` when the OpenTelemetry API is
    not installed.
    """
    global _tracer, _provider
    if tracer_provider is None:
        _tracer, _provider = None, None
        return
    _turn_on(_otel().get_tracer, tracer_provider=tracer_provider)
    _provider = tracer_provider


def enabled() -> bool:
    """True when lyra makes spans (a tracer provider is configured)."""
    return _tracer is not None or _poll()


def _otel() -> Any:
    try:
        import opentelemetry.trace
    except ImportError:
        raise missing_extra("traces", "otel", "the OpenTelemetry API") from None
    return opentelemetry.trace


def _poll() -> bool:
    """Turn tracing on once the application has set a global tracer provider.

    Reads the API's own global, as its ProxyTracer does, and only when some
    code has imported the API: an application that set a provider has.
    """
    if _provider is not None:
        return False
    api = _modules.get(_API)
    if api is None or getattr(api, "_TRACER_PROVIDER", None) is None:
        return False
    _turn_on(api.get_tracer)
    return True


def _turn_on(get_tracer: Callable[..., Tracer], **provider: Any) -> None:
    global _tracer, _api
    from importlib.metadata import PackageNotFoundError, version

    try:
        lyra_version: str | None = version(DISTRIBUTION)
    except PackageNotFoundError:
        lyra_version = None
    _api = _modules[_API]
    _tracer = get_tracer("lyra", lyra_version, **provider)


# -- the hooks -----------------------------------------------------------------------


def attempt(
    run: Callable[Concatenate[Any, str, Any, P], Coro[R]],
) -> Callable[Concatenate[Any, str, Any, P], Coro[R]]:
    """Decorates one delegation attempt, ``run(call, prompt, ctx, ...) -> (verdict,
    output)``: an ``invoke_agent`` span around it, current while the child runs."""

    @functools.wraps(run)
    def hooked(call: Any, prompt: str, ctx: Any, /, *args: P.args, **kwargs: P.kwargs) -> Coro[R]:
        # Until some code imports the API, no provider can be set: one dict look-up.
        if _tracer is None and (_API not in _modules or not _poll()):
            return run(call, prompt, ctx, *args, **kwargs)
        return _traced_attempt(
            lambda call, prompt, ctx: run(call, prompt, ctx, *args, **kwargs), call, prompt, ctx
        )

    return hooked


def tool(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, a tool ``ChildContext.tool`` runs, as it is, or (when tracing) under
    an ``execute_tool <name>`` span; a coroutine function stays one."""
    if _tracer is None:
        return fn
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function",
    }
    if inspect.iscoroutinefunction(fn):

        async def traced_async(*args: Any, **kwargs: Any) -> Any:
            with _span(f"execute_tool {name}", attributes):
                return await fn(*args, **kwargs)

        return traced_async

    def traced(*args: Any, **kwargs: Any) -> Any:  # in the worker thread, context copied
        with _span(f"execute_tool {name}", attributes):
            return fn(*args, **kwargs)

    return traced


def model_call(
    provider: str, tokens: Callable[[Any], tuple[int, int]]
) -> Callable[[Callable[Concatenate[S, P], Coro[R]]], Callable[Concatenate[S, P], Coro[R]]]:
    """Decorates one model call, a method ``(child, client, …) -> response`` of a
    child with a ``model`` attribute: a ``chat <model>`` client span.

    ``tokens(usage)`` gives a response's input tokens (cached ones included, as
    the conventions count them) and output tokens.
    """

    def decorate(
        method: Callable[Concatenate[S, P], Coro[R]],
    ) -> Callable[Concatenate[S, P], Coro[R]]:
        @functools.wraps(method)
        def hooked(child: S, /, *args: P.args, **kwargs: P.kwargs) -> Coro[R]:
            if _tracer is None or (args and _traces_itself(args[0])):
                return method(child, *args, **kwargs)
            return _traced_chat(method(child, *args, **kwargs), provider, tokens, child, args)

        return hooked

    return decorate


def _traces_itself(client: Any) -> bool:
    """True when the client makes a span of its own for each call, to the provider
    lyra's spans go to (the anthropic SDK does from 2.13 on, to the global provider
    unless given one): a span of lyra's as well would count the call twice."""
    options = getattr(client, "open_telemetry", None)
    if not isinstance(options, dict):
        return False
    traces = options.get("traces")
    if not (isinstance(traces, dict) and traces.get("enabled")):
        return False
    global_provider = _api.get_tracer_provider()
    return (options.get("tracer_provider") or global_provider) is (_provider or global_provider)


def recovery(loop: Callable[P, Coro[R]]) -> Callable[P, Coro[R]]:
    """Decorates a recovery loop: an ``invoke_workflow recover`` span over its
    attempts, each attempt linked to the one before."""

    @functools.wraps(loop)
    async def hooked(*args: P.args, **kwargs: P.kwargs) -> R:
        if _tracer is None and (_API not in _modules or not _poll()):
            return await loop(*args, **kwargs)
        return await _traced_recovery(loop(*args, **kwargs), kwargs.get("subject"))

    return hooked


# -- spans ---------------------------------------------------------------------------


@contextmanager
def _span(
    name: str, attributes: dict[str, Any], *, client: bool = False, links: Any = None
) -> Iterator[_Guarded]:
    """A span, current in the block; an exception (cancellation too) marks it failed
    with its class name and goes on. OpenTelemetry's own failures are contained."""
    tracer = _tracer
    span = None
    if tracer is not None:  # else configure() turned tracing off since this work began
        with _contained("start_span"):
            span = tracer.start_span(
                name,
                kind=_api.SpanKind.CLIENT if client else _api.SpanKind.INTERNAL,
                attributes=attributes,
                links=links,
                record_exception=False,
                set_status_on_exception=False,
            )
    if span is None:
        yield _Guarded(None)
        return
    token = None
    with _contained("attach"):
        token = _modules["opentelemetry.context"].attach(_api.set_span_in_context(span))
    guarded = _Guarded(span)
    try:
        yield guarded
    except BaseException as exc:
        _failed(guarded, _exception_type(exc), str(exc))
        raise
    finally:
        if token is not None:
            with _contained("detach"):
                _modules["opentelemetry.context"].detach(token)
        with _contained("end"):
            span.end()


class _Guarded:
    """A span whose every call is contained (``None``: no span, every call a no-op)."""

    __slots__ = ("span",)

    def __init__(self, span: Span | None) -> None:
        self.span = span

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        if self.span is not None:
            with _contained("set_attributes"):
                self.span.set_attributes(attributes)

    def set_attribute(self, key: str, value: Any) -> None:
        self.set_attributes({key: value})

    def set_status(self, code: str, description: str) -> None:
        if self.span is not None:
            with _contained("set_status"):
                self.span.set_status(_api.Status(getattr(_api.StatusCode, code), description))

    def get_span_context(self) -> SpanContext | None:
        if self.span is None:
            return None
        with _contained("get_span_context"):
            return self.span.get_span_context()
        return None

    def is_(self, other: Any) -> bool:
        return self.span is other


_reported: set[tuple[str, str]] = set()


@contextmanager
def _contained(where: str) -> Iterator[None]:
    """OpenTelemetry's failure here becomes a warning event (once per place and
    kind of error), never the delegation's."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - a tracing failure must not cost a report
        kind = (where, type(exc).__name__)
        if kind not in _reported:
            _reported.add(kind)
            events.warning(events.TRACING_FAILED, where=where, error=f"{type(exc).__name__}: {exc}")


async def _traced_attempt(
    run: Callable[[Any, str, Any], Coro[R]], call: Any, prompt: str, ctx: Any
) -> R:
    name = _agent_name(call)
    loop = _loop.get()
    if loop is not None and not loop.span.is_(_current_span()):
        loop = None  # a grandchild: its parent attempt's span is its place in the tree
    links = _links(loop.previous if loop is not None else None)
    with _span(f"invoke_agent {name}", _attempt_attributes(name, ctx), links=links) as span:
        if loop is not None:
            loop.previous = span.get_span_context()
        outcome = await run(call, prompt, ctx)
        verdict = outcome[0]  # type: ignore[index]
        usage = ctx.usage
        if usage:
            span.set_attributes(
                {
                    "gen_ai.usage.input_tokens": usage.input_tokens,
                    "gen_ai.usage.output_tokens": usage.output_tokens,
                    "lyra.cost_usd": usage.cost_usd,
                    "lyra.turns": usage.turns,
                }
            )
        if verdict is not None:
            span.set_attributes(
                {
                    "lyra.retryable": verdict.retryable,
                    "lyra.error_type": str(verdict.error_type),
                    "lyra.evidence": verdict.evidence,
                }
            )
            _failed(span, str(verdict.category), verdict.message)
    return outcome


def _current_span() -> Any:
    with _contained("get_current_span"):
        return _api.get_current_span()
    return None


def _links(previous: SpanContext | None) -> list[Any] | None:
    """A link to the attempt before (none when there is none, or it cannot be made)."""
    if previous is None:
        return None
    with _contained("link"):
        return [_api.Link(previous)]
    return None


def _attempt_attributes(name: str, ctx: Any) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": name,
        "lyra.session_id": ctx.session_id,
        "lyra.attempt": ctx.attempt,
        "lyra.timeout": ctx.timeout,
    }
    if ctx.subject is not None:
        attributes["lyra.subject"] = ctx.subject
    for key in ("task_id", "strategy"):  # set by a recovery loop
        value = ctx.context.get(key)
        if value is not None:
            attributes[f"lyra.{key}"] = str(value)
    return attributes


def _agent_name(call: Any) -> str:
    """The child's name: its class for a child object, else its function's name."""
    owner = getattr(call, "__self__", None)  # the bound ``run`` of a child object
    if owner is not None:
        return type(owner).__name__
    if isinstance(call, functools.partial):  # lyra runs a sync child as partial(thread, child)
        call = call.args[0] if call.args and callable(call.args[0]) else call.func
    name = getattr(call, "__name__", None)
    return name if isinstance(name, str) else type(call).__name__


async def _traced_chat(
    work: Coro[R],
    provider: str,
    tokens: Callable[[Any], tuple[int, int]],
    child: Any,
    args: tuple[Any, ...],
) -> R:
    model = str(child.model)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,  # its name before semconv 1.37; older viewers read it
        "gen_ai.request.model": model,
    }
    url = getattr(args[0], "base_url", None) if args else None
    if url is not None and getattr(url, "host", None):
        attributes["server.address"] = url.host
        attributes["server.port"] = url.port or (443 if url.scheme == "https" else 80)
    with _span(f"chat {model}", attributes, client=True) as span:
        response = await work
        span.set_attributes(_response_attributes(response, tokens))
    return response


def _response_attributes(response: Any, tokens: Callable[[Any], tuple[int, int]]) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    for key, field in (("gen_ai.response.id", "id"), ("gen_ai.response.model", "model")):
        value = getattr(response, field, None)
        if isinstance(value, str):
            attributes[key] = value
    stop = getattr(response, "stop_reason", None)
    if isinstance(stop, str):
        attributes["gen_ai.response.finish_reasons"] = (stop,)
    usage = getattr(response, "usage", None)
    if usage is not None:
        incoming, outgoing = tokens(usage)
        attributes["gen_ai.usage.input_tokens"] = incoming
        attributes["gen_ai.usage.output_tokens"] = outgoing
        for key, field in (
            ("gen_ai.usage.cache_creation.input_tokens", "cache_creation_input_tokens"),
            ("gen_ai.usage.cache_read.input_tokens", "cache_read_input_tokens"),
        ):
            value = getattr(usage, field, None)
            if isinstance(value, int) and value > 0:
                attributes[key] = value
    return attributes


async def _traced_recovery(loop: Coro[R], subject: Any) -> R:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": "recover",
    }
    if isinstance(subject, str):
        attributes["lyra.subject"] = subject
    with _span("invoke_workflow recover", attributes) as span:
        token = _loop.set(_Loop(span))
        try:
            outcome: Any = await loop
        finally:
            _loop.reset(token)
        span.set_attributes(
            {
                "lyra.task_id": outcome.task_id,
                "lyra.attempts": len(outcome.attempts),
                "lyra.recovered": outcome.recovered,
            }
        )
        failure = outcome.result.failure
        if failure is not None:
            span.set_attribute("lyra.retryable", failure.suggested_retry)
            _failed(span, str(failure.category), failure.message)
    return outcome  # type: ignore[no-any-return]


def _failed(span: _Guarded, error_type: str, description: str) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status("ERROR", description)


def _exception_type(exc: BaseException) -> str:
    """The exception's fully qualified class name (``error.type`` of the conventions)."""
    kind = type(exc)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
