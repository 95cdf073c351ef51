"""The recovery loop: attempt, classify, pick a strategy, attempt again."""

from __future__ import annotations

import functools
import random
import reprlib
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict

from lyra import events, tracing
from lyra.children import default_child
from lyra.delegation import (
    Answerer,
    Budget,
    Child,
    ChildFailure,
    ChildRef,
    DelegationResult,
    ErrorType,
    FailureCategory,
    Limits,
    Usage,
    Verifier,
    exception_text,
)
from lyra.delegation._internal import (
    Account,
    Tree,
    check_callbacks,
    checked_fallbacks,
    child_name,
    new_session_id,
    resolved,
    run_attempt,
)
from lyra.recovery import _testing
from lyra.recovery._policy import RecoveryPolicy, checked_policy
from lyra.recovery._prompts import decompose, subtask_prompt
from lyra.recovery._strategies import (
    RERUN_AFRESH,
    AnswerSource,
    CallbackRaised,
    ContextProvider,
    LoopState,
    Plan,
    answered,
    continued_subtask,
    fallback,
    next_plan,
    redispatch,
    refused_before_work,
)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of a recovery loop, as the loop asks for it."""

    plan: Plan
    number: int
    state: dict[str, Any]
    """The child's ``ctx.state``, carried across the task's attempts (updated in place)."""
    budget_left: Budget | None = None
    """What the task's account had left when the attempt began (``None``: no budget)."""
    answers: Mapping[str, str] = field(default_factory=dict)
    """Answers to the child's questions so far (``ctx.ask`` returns them at once)."""


AttemptRunner = Callable[[Attempt], Awaitable[DelegationResult]]
"""Runs one attempt of a loop as its plan says and returns its result."""
Pause = Callable[[], AbstractAsyncContextManager[None]]
"""What a loop enters around each wait between its attempts (see :func:`recover`)."""


@dataclass(frozen=True, slots=True)
class Replay:
    """The seam a durable engine (DBOS) runs a recovery loop through.

    ``run_attempt`` runs each attempt (a checkpointed step) and ``sleep`` each
    wait before a retry (a durable sleep). With it, everything the loop decides
    between two attempts is a function of the earlier attempts' results only,
    so an engine that replays recorded attempts after a crash takes the same
    path: backoff jitter comes from a generator seeded with the task ID,
    ``policy.total_budget`` is charged with the attempts' recorded durations
    and the waits instead of read from a clock, and a token budget with the
    attempts' recorded usage (each attempt may spend what was left when it
    began).
    """

    run_attempt: AttemptRunner
    sleep: Callable[[float], Awaitable[None]]
    answers: AnswerSource | None = None
    """Where a question nobody answered waits for its answer (a durable mailbox). An
    answered question runs the task again with the answer and is not a retry: it
    does not count against ``policy.max_retries``, nor is its wait charged to
    ``policy.total_budget`` (``policy.answer_wait`` bounds it)."""


class AttemptRecord(BaseModel):
    """One attempt of a recovery loop."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    number: int
    strategy: str
    prompt: str
    timeout: float
    wait: float
    result: DelegationResult
    child: str | None = None
    """The child that ran it, when a fallback chain was given."""
    child_index: int = 0
    """Its place in the chain (0: the child; then each fallback)."""


class RecoveryOutcome(BaseModel):
    """The last result of a recovery loop, every attempt that led to it, and the
    child's state after the last one."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    task_id: str
    result: DelegationResult
    attempts: tuple[AttemptRecord, ...]
    state: dict[str, Any] = {}
    """The child's ``ctx.state`` after the last attempt."""

    @property
    def report(self) -> str:
        """The last attempt's report text (its ``<attempt>`` tag says which)."""
        return self.result.report

    @property
    def recovered(self) -> bool:
        """True when a failed attempt was followed by success."""
        return self.result.ok and len(self.attempts) > 1

    @property
    def usage(self) -> Usage:
        """What every attempt of the loop was charged, together."""
        total = Usage()
        for attempt in self.attempts:
            if attempt.result.usage is not None:
                total = total + attempt.result.usage
        return total


@tracing.recovery
async def recover(
    prompt: str,
    *,
    child: Child | ChildRef | None = None,
    limits: Limits | None = None,
    account: Account | None = None,
    policy: RecoveryPolicy | None = None,
    context_provider: ContextProvider | None = None,
    subject: str | None = None,
    context: Mapping[str, Any] | None = None,
    task_id: str | None = None,
    state: dict[str, Any] | None = None,
    replay: Replay | None = None,
    fallbacks: Sequence[Child | ChildRef] = (),
    tree: Tree | None = None,
    verify: Verifier | None = None,
    answer: Answerer | None = None,
    pause: Pause | None = None,
) -> RecoveryOutcome:
    """Delegate ``prompt`` and recover from failures until success or no strategy is left.

    Stops on success, on a failure no strategy applies to, after
    ``policy.max_retries`` retries, when ``policy.total_budget`` is spent, or
    when the budget has nothing left. Every attempt, decomposed subtask and
    nested delegation draws on one account: ``limits.budget``'s, itself drawing
    on ``account`` when given (a run's account shared by many loops). A
    provider's failure moves on to the next of ``fallbacks`` (see
    :func:`~._strategies.fallback`); ``verify`` checks each success and
    ``answer`` answers the child's questions. ``replay`` runs the attempts and
    waits through a durable engine (see :class:`Replay`); ``child`` then only
    offers its ``decompose``. ``pause()`` is entered around each wait between
    attempts (a pool gives the task's place to another meanwhile). The result
    carries the spend of every attempt.
    """
    policy = checked_policy(policy) or RecoveryPolicy()
    check_callbacks(context_provider=context_provider)
    if limits is not None and not isinstance(limits, Limits):
        raise TypeError(
            f"limits= must be a lyra.Limits, e.g. Limits(timeout=60); got {reprlib.repr(limits)}"
        )
    limits = limits or Limits()
    first = resolved(child) if child is not None else None
    task_id = task_id or f"task-{uuid.uuid4().hex[:12]}"
    budget = Account.for_budget(limits.budget, account)
    if budget is not None and budget is not account:
        budget.retries_included = True  # the task's cap: every attempt draws on it
    attempt: AttemptRunner
    rng: random.Random | None = None
    children = (first, *map(resolved, checked_fallbacks(fallbacks)))
    if replay is None:
        chain = tuple(c if c is not None else default_child() for c in children)
        local = _Local(
            chain, subject, context, task_id, limits, budget, tree or Tree(), verify, answer
        )
        attempt = local.run
    else:
        attempt, rng = replay.run_attempt, random.Random(task_id)
        if policy.decomposer is None and not callable(getattr(first, "decompose", None)):
            policy = policy.model_copy(update={"decomposer": decompose})  # replayable: rules
    clock = _Clock(policy.total_budget, replay=replay, pause=pause)
    loop = LoopState(prompt=prompt, child=first, children=len(children))
    progress = state if state is not None else {}
    timeout = clock.clamp(min(limits.timeout, policy.timeout_cap))
    plan: Plan | None = Plan("initial", prompt, timeout)
    history: list[AttemptRecord] = []
    answers = replay.answers if replay is not None else None
    while plan is not None:
        number = len(history) + 1
        left = budget.left() if budget is not None else None
        result = await attempt(Attempt(plan, number, progress, left, dict(loop.answers)))
        clock.charge(result.duration)
        if replay is not None and budget is not None and result.usage:
            budget.charge(**result.usage.model_dump())  # recorded usage, the same on every replay
        history.append(_record(number, plan, result, children if fallbacks else None))
        failure = result.failure
        if failure is None:
            break
        if budget is not None and not budget.has_room():  # no strategy can run
            loop.spent = budget.why_spent()
            break
        so_far = loop.remember(failure, decomposed=bool(plan.subtasks))  # (every attempt's work)
        ran, plan = plan, _without_retry(failure, so_far, plan, loop, policy, rng)
        if plan is None and answers is not None:
            plan = await answered(failure, ran, loop, answers)
        counted = False
        if plan is None:
            if loop.retries >= policy.max_retries:
                break
            try:
                plan = await next_plan(so_far, ran, loop, policy, context_provider, rng=rng)
            except CallbackRaised as raised:  # the caller's bug: the last report stands
                _log_callback_failed(raised, task_id=task_id, subject=subject)
                break
            counted = plan is not None
        planned, plan = plan, _fitted(clock, plan, ran, so_far, loop, policy)
        loop.retries += counted and plan is not None and plan.strategy != "fallback"
        if plan is not None:
            _log_recovery(plan, number + 1, failure, task_id=task_id, subject=subject)
            await clock.sleep(plan.wait)
            plan = clock.after_wait(plan)
            if plan is not None and planned is not None:  # (less than planned, and than before)
                loop.cut_short = plan.timeout < min(planned.timeout, ran.timeout)
    return RecoveryOutcome(
        task_id=task_id, result=_final(history, loop), attempts=tuple(history), state=progress
    )


def _fitted(
    clock: _Clock,
    plan: Plan | None,
    ran: Plan,
    so_far: ChildFailure,
    loop: LoopState,
    policy: RecoveryPolicy,
) -> Plan | None:
    """``plan`` as the loop's time allows (its timeout cut to what is left); a wait on
    the same child that does not fit moves to the next child now, when there is one (a
    switch, not a retry)."""
    fitted = clock.fit(plan)
    if fitted is not None or plan is None or plan.wait <= 0 or plan.child != ran.child:
        return fitted
    if clock.remaining() <= 0:
        return None  # (no time for any child)
    return clock.fit(fallback(so_far, ran, loop, policy, now=True))


def _log_callback_failed(raised: CallbackRaised, *, task_id: str, subject: str | None) -> None:
    cause = raised.__cause__ or raised
    events.error(
        events.RECOVERY_CALLBACK_FAILED,
        task_id=task_id,
        subject=subject,
        callback=raised.callback,
        error=exception_text(cause),
    )


def _without_retry(
    failure: ChildFailure,
    so_far: ChildFailure,
    plan: Plan,
    loop: LoopState,
    policy: RecoveryPolicy,
    rng: random.Random | None,
) -> Plan | None:
    """An attempt that does not count as a retry: the next fallback child (continuing
    the work ``so_far``), or the same attempt again for a task a rate limit turned away
    before it did any work."""
    moved = fallback(so_far, plan, loop, policy)
    if moved is not None:
        return moved
    if refused_before_work(failure):
        return redispatch(failure, plan, loop, policy, rng=rng)
    return None


def _record(
    number: int, plan: Plan, result: DelegationResult, chain: Sequence[Any] | None
) -> AttemptRecord:
    return AttemptRecord(
        number=number,
        strategy=plan.strategy,
        prompt=plan.prompt,
        timeout=plan.timeout,
        wait=plan.wait,
        result=result,
        child=child_name(chain[plan.child]) if chain is not None else None,
        child_index=plan.child,
    )


def _final(history: list[AttemptRecord], loop: LoopState) -> DelegationResult:
    """The last attempt's result, carrying the spend of every attempt and, after a
    fallback, which child answered and why the ones before it did not. A last attempt
    the loop's time budget cut short, which timed out before any progress, is no
    verdict on the task ("infeasible as it stands"): the failure before it stands."""
    result = history[-1].result
    failure = result.failure
    if (
        loop.cut_short
        and len(history) > 1
        and history[-2].child_index == history[-1].child_index
        and failure is not None
        and failure.category is FailureCategory.TIMEOUT
        and not failure.completed_steps
        and not failure.tool_usage
    ):
        result = history[-2].result
    changes: dict[str, Any] = {}
    if loop.spent is not None and failure is not None and failure.suggested_retry:
        # the budget of every attempt is spent: a retry would find nothing left
        why = f"not retried: the budget of its attempts is spent ({loop.spent})"
        evidence = f"{failure.evidence}; {why}" if failure.evidence else why
        actions = (
            f"Raise the budget: its attempts spent it ({loop.spent}), so the task was not retried",
            *failure.suggested_actions,
        )
        changes["failure"] = failure.model_copy(
            update={"suggested_retry": False, "evidence": evidence, "suggested_actions": actions}
        )
    if len(history) > 1:
        total = sum((r.result.usage for r in history if r.result.usage), Usage())
        changes["usage"] = total if total else None
    if loop.passed_over:
        changes["child"] = history[-1].child
        changes["fallbacks"] = tuple(
            f"{record.child}: {why}"
            for record, why in zip(_first_of_each_child(history), loop.passed_over, strict=False)
        )
    return result.model_copy(update=changes) if changes else result


def _first_of_each_child(history: list[AttemptRecord]) -> list[AttemptRecord]:
    """The last attempt of each child before the chain moved on."""
    last: dict[int, AttemptRecord] = {}
    for record in history:
        last[record.child_index] = record
    return [last[index] for index in sorted(last)][:-1]


@dataclass(frozen=True, slots=True)
class _Local:
    """Attempts that run here, drawing on the tree's account as they go."""

    children: tuple[Child, ...]
    subject: str | None
    context: Mapping[str, Any] | None
    task_id: str
    limits: Limits
    account: Account | None
    tree: Tree
    verify: Verifier | None
    answer: Answerer | None

    async def run(self, attempt: Attempt) -> DelegationResult:
        return await attempt_plan(
            self.children[attempt.plan.child],
            attempt,
            subject=self.subject,
            context=self.context,
            task_id=self.task_id,
            limits=self.limits,
            account=self.account,
            tree=self.tree,
            verify=self.verify,
            answer=self.answer,
        )


class _Clock:
    """Elapsed time of the loop, counting waits skipped in testing mode.

    Under a :class:`Replay` the elapsed time is what was charged (attempts'
    recorded durations and the waits), the same on every replay.
    """

    def __init__(
        self, budget: float | None, *, replay: Replay | None = None, pause: Pause | None = None
    ) -> None:
        self.budget = budget
        self.started = time.monotonic()
        self.skipped = 0.0
        self.replay = replay
        self.pause = pause
        self.charged = 0.0

    def remaining(self) -> float:
        if self.budget is None:
            return float("inf")
        if self.replay is not None:
            return self.budget - self.charged
        return self.budget - (time.monotonic() - self.started + self.skipped)

    def charge(self, seconds: float) -> None:
        """Count an attempt's recorded duration (only a replayable loop uses it)."""
        self.charged += seconds

    def clamp(self, timeout: float) -> float:
        return max(min(timeout, self.remaining()), 0.001)

    def fit(self, plan: Plan | None) -> Plan | None:
        """The plan with its timeout cut to the budget, or ``None`` when none is left."""
        if plan is None:
            return None
        left = self.remaining() - plan.wait
        if left <= 0:
            return None
        return replace(plan, timeout=min(plan.timeout, left))

    def after_wait(self, plan: Plan) -> Plan | None:
        """``plan`` once its wait is over, cut to what is left then (a pool's place may
        have been waited for too); ``None`` when nothing is."""
        fitted = self.fit(replace(plan, wait=0.0))
        return replace(fitted, wait=plan.wait) if fitted is not None else None

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        self.charged += seconds
        if self.replay is not None:
            await self.replay.sleep(seconds)
            return
        if _testing.is_testing():
            self.skipped += seconds
        async with self.pause() if self.pause is not None else nullcontext():
            await _testing.sleep(seconds)


async def attempt_plan(
    child: Child,
    attempt: Attempt,
    *,
    subject: str | None,
    context: Mapping[str, Any] | None,
    task_id: str,
    limits: Limits,
    account: Account | None = None,
    tree: Tree | None = None,
    verify: Verifier | None = None,
    answer: Answerer | None = None,
) -> DelegationResult:
    """One attempt of a recovery loop as its plan says (decomposed when it has
    subtasks), under ``limits`` with the plan's timeout, drawing on ``account``."""
    plan = attempt.plan
    context = {**(context or {}), "task_id": task_id, "strategy": plan.strategy}
    run = functools.partial(
        run_attempt,
        child,
        subject=subject,
        account=account,
        tree=tree,
        verify=verify,
        answer=answer,
        answers=attempt.answers,
        fresh=plan.fresh,
    )
    if plan.subtasks:
        return await _decomposed(run, attempt, limits, context, subject)
    return await run(
        plan.prompt,
        limits=replace(limits, timeout=plan.timeout),
        attempt=attempt.number,
        context=context,
        state=attempt.state,
    )


SUBTASKS_DONE = "lyra.subtasks_done"
"""The ``ctx.state`` key under which a decomposed task keeps the outputs of the subtasks
that completed (by subtask), so that a later attempt runs only the rest."""
SUBTASKS_TRIED = "lyra.subtasks_tried"
"""… and, for each subtask that ran and did not complete, what its next run needs: how
many times it ran (the next run is its next attempt), its own ``ctx.state``, the
prompt that continues it (its blocker named: the call it repeated, the verifier's
reason) and whether it starts afresh (its prompt outgrew the context window)."""


async def _decomposed(
    run: Callable[..., Awaitable[DelegationResult]],
    attempt: Attempt,
    limits: Limits,
    context: Mapping[str, Any],
    subject: str | None,
) -> DelegationResult:
    """Run each subtask not completed yet with its share of the time; aggregate one result.

    Each subtask is a delegation of its own (task ``<task>.<n>``, its own
    state) on the same account -- once it is spent, the rest fail without
    starting. A subtask that completed keeps its output in the task's state: a
    later attempt (a continuation after some failed) runs only the others, each as
    its own next attempt, continuing from its own failure with the state it left
    (:data:`SUBTASKS_TRIED`), and the result gives every completed subtask's
    output, in the subtasks' order. The aggregate is logged as
    ``decomposition_finished`` under the parent task.
    """
    plan = attempt.plan
    parent = context["task_id"]
    kept: dict[str, str] = dict(attempt.state.get(SUBTASKS_DONE) or {})
    tried: dict[str, dict[str, Any]] = attempt.state.setdefault(SUBTASKS_TRIED, {})
    left = [s for s in plan.subtasks if s not in kept]
    share = replace(limits, timeout=plan.timeout / max(1, len(left)))
    results: dict[str, DelegationResult] = {}
    standing: ChildFailure | None = None  # the first failure a rerun cannot mend
    for index, subtask in enumerate(plan.subtasks, 1):
        if subtask in kept:
            continue
        sub_prompt = subtask_prompt(plan.prompt, subtask, index, len(plan.subtasks))
        sub_context = {**context, "task_id": f"{parent}.{index}", "parent_task_id": parent}
        record = tried.setdefault(subtask, {"runs": 0, "state": {}})
        record["runs"] += 1
        sent = record.get("prompt") or sub_prompt
        result = results[subtask] = await run(
            sent,
            limits=share,
            attempt=record["runs"],
            context=sub_context,
            state=record["state"],
            fresh=plan.fresh or bool(record.get("fresh")),
        )
        if result.failure is None:
            kept[subtask] = result.output or ""
            del tried[subtask]
            continue
        record["prompt"] = continued_subtask(sub_prompt, result.failure)
        record["fresh"] = result.failure.error_type is ErrorType.CONTEXT_OVERFLOW
        if standing is None and _stands(result.failure, record["prompt"] or sub_prompt, sent):
            standing = result.failure
    result = _aggregate(
        plan.subtasks, kept, results, attempt=attempt.number, subject=subject, standing=standing
    )
    if result.ok:  # (the output holds them all now)
        for key in (SUBTASKS_DONE, SUBTASKS_TRIED):
            attempt.state.pop(key, None)
    elif kept:
        attempt.state[SUBTASKS_DONE] = kept
    else:
        attempt.state.pop(SUBTASKS_DONE, None)
    events.info(
        events.DECOMPOSITION_FINISHED,
        task_id=parent,
        session_id=result.session_id,
        subject=subject,
        attempt=attempt.number,
        status=result.status,
        subtasks=len(plan.subtasks),
        completed=sum(s in kept for s in plan.subtasks),
    )
    return result


def _stands(failure: ChildFailure, next_prompt: str, sent: str) -> bool:
    """True for a subtask's failure that running the subtasks again cannot mend, so the
    task's loop must see it as it is: its budget spent, its question unanswered (for a
    context provider, or to stop), its prompt over the context window again with
    nothing new done (never the same prompt)."""
    if failure.error_type is ErrorType.BUDGET:
        return not failure.suggested_retry
    if failure.error_type is ErrorType.INPUT_REQUIRED:
        return True
    return failure.error_type is ErrorType.CONTEXT_OVERFLOW and next_prompt == sent


def _aggregate(
    subtasks: tuple[str, ...],
    kept: Mapping[str, str],
    results: Mapping[str, DelegationResult],
    *,
    attempt: int,
    subject: str | None,
    standing: ChildFailure | None = None,
) -> DelegationResult:
    """One result for a decomposed attempt: the output of every subtask that completed
    (in this attempt or an earlier one, ``kept``), and the first failure of this one's
    (``partial`` when some subtasks completed, unless a ``standing`` one, which no
    rerun of the subtasks mends, keeps its own category), whose result still carries
    the outputs of those that did: finished work is never dropped."""
    session_id = new_session_id()
    ran = list(results.values())
    duration = round(sum(r.duration for r in ran), 6)
    usage = sum((r.usage for r in ran if r.usage is not None), Usage())
    done = [s for s in subtasks if s in kept]
    output = "\n\n".join(f"## {s}\n\n{kept[s]}" for s in done) or None
    failed = [r.failure for r in ran if r.failure is not None]
    failure = None
    if failed:
        first = standing or failed[0]
        rerun = bool(done) and standing is None
        # (an overflow no rerun mends is standing: the others go on afresh when rerun)
        fresh = standing is None and first.error_type is ErrorType.CONTEXT_OVERFLOW
        actions = RERUN_AFRESH if fresh else first.suggested_actions
        failure = first.model_copy(
            update={
                "category": FailureCategory.PARTIAL if rerun else first.category,
                "suggested_retry": rerun or first.suggested_retry,
                "suggested_actions": _RERUN_THE_REST if rerun else actions,
                "message": f"{len(subtasks) - len(done)} of {len(subtasks)} subtasks failed; "
                f"first: {first.message}",
                "completed_steps": tuple(f"Subtask done: {s}" for s in done),
                "session_id": session_id,
                "duration": duration,
                "evidence": f"decomposition: {len(done)} of {len(subtasks)} subtasks "
                f"completed; the first that failed: {first.evidence}",
            }
        )
    return DelegationResult(
        status="completed" if failure is None else "failed",
        output=output,
        failure=failure,
        session_id=session_id,
        duration=duration,
        attempt=attempt,
        subject=subject,
        usage=usage if usage else None,
    )


_RERUN_THE_REST = (
    "Run again only the subtasks that failed: the completed ones' outputs are kept (result.output)",
)


def _log_recovery(
    plan: Plan, attempt: int, failure: ChildFailure, *, task_id: str, subject: str | None
) -> None:
    events.info(
        events.RECOVERY_ATTEMPT,
        task_id=task_id,
        session_id=failure.session_id,
        subject=subject,
        attempt=attempt,
        strategy=plan.strategy,
        category=str(failure.category),
        timeout=round(plan.timeout, 3),
        wait=round(plan.wait, 3),
        subtasks=len(plan.subtasks) or None,
    )
