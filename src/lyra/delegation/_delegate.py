"""One child, one attempt: the limits, classification, the result, the events."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from itertools import count
from typing import Any

import anyio

from lyra import events, tracing
from lyra.delegation._budget import Account
from lyra.delegation._child import as_callable
from lyra.delegation._classify import (
    MAX_DEPTH,
    Verdict,
    classify_blank_prompt,
    classify_blocked,
    classify_budget,
    classify_exception,
    classify_idle,
    classify_invalid_output,
    classify_timeout,
    classify_too_deep,
    classify_unclassifiable,
)
from lyra.delegation._context import Child, ChildContext
from lyra.delegation._models import ChildFailure, builder
from lyra.delegation._result import DelegationResult
from lyra.delegation._suggest import suggest
from lyra.delegation._text import valid_text

_PREFIX = os.urandom(4).hex()
_SERIAL = count(1)


def new_session_id() -> str:
    """A fresh child session id: ``child-``, a per-process random prefix and a counter."""
    return f"child-{_PREFIX}{next(_SERIAL):x}"


def check_timeout(timeout: float, what: str = "timeout") -> float:
    """The timeout as a float, or a clear error for a caller's mistake."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"{what} must be a number of seconds, not {type(timeout).__name__}")
    if not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"{what} must be a positive number of seconds, not {timeout!r}")
    return float(timeout)


async def run_attempt(
    child: Child,
    prompt: str,
    *,
    timeout: float,
    idle_timeout: float | None = None,
    account: Account | None = None,
    session_id: str | None = None,
    subject: str | None = None,
    attempt: int = 1,
    context: Mapping[str, Any] | None = None,
    state: dict[str, Any] | None = None,
    parent: ChildContext | None = None,
) -> DelegationResult:
    """Run ``child`` once under its limits and describe what happened.

    ``timeout`` bounds the attempt; ``idle_timeout`` bounds the time between
    two signs of progress; ``account`` is the budget it draws on. Never
    raises for the child's failure. ``KeyboardInterrupt``, ``SystemExit``
    and cancellation of the caller propagate untouched.
    """
    timeout = check_timeout(timeout)
    if idle_timeout is not None:
        idle_timeout = check_timeout(idle_timeout, "idle_timeout")
    call = as_callable(child)
    ctx = ChildContext(
        session_id=session_id or new_session_id(),
        timeout=timeout,
        attempt=attempt,
        subject=subject,
        context=context,
        idle_timeout=idle_timeout,
        account=account,
        state=state,
        parent=parent,
        runner=_nested,
    )
    fields = _fields(ctx)
    limits: dict[str, Any] = {"timeout": timeout}
    if idle_timeout is not None:
        limits["idle_timeout"] = idle_timeout
    events.info("delegation_started", **fields, **limits)
    started = time.perf_counter()
    try:
        verdict, output = await _run(call, prompt, ctx)
    except BaseException as exc:  # stopped from outside: closed in the log, then passed on
        events.info(
            "delegation_cancelled",
            duration=round(time.perf_counter() - started, 6),
            reason=type(exc).__name__,
            **fields,
        )
        raise
    duration = round(time.perf_counter() - started, 6)
    usage = ctx.charged
    if usage is not None:
        fields.update(usage.fields())
    overrun = _overrun(ctx)
    if overrun is not None:
        fields["overrun_s"] = overrun
        events.warning("deadline_overrun", **fields, timeout=timeout, blocked_by=_blocker(ctx))
    if verdict is None:
        events.info("delegation_completed", duration=duration, **fields)
        return _result(ctx, duration, output=output, overrun=overrun)
    failure = _failure(verdict, ctx, duration)
    events.info(
        "delegation_failed",
        category=str(failure.category),
        retryable=failure.suggested_retry,
        error_type=str(failure.error_type),
        blocked_on=failure.blocked_on,
        duration=duration,
        evidence=failure.evidence,
        **fields,
    )
    return _result(ctx, duration, failure=failure, overrun=overrun)


_OVERRUN_TOLERANCE = 0.1
"""Seconds past its deadline an attempt may end without being called late: the
lateness allowed a deadline on a busy loop (DESIGN §9, blocking children)."""


def _overrun(ctx: ChildContext) -> float | None:
    """Seconds the attempt ended after its total deadline, beyond the tolerance."""
    late = ctx._now() - ctx._deadline
    return round(late, 3) if late > _OVERRUN_TOLERANCE else None


def _blocker(ctx: ChildContext) -> str:
    """What held an attempt past its deadline, as far as lyra can tell."""
    fired = ctx._fired
    if ctx._deadlines is None:
        return "unknown (this event loop keeps anyio's own deadlines)"
    if fired is None or fired - ctx._deadline > _OVERRUN_TOLERANCE:
        return (
            "the event loop: synchronous code in an async child or tool kept it from "
            "running (run blocking work through ctx.tool, or as a plain def child)"
        )
    return (
        "cancellation was held after the deadline: a worker thread that cannot be "
        "abandoned (anyio.to_thread.run_sync without abandon_on_cancel) or shielded code"
    )


async def _nested(
    child: Child,
    prompt: str,
    *,
    timeout: float,
    idle_timeout: float | None,
    account: Account | None,
    subject: str | None,
    context: Mapping[str, Any] | None,
    parent: ChildContext,
) -> DelegationResult:
    """A grandchild's attempt (``ctx.delegate``): the parent's subject and task by default."""
    return await run_attempt(
        child,
        prompt,
        timeout=timeout,
        idle_timeout=idle_timeout,
        account=account,
        subject=subject if subject is not None else parent.subject,
        context=context if context is not None else _inherited(parent.context),
        parent=parent,
    )


def _inherited(context: Mapping[str, Any]) -> dict[str, Any]:
    """What a grandchild keeps of its parent's context: the task it belongs to."""
    return {key: context[key] for key in ("task_id",) if key in context}


def _fields(ctx: ChildContext) -> dict[str, Any]:
    """The fields every event of this attempt carries."""
    fields: dict[str, Any] = {
        "session_id": ctx.session_id,
        "subject": ctx.subject,
        "attempt": ctx.attempt,
    }
    for key in ("task_id", "parent_task_id"):  # attempts of one recovery loop share a task
        if key in ctx.context:
            fields[key] = ctx.context[key]
    if ctx.parent_session_id is not None:
        fields["parent_session_id"] = ctx.parent_session_id
    return fields


@tracing.attempt
async def _run(call: Any, prompt: str, ctx: ChildContext) -> tuple[Verdict | None, str]:
    """Await the child under its limits; the verdict is ``None`` on success."""
    if not isinstance(prompt, str) or not prompt.strip():
        return classify_blank_prompt(), ""
    if ctx.depth > MAX_DEPTH:
        return classify_too_deep(), ""
    if ctx.account is not None and not ctx.account.has_room():
        return classify_budget(ctx), ""  # spent before it started: never run it
    output: object = None
    error: BaseException | None = None
    loop = ctx._deadlines
    scope = loop.cancel_scope() if loop is not None else anyio.CancelScope()
    try:
        with scope:  # our deadline's cancellation ends here, without a re-raise
            ctx._enter(scope)  # its deadline: see ChildContext._enter
            try:
                output = await call(prompt, ctx)
            except Exception as exc:  # noqa: BLE001 - the child's failure, whatever it is
                error = exc
            finally:
                ctx._exit()
    except BaseException as exc:
        cancelled = loop.cancelled() if loop is not None else anyio.get_cancelled_exc_class()
        if _propagates(exc, cancelled) or (
            isinstance(exc, BaseExceptionGroup) and scope.cancelled_caught
        ):  # (the rest of a group whose cancellation the scope took: passed on, as before)
            raise
        error = exc  # a BaseException of the child's own: a failure all the same
    try:
        return _verdict(ctx, scope, output, error)
    except Exception as exc:  # noqa: BLE001 - "a child's failure never raises", held here
        return classify_unclassifiable(exc, error), ""


def _propagates(exc: BaseException, cancelled: type[BaseException]) -> bool:
    """True for what must pass through a delegation untouched: an interrupt, an
    exit, a closing coroutine, a cancellation (``cancelled``: the backend's), or a
    group holding one."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_propagates(inner, cancelled) for inner in exc.exceptions)
    return isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit, cancelled))


def _verdict(
    ctx: ChildContext, scope: anyio.CancelScope, output: object, error: BaseException | None
) -> tuple[Verdict | None, str]:
    """What happened to the attempt, by the rule table; ``None`` on success."""
    if ctx.stopped_by is not None:  # the budget ran out: whatever the child did after
        return classify_budget(ctx), ""
    # Only our limits cancel this scope, so cancel_called tells them apart from
    # a TimeoutError raised inside the child.
    if scope.cancel_called and (error is not None or scope.cancelled_caught):
        if ctx.idle_timeout is not None and ctx.remaining() > 0:
            return classify_idle(ctx), ""
        return classify_timeout(ctx), ""
    if ctx.blocked is not None:
        return classify_blocked(ctx), ""
    if error is not None:
        return classify_exception(error, ctx), ""
    if not isinstance(output, str):
        return classify_invalid_output(output, ctx), ""
    return None, valid_text(output)


_FAILURE = builder(  # the order of model_dump's keys (see builder)
    ChildFailure,
    "completed_steps",
    "files_modified",
    "blocked_on",
    "suggested_retry",
    "suggested_actions",
    "last_successful_tool",
    "error_type",
    "evidence",
    "retry_after",
    "timeout",
    "category",
    "message",
    "session_id",
    "duration",
    "tool_usage",
)


def _failure(verdict: Verdict, ctx: ChildContext, duration: float) -> ChildFailure:
    return _FAILURE(
        tuple(ctx.completed_steps),
        tuple(ctx.files_modified),
        verdict.blocked_on or None,
        verdict.retryable,
        suggest(verdict, timeout=ctx.timeout, subject=ctx.subject),
        ctx.last_successful_tool,
        verdict.error_type,
        verdict.evidence,
        verdict.retry_after,
        ctx.timeout,
        verdict.category,
        verdict.message,
        ctx.session_id,
        duration,
        dict(ctx.tool_usage),
    )


_RESULT = builder(  # the order of model_dump's keys (see builder)
    DelegationResult,
    "attempt",
    "subject",
    "usage",
    "parent_session_id",
    "failed_delegations",
    "overrun_s",
    "status",
    "output",
    "failure",
    "session_id",
    "duration",
)


def _result(
    ctx: ChildContext,
    duration: float,
    *,
    output: str | None = None,
    failure: ChildFailure | None = None,
    overrun: float | None = None,
) -> DelegationResult:
    return _RESULT(
        ctx.attempt,
        ctx.subject,
        ctx.charged,
        ctx.parent_session_id,
        tuple(ctx.failed_delegations),
        overrun,
        "completed" if failure is None else "failed",
        output if failure is None else None,
        failure,
        ctx.session_id,
        duration,
    )
