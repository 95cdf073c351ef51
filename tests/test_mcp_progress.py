"""Progress over MCP: ``delegate_task`` (and ``delegation_result`` while it waits) sends
``notifications/progress`` to a client that asked for them, through the official SDK's
client over stdio (protocol 2025-11-25) and over Streamable HTTP (2026-07-28)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from mcp import Client
from mcp.shared.dispatcher import ProgressFnT
from mcp_types import CallToolResult

from fakes import lyra_mcp
from fakes.lyra_mcp import report_of

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EVERY = 0.1
"""--progress-every of the servers here: a keep-alive goes out every 3 × EVERY s."""

Call = Callable[[str, dict[str, Any], ProgressFnT], Awaitable[CallToolResult]]
Seen = list[tuple[float, float | None, str | None]]


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[lyra_mcp.Served]:
    """One ``lyra mcp --http`` for the module, serving the plodding child."""
    log = tmp_path_factory.mktemp("progress") / "stderr.txt"
    args = ("--child", "fakes.children:plodder", "--progress-every", str(EVERY))
    with lyra_mcp.http(*args, log=log) as served:
        yield served


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[IO[str]]:
    """The stdio server's stderr, in a file."""
    with (tmp_path / "stderr.txt").open("w+", encoding="utf-8") as stream:
        yield stream


@asynccontextmanager
async def calling(
    transport: str, errlog: IO[str], http_server: lyra_mcp.Served
) -> AsyncIterator[Call]:
    """``call(tool, arguments, on_progress)`` on a client of ``lyra mcp``: the SDK's
    ClientSession over stdio, or its Client over HTTP (the newest protocol)."""
    if transport == "stdio":
        args = ("--child", "fakes.children:plodder", "--progress-every", str(EVERY))
        async with lyra_mcp.stdio(*args, errlog=errlog) as session:
            yield lambda name, arguments, on_progress: session.call_tool(
                name, arguments, progress_callback=on_progress
            )
    else:
        async with Client(http_server.url) as client:
            assert client.protocol_version == "2026-07-28"
            yield lambda name, arguments, on_progress: client.call_tool(
                name, arguments, progress_callback=on_progress
            )


async def patient_call(
    call: Call, name: str, arguments: dict[str, Any], *, patience: float
) -> tuple[CallToolResult | None, Seen]:
    """The call as clients that give up after ``patience`` s without news make it (the
    TypeScript SDK's resetTimeoutOnProgress): each progress notification restarts
    the clock. None when the client gave up."""
    seen: Seen = []
    result = None
    with anyio.CancelScope() as waiting:
        waiting.deadline = anyio.current_time() + patience

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))
            waiting.deadline = anyio.current_time() + patience

        result = await call(name, arguments, on_progress)
    return result, seen


TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])


async def test_steps_arrive_as_progress_at_most_every_tick(
    errlog: IO[str], http_server: lyra_mcp.Served
) -> None:
    """A child that completes 100 steps in about a second: the client hears of them
    as it goes, in a handful of notifications (not one per step), each naming the
    latest step, its progress the seconds elapsed (always increasing) of the
    deadline's total."""
    async with calling("http", errlog, http_server) as call:
        arguments = {"prompt": "100x0.01", "timeout": 20}
        result, seen = await patient_call(call, "delegate_task", arguments, patience=20)
    assert result is not None
    assert report_of(result).startswith("plodded 100 steps\n")
    progress = [value for value, _, _ in seen]
    assert progress == sorted(set(progress))  # strictly increasing, as the protocol asks
    assert {total for _, total, _ in seen} == {20.0}
    duration = result.structured_content["duration"]  # type: ignore[index]
    assert 3 <= len(seen) <= duration / EVERY + 2
    messages = [message for _, _, message in seen]
    assert all(m == "working" or (m or "").startswith("step ") for m in messages)
    assert len({m for m in messages if m != "working"}) >= 3  # the steps, as they came


@TRANSPORTS
async def test_a_quiet_child_keeps_a_resetting_client_waiting(
    transport: str, errlog: IO[str], http_server: lyra_mcp.Served
) -> None:
    """A child silent for 2.5 s after its first step outlives a client that gives up
    after 1.5 s without news: keep-alive notifications (its last step as the
    message) arrive at least every 3 ticks (0.3 s) while it lives, so the result comes.
    (The client's patience leaves a loaded machine a second for the result to come
    after the child's end, which comes up to a tick after the last keep-alive.)"""
    async with calling(transport, errlog, http_server) as call:
        arguments = {"prompt": "1x0.01 quiet 2.5", "timeout": 20}
        result, seen = await patient_call(call, "delegate_task", arguments, patience=1.5)
    assert result is not None, f"the client gave up; progress seen: {seen}"
    assert report_of(result).startswith("plodded 1 steps\n")
    quiet = [message for _, _, message in seen if message == "step 1 of 1"]
    assert len(quiet) >= 3  # the keep-alives during the silence


async def test_waiting_for_a_detached_result_sends_progress(
    errlog: IO[str], http_server: lyra_mcp.Served
) -> None:
    """delegation_result waiting on a detached delegation reports its steps as progress
    (the child goes quiet for 2 s after its steps, so a slow machine that only asks
    after the steps still hears of them, as keep-alives naming the last step), with the
    attempt's own progress and deadline, as delegate_task does."""
    async with calling("http", errlog, http_server) as call:
        started = await call("start_delegation", {"prompt": "4x0.1 quiet 2"}, None)  # type: ignore[arg-type]
        key = started.structured_content["delegation_id"]  # type: ignore[index]
        arguments = {"delegation_id": key, "wait": 10}
        result, seen = await patient_call(call, "delegation_result", arguments, patience=10)
    assert result is not None
    assert result.structured_content["state"] == "completed"  # type: ignore[index]
    assert any((message or "").startswith("step ") for _, _, message in seen)
    # as delegate_task's: the seconds since the attempt began, of its deadline
    assert {total for _, total, _ in seen} == {300}
    assert [progress for progress, _, _ in seen] == sorted({p for p, _, _ in seen})


async def test_an_ended_attempts_keep_alives_never_pass_their_total(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A wait on a detached delegation whose attempt has ended (a durable question
    waits; its time is up) keeps sending keep-alives, each larger than the last as the
    protocol asks: past the attempt's deadline they go without a total, never a progress
    above its total."""
    from types import SimpleNamespace

    from lyra.mcp import _progress

    ended = SimpleNamespace(
        timeout=1.0,
        remaining=lambda: 0.0,
        steps_done=1,
        tool_executions=0,
        current_tool=None,
        last_progress=0.0,
        completed_steps=["Fetched"],
    )
    monkeypatch.setattr(_progress, "attempt", lambda key: ended)
    sent: list[tuple[float, float | None]] = []

    class Client:
        async def report_progress(self, progress: float, total: float | None, _: str) -> None:
            sent.append((progress, total))

    with anyio.move_on_after(0.1):
        await _progress.report_progress(Client(), "d-1", total=None, every=0.001)  # type: ignore[arg-type]
    assert len(sent) >= 3
    assert sent[0] == (1.0, 1.0)
    assert all(total is None or progress <= total for progress, total in sent)
    assert [p for p, _ in sent] == sorted({p for p, _ in sent})
