"""The report text format (DESIGN §4): rendering and parsing, side by side.

Child text is untrusted. Every value written goes through :func:`escape`, and
free text that spans lines continues on lines indented by four spaces, so no
value can begin a section header, a report or a metadata tag. The parser reads
metadata only from the last ``<task_metadata>`` block and undoes exactly that
escaping, so ``parse_report(render_report(r)) == r`` for any strings.

Reports written by other tools parse too, and fields they lack stay ``None``:
failure reports without metadata (the recovery guide's examples), and the
sub-agent reports of capybara-vibe, where lyra's format comes from. Its
failures are lyra's layout; its successes end in an ``<execution_summary>``
block, and its metadata gives ``<duration>45.23s</duration>``. capybara-vibe
does not escape anything, so text in its success reports is read as written.

Parsing is linear in the text, whatever the text holds: blocks are found with
``str.find``/``rfind`` over ranges that never overlap (every closing tag ends
a region), and every regex reads each character a bounded number of times.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lyra._taxonomy import ErrorType, FailureCategory
from lyra.delegation._models import FailedDelegation, TaskReport
from lyra.errors import ReportParseError
from lyra.templates import LYRA

HEADER = "Child agent failed:"
"""The first line of every failure report starts with this."""
_LINE_HEADER = "\n" + HEADER  # a header at the start of a line
_DEFUSED_HEADER = "&#67;" + HEADER[1:]  # the header's "C" as a character reference
_INDENT = "    "  # continuation of a multi-line value
_OPEN, _CLOSE = "<task_metadata>", "</task_metadata>"
_CAPY_OPEN, _CAPY_CLOSE = "<execution_summary>", "</execution_summary>"  # capybara-vibe
METADATA_CLOSE = _CLOSE
"""Every lyra report ends with this: text may be cut safely right after it."""
_ANY_CLOSE = re.compile(r"</(?:task_metadata|execution_summary)>")
_HEADER_LINE = re.compile(r"(?m)^Child agent failed:")
# The exact layout the template renders; anything else takes the general parser.
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
_STEP, _ACTION = "\n  ✓ ", "\n  • "  # between two items of a list in the rendered layout
# The general parser: the header line, then every section head and list item
# (with its indented continuation lines); any other line is ignored.
_MESSAGE = re.compile(r"Child agent failed: ?([^\n]*(?:\n    [^\n]*)*)")
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
_TAG = re.compile(r"<([A-Za-z_][\w.-]*)>([^<]*)</\1>")
_OPTIONAL_TAGS = (
    "error_type",
    "retry_after_s",
    "attempt",
    "duration_s",
    "subject",
    "tokens_used",
    "cost_usd",
    "turns",
    "parent_session_id",
)
# The metadata block exactly as the renderer writes it (each tag once, in
# _metadata's order); any other block takes _TAG, which reads any layout.
_RENDERED_META = re.compile(
    "".join(
        [
            r"\n  <session_id>(?P<session_id>[^<]*)</session_id>",
            r"\n  <status>(?P<status>completed|failed)</status>",
            r"(?:\n  <failure_category>(?P<failure_category>[^<]*)</failure_category>",
            r"\n  <retryable>(?P<retryable>true|false)</retryable>)?",
            *(rf"(?:\n  <{tag}>(?P<{tag}>[^<]*)</{tag}>)?" for tag in _OPTIONAL_TAGS),
            r"(?P<failed_delegation>(?:\n  <failed_delegation>[^<]*</failed_delegation>)*)\n",
        ]
    )
)
_CAPY_MODIFIED = re.compile(r"<modified(?:\s[^<>]*)?>([^<]*)</modified>")
_FAILED_DELEGATION = "failed_delegation"  # repeated: one tag per failed nested delegation
_ENTITY = re.compile(r"&(amp|lt|gt|#\d{1,7});")
_NAMED = {"amp": "&", "lt": "<", "gt": ">"}
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_FILE_ESCAPES = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;", "\n": "&#10;", ",": "&#44;"}
)
_CATEGORIES = {str(category): category for category in FailureCategory}
_ERROR_TYPES = {str(error_type): error_type for error_type in ErrorType}


# -- rendering ---------------------------------------------------------------


def escape(text: str) -> str:
    """Make untrusted text inert for every report parser: the one escaping function.

    Use it for any untrusted text (a child's output, a data source's answer, a
    model's words) placed into text that :func:`parse_report`,
    :func:`find_reports`, the ``extract_*`` helpers, ``lyra logs`` or a parent
    model may read. ``&``, ``<``, ``>`` and carriage returns become character
    references, and so does the first letter of ``Child agent failed:``, so
    the text can neither open, close or forge a metadata tag nor start a
    report of its own. The parsers undo it: the exact text comes back.
    Text that spans lines inside a report's free-text field must also be
    indented, as :func:`render_report` does.
    """
    escaped = text.translate(_ESCAPES)
    return escaped.replace(HEADER, _DEFUSED_HEADER) if HEADER in escaped else escaped


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
    if "&#" in text:
        # Replacing these first cannot make or break another reference: the
        # characters they become are neither "&", "#", digits nor ";".
        text = text.replace("&#13;", "\r").replace("&#10;", "\n").replace("&#44;", ",")
        if "&#" in text:  # another numeric reference, from some other writer
            return _ENTITY.sub(_entity, text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")  # "&amp;" last


def _entity(match: re.Match[str]) -> str:
    name = match.group(1)
    if name in _NAMED:
        return _NAMED[name]
    code = int(name[1:])
    return chr(code) if code <= 0x10FFFF else match.group(0)


# A block: (region start, region end = where the block opens, where it closes,
# whether it is a capybara-vibe <execution_summary>). The region before a block
# is the report's body (a failure) or output (a success).
_Block = tuple[int, int, int, bool]


def _last_block(text: str) -> _Block | None:
    """The last metadata block of either kind, or ``None``.

    Closing tags are visited from the end; each is paired with the last
    opening tag of its kind after the closing tag before it (a closing tag
    without one is a stray and ends only the text before it). Every ``rfind``
    covers text no other one covers, so this is linear however many stray or
    unclosed tags the text holds.
    """
    lyra, capy = text.rfind(_CLOSE), text.rfind(_CAPY_CLOSE)
    while lyra >= 0 or capy >= 0:
        capybara = capy > lyra
        if capybara:
            closing, capy = capy, text.rfind(_CAPY_CLOSE, 0, capy)
        else:
            closing, lyra = lyra, text.rfind(_CLOSE, 0, lyra)
        start = max(
            lyra + len(_CLOSE) if lyra >= 0 else 0,
            capy + len(_CAPY_CLOSE) if capy >= 0 else 0,
        )
        opening = text.rfind(_CAPY_OPEN if capybara else _OPEN, start, closing)
        if opening >= 0:
            return start, opening, closing, capybara
    return None


def _block_text(text: str, block: _Block) -> str:
    _, opening, closing, capybara = block
    return text[opening + len(_CAPY_OPEN if capybara else _OPEN) : closing]


def report_boundary(text: str, start: int = 0) -> int:
    """Where ``text`` may be cut without splitting a report, or -1.

    That is just past the last closing tag of a metadata block (of any format
    :func:`parse_report` reads) that ends after ``start``: a reader that
    appends to a buffer passes the length it had, and no tag is looked for
    twice.
    """
    lyra = text.rfind(_CLOSE, max(0, start - len(_CLOSE) + 1))
    capy = text.rfind(_CAPY_CLOSE, max(0, start - len(_CAPY_CLOSE) + 1))
    if lyra < 0 and capy < 0:
        return -1
    return capy + len(_CAPY_CLOSE) if capy > lyra else lyra + len(_CLOSE)


def parse_report(text: str) -> TaskReport:
    """Parse the last report in ``text`` (lyra's, or capybara-vibe's).

    Raises :class:`~lyra.errors.ReportParseError`, and nothing else, when the
    text holds no report or a field has an impossible value.
    """
    if not isinstance(text, str):
        raise ReportParseError(f"expected report text, got {type(text).__name__}")
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")  # raw CRs never come from the renderer
    block = _last_block(text)
    if block is None:
        report = _parse_one(text, 0, len(text), None, capybara=False)
    else:
        start, opening, _, capy = block
        report = _parse_one(text, start, opening, _block_text(text, block), capybara=capy)
    if report is None:
        raise ReportParseError(
            "no report found: no metadata with a known status, no failure header"
        )
    return report


def find_reports(text: str) -> Iterator[TaskReport]:
    """Every well-formed report in a longer text (a transcript, a log), in order.

    A report that fails to parse is skipped; a failure report without a
    metadata block (as in the recovery guide) is found by its header line.
    """
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    start = searched = 0  # where the next region starts; text before `searched` is done
    for close in _ANY_CLOSE.finditer(text):
        closing = close.start()
        capybara = close[0] == _CAPY_CLOSE
        opening = text.rfind(_CAPY_OPEN if capybara else _OPEN, start, closing)
        if opening >= 0:  # else a stray closing tag: it only ends the region before it
            yield from _headerless_reports(text[searched:start])
            yield from _block_reports(text, (start, opening, closing, capybara))
            searched = close.end()
        start = close.end()
    yield from _headerless_reports(text[searched:])


def _block_reports(text: str, block: _Block) -> Iterator[TaskReport]:
    """The report of one block, and the reports without metadata in its region."""
    start, opening, _, capybara = block
    try:
        report = _parse_one(text, start, opening, _block_text(text, block), capybara=capybara)
    except ReportParseError:
        report = None
    if report is None:
        yield from _headerless_reports(text[start:opening])
        return
    if report.status == "failed":  # earlier headers in the region are reports too
        header_at = _last_header(text, start, opening)
        yield from _headerless_reports(text[start : header_at or start])
    yield report


def _headerless_reports(region: str) -> Iterator[TaskReport]:
    """Failure reports without metadata, each from its header line to the next."""
    if HEADER not in region:
        return
    starts = [match.start() for match in _HEADER_LINE.finditer(region)]
    for begin, end in zip(starts, [*starts[1:], len(region)], strict=False):
        try:
            report = _parse_one(region, begin, end, None, capybara=False)
        except ReportParseError:
            continue
        if report is not None:
            yield report


def _last_header(text: str, start: int, end: int) -> int | None:
    """Where the last line that starts with the header begins in ``text[start:end]``."""
    index = text.rfind(_LINE_HEADER, start, end)
    if index >= 0:
        return index + 1
    return start if text.startswith(HEADER, start, end) else None


def _parse_one(
    text: str, start: int, end: int, block: str | None, *, capybara: bool
) -> TaskReport | None:
    """The report whose body or output is ``text[start:end]``, with metadata ``block``.

    ``None`` when there is no report (no known status, no failure header);
    :class:`~lyra.errors.ReportParseError` when a field has an impossible value.
    """
    if block and not capybara and "&" not in block:
        rendered = _RENDERED_META.fullmatch(block)
        if rendered is not None:
            report = _rendered_report(text, start, end, rendered)
            if report is not None:
                return report
    meta = _meta(block, capybara) if block else {}
    status = meta.get("status")
    header_at = _last_header(text, start, end) if status != "completed" else None
    if status is None and header_at is not None:
        status = "failed"
    if status == "completed":
        fields = {"status": status, "output": _output(text, start, end, capybara)}
        if capybara and block and (files := _CAPY_MODIFIED.search(block)):
            fields["files_modified"] = _files(files[1].strip(), capybara=True)
    elif status == "failed":
        body = text[header_at:end] if header_at is not None else ""
        fields = _fast_body(body) or _parse_body(body)
        fields["status"] = status
        _failure_tags(fields, meta)
    else:
        return None
    if meta:
        _common_tags(fields, meta)
    return _report(fields)


def _rendered_report(text: str, start: int, end: int, meta: re.Match[str]) -> TaskReport | None:
    """The report of a block in lyra's own layout (free of entities), or ``None``
    when its body is not in that layout: the general reader reads it then."""
    session_id, status, category, retryable, error_type, retry_after, attempt, *rest = meta.groups()
    duration, subject, tokens_used, cost_usd, turns, parent, failed = rest
    fields: dict[str, Any]
    if status == "completed":
        fields = {"status": status, "output": _output(text, start, end, False)}
    else:
        header_at = _last_header(text, start, end)
        body = None if header_at is None else _RENDERED.match(text, header_at, end)
        if body is None or category is None:
            return None
        message, _, body_duration, _, steps, files, blocked, actions = body.groups()
        fields = {
            "status": status,
            "message": _unindent(message),
            "category": _member(_CATEGORIES, category, "category"),
            "retryable": retryable == "true",
            "completed_steps": _items(steps, _STEP),
            "files_modified": _files(files),
            "blocked_on": _unindent(blocked) or None if blocked is not None else None,
            "suggested_actions": _items(actions, _ACTION),
            "duration": _float(body_duration, "duration"),
        }
        if error_type is not None:
            fields["error_type"] = _member(_ERROR_TYPES, error_type, "error_type")
        if retry_after is not None:
            fields["retry_after"] = _float(retry_after, "retry_after_s")
    if session_id:
        fields["session_id"] = session_id
    if attempt is not None:
        fields["attempt"] = _int(attempt, "attempt")
    if duration is not None:
        fields["duration"] = _float(duration, "duration_s")
    if subject:
        fields["subject"] = subject
    if tokens_used is not None:
        fields["tokens_used"] = _int(tokens_used, "tokens_used")
    if cost_usd is not None:
        fields["cost_usd"] = _float(cost_usd, "cost_usd")
    if turns is not None:
        fields["turns"] = _int(turns, "turns")
    if parent:
        fields["parent_session_id"] = parent
    if failed:
        fields["failed_delegations"] = tuple(_failed_delegation(v) for _, v in _TAG.findall(failed))
    return _report(fields)


def _meta(block: str, capybara: bool) -> dict[str, Any]:
    """The tags of a metadata block in any layout: the last value of each.

    ``failed_delegation`` (one tag per failed nested delegation) holds all its
    values, in order.
    """
    pairs = _TAG.findall(block)
    if not capybara and "&" in block:  # capybara-vibe escapes nothing
        pairs = [(tag, unescape(value)) for tag, value in pairs]
    meta: dict[str, Any] = dict(pairs)
    if _FAILED_DELEGATION in meta:
        meta[_FAILED_DELEGATION] = [value for tag, value in pairs if tag == _FAILED_DELEGATION]
    return meta


def _output(text: str, start: int, end: int, capybara: bool) -> str:
    output = text[start:end]
    if start > 0:  # after an earlier report: the newline that separates them
        output = output.lstrip("\n")
    output = output.removesuffix("\n\n")
    return output if capybara else unescape(output)


def _failure_tags(fields: dict[str, Any], meta: dict[str, Any]) -> None:
    get = meta.get
    if get("failure_category") is not None:
        fields["category"] = meta["failure_category"]
    if get("error_type") is not None:
        fields["error_type"] = _member(_ERROR_TYPES, meta["error_type"], "error_type")
    if get("retryable") is not None:
        fields["retryable"] = meta["retryable"] == "true"
    if get("retry_after_s") is not None:
        fields["retry_after"] = _float(meta["retry_after_s"], "retry_after_s")
    category = fields.get("category")
    if category is not None:
        fields["category"] = _member(_CATEGORIES, category, "category")


def _common_tags(fields: dict[str, Any], meta: dict[str, Any]) -> None:
    """Identity, timing, usage and nesting (DESIGN §12), from the tags that carry them."""
    get = meta.get
    for tag in ("session_id", "subject", "parent_session_id"):
        if get(tag):  # blank means none
            fields[tag] = meta[tag]
    for tag in ("attempt", "tokens_used", "turns"):
        if get(tag) is not None:
            fields[tag] = _int(meta[tag], tag)
    if get("duration_s") is not None:
        fields["duration"] = _float(meta["duration_s"], "duration_s")
    elif get("duration") is not None:  # capybara-vibe: <duration>45.23s</duration>
        fields["duration"] = _float(meta["duration"].strip().removesuffix("s"), "duration")
    if get("cost_usd") is not None:
        fields["cost_usd"] = _float(meta["cost_usd"], "cost_usd")
    if get(_FAILED_DELEGATION):
        fields["failed_delegations"] = tuple(map(_failed_delegation, meta[_FAILED_DELEGATION]))


def _failed_delegation(value: str) -> FailedDelegation:
    session_id, _, rest = value.rpartition(" ")
    session_id, _, category = session_id.rpartition(" ")
    try:
        return FailedDelegation(session_id=session_id, category=category, error_type=rest)
    except ValueError:  # pydantic's ValidationError: an impossible value
        raise ReportParseError(f"malformed failed_delegation tag: {value!r}") from None


# Every field the parser sets is already checked (status, the two enums,
# numbers) or a string, so the model is built without validating it again:
# BaseModel.model_construct would cost more than validation itself.
_DEFAULTS = {name: field.get_default() for name, field in TaskReport.model_fields.items()}
_new = object.__new__
_set = object.__setattr__


def _report(fields: dict[str, Any]) -> TaskReport:
    """A report of values already checked, built as ``model_construct`` builds one."""
    report: TaskReport = _new(TaskReport)
    _set(report, "__dict__", {**_DEFAULTS, **fields})
    _set(report, "__pydantic_fields_set__", set(fields))
    _set(report, "__pydantic_extra__", None)
    _set(report, "__pydantic_private__", None)
    return report


def _fast_body(body: str) -> dict[str, Any] | None:
    """The fields of a body in exactly the renderer's layout, or ``None``."""
    match = _RENDERED.match(body)
    if match is None:
        return None
    blocked = match["blocked"]
    return {
        "message": _unindent(match["message"]),
        "category": match["category"].strip(),
        "duration": _float(match["duration"], "duration"),
        "retryable": match["retryable"] == "Yes",
        "completed_steps": _items(match["steps"], _STEP),
        "files_modified": _files(match["files"]),
        "blocked_on": _unindent(blocked) or None if blocked is not None else None,
        "suggested_actions": _items(match["actions"], _ACTION),
    }


def _unindent(text: str) -> str:
    if "\n" in text:
        text = text.replace("\n" + _INDENT, "\n")
    return unescape(text) if "&" in text else text


def _items(block: str, between: str) -> tuple[str, ...]:
    """The items of a rendered list: every value's own lines are indented further."""
    if block == "  None\n":
        return ()
    return tuple(map(_unindent, block[4:-1].split(between)))


def _files(raw: str, *, capybara: bool = False) -> tuple[str, ...]:
    if raw == "none" or (capybara and not raw):
        return ()
    names = raw.split(", ")
    return tuple(names) if capybara else tuple(map(unescape, names))


def _parse_body(body: str) -> dict[str, Any]:
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
    items: dict[str, list[str]] = {"completed_steps": [], "suggested_actions": []}
    message = _MESSAGE.match(body)
    if message is not None:
        fields["message"] = _unindent(message[1])
    section = ""
    for line in _BODY_LINE.finditer(body, message.end() if message else 0):
        head, value = line.groups()
        if head is not None:
            section = _SECTIONS[head]
            if section not in items:
                fields[section] = value
        elif section in items:
            items[section].append(value)
    for name, values in items.items():
        fields[name] = tuple(map(_unindent, values)) if values else ()
    return fields


def _finish(fields: dict[str, Any]) -> dict[str, Any]:
    """Section values as fields: first lines only, except for the blocker."""
    blocked = fields.get("blocked_on")
    fields["blocked_on"] = _unindent(blocked) or None if blocked is not None else None
    if "category" in fields:
        fields["category"] = _first_line(fields["category"]).strip()
    if "retryable" in fields:
        fields["retryable"] = _first_line(fields["retryable"]).strip().lower() in ("yes", "true")
    if "duration" in fields:
        duration = _first_line(fields["duration"]).strip().removesuffix("s")
        fields["duration"] = _float(duration, "duration")
    if "files_modified" in fields:
        fields["files_modified"] = _files(_first_line(fields["files_modified"]))
    return fields


def _first_line(value: str) -> str:
    return value.partition("\n")[0]


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


def _member(members: dict[str, Any], value: str, what: str) -> Any:
    member = members.get(value)
    if member is None:
        raise ReportParseError(f"malformed report: {what} {value!r} is not one lyra knows")
    return member


# -- one field at a time (the guide-style helpers) ----------------------------
#
# Each reads only what its field needs from the last report, by the same rules
# as parse_report, and never raises; other fields are not checked.

_Failure = tuple[int, int, int, int, bool]  # region start, end; metadata start, end; capybara
_TAG_PAIRS = {
    name: (f"<{name}>", f"</{name}>") for name in ("status", "failure_category", "retryable")
}
_CONTINUED = re.compile(r" ?([^\n]*(?:\n    [^\n]*)*)")  # a value and its indented lines


def _failure(text: str) -> _Failure | None:
    """Where the last report lies, when it is a failure; ``None`` otherwise."""
    block = _last_block(text)
    if block is None:
        start, end, lo, hi, capybara = 0, len(text), 0, 0, False
    else:
        start, end, hi, capybara = block
        lo = end + len(_CAPY_OPEN if capybara else _OPEN)
    status = _tag(text, "status", lo, hi, capybara) if hi else None
    if status == "failed" or (status is None and _last_header(text, start, end) is not None):
        return start, end, lo, hi, capybara
    return None


def _tag(text: str, name: str, lo: int, hi: int, capybara: bool) -> str | None:
    """The value of the last whole ``<name>value</name>`` in ``text[lo:hi]``, as the parser
    reads it (``dict(_TAG.findall(block))`` keeps the last one too)."""
    opening, closing = _TAG_PAIRS[name]
    end = hi
    while (at := text.rfind(opening, lo, end)) >= 0:
        value_at = at + len(opening)
        stop = text.find("<", value_at, hi)
        if stop >= 0 and text.startswith(closing, stop, hi):
            value = text[value_at:stop]
            return value if capybara or "&" not in value else unescape(value)
        end = at  # a broken tag: an earlier one may be whole
    return None


def _body(text: str, where: _Failure) -> str:
    """The failure body (from the last header line), with CRLF read as LF."""
    start, end = where[0], where[1]
    header_at = _last_header(text, start, end)
    if header_at is None:
        return ""
    body = text[header_at:end]
    return body.replace("\r\n", "\n") if "\r" in body else body


def _section_line(body: str, head: str) -> str | None:
    """The rest of the last line of ``body`` that starts with ``head`` (never the first)."""
    at = body.rfind("\n" + head)
    if at < 0:
        return None
    at += 1 + len(head)
    stop = body.find("\n", at)
    return body[at : stop if stop >= 0 else len(body)].removeprefix(" ")


def read_category(text: str) -> FailureCategory | None:
    """The category of the last report when it is a failure, else ``None``."""
    where = _failure(text)
    if where is None:
        return None
    value = _tag(text, "failure_category", where[2], where[3], where[4])
    if value is None:
        value = _section_line(_body(text, where), "Category:")
    return None if value is None else _CATEGORIES.get(value.strip())


def read_retryable(text: str) -> bool:
    """True when the last report is a failure marked retryable."""
    where = _failure(text)
    if where is None:
        return False
    value = _tag(text, "retryable", where[2], where[3], where[4])
    if value is not None:
        return value == "true"
    value = _section_line(_body(text, where), "Retryable:")
    return value is not None and value.strip().lower() in ("yes", "true")


def read_files(text: str) -> tuple[str, ...]:
    """The files the last report lists, when it is a failure."""
    where = _failure(text)
    value = None if where is None else _section_line(_body(text, where), "Files modified:")
    return () if value is None else _files(value)


def read_blocker(text: str) -> str | None:
    """What blocked the child of the last report, when it is a failure."""
    where = _failure(text)
    body = "" if where is None else _body(text, where)
    at = body.rfind("\nBlocked on:")
    if at < 0:
        return None
    value = _CONTINUED.match(body, at + len("\nBlocked on:"))
    return _unindent(value[1]) or None if value else None


def read_list(text: str, name: str) -> tuple[str, ...]:
    """``completed_steps`` or ``suggested_actions`` of the last report, when it is a failure."""
    where = _failure(text)
    if where is None:
        return ()
    body = _body(text, where)
    match = _RENDERED.match(body)
    if match is None:
        items: tuple[str, ...] = _sections(body)[name]
        return items
    if name == "completed_steps":
        return _items(match["steps"], _STEP)
    return _items(match["actions"], _ACTION)
