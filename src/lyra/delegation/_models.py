"""Value objects of one delegation: categories, failures, results, reports."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator


class FailureCategory(StrEnum):
    """The five categories every child failure falls into (DESIGN §3)."""

    TIMEOUT = "timeout"
    MISSING_CONTEXT = "missing_context"
    TOOL_ERROR = "tool_error"
    INVALID_TASK = "invalid_task"
    PARTIAL = "partial"


class ErrorType(StrEnum):
    """The fine cause behind a category, for statistics and backoff."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"
    RATE_LIMIT = "rate_limit"
    NOT_FOUND = "not_found"
    AUTH = "auth"
    DATA = "data"
    UNKNOWN = "unknown"


Status = Literal["completed", "failed"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _none_if_blank(value: str | None) -> str | None:
    return value if value else None


class ChildFailure(_Frozen):
    """Why a child failed, what it finished first, and what to do next."""

    category: FailureCategory
    message: str
    session_id: str
    duration: float
    completed_steps: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    blocked_on: str | None = None
    suggested_retry: bool = False
    suggested_actions: tuple[str, ...] = ()
    tool_usage: dict[str, int] = Field(default_factory=dict)
    last_successful_tool: str | None = None
    error_type: ErrorType = ErrorType.UNKNOWN
    evidence: str = ""
    retry_after: float | None = None
    """Seconds the failing service asked us to wait, when it said so."""
    timeout: float | None = None
    """The deadline the attempt ran under, in seconds."""

    _blank = field_validator("blocked_on")(_none_if_blank)

    @property
    def retryable(self) -> bool:
        """Alias of ``suggested_retry``, the name reports use."""
        return self.suggested_retry


class DelegationResult(_Frozen):
    """The outcome of one delegation: the output or the failure, and the report text."""

    status: Status
    output: str | None
    failure: ChildFailure | None
    session_id: str
    duration: float
    attempt: int = 1
    subject: str | None = None

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
        from lyra.delegation._report import render_report  # the format's one home

        return render_report(
            TaskReport.of(
                output=self.output,
                failure=self.failure,
                attempt=self.attempt,
                subject=self.subject,
                session_id=self.session_id,
                duration=self.duration,
            )
        )


class TaskReport(_Frozen):
    """Everything a rendered report says; ``parse_report(render_report(r)) == r``.

    A completed report carries ``output``; a failed one the failure fields.
    Reports written by other tools may lack metadata, so most fields are optional.
    """

    status: Status
    session_id: str | None = None
    attempt: int = 1
    duration: float | None = None
    subject: str | None = None
    output: str | None = None
    message: str | None = None
    category: FailureCategory | None = None
    retryable: bool | None = None
    error_type: ErrorType | None = None
    completed_steps: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    blocked_on: str | None = None
    suggested_actions: tuple[str, ...] = ()
    retry_after: float | None = None
    """Seconds the failing service asked to wait (``<retry_after_s>``), if it did."""

    _blank = field_validator("blocked_on", "session_id", "subject")(_none_if_blank)

    @classmethod
    def of(
        cls,
        *,
        output: str | None,
        failure: ChildFailure | None,
        attempt: int = 1,
        subject: str | None = None,
        session_id: str,
        duration: float,
    ) -> TaskReport:
        """The report of one attempt: its output, or its failure."""
        common: dict[str, Any] = {
            "session_id": session_id,
            "attempt": attempt,
            "duration": duration,
            "subject": subject,
        }
        if failure is None:
            return cls(status="completed", output=output or "", **common)
        return cls(
            status="failed",
            message=failure.message,
            category=failure.category,
            retryable=failure.suggested_retry,
            error_type=failure.error_type,
            completed_steps=failure.completed_steps,
            files_modified=failure.files_modified,
            blocked_on=failure.blocked_on,
            suggested_actions=failure.suggested_actions,
            retry_after=failure.retry_after,
            **common,
        )
