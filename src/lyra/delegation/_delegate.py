"""One child, one attempt: the limits, classification, the result, the events."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
from collections.abc import Mapping
from itertools import count
from typing import Any

import anyio
import anyio.lowlevel

from lyra import events, tracing
from lyra._taxonomy import ErrorType
from lyra._text import safe_str, type_name, valid_text
from lyra.delegation._budget import Account, Usage
from lyra.delegation._callbacks import call_off_the_loop
from lyra.delegation._child import as_callable, check_callbacks
from lyra.delegation._classify import (
    MAX_DEPTH,
    Verdict,
    classify_blank_prompt,
    classify_blocked,
    classify_budget,
    classify_exception,
    classify_foreign_cancel,
    classify_idle,
    classify_invalid_output,
    classify_loop,
    classify_rejected,
    classify_timeout,
    classify_too_deep,
    classify_unclassifiable,
    classify_verifier_raised,
)
from lyra.delegation._context import Answerer, Child, ChildContext, Verifier
from lyra.delegation._limiter import Limiter
from lyra.delegation._limits import Limits, check_timeout
from lyra.delegation._models import ChildFailure, builder
from lyra.delegation._result import DelegationResult
from lyra.delegation._suggest import suggest
from lyra.delegation._tree import Tree, tool_provider
from lyra.errors import ForeignCancellation, LoopDetected, LyraError

__all__ = ["check_timeout", "foreign_cancellation", "log_failure", "new_session_id", "run_attempt"]

UNNAMED_PROVIDER = "the child's service"
"""Whose rate limit a child met when neither its requests nor the error name a provider
(a plain child raising :class:`~lyra.errors.TransientError`)."""

_PREFIX = os.urandom(4).hex()
_SERIAL = count(1)


def new_session_id() -> str:
    """A fresh child session id: ``child-``, a per-process random prefix and a counter."""
    return f"child-{_PREFIX}{next(_SERIAL):x}"


async def run_attempt(
    child: Child,
    prompt: str,
    *,
    limits: Limits,
    account: Account | None = None,
    session_id: str | None = None,
    subject: str | None = None,
    attempt: int = 1,
    context: Mapping[str, Any] | None = None,
    state: dict[str, Any] | None = None,
    parent: ChildContext | None = None,
    tree: Tree | None = None,
    verify: Verifier | None = None,
    answer: Answerer | None = None,
    answers: Mapping[str, str] | None = None,
    fresh: bool = False,
) -> DelegationResult:
    """Run ``child`` once under its ``limits`` and describe what happened.

    ``account`` is the budget it draws on; ``tree`` what it shares with the other
    delegations of its tree (a parent's, by default); ``verify`` checks a success;
    ``answer`` answers its questions and ``answers`` are those already answered;
    ``fresh`` starts it without an earlier attempt's transcript. Never raises for
    the child's failure. ``KeyboardInterrupt``, ``SystemExit`` and cancellation of
    the caller propagate untouched.
    """
    if not isinstance(prompt, str):  # the caller's bug, not a blank task: said now
        raise TypeError(f"the prompt must be a string, not {type_name(prompt)}")
    if session_id is not None and not isinstance(session_id, str):
        raise TypeError(f"session_id must be a string, not {type_name(session_id)}")
    if subject is not None and not isinstance(subject, str):
        raise TypeError(f"subject must be a string, not {type_name(subject)}")
    if type(attempt) is not int:  # (the report's <attempt>, counted from 1)
        raise TypeError(f"attempt must be a whole number ≥ 1, not {type_name(attempt)}")
    if attempt < 1:
        raise ValueError(f"attempt must be a whole number ≥ 1, not {attempt}")
    if context is not None and not isinstance(context, Mapping):
        raise TypeError(f"context must be a mapping (a dict), not {type_name(context)}")
    call = as_callable(child)
    if verify is not None or answer is not None:  # (most delegations have neither)
        check_callbacks(verify=verify, answer=answer)
    limiter = Limiter(
        limits.timeout,
        idle_timeout=limits.idle_timeout,
        account=account,
        parent=parent._limiter if parent is not None else None,
    )
    if parent is not None:
        tree = tree or parent.tree
        answer = answer or parent._answer
    ctx = ChildContext(
        session_id=session_id or new_session_id(),
        limiter=limiter,
        limits=limits,
        attempt=attempt,
        subject=subject,
        context=context,
        state=state,
        parent=parent,
        runner=_nested,
        tree=tree,
        answer=answer,
        answers=answers,
        fresh=fresh,
    )
    fields = _fields(ctx)
    events.info(events.DELEGATION_STARTED, **fields, **_limit_fields(limits))
    started = time.perf_counter()
    try:
        verdict, output = await _run(call, prompt, ctx, limiter, verify)
    except BaseException as exc:  # stopped from outside: closed in the log, then passed on
        _stopped(ctx, exc, fields, round(time.perf_counter() - started, 6))
        raise
    duration = round(time.perf_counter() - started, 6)
    usage = ctx.charged
    if usage is not None:
        fields.update(usage.fields())
    overrun = limiter.overrun()
    if overrun is not None:
        fields["overrun_s"] = overrun
        passed = {"idle_timeout": limits.idle_timeout} if limiter.idle_passed else {}
        events.warning(
            events.DEADLINE_OVERRUN,
            **fields,
            timeout=limits.timeout,
            **passed,
            blocked_by=limiter.blocker(),
        )
    if verdict is None:
        events.info(events.DELEGATION_COMPLETED, duration=duration, **fields)
        if not ctx.requests_answered:  # a child that says nothing of its requests: its success does
            ctx.tree.succeeded(ctx.provider or UNNAMED_PROVIDER)
        return _result(ctx, duration, usage, output=output, overrun=overrun)
    storm = _rate_limited(ctx, verdict)
    failure = _failure(verdict, ctx, duration, storm)
    log_failure(failure, duration=duration, **fields)
    return _result(ctx, duration, usage, failure=failure, overrun=overrun)


def log_failure(failure: ChildFailure, **fields: Any) -> None:
    """The ``delegation_failed`` event of ``failure``, with ``fields`` (who, when): the
    one place its fields are written (``lyra logs`` reads them)."""
    events.info(
        events.DELEGATION_FAILED,
        category=str(failure.category),
        retryable=failure.suggested_retry,
        error_type=str(failure.error_type),
        blocked_on=failure.blocked_on,
        evidence=failure.evidence,
        **fields,
    )


def _rate_limited(ctx: ChildContext, verdict: Verdict) -> bool:
    """A provider's rate limit (a tool's: the service behind that tool's) tells the tree,
    which starts a cooldown for it if it came with a ``retry-after``; True when it is
    part of a storm (see :meth:`Tree.storm`)."""
    if verdict.error_type is not ErrorType.RATE_LIMIT:
        return False
    tool = verdict.failed_tool
    provider = tool_provider(tool) if tool else _provider(ctx, verdict)
    task = str(ctx.context.get("task_id", ctx.session_id))
    storm = ctx.tree.storm(provider, task)
    if not ctx.cooldown_refused:  # (lyra's own refusal within the cooldown tells nothing)
        wait = verdict.retry_after or 0.0
        ctx.tree.rate_limited(provider, wait, task=task, session_id=ctx.session_id)
    return storm


def _limit_fields(limits: Limits) -> dict[str, Any]:
    fields: dict[str, Any] = {"timeout": limits.timeout}
    if limits.idle_timeout is not None:
        fields["idle_timeout"] = limits.idle_timeout
    return fields


def _provider(ctx: ChildContext, verdict: Verdict) -> str:
    """Whose rate limit a failure met: the provider of the child's last model
    request, else the SDK that raised it."""
    if ctx.provider is not None:
        return ctx.provider
    source = verdict.cause.source if verdict.cause is not None else ""
    sdk = source.partition(".")[0].partition(" ")[0]
    return sdk if sdk and sdk != "lyra" else UNNAMED_PROVIDER  # (lyra.TransientError: the child's)


def _stopped(
    ctx: ChildContext, exc: BaseException, fields: dict[str, Any], duration: float
) -> None:
    """An attempt stopped from outside (its parent's end, the caller's cancellation):
    logged with what it spent and why, and listed in its parent's report."""
    usage = ctx.charged
    budget = _stopped_by_budget(ctx)
    reason = type(exc).__name__
    if budget:
        reason = "budget exhausted" + ("" if ctx.spent_last else " elsewhere")
    events.info(
        events.DELEGATION_CANCELLED,
        duration=duration,
        reason=reason,
        **fields,
        **(usage.fields() if usage is not None else {}),
    )
    parent = ctx.parent
    if parent is not None:
        parent.delegation_stopped(ctx.session_id, ctx.subject, usage, budget=budget)


def _stopped_by_budget(ctx: ChildContext) -> bool:
    """True when a budget ended this attempt or one it belongs to (a parent refused its
    next request ends with it the grandchildren it waits on)."""
    attempt: ChildContext | None = ctx
    while attempt is not None:
        if attempt.stopped_by is not None:
            return True
        attempt = attempt.parent
    return False


async def _nested(
    child: Child,
    prompt: str,
    *,
    limits: Limits,
    account: Account | None,
    subject: str | None,
    context: Mapping[str, Any] | None,
    parent: ChildContext,
    verify: Verifier | None,
) -> DelegationResult:
    """A grandchild's attempt (``ctx.delegate``): the parent's subject and task by default."""
    return await run_attempt(
        child,
        prompt,
        limits=limits,
        account=account,
        subject=subject if subject is not None else parent.subject,
        context=context if context is not None else _inherited(parent.context),
        parent=parent,
        verify=verify,
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
async def _run(
    call: Any, prompt: str, ctx: ChildContext, limiter: Limiter, verify: Verifier | None
) -> tuple[Verdict | None, str]:
    """Await the child under its limits; the verdict is ``None`` on success."""
    if not prompt.strip():
        return classify_blank_prompt(), ""
    if ctx.depth > MAX_DEPTH:
        return classify_too_deep(), ""
    account = ctx.account
    if account is not None and not account.has_room():
        return classify_budget(ctx), ""  # spent before it started: never run it
    output: object = None
    error: BaseException | None = None
    rejection: str | None = None
    verifying = False  # (still True when the deadline cut the caller's verify= off)
    left = 0.0  # seconds of the deadline left when verify= began
    cut_off = False
    scope = limiter.new_scope()
    task = asyncio.current_task() if limiter.deadlines is not None else None
    pending = task.cancelling() if task is not None else 0  # the caller's, before it
    try:
        with scope:  # our deadline's cancellation ends here, without a re-raise
            limiter.enter(scope, id(ctx))  # its deadline: see Limiter.enter
            ctx.observe()
            try:
                output = await call(prompt, ctx)
                # Our deadline's cancellation reached the child, which caught it and
                # returned: what it returned is what it had when the deadline passed.
                cut_off = scope.cancel_called and task is not None and task.cancelling() > 0
                if verify is not None and isinstance(output, str) and ctx.stopped is None:
                    verifying, left = True, limiter.remaining()
                    with limiter.waiting():  # (the caller's work: no idle time of the child's)
                        rejection = await _verified(verify, output)
                    verifying = False
            except Exception as exc:  # noqa: BLE001 - the child's failure, whatever it is
                error = exc
            finally:
                limiter.exit(id(ctx))
                ctx.ended = True  # (what it left running may spend no more: ChildContext)
                ctx.unobserve()
                ctx.release_all_tokens()
    except BaseException as exc:
        cancelled = limiter.cancelled_class()
        if (
            not _own_unmarked(exc, scope, cancelled, task, pending)
            and not _foreign(exc, scope, cancelled, task)
            and (
                _propagates(exc, cancelled)
                or (isinstance(exc, BaseExceptionGroup) and scope.cancelled_caught)
            )
        ):  # (the rest of a group whose cancellation the scope took: passed on, as before)
            raise
        # a BaseException of the child's own: a failure all the same (our limit's own
        # cancellation made anew, too: the attempt ends by its limit)
        error = exc
    if task is not None and task.cancelling() > pending:
        # The child caught a cancellation and went on. A cancel scope's around the call
        # (move_on_after, a task group's) is passed on, anyio delivering it again; a bare
        # task.cancel() (asyncio.timeout's too) cannot be told from one the child made
        # itself (its own watchdog, async-timeout 4), so its result stands, as asyncio has it.
        await anyio.lowlevel.checkpoint_if_cancelled()
    if verifying and scope.cancel_called and ctx.stopped_by is None and left >= ctx.timeout / 2:
        # verify= had half the deadline and did not finish: the caller's, not the child's
        # (no retry pays for the child again); with less, the child took the time.
        late = TimeoutError(
            f"verify= did not finish within the deadline ({left:.3g}s of {ctx.timeout:g}s "
            "were left when it began)"
        )
        return classify_verifier_raised(late), ""
    try:
        return _verdict(ctx, scope, output, error, rejection, cut_off)
    except Exception as exc:  # noqa: BLE001 - "a child's failure never raises", held here
        return classify_unclassifiable(exc, error), ""


async def _verified(verify: Verifier, output: str) -> str | None:
    """``None`` when ``verify`` accepts ``output``, else why it does not (its reason);
    :class:`_VerifierRaised` when ``verify`` raised instead of judging."""
    try:
        verdict = await call_off_the_loop(verify, output)
    except Exception as exc:
        raise _VerifierRaised from exc
    except asyncio.CancelledError as exc:  # one nobody made of us (a shared future's) is verify='s
        if not foreign_cancellation(exc):
            raise
        raise _VerifierRaised from exc
    if verdict is None or verdict is True:
        return None
    if verdict is False:
        return "the output was rejected (verify= returned False)"
    if not isinstance(verdict, str):  # (0, a list: no judgement the docs define)
        raise _VerifierRaised from TypeError(
            f"verify= returned {type_name(verdict)} {safe_str(verdict)[:60]!r}: return None "
            "or True to accept, False or a reason (a string) to reject"
        )
    return safe_str(verdict).strip() or "the output was rejected"


class _VerifierRaised(LyraError):
    """The caller's ``verify=`` raised (its ``__cause__``): not the child's failure."""


def _foreign(
    exc: BaseException, scope: Any, cancelled: type[BaseException], task: asyncio.Task[Any] | None
) -> bool:
    """:func:`foreign_cancellation`, in the task the attempt started in, and not this
    delegation's own cancellation (its deadline, idle timeout or budget)."""
    if task is None or asyncio.current_task() is not task:
        return False
    if isinstance(exc, cancelled) and scope.cancel_called:
        return False
    return foreign_cancellation(exc)


def _own_unmarked(
    exc: BaseException,
    scope: Any,
    cancelled: type[BaseException],
    task: asyncio.Task[Any] | None,
    pending: int,
) -> bool:
    """True for this delegation's own cancellation (its deadline, idle timeout or budget)
    come back without anyio's mark: a ``CancelledError`` made anew on its way out of the
    child (``asyncio.gather`` makes one when the awaitable that ends last ended
    otherwise), which the scope cannot tell for its own. Nobody else's cancellation of
    the task is pending (``pending``: the caller's, before the attempt)."""
    return (
        isinstance(exc, cancelled)
        and scope.cancel_called
        and task is not None
        and asyncio.current_task() is task
        and task.cancelling() <= pending
    )


def foreign_cancellation(exc: BaseException) -> bool:
    """True for a cancellation nobody made of the running task: a ``CancelledError``
    from a future someone else cancelled (a shared fetch whose first waiter timed
    out, ``fut.cancel(); await fut``) while no cancellation of this task is pending,
    or a ``GeneratorExit`` that code raised (a coroutine being closed is not running
    in a task). Such an exception is a failure like any other, never a reason to
    lose a result (asyncio only: on another backend a cancellation is always real)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no asyncio loop runs here
        return False
    if task is None:
        return False
    if isinstance(exc, BaseExceptionGroup):  # (a task group's: ordinary errors beside them)
        inner = exc.exceptions
        return all(isinstance(one, Exception) or foreign_cancellation(one) for one in inner)
    if isinstance(exc, GeneratorExit):
        return True
    return isinstance(exc, asyncio.CancelledError) and task.cancelling() == 0


def _propagates(exc: BaseException, cancelled: type[BaseException]) -> bool:
    """True for what must pass through a delegation untouched: an interrupt, an
    exit, a closing coroutine, a cancellation (``cancelled``: the backend's), or a
    group holding one."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_propagates(inner, cancelled) for inner in exc.exceptions)
    return isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit, cancelled))


def _verdict(
    ctx: ChildContext,
    scope: Any,
    output: object,
    error: BaseException | None,
    rejection: str | None,
    cut_off: bool = False,
) -> tuple[Verdict | None, str]:
    """What happened to the attempt, by the rule table; ``None`` on success.
    ``cut_off``: the child returned after catching our deadline's cancellation."""
    if ctx.stopped_by is not None:  # the budget ran out: whatever the child did after
        return classify_budget(ctx), ""
    # Only our limits cancel this scope, so cancel_called tells them apart from
    # a TimeoutError raised inside the child.
    if scope.cancel_called and (error is not None or scope.cancelled_caught or cut_off):
        if ctx.idle_timeout is not None and ctx.remaining() > 0:
            return classify_idle(ctx), ""
        return classify_timeout(ctx), ""
    stopped = ctx.stopped
    if isinstance(stopped, LoopDetected):
        return classify_loop(stopped, ctx), ""
    if ctx.blocked is not None:
        return classify_blocked(ctx), ""
    if isinstance(error, _VerifierRaised):
        return classify_verifier_raised(error.__cause__ or error), ""
    if error is not None:
        leaf = _leaf(error)
        if isinstance(leaf, _CANCELLED_ELSEWHERE):
            return classify_foreign_cancel(leaf, ctx), ""
        return classify_exception(error, ctx), ""
    if not isinstance(output, str):
        return classify_invalid_output(output, ctx), ""
    if rejection is not None:
        return classify_rejected(rejection, ctx), ""
    return None, valid_text(output)


_CANCELLED_ELSEWHERE = (
    GeneratorExit,
    asyncio.CancelledError,
    ForeignCancellation,
    concurrent.futures.CancelledError,  # (a thread pool's future someone else cancelled)
)
"""A cancellation the child met that is not the delegation's (which ends it otherwise)."""


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside a group (a framework's task group wraps the child's)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


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
    "question",
    "failed_tool",
    "storm",
    "category",
    "message",
    "session_id",
    "duration",
    "tool_usage",
)


def _failure(verdict: Verdict, ctx: ChildContext, duration: float, storm: bool) -> ChildFailure:
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
        ctx.question,
        verdict.failed_tool,
        storm,
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
    "child",
    "fallbacks",
    "status",
    "output",
    "failure",
    "session_id",
    "duration",
)


def _result(
    ctx: ChildContext,
    duration: float,
    usage: Usage | None,
    *,
    output: str | None = None,
    failure: ChildFailure | None = None,
    overrun: float | None = None,
) -> DelegationResult:
    return _RESULT(
        ctx.attempt,
        ctx.subject,
        usage,
        ctx.parent_session_id,
        tuple(ctx.failed_delegations),
        overrun,
        None,
        (),
        "completed" if failure is None else "failed",
        output if failure is None else None,
        failure,
        ctx.session_id,
        duration,
    )
