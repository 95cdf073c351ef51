"""Report parsing takes time linear in its input, whatever a child wrote (issue 11).

Each case is a megabyte of text built to make a parser rescan what it has
read, with one real report in the middle. Every reader must take well under
two seconds for it (the benchmark's target is 0.1 s), and doubling the text
must not much more than double the time.
"""

from __future__ import annotations

import gc
import io
import time
from collections.abc import Callable

import pytest

from lyra import (
    FailureCategory,
    TaskReport,
    extract_blocker,
    extract_category,
    extract_completed_steps,
    extract_files_modified,
    extract_suggested_actions,
    find_reports,
    is_retryable,
    parse_report,
    render_report,
)
from lyra.errors import ReportParseError
from lyra.logs import iter_events, iter_reports

MB = 1 << 20

# name: (text before the repeated unit, the unit)
ADVERSARIAL = {
    "unclosed metadata tags": ("", "<task_metadata>\n"),
    "unclosed capybara tags": ("", "<execution_summary>\n"),
    "nested tags": ("", "<task_metadata><status><retryable>failed"),
    "stray closing tags": ("", "</task_metadata>"),
    "empty metadata blocks": ("", "<task_metadata></task_metadata>\n"),
    "headers and open tags": ("", "Child agent failed: x\n<task_metadata>\n"),
    "report headers": ("", "Child agent failed: x\n"),
    "runs of <": ("", "<"),
    "runs of &": ("", "&"),
    "entities": ("", "&amp;&#13;&lt;&#99999999;&"),
    "CRLF": ("", "\r\n"),
    "lone CR": ("", "\r"),
    "one huge line": ("", "x"),
    "steps": ("Child agent failed: x\n\nWork completed before failure:\n", "  ✓ step\n"),
    "actions": ("Child agent failed: x\n\nSuggested recovery actions:\n", "  • act\n"),
    "continuation lines": ("Child agent failed: x\nBlocked on: y\n", "    more\n"),
    "section heads": ("Child agent failed: x\n", "Category: timeout\nRetryable: Yes\n"),
    "metadata tags": ("<task_metadata>\n", "  <status>failed</status>\n"),
    "blank lines": ("", "\n"),
    "lines of junk": ("", "x\n"),
    "broken JSON lines": ("", '{"event": "delegation_failed", \n'),
}
REAL = render_report(
    TaskReport(
        status="failed",
        session_id="child-real",
        message="boom",
        category=FailureCategory.PARTIAL,
        retryable=True,
        duration=1.5,
        completed_steps=("fetched",),
        files_modified=("a.py",),
        blocked_on="the disk",
        suggested_actions=("retry",),
    )
)


def _junk(name: str, size: int) -> str:
    head, unit = ADVERSARIAL[name]
    return head + unit * ((size - len(head)) // len(unit))


def _text(name: str, size: int) -> str:
    """Adversarial text around one real report: the junk after it is what the last
    block is looked for in, the junk before it what its region is."""
    return _junk(name, size // 2) + "\n" + REAL + _junk(name, size // 2)


def _quietly(read: Callable[[str], object]) -> Callable[[str], object]:
    def run(text: str) -> object:
        try:
            return read(text)
        except ReportParseError:
            return None

    return run


READERS: dict[str, Callable[[str], object]] = {
    "parse_report": _quietly(parse_report),
    "find_reports": lambda text: list(find_reports(text)),
    "extract_category": extract_category,
    "is_retryable": is_retryable,
    "extract_completed_steps": extract_completed_steps,
    "extract_files_modified": extract_files_modified,
    "extract_blocker": extract_blocker,
    "extract_suggested_actions": extract_suggested_actions,
    "lyra.logs.iter_reports": lambda text: list(iter_reports(io.StringIO(text))),
    "lyra.logs.iter_events": lambda text: list(iter_events(io.BytesIO(text.encode()))),
}


def _seconds(read: Callable[[str], object], text: str) -> float:
    """The parser's own time: the collector is paused, since one full collection walks
    the whole test process (whatever the input) when tens of thousands of reports
    are built."""
    gc.disable()
    try:
        started = time.perf_counter()
        read(text)
        return time.perf_counter() - started
    finally:
        gc.enable()


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("kind", ADVERSARIAL)
def test_adversarial_text_parses_in_linear_time(kind: str, reader: str) -> None:
    """A megabyte of adversarial text takes under 2 s, and four times as much text takes
    about four times as long: under 8× (a quadratic parser takes 16×, so a busy machine's
    noise, which slowed a 2× comparison past 3×, cannot pass one or fail a linear one)."""
    read, quarter_mb, one_mb = READERS[reader], _text(kind, MB // 4), _text(kind, MB)
    quarter = whole = float("inf")
    for _ in range(5):  # a busy machine can slow a pass; a quadratic parser fails every one
        quarter = min(quarter, _seconds(read, quarter_mb))
        whole = min(whole, _seconds(read, one_mb))
        if whole < 2.0 and whole < 8 * quarter + 0.1:
            break
    assert whole < 2.0, f"{reader} took {whole:.2f} s for 1 MB of {kind}"
    assert whole < 8 * quarter + 0.1, (
        f"{reader}: {quarter:.3f} s for 0.25 MB, {whole:.3f} s for 1 MB"
    )


@pytest.mark.parametrize("kind", ADVERSARIAL)
def test_the_real_report_after_adversarial_text_is_read(kind: str) -> None:
    """Whatever precedes it, the last report is the one parse_report and find_reports give."""
    text = _junk(kind, 1 << 14) + "\n" + REAL
    assert parse_report(text).session_id == "child-real"
    assert list(find_reports(text))[-1].session_id == "child-real"
