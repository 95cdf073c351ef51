"""One child, one attempt: the deadline, classification, the report, the events."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Mapping
from typing import Any

import anyio
import structlog

from lyra.delegation._child import Child, as_callable
from lyra.delegation._classify import (
    Verdict,
    classify_blank_prompt,
    classify_blocked,
    classify_exception,
    classify_invalid_output,
    classify_timeout,
)
from lyra.delegation._context import ChildContext
from lyra.delegation._models import ChildFailure, DelegationResult
from lyra.delegation._suggest import suggest

log = structlog.get_logger("lyra")


def new_session_id() -> str:
    """A fresh child session id, ``child-`` and 12 hex digits."""
    return f"child-{uuid.uuid4().hex[:12]}"


def check_timeout(timeout: float) -> float:
    """The timeout as a float, or a clear error for a caller's mistake."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be a number of seconds, not {type(timeout).__name__}")
    if not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    return float(timeout)


async def run_attempt(
    child: Child,
    prompt: str,
    *,
    timeout: float,
    session_id: str | None = None,
    subject: str | None = None,
    attempt: int = 1,
    context: Mapping[str, Any] | None = None,
) -> DelegationResult:
    """Run ``child`` once under ``timeout`` and describe what happened.

    Never raises for the child's failure. ``KeyboardInterrupt``,
    ``SystemExit`` and cancellation of the caller propagate untouched.
    """
    timeout = check_timeout(timeout)
    call = as_callable(child)
    ctx = ChildContext(
        session_id=session_id or new_session_id(),
        timeout=timeout,
        attempt=attempt,
        subject=subject,
        context=context,
    )
    fields: dict[str, Any] = {"session_id": ctx.session_id, "subject": subject, "attempt": attempt}
    for key in ("task_id", "parent_task_id"):  # attempts of one recovery loop share a task
        if key in ctx.context:
            fields[key] = ctx.context[key]
    log.info("delegation_started", timeout=timeout, **fields)
    started = time.perf_counter()
    verdict, output = await _run(call, prompt, ctx)
    duration = round(time.perf_counter() - started, 6)
    if verdict is None:
        log.info("delegation_completed", duration=duration, **fields)
        return _result(ctx, duration, output=output)
    failure = _failure(verdict, ctx, duration)
    log.info(
        "delegation_failed",
        category=str(failure.category),
        retryable=failure.suggested_retry,
        error_type=str(failure.error_type),
        blocked_on=failure.blocked_on,
        duration=duration,
        evidence=failure.evidence,
        **fields,
    )
    return _result(ctx, duration, failure=failure)


async def _run(call: Any, prompt: str, ctx: ChildContext) -> tuple[Verdict | None, str]:
    """Await the child under the deadline; the verdict is ``None`` on success."""
    if not isinstance(prompt, str) or not prompt.strip():
        return classify_blank_prompt(), ""
    output: object = None
    error: Exception | None = None
    with anyio.move_on_after(ctx.timeout) as scope:
        try:
            output = await call(prompt, ctx)
        except Exception as exc:  # noqa: BLE001 - interrupts and cancellation propagate
            error = exc
    # Only our deadline cancels this scope, so cancel_called tells our timeout
    # apart from a TimeoutError raised inside the child.
    if scope.cancel_called and (error is not None or scope.cancelled_caught):
        return classify_timeout(ctx), ""
    if ctx.blocked is not None:
        return classify_blocked(ctx), ""
    if error is not None:
        return classify_exception(error, ctx), ""
    if not isinstance(output, str):
        return classify_invalid_output(output, ctx), ""
    return None, output


def _failure(verdict: Verdict, ctx: ChildContext, duration: float) -> ChildFailure:
    return ChildFailure(
        category=verdict.category,
        message=verdict.message,
        session_id=ctx.session_id,
        duration=duration,
        completed_steps=tuple(ctx.completed_steps),
        files_modified=tuple(ctx.files_modified),
        blocked_on=verdict.blocked_on,
        suggested_retry=verdict.retryable,
        suggested_actions=suggest(verdict, timeout=ctx.timeout, subject=ctx.subject),
        tool_usage=dict(ctx.tool_usage),
        last_successful_tool=ctx.last_successful_tool,
        error_type=verdict.error_type,
        evidence=verdict.evidence,
        retry_after=verdict.retry_after,
        timeout=ctx.timeout,
    )


def _result(
    ctx: ChildContext,
    duration: float,
    *,
    output: str | None = None,
    failure: ChildFailure | None = None,
) -> DelegationResult:
    return build_result(
        output=output,
        failure=failure,
        session_id=ctx.session_id,
        duration=duration,
        attempt=ctx.attempt,
        subject=ctx.subject,
    )


def build_result(
    *,
    output: str | None,
    failure: ChildFailure | None,
    session_id: str,
    duration: float,
    attempt: int = 1,
    subject: str | None = None,
) -> DelegationResult:
    """The result of one attempt: its output when ``failure`` is None."""
    return DelegationResult(
        status="completed" if failure is None else "failed",
        output=output if failure is None else None,
        failure=failure,
        session_id=session_id,
        duration=duration,
        attempt=attempt,
        subject=subject,
    )
