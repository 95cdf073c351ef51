"""Parsing: the last report in a text, in any layout lyra reads.

The parser reads metadata only from the last metadata block and undoes exactly
the renderer's escaping, so ``parse_report(render_report(r)) == r`` for any
strings. lyra's own layout takes the fast path (:mod:`._layout`); anything
else, reports other tools wrote included, takes the general reader here, a
region at a time: the header line, then every section head and list item (with
its indented continuation lines); any other line is ignored. Fields a report
lacks stay ``None``.
"""

from __future__ import annotations

import re
from typing import Any

from lyra.delegation._models import TaskReport, assembled, timed
from lyra.delegation._report import _capybara as capybara
from lyra.delegation._report._blocks import block_end, last_block, last_header, output
from lyra.delegation._report._layout import fast_body, quick_report, rendered
from lyra.delegation._report._syntax import (
    FAILED_DELEGATION,
    FALLBACK,
    HEADER,
    OPEN,
    TAG,
    files,
    unescape,
    unindented,
)
from lyra.delegation._report._values import (
    CATEGORIES,
    DEFAULTS,
    ERROR_TYPES,
    EVERY_FIELD,
    failed_delegation,
    member,
    report,
    to_float,
    to_int,
)
from lyra.errors import ReportParseError

_MESSAGE = re.compile(r"Child agent failed: ?([^\n]*(?:\n    [^\n]*)*)")
HEADED = re.compile(r"(?m)^Child agent failed: ?([^\n]*+(?:\n    [^\n]*+)*+)")
"""A header line and the message it starts (with its continuation lines)."""
_BODY_LINE = re.compile(
    r"^(?:(Category|Duration|Retryable|Work completed before failure|Files modified"
    r"|Blocked on|Suggested recovery actions):|  [✓•]) ?([^\n]*(?:\n    [^\n]*)*)",
    re.MULTILINE,
)
_SECTIONS = {
    "Category": "category",
    "Duration": "duration",
    "Retryable": "retryable",
    "Work completed before failure": "completed_steps",
    "Files modified": "files_modified",
    "Blocked on": "blocked_on",
    "Suggested recovery actions": "suggested_actions",
}


def parse_report(text: str) -> TaskReport:
    """Parse the last report in ``text`` (lyra's, or capybara-vibe's).

    Raises :class:`~lyra.errors.ReportParseError`, and nothing else, when the
    text holds no report or a field has an impossible value.
    """
    if not isinstance(text, str):
        raise ReportParseError(f"expected report text, got {type(text).__name__}")
    if "\r" in text:  # raw CRs never come from the renderer; CRLF is normalised
        text = text.replace("\r\n", "\n")
    found = quick_report(text)
    if found is None:
        found = general_report(text)
    if found is None:
        raise ReportParseError("no report: no metadata with a known status, no failure header")
    return found


def general_report(text: str) -> TaskReport | None:
    """The last report in any layout (the last :func:`find_reports` gives, unless
    the last metadata block holds no report); ``None`` when there is none."""
    block = last_block(text)
    if block is None:
        return last_headerless(text, 0)
    after = block_end(block[2], block[3])
    trailing = last_headerless(text, after) if text.find(HEADER, after) >= 0 else None
    return trailing if trailing is not None else parse_one(text, *block)


def last_headerless(text: str, start: int) -> TaskReport | None:
    """The last failure report without metadata in ``text[start:]``, found from the end."""
    end = len(text)
    while (begin := last_header(text, start, end)) is not None:
        found = headerless(text, begin, end)
        if found is not None:
            return found
        end = begin
    return None


def headerless(text: str, begin: int, end: int) -> TaskReport | None:
    """The failure report from the header line at ``begin`` to ``end`` (no metadata);
    ``None`` when a field has an impossible value."""
    message = _MESSAGE.match(text, begin, end)
    if message is not None and _BODY_LINE.search(text, message.end(), end) is None:
        return message_only(message[1])  # no section and no item follows the header
    try:
        return parse_one(text, begin, end, -1, False)
    except ReportParseError:
        return None


def message_only(message: str) -> TaskReport:
    """A failure report without metadata whose header line is all it says."""
    values = _HEADERLESS.copy()
    values["message"] = unindented(message) if "\n" in message or "&" in message else message
    return assembled(TaskReport, values, EVERY_FIELD)


_HEADERLESS = {**DEFAULTS, "status": "failed", "duration": timed("failed", None)}


def parse_one(
    text: str, start: int, end: int, closing: int, is_capybara: bool
) -> TaskReport | None:
    """The report of the region ``text[start:end]`` and of the metadata block that
    opens at ``end`` and closes at ``closing`` (-1: there is none).

    ``None`` when there is no report (no known status, no failure header);
    :class:`~lyra.errors.ReportParseError` when a field has an impossible value.
    """
    if closing < 0:
        block = None
    elif is_capybara:
        block = text[end + len(capybara.OPEN) : closing]
    else:
        found = rendered(text, start, end, closing)
        if found is not None:
            return found
        block = text[end + len(OPEN) : closing]
    meta = _meta(block, is_capybara) if block else {}
    status = meta.get("status")
    header_at = last_header(text, start, end) if status != "completed" else None
    if status is None and header_at is not None:
        status = "failed"
    if status == "completed":
        fields: dict[str, Any] = {
            "status": status,
            "output": output(text, start, end, is_capybara),
        }
        if is_capybara and block and (modified := capybara.modified_files(block)) is not None:
            fields["files_modified"] = modified
    elif status == "failed":
        body = text[header_at:end] if header_at is not None else ""
        fields = fast_body(body) or parse_body(body)
        fields["status"] = status
        _failure_tags(fields, meta)
    else:
        return None
    if meta:
        _common_tags(fields, meta)
    return report(fields)


def _meta(block: str, is_capybara: bool) -> dict[str, Any]:
    """The tags of a metadata block in any layout: the last value of each.

    ``failed_delegation`` (one tag per failed nested delegation) holds all its
    values, in order.
    """
    pairs = TAG.findall(block)
    if not is_capybara and "&" in block:  # capybara-vibe escapes nothing
        pairs = [(tag, unescape(value)) for tag, value in pairs]
    meta: dict[str, Any] = dict(pairs)
    for repeated in (FAILED_DELEGATION, FALLBACK):
        if repeated in meta:
            meta[repeated] = [value for tag, value in pairs if tag == repeated]
    return meta


def _failure_tags(fields: dict[str, Any], meta: dict[str, Any]) -> None:
    get = meta.get
    if get("failure_category") is not None:
        fields["category"] = meta["failure_category"]
    if get("error_type") is not None:
        fields["error_type"] = member(ERROR_TYPES, meta["error_type"], "error_type")
    if get("retryable") is not None:
        fields["retryable"] = meta["retryable"] == "true"
    if get("retry_after_s") is not None:
        fields["retry_after"] = to_float(meta["retry_after_s"], "retry_after_s")
    if get("question"):
        fields["question"] = meta["question"]
    category = fields.pop("category", None)
    if category:  # (an empty one: a failure of no known category, as rendered)
        fields["category"] = member(CATEGORIES, category, "category")


def _common_tags(fields: dict[str, Any], meta: dict[str, Any]) -> None:
    """Identity, timing, usage and nesting (DESIGN §12), from the tags that carry them."""
    get = meta.get
    for tag in ("session_id", "subject", "parent_session_id", "child"):
        if get(tag):  # blank means none
            fields[tag] = meta[tag]
    for tag in ("attempt", "tokens_used", "turns", "tool_calls"):
        if get(tag) is not None:
            fields[tag] = to_int(meta[tag], tag)
    if get("duration_s") is not None:
        fields["duration"] = to_float(meta["duration_s"], "duration_s")
    elif get(capybara.DURATION) is not None:
        fields["duration"] = to_float(capybara.seconds(meta[capybara.DURATION]), "duration")
    for tag in ("cost_usd", "overrun_s"):
        if get(tag) is not None:
            fields[tag] = to_float(meta[tag], tag)
    if get(FAILED_DELEGATION):
        fields["failed_delegations"] = tuple(map(failed_delegation, meta[FAILED_DELEGATION]))
    if get(FALLBACK):
        fields["fallbacks"] = tuple(meta[FALLBACK])


def parse_body(body: str) -> dict[str, Any]:
    """The fields of a failure report body in any layout."""
    return _finish(_sections(body))


def _sections(body: str) -> dict[str, Any]:
    """The sections of a failure report body, as written.

    The header line gives the message; a line starting with a section name
    starts that section (the last one of a name wins, except that the items
    of list sections add up); a ``✓`` or ``•`` item belongs to the list
    section it is in; an indented line continues the value above it. Any
    other line is ignored.
    """
    fields: dict[str, Any] = {}
    steps: list[str] = []
    actions: list[str] = []
    message = _MESSAGE.match(body)
    if message is not None:
        fields["message"] = unindented(message[1])
    section = ""
    for line in _BODY_LINE.finditer(body, message.end() if message else 0):
        head, value = line.groups()
        if head is not None:
            section = _SECTIONS[head]
            if section != "completed_steps" and section != "suggested_actions":
                fields[section] = value
        elif section == "completed_steps":
            steps.append(value)
        elif section == "suggested_actions":
            actions.append(value)
    fields["completed_steps"] = tuple(map(unindented, steps))
    fields["suggested_actions"] = tuple(map(unindented, actions))
    return fields


def _finish(fields: dict[str, Any]) -> dict[str, Any]:
    """Section values as fields: first lines only, except for the blocker."""
    blocked = fields.get("blocked_on")
    fields["blocked_on"] = unindented(blocked) or None if blocked is not None else None
    if "category" in fields:
        fields["category"] = _first_line(fields["category"]).strip()
    if "retryable" in fields:
        fields["retryable"] = _first_line(fields["retryable"]).strip().lower() in ("yes", "true")
    if "duration" in fields:
        duration = _first_line(fields["duration"]).strip().removesuffix("s")
        fields["duration"] = to_float(duration, "duration")
    if "files_modified" in fields:
        fields["files_modified"] = files(_first_line(fields["files_modified"]))
    return fields


def _first_line(value: str) -> str:
    return value.partition("\n")[0]
