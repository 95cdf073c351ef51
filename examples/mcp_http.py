"""``lyra mcp --http``: lyra over Streamable HTTP, and what its security defaults refuse.

Starts ``lyra mcp --http --port 0`` (127.0.0.1, any free port) with
``LYRA_MCP_TOKEN`` set, as you would for a parent in another container, and
reads the URL it prints on stderr. Then: a request without the token gets
401; one with the token but a ``Host`` header naming another site (a DNS
rebinding attack from a web page) gets 421; the official MCP client sending
``Authorization: Bearer <token>`` delegates a task. Without a token, serving
on ``0.0.0.0`` is refused before anything listens (shown last, in process:
``lyra mcp --http --host 0.0.0.0`` says the same and exits 2).

Run: ``python examples/mcp_http.py``.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from lyra import ChildContext
from lyra.errors import ConfigurationError
from lyra.mcp import serve_http

HERE = Path(__file__).resolve().parent
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "x", "version": "1"},
    },
}


async def triager(prompt: str, ctx: ChildContext) -> str:
    """Labels an issue."""
    ctx.step("Read the issue")
    return f"label: bug ({prompt})"


def start(token: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``lyra mcp --http`` serving ``triager``; the process and its URL."""
    env = {**os.environ, "PYTHONPATH": str(HERE), "LYRA_MCP_TOKEN": token}
    command = [sys.executable, "-m", "lyra", "mcp", "--child", "mcp_http:triager"]
    with log.open("w") as stderr:
        server = subprocess.Popen([*command, "--http", "--port", "0"], env=env, stderr=stderr)
    deadline = time.monotonic() + 30
    while not (found := re.search(r"at (http://\S+)", log.read_text())):
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"lyra mcp did not start:\n{log.read_text()}")
        time.sleep(0.05)
    return server, found.group(1)


async def delegate(url: str, token: str) -> str:
    """The official client, with the bearer token."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        result = await client.call_tool("delegate_task", {"prompt": "issue 42: crash on save"})
    return result.content[0].text  # type: ignore[union-attr]


def main() -> int:
    token = secrets.token_urlsafe(24)
    accept = {"Accept": "application/json, text/event-stream"}
    with tempfile.TemporaryDirectory() as folder:
        server, url = start(token, Path(folder) / "stderr.txt")
        try:
            print(f"lyra serves MCP at {url}")
            anonymous = httpx.post(url, json=INITIALIZE, headers=accept)
            challenge = anonymous.headers["www-authenticate"]
            print(f"without the token: {anonymous.status_code} ({challenge})")
            rebound = httpx.post(
                url,
                json=INITIALIZE,
                headers={**accept, "Authorization": f"Bearer {token}", "Host": "evil.example"},
            )
            print(f"with the token, Host: evil.example: {rebound.status_code} (DNS rebinding)")
            report = anyio.run(delegate, url, token)
            print(f"the MCP client with the token: {report.splitlines()[0]}")
        finally:
            server.terminate()
            stopped = server.wait(timeout=30)
    try:  # what lyra mcp --http --host 0.0.0.0 does without LYRA_MCP_TOKEN (exit 2)
        anyio.run(lambda: serve_http(triager, host="0.0.0.0", port=0))
        refused = ""
    except ConfigurationError as exc:
        refused = str(exc)
    print(f"--host 0.0.0.0 without a token: refused: {refused[:60]}…")
    status = "completed" if "<status>completed</status>" in report else "failed"
    print(f"status={status}")
    ok = (
        (anonymous.status_code, rebound.status_code, stopped) == (401, 421, 0)
        and refused.startswith("refusing to serve on 0.0.0.0 without a bearer token")
        and status == "completed"
    )
    print(
        "OK: the token and the Host check held, and the client with the token was served"
        if ok
        else "UNEXPECTED"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
