"""Finding: every report in a longer text (a transcript, a log), in order.

One pass over the closing tags: each with an opening tag of its kind since the
closing tag before it ends a report, whose region is read as
:func:`parse_report` reads the last one; between blocks, failure reports
without metadata are found by their header lines. Every region is read once,
so finding is linear in the text.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

from lyra.delegation._models import TaskReport
from lyra.delegation._report import _capybara as capybara
from lyra.delegation._report._blocks import ANY_CLOSE, HEADER_LINE, last_header
from lyra.delegation._report._parse import HEADED, headerless, message_only, parse_one
from lyra.delegation._report._syntax import HEADER, OPEN
from lyra.errors import ReportParseError


def find_reports(text: str) -> Iterator[TaskReport]:
    """Every well-formed report in a longer text (a transcript, a log), in order.

    A report that fails to parse is skipped; a failure report without a
    metadata block (as in the recovery guide) is found by its header line.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    start = searched = 0  # where the next region starts; text before `searched` is done
    for close in ANY_CLOSE.finditer(text):
        closing = close.start()
        is_capybara = close[0] == capybara.CLOSE
        opening = text.rfind(capybara.OPEN if is_capybara else OPEN, start, closing)
        if opening >= 0:  # else a stray closing tag: it only ends the region before it
            yield from _headerless_reports(text[searched:start])
            yield from _block_reports(text, start, opening, closing, is_capybara)
            searched = close.end()
        start = close.end()
    yield from _headerless_reports(text[searched:])


def _block_reports(
    text: str, start: int, opening: int, closing: int, is_capybara: bool
) -> Iterator[TaskReport]:
    """The report of one block, and the reports without metadata in its region."""
    try:
        report = parse_one(text, start, opening, closing, is_capybara)
    except ReportParseError:
        report = None
    if report is None:
        yield from _headerless_reports(text[start:opening])
        return
    if report.status == "failed":  # earlier headers in the region are reports too
        header_at = last_header(text, start, opening)
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
    if HEADER_LINE.search(text, after):
        return True
    for opening in (OPEN, capybara.OPEN):
        at = text.find(opening, after)
        if at >= 0 and ANY_CLOSE.search(text, at):
            return True
    return False


def _headerless_reports(region: str) -> Iterator[TaskReport]:
    """Failure reports without metadata, each from its header line to the next."""
    if HEADER not in region:
        return
    header = None
    for following in chain(HEADED.finditer(region), (None,)):
        if header is not None:
            end = len(region) if following is None else following.start()
            if end - header.end() <= 1:  # nothing but a newline after the message: no section
                yield message_only(header[1])
            elif (report := headerless(region, header.start(), end)) is not None:
                yield report
        header = following
