"""Pick the next attempt from a failure (DESIGN §5 and §12)."""

from __future__ import annotations

import asyncio
import inspect
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from lyra.delegation import ChildFailure, ErrorType, FailureCategory
from lyra.delegation._internal import folded_steps, foreign_cancellation
from lyra.errors import LyraError
from lyra.recovery._decompose import default_decomposer
from lyra.recovery._policy import RecoveryPolicy
from lyra.recovery._prompts import continuation_prompt, enriched_prompt

ContextProvider = Callable[[ChildFailure], Mapping[str, Any] | Awaitable[Mapping[str, Any]]]
"""Called once after a missing_context (or idle) failure; returns context to add to the prompt."""
AnswerSource = Callable[[str], Awaitable[str | None]]
"""Where a recovery loop looks for the answer to a question nobody answered in the
attempt (a durable run's mailbox); ``None``: nowhere."""

MAX_REDISPATCHES = 8
"""Times a task refused by a rate limit before doing any work is sent again without
counting as a retry (the cooldown is waited out each time)."""
MAX_ANSWERED = 5
"""Questions a task may have answered between its attempts (each answer runs the
attempt again, the answer waiting in ``ctx.ask``); they do not count as retries."""
_PROVIDER_TROUBLE = frozenset(
    {
        ErrorType.RATE_LIMIT,
        ErrorType.AUTH,
        ErrorType.CONNECTION,
        ErrorType.TIMEOUT,
        ErrorType.NOT_FOUND,
    }
)
"""Fine causes of a tool_error that another model (a fallback child) may not have (a
provider's 408 or 504, or its SDK's time-out, is ``timeout``; an unknown model, or no
agent at a remote's address, is ``not_found``: a missing subject is ``invalid_task``); and
``unknown`` when it is transient (a provider's 5xx, an outage): an ``unknown`` that is
not (an exception nothing classifies: a bug in the child) is no provider's, and a
fallback would hide it behind another child's success."""

_PASSING = frozenset({ErrorType.RATE_LIMIT, ErrorType.CONNECTION, ErrorType.TIMEOUT})
"""Fine causes that pass with time (see :func:`transient`)."""
_PARTIAL = FailureCategory.PARTIAL


@dataclass(frozen=True, slots=True)
class Plan:
    """One attempt: its strategy, prompt, timeout, the wait before it, and which child
    of the loop's chain runs it (0: the child; then each fallback)."""

    strategy: str
    prompt: str
    timeout: float
    wait: float = 0.0
    subtasks: tuple[str, ...] = ()
    child: int = 0
    fresh: bool = False
    """Start without the transcript of earlier attempts (after a context overflow)."""


@dataclass(slots=True)
class LoopState:
    """What the loop remembers between attempts."""

    prompt: str  # the task as it stands (enrichment replaces it once)
    child: object = None  # whose own ``decompose`` may split the task
    retries: int = 0
    enriched: bool = False
    children: int = 1
    """How many children the chain has (the child and its fallbacks)."""
    backoffs: int = 0
    """Backoffs on the child running now (a fallback starts again at 0)."""
    redispatches: int = 0
    answered: int = 0
    """Questions answered between attempts (see :func:`answered`)."""
    answers: dict[str, str] = field(default_factory=dict)
    """Answers to the child's questions, carried into every later attempt."""
    passed_over: list[str] = field(default_factory=list)
    """Each child the chain moved past, and why."""
    steps: list[str] = field(default_factory=list)
    """The steps every attempt so far completed, in order (a continuation lists them all:
    the attempt before the last was told not to redo them, so it did not list them)."""
    files: dict[str, None] = field(default_factory=dict)
    """The files every attempt so far modified, in order."""
    cut_short: bool = False
    """True when the loop's time budget cut the latest attempt's timeout below both what
    was planned for it and what the attempt before it had."""
    spent: str | None = None
    """Why the loop stopped with its budget spent (no strategy can run), in words."""

    def remember(self, failure: ChildFailure, *, decomposed: bool = False) -> ChildFailure:
        """``failure`` with the work of every attempt so far (its own last): what the
        next attempt is planned from. A ``decomposed`` attempt's failure lists every
        subtask completed so far, earlier attempts' too: those count once."""
        earlier = Counter(self.steps if decomposed else ())
        for step in failure.completed_steps:
            if earlier[step] > 0:
                earlier[step] -= 1
            else:
                self.steps.append(step)
        self.files.update(dict.fromkeys(failure.files_modified))
        steps = folded_steps(self.steps)
        if steps == failure.completed_steps and tuple(self.files) == failure.files_modified:
            return failure  # nothing earlier that it did not list itself
        return failure.model_copy(
            update={"completed_steps": steps, "files_modified": tuple(self.files)}
        )


async def next_plan(
    failure: ChildFailure,
    previous: Plan,
    state: LoopState,
    policy: RecoveryPolicy,
    context_provider: ContextProvider | None,
    *,
    rng: random.Random | None = None,
) -> Plan | None:
    """The attempt this failure calls for, or ``None`` when nothing can help.

    ``rng`` draws the backoff jitter (the ``random`` module when ``None``)."""
    if failure.category not in policy.retry_categories:
        return None
    retry = state.retries + 1
    match failure.category, failure.error_type:
        case FailureCategory.TIMEOUT, ErrorType.BUDGET:
            return _within_budget(failure, previous, state)
        case FailureCategory.TIMEOUT, ErrorType.IDLE:
            return await _after_idle(failure, previous, state, policy, context_provider)
        case FailureCategory.TIMEOUT, ErrorType.LOOP:
            return _after_loop(failure, previous, state)
        case FailureCategory.TIMEOUT, _:
            return await _after_timeout(failure, previous, state, policy)
        case FailureCategory.MISSING_CONTEXT, _:
            return await _enrich(failure, previous, state, context_provider)
        case FailureCategory.INVALID_TASK, ErrorType.CONTEXT_OVERFLOW:
            return await _after_overflow(failure, previous, state, policy)
        case FailureCategory.TOOL_ERROR, _ if failure.suggested_retry:
            fixed = await _fixed(failure, policy)
            wait = (
                failure.retry_after or 0.0
                if fixed
                else policy.backoff(retry, failure.retry_after, rng=rng)
            )
            # The same prompt again: the attempt failed before any step of its own, and
            # a continuation's prompt still lists what earlier attempts did.
            return _backing_off(replace(previous, strategy="backoff"), wait, state, policy)
        case FailureCategory.PARTIAL, _ if transient(failure):  # (a rate limit after a step)
            wait = policy.backoff(retry, failure.retry_after, rng=rng)
            return _backing_off(_continuation(failure, previous, state), wait, state, policy)
        case FailureCategory.PARTIAL, _:
            return _continuation(failure, previous, state)
        case _:
            return None


def _backing_off(plan: Plan, wait: float, state: LoopState, policy: RecoveryPolicy) -> Plan | None:
    """``plan`` after a backoff of ``wait`` s; ``None`` when the service asked for longer
    than the policy lets the loop wait."""
    if wait > policy.max_wait:
        return None
    state.backoffs += 1
    return replace(plan, wait=wait)


def transient(failure: ChildFailure) -> bool:
    """True when the failure's cause is a service's passing trouble (a rate limit, a
    dropped connection, a service's time-out, or a ``retry-after``), whatever the
    category: after a completed step it is ``partial``, and still wants a backoff."""
    return failure.retry_after is not None or failure.error_type in _PASSING


def redispatch(
    failure: ChildFailure,
    previous: Plan,
    state: LoopState,
    policy: RecoveryPolicy,
    *,
    rng: random.Random | None = None,
) -> Plan | None:
    """The same attempt again for a task a storm's rate limit refused before it did any
    work: not a retry (it never started), at most :data:`MAX_REDISPATCHES`, and never
    after a longer wait than the policy allows. It waits on this child as a backoff
    does (what ``fallback_after`` counts): the ``retry-after`` and up to ``jitter`` of a
    ``backoff_base`` more, so that siblings refused together are not sent on one beat
    as the cooldown ends; without one, a backoff (``rng`` draws the jitter)."""
    retry_after = failure.retry_after
    if retry_after is not None and retry_after > policy.max_wait:
        return None
    if state.redispatches >= MAX_REDISPATCHES:
        return None
    state.redispatches += 1
    if retry_after is None:
        wait = policy.backoff(state.redispatches, rng=rng)
    else:
        draw = rng.random() if rng is not None else random.random()  # jitter, not cryptography
        wait = min(policy.max_wait, retry_after + policy.backoff_base * policy.jitter * draw)
    state.backoffs += 1
    return replace(previous, strategy="redispatch", wait=wait)


def refused_before_work(failure: ChildFailure) -> bool:
    """True when a storm's rate limit (among siblings) turned the attempt away before any
    step ran, and any tool but the one call the rate limit refused."""
    refused = {failure.failed_tool: 1} if failure.failed_tool is not None else {}
    return (
        failure.storm
        and failure.error_type is ErrorType.RATE_LIMIT
        and not failure.completed_steps
        and failure.tool_usage == refused
    )


def fallback(
    failure: ChildFailure,
    previous: Plan,
    state: LoopState,
    policy: RecoveryPolicy,
    *,
    now: bool = False,
) -> Plan | None:
    """The next child of the chain, when this failure is the provider's (a quota or key
    that will not work, or trouble that outlasted ``policy.fallback_after`` backoffs, or
    that this child cannot wait out: no retry left for it, a ``retry-after`` over
    ``policy.max_wait``, or, ``now``, a wait longer than the loop has left) and a next
    child exists; the reason is kept for the report."""
    if previous.child + 1 >= state.children or not provider_failure(failure):
        return None
    backs_off = failure.suggested_retry if failure.category is not _PARTIAL else transient(failure)
    waitable = (failure.retry_after or 0.0) <= policy.max_wait
    retries_left = state.retries < policy.max_retries
    if (
        backs_off
        and state.backoffs < policy.fallback_after
        and waitable
        and retries_left
        and not now
    ):
        return None  # back off on this child first
    state.passed_over.append(f"{failure.error_type}: {failure.message}")
    state.backoffs = 0
    prompt = continuation_prompt(state.prompt, failure) if failure.completed_steps else state.prompt
    return replace(
        previous,
        strategy="fallback",
        prompt=prompt,
        wait=0.0,
        subtasks=(),
        child=previous.child + 1,
    )


def provider_failure(failure: ChildFailure) -> bool:
    """True for a failure that came from the model provider, not from a tool: a
    tool_error, or (after a completed step, ``partial``) a rate limit, a refused key or
    a dropped connection."""
    if failure.failed_tool is not None:
        return False
    if failure.category is _PARTIAL:
        return failure.error_type in _PROVIDER_TROUBLE
    return failure.category is FailureCategory.TOOL_ERROR and (
        failure.error_type in _PROVIDER_TROUBLE
        or (failure.error_type is ErrorType.UNKNOWN and failure.suggested_retry)
    )


async def _after_timeout(
    failure: ChildFailure, previous: Plan, state: LoopState, policy: RecoveryPolicy
) -> Plan | None:
    """A slow child: more time (a continuation if it finished steps); a child
    that did nothing: decomposition."""
    if failure.suggested_retry:
        timeout = min(previous.timeout * 2, policy.timeout_cap)
        if failure.completed_steps:
            prompt = continuation_prompt(state.prompt, failure)
            return replace(
                previous, strategy="continuation", prompt=prompt, timeout=timeout, wait=0.0
            )
        return replace(
            previous, strategy="timeout_doubling", prompt=state.prompt, timeout=timeout, wait=0.0
        )
    return await _decomposition(previous, state, policy)


def _after_loop(failure: ChildFailure, previous: Plan, state: LoopState) -> Plan | None:
    """A child that repeated one call: a continuation that names what it repeated,
    so it does not start the same loop again."""
    if not failure.suggested_retry:
        return None
    prompt = redo_prompt(state.prompt, failure)
    return replace(previous, strategy="continuation", prompt=prompt, subtasks=(), wait=0.0)


def continued_subtask(prompt: str, failure: ChildFailure) -> str | None:
    """The prompt a failed subtask runs with next, as the loop would continue a whole
    task: a continuation after steps done, a loop, a rejected success or a prompt over
    the context window; ``None`` for the same prompt (a question whose answer waits in
    ``ctx.ask``, a service's trouble, nothing done)."""
    if failure.completed_steps or failure.error_type in _CONTINUED:
        return redo_prompt(prompt, failure)
    return None


_CONTINUED = frozenset({ErrorType.LOOP, ErrorType.CONTEXT_OVERFLOW, ErrorType.VERIFICATION})


def redo_prompt(prompt: str, failure: ChildFailure) -> str:
    """The continuation of ``prompt`` after ``failure``: what was done, the blocker, what
    remains, and what to do differently after a loop or a context overflow."""
    return continuation_prompt(
        prompt,
        failure,
        _REDO_NOTES.get(failure.error_type, "").format(blocker=failure.blocked_on) or None,
    )


_REDO_NOTES = {
    ErrorType.LOOP: (
        "The previous attempt was stopped because it kept repeating the same call: "
        "{blocker}. Do not make that call again; use what it returned, or take another "
        "approach."
    ),
    ErrorType.CONTEXT_OVERFLOW: (
        "The previous attempt's conversation outgrew the model's context window; this "
        "attempt starts without it. Rely on the completed steps above, keep tool outputs "
        "short, and do not fetch again what is already done."
    ),
}


RERUN_AFRESH = (
    "Run the subtasks again, each afresh from its own completed steps: the transcript "
    "that outgrew the context window left behind (lyra's recovery does this)",
)
"""What a split task whose subtask outgrew the context window asks for, when its next
run is new (not the same prompt again): :func:`_after_overflow` runs it."""


async def _after_overflow(
    failure: ChildFailure, previous: Plan, state: LoopState, policy: RecoveryPolicy
) -> Plan | None:
    """The prompt outgrew the model's context window: split the task, else continue
    from the completed steps without the transcript; never the same prompt again. A
    split task's subtasks go on, each afresh from its own steps (:data:`RERUN_AFRESH`),
    unless one overflowed its own continuation too: nothing is left."""
    if previous.subtasks:
        if failure.suggested_actions != RERUN_AFRESH:
            return None
        return replace(previous, strategy="fresh_continuation", wait=0.0)
    split = await _decomposition(previous, state, policy)
    if split is not None:
        return replace(split, fresh=True)
    if not failure.completed_steps:
        return None  # nothing to continue from: only the same prompt is left
    prompt = redo_prompt(state.prompt, failure)
    if prompt == previous.prompt:
        return None  # it overflowed as it was, and did nothing new: the same prompt again
    return replace(previous, strategy="fresh_continuation", prompt=prompt, fresh=True, wait=0.0)


async def answered(
    failure: ChildFailure, previous: Plan, state: LoopState, answers: AnswerSource
) -> Plan | None:
    """The question the child asked, answered where it waits (a durable run's mailbox):
    the same task again, the answer waiting in ``ctx.ask`` for the same question. Not a
    retry (the child did nothing wrong), at most :data:`MAX_ANSWERED` times."""
    question = failure.question
    if failure.error_type is not ErrorType.INPUT_REQUIRED or question is None:
        return None
    if state.answered >= MAX_ANSWERED:
        return None
    answer = await answers(question)
    if answer is None:
        return None
    state.answers[question] = answer
    state.answered += 1
    if previous.subtasks:  # a split task: its subtasks again (the completed ones are kept)
        return replace(previous, strategy="answer", wait=0.0)
    return replace(previous, strategy="answer", prompt=state.prompt, subtasks=(), wait=0.0)


async def _after_idle(
    failure: ChildFailure,
    previous: Plan,
    state: LoopState,
    policy: RecoveryPolicy,
    context_provider: ContextProvider | None,
) -> Plan | None:
    """An idle child never just gets a longer wait: decomposition, else the
    context it may be waiting for, else (after real progress) a continuation
    under the same limits -- a hung call often goes through the next time."""
    split = await _decomposition(previous, state, policy)
    if split is not None:
        return split
    enriched = await _enrich(failure, previous, state, context_provider)
    if enriched is not None:
        return enriched
    return _continuation(failure, previous, state) if failure.suggested_retry else None


def _within_budget(failure: ChildFailure, previous: Plan, state: LoopState) -> Plan | None:
    """Out of budget: a continuation only where the account still has room
    (the attempt draws on the same account, so it can never overspend)."""
    return _continuation(failure, previous, state) if failure.suggested_retry else None


def _continuation(failure: ChildFailure, previous: Plan, state: LoopState) -> Plan:
    if previous.subtasks:  # a split task goes on with the subtasks not completed yet
        return replace(previous, strategy="continuation", wait=0.0)
    prompt = continuation_prompt(state.prompt, failure)
    return replace(previous, strategy="continuation", prompt=prompt, subtasks=(), wait=0.0)


async def _decomposition(previous: Plan, state: LoopState, policy: RecoveryPolicy) -> Plan | None:
    if previous.subtasks:
        return None  # already decomposed: no strategy left
    decomposer = policy.decomposer or default_decomposer(state.child)
    split = await called("decomposer", decomposer, state.prompt)
    if isinstance(split, str) or not isinstance(split, Iterable):
        raise CallbackRaised("decomposer") from TypeError(
            f"the decomposer returned {type(split).__name__}: return a list of subtask prompts"
        )
    subtasks = list(split)
    if not all(isinstance(subtask, str) for subtask in subtasks):
        raise CallbackRaised("decomposer") from TypeError(
            "the decomposer returned a subtask that is no prompt (a string)"
        )
    subtasks = list(dict.fromkeys(subtasks))  # a subtask given twice is one (run once)
    if len(subtasks) < 2:
        return None  # nothing to split: no strategy left
    return replace(
        previous, strategy="decomposition", prompt=state.prompt, subtasks=tuple(subtasks), wait=0.0
    )


async def _enrich(
    failure: ChildFailure,
    previous: Plan,
    state: LoopState,
    context_provider: ContextProvider | None,
) -> Plan | None:
    if context_provider is None or state.enriched:
        return None
    context = await called("context_provider", context_provider, failure)
    if not context:
        return None
    if not isinstance(context, Mapping):
        raise CallbackRaised("context_provider") from TypeError(
            f"context_provider= returned {type(context).__name__}: return a mapping (a dict) of "
            "names to the context they give, or None"
        )
    question = failure.question  # its answer: keyed by the question, or as "answer"
    answer = context.get(question, context.get("answer")) if question is not None else None
    if question is not None and isinstance(answer, str) and answer.strip():
        state.answers[question] = answer  # it waits in ctx.ask for the question too
    state.enriched = True
    state.prompt = enriched_prompt(state.prompt, failure, context)
    if previous.subtasks:  # a split task: its subtasks again, the answer waiting in ctx.ask
        return replace(previous, strategy="enrichment", wait=0.0)
    return replace(previous, strategy="enrichment", prompt=state.prompt, subtasks=(), wait=0.0)


async def _fixed(failure: ChildFailure, policy: RecoveryPolicy) -> bool:
    fixed = False
    for fixer in policy.fixers:
        fixed = bool(await called("fixer", fixer, failure)) or fixed
    return fixed


class CallbackRaised(LyraError):
    """A callback of the caller's (``callback``: ``context_provider``, ``decomposer``,
    ``fixer``) raised, or answered what it may not: its error is the ``__cause__``. The
    loop ends on the last attempt's report (see :func:`~._loop.recover`)."""

    def __init__(self, callback: str) -> None:
        super().__init__(f"{callback} failed")
        self.callback = callback

    def __reduce__(self) -> tuple[Any, ...]:  # (pickled with its own arguments, not args)
        return type(self), (self.callback,), self.__dict__


async def called(callback: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, awaited if need be; what it raises is :class:`CallbackRaised` --
    a ``CancelledError`` too, unless it is the caller's own cancellation (one nobody
    made of this task, from a shared future someone else cancelled, is the callback's
    failure, never a reason to lose the report)."""
    try:
        return await _maybe_await(fn(*args))
    except Exception as exc:
        raise CallbackRaised(callback) from exc
    except asyncio.CancelledError as exc:
        if not foreign_cancellation(exc):
            raise
        raise CallbackRaised(callback) from exc


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
