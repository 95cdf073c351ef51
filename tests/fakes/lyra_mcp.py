"""``python -m lyra mcp`` for the MCP tests, started the way a client starts it: over
stdio (a client session on its stdin/stdout) or over HTTP (a process serving on
127.0.0.1, any free port), with this folder importable so that ``--child
fakes.children:…`` works."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp_types import CallToolResult, TextContent

TESTS = Path(__file__).resolve().parent.parent


@asynccontextmanager
async def stdio(
    *args: str, errlog: IO[str], env: Mapping[str, str] | None = None, **session: Any
) -> AsyncIterator[ClientSession]:
    """A client session with ``python -m lyra mcp ARGS`` over stdio (protocol 2025-11-25);
    ``session`` goes to the ClientSession (an ``elicitation_callback``)."""
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lyra", "mcp", *args],
        env={"PYTHONPATH": str(TESTS), **(env or {})},
    )
    async with (
        stdio_client(server, errlog=errlog) as (read, write),
        ClientSession(read, write, **session) as client,
    ):
        await client.initialize()
        yield client


def report_of(result: CallToolResult) -> str:
    """The text content of a tool result (one text block)."""
    [block] = result.content
    assert isinstance(block, TextContent)
    return block.text


@dataclass(frozen=True)
class Served:
    """A ``lyra mcp --http`` process and where it serves."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> int:
        """SIGTERM, then its exit status."""
        self.process.terminate()
        return self.process.wait(timeout=30)


@contextmanager
def http(
    *args: str, log: Path, env: Mapping[str, str] | None = None, wait: float = 30.0
) -> Iterator[Served]:
    """``python -m lyra mcp --http --port 0 ARGS``, once it serves (its stderr in ``log``,
    a file: a pipe nobody reads would fill up and stall it)."""
    command = [sys.executable, "-m", "lyra", "mcp", "--http", "--port", "0", *args]
    with log.open("w", encoding="utf-8") as stderr:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin", **(env or {})},
        )
    try:
        deadline = time.monotonic() + wait
        while not (found := re.search(r"serving .* at (http://\S+)", log.read_text("utf-8"))):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"lyra mcp --http did not start:\n{log.read_text('utf-8')}")
            time.sleep(0.02)
        yield Served(found.group(1), process, log)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
