"""The recovery guide's one-field helpers, reading the format the one real parser reads.

Each takes report text (or a transcript ending in one) and never raises: text
without a failure report gives ``None``, ``False`` or an empty list. Each
reads only its own field, by the rules :func:`~lyra.delegation.parse_report`
follows, so it costs no more than the guide's regex for it; a report whose
other fields are malformed still gives this one.
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
    return list(_report.read_list(text, "completed_steps")) if isinstance(text, str) else []


def extract_files_modified(text: str) -> list[str]:
    """The files the child modified before it failed."""
    return list(_report.read_files(text)) if isinstance(text, str) else []


def extract_blocker(text: str) -> str | None:
    """What blocked the child, or ``None``."""
    return _report.read_blocker(text) if isinstance(text, str) else None


def extract_suggested_actions(text: str) -> list[str]:
    """The suggested recovery actions (text for a human; never executed)."""
    return list(_report.read_list(text, "suggested_actions")) if isinstance(text, str) else []
