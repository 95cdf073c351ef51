"""The report text format (DESIGN §4): rendering and parsing, side by side.

Child text is untrusted. Every value written is escaped (``&``, ``<``, ``>``
and carriage returns as character references), and free text that spans
lines continues on lines indented by four spaces, so no value can begin a
section header or a metadata tag. The parser reads metadata only from the
last ``<task_metadata>`` block and undoes exactly that escaping, so
``parse_report(render_report(r)) == r`` for any strings.

Reports written by other tools (the recovery guide's examples, without
metadata) parse too; fields they lack stay ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lyra.delegation._models import FailedDelegation, TaskReport
from lyra.errors import ReportParseError
from lyra.templates import LYRA

HEADER = "Child agent failed:"
"""The first line of every failure report starts with this."""
_INDENT = "    "  # continuation of a multi-line value
_STEP, _ACTION, _NONE = "  ✓", "  •", "  None"
_SECTIONS = {
    "Category:": "category",
    "Duration:": "duration",
    "Retryable:": "retryable",
    "Work completed before failure:": "completed_steps",
    "Files modified:": "files_modified",
    "Blocked on:": "blocked_on",
    "Suggested recovery actions:": "suggested_actions",
}
_OPEN, _CLOSE = "<task_metadata>", "</task_metadata>"
METADATA_CLOSE = _CLOSE
"""Every report ends with this: text may be cut safely right after it."""
_BLOCK = re.compile(r"<task_metadata>(.*?)</task_metadata>", re.DOTALL)
# The exact layout the template renders; anything else takes the line parser.
_RENDERED = re.compile(
    r"Child agent failed: (?P<message>[^\n]*(?:\n    [^\n]*)*)\n"
    r"\nCategory: (?P<category>[^\n]*)\n"
    r"Duration: (?P<duration>[^\n]*)s\n"
    r"Retryable: (?P<retryable>Yes|No)\n"
    r"\nWork completed before failure:\n(?P<steps>  None\n|(?:  ✓ [^\n]*\n(?:    [^\n]*\n)*)+)"
    r"\nFiles modified: (?P<files>[^\n]*)\n"
    r"(?:\nBlocked on: (?P<blocked>[^\n]*(?:\n    [^\n]*)*)\n)?"
    r"\nSuggested recovery actions:\n(?P<actions>  None\n|(?:  • [^\n]*\n(?:    [^\n]*\n)*)+)"
    r"\n?\Z"
)
_STEP_SPLIT = re.compile(r"(?m)^  ✓ ")
_ACTION_SPLIT = re.compile(r"(?m)^  • ")
_TAG = re.compile(r"<([A-Za-z_][\w.-]*)>([^<]*)</\1>")
_FAILED_DELEGATION = "failed_delegation"  # repeated: one tag per failed nested delegation
_ENTITY = re.compile(r"&(amp|lt|gt|#\d{1,7});")
_NAMED = {"amp": "&", "lt": "<", "gt": ">"}
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_FILE_ESCAPES = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;", "\n": "&#10;", ",": "&#44;"}
)


# -- rendering ---------------------------------------------------------------


def escape(text: str) -> str:
    """Escape one value so it cannot be read as markup."""
    return text.translate(_ESCAPES)


def _free(text: str) -> str:
    """Free text inside a report: escaped, every line after the first indented, so
    that no line of it can begin a section."""
    return escape(text).replace("\n", "\n" + _INDENT)


_HEADER_LINE = re.compile(rf"^(?=[ \t]*{re.escape(HEADER)})", re.MULTILINE)


def escape_untrusted(text: str) -> str:
    """Untrusted text made safe to place in text a report parser may read (a brief,
    an answer, stdout): :func:`escape`d, and a line that would begin a report
    (``Child agent failed:``) indented, so it can forge neither a tag nor a report."""
    return _HEADER_LINE.sub(_INDENT, escape(text))


def _file(name: str) -> str:
    escaped = name.translate(_FILE_ESCAPES)
    return "&#110;one" if escaped == "none" else escaped  # "none" means an empty list


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
        message=_free(report.message or ""),
        category=str(report.category or ""),
        duration_text=f"{report.duration or 0.0:.1f}",
        retryable=bool(report.retryable),
        completed_steps=[_free(step) for step in report.completed_steps],
        files_modified=", ".join(map(_file, report.files_modified))
        if report.files_modified
        else "none",
        blocked_on=None if report.blocked_on is None else _free(report.blocked_on),
        suggested_actions=[_free(action) for action in report.suggested_actions],
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
        if report.error_type is not None:
            tags.append(("error_type", report.error_type))
        if report.retry_after is not None:
            tags.append(("retry_after_s", repr(report.retry_after)))
    tags.append(("attempt", report.attempt))
    if report.duration is not None:
        tags.append(("duration_s", repr(report.duration)))
    if report.subject is not None:
        tags.append(("subject", report.subject))
    for tag in ("tokens_used", "cost_usd", "turns", "parent_session_id"):
        value = getattr(report, tag)
        if value is not None:
            tags.append((tag, repr(value) if isinstance(value, float) else value))
    for sub in report.failed_delegations:
        tags.append((_FAILED_DELEGATION, f"{sub.session_id} {sub.category} {sub.error_type}"))
    return [(tag, escape(str(value))) for tag, value in tags]


# -- parsing -------------------------------------------------------------------


def unescape(text: str) -> str:
    """Undo :func:`escape` (and the numeric references used for files)."""
    if "&" not in text:
        return text
    return _ENTITY.sub(_entity, text)


def _entity(match: re.Match[str]) -> str:
    name = match.group(1)
    if name in _NAMED:
        return _NAMED[name]
    code = int(name[1:])
    return chr(code) if code <= 0x10FFFF else match.group(0)


def parse_report(text: str) -> TaskReport:
    """Parse the last report in ``text``.

    Raises :class:`~lyra.errors.ReportParseError`, and nothing else, when the
    text holds no report or a field has an impossible value.
    """
    if not isinstance(text, str):
        raise ReportParseError(f"expected report text, got {type(text).__name__}")
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")  # raw CRs never come from the renderer
    opening = text.rfind(_OPEN)
    closing = text.find(_CLOSE, opening) if opening >= 0 else -1
    if closing < 0:  # no whole block at the end: look for any, the slow way
        blocks = list(_BLOCK.finditer(text))
        if not blocks:
            return _parse_one(text, None, strip_lead=False)
        opening, closing = blocks[-1].start(), blocks[-1].end() - len(_CLOSE)
    previous = text.rfind(_CLOSE, 0, opening)
    start = previous + len(_CLOSE) if previous >= 0 else 0
    block = text[opening + len(_OPEN) : closing]
    return _parse_one(text[start:opening], block, strip_lead=start > 0)


def find_reports(text: str) -> Iterator[TaskReport]:
    """Every well-formed report in a longer text (a transcript, a log), in order.

    A report that fails to parse is skipped; a failure report without a
    metadata block (as in the recovery guide) is found by its header line.
    """
    text = text.replace("\r\n", "\n")
    start = 0
    for block in _BLOCK.finditer(text):
        region = text[start : block.start()]
        start = block.end()
        try:
            report: TaskReport | None = _parse_one(region, block.group(1), strip_lead=True)
        except ReportParseError:
            report = None
        if report is None:
            yield from _headerless_reports(region)
        elif report.status == "failed":  # earlier headers in the region are reports too
            yield from _headerless_reports(region[: _last_header(region) or 0])
        if report is not None:
            yield report
    yield from _headerless_reports(text[start:])


def _headerless_reports(region: str) -> Iterator[TaskReport]:
    """Failure reports without metadata, each from its header line to the next."""
    starts = [m.start() for m in re.finditer(rf"(?m)^{re.escape(HEADER)}", region)]
    for begin, end in zip(starts, [*starts[1:], len(region)], strict=False):
        try:
            yield _parse_one(region[begin:end], None, strip_lead=False)
        except ReportParseError:
            continue


def _last_header(region: str) -> int | None:
    index = region.rfind("\n" + HEADER)
    if index >= 0:
        return index + 1
    return 0 if region.startswith(HEADER) else None


def _parse_one(region: str, block: str | None, *, strip_lead: bool) -> TaskReport:
    pairs = _TAG.findall(block) if block else []
    if block and "&" in block:
        pairs = [(tag, unescape(value)) for tag, value in pairs]
    meta = dict(pairs)
    status = meta.get("status")
    header_at = _last_header(region) if status != "completed" else None
    if status is None and header_at is not None:
        status = "failed"
    if status not in ("completed", "failed"):
        raise ReportParseError(f"no lyra report found (status {status!r})")
    fields: dict[str, Any] = {
        "status": status,
        "session_id": meta.get("session_id") or None,
        "attempt": _int(meta.get("attempt", "1"), "attempt"),
        "subject": meta.get("subject") or None,
    }
    if status == "completed":
        output = region.lstrip("\n") if strip_lead else region
        fields["output"] = unescape(output.removesuffix("\n\n"))
    else:
        body = region[header_at:] if header_at is not None else ""
        fields.update(_fast_body(body) or _parse_body(body))
        for tag, name in (("failure_category", "category"), ("error_type", "error_type")):
            if tag in meta:
                fields[name] = meta[tag]
        if "retryable" in meta:
            fields["retryable"] = meta["retryable"] == "true"
        if "retry_after_s" in meta:
            fields["retry_after"] = _float(meta["retry_after_s"], "retry_after_s")
    if "duration_s" in meta:
        fields["duration"] = _float(meta["duration_s"], "duration_s")
    fields.update(_tree_fields(meta, pairs))
    try:
        return TaskReport(**fields)
    except ValueError as exc:  # pydantic's ValidationError: an impossible value
        raise ReportParseError(f"malformed report: {exc}") from None


def _tree_fields(meta: dict[str, str], pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Usage and nesting (DESIGN §12), from the metadata tags that carry them."""
    fields: dict[str, Any] = {}
    for tag in ("tokens_used", "turns"):
        if tag in meta:
            fields[tag] = _int(meta[tag], tag)
    if "cost_usd" in meta:
        fields["cost_usd"] = _float(meta["cost_usd"], "cost_usd")
    if meta.get("parent_session_id"):
        fields["parent_session_id"] = meta["parent_session_id"]
    failed = [value for tag, value in pairs if tag == _FAILED_DELEGATION]
    if failed:
        fields["failed_delegations"] = tuple(map(_failed_delegation, failed))
    return fields


def _failed_delegation(value: str) -> FailedDelegation:
    session_id, _, rest = value.rpartition(" ")
    session_id, _, category = session_id.rpartition(" ")
    try:
        return FailedDelegation(session_id=session_id, category=category, error_type=rest)
    except ValueError:  # pydantic's ValidationError: an impossible value
        raise ReportParseError(f"malformed failed_delegation tag: {value!r}") from None


def _fast_body(body: str) -> dict[str, Any] | None:
    """The fields of a body in exactly the renderer's layout, or ``None``."""
    match = _RENDERED.match(body)
    if match is None:
        return None
    blocked = match["blocked"]
    return {
        "message": _unindent(match["message"]),
        "category": match["category"],
        "duration": _float(match["duration"], "duration"),
        "retryable": match["retryable"] == "Yes",
        "completed_steps": _items(match["steps"], _STEP_SPLIT),
        "files_modified": _files(match["files"]),
        "blocked_on": _unindent(blocked) or None if blocked is not None else None,
        "suggested_actions": _items(match["actions"], _ACTION_SPLIT),
    }


def _unindent(text: str) -> str:
    if "\n" in text:
        text = text.replace("\n" + _INDENT, "\n")
    return unescape(text) if "&" in text else text


def _items(block: str, split: re.Pattern[str]) -> tuple[str, ...]:
    if block == "  None\n":
        return ()
    if block.count("\n") == 1:  # one single-line item: the common case
        return (_unindent(block[4:-1]),)
    return tuple(_unindent(item[:-1]) for item in split.split(block)[1:])


def _files(raw: str) -> tuple[str, ...]:
    return () if raw == "none" else tuple(unescape(name) for name in raw.split(", "))


def _parse_body(body: str) -> dict[str, Any]:
    """The sections of a failure report body, by line."""
    fields: dict[str, Any] = {}
    lists: dict[str, list[str]] = {"completed_steps": [], "suggested_actions": []}
    current: list[str] | None = None  # the value continuation lines extend
    section = ""
    for line in body.split("\n"):
        if line.startswith(_INDENT) and current is not None:
            current[-1] += "\n" + line[len(_INDENT) :]
            continue
        if line.startswith(HEADER):
            current = [line[len(HEADER) :].removeprefix(" ")]
            fields["message"] = current
            continue
        head = _section_of(line)
        if head is not None:
            section, rest = head
            current = _start_section(section, rest, fields, lists)
            continue
        item = _list_item(line)
        if item is not None and section in lists:
            current = None
            if item is not _NONE:
                lists[section].append(item)
                current = lists[section]
            continue
        current = None
    return _finish(fields, lists)


def _section_of(line: str) -> tuple[str, str] | None:
    for head, name in _SECTIONS.items():
        if line.startswith(head):
            return name, line[len(head) :].removeprefix(" ")
    return None


def _start_section(
    name: str, rest: str, fields: dict[str, Any], lists: dict[str, list[str]]
) -> list[str] | None:
    if name in lists:
        return None
    holder = [rest]
    fields[name] = holder
    return holder if name == "blocked_on" else None


def _list_item(line: str) -> str | None:
    for marker in (_STEP, _ACTION):
        if line.startswith(marker):
            return line[len(marker) :].removeprefix(" ")
    return _NONE if line.rstrip() == _NONE else None


def _finish(fields: dict[str, Any], lists: dict[str, list[str]]) -> dict[str, Any]:
    out: dict[str, Any] = {name: tuple(map(unescape, items)) for name, items in lists.items()}
    for name in ("message", "blocked_on"):
        if name in fields:
            out[name] = unescape(fields[name][0])
    if not out.get("blocked_on"):
        out["blocked_on"] = None
    if "category" in fields:
        out["category"] = fields["category"][0].strip()  # pydantic checks the value
    if "retryable" in fields:
        out["retryable"] = fields["retryable"][0].strip().lower() in ("yes", "true")
    if "duration" in fields:
        out["duration"] = _float(fields["duration"][0].strip().removesuffix("s"), "duration")
    if "files_modified" in fields:
        out["files_modified"] = _files(fields["files_modified"][0])
    return out


def _int(value: str, what: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ReportParseError(f"{what} is not a whole number: {value!r}") from None


def _float(value: str, what: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ReportParseError(f"{what} is not a number: {value!r}") from None
