"""The one place where exceptions from outside lyra are translated.

Every exception a child can raise is reduced to a :class:`Cause`: a *kind*
that the rule table in :mod:`.._classify` understands, a fine
:class:`ErrorType`, and the ``retry-after`` a service asked for. lyra's own
signals and Python's built-ins are read here; each SDK and agent framework has
a module of its own with a table of its exception classes by name
(``_anthropic``, ``_openai``, ``_pydantic_ai``, ``_openai_agents``,
``_claude_agent``, ``_langgraph``, ``_google_adk``, ``_a2a``; ``_http`` for the HTTP
clients a tool calls a service with: httpx, requests, urllib), chosen by the
exception's top-level module. A test walks each installed SDK and fails on a class missing from its
table. No SDK is imported here: errors are recognised by module and class
name, so classification stays cheap and works without the optional clients
loaded.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from lyra._taxonomy import ErrorType
from lyra._text import safe_str
from lyra.delegation._foreign._a2a import describe_a2a
from lyra.delegation._foreign._anthropic import ANTHROPIC_ERRORS, describe_anthropic
from lyra.delegation._foreign._cause import (
    Cause,
    Kind,
    from_status,
    overflowed,
    parse_retry_after,
    seconds,
    status_of,
)
from lyra.delegation._foreign._claude_agent import describe_claude_agent
from lyra.delegation._foreign._google_adk import adk_output_rejected, describe_google_adk
from lyra.delegation._foreign._http import describe_httpx, describe_requests, describe_urllib
from lyra.delegation._foreign._langgraph import describe_langgraph
from lyra.delegation._foreign._openai import describe_openai
from lyra.delegation._foreign._openai_agents import describe_openai_agents, wrapped_by_openai_agents
from lyra.delegation._foreign._pydantic_ai import describe_pydantic_ai
from lyra.errors import (
    BudgetExhausted,
    ConfigurationError,
    IncompleteOutput,
    InvalidInput,
    SubjectNotFound,
    TaskRejected,
    TransientError,
)

__all__ = [
    "ANTHROPIC_ERRORS",
    "Cause",
    "Kind",
    "describe",
    "from_status",
    "parse_retry_after",
]

_BY_MODULE: dict[str, Callable[[BaseException], Cause]] = {
    "anthropic": describe_anthropic,
    "openai": describe_openai,
    "pydantic_ai": describe_pydantic_ai,
    "agents": describe_openai_agents,
    "claude_agent_sdk": describe_claude_agent,
    "langgraph": describe_langgraph,
    "langchain_core": describe_langgraph,
    "google": describe_google_adk,  # google.adk, google.genai, google.auth
    "a2a": describe_a2a,
    "httpx": describe_httpx,
    "httpx2": describe_httpx,
    "requests": describe_requests,
    "urllib": describe_urllib,
}
"""Who translates an exception, by the top-level module its class lives in."""

_WRAPS: dict[str, Callable[[BaseException], BaseException | None]] = {
    "agents": wrapped_by_openai_agents,
}
"""SDKs whose wrapper exceptions carry the real failure (``None``: not a wrapper):
what a wrapper carries is described instead, by the top-level module of its class."""


_CONFIGURATION = "lyra.ConfigurationError: a limit or option lyra cannot keep as configured"


def describe(exc: BaseException) -> Cause:
    """Reduce any exception to a :class:`Cause`: its own, or, where that is unknown,
    what it was raised ``from`` (a framework's generic error wrapping a
    ``ConnectionError``, whether lyra knows the framework or not), if that says more
    (a few links of the chain at most: a chain may loop)."""
    exc = _unwrapped(_innermost(exc))
    cause = _described(exc)
    inner = exc.__cause__
    for _ in range(8):
        if cause.kind is not Kind.UNKNOWN or inner is None or inner is exc:
            return cause
        exc = _unwrapped(_innermost(inner))
        explained = _described(exc)
        if explained.kind is not Kind.UNKNOWN:
            source = f"{cause.source} from {explained.source}"
            return Cause(explained.kind, explained.error_type, source, explained.retry_after)
        inner = exc.__cause__
    return cause


def _described(exc: BaseException) -> Cause:
    """``exc``'s own cause; a malformed request that says the prompt is over the model's
    context window is a context overflow, whoever says it."""
    cause = _own(exc)
    if cause.kind in (Kind.MALFORMED_TASK, Kind.UNKNOWN) and overflowed(exc):
        return Cause(Kind.CONTEXT_OVERFLOW, ErrorType.CONTEXT_OVERFLOW, cause.source)
    return cause


def _own(exc: BaseException) -> Cause:
    if isinstance(exc, InvalidInput):
        return Cause(Kind.INVALID_INPUT, ErrorType.DATA, "lyra.InvalidInput")
    if isinstance(exc, SubjectNotFound):
        return Cause(Kind.NOT_FOUND, ErrorType.NOT_FOUND, "lyra.SubjectNotFound")
    if isinstance(exc, IncompleteOutput):
        return Cause(Kind.INCOMPLETE, ErrorType.DATA, "lyra.IncompleteOutput")
    if isinstance(exc, TaskRejected):
        return Cause(Kind.MALFORMED_TASK, ErrorType.DATA, "lyra.TaskRejected")
    if isinstance(exc, BudgetExhausted):  # a child's own limit (a framework's max steps)
        return Cause(Kind.BUDGET, ErrorType.BUDGET, "lyra.BudgetExhausted")
    if isinstance(exc, TransientError):
        return _transient_error(exc)
    if isinstance(exc, ConfigurationError):  # lyra's refusal inside the run (an unpriced model)
        return Cause(Kind.PERMANENT, ErrorType.UNKNOWN, _CONFIGURATION)
    module = _translated_by(type(exc))
    sdk = _BY_MODULE.get(module)
    if sdk is not None:
        return sdk(exc)
    if module == "pydantic_core" and type(exc).__name__ == "ValidationError":
        if adk_output_rejected(exc):  # (a framework's check of a claimed success: rule 5)
            source = "google.adk output_schema (pydantic ValidationError)"
            return Cause(Kind.OUTPUT_INVALID, ErrorType.VERIFICATION, source)
        return Cause(Kind.INVALID_INPUT, ErrorType.DATA, "pydantic ValidationError")
    return _builtin(exc)


_OTHER_KNOWN = frozenset({"pydantic_core"})


def _translated_by(cls: type[BaseException]) -> str:
    """The top-level module whose table describes ``cls``: its own, else that of the
    nearest class it derives from that one is known for (an integration's subclass of
    an SDK's error: langchain-anthropic's ``AnthropicRateLimitError`` is the anthropic
    SDK's ``RateLimitError``)."""
    for klass in cls.__mro__:
        module = klass.__module__.partition(".")[0]
        if module in _BY_MODULE or module in _OTHER_KNOWN:
            return module
    return cls.__module__.partition(".")[0]


def _innermost(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (task groups wrap child errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _unwrapped(exc: BaseException) -> BaseException:
    """What an SDK's wrapper exception carries (a few levels at most), else ``exc``."""
    for _ in range(8):
        unwrap = _WRAPS.get(type(exc).__module__.partition(".")[0])
        inner = unwrap(exc) if unwrap is not None else None
        if inner is None or inner is exc:
            break
        exc = _innermost(inner)
    return exc


def _transient_error(exc: TransientError) -> Cause:
    # Its fields come from the child's code: take only what makes sense.
    retry_after = seconds(exc.retry_after)
    status = status_of(exc.status)
    if status is not None:
        by_status = from_status(status, f"lyra.TransientError(HTTP {status})")
        return Cause(by_status.kind, by_status.error_type, by_status.source, retry_after)
    known = {member.value for member in ErrorType}
    kind = exc.error_type
    error_type = ErrorType(kind) if isinstance(kind, str) and kind in known else ErrorType.UNKNOWN
    return Cause(Kind.TRANSIENT, error_type, "lyra.TransientError", retry_after)


def _builtin(exc: BaseException) -> Cause:
    name = type(exc).__name__
    if isinstance(exc, ConnectionError):
        return Cause(Kind.TRANSIENT, ErrorType.CONNECTION, name)
    if isinstance(exc, TimeoutError):
        return Cause(Kind.TRANSIENT, ErrorType.TIMEOUT, f"{name} raised inside the child")
    if isinstance(exc, ImportError | PermissionError | FileNotFoundError):
        return Cause(Kind.ENVIRONMENT, ErrorType.ENVIRONMENT, name)
    if isinstance(exc, subprocess.CalledProcessError) and exc.returncode == 127:
        return Cause(Kind.ENVIRONMENT, ErrorType.ENVIRONMENT, "command exited 127 (not found)")
    if "command not found" in safe_str(exc).lower():  # (any exception: its str may raise)
        return Cause(Kind.ENVIRONMENT, ErrorType.ENVIRONMENT, f"{name}: command not found")
    return Cause(Kind.UNKNOWN, ErrorType.UNKNOWN, name)
