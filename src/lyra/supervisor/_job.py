"""A run's work as data: the tasks, and how each is delegated (the job)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lyra.delegation import Answerer, Budget, Child, ChildRef, Limits, Verifier
from lyra.delegation._internal import Account, Tree, as_callable, resolved
from lyra.recovery import (
    ContextProvider,
    Pause,
    RecoveryOutcome,
    RecoveryPolicy,
    Replay,
    recover,
)


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
    # (strict: a bool or a string is refused, as delegate_task refuses it)
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False, strict=True)
    idle_timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False, strict=True)
    budget: Budget | None = None
    context: dict[str, Any] = Field(default_factory=dict)


OnOutcome = Callable[[Task, RecoveryOutcome], None]
"""Called as each task finishes (in the supervisor's process)."""


@dataclass(frozen=True)
class Job:
    """How every task of a run is delegated: the child (and the fallbacks after it),
    the limits, the policy, the checks.

    An executor calls :meth:`run` for each task (a durable one inside its
    workflow, with a ``replay``), so every path shares classification,
    recovery and reporting.
    """

    child: Child | ChildRef
    policy: RecoveryPolicy
    limits: Limits = field(default_factory=Limits)
    """Each task's limits (a task's own timeout, idle timeout and budget override)."""
    account: Account | None = None
    """The run's account, shared by every task (``None``: no run-wide budget)."""
    context_provider: ContextProvider | None = None
    fallbacks: tuple[Child | ChildRef, ...] = ()
    """Children tried in order when the provider of the one before fails (DESIGN §5)."""
    verify: Verifier | None = None
    answer: Answerer | None = None
    tree: Tree = field(default_factory=Tree)
    """What every task's delegations share (a provider's rate-limit cooldown)."""

    def child_at(self, index: int) -> Child:
        """The child of the chain at ``index`` (0: the child; then each fallback)."""
        return resolved(self.child if index == 0 else self.fallbacks[index - 1])

    def build_children(self) -> None:
        """Build the child and its fallbacks now: one that cannot be built (a
        :class:`ChildRef` to a missing module) is the caller's
        :class:`~lyra.errors.ConfigurationError` before any task runs, not every
        task's failure blamed on lyra; nor one that is no child at all (a function that
        cannot take ``(prompt, ctx)``)."""
        for index in range(1 + len(self.fallbacks)):
            as_callable(self.child_at(index))

    async def run(
        self,
        task: Task,
        *,
        task_id: str | None = None,
        state: dict[str, Any] | None = None,
        replay: Replay | None = None,
        account: Account | None = None,
        pause: Pause | None = None,
    ) -> RecoveryOutcome:
        """One task under its recovery loop (``account`` overrides the run's; ``pause``:
        held around each wait between its attempts, see :func:`~lyra.recovery.recover`)."""
        return await recover(
            task.prompt,
            child=self.child,  # (recover builds a ChildRef, once per process)
            limits=self.limits.but(
                timeout=task.timeout, idle_timeout=task.idle_timeout, budget=task.budget
            ),
            account=account if account is not None else self.account,
            policy=self.policy,
            context_provider=self.context_provider,
            subject=task.subject,
            context=task.context,
            task_id=task_id,
            state=state,
            replay=replay,
            fallbacks=self.fallbacks,
            tree=self.tree,
            verify=self.verify,
            answer=self.answer,
            pause=pause,
        )
