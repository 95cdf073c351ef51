"""Runs that survive what users and machines do to them: absurd limits, deadlines
overrun by code lyra cannot pre-empt, processes that must end when their work
ends, and the small edges of the commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from structlog.testing import capture_logs

from lyra import Budget, ChildContext, Supervisor, parse_report
from lyra.errors import BudgetExhausted
from lyra.supervisor import LocalExecutor

pytestmark = pytest.mark.anyio

TESTS = Path(__file__).resolve().parent


def lyra(
    *args: str, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """The real ``lyra`` command in a fresh interpreter (the tests' fakes importable)."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(TESTS)}
    return subprocess.run(
        [sys.executable, "-m", "lyra", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


# -- absurd limits are bounded by the work ------------------------------------------------


async def test_a_huge_concurrency_over_a_few_items_starts_a_few_workers() -> None:
    """A pool asked for a billion workers over three lazily pulled items starts no more
    workers than it has items (plus the one that finds the end)."""
    running = peak = 0

    async def work(item: int) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.01)
        running -= 1

    done: list[int] = []

    def on_error(item: int, exc: Exception) -> None:
        done.append(item)

    started = time.perf_counter()
    await LocalExecutor().each(work, iter(range(3)), max_concurrency=10**9, on_error=on_error)
    assert peak == 3
    assert done == []
    assert time.perf_counter() - started < 5


@pytest.mark.slow
def test_lyra_analyze_with_a_billion_workers_finishes(tmp_path: Path) -> None:
    """``lyra analyze P04637 --concurrency 1000000000`` runs the one protein and exits 0."""
    done = lyra("analyze", "P04637", "--concurrency", "1000000000", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 of 1 completed" in done.stdout


# -- a deadline overrun is never silent ---------------------------------------------------


async def _blocks_the_loop(prompt: str, ctx: ChildContext) -> str:
    time.sleep(0.6)  # noqa: ASYNC251 - the mistake under test: nothing can interrupt it
    return "done, late"


async def _holds_a_thread(prompt: str, ctx: ChildContext) -> str:
    await anyio.to_thread.run_sync(time.sleep, 0.6)  # not abandoned on cancellation
    return "grandchild done, late"


async def _waits_on_its_grandchild(prompt: str, ctx: ChildContext) -> str:
    result = await ctx.delegate("help", child=_holds_a_thread)
    return f"parent saw {result.status}"


@pytest.mark.parametrize(
    ("child", "blamed"),
    [(_blocks_the_loop, "the event loop"), (_waits_on_its_grandchild, "worker thread")],
    ids=["blocked event loop", "grandchild in a thread"],
)
async def test_a_result_that_comes_after_its_deadline_says_how_late(
    child: Any, blamed: str
) -> None:
    """A result held past its deadline by code lyra cannot pre-empt keeps its status but
    carries the overrun in the result, the report's metadata and a warning event naming
    what held it."""
    with capture_logs() as logs:
        result = await Supervisor(child).delegate("x", timeout=0.2)
    assert result.overrun_s is not None
    assert result.overrun_s >= 0.3
    assert parse_report(result.report).overrun_s == result.overrun_s
    warned = [e for e in logs if e["event"] == "deadline_overrun"]
    assert warned
    assert all(blamed in e["blocked_by"] for e in warned)
    assert {e["session_id"] for e in warned} >= {result.session_id}
    finished = [e for e in logs if e["session_id"] == result.session_id and "duration" in e]
    assert finished[-1]["overrun_s"] == result.overrun_s


async def _blocks_the_loop_then_steps(prompt: str, ctx: ChildContext) -> str:
    ctx.step("started")
    time.sleep(0.6)  # noqa: ASYNC251 - the mistake under test
    ctx.step("done")  # progress after the idle deadline passed unseen
    return "done, late"


@pytest.mark.parametrize("child", [_blocks_the_loop, _blocks_the_loop_then_steps])
async def test_an_idle_deadline_passed_in_a_blocked_loop_is_an_overrun_too(child: Any) -> None:
    """No progress past the idle timeout while synchronous code holds the loop: the
    result keeps its status, as past the total deadline, and says how late it is, with
    the warning naming the idle timeout it passed. Progress once the loop is free again
    moves the idle deadline, but does not hide that it was passed."""
    with capture_logs() as logs:
        result = await Supervisor(child).delegate("x", timeout=30, idle_timeout=0.2)
    assert result.status == "completed"
    assert result.overrun_s is not None
    assert result.overrun_s >= 0.3
    warned = [e for e in logs if e["event"] == "deadline_overrun"]
    assert [e.get("idle_timeout") for e in warned] == [0.2]
    assert "the event loop" in warned[0]["blocked_by"]


async def test_an_overrun_past_the_total_deadline_names_no_idle_timeout() -> None:
    """An idle deadline passed unseen early on, then the total one passed by more: the
    overrun is the total deadline's, and its warning names no idle timeout."""

    async def blocks_twice(prompt: str, ctx: ChildContext) -> str:
        ctx.step("a")
        time.sleep(0.6)  # noqa: ASYNC251 - the idle deadline (0.3) passes unseen
        ctx.step("b")
        for _ in range(3):
            await anyio.sleep(0.1)
            ctx.step("c")  # (the last within 0.3 s of the end: no idle deadline before it)
        time.sleep(0.8)  # noqa: ASYNC251 - then the total one (1.2) passes by more
        return "late"

    with capture_logs() as logs:
        result = await Supervisor(blocks_twice).delegate("x", timeout=1.2, idle_timeout=0.3)
    assert result.overrun_s is not None
    assert result.overrun_s >= 0.4
    warned = [e for e in logs if e["event"] == "deadline_overrun"]
    assert [e.get("idle_timeout") for e in warned] == [None]


async def test_a_result_on_time_carries_no_overrun() -> None:
    """An attempt that ends within its deadline has no overrun anywhere; nor does one
    that waited for an answer longer than its idle timeout (a wait is not idle time)."""

    async def quick(prompt: str, ctx: ChildContext) -> str:
        return "on time"

    async def asks(prompt: str, ctx: ChildContext) -> str:
        return await ctx.ask("Which release?")

    async def slow_answer(question: str) -> str:
        await anyio.sleep(0.5)
        return "2.1"

    result = await Supervisor(quick).delegate("x", timeout=5)
    assert result.overrun_s is None
    assert "overrun_s" not in result.report
    waited = await Supervisor(asks, answer=slow_answer).delegate("x", timeout=5, idle_timeout=0.2)
    assert (waited.status, waited.overrun_s) == ("completed", None)


async def test_a_thread_its_deadline_abandoned_spends_nothing_more() -> None:
    """A plain ``def`` child runs in a worker thread, which the deadline abandons. Its
    next request's turn (a charge ahead) is refused once the attempt is over, so it
    sends no more requests on the tree's budget: it went on spending after its report."""
    requests: list[int] = []
    refused: list[BaseException] = []

    def keeps_asking(prompt: str, ctx: ChildContext) -> str:
        try:
            for n in range(30):
                ctx.take_turn()
                requests.append(n)
                time.sleep(0.05)
        except BudgetExhausted as exc:
            refused.append(exc)
            raise
        return "done"

    supervisor = Supervisor(keeps_asking, budget=Budget(max_turns=100))
    result = await supervisor.delegate("x", timeout=0.3)
    assert result.failure is not None
    assert result.failure.category == "timeout"
    sent = len(requests)
    await anyio.sleep(0.3)
    assert len(requests) <= sent + 1  # (one may have been on its way)
    assert len(refused) == 1
    assert "the attempt is over" in str(refused[0])
    assert supervisor.account is not None
    assert supervisor.account.left().max_turns == 100 - len(requests)


async def test_a_context_whose_attempt_is_over_starts_no_grandchild() -> None:
    """Code a child left running after its attempt (a task it did not wait for) cannot
    delegate on the context either: the grandchild would spend the tree's budget."""
    kept: list[ChildContext] = []
    ran: list[str] = []

    async def leaves_its_context(prompt: str, ctx: ChildContext) -> str:
        kept.append(ctx)
        return "done"

    async def grandchild(prompt: str, ctx: ChildContext) -> str:
        ran.append(prompt)
        return "spent"

    result = await Supervisor(leaves_its_context).delegate("x", timeout=5)
    assert result.status == "completed"
    with pytest.raises(BudgetExhausted, match="the attempt is over"):
        await kept[0].delegate("more", child=grandchild)
    assert ran == []


async def test_a_delegation_tree_deeper_than_the_limit_is_an_invalid_task() -> None:
    """A child that delegates to itself without end meets the documented depth limit as
    an invalid_task with evidence, not a RecursionError classified as a tool error."""
    from lyra.delegation import MAX_DEPTH

    async def recurse(prompt: str, ctx: ChildContext) -> str:
        result = await ctx.delegate(prompt, child=recurse)
        if result.failure is None:
            return result.output or ""
        return f"{ctx.depth}: {result.failure.category}: {result.failure.evidence}"

    result = await Supervisor(recurse).delegate("again", timeout=30)
    assert result.ok
    assert result.output == (
        f"{MAX_DEPTH}: invalid_task: rule 3: the delegation tree is deeper than {MAX_DEPTH} levels"
    )


# -- processes end when their work ends ---------------------------------------------------


@pytest.mark.slow
def test_an_abandoned_blocking_tool_does_not_hold_the_process_open() -> None:
    """``lyra delegate`` whose child's tool blocks a thread for 20 s under a 1 s timeout
    prints the timeout report and exits at once, not when the thread wakes."""
    started = time.monotonic()
    done = lyra("delegate", "x", "--child", "fakes.children:stuck_in_a_tool", "--timeout", "1")
    elapsed = time.monotonic() - started
    assert done.returncode == 1
    assert "<failure_category>timeout</failure_category>" in done.stdout
    assert elapsed < 10  # the tool would have held it 20 s


@contextmanager
def _mcp_server(events: Path, child: str) -> Iterator[subprocess.Popen[bytes]]:
    """``lyra mcp`` with pipes for the test to speak JSON-RPC on; killed afterwards."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(TESTS)}
    command = [sys.executable, "-m", "lyra", "mcp", "--child", child, "--events", str(events)]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as server:
        try:
            yield server
        finally:
            server.kill()


def _call(server: subprocess.Popen[bytes], timeout: float) -> None:
    """Initialise the MCP session and send one delegate_task call (JSON-RPC over stdio)."""
    assert server.stdin is not None
    assert server.stdout is not None
    client = {"name": "test", "version": "1"}
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "delegate_task", "arguments": {"prompt": "x", "timeout": timeout}},
        },
    ):
        server.stdin.write(json.dumps(message).encode() + b"\n")
        server.stdin.flush()
        if message.get("id") == 1:
            assert b'"result"' in server.stdout.readline()


@pytest.mark.slow
def test_lyra_mcp_ends_when_its_client_leaves_and_closes_the_attempt_in_its_log(
    tmp_path: Path,
) -> None:
    """A client that hangs up mid-call: the server exits at once (the abandoned tool
    thread does not hold it), and its log closes the attempt as cancelled, so lyra logs
    stats counts it cancelled, not unfinished."""
    events = tmp_path / "events.jsonl"
    with _mcp_server(events, "fakes.children:stuck_in_a_tool") as server:
        _call(server, timeout=30)
        time.sleep(0.5)  # the call is under way
        assert server.stdin is not None
        server.stdin.close()
        left = time.monotonic()
        server.wait(timeout=20)
        assert time.monotonic() - left < 5
        assert server.returncode == 0
    stats = lyra("logs", "stats", str(events), "--json")
    counts = json.loads(stats.stdout)
    assert (counts["cancelled"], counts["unfinished"], counts["delegations"]) == (1, 0, 1)


@pytest.mark.slow
def test_lyra_mcp_whose_stdout_is_closed_says_so_in_one_line(tmp_path: Path) -> None:
    """A client that closes the server's stdout: one line on stderr, no traceback, exit 0."""
    with _mcp_server(tmp_path / "events.jsonl", "fakes.children:spender") as server:
        _call(server, timeout=5)
        assert server.stdout is not None
        server.stdout.close()
        time.sleep(0.5)
        _, err = server.communicate(timeout=20)
        assert server.returncode == 0
    assert err.decode().strip() == "lyra mcp: the client closed the connection; stopping"


async def test_an_attempt_cancelled_from_outside_is_closed_in_the_log() -> None:
    """An attempt its caller cancels logs delegation_cancelled (with its duration) before
    the cancellation goes on, so no log shows it running forever."""

    async def slow(prompt: str, ctx: ChildContext) -> str:
        await anyio.sleep(10)
        return "never"

    with capture_logs() as logs, anyio.move_on_after(0.2):
        await Supervisor(slow).delegate("x", timeout=30)
    [cancelled] = [e for e in logs if e["event"] == "delegation_cancelled"]
    assert cancelled["reason"] == "CancelledError"
    assert 0.1 < cancelled["duration"] < 5


@pytest.mark.slow
def test_an_infinite_timeout_over_mcp_is_a_tool_error_without_a_traceback(tmp_path: Path) -> None:
    """``"timeout": Infinity`` (JSON as Python writes it) is refused by validation as a
    readable tool error; the server logs no traceback and goes on."""
    with _mcp_server(tmp_path / "events.jsonl", "fakes.children:spender") as server:
        _call(server, timeout=float("inf"))
        assert server.stdout is not None
        answer = json.loads(server.stdout.readline())
        assert server.stdin is not None
        assert server.stderr is not None
        server.stdin.close()
        server.wait(timeout=20)
        err = server.stderr.read()
    assert answer["result"]["isError"] is True
    assert "finite" in answer["result"]["content"][0]["text"]
    assert "Traceback" not in err.decode()


# -- the small edges of the commands ------------------------------------------------------


def _loop(tmp_path: Path) -> Path:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    return loop


def _bad_gzip(tmp_path: Path) -> Path:
    bad = tmp_path / "bad.gz"
    bad.write_bytes(b"this is no gzip data\n")
    return bad


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "make", "said"),
    [
        ("report parse", lambda tmp: Path("/dev/zero"), "more than 100 MiB"),
        ("report parse", _loop, "Too many levels of symbolic links"),
        ("logs stats", _loop, "Too many levels of symbolic links"),
        ("logs stats", _bad_gzip, "Not a gzipped file"),
    ],
    ids=["endless input", "symlink loop (report)", "symlink loop (logs)", "bad gzip"],
)
def test_an_input_that_cannot_be_read_is_one_line_saying_why(
    tmp_path: Path, command: str, make: Any, said: str
) -> None:
    """Endless input, a symlink loop, a file that is no gzip: exit 2, one line that
    names the file and the real reason, nothing on stdout."""
    path = make(tmp_path)
    done = lyra(*command.split(), str(path), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    [line] = done.stderr.splitlines()
    assert str(path) in line
    assert said in line


def test_a_file_that_vanishes_from_a_folder_being_parsed_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report file removed while lyra report parse reads its folder (a run still
    writing) is skipped with a note; the other reports are still parsed."""
    from lyra import render_report
    from lyra.cli import _report_command, main
    from lyra.delegation import TaskReport

    folder = tmp_path / "reports"
    folder.mkdir()
    for name in ("a", "b"):
        report = TaskReport(status="completed", output=f"report {name}", session_id=name)
        (folder / f"{name}.txt").write_text(render_report(report))
    real_read = _report_command.read_text

    def read_after_a_vanished(path: str) -> str:
        if path.endswith("a.txt"):
            os.remove(path)
        return real_read(path)

    monkeypatch.setattr(_report_command, "read_text", read_after_a_vanished)
    status = main(["report", "parse", str(folder)])
    out, err = capsys.readouterr()
    assert status == 0
    assert [r["session_id"] for r in json.loads(out)] == ["b"]
    assert "a.txt vanished while reading; skipped" in err
