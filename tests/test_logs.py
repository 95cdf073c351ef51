"""`lyra logs`: reading event logs and raw reports, statistics, the HTML page, timeouts."""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import itertools
import json
import os
import random
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from types import GeneratorType
from typing import Any

import anyio
import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

import lyra.logs
from lyra import ChildContext, Supervisor, TaskReport, find_reports, render_report
from lyra.cli._logging import events_to
from lyra.cli._logs_command import register
from lyra.logs import (
    Event,
    ReadStats,
    _html,
    _read,
    _stats,
    collect_stats,
    compute_stats,
    iter_events,
    iter_reports,
    normalize_blocker,
    parse_since,
    read_events,
    subject_kind,
    suggest_timeout,
)

T0 = datetime(2026, 1, 31, 12, 0, 0, tzinfo=UTC)


# -- helpers ---------------------------------------------------------------------------


def run_cli(argv: list[str]) -> int:
    """Run ``lyra logs …`` through a parser built the way the CLI registry builds it."""
    parser = argparse.ArgumentParser(prog="lyra")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    status: int = args.run(args)
    return status


_SESSIONS = itertools.count(1)


def event_line(name: str, at: float = 0.0, **fields: Any) -> str:
    """One event line, ``at`` seconds after :data:`T0`, of a new session unless given."""
    data = {
        "session_id": fields.pop("session_id", f"child-{next(_SESSIONS):012x}"),
        "subject": fields.pop("subject", None),
        "attempt": fields.pop("attempt", 1),
        **fields,
        "event": name,
        "level": "info",
        "timestamp": (T0 + timedelta(seconds=at)).isoformat().replace("+00:00", "Z"),
    }
    return json.dumps(data) + "\n"


def failed(at: float = 0.0, category: str = "tool_error", **fields: Any) -> str:
    """A ``delegation_failed`` line with sensible defaults (a timeout's is the deadline's)."""
    error_type = "timeout" if category == "timeout" else "unknown"
    defaults = {"retryable": False, "error_type": error_type, "blocked_on": "boom", "duration": 1.0}
    return event_line("delegation_failed", at, category=category, **{**defaults, **fields})


def completed(at: float = 0.0, duration: float = 1.0, **fields: Any) -> str:
    """A ``delegation_completed`` line."""
    return event_line("delegation_completed", at, duration=duration, **fields)


def write(path: Path, *lines: str) -> Path:
    """Write ``lines`` to ``path`` and return it."""
    path.write_text("".join(lines), encoding="utf-8")
    return path


# -- a log written by real delegations ---------------------------------------------------


async def _scenario(reports: list[str]) -> None:
    """Eight delegations: one recovery, two timeouts, two missing modules, a blocker, a blank."""

    async def ok(prompt: str, ctx: ChildContext) -> str:
        ctx.step("Fetched summary")
        return f"done: {prompt}"

    def missing(module: str) -> Any:
        async def child(prompt: str, ctx: ChildContext) -> str:
            raise ModuleNotFoundError(f"No module named '{module}'", name=module)

        return child

    async def slow(prompt: str, ctx: ChildContext) -> str:
        ctx.step("Fetched summary")
        await anyio.sleep(10)
        return "never"

    async def blocked(prompt: str, ctx: ChildContext) -> str:
        ctx.block("missing_context", "Need the organism for P04637")
        return "never"

    plan: list[tuple[Any, str, str | None, int, float]] = [
        (missing("bcrypt"), "Analyze P04637", "P04637", 1, 5.0),
        (ok, "Analyze P04637", "P04637", 2, 5.0),
        (slow, "Analyze Q8I3H7", "Q8I3H7", 1, 0.05),
        (slow, "Analyze Q8I3H7", "Q8I3H7", 2, 0.1),
        (ok, "Analyze P69905", "P69905", 1, 5.0),
        (missing("numpy"), "Analyze XXXXX", "XXXXX", 1, 5.0),
        (blocked, "Summarise the organism", None, 1, 5.0),
        (ok, "", None, 1, 5.0),
    ]
    for child, prompt, subject, attempt, timeout in plan:
        result = await Supervisor(child).delegate(
            prompt, timeout=timeout, subject=subject, attempt=attempt
        )
        reports.append(result.report)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An event log and a transcript of the same eight real delegations."""
    folder = tmp_path_factory.mktemp("run")
    events, transcript = folder / "events.jsonl", folder / "transcript.txt"
    reports: list[str] = []
    with events_to(events):
        anyio.run(_scenario, reports)
    noise = "parent: delegating the next protein\n"
    transcript.write_text(noise + noise.join(r + "\n" for r in reports), encoding="utf-8")
    return events, transcript


REAL_EXPECTED: dict[str, Any] = {
    "delegations": 8,
    "completed": 2,
    "failed": 6,
    "by_category": {
        "timeout": 2,
        "missing_context": 1,
        "tool_error": 2,
        "invalid_task": 1,
        "partial": 0,
    },
    "retryable": 4,
    "top_blockers": [
        ["ModuleNotFoundError: No module named '<name>'", 2],
        ["Time limit insufficient", 2],
        ["Empty prompt", 1],
        ["Need the organism for <id>", 1],
    ],
    "recovered": 1,
    "failure_rate": 0.75,
    # six tasks: P04637 (recovered), Q8I3H7, P69905, XXXXX and two without a subject
    "tasks": 6,
    "tasks_completed": 2,
    "tasks_failed": 4,
    "tasks_by_category": {
        "timeout": 1,
        "missing_context": 1,
        "tool_error": 1,
        "invalid_task": 1,
        "partial": 0,
    },
    "malformed_lines": 0,
}


@pytest.mark.parametrize(("field", "expected"), sorted(REAL_EXPECTED.items()))
def test_stats_of_a_real_event_log(real_run: tuple[Path, Path], field: str, expected: Any) -> None:
    """Statistics of a log written by real delegations have the exact expected numbers."""
    stats = collect_stats([real_run[0]]).model_dump(mode="json")
    assert stats[field] == expected


@pytest.mark.parametrize(
    ("field", "expected"),
    [(k, v) for k, v in sorted(REAL_EXPECTED.items()) if k != "malformed_lines"],
)
def test_raw_reports_give_the_same_numbers(
    real_run: tuple[Path, Path], field: str, expected: Any
) -> None:
    """A transcript of the same delegations' reports yields the same statistics as the events."""
    stats = collect_stats([real_run[1]])
    assert (stats.events, stats.reports) == (0, 8)
    assert stats.model_dump(mode="json")[field] == expected


def test_cli_json_holds_the_design_fields(
    real_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``lyra logs stats --json`` prints DESIGN §6's fields with the exact numbers."""
    assert run_cli(["logs", "stats", str(real_run[0]), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    design = ("delegations", "completed", "failed", "by_category", "retryable", "top_blockers")
    assert {k: printed[k] for k in (*design, "recovered")} == {
        k: REAL_EXPECTED[k] for k in (*design, "recovered")
    }


@pytest.mark.parametrize(
    "argv",
    [["stats", "--by", "subject"], ["suggest-timeout", "--min-samples", "1"]],
    ids=["by subject", "suggest-timeout"],
)
def test_what_the_logs_hold_cannot_drive_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """'lyra logs prints terminal escape sequences from the log as-is': a subject or an
    error that clears the screen and prints "all tasks completed" in red did so through
    the tables of ``lyra logs``."""
    from lyra import events

    hostile = "\x1b]0;owned\x07\x1b[2J\x1b[31mFAKE: all tasks completed\x1b[0m"
    path = tmp_path / "events.jsonl"
    events.configure(path)
    try:
        for n, error in enumerate([hostile, None]):
            fields = {"session_id": f"s{n}", "subject": hostile, "attempt": 1, "duration": 0.5}
            if error is None:
                events.info(events.DELEGATION_COMPLETED, **fields)
                continue
            failure = {"category": "tool_error", "error_type": "unknown", "blocked_on": error}
            events.info(events.DELEGATION_FAILED, retryable=False, **failure, **fields)
    finally:
        events.configure()
    run_cli(["logs", *argv, str(path)])
    printed = capsys.readouterr().out
    assert "FAKE: all tasks completed" in printed
    assert "\x1b" not in printed
    assert "\x07" not in printed


@pytest.mark.parametrize(
    "line",
    [
        r"^delegations\s+8$",
        r"^failed\s+6 \(75\.0% of 8\)$",
        r"^recovered\s+1$",
        r"^timeout\s+2\s+33%",
        r"^ModuleNotFoundError: No module named '<name>'\s+2$",
    ],
)
def test_cli_table_is_readable(
    real_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str], line: str
) -> None:
    """Without ``--json`` the statistics print as aligned text rows."""
    assert run_cli(["logs", "stats", str(real_run[0])]) == 0
    assert re.search(line, capsys.readouterr().out, re.MULTILINE)


def test_by_subject_breakdown_of_a_real_log(
    real_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--by subject`` lists each subject's finished delegations and failures."""
    assert run_cli(["logs", "stats", str(real_run[0]), "--json", "--by", "subject"]) == 0
    groups = json.loads(capsys.readouterr().out)["by"]["groups"]
    rows = [(g["key"], g["delegations"], g["failed"], g["retryable"]) for g in groups]
    assert rows == [
        ("(none)", 2, 2, 0),
        ("Q8I3H7", 2, 2, 2),
        ("P04637", 2, 1, 1),
        ("XXXXX", 1, 1, 1),
        ("P69905", 1, 0, 0),
    ]


# -- the HTML page ------------------------------------------------------------------------


class _Page(HTMLParser):
    """Collects the page's bars and marked cells, and anything that loads from elsewhere."""

    def __init__(self) -> None:
        super().__init__()
        self.bars: dict[str, dict[tuple[str, str], int]] = {}
        self.fields: dict[str, Any] = {}
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if "src" in a or "href" in a:
            self.external.append(tag)
        if tag == "rect" and "data-value" in a:
            chart = self.bars.setdefault(str(a["data-chart"]), {})
            chart[(str(a["data-key"]), str(a["data-series"]))] = int(str(a["data-value"]))
        if "data-field" in a:
            self.fields[str(a["data-field"])] = json.loads(str(a["data-value"]))


def _at(data: Any, path: str) -> Any:
    """The value at a dotted path of the ``--json`` output."""
    for key in path.split("."):
        data = data[key]
    return data


@pytest.fixture(scope="module")
def spend_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log whose attempts were charged: completed, timed out, failed, nested, cancelled."""
    usage = {"tokens_used": 1200, "input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.0042}
    usage["turns"] = 2
    lines = [
        completed(0, subject="P04637", task_id="t1", **usage),
        failed(1, "timeout", subject="Q8I3H7", task_id="t2", **usage),
        failed(2, "timeout", subject="Q8I3H7", task_id="t2", attempt=2, **usage),
        failed(3, "tool_error", subject="XXXXX", task_id="t3", tokens_used=50, cost_usd=1.25),
        completed(4, subject="P69905", task_id="t4", parent_session_id="child-x", **usage),
        failed(5, "", subject="P69905", task_id="t4", parent_session_id="child-x"),  # no category
        completed(3700, subject="P38398", task_id="t5", **usage),
        _cancelled(3800, subject="Q9Y6K9", task_id="t6", tokens_used=100, cost_usd=0.5, turns=1),
    ]
    return write(tmp_path_factory.mktemp("spend") / "events.jsonl", *lines)


@pytest.mark.parametrize("log", ["real_run", "spend_log"])
def test_html_page_carries_the_json_numbers(
    request: pytest.FixtureRequest,
    log: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every bar and marked cell of the page (attempts, tasks, tokens, cost) equals the
    ``--json`` output; nothing is loaded from elsewhere."""
    found = request.getfixturevalue(log)
    path = str(found[0] if isinstance(found, tuple) else found)
    page = tmp_path / "report.html"
    assert run_cli(["logs", "report", path, "--html", str(page)]) == 0
    assert run_cli(["logs", "stats", path, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    parser = _Page()
    parser.feed(page.read_text(encoding="utf-8"))
    assert parser.external == []
    assert parser.bars["by_category"] == {
        **{(k, "failed"): n for k, n in data["by_category"].items()},
        **{(k, "tasks_failed"): n for k, n in data["tasks_by_category"].items()},
    }
    assert parser.bars["top_blockers"] == {(k, "failed"): n for k, n in data["top_blockers"]}
    timeline = {
        (b["start"].replace("Z", "+00:00"), "failed"): b["failed"]
        for b in data["timeline"]["buckets"]
    }
    assert parser.bars["timeline"] == timeline
    histogram = {
        (repr(b["lo"]), series): b[series]
        for b in data["duration_histogram"]
        for series in ("completed", "failed")
    }
    assert parser.bars["duration_histogram"] == histogram
    assert {path: _at(data, path) for path in parser.fields} == parser.fields
    shown = {"delegations", "failed", "tasks", "tasks_failed", "tokens_used", "cost_usd", "turns"}
    columns = ("tokens", "cost_usd", "turns")
    shown |= {f"spend.{key}.{column}" for key in data["spend"] for column in columns}
    assert shown <= set(parser.fields)


def test_html_page_of_a_charged_log_in_numbers(spend_log: Path) -> None:
    """Attempts, tasks, tokens and cost land where they belong: two timed-out attempts
    of one task are one failed task, a nested delegation is an attempt but no task, and
    its spend is its parent's, and a cancelled attempt's spend counts (its task unfinished)."""
    parser = _Page()
    parser.feed(lyra.logs.render_html(collect_stats([spend_log])))
    fields = parser.fields
    assert (fields["failed"], fields["tasks_failed"], fields["by_category.timeout"]) == (4, 2, 2)
    assert (fields["tasks_by_category.timeout"], fields["by_category.unknown"]) == (1, 1)
    assert fields["tasks_by_category.unknown"] == 0  # a nested attempt: no task of its own
    assert (fields["spend.timeout.tokens"], fields["spend.timeout.cost_usd"]) == (2400, 0.0084)
    assert (fields["cancelled"], fields["tasks_cancelled"], fields["tasks"]) == (1, 1, 4)
    assert (fields["spend.cancelled.tokens"], fields["spend.cancelled.cost_usd"]) == (100, 0.5)
    assert (fields["tokens_used"], fields["cost_usd"]) == (4950, 1.7668)
    assert (fields["spend.timeout.turns"], fields["turns"]) == (4, 9)


@pytest.mark.parametrize(
    ("top", "marks"),
    [
        (0, [0, 1]),
        (1, [0, 1]),
        (4, [0, 1, 2, 3, 4]),
        (22, [0, 5, 10, 15, 20, 25]),
        (2068, [0, 500, 1000, 1500, 2000, 2500]),
        (10_200, [0, 5000, 10_000, 15_000]),
    ],
)
def test_axis_ticks_are_round_and_cover_the_data(top: int, marks: list[int]) -> None:
    """A y axis gets 0, round steps and a last tick at or above the largest bar."""
    assert _html.ticks(top) == marks


class _Texts(HTMLParser):
    """The text labels of each chart: (x, y, anchor, turned, words)."""

    def __init__(self) -> None:
        super().__init__()
        self.chart = ""
        self.heights: dict[str, float] = {}
        self.texts: dict[str, list[tuple[float, float, str, bool, str]]] = {}
        self._open: tuple[float, float, str, bool] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "svg":
            self.chart = str(a["data-chart"])
            self.heights[self.chart] = float(str(a["height"]))
        if tag == "text":
            at = (float(str(a["x"])), float(str(a["y"])))
            self._open = (*at, str(a["text-anchor"]), "transform" in a)

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self.texts.setdefault(self.chart, []).append((*self._open, data))
            self._open = None


def _extent(at: float, anchor: str, length: float) -> tuple[float, float]:
    """Where a text of ``length`` pixels anchored at ``at`` begins and ends."""
    if anchor == "start":
        return at, at + length
    if anchor == "end":
        return at - length, at
    return at - length / 2, at + length / 2


def test_chart_labels_fit_and_axes_say_what_they_count(spend_log: Path) -> None:
    """Every chart label lies inside its picture (the last time label was clipped), the
    y axes show more than 0 and the maximum, and the axis titles name units."""
    parser = _Texts()
    parser.feed(lyra.logs.render_html(collect_stats([spend_log])))
    for chart, texts in parser.texts.items():
        for x, y, anchor, turned, words in texts:
            length = len(words) * _html._CHAR_W
            begin, end = _extent(y if turned else x, anchor, length)
            assert begin >= 0, (chart, words)
            assert end <= (parser.heights[chart] if turned else _html.WIDTH), (chart, words)
    timeline = [words for *_, words in parser.texts["timeline"]]
    assert "failed attempts per 2 min" in timeline
    assert "time (UTC on 2026-01-31), 2 min buckets" in timeline
    assert {"0", "1", "2"} <= set(timeline)
    histogram = [words for *_, words in parser.texts["duration_histogram"]]
    assert "duration of the attempt (seconds)" in histogram


def test_a_subject_is_a_placeholder_in_its_blocker_only_where_it_names_the_task(
    tmp_path: Path,
) -> None:
    """The task's subject becomes ``<id>`` in its blocker where it stands as a name of its
    own ('XXXXX'), not inside a word nor as a plain word ('auth' in 'unauthorized', a
    task called 'tool'): one blocker was counted as two patterns."""
    lines = [
        failed(blocked_on="HTTP 401 unauthorized", subject="auth", task_id="a"),
        failed(blocked_on="HTTP 401 unauthorized", subject="other", task_id="b"),
        failed(blocked_on="refused (in tool 'fetch')", subject="tool", task_id="c"),
        failed(blocked_on="refused (in tool 'fetch')", subject="x", task_id="d"),
        failed(blocked_on="XXXXX is not an accession", subject="XXXXX", task_id="e"),
        failed(blocked_on="XXXXXY is not an accession", subject="XXXXX", task_id="f"),
    ]
    stats = collect_stats([write(tmp_path / "e.jsonl", *lines)])
    assert dict(stats.top_blockers) == {
        "HTTP <n> unauthorized": 2,
        "refused (in tool '<name>')": 2,
        "<id> is not an accession": 1,
        "XXXXXY is not an accession": 1,
    }


def test_html_escapes_blocker_text(tmp_path: Path) -> None:
    """A blocker holding markup shows as text and round-trips through the page's attributes."""
    log = write(tmp_path / "e.jsonl", failed(blocked_on="<script>alert(1)</script> & more"))
    page = lyra.logs.render_html(collect_stats([log]))
    assert "<script>alert" not in page
    parser = _Page()
    parser.feed(page)
    assert ("<script>alert(<n>)</script> & more", "failed") in parser.bars["top_blockers"]


# -- reading: malformed lines, streaming, file kinds ---------------------------------------


def good() -> list[str]:
    """A completed and a failed delegation, each of a new session."""
    return [completed(0, subject="P04637"), failed(1, subject="Q8I3H7")]


GOOD = good()


@pytest.mark.parametrize(
    ("bad", "malformed"),
    [
        ("not json at all\n", 1),
        ('{"event": "delegation_completed", "dura\n', 1),
        ("[1, 2, 3]\n", 1),
        ('{"no_event": true}\n', 1),
        ('{"event": 5}\n', 1),
        ("\n", 0),
        ("   \t\n", 0),
        ('{"event": "protein_response_invalid", "level": "warning"}\n', 0),
        ("not json\n" * 3, 3),
    ],
)
def test_malformed_lines_are_counted_not_fatal(tmp_path: Path, bad: str, malformed: int) -> None:
    """A bad line is skipped and counted; the good lines around it still count."""
    log = write(tmp_path / "e.jsonl", GOOD[0], bad, GOOD[1])
    stats = collect_stats([log])
    assert (stats.completed, stats.failed, stats.malformed_lines) == (1, 1, malformed)


def test_invalid_utf8_is_a_malformed_line(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 make one malformed line, not a crash."""
    log = tmp_path / "e.jsonl"
    log.write_bytes(GOOD[0].encode() + b'{"event": "\xff\xfe"}\n' + GOOD[1].encode())
    stats = collect_stats([log])
    assert (stats.delegations, stats.malformed_lines) == (2, 1)


def test_an_overlong_line_is_skipped_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line longer than the limit counts as one malformed line and the next line still reads."""
    monkeypatch.setattr(_read, "MAX_LINE", 512)
    huge = '{"event": "delegation_completed", "x": "' + "a" * 1000 + '"}\n'
    stats = collect_stats([write(tmp_path / "e.jsonl", huge, GOOD[1])])
    assert (stats.completed, stats.failed, stats.malformed_lines) == (0, 1, 1)


def _reference_lines(data: bytes, limit: int) -> list[tuple[bytes, bool]]:
    """What the chunked reader must give: each line without its newline, cut to
    ``limit``; the last one (without a newline) marked unended unless it was cut."""
    lines = data.split(b"\n")
    last = lines.pop()
    found = [(line[:limit], True) for line in lines]
    if last:
        found.append((last[:limit], len(last) >= limit))
    return found


@settings(max_examples=300)
@given(
    st.lists(
        st.sampled_from([b"a", b"\n", b"\r\n", b"{", b"}", b"xyz" * 5, b"\0"]), max_size=40
    ).map(b"".join),
    st.integers(1, 9),
    st.integers(2, 12),
)
def test_chunked_lines_are_the_lines_cut_to_the_limit(data: bytes, chunk: int, limit: int) -> None:
    """However a stream falls into chunks, the reader gives its lines as a plain split
    would, each cut to MAX_LINE, and flags every block with a line holding a NUL (a
    hint: only then are lines searched for one)."""
    saved = _read._CHUNK, _read.MAX_LINE
    _read._CHUNK, _read.MAX_LINE = chunk, limit
    try:
        blocks = list(_read._line_blocks(io.BytesIO(data)))
    finally:
        _read._CHUNK, _read.MAX_LINE = saved
    found = [(line, ended) for block, ended, _ in blocks for line in block]
    assert [line for line, _ in found] == [line for line, _ in _reference_lines(data, limit)]
    assert all(nul for block, _, nul in blocks if any(b"\0" in line for line in block))
    if found:
        assert found[-1][1] == _reference_lines(data, limit)[-1][1]


_LINES = [
    b'{"event": "delegation_completed", "session_id": "s"}',
    b'  {"event": "delegation_failed"}  ',
    b'{"event": "delegation_started"}\r',
    b'{"event": "delegation_failed", ',
    b'{"event": 1}',
    b"{}",
    b"[1, 2]",
    b"{",
    b"}",
    b"not json at all",
    b"   ",
    b"",
    b"\r",
    b'{"event": "x", "n": NaN}',
    b"\x00\x00\x00 zero-filled",
    b'{"event": "delegation_failed"\x00}',
]


def _reference_tally(lines: list[bytes], ended: bool) -> tuple[int, int, bool] | None:
    """Events, malformed lines and whether the file is torn, one line at a time with
    the standard library: what the reader's fast paths must agree with; None when
    a line that is no event holds a NUL byte before any event (binary: refused)."""
    events = malformed = 0
    cut = False
    for number, raw in enumerate(lines):
        line = raw.strip()
        if not line:
            continue
        if not events and b"\x00" in line and not line.startswith(b"{"):
            return None
        if cut:  # a line follows the broken event: it was not torn
            malformed, cut = malformed + 1, False
        try:
            data = json.loads(line) if line.startswith(b"{") else None
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("event"), str):
            events += 1
        elif data is None and line.startswith(b"{") and not ended and number == len(lines) - 1:
            cut = True
        else:
            malformed += 1
    return events, malformed, cut


@settings(max_examples=300)
@given(st.lists(st.sampled_from(_LINES), max_size=30), st.booleans())
def test_each_line_is_an_event_blank_or_malformed_as_a_plain_reader_says(
    lines: list[bytes], ended: bool
) -> None:
    """The reader's shortcuts (empty lines skipped in bulk, a line that cannot close a
    JSON object never handed to orjson) count what a line-by-line json.loads counts,
    for a stream and for an iterable of lines alike, and refuse binary input alike."""
    each = [line + b"\n" for line in lines]
    if each and not ended:
        each[-1] = lines[-1]
    expected = _reference_tally(lines, ended)
    for source in (io.BytesIO(b"".join(each)), each):
        if expected is None:
            with pytest.raises(lyra.logs.NotTextError):
                list(iter_events(source, source="f"))
            continue
        expected_events, malformed, torn = expected
        stats = ReadStats()
        found = list(iter_events(source, source="f", stats=stats))
        assert len(found) == stats.events == expected_events
        assert stats.malformed_lines == malformed
        assert stats.torn_files == (["f"] if torn else [])


def test_a_byte_order_mark_and_a_huge_number_still_read_as_events(tmp_path: Path) -> None:
    """A log that starts with a UTF-8 byte order mark, and an event with a number too
    large for a double, are read (orjson refuses both; they were read before)."""
    log = tmp_path / "events.jsonl"
    log.write_bytes(
        b"\xef\xbb\xbf" + GOOD[0].encode() + b'{"event": "delegation_completed", "x": 1e400}\n'
    )
    stats = collect_stats([log])
    assert (stats.completed, stats.malformed_lines) == (2, 0)


class _Guarded(io.BytesIO):
    """A byte stream that refuses whole-file reads and records each read's size."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.sizes: list[int] = []

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            raise AssertionError("the whole stream was read at once")
        self.sizes.append(size)
        return super().read(size)


def test_event_reader_streams_in_bounded_chunks() -> None:
    """The reader is a lazy generator: nothing is read before an event is asked for,
    and the first event costs one bounded chunk, not the whole stream."""
    data = "".join(GOOD * 5000).encode()
    stream = _Guarded(data)
    events = iter_events(stream, source="s")
    assert isinstance(events, GeneratorType)
    assert stream.sizes == []  # nothing read before the first event is asked for
    first = next(events)
    assert (first.name, first.subject) == ("delegation_completed", "P04637")
    assert stream.tell() == len(stream.sizes) * stream.sizes[0] < len(data)
    assert sum(1 for _ in events) == 9999
    assert max(stream.sizes) <= _read.MAX_LINE


def test_read_file_never_reads_a_whole_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Reading a prose file for reports happens in bounded chunks too."""
    sizes: list[int] = []

    class Wrapper(io.TextIOWrapper):
        def read(self, size: int | None = -1) -> str:
            sizes.append(-1 if size is None else size)
            return super().read(size)

    monkeypatch.setattr(io, "TextIOWrapper", Wrapper)  # _read looks it up per call
    text = "prose line\n" * 50_000 + render_report(TaskReport(status="completed", output="x"))
    stats = collect_stats([write(tmp_path / "t.txt", text)])
    assert (stats.reports, stats.completed) == (1, 1)
    assert sizes
    assert all(0 < size <= _read.CHUNK for size in sizes)


def _transcript() -> str:
    reports = [
        TaskReport(status="completed", output="fine\n", session_id="child-1", subject="P1"),
        TaskReport(
            status="failed",
            message="Child timed out after 300s",
            category="timeout",
            retryable=True,
            blocked_on="Time limit insufficient",
            session_id="child-2",
            duration=300.1,
        ),
    ]
    guide = "Child agent failed: boom\n\nCategory: tool_error\nRetryable: No\n"
    return "noise\n" + "\n-- next --\n".join(map(render_report, reports)) + "\nmore\n" + guide


def test_a_report_becomes_the_event_its_fields_name() -> None:
    """Each field of the event a raw report stands for is the report's own field."""
    failed = TaskReport(
        status="failed",
        session_id="child-1",
        subject="P1",
        attempt=2,
        message="no progress",
        category="timeout",
        retryable=True,
        error_type="idle",
        duration=3.5,
        parent_session_id="child-0",
        tokens_used=10,
        cost_usd=0.5,
        turns=3,
    )
    assert Event.from_report(failed, "t") == Event(
        name="delegation_failed",
        source="t",
        session_id="child-1",
        subject="P1",
        attempt=2,
        category="timeout",
        retryable=True,
        error_type="idle",
        blocked_on="no progress",
        duration=3.5,
        is_report=True,
        parent_session_id="child-0",
        tokens_used=10,
        cost_usd=0.5,
        turns=3,
    )
    done = TaskReport(status="completed", session_id="child-2", output="ok", duration=1.0)
    assert Event.from_report(done) == Event(
        name="delegation_completed", session_id="child-2", duration=1.0, is_report=True
    )


@pytest.mark.parametrize("chunk_size", [1, 7, 64, 1000, 1 << 20])
def test_report_chunks_split_only_between_reports(chunk_size: int) -> None:
    """Reading reports in chunks of any size finds what one whole-text parse finds."""
    text = _transcript()
    expected = [Event.from_report(r, "t") for r in find_reports(text)]
    stats = ReadStats()
    found = list(iter_reports(io.StringIO(text), source="t", stats=stats, chunk_size=chunk_size))
    assert found == expected
    assert stats.reports == len(expected) == 3


def test_a_long_stretch_without_metadata_is_cut_at_a_header(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Prose longer than the buffer is dropped, but a report header inside it is kept."""
    monkeypatch.setattr(_read, "MAX_BUFFER", 100)
    text = "x" * 500 + "\nChild agent failed: late\n\nCategory: partial\n" + "y\n" * 10
    found = list(iter_reports(io.StringIO(text), chunk_size=10))
    assert [(e.name, e.category, e.blocked_on) for e in found] == [
        ("delegation_failed", "partial", "late")
    ]


def test_files_with_events_ignore_report_text(tmp_path: Path) -> None:
    """In an event log, prose lines are malformed and reports in them are not counted twice."""
    report = render_report(TaskReport(status="completed", output="x", session_id="child-9"))
    stats = collect_stats([write(tmp_path / "e.jsonl", GOOD[0], report + "\n", GOOD[1])])
    assert (stats.delegations, stats.reports) == (2, 0)
    assert stats.malformed_lines == sum(1 for line in report.splitlines() if line.strip())


def test_prose_lines_are_not_malformed_but_broken_events_are(tmp_path: Path) -> None:
    """In a text file without events, only lines that look like JSON count as malformed."""
    text = "hello\n{broken json\n" + render_report(TaskReport(status="completed", output="x"))
    stats = collect_stats([write(tmp_path / "t.txt", text)])
    assert (stats.reports, stats.malformed_lines) == (1, 1)


def test_gzip_directory_and_stdin_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A .gz log, a run directory (its events.jsonl only) and stdin all read the same."""
    gz = tmp_path / "old.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as out:
        out.writelines(good())
    run = tmp_path / "runs" / "r1"
    (run / "reports").mkdir(parents=True)
    write(run / "events.jsonl", *good())
    write(run / "reports" / "Q8I3H7.txt", _transcript())  # the same failures again: not read
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("".join(good()).encode())))
    stats = collect_stats([gz, tmp_path / "runs", "-"])
    assert (stats.files, stats.delegations, stats.failed, stats.reports) == (3, 6, 3, 0)


# -- torn, truncated and repeated ------------------------------------------------------------

TORN = '{"event":"delegation_failed","level":"info","timestamp":"2026-01-31T12:0'  # no newline


@pytest.mark.parametrize(
    ("tail", "torn", "malformed"),
    [
        (TORN, True, 0),  # a writer killed mid-line
        (TORN + "\n", False, 1),  # cut, but a newline followed: an ordinary bad line
        (completed(5).rstrip("\n"), False, 0),  # whole, only the newline missing: an event
        ('{"no_event": true}', False, 1),  # whole JSON, no event: malformed, never torn
        ("closing prose", False, 1),  # prose is not the start of an event
    ],
)
def test_a_torn_last_line_is_skipped_apart_from_malformed_ones(
    tmp_path: Path, tail: str, torn: bool, malformed: int
) -> None:
    """A last line cut short is named in ``torn_files``, not counted as malformed."""
    log = write(tmp_path / "events.jsonl", *good(), tail)
    stats = collect_stats([log])
    assert (stats.torn_files, stats.malformed_lines) == ([str(log)] if torn else [], malformed)
    read = ReadStats()
    assert len(list(read_events([log], stats=read))) == stats.events
    assert (read.torn_files, read.malformed_lines) == (stats.torn_files, malformed)


def test_a_cut_line_that_is_not_last_is_malformed() -> None:
    """In lines given in memory, a cut line followed by another is malformed, not torn."""
    read = ReadStats()
    events = list(iter_events([GOOD[0], TORN, GOOD[1]], source="mem", stats=read))
    assert (len(events), read.malformed_lines, read.torn_files) == (2, 1, [])
    list(iter_events([*GOOD, TORN], source="mem", stats=read))
    assert read.torn_files == ["mem"]


@pytest.mark.parametrize(
    "argv",
    [
        ["logs", "stats", "{log}"],
        ["logs", "stats", "{log}", "--json"],
        ["logs", "report", "{log}", "--html", "{page}"],
        ["logs", "suggest-timeout", "{log}"],
    ],
)
def test_every_command_notes_a_torn_last_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Each ``lyra logs`` command reads the whole lines, then says it skipped the torn one."""
    log = write(tmp_path / "events.jsonl", *good(), TORN)
    places = {"log": log, "page": tmp_path / "page.html"}
    assert run_cli([arg.format(**places) for arg in argv]) == 0
    err = capsys.readouterr().err
    assert f"skipped a torn last line in {log}" in err
    assert "malformed" not in err


def _gzip(path: Path, lines: list[str]) -> bytes:
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.writelines(lines)
    return path.read_bytes()


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # a copy stopped halfway
        lambda data: data[:-8],  # only the trailer lost
        lambda data: data[: len(data) // 2] + bytes(60) + data[len(data) // 2 + 60 :],
    ],
    ids=["half", "trailer", "garbled"],
)
def test_a_truncated_gzip_is_read_as_far_as_it_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Any
) -> None:
    """A damaged ``.gz`` gives the events before the damage, a note, and a normal exit."""
    lines = [completed(i, subject=f"P{i:05d}") for i in range(2000)]
    gz = tmp_path / "events.jsonl.gz"
    gz.write_bytes(damage(_gzip(gz, lines)))
    assert run_cli(["logs", "stats", str(gz), "--json"]) == 0
    captured = capsys.readouterr()
    stats = json.loads(captured.out)
    assert 0 < stats["completed"] <= len(lines)
    assert (stats["truncated_files"], stats["torn_files"]) == ([str(gz)], [])
    assert f"{gz} ends early" in captured.err


def test_a_truncated_gzip_transcript_gives_the_reports_before_the_cut(tmp_path: Path) -> None:
    """A compressed transcript that ends early still yields the reports it holds whole."""
    gz = tmp_path / "transcript.txt.gz"
    data = _gzip(gz, [_transcript(), *(f"\nprose line {i}" for i in range(5000))])
    gz.write_bytes(data[: len(data) - 200])
    stats = collect_stats([gz])
    assert (stats.reports, stats.truncated_files) == (3, [str(gz)])


@pytest.mark.parametrize("by", [None, "subject", "category"])
def test_lines_and_events_give_the_same_statistics(
    real_run: tuple[Path, Path], spend_log: Path, tmp_path: Path, by: _stats.GroupBy | None
) -> None:
    """Statistics read straight from a log's lines equal those of its events fed one by
    one (the two ways into :class:`StatsBuilder`)."""
    decomposed = [
        json.dumps({**event._asdict(), "event": event.name, "timestamp": f"{T0:%FT%TZ}"})
        for event in _decomposition([["failed", "completed"], ["failed"]], "failed")
    ]
    mixed = write(tmp_path / "mixed.jsonl", *(line + "\n" for line in decomposed))
    for log in (real_run[0], spend_log, mixed):
        from_lines = collect_stats([log], by=by)
        from_events = compute_stats(read_events([log]), by=by, read=ReadStats(files=1))
        assert from_events.model_dump(exclude={"events"}) == from_lines.model_dump(
            exclude={"events"}
        )


def test_an_attempt_logged_twice_counts_once(
    real_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A resumed run that logs its attempts again (the same sessions) changes no number,
    and the command says how many repeats it left out."""
    text = real_run[0].read_text(encoding="utf-8")
    twice = write(tmp_path / "events.jsonl", text, text)
    once, again = collect_stats([real_run[0]]), collect_stats([twice])
    same = {"events", "duplicates"}
    assert again.model_dump(exclude=same) == once.model_dump(exclude=same)
    assert (again.duplicates, again.unfinished) == (once.completed + once.failed, 0)
    assert run_cli(["logs", "stats", str(twice)]) == 0
    assert "counted 8 repeated finishing or recovery event(s) once" in capsys.readouterr().err


def test_a_recovery_attempt_read_twice_counts_once(tmp_path: Path) -> None:
    """Two overlapping inputs (a folder and its events.jsonl) hold each recovery attempt
    twice: it counts once, as the attempts it followed do."""
    from lyra.errors import TransientError
    from lyra.recovery import RecoveryPolicy, record_waits, recover

    tries: list[int] = []

    async def flaky(prompt: str, ctx: ChildContext) -> str:
        tries.append(1)
        if len(tries) < 3:
            raise TransientError("reset")
        return "ok"

    async def scenario() -> None:
        with record_waits():
            await recover("x", child=flaky, policy=RecoveryPolicy(max_retries=3))

    log = tmp_path / "events.jsonl"
    with events_to(log):
        anyio.run(scenario)
    once, twice = collect_stats([log]), collect_stats([log, log])
    assert (once.recovery_attempts, once.by_strategy) == (2, {"backoff": 2})
    assert (twice.recovery_attempts, twice.by_strategy) == (2, {"backoff": 2})
    assert twice.duplicates == once.duplicates + 3 + 2  # (three finishes, two recoveries)


@pytest.mark.parametrize(
    ("lines", "counts"),
    [
        # the replay repeats the failure: one attempt, one failed task
        (["failed:child-a", "failed:child-a"], (1, 0, 1, 1, 0)),
        # a session's second finish is a repeat whatever it says
        (["failed:child-a", "completed:child-a"], (1, 0, 1, 1, 0)),
        # a new session is a new attempt: the task recovered
        (["failed:child-a", "completed:child-b"], (2, 1, 1, 0, 1)),
    ],
)
def test_repeats_are_per_session(lines: list[str], counts: tuple[int, ...]) -> None:
    """Only a session seen finishing before is a repeat; tokens and cost count once."""
    usage = {"tokens_used": 100, "cost_usd": 0.01}
    made = {"failed": failed, "completed": completed}
    stats = compute_stats(
        _events(
            *(
                made[kind](i, session_id=session, subject="P04637", **usage)
                for i, (kind, session) in enumerate(line.split(":") for line in lines)
            )
        )
    )
    charged = sum(spend.tokens for spend in stats.spend.values())
    assert (
        stats.completed + stats.failed,
        stats.completed,
        stats.failed,
        stats.duplicates,
        stats.recovered,
    ) == counts
    assert charged == 100 * (counts[0])


# -- statistics on synthetic logs -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("No module named 'bcrypt'", "No module named '<name>'"),
        ("No module named 'numpy.linalg'", "No module named '<name>'"),
        ("Protein P04637 not found", "Protein <id> not found"),
        ("Protein Q8I3H7 not found", "Protein <id> not found"),
        ("HTTP 503 from https://rest.uniprot.org/x?y=1", "HTTP <n> from <url>"),
        ("Child timed out after 300s", "Child timed out after <n>s"),
        ("cannot open /var/data/run-17/out.json", "cannot open <path>"),
        ("cannot open data/out.json", "cannot open <path>"),
        ("session child-ab12cd34ef56 lost", "session <session> lost"),
        ("request 123e4567-e89b-12d3-a456-426614174000", "request <uuid>"),
        ("retry after 2.5 s, attempt 3", "retry after <n> s, attempt <n>"),
        ("Time limit insufficient", "Time limit insufficient"),
        ("  spaced \n out  ", "spaced out"),
        (  # a format quoted in the blocker stays as it is; the values around it do not
            "'X1' is not a UniProt accession (expected 6 or 10 letters and digits in "
            "UniProt's format [OPQ][0-9][A-Z0-9]{3}[0-9] or [A-NR-Z][0-9]([A-Z][A-Z0-9]{2}"
            "[0-9]){1,2}, such as P04637)",
            "'<name>' is not a UniProt accession (expected <n> or <n> letters and digits in "
            "UniProt's format [OPQ][0-9][A-Z0-9]{3}[0-9] or [A-NR-Z][0-9]([A-Z][A-Z0-9]{2}"
            "[0-9]){1,2}, such as <id>)",
        ),
        ("items[17] missing", "items[<n>] missing"),
        (" 429 ", "429"),  # an HTTP status alone (a child raised it as it was) stays
        ("31337", "<n>"),  # another number alone (a process id) does not
    ],
)
def test_blocker_patterns(text: str, pattern: str) -> None:
    """IDs, numbers, paths, sessions and quoted names become placeholders; a blocker that
    is an HTTP status alone stays as it is (``<n>`` said nothing of it)."""
    assert normalize_blocker(text) == pattern


def test_a_blocker_naming_its_own_subject_masks_it_whatever_its_shape() -> None:
    """The subject a blocker names is masked as <id> even where it looks like no ID
    (XXXXX), so the same failure on several subjects is one pattern."""
    stats = compute_stats(
        _events(
            *(
                failed(
                    session_id=f"child-{n}",
                    subject=subject,
                    blocked_on=f"Protein {subject} not found",
                )
                for n, subject in enumerate(["P04637", "XXXXX", "A0A0C5B5G6X"])
            )
        )
    )
    assert stats.top_blockers == [("Protein <id> not found", 3)]


def test_the_blocker_table_fits_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A blocker of 200 characters is wrapped to the terminal's width (its further lines
    indented), its count still on its first line, aligned with the others'."""
    long = "The upstream service refused the request because " + "the quota " * 15
    log = tmp_path / "events.jsonl"
    log.write_text(
        "\n".join(
            [
                failed(session_id="child-1", blocked_on=long),
                failed(session_id="child-2", blocked_on=long),
                failed(session_id="child-3", blocked_on="Disk full"),
            ]
        )
        + "\n"
    )
    monkeypatch.setenv("COLUMNS", "60")
    assert run_cli(["logs", "stats", str(log)]) == 0
    out = capsys.readouterr().out
    rows = out[out.index("top blockers") :].split("\n\n")[0].splitlines()
    assert max(len(row) for row in rows) <= 60
    assert rows[1].startswith("The upstream service refused")
    assert rows[1].endswith("  2")
    assert rows[2].startswith("  ")
    assert rows[-1] == f"{'Disk full'.ljust(len(rows[1]) - 3)}  1"
    counted = [row for row in rows if not row.startswith("  ")]
    assert len({len(row) for row in counted}) == 1  # the counts aligned
    assert " ".join(row.strip().removesuffix("  2").strip() for row in rows[1:-1]) == long.strip()


def _events(*lines: str) -> list[Event]:
    return list(iter_events(lines, source="mem"))


@pytest.mark.parametrize(
    ("durations", "p50", "p95"),
    [
        ([1.0], 1.0, 1.0),
        ([1.0, 2.0, 3.0, 4.0], 2.5, 3.85),
        ([float(n) for n in range(1, 21)], 10.5, 19.05),
    ],
)
def test_duration_percentiles_per_outcome(durations: list[float], p50: float, p95: float) -> None:
    """p50 and p95 interpolate linearly between ranks, per outcome."""
    stats = compute_stats(_events(*(failed(duration=d, category="timeout") for d in durations)))
    summary = stats.durations["timeout"]
    assert (summary.count, summary.p50, summary.p95, summary.max) == (
        len(durations),
        p50,
        p95,
        max(durations),
    )


@pytest.mark.parametrize(
    ("since", "counts"),
    [
        (None, (4, 2, 2)),
        ("2026-01-31T12:00:30Z", (2, 1, 1)),
        ("2026-01-31T12:00:30", (2, 1, 1)),  # naive means UTC
        ("2026-01-31T13:00:00+01:00", (4, 2, 2)),
        ("2026-02-01", (0, 0, 0)),
    ],
)
def test_since_filters_by_timestamp(since: str | None, counts: tuple[int, int, int]) -> None:
    """``--since`` keeps events at or after the time; the rest are counted as skipped."""
    events = _events(completed(0), failed(10), completed(30), failed(50))
    stats = compute_stats(events, since=parse_since(since) if since else None)
    assert (stats.delegations, stats.completed, stats.failed) == counts
    assert stats.skipped_before_since == 4 - counts[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2h", T0 - timedelta(hours=2)),
        ("30m", T0 - timedelta(minutes=30)),
        ("1.5d", T0 - timedelta(hours=36)),
        ("2026-01-30", datetime(2026, 1, 30, tzinfo=UTC)),
    ],
)
def test_parse_since(text: str, expected: datetime) -> None:
    """Relative spans count back from now; dates without a zone are UTC."""
    assert parse_since(text, now=T0) == expected


@pytest.mark.parametrize("span", ["99999999999h", "2000000d", "9" * 400 + "w"])
@pytest.mark.parametrize("action", [["stats", "--json"], ["report", "--html", "-"]])
def test_a_span_past_the_calendar_keeps_every_dated_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], span: str, action: list[str]
) -> None:
    """``--since`` longer than the calendar reaches back keeps every event (no overflow)."""
    log = write(tmp_path / "e.jsonl", *GOOD)
    argv = ["logs", action[0], str(log), "--since", span, *action[1:]]
    assert run_cli(argv) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    if action[0] == "stats":
        assert json.loads(captured.out)["delegations"] == len(GOOD)
        assert json.loads(captured.out)["since"] == "0001-01-01T00:00:00Z"


def test_a_suggestion_that_overflows_saturates() -> None:
    """A margin times a huge logged duration is the largest float, not an OverflowError."""
    events = _events(*(completed(i, duration=1e308) for i in range(3)))
    result = suggest_timeout(events, margin=1e300, min_samples=3)
    assert result.overall.suggested_timeout == sys.float_info.max


def test_since_leaves_out_undated_reports(tmp_path: Path) -> None:
    """Raw reports have no time, so ``--since`` cannot keep them and says so."""
    stats = collect_stats([write(tmp_path / "t.txt", _transcript())], since=T0)
    assert (stats.delegations, stats.skipped_undated) == (0, 3)


@pytest.mark.parametrize(
    ("by", "rows"),
    [
        ("category", [("timeout", 2, 2), ("tool_error", 1, 1), ("completed", 2, 0)]),
        ("error_type", [("timeout", 2, 2), ("connection", 1, 1), ("completed", 2, 0)]),
        ("subject", [("Q8I3H7", 3, 2), ("P04637", 2, 1)]),
    ],
)
def test_breakdowns(by: _stats.GroupBy, rows: list[tuple[str, int, int]]) -> None:
    """``--by`` groups finished delegations, most failures first."""
    events = _events(
        failed(0, "tool_error", error_type="connection", subject="P04637"),
        completed(1, subject="P04637"),
        failed(2, "timeout", error_type="timeout", subject="Q8I3H7"),
        failed(3, "timeout", error_type="timeout", subject="Q8I3H7"),
        completed(4, subject="Q8I3H7"),
    )
    breakdown = compute_stats(events, by=by).by
    assert breakdown is not None
    assert [(g.key, g.delegations, g.failed) for g in breakdown.groups] == rows


@pytest.mark.parametrize(
    ("lines", "recovered"),
    [
        ([failed(0, subject="A1"), completed(1, subject="A1")], 1),
        ([completed(0, subject="A1"), failed(1, subject="A1")], 0),
        ([failed(0, subject="A1"), failed(1, subject="A1"), completed(2, subject="A1")], 1),
        ([failed(0, subject="A1"), completed(1, subject="B2")], 0),
        (
            [
                failed(0, session_id="child-a", task_id="t1"),
                completed(1, session_id="child-b", task_id="t1"),
            ],
            1,
        ),
        ([failed(0, session_id="child-a"), completed(1, session_id="child-b")], 0),
        # one session is one attempt: its second finishing line is a repeat, not a recovery
        ([failed(0, session_id="child-a"), completed(1, session_id="child-a")], 0),
    ],
)
def test_recovered_tasks(lines: list[str], recovered: int) -> None:
    """A task recovers when a failed attempt is later followed by a completed one."""
    assert compute_stats(_events(*lines)).recovered == recovered


def test_recovery_is_per_file(tmp_path: Path) -> None:
    """The same subject in two run files is two tasks."""
    a = write(tmp_path / "a.jsonl", failed(0, subject="P04637"))
    b = write(tmp_path / "b.jsonl", completed(1, subject="P04637"))
    assert collect_stats([a, b]).recovered == 0


def test_remembered_tasks_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the newest tasks may still change, so memory stays flat; a task let go keeps
    its last outcome in the task counts (and, seen again much later, is a new task)."""
    monkeypatch.setattr(_stats, "_MAX_TASKS", 4)
    lines = [failed(0, subject="A1")]
    lines += [completed(i, subject=s) for i, s in enumerate(["B2", "C3", "D4", "E5"], 1)]
    lines += [completed(10, subject="A1")]
    builder = _stats.StatsBuilder().add_all(_events(*lines))
    stats = builder.build()
    assert len(builder.tasks) <= 4
    assert (stats.tasks, stats.tasks_failed, stats.tasks_completed, stats.recovered) == (
        6,
        1,
        5,
        0,
    )


def test_remembered_cancelled_tasks_are_bounded_and_still_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cancelled tasks past the bound are let go, and still counted."""
    monkeypatch.setattr(_stats, "_MAX_TASKS", 4)
    lines = [_cancelled(i, session_id=f"child-{i}", task_id=f"t{i}") for i in range(9)]
    builder = _stats.StatsBuilder().add_all(_events(*lines))
    assert len(builder.cancelled_tasks) <= 4
    assert builder.build().tasks_cancelled == 9


def test_remembered_sessions_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions are remembered for spotting repeats only up to a bound."""
    monkeypatch.setattr(_stats, "_MAX_SESSIONS", 4)
    lines = [completed(i, session_id=f"child-{i}") for i in range(10)]
    builder = _stats.StatsBuilder().add_all(_events(*lines, lines[-1], lines[0]))
    assert len(builder.sessions.seen) <= 4
    assert builder.build().duplicates == 1  # the last one again; the first is long gone


@pytest.mark.parametrize("size", [2, 11, 1000])
def test_halving_keeps_the_newest_half(size: int) -> None:
    """Letting the older half go keeps the newer half in order and returns the rest."""
    kept, gone = _stats.halve({key: -key for key in range(size)})
    assert list(kept.items()) == [(key, -key) for key in range(size // 2, size)]
    assert gone == [-key for key in range(size // 2)]


def test_forgetting_stays_cheap_past_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past its bound every step still costs O(1) on average: 200,000 sessions through
    a memory of 50,000 take a fraction of a second (a dict used as a queue, 12 s)."""
    monkeypatch.setattr(_stats, "_MAX_SESSIONS", 50_000)
    sessions = _stats.Sessions()
    started = time.perf_counter()
    for n in range(200_000):
        sessions.first(f"child-{n}", True)
    assert time.perf_counter() - started < 3.0
    assert 25_000 <= len(sessions.seen) <= 50_000


def _decomposition(subtasks: list[list[str]], status: str) -> list[Event]:
    """Task ``t1`` times out without progress, then is decomposed into ``subtasks``.

    Each subtask is a list of outcomes (``failed``/``completed``), one per attempt,
    logged as the recovery loop logs them: ``task_id`` ``t1.N``, ``parent_task_id`` ``t1``.
    """
    common = {"session_id": "child-p", "subject": "Q8I3H7"}
    lines = [
        event_line("delegation_started", 0, task_id="t1", timeout=2.0, **common),
        failed(1, "timeout", task_id="t1", **common),
        event_line("recovery_attempt", 2, task_id="t1", attempt=2, strategy="decomposition"),
    ]
    at = 3
    for index, outcomes in enumerate(subtasks, 1):
        for attempt, outcome in enumerate(outcomes, 1):
            sub: dict[str, Any] = {
                "task_id": f"t1.{index}",
                "parent_task_id": "t1",
                "session_id": f"child-{index}-{attempt}",
                "subject": "Q8I3H7",
                "attempt": attempt,
            }
            lines.append(event_line("delegation_started", at, timeout=1.0, **sub))
            lines.append((failed if outcome == "failed" else completed)(at + 1, **sub))
            at += 2
    done = sum(outcomes[-1] == "completed" for outcomes in subtasks)
    lines.append(
        event_line(
            "decomposition_finished",
            at,
            task_id="t1",
            attempt=2,
            status=status,
            subtasks=len(subtasks),
            completed=done,
            **common,
        )
    )
    return _events(*lines)


@pytest.mark.parametrize(
    ("subtasks", "status", "counts", "pending"),
    [
        # every subtask completed: the parent recovered by decomposition
        ([["completed"], ["completed"]], "completed", (3, 2, 1, 1, 0), []),
        # one subtask failed: not recovered, though the other completed
        ([["completed"], ["failed"]], "failed", (3, 1, 2, 0, 0), ["t1", "t1.2"]),
        # a subtask failed, then completed: it recovered under its own task_id
        ([["failed", "completed"], ["completed"]], "completed", (4, 2, 2, 2, 0), []),
        # the subtask recovered, the decomposition still failed: only the subtask counts
        (
            [["failed", "completed"], ["failed"]],
            "failed",
            (4, 1, 3, 1, 0),
            ["t1", "t1.2"],
        ),
    ],
)
def test_decomposed_tasks(
    subtasks: list[list[str]],
    status: str,
    counts: tuple[int, int, int, int, int],
    pending: list[str],
) -> None:
    """Subtasks are delegations; the parent recovers only when its decomposition completed,
    and it is the one task: a failed decomposition leaves it failed as it first failed."""
    builder = _stats.StatsBuilder().add_all(_decomposition(subtasks, status))
    stats = builder.build()
    ended_failed = int(status == "failed")
    assert (stats.tasks, stats.tasks_failed, stats.tasks_by_category["timeout"]) == (
        1,
        ended_failed,
        ended_failed,
    )
    assert (
        stats.delegations,
        stats.completed,
        stats.failed,
        stats.recovered,
        stats.unfinished,
    ) == counts
    failing = [*builder.tasks.items(), *builder.subtasks.items()]
    assert sorted(key[2] for key, outcome in failing if outcome != "completed") == pending
    assert (stats.recovery_attempts, stats.by_strategy) == (1, {"decomposition": 1})


def test_a_nested_delegation_is_an_attempt_but_no_task() -> None:
    """A grandchild's failure inside a completed attempt is a failed attempt, not a failed
    task nor a recovery, and its spend is already in its parent's."""
    parent = {"session_id": "child-p", "task_id": "t1", "subject": "P04637"}
    usage = {"tokens_used": 10, "cost_usd": 0.5}
    stats = compute_stats(
        _events(
            event_line("delegation_started", 0, **parent),
            failed(1, session_id="child-g", parent_session_id="child-p", task_id="t1", **usage),
            completed(2, **parent, **usage),
        )
    )
    assert (stats.completed, stats.failed, stats.recovered) == (1, 1, 0)
    assert (stats.tasks, stats.tasks_completed, stats.tasks_failed) == (1, 1, 0)
    assert (stats.tokens_used, stats.cost_usd) == (10, 0.5)


def test_turns_alone_are_spend_too() -> None:
    """An attempt charged only turns (an offline child that counts its stages) shows in
    the spend, per outcome and in total."""
    stats = compute_stats(
        _events(
            completed(1, session_id="child-a", task_id="t1", turns=5),
            failed(2, "timeout", session_id="child-b", task_id="t2", turns=3),
        )
    )
    assert stats.turns == 8
    assert (stats.spend["completed"].turns, stats.spend["timeout"].turns) == (5, 3)
    assert (stats.tokens_used, stats.cost_usd) == (0, 0.0)


def test_decomposition_event_is_read() -> None:
    """``decomposition_finished`` keeps its status; subtask events keep their parent."""
    events = _decomposition([["completed"]], "completed")
    assert (events[-1].name, events[-1].task_id, events[-1].status) == (
        "decomposition_finished",
        "t1",
        "completed",
    )
    assert (events[3].task_id, events[3].parent_task_id) == ("t1.1", "t1")
    assert events[0].parent_task_id is None


def test_suggest_timeout_leaves_out_subtasks() -> None:
    """A subtask ran a share of the work under a share of the time: no sample for a task."""
    events = _decomposition([["completed"], ["completed"]], "completed")
    events += _events(completed(20, duration=4.0, subject="Q8I3H7"))
    result = suggest_timeout(events, min_samples=1)
    assert (result.overall.samples, result.overall.timed_out, result.timeouts_used) == (
        1,
        1,
        {"2": 1},
    )


def test_suggest_timeout_counts_only_the_deadline_as_timing_out() -> None:
    """Attempts a budget, the idle timeout or a loop stopped (category timeout) are no
    sign the deadline is short: only those the deadline cut count as timed out."""
    events = _events(
        *(completed(n, duration=2.0 + n / 10, subject="P04637") for n in range(20)),
        *(
            failed(30 + n, "timeout", error_type=kind, duration=0.01, subject="P04637")
            for n, kind in enumerate(["budget", "idle", "loop", "budget"])
        ),
        failed(40, "timeout", error_type="timeout", duration=300.0, subject="P04637"),
    )
    result = suggest_timeout(events, min_samples=1)
    assert (result.overall.samples, result.overall.timed_out) == (20, 1)


def test_unfinished_recovery_and_run_events_are_counted() -> None:
    """Started-but-never-finished delegations, recovery attempts and runs are counted."""
    events = _events(
        event_line("delegation_started", 0, timeout=300.0),
        event_line("delegation_started", 0, timeout=300.0),
        failed(1, "timeout"),
        event_line("recovery_attempt", 2, strategy="double_timeout", timeout=600.0, task_id="t"),
        event_line("quorum_decision", 3),
        event_line("run_finished", 4),
    )
    stats = compute_stats(events)
    assert (stats.delegations, stats.failed, stats.unfinished) == (2, 1, 1)
    assert (stats.recovery_attempts, stats.by_strategy, stats.runs) == (
        1,
        {"double_timeout": 1},
        1,
    )


def _cancelled(at: float, **fields: Any) -> str:
    return event_line("delegation_cancelled", at, duration=1.0, reason="CancelledError", **fields)


def test_a_cancelled_attempt_spent_and_its_task_is_counted_apart() -> None:
    """Ctrl+C on a run: the cancelled attempt's spend is in the totals (under
    ``cancelled``), and its task is counted apart, not one of the tasks that ended; a
    task cancelled and then run to its end is no longer (nor a recovery), a task that
    failed before its retry was cancelled keeps its failure, a cancelled grandchild is
    its parent's, no task, and a cancel line logged twice counts once (a duplicate)."""
    usage = {"tokens_used": 900, "cost_usd": 0.25, "turns": 3}
    stats = compute_stats(
        _events(
            completed(1, session_id="child-a", task_id="t1", turns=5),
            _cancelled(2, session_id="child-b", task_id="t2", **usage),
            _cancelled(3, session_id="child-c", task_id="t3", turns=1),
            completed(4, session_id="child-c2", task_id="t3", attempt=2, turns=2),
            failed(5, "timeout", session_id="child-d", task_id="t4"),
            _cancelled(6, session_id="child-d2", task_id="t4", attempt=2),
            _cancelled(7, session_id="child-g", parent_session_id="child-a", task_id="t1"),
            _cancelled(8, session_id="child-b", task_id="t2", **usage),
        )
    )
    assert (stats.cancelled, stats.delegations, stats.unfinished) == (4, 7, 0)
    assert stats.duplicates == 1
    assert (stats.tasks, stats.tasks_completed, stats.tasks_failed) == (3, 2, 1)
    assert (stats.tasks_cancelled, stats.recovered) == (1, 0)
    cancelled = stats.spend["cancelled"]
    assert (cancelled.delegations, cancelled.tokens, cancelled.turns) == (2, 900, 4)
    assert (stats.tokens_used, stats.cost_usd, stats.turns) == (900, 0.25, 11)


def test_the_table_shows_cancelled_spend_and_unfinished_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The text table's tasks say how many were cancelled, and its spend has a
    ``cancelled`` row, counted in the total."""
    log = write(
        tmp_path / "events.jsonl",
        completed(1, session_id="child-a", task_id="t1", turns=5) + "\n",
        _cancelled(2, session_id="child-b", task_id="t2", turns=2, tokens_used=40) + "\n",
    )
    assert run_cli(["logs", "stats", str(log)]) == 0
    table = capsys.readouterr().out
    tasks = table[table.index("tasks\n") :]
    assert re.search(r"^tasks +1$", tasks, re.MULTILINE)
    assert re.search(r"^cancelled +1$", tasks, re.MULTILINE)
    assert re.search(r"^cancelled +1 +40 +\$0\.0000 +2$", table, re.MULTILINE)
    assert re.search(r"^total +40 +\$0\.0000 +7$", table, re.MULTILINE)


def test_timeline_buckets() -> None:
    """Finished delegations land in equal buckets with zeros in between."""
    stats = compute_stats(_events(completed(0), failed(1), failed(119), completed(300)))
    timeline = stats.timeline
    assert timeline.bucket_seconds == 10
    assert len(timeline.buckets) == 31
    assert (timeline.buckets[0].completed, timeline.buckets[0].failed) == (1, 1)
    assert (timeline.buckets[11].start, timeline.buckets[11].failed) == (
        T0 + timedelta(seconds=110),
        1,
    )
    assert sum(b.completed + b.failed for b in timeline.buckets) == 4


def test_timeline_memory_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """When time slots pile up they merge into coarser ones without losing counts."""
    monkeypatch.setattr(_stats, "_MAX_SLOTS", 20)
    builder = _stats.StatsBuilder().add_all(_events(*(failed(at) for at in range(0, 3000, 7))))
    assert len(builder.slots) <= 20
    stats = builder.build()
    assert sum(b.failed for b in stats.timeline.buckets) == len(range(0, 3000, 7))
    assert len(stats.timeline.buckets) <= _stats.MAX_BUCKETS


def test_duration_histogram() -> None:
    """Durations fall in fixed bins; empty bins at either end are trimmed."""
    stats = compute_stats(
        _events(completed(duration=0.7), completed(duration=3), failed(duration=4))
    )
    assert [(b.lo, b.hi, b.completed, b.failed) for b in stats.duration_histogram] == [
        (0.5, 1.0, 1, 0),
        (1.0, 2.0, 0, 0),
        (2.0, 5.0, 1, 1),
    ]


# -- the command line --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "status"),
    [
        ("".join(GOOD), 0),
        ("just prose\n", 1),
        ("", 1),
    ],
)
def test_exit_status(tmp_path: Path, content: str, status: int) -> None:
    """0 when delegations were found, 1 when none were."""
    assert run_cli(["logs", "stats", str(write(tmp_path / "e.jsonl", content))]) == status


def exit_status(argv: list[str]) -> int:
    """The exit status of ``lyra ARGV`` run in-process, returned or raised."""
    from lyra.cli import main

    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1


@pytest.mark.parametrize(
    ("argv", "bad"),
    [
        (["report", "parse", "{missing}"], "{missing}"),
        (["logs", "stats", "{missing}"], "{missing}"),
        (["logs", "stats", "{not_gzip}"], "{not_gzip}"),
        (["logs", "report", "{missing}", "--html", "-"], "{missing}"),
        (["logs", "suggest-timeout", "{missing}"], "{missing}"),
    ],
)
def test_unreadable_input_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], bad: str
) -> None:
    """Every command that reads files exits 2 with one line naming the file it cannot read."""
    places = {
        "missing": tmp_path / "nope.jsonl",
        "folder": tmp_path,
        "not_gzip": write(tmp_path / "old.jsonl.gz", *good()),
    }
    argv = [arg.format(**places) for arg in argv]
    assert exit_status(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"lyra: cannot read {bad.format(**places)}: ")
    assert captured.err.count("\n") == 1


@contextlib.contextmanager
def _within(seconds: float) -> Iterator[None]:
    """Fail (rather than hang) when the block takes longer than ``seconds``."""

    def late(signum: int, frame: object) -> None:
        raise TimeoutError(f"still reading after {seconds} s")

    previous = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _ZeroFeeder(threading.Thread):
    """Writes zeros into a named pipe until its reader leaves (or ``limit`` bytes)."""

    def __init__(self, pipe: Path, limit: int) -> None:
        super().__init__(daemon=True)
        self.pipe, self.limit, self.written = pipe, limit, 0

    def run(self) -> None:
        block = bytes(1 << 16)
        with contextlib.suppress(BrokenPipeError), open(self.pipe, "wb") as out:
            while self.written < self.limit:
                out.write(block)
                self.written += len(block)


@pytest.mark.parametrize("kind", ["device", "pipe", "stdin", "binary file", "utf-16 file"])
@pytest.mark.parametrize("action", [["stats"], ["report", "--html", "-"], ["suggest-timeout"]])
def test_input_that_is_not_text_is_refused_in_bounded_time(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    action: list[str],
) -> None:
    """A device, an endless pipe of zeros, binary stdin, a binary or UTF-16 file: one
    line naming the input, exit 2, read only as far as the first binary line."""
    feeder = None
    if kind == "device":
        path = "/dev/zero"
    elif kind == "pipe":
        path = str(tmp_path / "zeros.pipe")
        os.mkfifo(path)
        feeder = _ZeroFeeder(Path(path), limit=64 << 20)
        feeder.start()
    elif kind == "stdin":
        path = "-"
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(bytes(8 << 20))))
    elif kind == "binary file":
        path = str(tmp_path / "model.bin")
        Path(path).write_bytes(random.Random(7).randbytes(3 << 20))
    else:
        path = str(tmp_path / "utf16.jsonl")
        Path(path).write_text("".join(GOOD), encoding="utf-16")  # Notepad's "Unicode"
    with _within(20):
        status = exit_status(["logs", action[0], path, *action[1:]])
    captured = capsys.readouterr()
    assert (status, captured.out) == (2, "")
    assert captured.err == (
        f"lyra: cannot read {path}: binary data (NUL bytes) before any event: "
        "not an event log or text\n"
    )
    if feeder is not None:
        feeder.join(timeout=20)
        assert feeder.written < 4 << 20  # what the reader took before refusing, and no more


def test_a_log_whose_tail_a_crash_zero_filled_still_reads(tmp_path: Path) -> None:
    """Zeros after events (a power cut left them) are one malformed line, and the events
    after them still count: only binary *before* any event is refused."""
    log = tmp_path / "events.jsonl"
    log.write_bytes(GOOD[0].encode() + bytes(5000) + b"\n" + GOOD[1].encode())
    stats = collect_stats([log])
    assert (stats.completed, stats.failed, stats.malformed_lines) == (1, 1, 1)


@pytest.mark.parametrize(
    "argv",
    [
        ["logs", "stats", "x", "--since", "yesterday-ish"],
        ["logs", "stats", "x", "--by", "colour"],
        ["logs", "report", "x"],
        ["logs", "suggest-timeout", "x", "--margin", "0"],
        ["logs", "suggest-timeout", "x", "--margin", "inf"],
        ["logs", "suggest-timeout", "x", "--margin", "nan"],
        ["logs", "suggest-timeout", "x", "--percentile", "inf"],
        ["logs", "stats", "x", "--top", "-1"],
    ],
)
def test_bad_options_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Bad options are usage errors (argparse exits with status 2)."""
    with pytest.raises(SystemExit) as exit_info:
        run_cli(argv)
    assert exit_info.value.code == 2
    capsys.readouterr()


def test_malformed_lines_are_noted_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Skipped lines are reported on stderr, keeping stdout pure JSON."""
    log = write(tmp_path / "e.jsonl", GOOD[0], "garbage\n", GOOD[1])
    assert run_cli(["logs", "stats", str(log), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["malformed_lines"] == 1
    assert "skipped 1 malformed line" in captured.err


# -- timeout suggestion ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "kind"),
    [
        ("P04637", "A99999"),
        ("Q8I3H7", "A9A9A9"),
        ("abc-1", "aaa-9"),
        (None, "(none)"),
        ("x" * 30, "(long)"),
    ],
)
def test_subject_kind(subject: str | None, kind: str) -> None:
    """A subject's kind is the shape of its ID."""
    assert subject_kind(subject) == kind


def _suggest_events() -> list[Event]:
    lines = [completed(i, duration=float(i), subject=f"P{i:05d}") for i in range(1, 21)]
    lines += [completed(30 + i, duration=2.0, subject=f"Q8I3H{i}") for i in range(3)]
    lines += [event_line("delegation_started", 40, timeout=30.0)]
    lines += [failed(41, "timeout", duration=30.0, subject="Q8I3H9")]
    return _events(*lines)


@pytest.mark.parametrize(
    ("kind", "samples", "value", "timeout", "basis"),
    [
        ("overall", 23, 18.9, 29.0, "kind"),
        ("A99999", 20, 19.05, 29.0, "kind"),
        ("A9A9A9", 3, 2.0, 29.0, "overall"),
    ],
)
def test_suggest_timeout_per_kind(
    kind: str, samples: int, value: float, timeout: float, basis: str
) -> None:
    """p95 × 1.5 rounded up per kind with enough samples; others take the overall value."""
    result = suggest_timeout(_suggest_events())
    rows = {row.kind: row for row in [result.overall, *result.kinds]}
    row = rows[kind]
    assert (row.samples, row.percentile_value, row.suggested_timeout, row.basis) == (
        samples,
        value,
        timeout,
        basis,
    )
    assert (rows["A9A9A9"].timed_out, result.timeouts_used) == (1, {"30": 1})


def test_suggest_timeout_says_when_data_are_too_few(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With fewer samples than required there is no suggestion, and the note says why."""
    log = write(tmp_path / "e.jsonl", *GOOD)
    assert run_cli(["logs", "suggest-timeout", str(log), "--json"]) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    assert (printed["overall"]["suggested_timeout"], printed["overall"]["basis"]) == (
        None,
        "too_few",
    )
    assert "too few data: 1 completed delegation(s), need at least 20" in captured.err


def test_suggest_timeout_text_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The text output leads with the suggestion and its basis."""
    log = write(tmp_path / "e.jsonl", *(completed(i, duration=float(i)) for i in range(1, 6)))
    assert run_cli(["logs", "suggest-timeout", str(log), "--min-samples", "5"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "suggested timeout: 8s (p95 4.800s × 1.5, 5 completed delegations)"


# -- the public surface --------------------------------------------------------------------------


def test_public_surface() -> None:
    """``lyra.logs`` exports exactly its documented names, sorted."""
    assert lyra.logs.__all__ == [
        "Breakdown",
        "DurationBin",
        "DurationSummary",
        "Event",
        "FailureStats",
        "GroupBy",
        "GroupStats",
        "KindSuggestion",
        "NotTextError",
        "ReadStats",
        "Spend",
        "StatsBuilder",
        "TimeBucket",
        "Timeline",
        "TimeoutSuggestion",
        "collect_stats",
        "compute_stats",
        "expand_paths",
        "iter_events",
        "iter_reports",
        "normalize_blocker",
        "parse_since",
        "parse_timestamp",
        "percentile",
        "read_events",
        "read_file",
        "render_html",
        "subject_kind",
        "suggest_from_files",
        "suggest_timeout",
        "task_key",
    ]
    assert all(hasattr(lyra.logs, name) for name in lyra.logs.__all__)


def test_read_events_streams_paths_lazily(tmp_path: Path) -> None:
    """``read_events`` opens nothing until iterated."""
    events = read_events([tmp_path / "does-not-exist.jsonl"])
    assert isinstance(events, GeneratorType)
    with pytest.raises(FileNotFoundError):
        next(events)


# -- over a real `lyra analyze` run --------------------------------------------------------


@pytest.fixture(scope="module")
def analyze_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run directory of a real `lyra analyze` with injected faults and one retry."""
    from lyra.cli import main
    from lyra.recovery import record_waits

    folder = tmp_path_factory.mktemp("analyze")
    argv = [
        "analyze",
        "P04637",
        "Q8I3H7",
        "XXXXX",
        "P69905",
        "P38398",
        "--inject",
        "P04637:hang@1",
        "--inject",
        "Q8I3H7:structure_error",
        "--inject",
        "P69905:rate_limit:2@1",
        "--timeout",
        "0.5",
        "--retries",
        "1",
        "--run-dir",
        str(folder),
        "--json",
    ]
    try:
        with record_waits():
            assert main(argv) == 1
    finally:
        structlog.reset_defaults()
    return folder


ANALYZE_EXPECTED: dict[str, Any] = {
    "delegations": 8,  # P04637 ×2, Q8I3H7 ×2, XXXXX ×1, P69905 ×2, P38398 ×1
    "completed": 3,
    "failed": 5,
    "by_category": {
        "timeout": 1,
        "missing_context": 0,
        "tool_error": 1,
        "invalid_task": 1,
        "partial": 2,
    },
    "retryable": 4,
    "recovered": 2,  # P04637 (hang once) and P69905 (429 once)
    "tasks": 5,  # proteins
    "tasks_completed": 3,
    "tasks_failed": 2,  # Q8I3H7 (partial, twice) and XXXXX (invalid_task)
}


def test_stats_of_a_real_analyze_run(analyze_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`lyra logs stats RUN_DIR --json` counts the faults injected into a real run exactly."""
    capsys.readouterr()
    assert run_cli(["logs", "stats", str(analyze_run), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert {key: stats[key] for key in ANALYZE_EXPECTED} == ANALYZE_EXPECTED
    assert stats["by_error_type"]["rate_limit"] == 1
    assert stats["by_error_type"]["not_found"] == 1


def test_reports_of_a_real_run_agree_with_its_events(analyze_run: Path) -> None:
    """The last report of each protein, parsed back, matches the run's output."""
    output = json.loads((analyze_run / "output.json").read_text())
    for entry in output["failed_analyses"] + output["partial_analyses"]:
        report = (analyze_run / "reports" / f"{entry['protein_id']}.txt").read_text()
        parsed = find_reports(report)
        last = list(parsed)[-1]
        assert (last.category, last.retryable) == (entry["category"], entry["retryable"])


def test_the_command_line_groups_by_exactly_the_fields_stats_knows() -> None:
    """``lyra logs stats --by`` offers the fields of ``lyra.logs.GroupBy`` (the command
    line names them itself so that its start-up need not load lyra.logs)."""
    from typing import get_args

    from lyra.cli._logs_command import GROUPS
    from lyra.logs import GroupBy

    assert get_args(GroupBy) == GROUPS


def test_a_file_without_delegations_gets_a_note_not_a_table_of_zeros(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'lyra logs stats README.md prints a full all-zero table to stdout; only stderr says
    "no delegations found"': nothing found is said once, on stderr, exit 1; --json still
    gives scripts the (empty) figures."""
    notes = tmp_path / "notes.txt"
    notes.write_text("not an event log\n", encoding="utf-8")
    assert run_cli(["logs", "stats", str(notes)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "no delegations found" in err
    assert run_cli(["logs", "stats", str(notes), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["delegations"] == 0


def test_a_folder_that_cannot_be_read_is_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder lyra may not list is 'cannot read' (exit 2), not a folder that 'holds no
    events.jsonl' (searching it found nothing, and said so). (Permissions are forced:
    the suite may run as root, whom no mode stops.)"""
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.listdir

    def listdir(path: Any = ".") -> list[str]:
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "listdir", listdir)
    assert run_cli(["logs", "stats", str(locked)]) == 2
    assert capsys.readouterr().err.strip() == f"lyra: cannot read {locked}: Permission denied"


def test_a_folder_without_event_logs_says_why_nothing_was_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder of report files is read for the events.jsonl under it: it has none, which
    is a usage error (exit 2, as a missing file is), and the one note says so and what
    to do, where it only said "no delegations found"."""
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "P04637.txt").write_text("a report\n", encoding="utf-8")
    assert run_cli(["logs", "stats", str(reports)]) == 2
    err = capsys.readouterr().err
    assert f"{reports} holds no events.jsonl" in err
    assert "lyra report parse" in err
    assert "no delegations found" not in err
