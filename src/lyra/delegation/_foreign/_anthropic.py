"""The anthropic SDK's exceptions, class by class.

A test walks the installed SDK and fails on a class missing here, so a new
release cannot slip past. Subclasses are listed explicitly because their
parents mislead: a spend limit is a ``RateLimitError`` in the SDK, but waiting
will not lift it.
"""

from __future__ import annotations

from lyra._taxonomy import ErrorType
from lyra.delegation._foreign._cause import (
    Cause,
    Kind,
    by_status,
    from_status,
    from_table,
    unmapped,
)

_K, _E = Kind, ErrorType

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


_BILLING = "credit balance is too low"
"""What the Messages API's billing refusal says: a 400 in the SDK (pydantic-ai calls the
same answer a ``ModelQuotaExceededError``), yet no fault of the task's."""


_STREAMED: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""The status each error type of the Messages API stands for: met in a stream, after
its status (200) was sent, the error's type is all that says what happened."""


def describe_anthropic(exc: BaseException) -> Cause:
    """An anthropic SDK error; a bare ``APIStatusError`` is refined by its status code,
    or, for an error event in a stream (status 200), by the error's type."""
    if type(exc).__name__ == "BadRequestError" and _BILLING in str(exc):
        return Cause(_K.PERMANENT, _E.AUTH, "anthropic.BadRequestError (billing)")
    if getattr(exc, "status_code", None) == 200 and type(exc).__name__ == "APIStatusError":
        return _streamed(exc)
    return (
        by_status(exc, ANTHROPIC_ERRORS, ("APIStatusError",), "anthropic")
        or from_table(exc, ANTHROPIC_ERRORS, "anthropic")
        or unmapped(exc, "anthropic")
    )


def _streamed(exc: BaseException) -> Cause:
    """An error event met in a stream: the status its type stands for, else a passing
    trouble of the API's (the answer was under way: nothing about the task is wrong)."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    source = f"anthropic.APIStatusError (a {kind or 'nameless'} error event in a stream)"
    status = _STREAMED.get(kind) if isinstance(kind, str) else None
    if status is None:
        return Cause(_K.TRANSIENT, _E.UNKNOWN, source)
    return from_status(status, source)
