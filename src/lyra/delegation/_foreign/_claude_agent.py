"""The Claude Agent SDK's exceptions (``claude_agent_sdk``) and the CLI's terminal results.

A test walks the installed framework's exception classes and fails on one
that is not mapped here, so a new release cannot slip past. The framework is
never imported: classes are recognised by module and class name.

The Claude Code CLI ends a run with a ``result`` message; one that is not a
clean success (``is_error``, a subtype other than ``success``, a
``terminal_reason`` other than ``completed``) reaches lyra as the SDK's own
``ResultError``, carrying the result's ``subtype``, ``terminal_reason`` and
``api_error_status``: raised by the SDK when the CLI exits after it, or by
:class:`lyra.children.claude_agent.ClaudeAgentChild` the moment the result
arrives. This module is the one place that reads those fields, in this order:

1. ``api_error_status``: the HTTP status of the model call that failed (429,
   529, 5xx, 401, 413, ...), translated as any API status is. The CLI keeps
   the response's ``retry-after`` to itself, so none reaches the report.
2. ``subtype`` (:data:`RESULT_SUBTYPES`): ``error_max_turns`` and
   ``error_max_budget_usd`` are the framework's own limits (rule 1,
   ``timeout`` / ``budget``): running out of turns is never a success.
3. ``terminal_reason`` (:data:`TERMINAL_REASONS`): why the CLI's loop ended.
"""

from __future__ import annotations

from lyra._taxonomy import ErrorType
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

CLAUDE_AGENT_ERRORS: dict[str, tuple[Kind, ErrorType]] = {
    "ClaudeSDKError": (_K.UNKNOWN, _E.UNKNOWN),
    # The CLI could not be started or reached: a missing binary, a working
    # directory that does not exist, a process that refused the handshake.
    "CLIConnectionError": (_K.ENVIRONMENT, _E.CONNECTION),
    "CLINotFoundError": (_K.ENVIRONMENT, _E.UNKNOWN),  # rule 7: command not found
    # The CLI exited non-zero without a result (a crash): rule 10, or partial
    # after completed steps.
    "ProcessError": (_K.UNKNOWN, _E.UNKNOWN),
    "ResultError": (_K.UNKNOWN, _E.UNKNOWN),  # refined by its result (module docstring)
    # A line of the CLI's output that is not JSON, or a message the SDK cannot
    # parse (a message over max_buffer_size is one): a retry sends the same.
    "CLIJSONDecodeError": (_K.UNKNOWN, _E.DATA),
    "MessageParseError": (_K.UNKNOWN, _E.DATA),
    # A warning class (can_use_tool shadowed by a permission rule); raised only
    # under warnings-as-errors, where it is the caller's configuration.
    "CanUseToolShadowedWarning": (_K.UNKNOWN, _E.UNKNOWN),
}

RESULT_SUBTYPES: dict[str, tuple[Kind, ErrorType]] = {
    "error_max_turns": (_K.BUDGET, _E.BUDGET),
    "error_max_budget_usd": (_K.BUDGET, _E.BUDGET),
    # The model never produced output matching output_format's schema: the
    # framework's own check of a claimed success failed (as verify= rejecting it).
    "error_max_structured_output_retries": (_K.OUTPUT_INVALID, _E.VERIFICATION),
    "error_during_execution": (_K.UNKNOWN, _E.UNKNOWN),
}
"""A result's ``subtype`` other than ``success``."""

TERMINAL_REASONS: dict[str, tuple[Kind, ErrorType]] = {
    "max_turns": (_K.BUDGET, _E.BUDGET),
    "budget": (_K.BUDGET, _E.BUDGET),
    "budget_spent": (_K.BUDGET, _E.BUDGET),
    # The conversation outgrew the context window: a continuation in a fresh
    # context (without the transcript) or a split task can finish it.
    "prompt_too_long": (_K.CONTEXT_OVERFLOW, _E.CONTEXT_OVERFLOW),
    "blocking_limit": (_K.INCOMPLETE, _E.DATA),
    "refusal": (_K.MALFORMED_TASK, _E.DATA),
    # A hook (a guardrail) stopped the run on purpose.
    "hook_stopped": (_K.MALFORMED_TASK, _E.DATA),
    "stop_hook_prevented": (_K.MALFORMED_TASK, _E.DATA),
    "image_error": (_K.MALFORMED_TASK, _E.DATA),
    # A model call failed without an HTTP status: no connection.
    "api_error": (_K.TRANSIENT, _E.CONNECTION),
    "model_error": (_K.UNKNOWN, _E.UNKNOWN),
    "aborted_streaming": (_K.UNKNOWN, _E.UNKNOWN),
    "aborted_tools": (_K.UNKNOWN, _E.UNKNOWN),
    "tool_deferred": (_K.UNKNOWN, _E.UNKNOWN),
    "tool_deferred_unavailable": (_K.UNKNOWN, _E.UNKNOWN),
    "turn_setup_failed": (_K.UNKNOWN, _E.UNKNOWN),
}
"""A result's ``terminal_reason`` other than ``completed``."""

_SDK = "claude_agent_sdk"


def describe_claude_agent(exc: BaseException) -> Cause:
    """An exception of ``claude_agent_sdk``; a ``ResultError`` by its result."""
    if nearest(exc, CLAUDE_AGENT_ERRORS) == "ResultError":
        return _result(exc)
    return from_table(exc, CLAUDE_AGENT_ERRORS, _SDK) or unmapped(exc, _SDK)


def _result(exc: BaseException) -> Cause:
    """A terminal result, by its API status, subtype or terminal reason."""
    status = status_of(getattr(exc, "api_error_status", None))
    if status is not None:
        source = f"{_SDK}.ResultError, model call failed with HTTP {status}"
        if status in (404, 410):  # a missing model or endpoint, not a missing subject
            return Cause(_K.PERMANENT, _E.NOT_FOUND, source)
        return from_status(status, source)
    for field, table in (("subtype", RESULT_SUBTYPES), ("terminal_reason", TERMINAL_REASONS)):
        value = getattr(exc, field, None)
        if isinstance(value, str) and value in table:
            return Cause(*table[value], f"{_SDK}.ResultError({field}={value})")
    return Cause(_K.UNKNOWN, _E.UNKNOWN, f"{_SDK}.ResultError")
