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
from functools import cache
from typing import Any

import jinja2

from lyra.delegation._models import ErrorType, FailureCategory, TaskReport
from lyra.errors import ReportParseError

HEADER = "Child agent failed:"
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
_BLOCK = re.compile(r"<task_metadata>(.*?)</task_metadata>", re.DOTALL)
_TAG = re.compile(r"<([A-Za-z_][\w.-]*)>([^<]*)</\1>")
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
    return escape(text).replace("\n", "\n" + _INDENT)


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


@cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("lyra", "templates"),
        autoescape=False,  # values are escaped by _View; HTML escaping would change them
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    return env.get_template("report.txt.j2")


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
    return _template().render(r=view)


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
    tags.append(("attempt", report.attempt))
    if report.duration is not None:
        tags.append(("duration_s", repr(report.duration)))
    if report.subject is not None:
        tags.append(("subject", report.subject))
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
    text = text.replace("\r\n", "\n")  # raw CRs never come from the renderer
    blocks = list(_BLOCK.finditer(text))
    if blocks:
        last = blocks[-1]
        start = blocks[-2].end() if len(blocks) > 1 else 0
        return _parse_one(text[start : last.start()], last.group(1), strip_lead=start > 0)
    return _parse_one(text, None, strip_lead=False)


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
    meta = {tag: unescape(value) for tag, value in _TAG.findall(block)} if block else {}
    header_at = _last_header(region)
    status = meta.get("status") or ("failed" if header_at is not None else None)
    if status not in ("completed", "failed"):
        raise ReportParseError(f"no lyra report found (status {status!r})")
    fields: dict[str, Any] = {
        "status": status,
        "session_id": meta.get("session_id"),
        "attempt": _int(meta.get("attempt", "1"), "attempt"),
        "subject": meta.get("subject"),
    }
    if "duration_s" in meta:
        fields["duration"] = _float(meta["duration_s"], "duration_s")
    if status == "completed":
        output = region.lstrip("\n") if strip_lead else region
        fields["output"] = unescape(output.removesuffix("\n\n"))
        return TaskReport(**fields)
    body = _parse_body(region[header_at:] if header_at is not None else "")
    if "duration" in fields:
        body.pop("duration", None)
    for tag, field in (("failure_category", "category"), ("error_type", "error_type")):
        if tag in meta:
            body[field] = meta[tag]
    if "retryable" in meta:
        body["retryable"] = meta["retryable"] == "true"
    try:
        return TaskReport(**fields, **body)
    except ValueError as exc:  # pydantic's ValidationError: an impossible enum value
        raise ReportParseError(f"malformed report: {exc}") from None


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
    if "category" in fields:
        out["category"] = _enum(FailureCategory, fields["category"][0].strip(), "category")
    if "retryable" in fields:
        out["retryable"] = fields["retryable"][0].strip().lower() in ("yes", "true")
    if "duration" in fields:
        out["duration"] = _float(fields["duration"][0].strip().removesuffix("s"), "duration")
    if "files_modified" in fields:
        raw = fields["files_modified"][0]
        files = [] if raw == "none" else raw.split(", ")
        out["files_modified"] = tuple(unescape(name) for name in files)
    return out


def _enum(kind: type[FailureCategory] | type[ErrorType], value: str, what: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise ReportParseError(f"unknown {what} {value!r}") from None


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
