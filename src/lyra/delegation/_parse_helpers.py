"""The recovery guide's one-field helpers, reading the format the one real parser reads.

Each takes report text (or a transcript ending in one), reads the last report
as :func:`~lyra.delegation.parse_report` does and gives its field, and never
raises: a success or no report gives ``None``, ``False`` or an empty list, and
so does a report :func:`~lyra.delegation.parse_report` rejects, unless it is
in lyra's own layout, where a helper checks only the value it reads. Called
one after another on the same text, as a recovery loop does, they share one
reading of it.
"""

from __future__ import annotations

from lyra._taxonomy import FailureCategory
from lyra.delegation import _report


def extract_category(text: str) -> FailureCategory | None:
    """The failure category of the last report, or ``None`` for a success or no report."""
    return _report.read_category(text) if isinstance(text, str) else None


def is_retryable(text: str) -> bool:
    """True when the last report is a failure marked retryable."""
    return _report.read_retryable(text) if isinstance(text, str) else False


def extract_completed_steps(text: str) -> list[str]:
    """The steps the child completed before it failed."""
    return list(_report.read_steps(text)) if isinstance(text, str) else []


def extract_files_modified(text: str) -> list[str]:
    """The files the child modified before it failed."""
    return list(_report.read_files(text)) if isinstance(text, str) else []


def extract_blocker(text: str) -> str | None:
    """What blocked the child, or ``None``."""
    return _report.read_blocker(text) if isinstance(text, str) else None


def extract_suggested_actions(text: str) -> list[str]:
    """The suggested recovery actions (text for a human; never executed)."""
    return list(_report.read_actions(text)) if isinstance(text, str) else []
