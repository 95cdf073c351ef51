"""lyra: a supervisor that delegates work to child agents under deadlines.

Every child failure is classified (timeout, missing_context, tool_error,
invalid_task, partial), rendered as a report ending in ``<task_metadata>``
tags, and handed to recovery strategies.
"""

from lyra._api import adelegate_task, delegate_task
from lyra.delegation import (
    Budget,
    ChildContext,
    ChildFailure,
    ChildRef,
    DelegationResult,
    ErrorType,
    FailedDelegation,
    FailureCategory,
    TaskReport,
    Usage,
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
from lyra.errors import ConfigurationError
from lyra.recovery import RecoveryPolicy, adelegate_with_retry, delegate_with_retry
from lyra.supervisor import Supervisor, Task

__version__ = "0.1.0"

__all__ = [
    "Budget",
    "ChildContext",
    "ChildFailure",
    "ChildRef",
    "ConfigurationError",
    "DelegationResult",
    "ErrorType",
    "FailedDelegation",
    "FailureCategory",
    "RecoveryPolicy",
    "Supervisor",
    "Task",
    "TaskReport",
    "Usage",
    "adelegate_task",
    "adelegate_with_retry",
    "delegate_task",
    "delegate_with_retry",
    "extract_blocker",
    "extract_category",
    "extract_completed_steps",
    "extract_files_modified",
    "extract_suggested_actions",
    "find_reports",
    "is_retryable",
    "parse_report",
    "render_report",
]
