"""Graceful failure: a supervisor step that fails becomes an error context, not a crash.

Every step of a run (plan, fan-out, assemble, answer) runs through
:meth:`Graceful.step`. A failure is recorded as an :class:`ErrorContext`
(what failed, its fine type, a hint for the user, what data is and is not
available, whether a retry can help) and the step's fallback value stands in.
A critical step's failure forces the answer to be written from what exists.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from lyra import events
from lyra.delegation import ErrorType, exception_text
from lyra.delegation._internal import ErrorKind, describe_error
from lyra.errors import ConfigurationError, RunStopped

T = TypeVar("T")

_HINTS: dict[ErrorType, str] = {
    ErrorType.TIMEOUT: "A service or step was too slow; try again with a longer timeout.",
    ErrorType.IDLE: "A step stopped making progress; try again, or split the work.",
    ErrorType.BUDGET: "The budget ran out; raise it or narrow the work.",
    ErrorType.CONNECTION: "A service could not be reached; check the network and try again.",
    ErrorType.RATE_LIMIT: "A service is limiting requests; wait a little and try again.",
    ErrorType.NOT_FOUND: "Something requested does not exist; check the identifiers.",
    ErrorType.AUTH: "Access was refused; check credentials and billing.",
    ErrorType.DATA: "A service returned data that could not be used.",
    ErrorType.ENVIRONMENT: "Something needed is missing here (a module, a file, a permission).",
    ErrorType.UNKNOWN: "An unexpected error; the run directory's events.jsonl has details.",
}


class ErrorContext(BaseModel):
    """What the final answer is told about a failed step."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    failed_step: str
    error_type: ErrorType
    message: str
    user_hint: str
    available_data: list[str]
    unavailable_data: list[str]
    can_retry: bool
    retry_suggestion: str | None
    critical: bool = False


def error_context(
    step: str,
    exc: BaseException,
    *,
    available: Sequence[str] = (),
    unavailable: Sequence[str] = (),
    critical: bool = False,
) -> ErrorContext:
    """Describe a failed step for the answer writer and the user."""
    cause = describe_error(exc)
    can_retry = cause.kind in (ErrorKind.TRANSIENT, ErrorKind.ENVIRONMENT)
    return ErrorContext(
        failed_step=step,
        error_type=cause.error_type,
        message=exception_text(exc),
        user_hint=_HINTS[cause.error_type],
        available_data=list(available),
        unavailable_data=list(unavailable),
        can_retry=can_retry,
        retry_suggestion="Run the same command again" if can_retry else None,
        critical=critical,
    )


class Graceful:
    """Runs steps; collects the contexts of those that failed."""

    def __init__(self) -> None:
        self.errors: list[ErrorContext] = []

    async def step(
        self,
        name: str,
        work: Callable[[], Awaitable[T]],
        *,
        fallback: T,
        available: Sequence[str] = (),
        unavailable: Sequence[str] = (),
        critical: bool = False,
    ) -> T:
        """``await work()``, or record its failure and return ``fallback``.

        A :class:`~lyra.errors.ConfigurationError` is the caller's mistake (no step
        can succeed as configured) and :class:`~lyra.errors.RunStopped` the run's own
        storage giving out (a resume finishes it): neither is a failure to degrade,
        so both propagate."""
        try:
            return await work()
        except (ConfigurationError, RunStopped):
            raise
        except Exception as exc:  # noqa: BLE001 - the point: a failed step never crashes the run
            context = error_context(
                name, exc, available=available, unavailable=unavailable, critical=critical
            )
            self.errors.append(context)
            events.warning(
                events.SUPERVISOR_STEP_FAILED,
                step=name,
                error_type=str(context.error_type),
                error=context.message,
                critical=critical,
            )
            return fallback
