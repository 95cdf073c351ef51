"""A job as data, so that another process -- a resumed run, a worker on another
machine -- rebuilds the same job: its child by importable name, its policy and
limits as JSON."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from lyra.delegation import ChildRef, Limits
from lyra.delegation._internal import DEFAULT_MAX_REPEATS
from lyra.errors import ConfigurationError
from lyra.recovery import RecoveryPolicy
from lyra.supervisor import Job


class JobSpec(BaseModel):
    """What a durable workflow records of its job."""

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    child: ChildRef
    policy: RecoveryPolicy
    timeout: float
    idle_timeout: float | None = None
    max_repeats: int | None = DEFAULT_MAX_REPEATS
    fallbacks: tuple[ChildRef, ...] = ()

    @classmethod
    def of(cls, job: Job) -> JobSpec:
        """The job as data; ConfigurationError for what cannot leave this process."""
        if not all(isinstance(c, ChildRef) for c in (job.child, *job.fallbacks)):
            raise ConfigurationError(
                "a durable run names its child (and each fallback) by where it lives, so "
                "that a resumed run or a worker can build it: pass "
                "ChildRef(target='module:attribute', options={...}) as the child"
            )
        if job.verify is not None or job.answer is not None:
            raise ConfigurationError(
                "a durable run cannot send a Python verify= or answer= to its workers; a "
                "question waits in the run for `lyra answer`"
            )
        if job.policy.fixers:
            raise ConfigurationError("a durable run cannot send Python fixers to its workers")
        if job.policy.decomposer is not None:
            raise ConfigurationError(
                "a durable run cannot send a Python decomposer to its workers; give the "
                "child a decompose(prompt) method instead"
            )
        if job.context_provider is not None:
            raise ConfigurationError("a durable run cannot send a context provider to its workers")
        if job.account is not None:
            raise ConfigurationError(
                "a run-wide budget is kept in one process; in a durable run give each task "
                "its own budget (Task.budget)"
            )
        limits = job.limits
        return cls(
            child=job.child,
            policy=job.policy,
            timeout=limits.timeout,
            idle_timeout=limits.idle_timeout,
            max_repeats=limits.max_repeats,
            fallbacks=job.fallbacks,
        )

    def job(self) -> Job:
        """The job this spec describes."""
        return Job(
            child=self.child,
            policy=self.policy,
            limits=Limits(
                timeout=self.timeout, idle_timeout=self.idle_timeout, max_repeats=self.max_repeats
            ),
            fallbacks=self.fallbacks,
        )
