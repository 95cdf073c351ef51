"""pydantic-ai's exceptions, class by class (``pydantic_ai.exceptions`` and the
few public error classes its other modules define).

A test walks the installed framework's exception classes and fails on one
that is not mapped here, so a new release cannot slip past. The framework is
never imported: classes are recognised by module and class name.

How the mapping reads the framework:

- A provider error is a ``ModelAPIError``; when the provider's error says what
  went wrong it is one of the category classes (``ModelRateLimitError``, …),
  and with an HTTP status also a ``ModelHTTPError``. The category decides
  (Anthropic's billing error is a 400 but a ``ModelQuotaExceededError``:
  waiting or rewording will not lift it); a bare ``ModelHTTPError`` is refined
  by its status code, a bare ``ModelAPIError`` by the provider SDK's exception
  it wraps (its ``__cause__``). ``retry_after`` is the framework's own reading
  of ``retry-after-ms`` / ``Retry-After``.
- The run's own limits: ``UsageLimitExceeded`` (request, token, tool-call or
  cost limit) and ``RunTimedOut`` (the run's own ``timeout=``) are
  ``Kind.BUDGET``: timeout / budget, never a success.
- A tool whose retries ran out surfaces as ``UnexpectedModelBehavior("Tool 'x'
  exceeded max retries …")``: tool_error, retryable (the model may call it
  right next time), as is output that kept failing validation.
- Refusals (``ContentFilterError``) and requests the provider rejects are
  invalid_task; output cut off by the token limit is incomplete (partial).
- Control-flow signals (``ModelRetry``, ``CallDeferred``, ``SkipModelRequest``,
  …) are caught by the framework; one that escapes a run is a bug in the
  agent's code (rule 10). The framework's warnings are errors only under an
  application's warnings-as-errors filter, which the next run meets again.
"""

from __future__ import annotations

from lyra._taxonomy import ErrorType
from lyra.delegation._foreign._anthropic import describe_anthropic
from lyra.delegation._foreign._cause import (
    Cause,
    Kind,
    from_status,
    nearest,
    seconds,
    status_of,
    unmapped,
)
from lyra.delegation._foreign._openai import describe_openai

_K, _E = Kind, ErrorType

PYDANTIC_AI_ERRORS: dict[str, tuple[Kind, ErrorType]] = {
    # -- the run and its own limits
    "AgentRunError": (_K.UNKNOWN, _E.UNKNOWN),  # refined by its cause
    "UsageLimitExceeded": (_K.BUDGET, _E.BUDGET),
    "RunTimedOut": (_K.BUDGET, _E.TIMEOUT),
    # Stopped by the application itself (RunContext.cancel() in a tool): unfinished,
    # and RunCancelled.all_messages() keeps the work for a continuation.
    "RunCancelled": (_K.INCOMPLETE, _E.UNKNOWN),
    "ConcurrencyLimitExceeded": (_K.TRANSIENT, _E.RATE_LIMIT),  # its queue is full: wait
    "SuspendedResponseExpired": (_K.TRANSIENT, _E.UNKNOWN),  # start the request afresh
    "HookTimeoutError": (_K.TRANSIENT, _E.TIMEOUT),
    "ExternalEventError": (_K.TRANSIENT, _E.UNKNOWN),
    "UserError": (_K.PERMANENT, _E.UNKNOWN),  # the agent's code or configuration
    "UndrainedPendingMessagesError": (_K.PERMANENT, _E.UNKNOWN),
    "InlinedSchemaTooLargeError": (_K.PERMANENT, _E.DATA),
    "ConversationConflict": (_K.TRANSIENT, _E.UNKNOWN),  # a concurrent write; re-read, retry
    # -- what the model sent back
    "UnexpectedModelBehavior": (_K.TRANSIENT, _E.DATA),  # malformed output, retries ran out
    "OutputTokenLimitExceeded": (_K.INCOMPLETE, _E.DATA),
    "IncompleteToolCall": (_K.INCOMPLETE, _E.DATA),
    "ContentFilterError": (_K.MALFORMED_TASK, _E.DATA),  # a refusal, a content filter
    "ResponseRejected": (_K.TRANSIENT, _E.DATA),
    "FallbackExceptionGroup": (_K.TRANSIENT, _E.UNKNOWN),  # classified by its first error
    # -- the provider's API
    "ModelAPIError": (_K.UNKNOWN, _E.UNKNOWN),  # refined by the provider SDK's error
    "ModelHTTPError": (_K.UNKNOWN, _E.UNKNOWN),  # refined by status code
    "BatchJobError": (_K.UNKNOWN, _E.UNKNOWN),  # refined by status code
    "ModelRateLimitError": (_K.TRANSIENT, _E.RATE_LIMIT),
    "ModelOverloadedError": (_K.TRANSIENT, _E.RATE_LIMIT),
    "ModelUnavailableError": (_K.TRANSIENT, _E.UNKNOWN),
    "ModelServerError": (_K.TRANSIENT, _E.UNKNOWN),
    "ModelConnectionError": (_K.TRANSIENT, _E.CONNECTION),
    "ModelTimeoutError": (_K.TRANSIENT, _E.TIMEOUT),
    "ModelRequestTimeout": (_K.TRANSIENT, _E.TIMEOUT),
    "RealtimeError": (_K.TRANSIENT, _E.CONNECTION),
    "RealtimeHandshakeError": (_K.TRANSIENT, _E.CONNECTION),
    "ModelQuotaExceededError": (_K.PERMANENT, _E.AUTH),  # billing, credits: waiting won't help
    "ModelAuthenticationError": (_K.PERMANENT, _E.AUTH),
    "CredentialsRefreshError": (_K.PERMANENT, _E.AUTH),
    "CredentialsPersistenceError": (_K.PERMANENT, _E.AUTH),
    # A missing model or deployment: configuration, not a missing subject.
    "ModelNotFoundError": (_K.PERMANENT, _E.NOT_FOUND),
    "ModelRequestRejectedError": (_K.MALFORMED_TASK, _E.DATA),
    "ModelContextWindowExceededError": (_K.CONTEXT_OVERFLOW, _E.CONTEXT_OVERFLOW),
    "DownloadTooLargeError": (_K.MALFORMED_TASK, _E.DATA),
    # A decision model handed the step off and no language model stood behind it.
    "DecisionHandOff": (_K.PERMANENT, _E.UNKNOWN),
    "UnfillableRoute": (_K.PERMANENT, _E.UNKNOWN),
    "UnsureRoute": (_K.PERMANENT, _E.UNKNOWN),
    # -- tools
    "ToolRetryError": (_K.TRANSIENT, _E.UNKNOWN),
    "ToolFailedError": (_K.UNKNOWN, _E.UNKNOWN),
    "MCPError": (_K.UNKNOWN, _E.UNKNOWN),
    "WorkspaceError": (_K.UNKNOWN, _E.UNKNOWN),
    "WorkspaceOutputLimitError": (_K.UNKNOWN, _E.DATA),
    "WorkspaceUnavailableError": (_K.PERMANENT, _E.UNKNOWN),
    "WorkspaceTimeoutError": (_K.TRANSIENT, _E.TIMEOUT),
    "WorkspaceReadOnlyError": (_K.ENVIRONMENT, _E.AUTH),
    # -- control flow the framework catches; escaping a run, a bug in the agent's code
    "ModelRetry": (_K.TRANSIENT, _E.UNKNOWN),
    "ToolFailed": (_K.UNKNOWN, _E.UNKNOWN),
    "CallDeferred": (_K.UNKNOWN, _E.UNKNOWN),
    "ApprovalRequired": (_K.UNKNOWN, _E.UNKNOWN),
    "SkipModelRequest": (_K.UNKNOWN, _E.UNKNOWN),
    "RetryModelRequest": (_K.UNKNOWN, _E.UNKNOWN),
    "SkipToolValidation": (_K.UNKNOWN, _E.UNKNOWN),
    "SkipToolExecution": (_K.UNKNOWN, _E.UNKNOWN),
    # -- warnings, raised only under a warnings-as-errors filter
    "PydanticAIDeprecationWarning": (_K.PERMANENT, _E.UNKNOWN),
    "UnsupportedSettingWarning": (_K.PERMANENT, _E.UNKNOWN),
    "MessageHistoryMutatedWarning": (_K.PERMANENT, _E.UNKNOWN),
    "CostCalculationFailedWarning": (_K.PERMANENT, _E.UNKNOWN),
    "CostNotFoundWarning": (_K.PERMANENT, _E.UNKNOWN),
    "UsageExtractionFailedWarning": (_K.PERMANENT, _E.UNKNOWN),
    "UsageLimitUnavailableWarning": (_K.PERMANENT, _E.UNKNOWN),
    "AnthropicStaleThinkingBlockWarning": (_K.PERMANENT, _E.UNKNOWN),
}

_BY_STATUS = frozenset({"ModelHTTPError", "BatchJobError"})
"""Classes that say no more than their status code."""
_BY_CAUSE = frozenset({"AgentRunError", "ModelAPIError"})
"""Classes that say no more than the provider SDK's exception they wrap."""
_PROVIDERS = {"anthropic": describe_anthropic, "openai": describe_openai}
"""Provider SDKs whose exceptions pydantic-ai wraps, by top-level module."""


def describe_pydantic_ai(exc: BaseException) -> Cause:
    """An exception of ``pydantic_ai``: by class, a bare HTTP error by its status, a
    bare API error by the provider's exception behind it, an exhausted tool by name."""
    name = nearest(exc, PYDANTIC_AI_ERRORS)
    if name is None:
        return unmapped(exc, "pydantic_ai")
    source = f"pydantic_ai.{type(exc).__name__}"
    retry_after = seconds(getattr(exc, "retry_after", None))
    status = status_of(getattr(exc, "status_code", None))
    if name in _BY_STATUS and status is not None:
        return from_status(status, f"{source}, HTTP {status}", retry_after)
    cause = exc.__cause__
    if name in _BY_CAUSE and cause is not None:
        provider = _PROVIDERS.get(type(cause).__module__.partition(".")[0])
        if provider is not None:
            inner = provider(cause)
            wait = retry_after if retry_after is not None else inner.retry_after
            return Cause(inner.kind, inner.error_type, f"{source} ← {inner.source}", wait)
    if name == "UnexpectedModelBehavior" and "exceeded max retries" in str(exc):
        return Cause(_K.TRANSIENT, _E.UNKNOWN, f"{source} (a tool's retries ran out)")
    if name == "UnexpectedModelBehavior" and "output retries" in str(exc):
        return Cause(_K.OUTPUT_INVALID, _E.VERIFICATION, f"{source} (output validation)")
    kind, error_type = PYDANTIC_AI_ERRORS[name]
    return Cause(kind, error_type, source, retry_after)
