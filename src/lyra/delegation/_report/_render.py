"""Rendering: a :class:`TaskReport` as the text of DESIGN §4.

The layout is written here, in plain Python, from the pieces :mod:`._syntax`
names (:mod:`._layout` reads it back in one match): a report is rendered for
every delegation, in between a child's own work, where a template engine's
code would cost more than the report. Every value is escaped first, and free
text continues on indented lines, so nothing a child wrote can forge a
section, a tag or another report.
"""

from __future__ import annotations

from lyra.delegation._models import TaskReport
from lyra.delegation._report._syntax import (
    ACTION,
    CLOSE,
    COMMON_TAGS,
    FAILED_DELEGATION,
    FAILURE_TAGS,
    FALLBACK,
    HEADER,
    NO_ITEMS,
    OPEN,
    STEP,
    USAGE_TAGS,
    escape,
    file_list,
    indented,
)

_FAILURE_TAGS = (FAILURE_TAGS | COMMON_TAGS | USAGE_TAGS).items()
_COMMON_TAGS = (COMMON_TAGS | USAGE_TAGS).items()


def render_report(report: TaskReport) -> str:
    """Render a report in the text format of DESIGN §4."""
    failed = report.status == "failed"
    body = _failure(report) if failed else f"{escape(report.output or '')}\n"
    return f"{body}\n{OPEN}\n{_metadata(report, failed)}{CLOSE}"


def _failure(report: TaskReport) -> str:
    """The sections above a failure's metadata block."""
    steps = "".join(f"{STEP[1:]}{indented(step)}\n" for step in report.completed_steps)
    actions = "".join(f"{ACTION[1:]}{indented(a)}\n" for a in report.suggested_actions)
    blocked = "" if report.blocked_on is None else f"\nBlocked on: {indented(report.blocked_on)}\n"
    return (
        f"{HEADER} {indented(report.message or '')}\n"
        "\n"
        f"Category: {report.category or ''}\n"
        f"Duration: {report.duration or 0.0:.1f}s\n"
        f"Retryable: {'Yes' if report.retryable else 'No'}\n"
        "\n"
        f"Work completed before failure:\n{steps or NO_ITEMS}"
        "\n"
        f"Files modified: {file_list(report.files_modified)}\n"
        f"{blocked}"
        "\n"
        f"Suggested recovery actions:\n{actions or NO_ITEMS}"
    )


def _metadata(report: TaskReport, failed: bool) -> str:
    """The metadata block's tag lines."""
    lines = [_tag("session_id", report.session_id or ""), _tag("status", report.status)]
    if failed:
        lines.append(_tag("failure_category", report.category or ""))
        lines.append(_tag("retryable", "true" if report.retryable else "false"))
    fields = report.__dict__
    for tag, field in _FAILURE_TAGS if failed else _COMMON_TAGS:
        value = fields[field]
        if isinstance(value, str):
            lines.append(_tag(tag, value))
        elif value is not None:  # a number: nothing to escape
            lines.append(f"  <{tag}>{value!r}</{tag}>\n")
    for sub in report.failed_delegations:
        lines.append(_tag(FAILED_DELEGATION, f"{sub.session_id} {sub.category} {sub.error_type}"))
    for passed in report.fallbacks:
        lines.append(_tag(FALLBACK, passed))
    return "".join(lines)


def _tag(tag: str, value: str) -> str:
    return f"  <{tag}>{escape(value)}</{tag}>\n"
