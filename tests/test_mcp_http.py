"""``lyra mcp --http``: Streamable HTTP on 127.0.0.1 with its security defaults -- a bearer
token when one is set (and required beyond loopback), the SDK's DNS-rebinding
protection always on -- checked with raw requests and the official SDK client."""

from __future__ import annotations

import json
import signal
import socket
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from fakes import lyra_mcp
from lyra.cli import main
from lyra.errors import ConfigurationError
from lyra.mcp import serve_http

pytestmark = pytest.mark.slow

TOKEN = "s3cret-token"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[lyra_mcp.Served]:
    """``lyra mcp --http`` with LYRA_MCP_TOKEN set and one more allowed host name."""
    log = tmp_path_factory.mktemp("http") / "stderr.txt"
    args = ("--child", "fakes.children:spender", "--allow-host", "lyra.test")
    with lyra_mcp.http(*args, log=log, env={"LYRA_MCP_TOKEN": TOKEN}) as served:
        yield served


def post(served: lyra_mcp.Served, **headers: str) -> httpx.Response:
    """An initialize request, as a browser or a script would send it."""
    return httpx.post(
        served.url,
        json=INITIALIZE,
        headers={"Accept": "application/json, text/event-stream", **headers},
        timeout=10,
    )


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Basic {TOKEN}", TOKEN], ids=str)
def test_without_the_token_every_request_is_refused(
    server: lyra_mcp.Served, authorization: str | None
) -> None:
    """No token, a wrong one, or the right one not as a bearer: 401, saying how to
    authenticate, before the MCP layer sees anything."""
    headers = {"Authorization": authorization} if authorization is not None else {}
    response = post(server, **headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="lyra"'


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_the_bearer_scheme_is_read_in_any_case(server: lyra_mcp.Served, scheme: str) -> None:
    """RFC 7235: the scheme is case-insensitive (the token is not); the same check guards
    ``lyra a2a``."""
    assert post(server, Authorization=f"{scheme} {TOKEN}").status_code == 200
    assert post(server, Authorization=f"{scheme} {TOKEN.upper()}x").status_code == 401


@pytest.mark.anyio
async def test_the_sdk_client_with_the_token_delegates(server: lyra_mcp.Served) -> None:
    """The official client sending the bearer token lists the tools and delegates."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(server.url, http_client=http)) as client,
    ):
        tools = {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool("delegate_task", {"prompt": "Go"})
    assert {"delegate_task", "start_delegation", "delegation_result"} <= tools
    assert result.structured_content is not None
    assert result.structured_content["status"] == "completed"


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Host": "evil.example"}, 421),  # a name pointed at 127.0.0.1 (DNS rebinding)
        ({"Origin": "http://evil.example"}, 403),  # a web page's request
        ({"Host": "lyra.test"}, 200),  # --allow-host
        ({"Origin": "http://localhost:1234"}, 200),
    ],
    ids=["foreign host", "foreign origin", "allowed host", "loopback origin"],
)
def test_dns_rebinding_protection_is_on(
    server: lyra_mcp.Served, headers: dict[str, str], status: int
) -> None:
    """With the token, a Host or Origin that does not name this server is refused by
    the SDK's protection; the loopback names and --allow-host are accepted."""
    if headers.get("Host") == "lyra.test":
        headers = {"Host": f"lyra.test:{server.url.split(':')[2].split('/')[0]}"}
    response = post(server, Authorization=f"Bearer {TOKEN}", **headers)
    assert response.status_code == status, response.text


@pytest.mark.anyio
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7", "lyra.example"])
async def test_beyond_loopback_a_token_is_required(host: str) -> None:
    """serve_http refuses, before anything listens, a host other machines may reach
    when no token is given."""
    with pytest.raises(ConfigurationError, match="without a bearer token"):
        await serve_http(child=_never, host=host, port=0)


async def _never(prompt: str, ctx: Any) -> str:  # pragma: no cover - never served
    raise AssertionError("served")


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port on 127.0.0.1 something already listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--http", "--host", "0.0.0.0"], "refusing to serve on 0.0.0.0 without a bearer token"),
        (["--http", "--port", "{busy}"], "cannot listen on 127.0.0.1:{busy}"),
        (["--host", "127.0.0.1"], "--host, --port and --allow-host need --http"),
        (["--durable", "--database-url", "postgresql://x/y"], "--durable keeps delegations"),
    ],
    ids=["no token", "port in use", "host without http", "two stores"],
)
def test_what_cannot_be_served_is_a_usage_error(
    args: list[str], message: str, busy_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line on stderr, exit 2, nothing on stdout (the command line, in process: each
    is refused before anything serves)."""
    command = [a.format(busy=busy_port) for a in args]
    status = main(["mcp", "--child", "fakes.children:spender", *command])
    out, err = capsys.readouterr()
    assert (status, out) == (2, ""), err
    assert err.startswith(f"lyra: {message.format(busy=busy_port)}"), err
    assert len(err.splitlines()) == 1


@pytest.mark.anyio
async def test_a_client_that_ends_its_session_stops_the_child(tmp_path: Any) -> None:
    """DELETE of the session mid-``delegate_task`` (a client closing it) cancels the
    child: nobody could get its result, so nothing more is spent on it."""
    events = tmp_path / "events.jsonl"
    args = ("--child", "fakes.children:stalls", "--events", str(events))
    with lyra_mcp.http(*args, log=tmp_path / "stderr.txt") as served:
        headers = {"Accept": "application/json, text/event-stream"}
        async with httpx.AsyncClient(timeout=10) as client:
            opened = await client.post(served.url, json=INITIALIZE, headers=headers)
            headers |= {
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25",
            }
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await client.post(served.url, json=initialized, headers=headers)
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "delegate_task", "arguments": {"prompt": "Go", "timeout": 60}},
            }
            async with anyio.create_task_group() as group:
                group.start_soon(_drain, client, served.url, call, headers)
                await _logged(events, "delegation_started")
                assert (await client.delete(served.url, headers=headers)).status_code == 200
                cancelled = await _logged(events, "delegation_cancelled")
                group.cancel_scope.cancel()
    assert cancelled["duration"] < 30


async def _drain(client: httpx.AsyncClient, url: str, body: Any, headers: Any) -> None:
    async with client.stream("POST", url, json=body, headers=headers) as response:
        async for _ in response.aiter_bytes():
            pass


async def _logged(path: Any, event: str, wait: float = 20) -> dict[str, Any]:
    """The first ``event`` in the events log, waited for."""
    with anyio.fail_after(wait):
        while True:
            if path.exists():
                for line in path.read_text("utf-8").splitlines():
                    record = json.loads(line)
                    if record.get("event") == event:
                        return dict(record)
            await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_a_stopping_server_answers_the_call_in_progress(tmp_path: Any) -> None:
    """SIGINT while delegate_task runs: the child is stopped and the call ends with a
    tool error saying why, before the server exits (0) without a traceback; the
    client got a bare transport error, and the log ~250 lines of one."""
    events, log = tmp_path / "events.jsonl", tmp_path / "stderr.txt"
    args = ("--child", "fakes.children:stalls", "--events", str(events))
    with lyra_mcp.http(*args, log=log) as served:
        results = []
        async with (
            Client(streamable_http_client(served.url)) as client,
            anyio.create_task_group() as group,
        ):

            async def call() -> None:
                results.append(await client.call_tool("delegate_task", {"prompt": "Go"}))

            group.start_soon(call)
            await _logged(events, "delegation_started")
            served.process.send_signal(signal.SIGINT)
        assert served.process.wait(timeout=30) == 0
    [result] = results
    assert result.is_error
    assert "lyra mcp is stopping: the child was stopped" in str(result.content)
    assert "Traceback" not in log.read_text("utf-8")
    assert "ASGI" not in log.read_text("utf-8")
