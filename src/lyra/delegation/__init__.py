"""One child, one attempt, inside a delegation tree: limits, progress,
classification, reports."""

from lyra._taxonomy import ErrorType, FailureCategory
from lyra.delegation._budget import Account, Budget, Usage
from lyra.delegation._child import ChildRef, as_callable, child_name
from lyra.delegation._classify import MAX_DEPTH, exception_text
from lyra.delegation._context import Answerer, Child, ChildAgent, ChildContext, ChildFn, Verifier
from lyra.delegation._delegate import foreign_cancellation, new_session_id, run_attempt
from lyra.delegation._foreign import Kind as ErrorKind
from lyra.delegation._foreign import describe as describe_error
from lyra.delegation._foreign import parse_retry_after
from lyra.delegation._limits import DEFAULT_MAX_REPEATS, Limits, check_timeout
from lyra.delegation._live import RunningAttempt, concurrency, observing, running
from lyra.delegation._models import ChildFailure, FailedDelegation, TaskReport
from lyra.delegation._report import HEADER as REPORT_HEADER
from lyra.delegation._report import (
    METADATA_CLOSE,
    escape,
    escape_for_reading,
    extract_blocker,
    extract_category,
    extract_completed_steps,
    extract_files_modified,
    extract_suggested_actions,
    find_reports,
    is_retryable,
    parse_report,
    render_report,
    report_boundary,
)
from lyra.delegation._result import DelegationResult
from lyra.delegation._text import json_safe, printable, safe_str, valid_data, valid_text
from lyra.delegation._tree import Tree

__all__ = [
    "DEFAULT_MAX_REPEATS",
    "MAX_DEPTH",
    "METADATA_CLOSE",
    "REPORT_HEADER",
    "Account",
    "Answerer",
    "Budget",
    "Child",
    "ChildAgent",
    "ChildContext",
    "ChildFailure",
    "ChildFn",
    "ChildRef",
    "DelegationResult",
    "ErrorKind",
    "ErrorType",
    "FailedDelegation",
    "FailureCategory",
    "Limits",
    "RunningAttempt",
    "TaskReport",
    "Tree",
    "Usage",
    "Verifier",
    "as_callable",
    "check_timeout",
    "child_name",
    "concurrency",
    "describe_error",
    "escape",
    "escape_for_reading",
    "exception_text",
    "extract_blocker",
    "extract_category",
    "extract_completed_steps",
    "extract_files_modified",
    "extract_suggested_actions",
    "find_reports",
    "foreign_cancellation",
    "is_retryable",
    "json_safe",
    "new_session_id",
    "observing",
    "parse_report",
    "parse_retry_after",
    "printable",
    "render_report",
    "report_boundary",
    "run_attempt",
    "running",
    "safe_str",
    "valid_data",
    "valid_text",
]
