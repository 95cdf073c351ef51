"""One child, one attempt, inside a delegation tree: limits, progress,
classification, reports.

What a user writes a child with (:class:`ChildContext`, :class:`Limits`,
:class:`Budget`…), what an attempt gives back (:class:`DelegationResult`,
:class:`ChildFailure`), the report format and its readers, the live view of
running attempts, and the text helpers a child needs for untrusted text. What
lyra's other packages use besides is in :mod:`lyra.delegation._internal`.
"""

from lyra._taxonomy import ErrorType, FailureCategory
from lyra._text import json_safe, safe_str, valid_data, valid_text
from lyra.delegation._budget import Budget, Usage
from lyra.delegation._child import ChildRef
from lyra.delegation._classify import MAX_DEPTH, exception_text
from lyra.delegation._context import Answerer, Child, ChildAgent, ChildContext, ChildFn, Verifier
from lyra.delegation._foreign import parse_retry_after
from lyra.delegation._limits import Limits
from lyra.delegation._live import RunningAttempt, concurrency, observing, running
from lyra.delegation._models import ChildFailure, FailedDelegation, TaskReport
from lyra.delegation._report import (
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
)
from lyra.delegation._result import DelegationResult

__all__ = [
    "MAX_DEPTH",
    "Answerer",
    "Budget",
    "Child",
    "ChildAgent",
    "ChildContext",
    "ChildFailure",
    "ChildFn",
    "ChildRef",
    "DelegationResult",
    "ErrorType",
    "FailedDelegation",
    "FailureCategory",
    "Limits",
    "RunningAttempt",
    "TaskReport",
    "Usage",
    "Verifier",
    "concurrency",
    "escape",
    "escape_for_reading",
    "exception_text",
    "extract_blocker",
    "extract_category",
    "extract_completed_steps",
    "extract_files_modified",
    "extract_suggested_actions",
    "find_reports",
    "is_retryable",
    "json_safe",
    "observing",
    "parse_report",
    "parse_retry_after",
    "render_report",
    "running",
    "safe_str",
    "valid_data",
    "valid_text",
]
