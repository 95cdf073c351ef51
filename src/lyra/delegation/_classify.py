"""The failure taxonomy: DESIGN §3's rule table, first match wins.

``classify`` looks at what happened to one attempt (our deadline, a declared
blocker, an exception reduced to a :class:`~._foreign.Cause`) and at the
progress the child reported, and returns the category, whether a retry can
help, and the rule that decided it (``evidence``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from lyra._taxonomy import ErrorType, FailureCategory
from lyra._text import clipped, safe_str, type_name
from lyra.delegation._budget import Account, Usage
from lyra.delegation._context import ChildContext
from lyra.delegation._foreign import Cause, Kind, describe
from lyra.errors import ChildSignal, ForeignCancellation, LoopDetected, QuestionAsked

_C = FailureCategory


@dataclass(frozen=True, slots=True)
class Verdict:
    """The category of one failed attempt and why."""

    category: FailureCategory
    retryable: bool
    error_type: ErrorType
    evidence: str
    message: str
    blocked_on: str
    retry_after: float | None = None
    cause: Cause | None = None
    failed_tool: str | None = None
    """The tool whose exception ended the attempt, when a tool's did."""


# Rules 6-10: the category an exception's kind falls into when no earlier
# rule matched, with its retryability and the rule's words.
_BY_KIND: dict[Kind, tuple[FailureCategory, bool, str]] = {
    Kind.TRANSIENT: (_C.TOOL_ERROR, True, "rule 6: transient infrastructure failure"),
    Kind.ENVIRONMENT: (_C.TOOL_ERROR, True, "rule 7: fixable environment problem"),
    Kind.PERMANENT: (_C.TOOL_ERROR, False, "rule 8: permanent infrastructure failure"),
    Kind.MALFORMED_TASK: (_C.INVALID_TASK, False, "rule 9: the task itself is malformed"),
    Kind.CONTEXT_OVERFLOW: (
        _C.INVALID_TASK,
        False,
        "rule 9: the prompt is over the model's context window (split it, or continue "
        "without the transcript)",
    ),
    Kind.UNKNOWN: (_C.TOOL_ERROR, False, "rule 10: unrecognised error"),
}


def exception_text(exc: BaseException) -> str:
    """``Type: message`` as Python prints it, for reports; lyra's own signals
    carry a message written for the report, so it stands alone. Never raises,
    whatever the exception's ``__str__`` does; a runaway message is clipped
    (:func:`~._text.clipped`)."""
    text = clipped(_told(exc))
    if text and isinstance(exc, ChildSignal):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _told(exc: BaseException) -> str:
    """``str(exc)``, or its ``message`` alone when it also carries a response ``body``
    (pydantic-ai's errors append the whole body to their text: a refusal's report
    carried 3,300 characters of JSON). Instance attributes only: nothing is run."""
    try:
        own = vars(exc)
    except TypeError:  # (no __dict__)
        return safe_str(exc)
    message = own.get("message")
    if isinstance(message, str) and message.strip() and own.get("body"):
        return safe_str(message)
    return safe_str(exc)


def classify_unclassifiable(exc: BaseException, error: BaseException | None) -> Verdict:
    """Rule 10 for a failure lyra could not even describe (its own classification
    broke on a hostile exception): a failure all the same, never an escape."""
    what = safe_str(error) if error is not None else "the child's result"
    text = f"{type_name(error) if error is not None else 'Child'}: {what}"
    return Verdict(
        category=_C.TOOL_ERROR,
        retryable=False,
        error_type=ErrorType.UNKNOWN,
        evidence=f"rule 10: the failure could not be classified ({type_name(exc)})",
        message=text,
        blocked_on=text,
    )


def classify_timeout(ctx: ChildContext) -> Verdict:
    """Rule 1: our deadline passed; retryable only if the child made progress
    (and the tree's budget has room for another try). A child that was waiting for
    the answer to its question is blocked on that question (the report carries it)."""
    verdict = _timeout(ctx.timeout, ctx.made_progress, _room(ctx))
    tool, running = ctx.current_tool, ctx.tool_running_for
    if tool and running:  # a tool that never returned: its own wait is the suspect
        inside = f"; the tool '{tool}' was still running (for {running:.1f}s)"
        verdict = replace(
            verdict,
            evidence=verdict.evidence + inside,
            message=verdict.message + inside,
        )
    asking = ctx.asking
    if asking is None:
        return verdict
    return replace(
        verdict,
        evidence=f"{verdict.evidence}; it was waiting for the answer to its question (ctx.ask)",
        blocked_on=f"No answer before the deadline to: {asking}",
    )


@lru_cache(maxsize=256)
def _timeout(timeout: float, progress: bool, room: bool) -> Verdict:
    """The verdict of a timeout, made once for each timeout value: when many
    children expire together, each is one look-up, and their failures share its
    strings."""
    return Verdict(
        category=_C.TIMEOUT,
        retryable=progress and room,
        error_type=ErrorType.TIMEOUT,
        evidence=(
            "rule 1: the deadline passed "
            + ("after progress" if progress else "with no tool run and no step completed")
            + ("" if room else "; the budget has no room left")
        ),
        message=f"Child timed out after {timeout:g}s",
        blocked_on="Time limit insufficient" if progress else "No progress before the deadline",
    )


def classify_idle(ctx: ChildContext) -> Verdict:
    """Rule 1 (idle): no progress for ``idle_timeout`` seconds; retryable only
    after earlier progress, with room in the budget. Names the tool that was
    running, if one was, and for how long."""
    idle = ctx.idle_timeout
    progress = ctx.made_progress
    tool, running = ctx.current_tool, ctx.tool_running_for
    inside = f" while the tool '{tool}' ran (for {running:.1f}s)" if tool and running else ""
    return Verdict(
        category=_C.TIMEOUT,
        retryable=progress and _room(ctx),
        error_type=ErrorType.IDLE,
        evidence=f"rule 1: no progress for {idle:g} s (idle timeout){inside}"
        + ("" if progress else "; nothing done before it"),
        message=f"Child made no progress for {idle:g}s (idle timeout){inside}",
        blocked_on=f"No progress for {idle:g}s" + (f" in the tool '{tool}'" if tool else ""),
    )


def classify_budget(ctx: ChildContext) -> Verdict:
    """Rule 1 (budget): the tree's budget ran out; retryable only when the
    accounts above the one that ran out still have room."""
    account = ctx.stopped_by
    if account is None:  # no room before the attempt started
        assert ctx.account is not None
        why = f"nothing left before the attempt started ({ctx.account.why_spent()})"
        room = False
    else:
        why = account.exhausted or "a limit was reached"
        # A retry with a budget of its own could go on only where the accounts
        # above still have room, and never when retries share this one.
        room = (
            not account.retries_included
            and account.parent is not None
            and account.parent.has_room()
        )
    spenders = _spenders(ctx.usage, ctx.spent_by) + _shared(ctx.usage, account)
    return Verdict(
        category=_C.TIMEOUT,
        retryable=room,
        error_type=ErrorType.BUDGET,
        evidence=f"rule 1: budget exhausted: {why}{spenders}",
        message=f"Child stopped: budget exhausted ({why}){spenders}",
        blocked_on="Budget exhausted",
    )


_NAMED_SPENDERS = 5


def _spenders(total: Usage, spent_by: dict[str, Usage]) -> str:
    """Who spent what an attempt was charged (``total``), most first: the delegations it
    made and, beside them, the attempt itself (its own model calls and tools)."""
    if not spent_by:
        return ""
    itself = total.less(sum(spent_by.values(), Usage()))
    spenders = {"the attempt itself": itself, **spent_by} if itself else spent_by
    ranked = sorted(spenders.items(), key=lambda item: (-item[1].tokens, -item[1].cost_usd))
    named = [f"{name} ({_spend(usage)})" for name, usage in ranked[:_NAMED_SPENDERS]]
    more = len(ranked) - len(named)
    return "; spent by " + ", ".join(named) + (f" and {more} more" if more > 0 else "")


def _shared(total: Usage, account: Account | None) -> str:
    """When the budget that ran out is shared (sibling tasks, the parent, earlier
    attempts draw on it too): how much of it this attempt spent."""
    if account is None or account.usage == total:
        return ""
    mine = _spend(total) if total else "nothing"
    return (  # (in all: what work already under way charged after the limit counts too)
        f"; this attempt's share: {mine}; charged to the budget in all so far: "
        f"{_spend(account.usage)}; the rest was spent by others drawing on the same budget "
        "(other tasks, its parent, earlier attempts)"
    )


def _spend(usage: Usage) -> str:
    parts = [f"{usage.tokens} tokens"]
    if usage.cost_usd:
        parts.append(f"${usage.cost_usd:.4f}")
    if usage.turns:
        parts.append(f"{usage.turns} turn{'' if usage.turns == 1 else 's'}")
    if usage.tool_calls:
        parts.append(f"{usage.tool_calls} tool call{'' if usage.tool_calls == 1 else 's'}")
    return ", ".join(parts)


def _room(ctx: ChildContext) -> bool:
    return ctx.account is None or ctx.account.has_room()


def classify_exception(exc: BaseException, ctx: ChildContext) -> Verdict:
    """Rules 2-10 for an attempt that ended in an exception."""
    if ctx.blocked is not None:
        return classify_blocked(ctx)
    cause = describe(exc)
    text = exception_text(exc)
    tool = ctx.failed_tool if ctx.raised_by_tool(exc) else None
    via_tool = f" in tool '{tool}'" if tool else ""
    source = f"{cause.source}{via_tool}"
    blocker = f"{text} (in tool '{tool}')" if tool else text  # which call a parent must mend

    def verdict(category: FailureCategory, retryable: bool, rule: str) -> Verdict:
        return Verdict(
            category=category,
            retryable=retryable,
            error_type=cause.error_type,
            evidence=f"{rule} ({source})",
            message=text,
            blocked_on=blocker,
            retry_after=cause.retry_after,
            cause=cause,
            failed_tool=tool,
        )

    if cause.kind is Kind.BUDGET:
        return classify_framework_limit(cause, text, ctx)
    if cause.kind is Kind.OUTPUT_INVALID:  # the framework's check of a claimed success
        return classify_rejected(text, ctx, source=cause.source)
    if cause.kind is Kind.INVALID_INPUT and not ctx.made_progress:
        return verdict(_C.INVALID_TASK, False, "rule 3: the input failed validation")
    if cause.kind is Kind.NOT_FOUND:
        return verdict(_C.INVALID_TASK, False, "rule 4: the subject does not exist")
    if cause.kind is Kind.INCOMPLETE:
        return verdict(_C.PARTIAL, True, "rule 5: the child stopped before finishing")
    # Deliberately ahead of rule 5 (DESIGN §3 lists it after): a refused key
    # or a malformed request fails the same way however much work came first,
    # so continuing it would only pay for the same failure again.
    if cause.kind in (Kind.PERMANENT, Kind.MALFORMED_TASK, Kind.CONTEXT_OVERFLOW):
        return verdict(*_BY_KIND[cause.kind])
    if ctx.completed_steps:
        steps = ctx.steps_done
        return verdict(_C.PARTIAL, True, f"rule 5: failed after {steps} completed step(s)")
    if cause.kind is Kind.INVALID_INPUT:  # validation failed after tools ran: rule 10
        return verdict(*_BY_KIND[Kind.UNKNOWN])
    return verdict(*_BY_KIND[cause.kind])


def classify_framework_limit(cause: Cause, text: str, ctx: ChildContext) -> Verdict:
    """Rule 1 for a limit of the framework's own run: a usage limit, max turns or a
    recursion limit (``budget``), or a time limit of its own (``timeout``, or
    ``idle`` when it measured time without progress, as LangGraph's node timeouts
    do). The run stopped unfinished. A continuation starts a fresh run with the
    framework's limits anew, so it is retryable after progress while the tree's
    budget has room."""
    progress = ctx.made_progress
    timed = cause.error_type in (ErrorType.TIMEOUT, ErrorType.IDLE)
    return Verdict(
        category=_C.TIMEOUT,
        retryable=progress and _room(ctx),
        error_type=cause.error_type if timed else ErrorType.BUDGET,
        evidence=f"rule 1: the framework's own limit was reached ({cause.source})"
        + ("" if progress else "; nothing done before it"),
        message=text,
        blocked_on=text,
        cause=cause,
    )


def classify_invalid_output(output: object, ctx: ChildContext) -> Verdict:
    """Rule 10 for a child that broke the contract by returning a non-string."""
    text = f"Child returned {type(output).__name__}, not str"
    return Verdict(
        category=_C.TOOL_ERROR,
        retryable=False,
        error_type=ErrorType.UNKNOWN,
        evidence="rule 10: the child broke its contract (output must be str)",
        message=text,
        blocked_on=text,
    )


EMPTY_PROMPT = "Empty prompt"
"""What a blank prompt's failure is blocked on."""


def classify_blank_prompt() -> Verdict:
    """Rule 3 before the child runs: an empty prompt is no task."""
    return Verdict(
        category=_C.INVALID_TASK,
        retryable=False,
        error_type=ErrorType.DATA,
        evidence="rule 3: the prompt is empty",
        message="The prompt is empty",
        blocked_on=EMPTY_PROMPT,
    )


MAX_DEPTH = 32
"""The deepest a delegation tree may nest (``ctx.delegate`` within ``ctx.delegate``…):
deeper is a task that recurses without end, failed before it runs out of stack."""


def classify_too_deep() -> Verdict:
    """Rule 3 before the child runs: a delegation nested deeper than :data:`MAX_DEPTH`."""
    return Verdict(
        category=_C.INVALID_TASK,
        retryable=False,
        error_type=ErrorType.DATA,
        evidence=f"rule 3: the delegation tree is deeper than {MAX_DEPTH} levels",
        message=f"Delegation nested deeper than {MAX_DEPTH} levels (a task that recurses "
        "without end?)",
        blocked_on=f"Delegation tree deeper than {MAX_DEPTH} levels",
    )


def classify_blocked(ctx: ChildContext) -> Verdict:
    """Rule 2: the child declared itself blocked (even if it swallowed the signal);
    a question nobody answered is ``missing_context`` / ``input_required``."""
    blocked = ctx.blocked
    assert blocked is not None
    category = blocked.category
    if isinstance(blocked, QuestionAsked):
        return Verdict(
            category=category,
            retryable=False,
            error_type=ErrorType.INPUT_REQUIRED,
            evidence="rule 2: the child asked a question nobody answered (ctx.ask)"
            + (
                f"; the delegation's answerer raised {blocked.answerer_failed}"
                if blocked.answerer_failed
                else ""
            ),
            message=blocked.reason,
            blocked_on=blocked.reason,
        )
    return Verdict(
        category=category,
        retryable=category is _C.TOOL_ERROR,
        error_type=ErrorType.DATA if category is not _C.TOOL_ERROR else ErrorType.UNKNOWN,
        evidence=f"rule 2: the child declared itself blocked ({category})",
        message=blocked.reason,
        blocked_on=blocked.reason,
    )


def classify_loop(loop: LoopDetected, ctx: ChildContext) -> Verdict:
    """Rule 1 (loop): the same tool call past ``max_repeats`` is not progress; the
    attempt ends as a timeout, retryable with a continuation that names the call."""
    return Verdict(
        category=_C.TIMEOUT,
        retryable=_room(ctx),
        error_type=ErrorType.LOOP,
        evidence=f"rule 1: the same tool call repeated past max_repeats={ctx.limits.max_repeats} "
        "is not progress",
        message=str(loop),
        blocked_on=f"Repeating {loop.tool}({loop.arguments}) ×{loop.count}",
    )


def classify_rejected(reason: str, ctx: ChildContext, *, source: str = "verify=") -> Verdict:
    """Rule 5 (verification): a success the caller's ``verify=`` (or the framework's
    own output validation) rejected is ``partial``: retryable with a continuation
    that names the reason."""
    return Verdict(
        category=_C.PARTIAL,
        retryable=True,
        error_type=ErrorType.VERIFICATION,
        evidence=f"rule 5: the child called its work done and {source} rejected it",
        message=f"Output rejected: {reason}",
        blocked_on=f"Output rejected: {reason}",
    )


def classify_verifier_raised(error: BaseException) -> Verdict:
    """Rule 10: the caller's ``verify=`` raised instead of judging a success: its bug,
    not the child's, so no retry pays for the child again to meet it once more."""
    text = exception_text(error)
    return Verdict(
        category=_C.TOOL_ERROR,
        retryable=False,
        error_type=ErrorType.VERIFICATION,
        evidence="rule 10: verify= raised instead of judging the child's output",
        message=f"verify= raised {text} (the child's output was not judged)",
        blocked_on=f"verify= raised {text}",
    )


def classify_foreign_cancel(error: BaseException, ctx: ChildContext) -> Verdict:
    """Rule 10 (or 5 after a completed step) for a ``CancelledError`` or
    ``GeneratorExit`` that did not come from this delegation's cancellation nor its
    caller's: a future someone else cancelled. Retryable: the next try may not meet
    it."""
    inner = error.__cause__ if isinstance(error, ForeignCancellation) else None
    name = type_name(inner if inner is not None else error)
    text = f"{name}: cancelled from outside the delegation"
    if safe_str(error):
        text += f" ({safe_str(error)})"
    progress = bool(ctx.completed_steps)
    return Verdict(
        category=_C.PARTIAL if progress else _C.TOOL_ERROR,
        retryable=True,
        error_type=ErrorType.UNKNOWN,
        evidence=f"rule {5 if progress else 10}: {name} cancelled from outside the delegation "
        "(a future someone else cancelled, not this delegation's deadline nor its caller)",
        message=text,
        blocked_on=text,
    )
