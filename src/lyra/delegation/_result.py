"""The result of one delegation, and its report rendered on demand."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, computed_field, model_validator

from lyra.delegation._budget import Usage
from lyra.delegation._models import ChildFailure, FailedDelegation, TaskReport
from lyra.delegation._report._render import (
    NO_USAGE,
    compose,
    failure_sections,
    failure_tags,
    status_tag,
    success_body,
    tenths,
)
from lyra.delegation._report._values import report

_COMPLETED = status_tag("completed")


class DelegationResult(BaseModel):
    """The outcome of one delegation: the output or the failure, and the report text."""

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    status: Literal["completed", "failed"]
    output: str | None
    failure: ChildFailure | None
    session_id: str
    duration: float
    attempt: int = 1
    subject: str | None = None
    usage: Usage | None = None
    """What the delegation and everything below it were charged; ``None``: nothing."""
    parent_session_id: str | None = None
    """The session that delegated this one (``ctx.delegate``), if any."""
    failed_delegations: tuple[FailedDelegation, ...] = ()
    """Nested delegations that failed under this one (the parent decided what to do)."""
    overrun_s: float | None = None
    """Seconds this result came after its deadline, when code lyra cannot interrupt (a
    blocked event loop, a thread that cannot be abandoned) held it there; ``None``:
    on time. A completed result stays completed: its output is real, but late."""
    child: str | None = None
    """The child that produced this result, when a fallback chain moved past others."""
    fallbacks: tuple[str, ...] = ()
    """Each child a fallback chain moved past before this one, and why (``child: why``)."""

    @property
    def ok(self) -> bool:
        """True when the child completed."""
        return self.status == "completed"

    @model_validator(mode="before")
    @classmethod
    def _derived_report(cls, data: Any) -> Any:
        """Accept a dump of a result: its ``report`` is derived, so it is dropped."""
        if isinstance(data, dict) and "report" in data:
            data = {key: value for key, value in data.items() if key != "report"}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def report(self) -> str:
        """The report text (DESIGN §4), rendered from the fields when asked for:
        most results in a large fan-out are never read as text."""
        # What render_report(self.to_report()) writes, without the model or its dict
        # (adelegate_task renders one per delegation, as its deadline passes).
        failure = self.failure
        if failure is None:
            body, status = success_body(self.output or ""), _COMPLETED
        else:
            body = failure_sections(
                failure.message,
                failure.category,
                tenths(self.duration),
                failure.suggested_retry,
                failure.completed_steps,
                failure.files_modified,
                failure.blocked_on,
                failure.suggested_actions,
            )
            status = failure_tags(
                failure.category,
                failure.suggested_retry,
                (failure.error_type, failure.retry_after, failure.question),
            )
        return compose(
            body,
            self.session_id,
            status,
            self.attempt,
            self.duration,
            self.subject or None,
            self._usage_values(),
            self.failed_delegations,
            self.fallbacks,
        )

    def _usage_values(self) -> tuple[Any, ...]:
        """The values of the report's usage tags, in their order."""
        usage, parent, child = self.usage, self.parent_session_id or None, self.child or None
        if not usage and parent is None and self.overrun_s is None and child is None:
            return NO_USAGE
        if not usage:
            return (None, None, None, None, parent, self.overrun_s, child)
        tool_calls = usage.tool_calls or None
        return (
            usage.tokens,
            usage.cost_usd,
            usage.turns,
            tool_calls,
            parent,
            self.overrun_s,
            child,
        )

    def to_report(self) -> TaskReport:
        """Everything the report says, as a model (what ``parse_report`` gives back).

        Built from this result's values, already validated, without validating
        them again (a report is made for every delegation); blank names become
        ``None``, as ``TaskReport`` validation would make them."""
        return report(self._report_fields())

    def _report_fields(self) -> dict[str, Any]:
        """The values of :meth:`to_report`'s model that this result sets, by field
        name (what the report renders from; the others keep their defaults)."""
        usage, failure = self.usage, self.failure
        values = {
            "status": "completed" if failure is None else "failed",
            "session_id": self.session_id or None,
            "attempt": self.attempt,
            "duration": self.duration,
            "subject": self.subject or None,
            "parent_session_id": self.parent_session_id or None,
            "failed_delegations": self.failed_delegations,
            "overrun_s": self.overrun_s,
            "child": self.child or None,
            "fallbacks": self.fallbacks,
        }
        if usage:
            values.update(tokens_used=usage.tokens, cost_usd=usage.cost_usd, turns=usage.turns)
            if usage.tool_calls:
                values["tool_calls"] = usage.tool_calls
        if failure is None:
            values["output"] = self.output or ""
        else:
            values.update(
                message=failure.message,
                category=failure.category,
                retryable=failure.suggested_retry,
                error_type=failure.error_type,
                completed_steps=failure.completed_steps,
                files_modified=failure.files_modified,
                blocked_on=failure.blocked_on,
                suggested_actions=failure.suggested_actions,
                retry_after=failure.retry_after,
                question=failure.question,
            )
        return values
