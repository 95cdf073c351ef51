"""Rendering: a :class:`TaskReport` as the text of DESIGN §4.

The layout is the template's (``templates/report.txt.j2``); every value it
receives is escaped here first, and free text continues on indented lines, so
nothing a child wrote can forge a section, a tag or another report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lyra.delegation._models import TaskReport
from lyra.delegation._report._syntax import (
    COMMON_TAGS,
    FAILED_DELEGATION,
    FAILURE_TAGS,
    USAGE_TAGS,
    escape,
    file_list,
    indented,
)
from lyra.templates import LYRA

_FAILURE_TAGS = (FAILURE_TAGS | COMMON_TAGS | USAGE_TAGS).items()
_COMMON_TAGS = (COMMON_TAGS | USAGE_TAGS).items()


@dataclass(frozen=True, slots=True)
class _View:
    """A report with every value escaped, as the template sees it."""

    status: str
    output: str
    message: str
    category: str
    duration_text: str
    retryable: bool
    completed_steps: list[str]
    files_modified: str
    blocked_on: str | None
    suggested_actions: list[str]
    metadata: list[tuple[str, str]]


def render_report(report: TaskReport) -> str:
    """Render a report in the text format of DESIGN §4."""
    failed = report.status == "failed"
    view = _View(
        status=report.status,
        output=escape(report.output or ""),
        message=indented(report.message or ""),
        category=str(report.category or ""),
        duration_text=f"{report.duration or 0.0:.1f}",
        retryable=bool(report.retryable),
        completed_steps=[indented(step) for step in report.completed_steps],
        files_modified=file_list(report.files_modified),
        blocked_on=None if report.blocked_on is None else indented(report.blocked_on),
        suggested_actions=[indented(action) for action in report.suggested_actions],
        metadata=_metadata(report, failed),
    )
    return LYRA.get("report.txt.j2").render(r=view)


def _metadata(report: TaskReport, failed: bool) -> list[tuple[str, str]]:
    tags: list[tuple[str, Any]] = [
        ("session_id", report.session_id or ""),
        ("status", report.status),
    ]
    if failed:
        tags += [
            ("failure_category", report.category or ""),
            ("retryable", "true" if report.retryable else "false"),
        ]
    fields = report.__dict__
    for tag, field in _FAILURE_TAGS if failed else _COMMON_TAGS:
        value = fields[field]
        if value is not None:
            tags.append((tag, repr(value) if isinstance(value, float) else value))
    for sub in report.failed_delegations:
        tags.append((FAILED_DELEGATION, f"{sub.session_id} {sub.category} {sub.error_type}"))
    return [(tag, escape(str(value))) for tag, value in tags]
