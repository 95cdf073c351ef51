"""The openai SDK's exceptions (the OpenAI Agents SDK's models, LangGraph's OpenAI chat models).

A test walks the installed SDK's exception classes and fails on one that is not
mapped here, so a new release cannot slip past. The SDK is never imported:
classes are recognised by module and class name.

Statuses the SDK has no class for (402, 408, 413, 503, 529, …) arrive as a bare
``APIStatusError`` or as ``InternalServerError`` (every 5xx) and are refined by
their status code. A 429 whose ``code`` is ``insufficient_quota`` is a
``RateLimitError`` in the SDK, but it is the account's quota: waiting will not
lift it (rule 8, not rule 6).
"""

from __future__ import annotations

from lyra._taxonomy import ErrorType
from lyra.delegation._foreign._cause import (
    Cause,
    Kind,
    by_status,
    from_table,
    nearest,
    unmapped,
)

_K, _E = Kind, ErrorType

OPENAI_ERRORS: dict[str, tuple[Kind, ErrorType]] = {
    "OpenAIError": (_K.UNKNOWN, _E.UNKNOWN),
    "APIError": (_K.UNKNOWN, _E.UNKNOWN),
    "APIStatusError": (_K.UNKNOWN, _E.UNKNOWN),  # refined by status code
    "APIConnectionError": (_K.TRANSIENT, _E.CONNECTION),
    "APITimeoutError": (_K.TRANSIENT, _E.TIMEOUT),
    "APIResponseValidationError": (_K.TRANSIENT, _E.DATA),
    "BadRequestError": (_K.MALFORMED_TASK, _E.DATA),
    "UnprocessableEntityError": (_K.MALFORMED_TASK, _E.DATA),
    "AuthenticationError": (_K.PERMANENT, _E.AUTH),
    "OAuthError": (_K.PERMANENT, _E.AUTH),
    "PermissionDeniedError": (_K.PERMANENT, _E.AUTH),
    "SubjectTokenProviderError": (_K.PERMANENT, _E.AUTH),
    "MutuallyExclusiveAuthError": (_K.PERMANENT, _E.AUTH),
    # A 404 names a missing model or endpoint, not a missing subject.
    "NotFoundError": (_K.PERMANENT, _E.NOT_FOUND),
    "ConflictError": (_K.TRANSIENT, _E.UNKNOWN),
    "RateLimitError": (_K.TRANSIENT, _E.RATE_LIMIT),  # insufficient_quota: see above
    "InternalServerError": (_K.TRANSIENT, _E.UNKNOWN),  # refined by status code
    # The model stopped at its token limit before the parse could finish (rule 5).
    "LengthFinishReasonError": (_K.INCOMPLETE, _E.DATA),
    "ContentFilterFinishReasonError": (_K.MALFORMED_TASK, _E.DATA),
    "WebSocketConnectionClosedError": (_K.TRANSIENT, _E.CONNECTION),
    "WebSocketQueueFullError": (_K.TRANSIENT, _E.UNKNOWN),
    "ResponsesWebSocketError": (_K.TRANSIENT, _E.CONNECTION),
    "ResponsesWebSocketBufferError": (_K.TRANSIENT, _E.UNKNOWN),
    "MissingDependencyError": (_K.ENVIRONMENT, _E.UNKNOWN),
    "InvalidWebhookSignatureError": (_K.UNKNOWN, _E.DATA),
    "StreamAlreadyConsumed": (_K.UNKNOWN, _E.UNKNOWN),
    "APIRemovedInV1": (_K.PERMANENT, _E.UNKNOWN),  # a call of the 0.x API: the code must change
    "MissingStreamClassError": (_K.UNKNOWN, _E.UNKNOWN),
    "AgentOutputParseError": (_K.TRANSIENT, _E.DATA),
    "AgentTurnResultError": (_K.UNKNOWN, _E.UNKNOWN),
    "AgentFilePreparationError": (_K.ENVIRONMENT, _E.UNKNOWN),
    "AgentFileStagingError": (_K.TRANSIENT, _E.UNKNOWN),
    "BrowserError": (_K.UNKNOWN, _E.UNKNOWN),
    "BrowserCancelledError": (_K.UNKNOWN, _E.UNKNOWN),
    "ComputerUseError": (_K.UNKNOWN, _E.UNKNOWN),
    "ToolRunnerError": (_K.UNKNOWN, _E.UNKNOWN),
    "ToolRunnerCancelledError": (_K.UNKNOWN, _E.UNKNOWN),
    "DecisionsToolRunnerError": (_K.UNKNOWN, _E.UNKNOWN),
    "DecisionsToolRunnerCancelledError": (_K.UNKNOWN, _E.UNKNOWN),
}

_BY_STATUS = frozenset({"APIStatusError", "InternalServerError"})
"""Classes that stand for more than one status: their status code decides."""


def describe_openai(exc: BaseException) -> Cause:
    """An openai SDK error: a class standing for many statuses is refined by its status
    code, a 429 for an exhausted quota is permanent."""
    refined = by_status(exc, OPENAI_ERRORS, _BY_STATUS, "openai")
    if refined is not None:
        return refined
    quota = getattr(exc, "code", None) == "insufficient_quota"
    if quota and nearest(exc, OPENAI_ERRORS) == "RateLimitError":
        return Cause(_K.PERMANENT, _E.AUTH, f"openai.{type(exc).__name__} (insufficient_quota)")
    return from_table(exc, OPENAI_ERRORS, "openai") or unmapped(exc, "openai")
