"""``lyra mcp`` end to end: the official MCP client starts ``python -m lyra mcp`` over
stdio, lists its tools and calls them against scripted children and against the
Anthropic child on the local Messages API fake."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import anyio
import pytest

from fakes.lyra_mcp import TESTS, report_of
from fakes.lyra_mcp import stdio as lyra_mcp
from fakes.messages_api import MessagesAPI, message, text, tool_use
from lyra import parse_report
from lyra._extras import install_hint
from lyra.settings import DEFAULT_MODEL

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def errlog(tmp_path: Path) -> Any:
    """The server's stderr, in a file the test can read."""
    with (tmp_path / "stderr.txt").open("w+", encoding="utf-8") as stream:
        yield stream


async def test_the_client_lists_the_tools_and_delegates(errlog: IO[str], tmp_path: Path) -> None:
    """Both tools are listed with their schemas; delegate_task returns the report text
    and the same fields as structured content; events go to --events, not stdout."""
    events = tmp_path / "events.jsonl"
    async with lyra_mcp(
        "--child", "fakes.children:spender", "--events", str(events), errlog=errlog
    ) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        result = await session.call_tool("delegate_task", {"prompt": "Summarise", "timeout": 10})
    assert set(tools) == {
        "delegate_task",
        "parse_report",
        "start_delegation",
        "delegation_status",
        "delegation_result",
        "cancel_delegation",
        "list_delegations",
        "answer_delegation",
    }
    delegate = tools["delegate_task"]
    assert set(delegate.input_schema["properties"]) == {
        "prompt",
        "timeout",
        "idle_timeout",
        "budget",
    }
    assert delegate.input_schema["required"] == ["prompt"]
    budget = delegate.input_schema["$defs"]["Budget"]["properties"]
    assert set(budget) == {"max_tokens", "max_cost_usd", "max_turns", "max_tool_calls"}
    assert delegate.output_schema is not None
    assert {"status", "category", "retryable", "completed_steps"} <= set(
        delegate.output_schema["properties"]
    )
    assert set(tools["parse_report"].input_schema["properties"]) == {"text"}
    assert all(tool.input_schema["additionalProperties"] is False for tool in tools.values())
    assert result.is_error is False
    report = report_of(result)
    assert report.startswith("spent on: Summarise\n")
    assert result.structured_content == parse_report(report).model_dump(mode="json")
    assert result.structured_content["tokens_used"] == 1200
    assert "delegation_completed" in events.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("child", "arguments", "error_type"),
    [
        ("stalls", {"idle_timeout": 0.3}, "idle"),
        ("spender", {"budget": {"max_tokens": 500}}, "budget"),
    ],
    ids=["idle", "budget"],
)
async def test_a_childs_failure_is_a_normal_result_carrying_the_report(
    errlog: IO[str], child: str, arguments: dict[str, Any], error_type: str
) -> None:
    """A scripted child's failure comes back as a result (not an error) whose text is
    the failure report and whose fields name the category; parse_report reads the
    same fields back from the text."""
    async with lyra_mcp("--child", f"fakes.children:{child}", errlog=errlog) as session:
        result = await session.call_tool(
            "delegate_task", {"prompt": "Go", "timeout": 10, **arguments}
        )
        parsed = await session.call_tool("parse_report", {"text": report_of(result)})
    assert result.is_error is False
    fields = result.structured_content
    assert fields is not None
    assert (fields["status"], fields["category"], fields["error_type"]) == (
        "failed",
        "timeout",
        error_type,
    )
    report = report_of(result)
    assert report.startswith("Child agent failed:")
    assert "<failure_category>timeout</failure_category>" in report
    assert parsed.is_error is False
    assert parsed.structured_content == fields
    assert json.loads(report_of(parsed)) == fields


async def test_bad_arguments_and_non_reports_are_tool_errors(errlog: IO[str]) -> None:
    """A negative timeout, an argument the tool does not take, or a text with no report
    is a tool error the model can read, not a protocol error, and the server goes on
    serving."""
    async with lyra_mcp("--child", "fakes.children:spender", errlog=errlog) as session:
        negative = await session.call_tool("delegate_task", {"prompt": "Go", "timeout": -1})
        text = await session.call_tool("delegate_task", {"prompt": "Go", "timeout": "5"})
        true = await session.call_tool("delegate_task", {"prompt": "Go", "idle_timeout": True})
        unknown = await session.call_tool("delegate_task", {"prompt": "Go", "idle_timout": 5})
        nothing = await session.call_tool("parse_report", {"text": "no report here"})
        after = await session.call_tool("delegate_task", {"prompt": "Go"})
    assert negative.is_error is True
    assert "timeout" in report_of(negative)
    assert (text.is_error, true.is_error) == (True, True)  # no number read from "5" or true
    assert "Traceback" not in Path(errlog.name).read_text()
    assert unknown.is_error is True  # a misspelt limit is refused, never silently dropped
    assert "idle_timout" in report_of(unknown)
    assert nothing.is_error is True
    assert after.is_error is False


async def hello(child: str, errlog: IO[str], **options: Any) -> tuple[str, str]:
    """delegate_task("hello") on a stdio server of ``child``: the report, and all the
    server wrote on stderr."""
    async with lyra_mcp("--child", child, errlog=errlog, **options) as session:
        result = await session.call_tool("delegate_task", {"prompt": "hello"})
    errlog.seek(0)
    return report_of(result), errlog.read()


async def test_stdout_carries_only_the_protocol(errlog: IO[str]) -> None:
    """A child that prints to stdout cannot corrupt the protocol: its print lands on
    stderr and its result still arrives."""
    report, written = await hello("fakes.children:chatty", errlog)
    assert report.startswith("said: hello\n")
    assert "chatty on stdout: hello" in written
    assert "chatty on stderr: hello" in written


async def test_a_child_module_that_prints_as_it_loads_never_reaches_the_protocol(
    errlog: IO[str],
) -> None:
    """What the --child module prints at import (or its child as it is built) lands on
    stderr: it came before the server claimed stdout, onto the protocol stream."""
    unbuffered = {"PYTHONUNBUFFERED": "1"}  # each print written at once, not when flushed
    report, written = await hello("fakes.loud:child", errlog, env=unbuffered)
    assert report.startswith("heard: hello\n")
    assert "loud module: printed at import" in written
    assert "loud child: printed when built" in written


async def test_the_anthropic_child_answers_through_the_server(errlog: IO[str]) -> None:
    """With ANTHROPIC_API_KEY (and no --child), delegate_task runs the Anthropic child,
    here against the local Messages API fake, and returns its report."""
    finish = tool_use("finish", {"result": "pLDDT 75: medium"})
    script = [message([text("Looked."), finish], stop_reason="tool_use")]
    with MessagesAPI(script) as api:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.url}
        async with lyra_mcp(errlog=errlog, env=env) as session:
            result = await session.call_tool("delegate_task", {"prompt": "How reliable is P04637?"})
    assert api.requests[0]["model"] == DEFAULT_MODEL
    assert api.requests[0]["messages"][0]["content"] == "How reliable is P04637?"
    assert report_of(result).startswith("pLDDT 75: medium\n")
    fields = result.structured_content
    assert fields is not None
    assert (fields["status"], fields["tokens_used"], fields["turns"]) == ("completed", 15, 1)


def run_lyra_mcp(*args: str, code: str | None = None) -> subprocess.CompletedProcess[str]:
    """``lyra mcp`` (or ``code`` before it) in a fresh interpreter, stdin closed."""
    env = {"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"}
    command = (
        [sys.executable, "-m", "lyra", "mcp", *args]
        if code is None
        else [
            sys.executable,
            "-c",
            f"{code}\nfrom lyra.cli import main\nraise SystemExit(main(['mcp', *{list(args)!r}]))",
        ]
    )
    return subprocess.run(
        command, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ((), None, "lyra: no child given and none configured"),
        (("--child", "fakes.children:nobody"), None, "lyra: cannot load the child"),
        (
            ("--child", "fakes.children:spender"),
            "import sys; sys.modules['mcp'] = None",
            "lyra: the MCP server needs the mcp extra (the MCP SDK is not installed): "
            + install_hint("mcp"),
        ),
        (  # the extra is named first: without it no child can help
            (),
            "import sys; sys.modules['mcp'] = None",
            "lyra: the MCP server needs the mcp extra (the MCP SDK is not installed): "
            + install_hint("mcp"),
        ),
    ],
    ids=["no child", "unknown child", "no extra", "no extra and no child"],
)
def test_a_server_that_cannot_serve_says_why_and_exits_2(
    args: tuple[str, ...], code: str | None, message: str
) -> None:
    """No child, a child that cannot load, or no MCP SDK: one line on stderr, exit 2,
    nothing on stdout, before any protocol starts."""
    done = run_lyra_mcp(*args, code=code)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(message), done.stderr
    assert len(done.stderr.splitlines()) == 1


async def test_a_line_that_is_no_message_is_answered_and_the_session_goes_on() -> None:
    """Over stdio, a line that is not JSON, JSON Python cannot hold (a lone surrogate
    escape) or JSON that is no JSON-RPC message gets JSON-RPC's error (``id`` null):
    the SDK's transport dropped it, and its sender waited for a reply in vain."""
    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        "not json",
        '{"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"x": "\\ud800"}}',
        '{"id": 3}',
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "ping"}),
    ]
    command = [sys.executable, "-m", "lyra", "mcp", "--child", "fakes.children:spender"]
    env = {"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"}
    replies: list[dict[str, Any]] = []
    with anyio.fail_after(30):
        async with await anyio.open_process(command, env=env) as server:
            assert server.stdin is not None
            assert server.stdout is not None
            await server.stdin.send("".join(f"{line}\n" for line in lines).encode())
            received = b""
            while not any(reply.get("id") == 4 for reply in replies):  # the last one
                received += await server.stdout.receive()
                *whole, received = received.split(b"\n")
                replies += [json.loads(line) for line in whole]
            await server.stdin.aclose()
    errors = [(reply["id"], reply["error"]["code"]) for reply in replies if "error" in reply]
    assert errors == [(None, -32700), (None, -32700), (None, -32600)]
    assert [reply["id"] for reply in replies if "result" in reply] == [1, 4]


@pytest.mark.parametrize("calling", [False, True], ids=["idle", "a call in flight"])
def test_ctrl_c_stops_the_stdio_server_at_once(calling: bool) -> None:
    """SIGINT ends the stdio server with 130 at once, idle or mid-call, as SIGTERM does
    (it waited on the thread reading stdin until the client closed it)."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]  # fmt: skip
    if calling:
        arguments = {"prompt": "x", "timeout": 60}
        messages.append(
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "delegate_task", "arguments": arguments}}
        )  # fmt: skip
    with subprocess.Popen(
        [sys.executable, "-m", "lyra", "mcp", "--child", "fakes.children:stalls"],
        env={"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as server:
        try:
            assert server.stdin is not None
            assert server.stdout is not None
            for message in messages:
                server.stdin.write((json.dumps(message) + "\n").encode())
                server.stdin.flush()
            assert json.loads(server.stdout.readline())["id"] == 1  # it serves
            time.sleep(0.5)
            server.send_signal(signal.SIGINT)
            assert server.wait(timeout=10) == 130
        finally:
            if server.poll() is None:
                server.kill()
