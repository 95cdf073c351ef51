"""Rendering: a :class:`TaskReport` as the text of DESIGN §4.

The layout is written here, in plain Python, from the pieces :mod:`._syntax`
names (:mod:`._layout` reads it back in one match): a report is rendered for
every delegation, in between a child's own work, where a template engine's
code would cost more than the report. Every value is escaped first, and free
text continues on indented lines, so nothing a child wrote can forge a
section, a tag or another report.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any

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


def _tags(tags: dict[str, str]) -> tuple[tuple[str, str, str], ...]:
    """(field, opening, closing) of each tag: written out once, not per report."""
    return tuple((field, f"  <{tag}>", f"</{tag}>\n") for tag, field in tags.items())


_FAILURE_TAGS = _tags(FAILURE_TAGS | COMMON_TAGS | USAGE_TAGS)
_COMMON_TAGS = _tags(COMMON_TAGS | USAGE_TAGS)


def render_report(report: TaskReport) -> str:
    """Render a report in the text format of DESIGN §4."""
    return render_fields(report.__dict__)


def render_fields(fields: Mapping[str, Any]) -> str:
    """:func:`render_report` of the report whose field values ``fields`` holds (by
    :class:`TaskReport`'s field names): a delegation's result renders its report
    without building the model first."""
    failed = fields["status"] == "failed"
    body = _failure(fields) if failed else f"{escape(fields['output'] or '')}\n"
    return f"{body}\n{OPEN}\n{_metadata(fields, failed)}{CLOSE}"


def _failure(fields: Mapping[str, Any]) -> str:
    """The sections above a failure's metadata block."""
    return (
        f"{HEADER} {indented(fields['message'] or '')}\n"
        "\n"
        f"Category: {fields['category'] or ''}\n"
        f"Duration: {fields['duration'] or 0.0:.1f}s\n"
        + _sections(
            bool(fields["retryable"]),
            tuple(fields["completed_steps"]),  # (a tuple already: the same one)
            tuple(fields["files_modified"]),
            fields["blocked_on"],
            tuple(fields["suggested_actions"]),
        )
    )


@lru_cache(maxsize=64)
def _sections(
    retryable: bool,
    steps: tuple[str, ...],
    files: tuple[str, ...],
    blocked_on: str | None,
    actions: tuple[str, ...],
) -> str:
    """A failure's sections after its duration: made once for the many children that
    fail alike together (a fan-out past one deadline)."""
    done = "".join([f"{STEP[1:]}{indented(step)}\n" for step in steps])
    suggested = "".join([f"{ACTION[1:]}{indented(action)}\n" for action in actions])
    blocked = "" if blocked_on is None else f"\nBlocked on: {indented(blocked_on)}\n"
    return (
        f"Retryable: {'Yes' if retryable else 'No'}\n"
        "\n"
        f"Work completed before failure:\n{done or NO_ITEMS}"
        "\n"
        f"Files modified: {file_list(files)}\n"
        f"{blocked}"
        "\n"
        f"Suggested recovery actions:\n{suggested or NO_ITEMS}"
    )


def _metadata(fields: Mapping[str, Any], failed: bool) -> str:
    """The metadata block's tag lines (a number needs no escaping); a tag whose field
    is missing from ``fields`` or ``None`` is not written."""
    parts = [f"  <session_id>{escape(fields['session_id'] or '')}</session_id>\n"]
    if failed:
        parts.append(
            "  <status>failed</status>\n"
            f"  <failure_category>{escape(fields['category'] or '')}</failure_category>\n"
            f"  <retryable>{'true' if fields['retryable'] else 'false'}</retryable>\n"
        )
    else:
        parts.append(f"  <status>{escape(fields['status'])}</status>\n")
    for field, opening, closing in _FAILURE_TAGS if failed else _COMMON_TAGS:
        value = fields.get(field)
        if value is None:  # (most are: a report writes only what happened)
            continue
        if isinstance(value, str):
            parts.append(f"{opening}{escape(value)}{closing}")
        else:
            shown = repr(value)
            if "e" in shown:  # 4e-05 written out (0.00004), the same digits: exact
                shown = format(Decimal(shown), "f")
            parts.append(f"{opening}{shown}{closing}")
    for sub in fields["failed_delegations"]:
        parts.append(_tag(FAILED_DELEGATION, f"{sub.session_id} {sub.category} {sub.error_type}"))
    for passed in fields["fallbacks"]:
        parts.append(_tag(FALLBACK, passed))
    return "".join(parts)


def _tag(tag: str, value: str) -> str:
    return f"  <{tag}>{escape(value)}</{tag}>\n"
