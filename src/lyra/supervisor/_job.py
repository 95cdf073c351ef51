"""A run's work as data: the tasks, and how each is delegated (the job)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lyra.delegation import Account, Budget, Child, ChildRef
from lyra.recovery import ContextProvider, RecoveryOutcome, RecoveryPolicy, Replay, recover


class Task(BaseModel):
    """One unit of work for :meth:`Supervisor.run`: what a child is asked, as data.

    ``timeout`` and ``idle_timeout`` default to the supervisor's; ``budget``
    limits this task further (it still draws on the supervisor's budget);
    ``context`` reaches the child as ``ctx.context`` (JSON data, so that a
    durable run can record it).
    """

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    prompt: str
    subject: str | None = None
    timeout: float | None = Field(None, gt=0, allow_inf_nan=False)
    idle_timeout: float | None = Field(None, gt=0, allow_inf_nan=False)
    budget: Budget | None = None
    context: dict[str, Any] = Field(default_factory=dict)


OnOutcome = Callable[[Task, RecoveryOutcome], None]
"""Called as each task finishes (in the supervisor's process)."""


@dataclass(frozen=True)
class Job:
    """How every task of a run is delegated: the child, the limits, the policy.

    An executor calls :meth:`run` for each task (a durable one inside its
    workflow, with a ``replay``), so every path shares classification,
    recovery and reporting.
    """

    child: Child | ChildRef
    policy: RecoveryPolicy
    timeout: float = 300.0
    idle_timeout: float | None = None
    account: Account | None = None
    """The run's account, shared by every task (``None``: no run-wide budget)."""
    context_provider: ContextProvider | None = None

    def resolved_child(self) -> Child:
        """The child object (a :class:`ChildRef` is built, once per process)."""
        return self.child.resolve() if isinstance(self.child, ChildRef) else self.child

    async def run(
        self,
        task: Task,
        *,
        task_id: str | None = None,
        state: dict[str, Any] | None = None,
        replay: Replay | None = None,
        account: Account | None = None,
    ) -> RecoveryOutcome:
        """One task under its recovery loop (``account`` overrides the run's)."""
        return await recover(
            task.prompt,
            child=self.resolved_child(),
            base_timeout=task.timeout or self.timeout,
            idle_timeout=task.idle_timeout or self.idle_timeout,
            budget=task.budget,
            account=account if account is not None else self.account,
            policy=self.policy,
            context_provider=self.context_provider,
            subject=task.subject,
            context=task.context,
            task_id=task_id,
            state=state,
            replay=replay,
        )
