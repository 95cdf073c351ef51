"""lyra's own layout, read in one regex match: the fast path of every reader.

The regexes below spell the exact layout the template renders (the body of
``templates/report.txt.j2``, and the metadata tags in :mod:`._syntax`'s
order); a report in that layout, the common case, is read by one match.
Anything else takes the general reader (:mod:`._parse`), which reads the same
fields from the same text. The match never reaches across a closing tag: it
starts at a header inside the region. A metadata value with an entity in it
sends the block to the general reader.
"""

from __future__ import annotations

import re
from typing import Any

from lyra.delegation._models import TaskReport
from lyra.delegation._report import _capybara as capybara
from lyra.delegation._report._blocks import last_header, output, region_before
from lyra.delegation._report._syntax import (
    CLOSE,
    COMMON_TAGS,
    FAILED_DELEGATION,
    FAILURE_TAGS,
    HEADER,
    LINE_HEADER,
    OPEN,
    TAG,
    files,
    unindented,
)
from lyra.delegation._report._values import (
    CATEGORIES,
    DEFAULTS,
    ERROR_TYPES,
    built,
    failed_delegation,
    to_float,
)
from lyra.errors import ReportParseError

_BODY = (
    r"Child agent failed: (?P<message>[^\n]*(?:\n    [^\n]*)*)\n"
    r"\nCategory: (?P<body_category>[^\n]*)\n"
    r"Duration: (?P<body_duration>[^\n]*)s\n"
    r"Retryable: (?P<body_retryable>Yes|No)\n"
    r"\nWork completed before failure:\n"
    r"(?P<steps>  None\n|(?:  ✓ [^\n]*\n(?:    [^\n]*\n)*)+)"
    r"\nFiles modified: (?P<files>[^\n]*)\n"
    r"(?:\nBlocked on: (?P<blocked>[^\n]*(?:\n    [^\n]*)*)\n|)"
    r"\nSuggested recovery actions:\n(?P<actions>  None\n|(?:  • [^\n]*\n(?:    [^\n]*\n)*)+)"
)


def _optional(tags: dict[str, str]) -> str:
    # "(?:x|)" rather than "(?:x)?": a branch costs the regex engine less than a repeat.
    return "".join(rf"(?:\n  <{tag}>(?P<{tag}>[^<&]*)</{tag}>|)" for tag in tags)


_BLOCK_START = r"<task_metadata>\n  <session_id>(?P<session_id>[^<&]*)</session_id>\n  <status>"
_BLOCK_END = (
    rf"(?P<{FAILED_DELEGATION}>(?:\n  <{FAILED_DELEGATION}>[^<&]*</{FAILED_DELEGATION}>)*)"
    r"\n</task_metadata>"
)
_RENDERED = re.compile(_BODY + r"\n?\Z")  # a body alone
RENDERED_FAILURE = re.compile(
    _BODY + r"\n?" + _BLOCK_START + r"failed</status>"
    r"\n  <failure_category>(?P<failure_category>[^<&]*)</failure_category>"
    r"\n  <retryable>(?P<retryable>true|false)</retryable>"
    + _optional(FAILURE_TAGS)
    + _optional(COMMON_TAGS)
    + _BLOCK_END
)
"""A failure report, from its header to the end of its metadata."""
_RENDERED_SUCCESS = re.compile(
    _BLOCK_START + r"completed</status>" + _optional(COMMON_TAGS) + _BLOCK_END
)
STEP, ACTION = "\n  ✓ ", "\n  • "
"""Between two items of a list in the rendered layout."""


def quick_match(text: str) -> re.Match[str] | None:
    """The last report matched whole in the rendered layout, when it is lyra's own
    and only plain text follows it: :data:`RENDERED_FAILURE` from its header, or
    the success pattern from its block. ``None`` when it is not so.

    It finds what :func:`._blocks.last_block` and :func:`._blocks.last_header`
    would, with fewer scans of the text. A whole match leaves no room for
    another header line after the one it starts at; no closing tag of either
    kind may lie in the body it reads, nor a capybara-vibe one after it.
    """
    closing = text.rfind(CLOSE)
    if closing < 0 or text.find(capybara.CLOSE, closing) >= 0:
        return None
    end = closing + len(CLOSE)
    if text.find(HEADER, end) >= 0:
        return None  # a report without metadata may follow: the general reader looks
    failure = RENDERED_FAILURE.fullmatch(text, 0, end) if text.startswith(HEADER) else None
    if failure is None and (at := text.rfind(LINE_HEADER, 0, closing) + 1):
        failure = RENDERED_FAILURE.fullmatch(text, at, end)
    if failure is not None and _no_closing_tag(text, failure.start(), failure.end("actions")):
        return failure
    opening = text.rfind(OPEN, 0, closing)
    return _RENDERED_SUCCESS.fullmatch(text, opening, end) if opening >= 0 else None


def _no_closing_tag(text: str, start: int, end: int) -> bool:
    if text.find("</", start, end) < 0:  # one look settles it for a body lyra wrote
        return True
    return text.find(CLOSE, start, end) < 0 and text.find(capybara.CLOSE, start, end) < 0


def quick_report(text: str) -> TaskReport | None:
    """``parse_report``'s fast path (see :func:`quick_match`)."""
    match = quick_match(text)
    if match is None:
        return None
    if match.re is RENDERED_FAILURE:
        return _failure_report(match)
    opening = match.start()
    return _success_report(match, output(text, region_before(text, opening), opening, False))


def rendered(text: str, start: int, opening: int, closing: int) -> TaskReport | None:
    """The report of one region and lyra block in the rendered layout, else ``None``."""
    end = closing + len(CLOSE)
    at = last_header(text, start, opening)
    failure = None if at is None else RENDERED_FAILURE.fullmatch(text, at, end)
    if failure is not None:
        return _failure_report(failure)
    success = _RENDERED_SUCCESS.fullmatch(text, opening, end)
    if success is None:
        return None
    return _success_report(success, output(text, start, opening, False))


def _success_report(success: re.Match[str], text: str) -> TaskReport:
    session_id, attempt, duration, subject, tokens, cost, turns, parent, overrun, failed = _tags(
        *success.groups()
    )
    values = {
        **DEFAULTS,
        "status": "completed",
        "session_id": session_id,
        "attempt": attempt,
        "duration": duration,
        "subject": subject,
        "output": text,
        "tokens_used": tokens,
        "cost_usd": cost,
        "turns": turns,
        "parent_session_id": parent,
        "failed_delegations": failed,
        "overrun_s": overrun,
    }
    return built(values)


def _failure_report(failure: re.Match[str]) -> TaskReport:
    (
        message,
        _,
        duration,
        _,
        steps,
        file_names,
        blocked,
        actions,
        session_id,
        category,
        retryable,
        error_type,
        retry_after,
        *tags,
    ) = failure.groups()
    session_id, attempt, duration_s, subject, tokens, cost, turns, parent, overrun, failed = _tags(
        session_id, *tags
    )
    try:
        values = {  # every field, in the model's order
            "status": "failed",
            "session_id": session_id,
            "attempt": attempt,
            "duration": float(duration) if duration_s is None else duration_s,
            "subject": subject,
            "output": None,
            "message": unindented(message),
            "category": CATEGORIES[category],
            "retryable": retryable == "true",
            "error_type": None if error_type is None else ERROR_TYPES[error_type],
            "completed_steps": items(steps, STEP),
            "files_modified": files(file_names),
            "blocked_on": None if blocked is None else unindented(blocked) or None,
            "suggested_actions": items(actions, ACTION),
            "retry_after": None if retry_after is None else float(retry_after),
            "tokens_used": tokens,
            "cost_usd": cost,
            "turns": turns,
            "parent_session_id": parent,
            "failed_delegations": failed,
            "overrun_s": overrun,
        }
    except (KeyError, ValueError) as exc:
        raise ReportParseError(f"malformed report: {exc!r}") from None
    return built(values)


def _tags(
    session_id: str,
    attempt: str | None,
    duration: str | None,
    subject: str | None,
    tokens: str | None,
    cost: str | None,
    turns: str | None,
    parent: str | None,
    overrun: str | None,
    failed: str,
) -> tuple[Any, ...]:
    """The values of the tags any rendered block carries (no entity in them): its
    session, then attempt, duration, subject, usage, nesting (DESIGN §12) and overrun."""
    try:
        return (
            session_id or None,
            1 if attempt is None else int(attempt),
            None if duration is None else float(duration),
            subject or None,
            None if tokens is None else int(tokens),
            None if cost is None else float(cost),
            None if turns is None else int(turns),
            parent or None,
            None if overrun is None else float(overrun),
            tuple(failed_delegation(value) for _, value in TAG.findall(failed)) if failed else (),
        )
    except ValueError as exc:
        raise ReportParseError(f"malformed report: {exc}") from None


def fast_body(body: str) -> dict[str, Any] | None:
    """The fields of a body in exactly the renderer's layout, or ``None``."""
    match = _RENDERED.match(body)
    if match is None:
        return None
    message, category, duration, retryable, steps, file_names, blocked, actions = match.groups()
    return {
        "message": unindented(message),
        "category": category.strip(),
        "duration": to_float(duration, "duration"),
        "retryable": retryable == "Yes",
        "completed_steps": items(steps, STEP),
        "files_modified": files(file_names),
        "blocked_on": None if blocked is None else unindented(blocked) or None,
        "suggested_actions": items(actions, ACTION),
    }


def items(block: str, between: str) -> tuple[str, ...]:
    """The items of a rendered list: every value's own lines are indented further."""
    if block == "  None\n":
        return ()
    found = block[4:-1].split(between)
    if "&" in block or "\n    " in block:
        return tuple(map(unindented, found))
    return tuple(found)
