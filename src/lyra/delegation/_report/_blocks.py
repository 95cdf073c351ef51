"""Where reports are in a longer text: metadata blocks, header lines, regions, safe cuts.

A metadata block of either format (lyra's ``<task_metadata>``, capybara-vibe's
``<execution_summary>``) ends a report; the text before it, back to the end of
the block before it, is its region: the report's body (a failure) or output (a
success). A failure report without metadata starts at a header line. Every
search here covers text no other search covers, so locating is linear in the
text however many stray or unclosed tags it holds.
"""

from __future__ import annotations

import re

from lyra.delegation._report import _capybara as capybara
from lyra.delegation._report._syntax import CLOSE, HEADER, LINE_HEADER, OPEN, unescape

ANY_CLOSE = re.compile(r"</(?:task_metadata|execution_summary)>")
"""The closing tag of either kind of block."""
HEADER_LINE = re.compile(r"(?m)^Child agent failed:")
"""A line that starts a failure report."""

Block = tuple[int, int, int, bool]
"""(region start, region end = where the block opens, where it closes, whether it
is a capybara-vibe ``<execution_summary>``)."""


def last_block(text: str) -> Block | None:
    """The last metadata block of either kind, or ``None``.

    Closing tags are visited from the end; each is paired with the last
    opening tag of its kind after the closing tag before it (a closing tag
    without one is a stray and ends only the text before it). Every ``rfind``
    covers text no other one covers, so this is linear however many stray or
    unclosed tags the text holds.
    """
    lyra, capy = text.rfind(CLOSE), text.rfind(capybara.CLOSE)
    while lyra >= 0 or capy >= 0:
        is_capybara = capy > lyra
        if is_capybara:
            closing = capy
            capy = text.rfind(capybara.CLOSE, 0, closing)
        else:
            closing = lyra
            lyra = text.rfind(CLOSE, 0, closing)
        start = region_start(lyra, capy)  # the region starts after the closing tag before it
        opening = text.rfind(capybara.OPEN if is_capybara else OPEN, start, closing)
        if opening >= 0:
            return start, opening, closing, is_capybara
    return None


def block_end(closing: int, is_capybara: bool) -> int:
    """Just past a block that closes at ``closing``."""
    return closing + len(capybara.CLOSE if is_capybara else CLOSE)


def region_start(lyra: int, capy: int) -> int:
    """Just past the later of a lyra and a capybara-vibe closing tag (-1: none)."""
    if lyra > capy:
        return lyra + len(CLOSE)
    return capy + len(capybara.CLOSE) if capy >= 0 else 0


def region_before(text: str, opening: int) -> int:
    """Where the region of the block that opens at ``opening`` starts."""
    if text.find("<", 0, opening) < 0:  # one look settles it for text lyra escaped
        return 0
    return region_start(text.rfind(CLOSE, 0, opening), text.rfind(capybara.CLOSE, 0, opening))


def report_boundary(text: str, start: int = 0) -> int:
    """Where ``text`` may be cut without splitting a report, or -1.

    That is just past the last closing tag of a metadata block (of any format
    :func:`parse_report` reads) that ends after ``start``: a reader that
    appends to a buffer passes the length it had, and no tag is looked for
    twice.
    """
    lyra = text.rfind(CLOSE, max(0, start - len(CLOSE) + 1))
    capy = text.rfind(capybara.CLOSE, max(0, start - len(capybara.CLOSE) + 1))
    return -1 if lyra < 0 and capy < 0 else region_start(lyra, capy)


def last_header(text: str, start: int, end: int) -> int | None:
    """Where the last line that starts with the header begins in ``text[start:end]``."""
    index = text.rfind(LINE_HEADER, start, end)
    if index >= 0:
        return index + 1
    return start if text.startswith(HEADER, start, end) else None


def output(text: str, start: int, end: int, is_capybara: bool) -> str:
    """The output of a success whose region is ``text[start:end]``."""
    if text.startswith("\n\n", end - 2, end) and end - 2 >= start:
        end -= 2  # the blank line before the block
    found = text[start:end]
    if start > 0:  # after an earlier report: the newline that separates them
        found = found.lstrip("\n")
    return found if is_capybara else unescape(found)
