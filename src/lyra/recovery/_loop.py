"""The recovery loop: attempt, classify, pick a strategy, attempt again."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from lyra import events, tracing
from lyra.children import default_child
from lyra.delegation import (
    Account,
    Budget,
    Child,
    ChildFailure,
    DelegationResult,
    FailureCategory,
    Usage,
    check_timeout,
    new_session_id,
    run_attempt,
)
from lyra.recovery import _testing
from lyra.recovery._policy import RecoveryPolicy
from lyra.recovery._prompts import decompose, subtask_prompt
from lyra.recovery._strategies import ContextProvider, LoopState, Plan, next_plan


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of a recovery loop, as the loop asks for it."""

    plan: Plan
    number: int
    state: dict[str, Any]
    """The child's ``ctx.state``, carried across the task's attempts (updated in place)."""
    budget_left: Budget | None = None
    """What the task's account had left when the attempt began (``None``: no budget)."""


AttemptRunner = Callable[[Attempt], Awaitable[DelegationResult]]
"""Runs one attempt of a loop as its plan says and returns its result."""


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


class AttemptRecord(BaseModel):
    """One attempt of a recovery loop."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    number: int
    strategy: str
    prompt: str
    timeout: float
    wait: float
    result: DelegationResult


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
    child: Child | None = None,
    base_timeout: float = 300.0,
    idle_timeout: float | None = None,
    budget: Budget | None = None,
    account: Account | None = None,
    policy: RecoveryPolicy | None = None,
    context_provider: ContextProvider | None = None,
    subject: str | None = None,
    context: Mapping[str, Any] | None = None,
    task_id: str | None = None,
    state: dict[str, Any] | None = None,
    replay: Replay | None = None,
) -> RecoveryOutcome:
    """Delegate ``prompt`` and recover from failures until success or no strategy is left.

    Stops on success, on a failure no strategy applies to, after
    ``policy.max_retries`` retries, when ``policy.total_budget`` is spent, or
    when the ``budget`` has nothing left. Every attempt, decomposed subtask
    and nested delegation draws on one account: ``budget``'s, itself drawing
    on ``account`` when given (a run's account shared by many loops).
    ``replay`` runs the attempts and waits through a durable engine (see
    :class:`Replay`); ``child`` then only offers its ``decompose``.
    """
    policy = policy or RecoveryPolicy()
    task_id = task_id or f"task-{uuid.uuid4().hex[:12]}"
    if idle_timeout is not None:
        idle_timeout = check_timeout(idle_timeout, "idle_timeout")
    tree = Account.for_budget(budget, account)
    if tree is not None and tree is not account:
        tree.retries_included = True  # the task's cap: every attempt draws on it
    attempt: AttemptRunner
    rng: random.Random | None = None
    if replay is None:
        child = child if child is not None else default_child()
        attempt = _Local(child, subject, context, task_id, idle_timeout, tree).run
    else:
        attempt, rng = replay.run_attempt, random.Random(task_id)
        if policy.decomposer is None and not callable(getattr(child, "decompose", None)):
            policy = policy.model_copy(update={"decomposer": decompose})  # replayable: rules
    clock = _Clock(policy.total_budget, replay=replay)
    loop = LoopState(prompt=prompt, child=child)
    progress = state if state is not None else {}
    plan: Plan | None = Plan(
        "initial", prompt, clock.clamp(min(check_timeout(base_timeout), policy.timeout_cap))
    )
    history: list[AttemptRecord] = []
    while plan is not None:
        number = len(history) + 1
        left = tree.left() if tree is not None else None
        result = await attempt(Attempt(plan, number, progress, left))
        clock.charge(result.duration)
        if replay is not None and tree is not None and result.usage:
            tree.charge(**result.usage.model_dump())  # recorded usage, the same on every replay
        history.append(
            AttemptRecord(
                number=number,
                strategy=plan.strategy,
                prompt=plan.prompt,
                timeout=plan.timeout,
                wait=plan.wait,
                result=result,
            )
        )
        if result.failure is None or loop.retries >= policy.max_retries:
            break
        if tree is not None and not tree.has_room():
            break  # nothing left to spend: no strategy can run
        plan = await next_plan(result.failure, plan, loop, policy, context_provider, rng=rng)
        plan = clock.fit(plan)
        if plan is not None:
            loop.retries += 1
            _log_recovery(plan, number + 1, result.failure, task_id=task_id, subject=subject)
            await clock.sleep(plan.wait)
    return RecoveryOutcome(
        task_id=task_id, result=history[-1].result, attempts=tuple(history), state=progress
    )


@dataclass(frozen=True, slots=True)
class _Local:
    """Attempts that run here, drawing on the tree's account as they go."""

    child: Child
    subject: str | None
    context: Mapping[str, Any] | None
    task_id: str
    idle_timeout: float | None
    account: Account | None

    async def run(self, attempt: Attempt) -> DelegationResult:
        return await attempt_plan(
            self.child,
            attempt,
            subject=self.subject,
            context=self.context,
            task_id=self.task_id,
            idle_timeout=self.idle_timeout,
            account=self.account,
        )


class _Clock:
    """Elapsed time of the loop, counting waits skipped in testing mode.

    Under a :class:`Replay` the elapsed time is what was charged (attempts'
    recorded durations and the waits), the same on every replay.
    """

    def __init__(self, budget: float | None, *, replay: Replay | None = None) -> None:
        self.budget = budget
        self.started = time.monotonic()
        self.skipped = 0.0
        self.replay = replay
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
        return Plan(plan.strategy, plan.prompt, min(plan.timeout, left), plan.wait, plan.subtasks)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        self.charged += seconds
        if self.replay is not None:
            await self.replay.sleep(seconds)
            return
        if _testing.is_testing():
            self.skipped += seconds
        await _testing.sleep(seconds)


async def attempt_plan(
    child: Child,
    attempt: Attempt,
    *,
    subject: str | None,
    context: Mapping[str, Any] | None,
    task_id: str,
    idle_timeout: float | None = None,
    account: Account | None = None,
) -> DelegationResult:
    """One attempt of a recovery loop as its plan says (decomposed when it has
    subtasks), drawing on ``account``."""
    plan = attempt.plan
    context = {**(context or {}), "task_id": task_id, "strategy": plan.strategy}
    if plan.subtasks:
        return await _decomposed(
            child,
            attempt,
            subject=subject,
            context=context,
            idle_timeout=idle_timeout,
            account=account,
        )
    return await run_attempt(
        child,
        plan.prompt,
        timeout=plan.timeout,
        idle_timeout=idle_timeout,
        account=account,
        subject=subject,
        attempt=attempt.number,
        context=context,
        state=attempt.state,
    )


async def _decomposed(
    child: Child,
    attempt: Attempt,
    *,
    subject: str | None,
    context: Mapping[str, Any],
    idle_timeout: float | None,
    account: Account | None,
) -> DelegationResult:
    """Run each subtask with its share of the time; aggregate one result.

    Each subtask is a delegation of its own (task ``<task>.<n>``, its own
    state) on the same account -- once it is spent, the rest fail without
    starting; the aggregate is logged as ``decomposition_finished`` under the
    parent task.
    """
    plan = attempt.plan
    parent = context["task_id"]
    share = plan.timeout / len(plan.subtasks)
    results = []
    for index, subtask in enumerate(plan.subtasks, 1):
        sub_prompt = subtask_prompt(plan.prompt, subtask, index, len(plan.subtasks))
        sub_context = {**context, "task_id": f"{parent}.{index}", "parent_task_id": parent}
        results.append(
            await run_attempt(
                child,
                sub_prompt,
                timeout=share,
                idle_timeout=idle_timeout,
                account=account,
                subject=subject,
                attempt=1,
                context=sub_context,
            )
        )
    result = _aggregate(plan.subtasks, results, attempt=attempt.number, subject=subject)
    events.info(
        "decomposition_finished",
        task_id=parent,
        session_id=result.session_id,
        subject=subject,
        attempt=attempt.number,
        status=result.status,
        subtasks=len(plan.subtasks),
        completed=sum(r.ok for r in results),
    )
    return result


def _aggregate(
    subtasks: tuple[str, ...],
    results: list[DelegationResult],
    *,
    attempt: int,
    subject: str | None,
) -> DelegationResult:
    """One result for a decomposed attempt: every subtask's output, or the first
    failure (``partial`` when some subtasks completed)."""
    session_id = new_session_id()
    duration = round(sum(r.duration for r in results), 6)
    usage = sum((r.usage for r in results if r.usage is not None), Usage())
    done = [(s, r) for s, r in zip(subtasks, results, strict=True) if r.ok]
    failed = [r.failure for r in results if r.failure is not None]
    output = "\n\n".join(f"## {s}\n\n{r.output}" for s, r in done) if not failed else None
    failure = None
    if failed:
        first = failed[0]
        failure = first.model_copy(
            update={
                "category": FailureCategory.PARTIAL if done else first.category,
                "suggested_retry": bool(done) or first.suggested_retry,
                "message": f"{len(subtasks) - len(done)} of {len(subtasks)} subtasks failed; "
                f"first: {first.message}",
                "completed_steps": tuple(f"Subtask done: {s}" for s, _ in done),
                "session_id": session_id,
                "duration": duration,
                "evidence": f"decomposition: {len(done)} of {len(subtasks)} subtasks completed",
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


def _log_recovery(
    plan: Plan, attempt: int, failure: ChildFailure, *, task_id: str, subject: str | None
) -> None:
    events.info(
        "recovery_attempt",
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
