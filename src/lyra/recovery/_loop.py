"""The recovery loop: attempt, classify, pick a strategy, attempt again."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict

from lyra.delegation import (
    Child,
    ChildFailure,
    DelegationResult,
    FailureCategory,
    build_result,
    check_timeout,
    default_child,
    new_session_id,
    run_attempt,
)
from lyra.recovery import _testing
from lyra.recovery._policy import RecoveryPolicy
from lyra.recovery._prompts import decompose, subtask_prompt
from lyra.recovery._strategies import ContextProvider, LoopState, Plan, next_plan

log = structlog.get_logger("lyra")

AttemptRunner = Callable[[Plan, int], Awaitable[DelegationResult]]
"""Runs attempt number ``n`` of a loop as ``plan`` says and returns its result."""


@dataclass(frozen=True, slots=True)
class Replay:
    """The seam a durable engine (DBOS) runs a recovery loop through.

    ``run_attempt`` runs each attempt (a checkpointed step) and ``sleep`` each
    wait before a retry (a durable sleep). With it, everything the loop decides
    between two attempts is a function of the earlier attempts' results only,
    so an engine that replays recorded attempts after a crash takes the same
    path: backoff jitter comes from a generator seeded with the task ID, and
    ``policy.total_budget`` is charged with the attempts' recorded durations
    and the waits instead of read from a clock.
    """

    run_attempt: AttemptRunner
    sleep: Callable[[float], Awaitable[None]]


class AttemptRecord(BaseModel):
    """One attempt of a recovery loop."""

    model_config = ConfigDict(frozen=True)

    number: int
    strategy: str
    prompt: str
    timeout: float
    wait: float
    result: DelegationResult


class RecoveryOutcome(BaseModel):
    """The last result of a recovery loop and every attempt that led to it."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    result: DelegationResult
    attempts: tuple[AttemptRecord, ...]

    @property
    def report(self) -> str:
        """The last attempt's report text (its ``<attempt>`` tag says which)."""
        return self.result.report

    @property
    def recovered(self) -> bool:
        """True when a failed attempt was followed by success."""
        return self.result.ok and len(self.attempts) > 1


async def recover(
    prompt: str,
    *,
    child: Child | None = None,
    base_timeout: float = 300.0,
    policy: RecoveryPolicy | None = None,
    context_provider: ContextProvider | None = None,
    subject: str | None = None,
    context: Mapping[str, Any] | None = None,
    task_id: str | None = None,
    replay: Replay | None = None,
) -> RecoveryOutcome:
    """Delegate ``prompt`` and recover from failures until success or no strategy is left.

    Stops on success, on a failure no strategy applies to, after
    ``policy.max_retries`` retries, or when ``policy.total_budget`` is spent.
    ``replay`` runs the attempts and waits through a durable engine (``child``
    is then unused; see :class:`Replay`).
    """
    policy = policy or RecoveryPolicy()
    task_id = task_id or f"task-{uuid.uuid4().hex[:12]}"
    attempt: AttemptRunner
    rng: random.Random | None = None
    if replay is None:
        child = child if child is not None else default_child()
        attempt = partial(attempt_plan, child, subject=subject, context=context, task_id=task_id)
    else:
        attempt, rng = replay.run_attempt, random.Random(task_id)
        if policy.decomposer is None:  # a model's split is not replayable: use the rules
            policy = policy.model_copy(update={"decomposer": decompose})
    clock = _Clock(policy.total_budget, replay=replay)
    state = LoopState(prompt=prompt)
    plan: Plan | None = Plan(
        "initial", prompt, clock.clamp(min(check_timeout(base_timeout), policy.timeout_cap))
    )
    history: list[AttemptRecord] = []
    while plan is not None:
        number = len(history) + 1
        result = await attempt(plan, number)
        clock.charge(result.duration)
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
        if result.failure is None or state.retries >= policy.max_retries:
            break
        plan = await next_plan(result.failure, plan, state, policy, context_provider, rng=rng)
        plan = clock.fit(plan)
        if plan is not None:
            state.retries += 1
            _log_recovery(plan, number + 1, result.failure, task_id=task_id, subject=subject)
            await clock.sleep(plan.wait)
    return RecoveryOutcome(task_id=task_id, result=history[-1].result, attempts=tuple(history))


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
    plan: Plan,
    number: int,
    *,
    subject: str | None,
    context: Mapping[str, Any] | None,
    task_id: str,
) -> DelegationResult:
    """One attempt of a recovery loop as ``plan`` says (decomposed when it has subtasks)."""
    context = {**(context or {}), "task_id": task_id, "strategy": plan.strategy}
    if plan.subtasks:
        return await _decomposed(child, plan, number, subject=subject, context=context)
    return await run_attempt(
        child, plan.prompt, timeout=plan.timeout, subject=subject, attempt=number, context=context
    )


async def _decomposed(
    child: Child,
    plan: Plan,
    number: int,
    *,
    subject: str | None,
    context: Mapping[str, Any],
) -> DelegationResult:
    """Run each subtask with its share of the time; aggregate one result.

    Each subtask is a delegation of its own (task ``<task>.<n>``); the
    aggregate is logged as ``decomposition_finished`` under the parent task.
    """
    parent = context["task_id"]
    share = plan.timeout / len(plan.subtasks)
    results = []
    for index, subtask in enumerate(plan.subtasks, 1):
        sub_prompt = subtask_prompt(plan.prompt, subtask, index, len(plan.subtasks))
        sub_context = {**context, "task_id": f"{parent}.{index}", "parent_task_id": parent}
        results.append(
            await run_attempt(
                child, sub_prompt, timeout=share, subject=subject, attempt=1, context=sub_context
            )
        )
    result = _aggregate(plan.subtasks, results, attempt=number, subject=subject)
    log.info(
        "decomposition_finished",
        task_id=parent,
        session_id=result.session_id,
        subject=subject,
        attempt=number,
        status=result.status,
        subtasks=len(results),
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
    session_id = new_session_id()
    duration = round(sum(r.duration for r in results), 6)
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
                "message": f"{len(failed)} of {len(subtasks)} subtasks failed; first: "
                f"{first.message}",
                "completed_steps": tuple(f"Subtask done: {s}" for s, _ in done),
                "session_id": session_id,
                "duration": duration,
                "evidence": f"decomposition: {len(done)} of {len(subtasks)} subtasks completed",
            }
        )
    return build_result(
        output=output,
        failure=failure,
        session_id=session_id,
        duration=duration,
        attempt=attempt,
        subject=subject,
    )


def _log_recovery(
    plan: Plan, attempt: int, failure: ChildFailure, *, task_id: str, subject: str | None
) -> None:
    log.info(
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
