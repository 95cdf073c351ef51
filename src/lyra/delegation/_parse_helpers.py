"""The recovery guide's one-field helpers, on top of the one real parser.

Each takes report text (or a transcript ending in one) and never raises: text
without a report gives ``None``, ``False`` or an empty list.
"""

from __future__ import annotations

from lyra._taxonomy import FailureCategory
from lyra.delegation._models import TaskReport
from lyra.delegation._report import parse_report
from lyra.errors import ReportParseError


def _failed(text: str) -> TaskReport | None:
    try:
        report = parse_report(text)
    except ReportParseError:
        return None
    return report if report.status == "failed" else None


def extract_category(text: str) -> FailureCategory | None:
    """The failure category of the last report, or ``None`` for a success or no report."""
    report = _failed(text)
    return report.category if report else None


def is_retryable(text: str) -> bool:
    """True when the last report is a failure marked retryable."""
    report = _failed(text)
    return bool(report and report.retryable)


def extract_completed_steps(text: str) -> list[str]:
    """The steps the child completed before it failed."""
    report = _failed(text)
    return list(report.completed_steps) if report else []


def extract_files_modified(text: str) -> list[str]:
    """The files the child modified before it failed."""
    report = _failed(text)
    return list(report.files_modified) if report else []


def extract_blocker(text: str) -> str | None:
    """What blocked the child, or ``None``."""
    report = _failed(text)
    return report.blocked_on if report else None


def extract_suggested_actions(text: str) -> list[str]:
    """The suggested recovery actions (text for a human; never executed)."""
    report = _failed(text)
    return list(report.suggested_actions) if report else []
