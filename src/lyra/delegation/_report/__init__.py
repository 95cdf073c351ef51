"""The report text format (DESIGN §4): the only part of lyra that knows it.

Child text is untrusted. Every value written goes through :func:`escape`, and
free text that spans lines continues on lines indented by four spaces, so no
value can begin a section header, a report or a metadata tag. The parser reads
metadata only from the last ``<task_metadata>`` block and undoes exactly that
escaping, so ``parse_report(render_report(r)) == r`` for any strings.

Reports written by other tools parse too, and fields they lack stay ``None``:
failure reports without metadata (the recovery guide's examples), and the
sub-agent reports of capybara-vibe, where lyra's format comes from.

Parsing is linear in the text, whatever the text holds: blocks are found with
``str.find``/``rfind`` over ranges that never overlap (every closing tag ends
a region), and every regex reads each character a bounded number of times.

One module per role, each rule of the format in one of them:

- ``_syntax``: markers, tag order, indentation and escaping, shared by both sides;
- ``_render``: :func:`render_report`;
- ``_blocks``: where reports are in a text (blocks, header lines, safe cuts);
- ``_layout``: lyra's own layout read in one match, the fast path;
- ``_parse``: :func:`parse_report` and the general reader of any layout;
- ``_find``: :func:`find_reports`, every report of a transcript or a log;
- ``_helpers``: the recovery guide's one-field helpers;
- ``_capybara``: capybara-vibe's formats;
- ``_values``: strings read to checked field values, and the model built.
"""

from lyra.delegation._report._blocks import report_boundary
from lyra.delegation._report._find import find_reports
from lyra.delegation._report._helpers import (
    extract_blocker,
    extract_category,
    extract_completed_steps,
    extract_files_modified,
    extract_suggested_actions,
    is_retryable,
)
from lyra.delegation._report._parse import parse_report
from lyra.delegation._report._render import render_report
from lyra.delegation._report._syntax import CLOSE as METADATA_CLOSE
from lyra.delegation._report._syntax import HEADER, escape, escape_for_reading, unescape

__all__ = [
    "HEADER",
    "METADATA_CLOSE",
    "escape",
    "escape_for_reading",
    "extract_blocker",
    "extract_category",
    "extract_completed_steps",
    "extract_files_modified",
    "extract_suggested_actions",
    "find_reports",
    "is_retryable",
    "parse_report",
    "render_report",
    "report_boundary",
    "unescape",
]
