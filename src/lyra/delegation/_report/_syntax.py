"""The lexical rules of lyra's report format, shared by the renderer and the readers.

The markers that start a report and open and close its metadata, the order of
the metadata tags, how a multi-line value continues, and the escaping that
keeps untrusted text from forging any of them: each rule is written here once,
and both sides use it.
"""

from __future__ import annotations

import re

from lyra._text import printable

HEADER = "Child agent failed:"
"""The first line of every failure report starts with this."""
LINE_HEADER = "\n" + HEADER
"""A header at the start of a line (anywhere but at the start of the text)."""
OPEN, CLOSE = "<task_metadata>", "</task_metadata>"
"""A lyra report's metadata block: every lyra report ends with ``CLOSE``."""
INDENT = "    "
"""What a continuation line of a multi-line value starts with."""
FAILURE_TAGS = {"error_type": "error_type", "retry_after_s": "retry_after", "question": "question"}
"""Metadata of a failure after ``failure_category`` and ``retryable``: tag → field."""
COMMON_TAGS = {"attempt": "attempt", "duration_s": "duration", "subject": "subject"}
"""Metadata of every report, after the above: tag → field. ``attempt`` is always
written, the others when they have a value."""
USAGE_TAGS = {
    "tokens_used": "tokens_used",
    "cost_usd": "cost_usd",
    "turns": "turns",
    "tool_calls": "tool_calls",
    "parent_session_id": "parent_session_id",
    "overrun_s": "overrun_s",
    "child": "child",
}
"""After those, written only when charged, nested, late or after a fallback (DESIGN
§12, §5): tag → field."""
STEP, ACTION = "\n  ✓ ", "\n  • "
"""How a completed step and a suggested action begin (each on a line of its own)."""
NO_ITEMS = "  None\n"
"""The line of an empty list of steps or actions."""
FAILED_DELEGATION = "failed_delegation"
"""Then one tag per failed nested delegation (``session category error_type``)."""
FALLBACK = "fallback"
"""The last tags: one per child a fallback chain moved past (``child: why``)."""
TAG = re.compile(r"<([A-Za-z_][\w.-]*)>([^<]*)</\1>")
"""A metadata tag and its value, in either format."""
EMPTY_FILES = "none"
"""``Files modified:`` of a report that modified none (a file named so is escaped)."""

_CONTINUED = "\n" + INDENT  # a value's next line
_DEFUSED_HEADER = "&#67;" + HEADER[1:]  # the header's "C" as a character reference
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_FILE_ESCAPES = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;", "\n": "&#10;", ",": "&#44;"}
)
_UNSAFE = re.compile("[&<>\r]")
"""What :func:`escape` changes (searched first: most values hold none, and a search
is several times quicker than ``str.translate``)."""
_ENTITY = re.compile(r"&(amp|lt|gt|#\d{1,7});")
_NAMED = {"amp": "&", "lt": "<", "gt": ">"}


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
    escaped = text.translate(_ESCAPES) if _UNSAFE.search(text) else text
    return escaped.replace(HEADER, _DEFUSED_HEADER) if HEADER in escaped else escaped


def escape_for_reading(text: str) -> str:
    """Untrusted text for what people and parent models read (briefs, answers,
    stdout): :func:`escape`, after control characters (an ANSI sequence in a data
    source's answer) are shown as U+FFFD."""
    return escape(printable(text))


def unescape(text: str) -> str:
    """Undo :func:`escape` (and the numeric references used for files)."""
    return references(text) if "&" in text else text


def references(text: str) -> str:
    """:func:`unescape` of a text known to hold an ``&``."""
    if "#" in text and "&#" in text:  # (one character is much quicker to look for)
        # The references lyra writes itself: CR, LF and comma (in file names),
        # "none" and the header's "C". Replacing these first cannot make or break
        # another reference: what they become is neither "&", "#", a digit nor ";".
        text = (
            text.replace("&#13;", "\r")
            .replace("&#10;", "\n")
            .replace("&#44;", ",")
            .replace("&#110;", "n")
            .replace("&#67;", "C")
        )
        if "&#" in text:  # another numeric reference, from some other writer
            return _ENTITY.sub(_entity, text)
        if "&" not in text:
            return text
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")  # "&amp;" last


def _entity(match: re.Match[str]) -> str:
    name = match.group(1)
    if name in _NAMED:
        return _NAMED[name]
    code = int(name[1:])
    return chr(code) if code <= 0x10FFFF else match.group(0)


def indented(text: str) -> str:
    """Free text inside a report: escaped, every line after the first indented, so
    that no line of it can begin a section."""
    return escape(text).replace("\n", "\n" + INDENT)


def unindented(text: str) -> str:
    """The free text :func:`indented` wrote."""
    if "\n" in text:
        text = text.replace(_CONTINUED, "\n")
    return references(text) if "&" in text else text


def file_list(names: tuple[str, ...]) -> str:
    """``Files modified:``'s value: the names escaped (commas and newlines too),
    separated by ``", "``; :data:`EMPTY_FILES` for none."""
    return ", ".join(map(_file, names)) if names else EMPTY_FILES


def _file(name: str) -> str:
    escaped = name.translate(_FILE_ESCAPES)
    return "&#110;one" if escaped == EMPTY_FILES else escaped  # "none" means an empty list


def files(raw: str) -> tuple[str, ...]:
    """The names :func:`file_list` wrote."""
    if raw == EMPTY_FILES:
        return ()
    names = raw.split(", ")
    if "&" not in raw:
        return tuple(names)
    return tuple([references(name) if "&" in name else name for name in names])
