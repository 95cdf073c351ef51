"""lyra: a supervisor that delegates work to child agents under deadlines.

Every child failure is classified (timeout, missing_context, tool_error,
invalid_task, partial), rendered as a report ending in ``<task_metadata>``
tags, and handed to recovery strategies.

The public names below are imported on first use, so ``import lyra`` (and the
``lyra`` command's start-up) stays fast; ``from lyra import X`` works as usual.
"""

from __future__ import annotations

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
"""Where each public name lives: ``lyra.X`` is imported from there on first use, and
``__all__`` is made from it. Type checkers read the same names from the imports
below (a test holds the two equal)."""

__all__ = sorted(name for names in _HOMES.values() for name in names)

# typing.TYPE_CHECKING without importing typing (most of what `import lyra` would
# cost): type checkers take a constant of this name as True.
TYPE_CHECKING = False
if TYPE_CHECKING:  # one statement a home, as in _HOMES (a test reads them)
    from lyra._api import (  # noqa: I001 - `X as X`: an explicit re-export
        adelegate_task as adelegate_task,
        delegate_task as delegate_task,
    )
    from lyra.delegation import (
        Budget as Budget,
        ChildContext as ChildContext,
        ChildFailure as ChildFailure,
        ChildRef as ChildRef,
        DelegationResult as DelegationResult,
        ErrorType as ErrorType,
        FailedDelegation as FailedDelegation,
        FailureCategory as FailureCategory,
        Limits as Limits,
        TaskReport as TaskReport,
        Usage as Usage,
        extract_blocker as extract_blocker,
        extract_category as extract_category,
        extract_completed_steps as extract_completed_steps,
        extract_files_modified as extract_files_modified,
        extract_suggested_actions as extract_suggested_actions,
        find_reports as find_reports,
        is_retryable as is_retryable,
        parse_report as parse_report,
        render_report as render_report,
    )
    from lyra.errors import (
        ConfigurationError as ConfigurationError,
    )
    from lyra.recovery import (
        RecoveryPolicy as RecoveryPolicy,
        adelegate_with_retry as adelegate_with_retry,
        delegate_with_retry as delegate_with_retry,
    )
    from lyra.supervisor import (
        Supervisor as Supervisor,
        Task as Task,
    )
else:  # hidden from type checkers, so that a misspelt name is an error there
    _HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

    def __getattr__(name: str) -> object:
        home = _HOME_OF.get(name)
        if home is None:
            raise AttributeError(f"module 'lyra' has no attribute {name!r}")
        from importlib import import_module

        value = getattr(import_module(home), name)
        globals()[name] = value  # found once: later lookups are plain attribute reads
        return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
