"""One child, one attempt: deadline, progress tracking, classification, reports."""

from lyra.delegation._child import Child, ChildAgent, ChildFn, as_callable, default_child
from lyra.delegation._classify import exception_text
from lyra.delegation._context import ChildContext
from lyra.delegation._delegate import build_result, check_timeout, new_session_id, run_attempt
from lyra.delegation._foreign import Kind as ErrorKind
from lyra.delegation._foreign import describe as describe_error
from lyra.delegation._foreign import parse_retry_after
from lyra.delegation._models import (
    ChildFailure,
    DelegationResult,
    ErrorType,
    FailureCategory,
    TaskReport,
)
from lyra.delegation._parse_helpers import (
    extract_blocker,
    extract_category,
    extract_completed_steps,
    extract_files_modified,
    extract_suggested_actions,
    is_retryable,
)
from lyra.delegation._report import HEADER as REPORT_HEADER
from lyra.delegation._report import (
    METADATA_CLOSE,
    escape,
    find_reports,
    parse_report,
    render_report,
)

__all__ = [
    "METADATA_CLOSE",
    "REPORT_HEADER",
    "Child",
    "ChildAgent",
    "ChildContext",
    "ChildFailure",
    "ChildFn",
    "DelegationResult",
    "ErrorKind",
    "ErrorType",
    "FailureCategory",
    "TaskReport",
    "as_callable",
    "build_result",
    "check_timeout",
    "default_child",
    "describe_error",
    "escape",
    "exception_text",
    "extract_blocker",
    "extract_category",
    "extract_completed_steps",
    "extract_files_modified",
    "extract_suggested_actions",
    "find_reports",
    "is_retryable",
    "new_session_id",
    "parse_report",
    "parse_retry_after",
    "render_report",
    "run_attempt",
]
