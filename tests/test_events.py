"""lyra's events: silent until configured, then JSON lines written whole, or routed into
the application's structlog or stdlib logging; a full disk never costs a result."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from lyra import ChildContext, Supervisor, events
from lyra.supervisor import RunDir

pytestmark = pytest.mark.anyio


async def echo(prompt: str, ctx: ChildContext) -> str:
    ctx.step("echoed")
    return prompt


def test_an_unconfigured_library_writes_nothing() -> None:
    """import lyra and delegate, fail, recover and fan out: not one byte on stdout or stderr."""
    code = textwrap.dedent(
        """
        import lyra
        from lyra import RecoveryPolicy, Supervisor, Task
        async def child(prompt, ctx):
            if prompt == "fail":
                raise ConnectionError("reset")
            return "ok"
        lyra.delegate_task("x", child=child)
        lyra.delegate_task("fail", child=child)
        lyra.delegate_with_retry("fail", child=child, max_retries=1, base_timeout=1)
        import anyio
        anyio.run(lambda: Supervisor(child).run([Task(prompt="a"), Task(prompt="fail")]))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


@pytest.mark.parametrize("target", [None, 42, b"events.jsonl"])
async def test_a_target_that_is_no_path_or_stream_is_refused_and_the_old_one_kept(
    tmp_path: Path, target: object
) -> None:
    """configure(None) is refused at once (not by every delegation afterwards), and the
    configuration before it still holds."""
    log = tmp_path / "events.jsonl"
    events.configure(log)
    try:
        with pytest.raises(TypeError, match="a path or a writable stream"):
            events.configure(target)  # type: ignore[arg-type]
        await Supervisor(echo).delegate("hi", timeout=5, session_id="child-1")
    finally:
        events.configure()
    assert "delegation_started" in log.read_text()


async def test_json_lines_to_a_file_carry_the_contract_fields(tmp_path: Path) -> None:
    """configure(path): one JSON object per line, with event, level and an ISO UTC timestamp."""
    log = tmp_path / "events.jsonl"
    events.configure(log)
    try:
        await Supervisor(echo).delegate("hi", timeout=5, session_id="child-1")
    finally:
        events.configure()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["event"], e["level"], e["session_id"]) for e in lines] == [
        ("delegation_started", "info", "child-1"),
        ("delegation_completed", "info", "child-1"),
    ]
    assert lines[0]["timestamp"].endswith("Z")
    assert len(lines[0]["timestamp"]) == len("2026-11-23T15:21:09.123456Z")


async def test_a_long_turn_of_the_loop_writes_its_lines_as_they_add_up(tmp_path: Path) -> None:
    """Events emitted within one turn of the event loop (nothing awaited, as in a pool
    whose children never wait) are written, whole lines, once they reach 64 KB: the
    turn does not hold its whole log in memory."""
    log = tmp_path / "events.jsonl"
    events.configure(log)
    try:
        for index in range(2000):
            events.info("tick", index=index, text="x" * 100)
        written = log.read_bytes()  # still within the same turn
    finally:
        events.configure()
    assert 64 * 1024 <= len(written) < len(log.read_bytes())
    assert written.endswith(b"\n")
    assert [json.loads(line)["index"] for line in log.read_text().splitlines()] == list(range(2000))


async def test_events_route_into_stdlib_logging(caplog: pytest.LogCaptureFixture) -> None:
    """configure(logging=True): each event is a record of logger 'lyra' with its fields."""
    events.configure(logging=True)
    try:
        with caplog.at_level(logging.INFO, logger="lyra"):
            await Supervisor(echo).delegate("hi", timeout=5, subject="S")
    finally:
        events.configure()
    (started, done) = [r for r in caplog.records if r.name == "lyra"]
    assert started.getMessage().startswith("delegation_started ")
    assert done.lyra_event["subject"] == "S"  # type: ignore[attr-defined]


async def test_events_route_into_structlog() -> None:
    """configure(structlog=True): the application's structlog sees every event."""
    events.configure(structlog=True)
    with capture_logs() as seen:
        await Supervisor(echo).delegate("hi", timeout=5)
    assert [e["event"] for e in seen] == ["delegation_started", "delegation_completed"]


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


async def test_a_field_whose_str_raises_is_written_by_its_type(tmp_path: Path) -> None:
    """'Event encoding can raise and change the outcome': a task id in a delegation's
    context whose __str__ raised made the delegation raise, where events off it ran."""
    path = tmp_path / "events.jsonl"
    events.configure(path)
    try:
        result = await Supervisor(echo).delegate(
            "hi", timeout=5, context={"task_id": _Unprintable()}
        )
    finally:
        events.configure()
    assert result.ok, result.report
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["task_id"] for line in lines] == ["<_Unprintable whose str() raised>"] * 2


@pytest.mark.parametrize("sink", ["structlog", "logging"])
async def test_text_only_sinks_get_text_they_can_write(
    sink: str, caplog: pytest.LogCaptureFixture
) -> None:
    """'The structlog sink gets unsanitised strings': a subject with a lone surrogate
    reached structlog's printer, whose UnicodeEncodeError made the delegation raise. It
    arrives with U+FFFD, as a JSON-lines file has it."""
    events.configure(**{sink: True})
    try:
        with capture_logs() as seen, caplog.at_level(logging.INFO, logger="lyra"):
            result = await Supervisor(echo).delegate("hi", timeout=5, subject="P\ud800")
    finally:
        events.configure()
    assert result.ok
    if sink == "structlog":
        assert [e["subject"] for e in seen] == ["P\ufffd", "P\ufffd"]
    else:
        assert all("'P\ufffd'" in r.getMessage() for r in caplog.records if r.name == "lyra")


def test_a_level_floor_drops_what_is_below_it() -> None:
    """configure(stream, level='warning') keeps warnings and errors only."""
    stream = io.StringIO()
    events.configure(stream, level="warning")
    try:
        events.info("quiet")
        events.warning("loud", n=1)
    finally:
        events.configure()
    assert [json.loads(line)["event"] for line in stream.getvalue().splitlines()] == ["loud"]


def test_a_full_disk_is_reported_never_raised() -> None:
    """Writing to a full device: no exception, nothing torn, one problem named."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    events.configure("/dev/full")
    try:
        events.info("one", text="x" * 100)
        events.info("two")
        problems = events.problems()
    finally:
        events.configure()
    assert problems == ["could not write events to /dev/full: No space left on device"]


def test_a_short_write_is_cut_back_to_the_last_whole_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the disk fills mid-line, the half line is removed: the file ends in a newline."""
    log = tmp_path / "events.jsonl"
    real_write = os.write
    calls = {"n": 0}

    def filling_up(fd: int, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] == 2:
            return real_write(fd, data[:10])  # the disk filled after 10 bytes
        return real_write(fd, data)

    events.configure(log)
    monkeypatch.setattr(os, "write", filling_up)
    try:
        events.info("first")
        events.info("second")
        events.info("third")
    finally:
        monkeypatch.undo()
        problems = events.problems()
        events.configure()
    text = log.read_text()
    assert text.endswith("\n")
    assert [json.loads(line)["event"] for line in text.splitlines()] == ["first"]
    assert problems
    assert "No space left on device" in problems[0]


@pytest.mark.parametrize("fragment", ['{"event": "delegation_st', "x" * 200_000])
def test_a_torn_last_line_is_ended_before_the_next_event(tmp_path: Path, fragment: str) -> None:
    """A log a killed process left mid-line keeps the fragment as a line of its own (a
    reader skips it as malformed); the next process's events start lines of their own,
    after a note."""
    log = tmp_path / "events.jsonl"
    log.write_text('{"event": "delegation_started"}\n' + fragment)
    events.configure(log)
    try:
        events.info("delegation_completed")
    finally:
        events.configure()
    lines = log.read_text().splitlines()
    assert lines[1] == fragment
    assert [json.loads(line)["event"] for line in lines[:1] + lines[2:]] == [
        "delegation_started",
        "torn_line_ended",
        "delegation_completed",
    ]


def test_rundir_appends_after_a_torn_line_start_a_line_of_their_own(tmp_path: Path) -> None:
    """results.jsonl cut short by a kill: the resumed run's first line is whole, not
    glued onto the fragment."""
    run = RunDir(tmp_path)
    run.results.write_text('{"protein_id": "P04637"}\n{"protein_id": "Q8')
    with capture_logs() as logged:
        run.append(run.results, '{"protein_id": "P69905"}')
    run.close()
    assert run.results.read_text().splitlines() == [
        '{"protein_id": "P04637"}',
        '{"protein_id": "Q8',
        '{"protein_id": "P69905"}',
    ]
    assert [e["event"] for e in logged] == ["torn_line_ended"]


def test_a_pipe_whose_reader_left_fails_the_sink_instead_of_blocking(tmp_path: Path) -> None:
    """Events to a named pipe whose reader has gone: the write fails (the sink is marked
    broken and the problem noted), it never blocks the program."""
    pipe = tmp_path / "events.pipe"
    os.mkfifo(pipe)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    events.configure(pipe)
    os.close(reader)
    try:
        for _ in range(2_000):  # far more than a pipe buffers
            events.info("delegation_completed", padding="x" * 200)
        problems = events.problems()
    finally:
        events.configure()
    assert problems
    assert "Broken pipe" in problems[0]


def test_text_that_is_not_unicode_never_breaks_an_event(tmp_path: Path) -> None:
    """A lone surrogate from a child or a data source is escaped, not an error."""
    log = tmp_path / "events.jsonl"
    events.configure(log)
    try:
        events.warning("odd", text="bad \ud800 text")
    finally:
        events.configure()
    assert json.loads(log.read_text())["text"] == "bad \ud800 text"


def test_capturing_keeps_a_blocks_events_even_unconfigured() -> None:
    """capturing() hands back the events of a block as dicts, whatever the sinks."""
    events.configure()
    with events.capturing() as kept:
        events.info("inside", n=1)
    events.info("outside")
    assert [(e["event"], e["n"]) for e in kept] == [("inside", 1)]


def test_an_unknown_level_is_refused() -> None:
    """A misspelt level is a caller's mistake, said at once."""
    with pytest.raises(ValueError, match="level must be one of"):
        events.configure(level="verbose")


def test_a_level_is_read_as_logging_spells_it_too(tmp_path: Path) -> None:
    """ "WARNING" is "warning" (as the logging module spells levels): info is dropped."""
    log = tmp_path / "events.jsonl"
    try:
        events.configure(log, level="WARNING")
        events.info("dropped")
        events.warning("kept")
    finally:
        events.configure()
    assert [json.loads(line)["event"] for line in log.read_text().splitlines()] == ["kept"]
