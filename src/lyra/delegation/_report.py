"""The report text format (DESIGN §4): rendering, parsing and the one-field helpers.

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
from lyra.delegation._models import FailedDelegation, TaskReport, assembled
from lyra.delegation._text import printable
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
# The exact layout the template renders, the common case, read by one regex
# match; anything else takes the general reader below. The match never reaches
# across a closing tag: it starts at a header inside the region. A metadata
# value with an entity in it sends the block to the general reader.
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
_TAGS = (  # after session_id and status, in the order _metadata writes them
    ("error_type", "retry_after_s"),  # failures only
    (
        "attempt",
        "duration_s",
        "subject",
        "tokens_used",
        "cost_usd",
        "turns",
        "parent_session_id",
        "overrun_s",
    ),
)


def _optional(tags: tuple[str, ...]) -> str:
    # "(?:x|)" rather than "(?:x)?": a branch costs the regex engine less than a repeat.
    return "".join(rf"(?:\n  <{tag}>(?P<{tag}>[^<&]*)</{tag}>|)" for tag in tags)


_BLOCK_START = r"<task_metadata>\n  <session_id>(?P<session_id>[^<&]*)</session_id>\n  <status>"
_BLOCK_END = (
    r"(?P<failed_delegation>(?:\n  <failed_delegation>[^<&]*</failed_delegation>)*)"
    r"\n</task_metadata>"
)
_RENDERED = re.compile(_BODY + r"\n?\Z")  # a body alone
_RENDERED_FAILURE = re.compile(
    _BODY + r"\n?" + _BLOCK_START + r"failed</status>"
    r"\n  <failure_category>(?P<failure_category>[^<&]*)</failure_category>"
    r"\n  <retryable>(?P<retryable>true|false)</retryable>"
    + _optional(_TAGS[0])
    + _optional(_TAGS[1])
    + _BLOCK_END
)
_RENDERED_SUCCESS = re.compile(
    _BLOCK_START + r"completed</status>" + _optional(_TAGS[1]) + _BLOCK_END
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
_CAPY_MODIFIED = re.compile(r"<modified(?:\s[^<>]*)?>([^<]*)</modified>")
_FAILED_DELEGATION = "failed_delegation"  # repeated: one tag per failed nested delegation
_ENTITY = re.compile(r"&(amp|lt|gt|#\d{1,7});")
_NAMED = {"amp": "&", "lt": "<", "gt": ">"}
_OWN_REFERENCES = (  # CR, LF and comma (in file names), "none" and the header's "C"
    ("&#13;", "\r"),
    ("&#10;", "\n"),
    ("&#44;", ","),
    ("&#110;", "n"),
    ("&#67;", "C"),
)
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


def escape_for_reading(text: str) -> str:
    """Untrusted text for what people and parent models read (briefs, answers,
    stdout): :func:`escape`, after control characters (an ANSI sequence in a data
    source's answer) are shown as U+FFFD."""
    return escape(printable(text))


def _free(text: str) -> str:
    """Free text inside a report: escaped, every line after the first indented, so
    that no line of it can begin a section."""
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
    for tag in ("tokens_used", "cost_usd", "turns", "parent_session_id", "overrun_s"):
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
        # The references lyra writes itself. Replacing these first cannot make or
        # break another reference: what they become is neither "&", "#", a digit
        # nor ";".
        for reference, character in _OWN_REFERENCES:
            if reference in text:
                text = text.replace(reference, character)
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
            closing = capy
            capy = text.rfind(_CAPY_CLOSE, 0, closing)
        else:
            closing = lyra
            lyra = text.rfind(_CLOSE, 0, closing)
        start = _after(lyra, capy)  # the region starts after the closing tag before it
        opening = text.rfind(_CAPY_OPEN if capybara else _OPEN, start, closing)
        if opening >= 0:
            return start, opening, closing, capybara
    return None


def _after(lyra: int, capy: int) -> int:
    """Just past the later of a lyra and a capybara-vibe closing tag (-1: none)."""
    if lyra > capy:
        return lyra + len(_CLOSE)
    return capy + len(_CAPY_CLOSE) if capy >= 0 else 0


def report_boundary(text: str, start: int = 0) -> int:
    """Where ``text`` may be cut without splitting a report, or -1.

    That is just past the last closing tag of a metadata block (of any format
    :func:`parse_report` reads) that ends after ``start``: a reader that
    appends to a buffer passes the length it had, and no tag is looked for
    twice.
    """
    lyra = text.rfind(_CLOSE, max(0, start - len(_CLOSE) + 1))
    capy = text.rfind(_CAPY_CLOSE, max(0, start - len(_CAPY_CLOSE) + 1))
    return -1 if lyra < 0 and capy < 0 else _after(lyra, capy)


def parse_report(text: str) -> TaskReport:
    """Parse the last report in ``text`` (lyra's, or capybara-vibe's).

    Raises :class:`~lyra.errors.ReportParseError`, and nothing else, when the
    text holds no report or a field has an impossible value.
    """
    if not isinstance(text, str):
        raise ReportParseError(f"expected report text, got {type(text).__name__}")
    if "\r" in text and "\r\n" in text:  # a CR alone is cheaper to look for
        text = text.replace("\r\n", "\n")  # raw CRs never come from the renderer
    report = _quick_report(text)
    if report is None:
        report = _general_report(text)
    if report is None:
        raise ReportParseError("no report: no metadata with a known status, no failure header")
    return report


def _general_report(text: str) -> TaskReport | None:
    """The last report in any layout (the last :func:`find_reports` gives, unless
    the last metadata block holds no report); ``None`` when there is none."""
    block = _last_block(text)
    if block is None:
        return _last_headerless(text, 0)
    after = block[2] + len(_CAPY_CLOSE if block[3] else _CLOSE)
    trailing = _last_headerless(text, after) if text.find(HEADER, after) >= 0 else None
    return trailing if trailing is not None else _parse_one(text, *block)


def find_reports(text: str) -> Iterator[TaskReport]:
    """Every well-formed report in a longer text (a transcript, a log), in order.

    A report that fails to parse is skipped; a failure report without a
    metadata block (as in the recovery guide) is found by its header line.
    """
    if "\r" in text and "\r\n" in text:
        text = text.replace("\r\n", "\n")
    start = searched = 0  # where the next region starts; text before `searched` is done
    for close in _ANY_CLOSE.finditer(text):
        closing = close.start()
        capybara = close[0] == _CAPY_CLOSE
        opening = text.rfind(_CAPY_OPEN if capybara else _OPEN, start, closing)
        if opening >= 0:  # else a stray closing tag: it only ends the region before it
            yield from _headerless_reports(text[searched:start])
            yield from _block_reports(text, start, opening, closing, capybara)
            searched = close.end()
        start = close.end()
    yield from _headerless_reports(text[searched:])


def _block_reports(
    text: str, start: int, opening: int, closing: int, capybara: bool
) -> Iterator[TaskReport]:
    """The report of one block, and the reports without metadata in its region."""
    try:
        report = _parse_one(text, start, opening, closing, capybara)
    except ReportParseError:
        report = None
    if report is None:
        yield from _headerless_reports(text[start:opening])
        return
    if report.status == "failed":  # earlier headers in the region are reports too
        header_at = _last_header(text, start, opening)
        yield from _headerless_reports(text[start : header_at or start])
    elif start == 0 and _more_reports(text, closing):
        # The first of several reports (a transcript): whatever came before it
        # may be anyone's words, so where its output begins is unknown.
        report = report.model_copy(update={"output": None})
    yield report


def _more_reports(text: str, closing: int) -> bool:
    """True when another report may follow the block that closes at ``closing``: a
    header line, or an opening tag with a closing tag after it (a stray closing tag
    alone is no report)."""
    after = closing + 1
    if _HEADER_LINE.search(text, after):
        return True
    for opening in (_OPEN, _CAPY_OPEN):
        at = text.find(opening, after)
        if at >= 0 and _ANY_CLOSE.search(text, at):
            return True
    return False


def _headerless_reports(region: str) -> Iterator[TaskReport]:
    """Failure reports without metadata, each from its header line to the next."""
    if HEADER not in region:
        return
    starts = [match.start() for match in _HEADER_LINE.finditer(region)]
    for begin, end in zip(starts, [*starts[1:], len(region)], strict=False):
        report = _headerless(region, begin, end)
        if report is not None:
            yield report


def _last_headerless(text: str, start: int) -> TaskReport | None:
    """The last of :func:`_headerless_reports` in ``text[start:]``, found from the end."""
    end = len(text)
    while (begin := _last_header(text, start, end)) is not None:
        report = _headerless(text, begin, end)
        if report is not None:
            return report
        end = begin
    return None


def _headerless(text: str, begin: int, end: int) -> TaskReport | None:
    """The failure report from the header line at ``begin`` to ``end`` (no metadata);
    ``None`` when a field has an impossible value."""
    message = _MESSAGE.match(text, begin, end)
    if message is not None and _BODY_LINE.search(text, message.end(), end) is None:
        # No section and no item follows the header: the report is its message.
        return _built({**_DEFAULTS, "status": "failed", "message": _unindent(message[1])})
    try:
        return _parse_one(text, begin, end, -1, False)
    except ReportParseError:
        return None


def _last_header(text: str, start: int, end: int) -> int | None:
    """Where the last line that starts with the header begins in ``text[start:end]``."""
    index = text.rfind(_LINE_HEADER, start, end)
    if index >= 0:
        return index + 1
    return start if text.startswith(HEADER, start, end) else None


def _parse_one(text: str, start: int, end: int, closing: int, capybara: bool) -> TaskReport | None:
    """The report of the region ``text[start:end]`` and of the metadata block that
    opens at ``end`` and closes at ``closing`` (-1: there is none).

    ``None`` when there is no report (no known status, no failure header);
    :class:`~lyra.errors.ReportParseError` when a field has an impossible value.
    """
    if closing < 0:
        block = None
    elif capybara:
        block = text[end + len(_CAPY_OPEN) : closing]
    else:
        report = _rendered(text, start, end, closing)
        if report is not None:
            return report
        block = text[end + len(_OPEN) : closing]
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


# -- lyra's own layout, read in one match ------------------------------------


def _quick_match(text: str) -> re.Match[str] | None:
    """The last report matched whole in the rendered layout, when it is lyra's own
    and only plain text follows it: ``_RENDERED_FAILURE`` from its header, or
    ``_RENDERED_SUCCESS`` from its block. ``None`` when it is not so.

    It finds what :func:`_last_block` and :func:`_last_header` would, with
    fewer scans of the text. A whole match leaves no room for another header
    line after the one it starts at; no closing tag of either kind may lie in
    the body it reads, nor a capybara-vibe one after it.
    """
    closing = text.rfind(_CLOSE)
    if closing < 0 or text.find(_CAPY_CLOSE, closing) >= 0:
        return None
    end = closing + len(_CLOSE)
    if text.find(HEADER, end) >= 0:
        return None  # a report without metadata may follow: the general reader looks
    failure = _RENDERED_FAILURE.fullmatch(text, 0, end) if text.startswith(HEADER) else None
    if failure is None and (at := text.rfind(_LINE_HEADER, 0, closing) + 1):
        failure = _RENDERED_FAILURE.fullmatch(text, at, end)
    if failure is not None and _no_closing_tag(text, failure.start(), failure.end("actions")):
        return failure
    opening = text.rfind(_OPEN, 0, closing)
    return _RENDERED_SUCCESS.fullmatch(text, opening, end) if opening >= 0 else None


def _no_closing_tag(text: str, start: int, end: int) -> bool:
    if text.find("</", start, end) < 0:  # one look settles it for a body lyra wrote
        return True
    return text.find(_CLOSE, start, end) < 0 and text.find(_CAPY_CLOSE, start, end) < 0


def _quick_report(text: str) -> TaskReport | None:
    """``parse_report``'s fast path (see :func:`_quick_match`)."""
    match = _quick_match(text)
    if match is None:
        return None
    if match.re is _RENDERED_FAILURE:
        return _failure_report(match)
    opening = match.start()
    start = _after(text.rfind(_CLOSE, 0, opening), text.rfind(_CAPY_CLOSE, 0, opening))
    return _success_report(match, _output(text, start, opening, False))


def _rendered(text: str, start: int, opening: int, closing: int) -> TaskReport | None:
    """The report of one region and lyra block in the rendered layout, else ``None``."""
    end = closing + len(_CLOSE)
    at = _last_header(text, start, opening)
    failure = None if at is None else _RENDERED_FAILURE.fullmatch(text, at, end)
    if failure is not None:
        return _failure_report(failure)
    success = _RENDERED_SUCCESS.fullmatch(text, opening, end)
    if success is None:
        return None
    return _success_report(success, _output(text, start, opening, False))


def _success_report(success: re.Match[str], output: str) -> TaskReport:
    session_id, attempt, duration, subject, tokens, cost, turns, parent, overrun, failed = _tags(
        *success.groups()
    )
    values = {
        **_DEFAULTS,
        "status": "completed",
        "session_id": session_id,
        "attempt": attempt,
        "duration": duration,
        "subject": subject,
        "output": output,
        "tokens_used": tokens,
        "cost_usd": cost,
        "turns": turns,
        "parent_session_id": parent,
        "failed_delegations": failed,
        "overrun_s": overrun,
    }
    return _built(values)


def _failure_report(failure: re.Match[str]) -> TaskReport:
    (
        message,
        _,
        duration,
        _,
        steps,
        files,
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
            "message": _unindent(message),
            "category": _CATEGORIES[category],
            "retryable": retryable == "true",
            "error_type": None if error_type is None else _ERROR_TYPES[error_type],
            "completed_steps": _items(steps, _STEP),
            "files_modified": _files(files),
            "blocked_on": None if blocked is None else _unindent(blocked) or None,
            "suggested_actions": _items(actions, _ACTION),
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
    return _built(values)


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
            tuple(_failed_delegation(value) for _, value in _TAG.findall(failed)) if failed else (),
        )
    except ValueError as exc:
        raise ReportParseError(f"malformed report: {exc}") from None


# -- any layout -------------------------------------------------------------


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
    for tag in ("cost_usd", "overrun_s"):
        if get(tag) is not None:
            fields[tag] = _float(meta[tag], tag)
    if get(_FAILED_DELEGATION):
        fields["failed_delegations"] = tuple(map(_failed_delegation, meta[_FAILED_DELEGATION]))


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
    message, category, duration, retryable, steps, files, blocked, actions = match.groups()
    return {
        "message": _unindent(message),
        "category": category.strip(),
        "duration": _float(duration, "duration"),
        "retryable": retryable == "Yes",
        "completed_steps": _items(steps, _STEP),
        "files_modified": _files(files),
        "blocked_on": None if blocked is None else _unindent(blocked) or None,
        "suggested_actions": _items(actions, _ACTION),
    }


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
    steps: list[str] = []
    actions: list[str] = []
    message = _MESSAGE.match(body)
    if message is not None:
        fields["message"] = _unindent(message[1])
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
    fields["completed_steps"] = tuple(map(_unindent, steps))
    fields["suggested_actions"] = tuple(map(_unindent, actions))
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


def _unindent(text: str) -> str:
    if "\n" in text:
        text = text.replace("\n" + _INDENT, "\n")
    return unescape(text) if "&" in text else text


def _items(block: str, between: str) -> tuple[str, ...]:
    """The items of a rendered list: every value's own lines are indented further."""
    if block == "  None\n":
        return ()
    items = block[4:-1].split(between)
    if "&" in block or "\n    " in block:
        return tuple(map(_unindent, items))
    return tuple(items)


def _files(raw: str, *, capybara: bool = False) -> tuple[str, ...]:
    if raw == "none" or (capybara and not raw):
        return ()
    names = raw.split(", ")
    return tuple(names) if capybara or "&" not in raw else tuple(map(unescape, names))


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


# -- building the model -----------------------------------------------------

# Every field the parser sets is already checked (status, the two enums,
# numbers) or a string, so the model is built without validating it again:
# BaseModel.model_construct would cost more than validation itself.
_DEFAULTS = {name: field.get_default() for name, field in TaskReport.model_fields.items()}
_EVERY_FIELD = set(_DEFAULTS)


def _report(fields: dict[str, Any]) -> TaskReport:
    """A report of values already checked, the others left at their defaults."""
    return _built({**_DEFAULTS, **fields})


def _built(values: dict[str, Any]) -> TaskReport:
    """A report of every field's value; the parser gives every field, so every
    field counts as set."""
    return assembled(TaskReport, values, _EVERY_FIELD.copy())


# -- one field at a time (the recovery guide's helpers) ------------------------
#
# Each takes report text (or a transcript ending in one), reads the last report
# as parse_report does and gives its field, and never raises: a success or no
# report gives None, False or an empty list, and so does a report parse_report
# rejects, unless it is in lyra's own layout, where a helper checks only the
# value it reads. A recovery loop calls several helpers on one report: they
# share one match of the rendered layout, remembered for the same text object
# (a short one only, so that no large transcript is kept alive), or, in any
# other layout, one parse.

_REMEMBER = 1 << 16
_remembered: tuple[object, re.Match[str] | TaskReport | None] = (None, None)
_Match = re.Match


def _last_failure(text: str) -> re.Match[str] | TaskReport | None:
    """The last report when it is a failure: its match in the rendered layout,
    or its parse in any other; ``None`` for a success, no report, or a report
    with an impossible field."""
    global _remembered
    last, found = _remembered
    if text is last:
        return found
    if not isinstance(text, str):
        return None
    normal = text.replace("\r\n", "\n") if "\r" in text and "\r\n" in text else text
    found = _quick_match(normal)
    if found is None:
        try:
            found = _general_report(normal)
        except ReportParseError:
            found = None
        if found is not None and found.status != "failed":
            found = None
    elif found.re is not _RENDERED_FAILURE:
        found = None
    if len(text) <= _REMEMBER:
        _remembered = (text, found)
    return found


def extract_category(text: str) -> FailureCategory | None:
    """The failure category of the last report, or ``None`` for a success or no report."""
    found = _last_failure(text)
    if isinstance(found, _Match):
        category: FailureCategory | None = _CATEGORIES.get(found["failure_category"])
        return category
    return None if found is None else found.category


def is_retryable(text: str) -> bool:
    """True when the last report is a failure marked retryable."""
    found = _last_failure(text)
    if isinstance(found, _Match):
        return found["retryable"] == "true"
    return found is not None and bool(found.retryable)


def extract_completed_steps(text: str) -> list[str]:
    """The steps the child completed before it failed."""
    found = _last_failure(text)
    if isinstance(found, _Match):
        return list(_items(found["steps"], _STEP))
    return [] if found is None else list(found.completed_steps)


def extract_files_modified(text: str) -> list[str]:
    """The files the child modified before it failed."""
    found = _last_failure(text)
    if isinstance(found, _Match):
        return list(_files(found["files"]))
    return [] if found is None else list(found.files_modified)


def extract_blocker(text: str) -> str | None:
    """What blocked the child, or ``None``."""
    found = _last_failure(text)
    if isinstance(found, _Match):
        blocked = found["blocked"]
        return None if blocked is None else _unindent(blocked) or None
    return None if found is None else found.blocked_on


def extract_suggested_actions(text: str) -> list[str]:
    """The suggested recovery actions (text for a human; never executed)."""
    found = _last_failure(text)
    if isinstance(found, _Match):
        return list(_items(found["actions"], _ACTION))
    return [] if found is None else list(found.suggested_actions)
