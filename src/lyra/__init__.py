"""lyra: a supervisor that delegates work to child agents under deadlines.

Every child failure is classified (timeout, missing_context, tool_error,
invalid_task, partial), rendered as a report ending in ``<task_metadata>``
tags, and handed to recovery strategies.

The public names below are imported on first use, so ``import lyra`` (and the
``lyra`` command's start-up) stays fast; ``from lyra import X`` works as usual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
        Limits,
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

__version__ = "0.2.0"

_HOMES = {
    "lyra._api": ("adelegate_task", "delegate_task"),
    "lyra.delegation": (
        "Budget",
        "ChildContext",
        "ChildFailure",
        "ChildRef",
        "DelegationResult",
        "ErrorType",
        "FailedDelegation",
        "FailureCategory",
        "Limits",
        "TaskReport",
        "Usage",
        "extract_blocker",
        "extract_category",
        "extract_completed_steps",
        "extract_files_modified",
        "extract_suggested_actions",
        "find_reports",
        "is_retryable",
        "parse_report",
        "render_report",
    ),
    "lyra.errors": ("ConfigurationError",),
    "lyra.recovery": ("RecoveryPolicy", "adelegate_with_retry", "delegate_with_retry"),
    "lyra.supervisor": ("Supervisor", "Task"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

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
    "Limits",
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


def __getattr__(name: str) -> Any:
    home = _HOME_OF.get(name)
    if home is None:
        raise AttributeError(f"module 'lyra' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # found once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
