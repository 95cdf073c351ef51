"""The names of the failure taxonomy (DESIGN §3), on the ground floor so that
errors, delegation and logs all share them without importing one another."""

from __future__ import annotations

from enum import StrEnum


class FailureCategory(StrEnum):
    """The five categories every child failure falls into (DESIGN §3)."""

    TIMEOUT = "timeout"
    MISSING_CONTEXT = "missing_context"
    TOOL_ERROR = "tool_error"
    INVALID_TASK = "invalid_task"
    PARTIAL = "partial"


class ErrorType(StrEnum):
    """The fine cause behind a category, for statistics, backoff and recovery."""

    TIMEOUT = "timeout"
    """The total deadline passed (or a service timed out)."""
    IDLE = "idle"
    """No progress for ``idle_timeout`` seconds."""
    BUDGET = "budget"
    """The delegation tree's token, cost or turn budget ran out."""
    LOOP = "loop"
    """The same tool call repeated past ``max_repeats``: not progress."""
    CONNECTION = "connection"
    RATE_LIMIT = "rate_limit"
    NOT_FOUND = "not_found"
    AUTH = "auth"
    DATA = "data"
    CONTEXT_OVERFLOW = "context_overflow"
    """The prompt is longer than the model's context window."""
    VERIFICATION = "verification"
    """The caller's ``verify=`` rejected the output the child called done."""
    INPUT_REQUIRED = "input_required"
    """The child asked a question (``ctx.ask``) that nobody answered."""
    ENVIRONMENT = "environment"
    """Something the child needs is missing where it runs (rule 7): a module, a file, a
    permission, a command."""
    UNKNOWN = "unknown"
