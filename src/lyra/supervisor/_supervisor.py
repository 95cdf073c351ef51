"""The Supervisor: the parent that hands work to children, the root of a delegation tree."""

from __future__ import annotations

import reprlib
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any

import anyio

from lyra.children import default_child
from lyra.delegation import Answerer, Budget, Child, ChildRef, DelegationResult, Limits, Verifier
from lyra.delegation._internal import (
    DEFAULT_MAX_REPEATS,
    Account,
    Tree,
    check_callbacks,
    checked_fallbacks,
    resolved,
    run_attempt,
)
from lyra.recovery import ContextProvider, RecoveryOutcome, RecoveryPolicy
from lyra.recovery._internal import checked_policy
from lyra.supervisor._callback import OutcomeCallback, adapt
from lyra.supervisor._executor import Executor, LocalExecutor
from lyra.supervisor._job import Job, Task

_LOCAL = LocalExecutor()
"""The default executor (it holds no state, so every supervisor shares it)."""


@cache
def _no_retries() -> RecoveryPolicy:
    """The default policy, built once: a supervisor is built for every
    ``adelegate_task`` call, and a model's validation is not free."""
    return RecoveryPolicy(max_retries=0)


class Supervisor:
    """Delegates prompts to child agents under deadlines, idle timeouts and a budget.

    ``child`` is the default child of every delegation: a child, a
    :class:`~lyra.delegation.ChildRef`, or ``None`` for the configured default
    (resolved on first use, so constructing a Supervisor never fails).
    ``budget`` is the whole tree's: every delegation, retry, subtask and
    nested delegation this supervisor starts draws on it. ``max_repeats``
    identical tool calls end an attempt as a loop (``None``: never); ``verify``
    checks each success; ``answer`` answers the children's questions;
    ``fallbacks`` are tried in order when a child's provider fails (with
    :meth:`run`'s recovery). ``policy`` is the recovery of each task :meth:`run` runs:
    no retries unless it says so (``RecoveryPolicy(max_retries=3)``). Every child of
    this supervisor waits out one
    provider's rate-limit cooldown together, and :meth:`run` lowers its
    concurrency while a provider pushes back.
    """

    def __init__(
        self,
        child: Child | ChildRef | None = None,
        *,
        timeout: float = 300.0,
        idle_timeout: float | None = None,
        budget: Budget | None = None,
        max_repeats: int | None = DEFAULT_MAX_REPEATS,
        policy: RecoveryPolicy | None = None,
        context_provider: ContextProvider | None = None,
        executor: Executor | None = None,
        verify: Verifier | None = None,
        answer: Answerer | None = None,
        fallbacks: Sequence[Child | ChildRef] = (),
    ) -> None:
        self._child = child
        self.limits = Limits(timeout=timeout, idle_timeout=idle_timeout, max_repeats=max_repeats)
        """What bounds each delegation (the budget is the whole tree's: :attr:`account`)."""
        self.budget = budget
        self.account = Account.for_budget(budget)
        """The tree's live account (``None`` without a budget)."""
        self.policy = checked_policy(policy) or _no_retries()
        check_callbacks(verify=verify, answer=answer, context_provider=context_provider)
        self.context_provider = context_provider
        if executor is not None and not callable(getattr(executor, "run", None)):
            raise TypeError(
                "executor= must be an Executor (LocalExecutor(), a DurableExecutor), not "
                f"{reprlib.repr(executor)}"
            )
        self.executor: Executor = executor or _LOCAL
        self.verify = verify
        self.answer = answer
        self.fallbacks = checked_fallbacks(fallbacks)
        self.tree = Tree()
        """What every delegation of this supervisor shares (a provider's cooldown)."""

    @property
    def timeout(self) -> float:
        """The timeout of a delegation that names none."""
        return self.limits.timeout

    @property
    def idle_timeout(self) -> float | None:
        """The idle timeout of a delegation that names none."""
        return self.limits.idle_timeout

    @property
    def child(self) -> Child:
        """The child used when a delegation names none."""
        if self._child is None:
            self._child = default_child()
        return resolved(self._child)

    async def delegate(
        self,
        prompt: str,
        *,
        timeout: float | None = None,
        idle_timeout: float | None = None,
        budget: Budget | None = None,
        child: Child | None = None,
        context: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        subject: str | None = None,
        attempt: int = 1,
    ) -> DelegationResult:
        """Run one child once on ``prompt``; the result carries its report."""
        return await run_attempt(
            child if child is not None else self.child,
            prompt,
            limits=self.limits.but(timeout=timeout, idle_timeout=idle_timeout),
            account=Account.for_budget(budget, self.account),
            session_id=session_id,
            subject=subject,
            attempt=attempt,
            context=context,
            tree=self.tree,
            verify=self.verify,
            answer=self.answer,
        )

    def job(self) -> Job:
        """How this supervisor delegates each task of :meth:`run`."""
        return Job(
            child=self._child if self._child is not None else self.child,
            policy=self.policy,
            limits=self.limits,
            account=self.account,
            context_provider=self.context_provider,
            fallbacks=self.fallbacks,
            verify=self.verify,
            answer=self.answer,
            tree=self.tree,
        )

    async def run(
        self,
        tasks: Iterable[Task],
        *,
        max_concurrency: int = 8,
        on_outcome: OutcomeCallback | None = None,
        keep: bool = True,
    ) -> list[RecoveryOutcome]:
        """Run every task under its recovery loop, at most ``max_concurrency`` at once.

        One outcome per task, in order. A task whose handling breaks (lyra's
        own bug) gets a failed outcome; no task ever disturbs another.
        ``on_outcome`` is called as each task finishes, as ``on_outcome(outcome)``
        or ``on_outcome(task, outcome)``, sync or async (awaited before ``run``
        returns); a callback of another shape is a ``TypeError`` here, before
        any task runs, and an exception inside it is logged as
        ``on_outcome_failed``. With ``keep=False`` the tasks are pulled lazily
        and each outcome goes only to ``on_outcome`` (the list returned is
        empty): a million tasks from a file run in flat memory.
        """
        tasks = _checked_tasks(tasks)
        if on_outcome is None:
            return await self.executor.run(
                self.job(), tasks, max_concurrency=max_concurrency, keep=keep
            )
        notify = adapt(on_outcome)
        try:
            async with anyio.create_task_group() as callbacks:  # async callbacks finish in it
                outcomes = await self.executor.run(
                    self.job(),
                    tasks,
                    max_concurrency=max_concurrency,
                    on_outcome=notify(callbacks),
                    keep=keep,
                )
        except BaseExceptionGroup as group:  # the executor's own error, as it raised it
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        return outcomes


def _checked_tasks(tasks: Iterable[Task]) -> Iterable[Task]:
    """``tasks`` as given, each checked to be a :class:`Task`: a ``TypeError`` that says
    how to make one (a list checked whole before any runs; an iterator's items as they
    are taken, the error then raised as the executor's)."""
    if isinstance(tasks, str | bytes) or not isinstance(tasks, Iterable):
        raise TypeError(f"tasks is an iterable of lyra.Task, not {type(tasks).__name__}")
    if isinstance(tasks, list | tuple):
        for task in tasks:
            _check_task(task)
        return tasks
    return (_check_task(task) for task in tasks)


def _check_task(task: object) -> Task:
    if not isinstance(task, Task):
        raise TypeError(
            f"each task is a lyra.Task, not {type(task).__name__} ({reprlib.repr(task)}): "
            "Task(prompt=...)"
        )
    return task
