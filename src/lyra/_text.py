"""Untrusted text made safe to keep: any object described without raising, any
string made encodable, any JSON made unreadable as report metadata.

Child output, exception messages and data-source answers are untrusted: an
exception whose ``__str__`` raises, a lone surrogate from a JSON ``\\ud800``
escape, or a ``<task_metadata>`` tag inside a protein description must never
escape as an error nor be read back as metadata.
"""

from __future__ import annotations

from typing import Any

_JSON_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def safe_str(value: object) -> str:
    """``str(value)``, else its ``repr``, else its type's name: never raises, always
    valid text (for exceptions and objects that cannot describe themselves)."""
    if type(value) is str and value.isascii():
        return value  # (every tool name, every step: no call costs more than this)
    for describe in (str, repr):
        try:
            text = describe(value)
        except Exception:  # noqa: BLE001 - hostile __str__/__repr__: try the next way
            continue
        if isinstance(text, str):
            return valid_text(text)
    return f"<{type_name(value)} that cannot describe itself>"


MAX_MESSAGE = 4000
"""Characters of an error's text a report and an event keep: its beginning and its end,
the middle said to be left out (a runaway message is read by a parent model)."""


def clipped(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text``, or its first and last characters with how many were left out between
    them, when it is longer than ``limit``."""
    if len(text) <= limit:
        return text
    tail = limit // 5
    head = limit - tail
    return f"{text[:head]} … [{len(text) - limit:,} characters left out] … {text[-tail:]}"


def type_name(value: object) -> str:
    """The name of ``value``'s class (a hostile metaclass cannot make it raise)."""
    try:
        name = type(value).__name__
    except Exception:  # noqa: BLE001 - a metaclass may override __name__
        return "object"
    return str.__str__(name) if isinstance(name, str) else "object"


def qualified_type_name(value: object) -> str:
    """``module.Class`` of ``value`` (a repr can run to kilobytes)."""
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def valid_text(text: str) -> str:
    """``text`` as a plain ``str`` (a subclass may override any method) with every
    lone surrogate replaced by U+FFFD, so that it can be written as UTF-8 (a file,
    JSON); the same object when it already is so."""
    if type(text) is not str:
        text = str.__str__(text)  # str's own method: a plain copy, whatever the subclass
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Through UTF-16: a surrogate pair becomes its character, a lone one U+FFFD.
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def valid_data(value: Any) -> Any:
    """JSON-like data (dicts, lists, strings) with every string made :func:`valid_text`."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_data(key): valid_data(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        if all(type(item) in _PLAIN for item in value):
            return value  # numbers only (a per-residue track): nothing to make valid
        return type(value)(valid_data(item) for item in value)
    return value


_PLAIN = frozenset({int, float, bool, type(None)})


_CONTROLS = dict.fromkeys([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F], "\ufffd")
_CONTROLS.update(dict.fromkeys(range(0x80, 0xA0), "\ufffd"))
_NO_CONTROLS = str.maketrans(_CONTROLS)


def printable(text: str) -> str:
    """``text`` for a terminal: control characters other than newline, tab and
    carriage return (an ANSI escape sequence from a data source, a bell) shown
    as U+FFFD, so untrusted text cannot move the cursor or recolour the screen."""
    return text.translate(_NO_CONTROLS)


def json_safe(json_text: str) -> str:
    """JSON text with ``<``, ``>`` and ``&`` written as ``\\u`` escapes: the same data
    for a JSON parser, and nothing a report parser could take for a metadata tag."""
    return json_text.translate(_JSON_SAFE)
