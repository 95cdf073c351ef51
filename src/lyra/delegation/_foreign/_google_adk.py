"""Google ADK's exceptions and those of the model client it raises through
(``google.adk``, ``google.genai``; a few of ``google.auth``'s, which a Gemini model
raises without credentials).

A test walks the installed ADK's and google-genai's source and fails on a public
exception class that is not mapped here. Nothing of Google's is imported:
classes are recognised by module and class name::

    google.adk
    ├── LlmCallsLimitExceededError    RunConfig.max_llm_calls reached   rule 1: timeout/budget
    ├── NodeTimeoutError              a workflow node's timeout          rule 1: timeout/timeout
    ├── ToolExecutionError            raised by a tool                   rule 10, or its cause
    ├── SessionNotFoundError, InvocationNotFoundError, StaleSessionError,
    │   AlreadyExistsError, NotFoundError   the session store            rule 6 / rule 10
    ├── InputValidationError, StateSchemaError, Workflow*Error, GraphValidationError
    │                                 the agent or its input is wrong    rule 3 / rule 10
    └── credential and auth errors    rule 8
    google.genai.errors
    └── APIError (.code)              by its HTTP status: 429 rule 6 (retry-after from
        ├── ClientError (4xx)         its RetryInfo), 401/403 rule 8, 400 rule 9,
        └── ServerError (5xx)         5xx rule 6
    google.genai's interactions client  the same, by its status_code

ADK wraps an exception raised in a plugin in a ``RuntimeError`` whose cause is
the original; the child re-raises the cause, so it is classified here or as
lyra's own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from lyra._taxonomy import ErrorType
from lyra.delegation._foreign._cause import (
    Cause,
    Kind,
    from_status,
    from_table,
    nearest,
    retry_after_of,
    status_of,
    unmapped,
)

_K, _E = Kind, ErrorType

GOOGLE_ADK_ERRORS: dict[str, tuple[Kind, ErrorType]] = {
    # google.adk: its own limits
    "LlmCallsLimitExceededError": (_K.BUDGET, _E.BUDGET),
    "NodeTimeoutError": (_K.BUDGET, _E.TIMEOUT),
    # google.adk: tools
    "ToolExecutionError": (_K.UNKNOWN, _E.UNKNOWN),  # refined by what it was raised from
    "ToolCallIntegrityError": (_K.TRANSIENT, _E.DATA),  # a call without its response: retry
    "AdvisorError": (_K.UNKNOWN, _E.UNKNOWN),
    "AuthCredentialMissingError": (_K.PERMANENT, _E.AUTH),
    "CredentialExchangeError": (_K.PERMANENT, _E.AUTH),
    "CredentialRefresherError": (_K.PERMANENT, _E.AUTH),
    # google.adk: sessions and their store
    # lyra makes the session: a bug (``unknown``, not ``not_found``: a fallback would hide it)
    "SessionNotFoundError": (_K.UNKNOWN, _E.UNKNOWN),
    "InvocationNotFoundError": (_K.UNKNOWN, _E.UNKNOWN),
    "NotFoundError": (_K.UNKNOWN, _E.UNKNOWN),
    "AlreadyExistsError": (_K.UNKNOWN, _E.UNKNOWN),
    "StaleSessionError": (_K.TRANSIENT, _E.UNKNOWN),  # a lost optimistic-concurrency race
    "StateSchemaError": (_K.INVALID_INPUT, _E.DATA),
    "InputValidationError": (_K.INVALID_INPUT, _E.DATA),
    # google.adk: workflows (the agent as built is wrong, or a node failed)
    "GraphValidationError": (_K.UNKNOWN, _E.UNKNOWN),
    "WorkflowConfigurationError": (_K.UNKNOWN, _E.UNKNOWN),
    "WorkflowDataError": (_K.UNKNOWN, _E.DATA),
    "WorkflowInvariantError": (_K.UNKNOWN, _E.UNKNOWN),
    "DynamicNodeFailError": (_K.UNKNOWN, _E.UNKNOWN),
    "NodeInterruptedError": (_K.UNKNOWN, _E.UNKNOWN),  # control flow, never surfaced
    # google.adk: remote A2A agents
    "AgentCardResolutionError": (_K.TRANSIENT, _E.CONNECTION),
    "A2AClientError": (_K.TRANSIENT, _E.UNKNOWN),
    # google.adk's web server and replay tooling (never raised by a run)
    "TransientError": (_K.TRANSIENT, _E.UNKNOWN),
    "ReplayVerificationError": (_K.UNKNOWN, _E.UNKNOWN),
    "ReplayConfigError": (_K.UNKNOWN, _E.UNKNOWN),
    # google.genai: the model API, by HTTP status (below); these names when it has none
    "APIError": (_K.UNKNOWN, _E.UNKNOWN),
    "ClientError": (_K.MALFORMED_TASK, _E.DATA),
    "ServerError": (_K.TRANSIENT, _E.UNKNOWN),
    "UnknownApiResponseError": (_K.TRANSIENT, _E.DATA),  # a body the client cannot read
    "UnknownFunctionCallArgumentError": (_K.UNKNOWN, _E.UNKNOWN),
    "UnsupportedFunctionError": (_K.UNKNOWN, _E.UNKNOWN),
    "FunctionInvocationError": (_K.UNKNOWN, _E.UNKNOWN),
    "ExperimentalWarning": (_K.UNKNOWN, _E.UNKNOWN),
    # google.genai: its interactions client (a generated client: the usual HTTP classes)
    "GeminiNextGenAPIClientError": (_K.UNKNOWN, _E.UNKNOWN),
    "APIStatusError": (_K.UNKNOWN, _E.UNKNOWN),
    "APIConnectionError": (_K.TRANSIENT, _E.CONNECTION),
    "APITimeoutError": (_K.TRANSIENT, _E.TIMEOUT),
    "APIResponseValidationError": (_K.TRANSIENT, _E.DATA),
    "BadRequestError": (_K.MALFORMED_TASK, _E.DATA),
    "AuthenticationError": (_K.PERMANENT, _E.AUTH),
    "PermissionDeniedError": (_K.PERMANENT, _E.AUTH),
    "ConflictError": (_K.TRANSIENT, _E.UNKNOWN),
    "UnprocessableEntityError": (_K.MALFORMED_TASK, _E.DATA),
    "RateLimitError": (_K.TRANSIENT, _E.RATE_LIMIT),
    "InternalServerError": (_K.TRANSIENT, _E.UNKNOWN),
    "NoResponseError": (_K.TRANSIENT, _E.CONNECTION),
    "ResponseValidationError": (_K.TRANSIENT, _E.DATA),
    "ContinuationInterruptedError": (_K.TRANSIENT, _E.CONNECTION),
    "ContinuationTimeoutError": (_K.TRANSIENT, _E.TIMEOUT),
    "TemporaryError": (_K.TRANSIENT, _E.UNKNOWN),
    "PermanentError": (_K.UNKNOWN, _E.UNKNOWN),
    "GenAiError": (_K.UNKNOWN, _E.UNKNOWN),
    "GenAiDefaultError": (_K.UNKNOWN, _E.UNKNOWN),
    "EphemeralTokenAPIKeyError": (_K.PERMANENT, _E.AUTH),
    "CreateInteractionClientError": (_K.MALFORMED_TASK, _E.DATA),
    "CreateInteractionServerError": (_K.TRANSIENT, _E.UNKNOWN),
    "GetInteractionByIDClientError": (_K.MALFORMED_TASK, _E.DATA),
    "GetInteractionByIDServerError": (_K.TRANSIENT, _E.UNKNOWN),
    "DeleteInteractionClientError": (_K.MALFORMED_TASK, _E.DATA),
    "DeleteInteractionServerError": (_K.TRANSIENT, _E.UNKNOWN),
    "CancelInteractionByIDClientError": (_K.MALFORMED_TASK, _E.DATA),
    "CancelInteractionByIDServerError": (_K.TRANSIENT, _E.UNKNOWN),
    # google.auth: a Gemini model without (working) credentials
    "DefaultCredentialsError": (_K.PERMANENT, _E.AUTH),
    "RefreshError": (_K.PERMANENT, _E.AUTH),
}

_BY_STATUS = frozenset(
    name
    for name, (kind, _) in GOOGLE_ADK_ERRORS.items()
    if name.endswith(("ClientError", "ServerError", "StatusError"))
    or name in {"APIError", "RateLimitError", "BadRequestError", "InternalServerError"}
)
"""Classes that stand for an HTTP status: read by the status they carry."""

_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def describe_google_adk(exc: BaseException) -> Cause:
    """An exception of ``google.adk``, ``google.genai`` or ``google.auth``: a model API
    error by its HTTP status (and the retry delay the API asked for)."""
    package = ".".join(type(exc).__module__.split(".")[:2])
    if nearest(exc, GOOGLE_ADK_ERRORS) in _BY_STATUS:
        status = status_of(getattr(exc, "code", None)) or status_of(
            getattr(exc, "status_code", None)
        )
        if status is not None:
            wait = _retry_delay(getattr(exc, "details", None)) or retry_after_of(exc)
            return from_status(status, f"{package}.{type(exc).__name__}", wait)
    return from_table(exc, GOOGLE_ADK_ERRORS, package) or unmapped(exc, package)


def adk_output_rejected(exc: BaseException) -> bool:
    """True for pydantic's ValidationError of an ``LlmAgent``'s ``output_schema`` check,
    which ADK runs on the agent's final answer as it saves it to ``output_key``: the
    answer was rejected, not the task's input (told by the frame that raised it)."""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "__maybe_save_output_to_state" and str(
            frame.f_globals.get("__name__", "")
        ).startswith("google.adk."):
            return True
        tb = tb.tb_next
    return False


def _retry_delay(details: Any) -> float | None:
    """The ``retryDelay`` ("7s") of a google.rpc ``RetryInfo`` in an API error's details."""
    if isinstance(details, dict):
        inner = details.get("error")
        details = (inner if isinstance(inner, dict) else details).get("details")
    if not isinstance(details, Iterable) or isinstance(details, str | bytes):
        return None
    for item in details:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("RetryInfo"):
            found = _DELAY.match(str(item.get("retryDelay", "")))
            if found:
                return float(found.group(1))
    return None
