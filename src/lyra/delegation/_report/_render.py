"""Rendering: a :class:`TaskReport` as the text of DESIGN §4.

The layout is written here, in plain Python, from the pieces :mod:`._syntax`
names (:mod:`._layout` reads it back in one match): a report is rendered for
every delegation, in between a child's own work, where a template engine's
code would cost more than the report. Every value is escaped first, and free
text continues on indented lines, so nothing a child wrote can forge a
section, a tag or another report.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from decimal import Decimal
from functools import lru_cache
from typing import Any

from lyra.delegation._models import FailedDelegation, TaskReport
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


def _tags(tags: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """(opening, closing) of each tag: written out once, not per report."""
    return tuple((f"  <{tag}>", f"</{tag}>\n") for tag in tags)


_FAILURE_TAGS = _tags(FAILURE_TAGS)
_FAILURE_REST = _FAILURE_TAGS[1:]  # (after the error type)
_NO_REST = (None,) * len(_FAILURE_REST)
(_ATTEMPT, _DURATION, _SUBJECT) = _tags(COMMON_TAGS)  # (in this order)
_USAGE_TAGS = _tags(USAGE_TAGS)
_FAILURE_FIELDS = tuple(FAILURE_TAGS.values())
_USAGE_FIELDS = tuple(USAGE_TAGS.values())
NO_USAGE: tuple[None, ...] = (None,) * len(_USAGE_FIELDS)
"""The usage values of a report that has none (most reports)."""


def render_report(report: TaskReport) -> str:
    """Render a report in the text format of DESIGN §4 (a tag whose field is ``None``
    is not written)."""
    if report.status == "failed":
        category, retryable = report.category or "", bool(report.retryable)
        body = failure_sections(
            report.message or "",
            category,
            tenths(report.duration),
            retryable,
            tuple(report.completed_steps),  # (a tuple already, unless made unvalidated)
            tuple(report.files_modified),
            report.blocked_on,
            tuple(report.suggested_actions),
        )
        status = failure_tags(category, retryable, _values(report, _FAILURE_FIELDS))
    else:
        body, status = success_body(report.output or ""), status_tag(report.status)
    return compose(
        body,
        report.session_id,
        status,
        report.attempt,
        report.duration,
        report.subject,
        _values(report, _USAGE_FIELDS),
        report.failed_delegations,
        report.fallbacks,
    )


def _values(report: TaskReport, fields: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(map(report.__dict__.__getitem__, fields))


def success_body(output: str) -> str:
    """A success's text above its metadata block."""
    return f"{escape(output)}\n"


def status_tag(status: str) -> str:
    """The ``<status>`` line of a report that did not fail."""
    return f"  <status>{escape(status)}</status>\n"


def tenths(duration: float | None) -> str:
    """A failure's ``Duration:``, to a tenth of a second."""
    return f"{duration or 0.0:.1f}"


@lru_cache(maxsize=256)
def failure_sections(
    message: str,
    category: str,
    duration: str,
    retryable: bool,
    steps: tuple[str, ...],
    files: tuple[str, ...],
    blocked_on: str | None,
    actions: tuple[str, ...],
) -> str:
    """A failure's text above its metadata block (``duration``: :func:`tenths`), made
    once for the many children that fail alike together (a fan-out past one deadline:
    the same message, the same duration to a tenth of a second)."""
    done = "".join([f"{STEP[1:]}{indented(step)}\n" for step in steps])
    suggested = "".join([f"{ACTION[1:]}{indented(action)}\n" for action in actions])
    blocked = "" if blocked_on is None else f"\nBlocked on: {indented(blocked_on)}\n"
    return (
        f"{HEADER} {indented(message)}\n"
        "\n"
        f"Category: {category}\n"
        f"Duration: {duration}s\n"
        f"Retryable: {'Yes' if retryable else 'No'}\n"
        "\n"
        f"Work completed before failure:\n{done or NO_ITEMS}"
        "\n"
        f"Files modified: {file_list(files)}\n"
        f"{blocked}"
        "\n"
        f"Suggested recovery actions:\n{suggested or NO_ITEMS}"
    )


def failure_tags(category: str, retryable: bool, values: tuple[Any, ...]) -> str:
    """A failure's metadata lines after its session's (``values``: those of
    ``FAILURE_TAGS``, its error type first)."""
    head = _failure_head(category, retryable, values[0])
    rest = values[1:]
    return head if rest == _NO_REST else head + _tag_lines(_FAILURE_REST, rest)


@lru_cache(maxsize=256)
def _failure_head(category: str, retryable: bool, error_type: str | None) -> str:
    """Made once for failures alike (never a number: ``1`` and ``1.0`` share a key)."""
    return (
        "  <status>failed</status>\n"
        f"  <failure_category>{escape(category)}</failure_category>\n"
        f"  <retryable>{'true' if retryable else 'false'}</retryable>\n"
        + _tag_lines(_FAILURE_TAGS[:1], (error_type,))  # (once per key)
    )


def compose(
    body: str,
    session_id: str | None,
    status: str,
    attempt: int | None,
    duration: float | None,
    subject: str | None,
    usage: tuple[Any, ...],
    failed_delegations: Collection[FailedDelegation],
    fallbacks: Collection[str],
) -> str:
    """The report: ``body``, then its metadata block (``status``: the lines after the
    session's; ``usage``: the values of ``USAGE_TAGS``, in order)."""
    tags = "" if attempt is None else f"{_ATTEMPT[0]}{_shown(attempt)}{_ATTEMPT[1]}"
    if duration is not None:
        tags += f"{_DURATION[0]}{_number(duration)}{_DURATION[1]}"
    if subject is not None:
        tags += f"{_SUBJECT[0]}{escape(subject)}{_SUBJECT[1]}"
    if usage != NO_USAGE:  # (most reports: none of them)
        tags += _tag_lines(_USAGE_TAGS, usage)
    if failed_delegations or fallbacks:
        tags += "".join(
            [
                _tag(FAILED_DELEGATION, f"{sub.session_id} {sub.category} {sub.error_type}")
                for sub in failed_delegations
            ]
            + [_tag(FALLBACK, passed) for passed in fallbacks]
        )
    session = escape(session_id or "")
    return f"{body}\n{OPEN}\n  <session_id>{session}</session_id>\n{status}{tags}{CLOSE}"


def _tag_lines(tags: tuple[tuple[str, str], ...], values: Sequence[Any]) -> str:
    """The line of each tag whose value is not ``None`` (a number needs no escaping)."""
    lines = []
    for (opening, closing), value in zip(tags, values, strict=True):
        if value is None:  # (most are: a report writes only what happened)
            continue
        lines.append(f"{opening}{_shown(value)}{closing}")
    return "".join(lines)


def _shown(value: Any) -> str:
    """A tag's value: text escaped, a number as :func:`_number` writes it."""
    return escape(value) if isinstance(value, str) else _number(value)


def _number(value: float) -> str:
    """A number as the report writes it: every digit of its ``repr``, never in
    scientific notation (4e-05 is written 0.00004: the same digits, exact)."""
    shown = repr(value)
    return format(Decimal(shown), "f") if "e" in shown else shown


def _tag(tag: str, value: str) -> str:
    return f"  <{tag}>{escape(value)}</{tag}>\n"
