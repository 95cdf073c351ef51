"""Quorum and confidence: is there enough to answer, and how far to trust it?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Outcome = Literal["completed", "partial", "failed"]
Action = Literal["proceed", "proceed_degraded", "retry_critical", "abort"]


class ChildOutcome(BaseModel):
    """What quorum needs to know about one child."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    subject: str
    outcome: Outcome
    completeness: float = Field(default=1.0, ge=0, le=1)
    """Share of the child's planned work that succeeded."""
    retryable: bool = False
    """Whether another attempt could change a failed outcome."""


class QuorumPolicy(BaseModel):
    """When the children's results are enough to answer."""

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    min_success: int = Field(default=1, ge=0, description="Fewest successful children to answer.")
    critical: frozenset[str] = Field(
        default=frozenset(), description="Children that must succeed for any answer."
    )
    confidence_penalty: float = Field(
        default=1.0, ge=0, le=1, description="Confidence lost per share of children missing."
    )
    partial_threshold: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="A partial child counts as success from this completeness.",
    )
    partial_confidence: float = Field(
        default=0.8, ge=0, le=1, description="Confidence kept for each partial counted as success."
    )
    critical_retries: int = Field(
        default=1, ge=0, description="Extra rounds for failed critical children."
    )


class QuorumDecision(BaseModel):
    """The decision, the action it calls for, and why."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    met: bool
    action: Action
    reason: str
    confidence: float
    successful: int
    required: int
    missing: list[str]
    critical_failed: list[str]
    retry: list[str] = Field(default_factory=list)
    """Critical children to retry first (their failures were retryable)."""

    @property
    def usable_share(self) -> float:
        """The share of the children asked whose result counts (``confidence`` is how far
        to trust the answer: 0 when the quorum fails, whatever was usable)."""
        asked = self.successful + len(self.missing)
        return self.successful / asked if asked else 0.0


def decide(
    children: Sequence[ChildOutcome], policy: QuorumPolicy, *, retries_left: bool = False
) -> QuorumDecision:
    """Decide from the children's outcomes; see :class:`QuorumPolicy`."""
    counted = [c for c in children if _counts(c, policy)]
    partial = [c for c in counted if c.outcome == "partial"]
    missing = [c.subject for c in children if not _counts(c, policy)]
    critical_failed = [s for s in missing if s in policy.critical]
    confidence = _confidence(len(children), len(missing), len(partial), policy)
    common = {
        "successful": len(counted),
        "required": policy.min_success,
        "missing": missing,
        "critical_failed": critical_failed,
    }
    if critical_failed:
        names = ", ".join(critical_failed)
        retry = [c.subject for c in children if c.subject in critical_failed and c.retryable]
        if retries_left and retry:
            return QuorumDecision(
                met=False,
                action="retry_critical",
                confidence=0.0,
                retry=retry,
                reason=f"critical {names} failed; retrying it first",
                **common,
            )
        why = "its failure is not retryable" if not retry else "no retries remain"
        return QuorumDecision(
            met=False,
            action="abort",
            confidence=0.0,
            reason=f"critical {names} failed and {why}",
            **common,
        )
    if len(counted) < policy.min_success:
        return QuorumDecision(
            met=False,
            action="abort",
            confidence=0.0,
            reason=f"{len(counted)} of {len(children)} succeeded; at least "
            f"{policy.min_success} needed",
            **common,
        )
    if missing or partial:
        return QuorumDecision(
            met=True,
            action="proceed_degraded",
            confidence=confidence,
            reason=f"{len(counted)} of {len(children)} usable, {len(partial)} of them "
            f"partial" + (f"; {_unusable(children, policy)}" if missing else ""),
            **common,
        )
    return QuorumDecision(
        met=True,
        action="proceed",
        confidence=confidence,
        reason=f"all {len(children)} succeeded",
        **common,
    )


def _unusable(children: Sequence[ChildOutcome], policy: QuorumPolicy) -> str:
    """What is not usable, in words: failures, and partial results below the threshold."""
    unusable = [c for c in children if not _counts(c, policy)]
    thin = sum(c.outcome == "partial" for c in unusable)
    parts = [f"{len(unusable) - thin} failed"] if len(unusable) > thin else []
    if thin:
        parts.append(f"{thin} partial below {policy.partial_threshold:.0%} complete")
    return f"{len(unusable)} not usable ({', '.join(parts)})"


def _counts(child: ChildOutcome, policy: QuorumPolicy) -> bool:
    if child.outcome == "completed":
        return True
    return child.outcome == "partial" and child.completeness >= policy.partial_threshold


def _confidence(total: int, missing: int, partial: int, policy: QuorumPolicy) -> float:
    """1.0 when every child succeeded; lowered by the share missing and the
    share that only partly succeeded, so it reads the same for 3 or 300."""
    if total == 0:
        return 0.0
    kept = 1.0 - policy.confidence_penalty * missing / total
    kept -= (1.0 - policy.partial_confidence) * partial / total
    return round(min(1.0, max(0.0, kept)), 3)
