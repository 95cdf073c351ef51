"""The A2A SDK's exceptions (``a2a``) and the end states of a remote A2A task.

A test walks the installed SDK's exception classes and fails on one that is not
mapped here, so a new release cannot slip past; another walks its ``TaskState``
values. The SDK is never imported: classes are recognised by module and class
name::

    a2a.utils.errors.A2AError                  the JSON-RPC / REST errors a server answers
    ├── TaskNotFoundError …                    by what they say of the call (table below)
    ├── InternalError                          the remote agent raised: rule 6 (HTTP 500)
    └── a2a.client.errors.A2AClientError       the client's own: refined by what it wraps
        ├── A2AClientTimeoutError              (an ``httpx`` error: 401 is rule 8, a
        └── AgentCardResolutionError           refused connection rule 6), or by its task

A remote task that ends otherwise than ``completed`` is raised by
:class:`lyra.children.a2a.A2AChild` as the SDK's ``A2AClientError`` whose ``data``
names the task's state (``task_state``, :data:`TASK_STATES`) and, for a lyra
server, the fields of its failure report (``report``), so that its category
carries over: the remote's own deadline, idle timeout or budget is ``timeout``
here (rule 1, as a framework's own limits are), its ``partial`` is partial, its
``invalid_task`` invalid. The rules of DESIGN §3 still decide on this side: the
remote's steps are this attempt's steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lyra._taxonomy import ErrorType, FailureCategory
from lyra.delegation._foreign._cause import (
    Cause,
    Kind,
    from_status,
    from_table,
    nearest,
    status_of,
    unmapped,
)

_K, _E = Kind, ErrorType

A2A_ERRORS: dict[str, tuple[Kind, ErrorType]] = {
    "A2AError": (_K.UNKNOWN, _E.UNKNOWN),
    # -- what a server answers about the call (a2a.utils.errors)
    # The remote lost the task (a restart): another attempt starts a new one.
    "TaskNotFoundError": (_K.TRANSIENT, _E.UNKNOWN),
    "TaskNotCancelableError": (_K.UNKNOWN, _E.UNKNOWN),  # it ended meanwhile
    "InternalError": (_K.TRANSIENT, _E.UNKNOWN),  # the remote agent raised (HTTP 500)
    "InvalidAgentResponseError": (_K.UNKNOWN, _E.UNKNOWN),  # the remote agent broke the protocol
    # The agent cannot take a text task as sent: the same request fails the same way.
    "ContentTypeNotSupportedError": (_K.MALFORMED_TASK, _E.DATA),
    "InvalidParamsError": (_K.MALFORMED_TASK, _E.DATA),
    "InvalidRequestError": (_K.MALFORMED_TASK, _E.DATA),
    "JSONParseError": (_K.MALFORMED_TASK, _E.DATA),
    # The remote does not speak what this client asks for: no retry changes that.
    "UnsupportedOperationError": (_K.PERMANENT, _E.UNKNOWN),
    "MethodNotFoundError": (_K.PERMANENT, _E.UNKNOWN),
    "VersionNotSupportedError": (_K.PERMANENT, _E.UNKNOWN),
    "ExtensionSupportRequiredError": (_K.PERMANENT, _E.UNKNOWN),
    "PushNotificationNotSupportedError": (_K.PERMANENT, _E.UNKNOWN),
    "ExtendedAgentCardNotConfiguredError": (_K.PERMANENT, _E.UNKNOWN),
    # -- the client's own (a2a.client.errors)
    "A2AClientError": (_K.UNKNOWN, _E.UNKNOWN),  # refined by its cause or its task
    "A2AClientTimeoutError": (_K.TRANSIENT, _E.TIMEOUT),
    "AgentCardResolutionError": (_K.UNKNOWN, _E.UNKNOWN),  # refined by its status or cause
    # An agent card whose signature does not verify: not an agent to trust.
    "SignatureVerificationError": (_K.PERMANENT, _E.AUTH),
    "InvalidSignaturesError": (_K.PERMANENT, _E.AUTH),
    "NoSignatureError": (_K.PERMANENT, _E.AUTH),
    "CanonicalizationError": (_K.PERMANENT, _E.AUTH),  # the card cannot be canonicalised
    # -- a server's internals: never sent to a client (rule 10 if one escapes)
    "ConcurrentTaskModificationError": (_K.UNKNOWN, _E.UNKNOWN),
    "NoTaskQueue": (_K.UNKNOWN, _E.UNKNOWN),
    "TaskQueueExists": (_K.UNKNOWN, _E.UNKNOWN),
}

TASK_STATES: dict[str, tuple[Kind, ErrorType]] = {
    # The agent ran it and failed: rule 10 unless a lyra report says more.
    "TASK_STATE_FAILED": (_K.UNKNOWN, _E.UNKNOWN),
    "TASK_STATE_REJECTED": (_K.MALFORMED_TASK, _E.DATA),  # the agent refused the task: rule 9
    "TASK_STATE_AUTH_REQUIRED": (_K.PERMANENT, _E.AUTH),  # rule 8, as a 401/403
    "TASK_STATE_CANCELED": (_K.TRANSIENT, _E.UNKNOWN),  # cancelled there by someone else
    # The stream ended before the task did, and it could not be followed again.
    "TASK_STATE_SUBMITTED": (_K.TRANSIENT, _E.CONNECTION),
    "TASK_STATE_WORKING": (_K.TRANSIENT, _E.CONNECTION),
    "TASK_STATE_UNSPECIFIED": (_K.UNKNOWN, _E.UNKNOWN),  # an agent that sent no state
}
"""The states a remote task can end an attempt in, other than ``completed`` (the
output) and ``input-required`` (a question for ``ctx.ask``)."""

_SDK = "a2a"


def describe_a2a(exc: BaseException) -> Cause:
    """An exception of the ``a2a`` SDK; a remote task's end by its state and report."""
    name = nearest(exc, A2A_ERRORS)
    data = getattr(exc, "data", None)
    if name == "A2AClientError" and isinstance(data, Mapping) and "task_state" in data:
        return _remote_task(str(data["task_state"]), data.get("report"))
    if name == "AgentCardResolutionError":
        status = status_of(getattr(exc, "status_code", None))
        if status in (404, 410):  # no agent at that URL, not a missing subject
            return Cause(_K.PERMANENT, _E.NOT_FOUND, f"{_SDK}.{type(exc).__name__} (HTTP {status})")
        if status is not None:
            return from_status(status, f"{_SDK}.{type(exc).__name__}")
    return from_table(exc, A2A_ERRORS, _SDK) or unmapped(exc, _SDK)


def _remote_task(state: str, report: Any) -> Cause:
    """A remote task that ended in ``state``; a lyra server's report decides how."""
    kind, error_type = TASK_STATES.get(state, (_K.UNKNOWN, _E.UNKNOWN))
    source = f"the remote A2A task ended {state}"
    category = report.get("category") if isinstance(report, Mapping) else None
    if isinstance(category, str) and category in _CATEGORIES:
        category = FailureCategory(category)
        error_type = _error_type(report.get("error_type"))
        kind = _kind_of(category, error_type, retryable=report.get("retryable") is True)
        source = f"{source} ({category}/{error_type} there)"
    return Cause(kind, error_type, f"{_SDK}: {source}")


def _kind_of(category: FailureCategory, error_type: ErrorType, *, retryable: bool) -> Kind:
    """A lyra server's failure category (with its error type) as a kind here."""
    match category:
        case FailureCategory.TIMEOUT:  # its own deadline, idle timeout or budget: rule 1
            return _K.BUDGET
        case FailureCategory.PARTIAL:
            return _K.INCOMPLETE
        case FailureCategory.INVALID_TASK if error_type is ErrorType.NOT_FOUND:
            return _K.NOT_FOUND
        case FailureCategory.TOOL_ERROR if error_type is ErrorType.AUTH:
            return _K.PERMANENT
        case FailureCategory.TOOL_ERROR if error_type is ErrorType.ENVIRONMENT:
            return _K.ENVIRONMENT  # rule 7: its machine lacks a module, file or permission
        case FailureCategory.TOOL_ERROR:
            return _K.TRANSIENT if retryable else _K.UNKNOWN
        case _:  # invalid_task; missing_context: a question it could put to nobody
            return _K.MALFORMED_TASK


def _error_type(value: Any) -> ErrorType:
    known = {member.value for member in ErrorType}
    return ErrorType(value) if isinstance(value, str) and value in known else ErrorType.UNKNOWN


_CATEGORIES = frozenset(member.value for member in FailureCategory)
