"""Suggested recovery actions: text for a human or a parent model.

Nothing in lyra executes these. Names taken from error text (a module, a
command) are only quoted when they look like plain identifiers, so a hostile
error message cannot smuggle a shell command into a suggestion.
"""

from __future__ import annotations

import re
from functools import lru_cache

from lyra._taxonomy import ErrorType, FailureCategory
from lyra.delegation._classify import EMPTY_PROMPT, Verdict
from lyra.delegation._foreign import Kind

_LIMIT = re.compile(
    r"\b(max_tokens|max_cost_usd|max_turns|max_tool_calls)=\S+ (?:reached|exceeded)"
)
"""The limit a budget ran out on, as its account says it (``max_tool_calls=3 reached``)."""
_LIMITS = "max_tokens, max_cost_usd, max_turns or max_tool_calls"
_RAISE_BUDGET = "Raise the budget ({}) or narrow the task"
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}")
_MODULE = re.compile(r"No module named '([^']+)'")
_IMPORT_NAME = re.compile(r"cannot import name '([^']+)'")
_COMMAND = re.compile(
    r"([^\s:'\"]+): command not found"
    r"|command not found: ([^\s'\"]+)"
    r"|Command '\[?'?([^\s'\",\]]+)[^']*' returned non-zero exit status 127"
)


def suggest(verdict: Verdict, *, timeout: float, subject: str | None) -> tuple[str, ...]:
    """Recovery actions for a failure, from its category and cause."""
    match verdict.category:
        case FailureCategory.TIMEOUT:
            limit = (
                _LIMIT.search(verdict.message) if verdict.error_type is ErrorType.BUDGET else None
            )
            return _timeout(verdict.error_type, verdict.retryable, timeout, limit and limit[1])
        case FailureCategory.MISSING_CONTEXT:
            return (
                "Include specific file paths, identifiers or data in the prompt",
                "Provide full context (the child has no access to the parent's history)",
            )
        case FailureCategory.INVALID_TASK:
            return _invalid(verdict, subject)
        case FailureCategory.PARTIAL:
            return (
                "Complete remaining work: continue from the last completed step",
                f"Fix blocker: {_first_line(verdict.blocked_on)}",
            )
        case FailureCategory.TOOL_ERROR:
            return _tool_error(verdict)


@lru_cache(maxsize=256)
def _timeout(
    error_type: ErrorType, retryable: bool, timeout: float, limit: str | None = None
) -> tuple[str, ...]:
    """Made once per timeout value (many children may time out together); ``limit``:
    the budget's limit that ran out, where its message names one."""
    if error_type is ErrorType.BUDGET:
        if retryable:
            return ("Continue within what the budget has left", "Narrow the task")
        return (_RAISE_BUDGET.format(limit or _LIMITS), "Break task into smaller subtasks")
    if error_type is ErrorType.LOOP:  # more time would buy more of the same call
        if not retryable:  # (nothing left of the budget to continue with)
            return (_RAISE_BUDGET.format(_LIMITS), "Break task into smaller subtasks")
        return (
            "Continue with a prompt naming the repeated call, so the child changes approach",
            "Break task into smaller subtasks",
        )
    if error_type is ErrorType.IDLE:
        return (
            "Break task into smaller subtasks",
            "Provide the context the child may be waiting for",
            "Check for a hung tool or service; call ctx.heartbeat() in long steps",
        )
    if retryable:
        return (f"Retry with timeout={timeout * 2:g}s", "Break task into smaller subtasks")
    return (
        "Break task into smaller subtasks",
        f"Check the task is feasible: no progress was made in {timeout:g}s",
    )


def _invalid(verdict: Verdict, subject: str | None) -> tuple[str, ...]:
    what = f"'{subject}'" if subject else "the subject"
    if verdict.error_type is ErrorType.NOT_FOUND:
        return (f"Check the identifier: {what} was not found", "Remove it from the task")
    if verdict.error_type is ErrorType.CONTEXT_OVERFLOW:
        return (
            "Split the task into smaller subtasks, or continue from its completed steps "
            "without the transcript (lyra's recovery does either)",
            "Keep tool outputs short; use a model with a larger context window",
        )
    if verdict.blocked_on == EMPTY_PROMPT:  # no task at all: nothing to clarify or split
        return ("Give the task in the prompt: it was empty or only whitespace",)
    if verdict.cause is not None and verdict.cause.kind is Kind.INVALID_INPUT:
        reason = _first_line(verdict.message)
        return (f"Fix the input: {what} was rejected ({reason})", "Remove it from the task")
    return (
        "Clarify task requirements",
        "Break into simpler, well-defined tasks",
        "Provide specific success criteria",
    )


def _tool_error(verdict: Verdict) -> tuple[str, ...]:
    if verdict.error_type is ErrorType.VERIFICATION:  # the caller's verify= raised
        return (
            "Fix the verify= function: it raised instead of judging the output",
            "Run the task again once verify= works (the child's output was not judged)",
        )
    kind = verdict.cause.kind if verdict.cause else None
    if kind is Kind.TRANSIENT:
        wait = verdict.retry_after
        first = (
            f"Retry after at least {wait:g}s (the service asked for it)"
            if wait
            else "Retry with exponential backoff"
        )
        return (first, "Check the service's status if the failure persists")
    if kind is Kind.ENVIRONMENT:
        return _environment(verdict.message)
    if kind is Kind.PERMANENT:
        return (
            "Check credentials, permissions and billing; retrying will not help",
            "Verify the configured model and endpoint",
        )
    return ("Inspect the error and fix the child or its tool before retrying",)


def _environment(message: str) -> tuple[str, ...]:
    module = _MODULE.search(message) or _IMPORT_NAME.search(message)
    if module:
        package = module.group(1).split(".")[0]
        if _SAFE_NAME.fullmatch(package):
            return (f"Install missing dependencies: pip install {package}",)
        return ("Install the missing dependency named in the error",)
    if "PermissionError" in message or "permission denied" in message.lower():
        return ("Check file permissions",)
    command = _COMMAND.search(message)
    if command:
        name = next(group for group in command.groups() if group)
        if _SAFE_NAME.fullmatch(name):
            return (f"Verify command exists: which {name}",)
    if "FileNotFoundError" in message:
        return ("Verify the file or command named in the error exists",)
    return ("Fix the environment named in the error, then retry",)


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else text
