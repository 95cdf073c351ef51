"""The one place where exceptions from outside lyra are translated.

Every exception a child can raise is reduced to a :class:`Cause`: a *kind*
that the rule table in :mod:`._classify` understands, a fine
:class:`ErrorType`, and the ``retry-after`` a service asked for. Anthropic
SDK errors are mapped class by class (``ANTHROPIC_ERRORS``; a test walks the
installed SDK and fails on a class missing here), httpx errors and plain HTTP
statuses by code, Python's built-ins by type. Neither SDK is imported here:
errors are recognised by module and class name, so classification stays
cheap and works without the optional clients loaded.
"""

from __future__ import annotations

import email.utils
import math
import subprocess
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from lyra._taxonomy import ErrorType
from lyra.errors import (
    IncompleteOutput,
    InvalidInput,
    SubjectNotFound,
    TaskRejected,
    TransientError,
)


class Kind(StrEnum):
    """What an exception means for the rule table (DESIGN §3, rules 3-10)."""

    INVALID_INPUT = "invalid_input"  # rule 3
    NOT_FOUND = "not_found"  # rule 4
    INCOMPLETE = "incomplete"  # rule 5 (even with no completed step)
    TRANSIENT = "transient"  # rule 6
    ENVIRONMENT = "environment"  # rule 7
    PERMANENT = "permanent"  # rule 8
    MALFORMED_TASK = "malformed_task"  # rule 9
    UNKNOWN = "unknown"  # rule 10


@dataclass(frozen=True, slots=True)
class Cause:
    """An exception reduced to what classification needs."""

    kind: Kind
    error_type: ErrorType
    source: str
    """Where the mapping came from, in words (becomes part of ``evidence``)."""
    retry_after: float | None = None


_K, _E = Kind, ErrorType

# Every exception class the anthropic SDK exports, by name. Subclasses are
# listed explicitly because their parents mislead: a spend limit is a
# RateLimitError in the SDK, but waiting will not lift it.
ANTHROPIC_ERRORS: dict[str, tuple[Kind, ErrorType]] = {
    "AnthropicError": (_K.UNKNOWN, _E.UNKNOWN),
    "APIError": (_K.UNKNOWN, _E.UNKNOWN),
    "APIStatusError": (_K.UNKNOWN, _E.UNKNOWN),  # refined by status code
    "APIConnectionError": (_K.TRANSIENT, _E.CONNECTION),
    "APITimeoutError": (_K.TRANSIENT, _E.TIMEOUT),
    "APIResponseValidationError": (_K.TRANSIENT, _E.DATA),
    "APIWebhookValidationError": (_K.UNKNOWN, _E.DATA),
    "RetryableError": (_K.TRANSIENT, _E.UNKNOWN),
    "CredentialsError": (_K.PERMANENT, _E.AUTH),
    "IdentityTokenFileError": (_K.PERMANENT, _E.AUTH),
    "WorkloadIdentityError": (_K.PERMANENT, _E.AUTH),
    "AuthenticationError": (_K.PERMANENT, _E.AUTH),
    "PermissionDeniedError": (_K.PERMANENT, _E.AUTH),
    "SandboxEgressRestrictedError": (_K.PERMANENT, _E.AUTH),
    "PaymentRequiredError": (_K.PERMANENT, _E.AUTH),
    "LinkedOrganizationBillingUnavailableError": (_K.PERMANENT, _E.AUTH),
    "LinkedOrganizationSpendLimitReachedError": (_K.PERMANENT, _E.AUTH),
    "ContractSpendLimitReachedError": (_K.PERMANENT, _E.AUTH),
    "EnforcedSpendLimitReachedError": (_K.PERMANENT, _E.AUTH),
    "OrganizationOnHoldError": (_K.PERMANENT, _E.AUTH),
    "OrganizationTypeNotSupportedError": (_K.PERMANENT, _E.AUTH),
    "ParentOrganizationRequiredError": (_K.PERMANENT, _E.AUTH),
    "ClaudeCodeKeyCreatorNotMemberError": (_K.PERMANENT, _E.AUTH),
    "ClaudeCodeVersionTooOldError": (_K.PERMANENT, _E.UNKNOWN),
    "CMEKKeyDisabledError": (_K.PERMANENT, _E.AUTH),
    "CMEKKeyNetworkBlockedError": (_K.PERMANENT, _E.AUTH),
    # A 400 in the SDK, but it names a workspace setting, not a malformed task:
    # the same request succeeds once the workspace allows it.
    "WorkspaceHumanReviewDisabledError": (_K.PERMANENT, _E.AUTH),
    # A 404 from the Messages API names a missing model or endpoint, not a
    # missing subject: a configuration problem, never fixed by retrying.
    "NotFoundError": (_K.PERMANENT, _E.NOT_FOUND),
    "HTTPNotImplementedError": (_K.PERMANENT, _E.UNKNOWN),
    "PreconditionFailedError": (_K.PERMANENT, _E.UNKNOWN),
    "BadRequestError": (_K.MALFORMED_TASK, _E.DATA),
    "UnprocessableEntityError": (_K.MALFORMED_TASK, _E.DATA),
    "ContentTooLargeError": (_K.MALFORMED_TASK, _E.DATA),
    "RequestTooLargeError": (_K.MALFORMED_TASK, _E.DATA),
    "RequestBodyTooLargeAfterDecodingError": (_K.MALFORMED_TASK, _E.DATA),
    "RequestBodyEncodingInvalidError": (_K.MALFORMED_TASK, _E.DATA),
    "RequestBodyEncodingUnsupportedError": (_K.MALFORMED_TASK, _E.DATA),
    "RequestHeaderFieldsTooLargeError": (_K.MALFORMED_TASK, _E.DATA),
    "RateLimitError": (_K.TRANSIENT, _E.RATE_LIMIT),
    "RampLimitExceededError": (_K.TRANSIENT, _E.RATE_LIMIT),
    "OverloadedError": (_K.TRANSIENT, _E.RATE_LIMIT),
    "RequestTimeoutError": (_K.TRANSIENT, _E.TIMEOUT),
    "GatewayTimeoutError": (_K.TRANSIENT, _E.TIMEOUT),
    "DeadlineExceededError": (_K.TRANSIENT, _E.TIMEOUT),
    "ConflictError": (_K.TRANSIENT, _E.UNKNOWN),
    "ClientClosedRequestError": (_K.TRANSIENT, _E.CONNECTION),
    "InternalServerError": (_K.TRANSIENT, _E.UNKNOWN),
    "ServiceUnavailableError": (_K.TRANSIENT, _E.UNKNOWN),
    "CMEKContextUnavailableError": (_K.TRANSIENT, _E.UNKNOWN),
    "CMEKKeyUnreachableError": (_K.TRANSIENT, _E.CONNECTION),
}


def describe(exc: BaseException) -> Cause:
    """Reduce any exception to a :class:`Cause`."""
    exc = _innermost(exc)
    if isinstance(exc, InvalidInput):
        return Cause(Kind.INVALID_INPUT, ErrorType.DATA, "lyra.InvalidInput")
    if isinstance(exc, SubjectNotFound):
        return Cause(Kind.NOT_FOUND, ErrorType.NOT_FOUND, "lyra.SubjectNotFound")
    if isinstance(exc, IncompleteOutput):
        return Cause(Kind.INCOMPLETE, ErrorType.DATA, "lyra.IncompleteOutput")
    if isinstance(exc, TaskRejected):
        return Cause(Kind.MALFORMED_TASK, ErrorType.DATA, "lyra.TaskRejected")
    if isinstance(exc, TransientError):
        return _transient_error(exc)
    module = type(exc).__module__.partition(".")[0]
    if module == "anthropic":
        return _anthropic(exc)
    if module in {"httpx", "httpx2"}:
        return _httpx(exc, module)
    if module == "pydantic_core" and type(exc).__name__ == "ValidationError":
        return Cause(Kind.INVALID_INPUT, ErrorType.DATA, "pydantic ValidationError")
    return _builtin(exc)


def _innermost(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (task groups wrap child errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _transient_error(exc: TransientError) -> Cause:
    # Its fields come from the child's code: take only what makes sense.
    retry_after = _seconds(exc.retry_after)
    status = exc.status
    if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
        by_status = from_status(status, f"lyra.TransientError(HTTP {status})")
        return Cause(by_status.kind, by_status.error_type, by_status.source, retry_after)
    known = {member.value for member in ErrorType}
    kind = exc.error_type
    error_type = ErrorType(kind) if isinstance(kind, str) and kind in known else ErrorType.UNKNOWN
    return Cause(Kind.TRANSIENT, error_type, "lyra.TransientError", retry_after)


def _seconds(value: object) -> float | None:
    """A wait in seconds from whatever a child put there; ``None`` if it is no wait."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = float(value)
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    if isinstance(value, str):
        return parse_retry_after(value)
    return None


def _anthropic(exc: BaseException) -> Cause:
    for cls in type(exc).__mro__:
        mapped = ANTHROPIC_ERRORS.get(cls.__name__)
        if mapped is None:
            continue
        source = f"anthropic.{type(exc).__name__}"
        status = getattr(exc, "status_code", None)
        if cls.__name__ == "APIStatusError" and isinstance(status, int):
            return from_status(status, source, _retry_after(exc))
        return Cause(*mapped, source, _retry_after(exc))
    return Cause(Kind.UNKNOWN, ErrorType.UNKNOWN, f"anthropic.{type(exc).__name__} (unmapped)")


def _httpx(exc: BaseException, module: str) -> Cause:
    names = {cls.__name__ for cls in type(exc).__mro__}
    source = f"{module}.{type(exc).__name__}"
    if "HTTPStatusError" in names:
        response = getattr(exc, "response", None)
        return from_status(int(getattr(response, "status_code", 0)), source, _retry_after(exc))
    if "TimeoutException" in names:
        return Cause(Kind.TRANSIENT, ErrorType.TIMEOUT, source)
    if "TransportError" in names:
        return Cause(Kind.TRANSIENT, ErrorType.CONNECTION, source)
    return Cause(Kind.UNKNOWN, ErrorType.UNKNOWN, source)


def from_status(status: int, source: str, retry_after: float | None = None) -> Cause:
    """Translate an HTTP status code (of a data source or an API) to a cause."""
    where = f"{source}, HTTP {status}" if "HTTP" not in source else source
    if status in (401, 402, 403):
        return Cause(Kind.PERMANENT, ErrorType.AUTH, where)
    if status in (404, 410):
        return Cause(Kind.NOT_FOUND, ErrorType.NOT_FOUND, where)
    if status in (429, 529):
        return Cause(Kind.TRANSIENT, ErrorType.RATE_LIMIT, where, retry_after)
    if status in (408, 504):
        return Cause(Kind.TRANSIENT, ErrorType.TIMEOUT, where, retry_after)
    if status in (409, 425) or (500 <= status < 600 and status != 501):
        return Cause(Kind.TRANSIENT, ErrorType.UNKNOWN, where, retry_after)
    if status in (400, 413, 414, 422, 431):
        return Cause(Kind.MALFORMED_TASK, ErrorType.DATA, where)
    return Cause(Kind.UNKNOWN, ErrorType.UNKNOWN, where)


def _builtin(exc: BaseException) -> Cause:
    name = type(exc).__name__
    if isinstance(exc, ConnectionError):
        return Cause(Kind.TRANSIENT, ErrorType.CONNECTION, name)
    if isinstance(exc, TimeoutError):
        return Cause(Kind.TRANSIENT, ErrorType.TIMEOUT, f"{name} raised inside the child")
    if isinstance(exc, ImportError | PermissionError | FileNotFoundError):
        error_type = ErrorType.AUTH if isinstance(exc, PermissionError) else ErrorType.UNKNOWN
        return Cause(Kind.ENVIRONMENT, error_type, name)
    if isinstance(exc, subprocess.CalledProcessError) and exc.returncode == 127:
        return Cause(Kind.ENVIRONMENT, ErrorType.UNKNOWN, "command exited 127 (not found)")
    if "command not found" in str(exc).lower():
        return Cause(Kind.ENVIRONMENT, ErrorType.UNKNOWN, f"{name}: command not found")
    return Cause(Kind.UNKNOWN, ErrorType.UNKNOWN, name)


def _retry_after(exc: BaseException) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` on an error's response."""
    headers: Any = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    millis = parse_retry_after(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    return parse_retry_after(headers.get("retry-after"))


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``retry-after`` value (delta-seconds or an HTTP date);
    ``None`` for a missing, malformed, infinite or NaN value."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())
    return max(0.0, seconds) if math.isfinite(seconds) else None
