"""Detached delegations over MCP: start two, do other work, come back, and survive a restart.

A parent model starts delegations with ``start_delegation`` (an id at once),
follows them with ``delegation_status``, collects reports with
``delegation_result`` (which may wait) and stops one with
``cancel_delegation``. This script is that parent, through the official MCP
client, against ``lyra mcp --durable`` over stdio (as Claude Desktop or an
IDE starts it), with the children below (``--child mcp_detached:…``). It then
closes the session -- the server exits, as it does when a client quits --
while one delegation still runs, starts the server again on the same state
directory, and collects that delegation's report there: nothing was lost,
and the finished one was not run again.

Run: ``python examples/mcp_detached.py``.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from lyra import ChildContext

HERE = Path(__file__).resolve().parent


async def analyst(prompt: str, ctx: ChildContext) -> str:
    """A few steps, each a little while apart (``slow`` in the prompt: more of them)."""
    steps = 8 if "slow" in prompt else 2
    for step in range(steps):
        await anyio.sleep(0.25)
        ctx.charge(input_tokens=900, output_tokens=100, turns=1)
        ctx.step(f"Analysed part {step + 1} of {steps}")
    return f"Findings on {prompt!r}: all {steps} parts agree."


@asynccontextmanager
async def lyra_mcp(state: Path) -> AsyncIterator[ClientSession]:
    """``lyra mcp --durable`` over stdio, as an MCP client's config would start it."""
    server = StdioServerParameters(
        command=sys.executable,
        args=[
            *("-m", "lyra", "mcp", "--child", "mcp_detached:analyst"),
            *("--durable", "--state-dir", str(state)),
        ],
        env={"PYTHONPATH": str(HERE)},  # so that mcp_detached imports
        cwd=str(HERE),
    )
    with (state.parent / "server-stderr.txt").open("a") as errlog:
        async with (
            stdio_client(server, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert result.structured_content is not None, result
    return result.structured_content


async def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        state = Path(folder) / "state"
        async with lyra_mcp(state) as session:
            quick = await call(session, "start_delegation", prompt="the March logs")
            slow = await call(session, "start_delegation", prompt="the slow archive")
            doomed = await call(session, "start_delegation", prompt="the slow duplicate")
            print(
                f"started {quick['delegation_id']}, {slow['delegation_id']}, "
                f"{doomed['delegation_id']} (state {quick['state']})"
            )
            await call(session, "cancel_delegation", delegation_id=doomed["delegation_id"])
            await anyio.sleep(0.6)  # the parent does other work meanwhile
            status = await call(session, "delegation_status", delegation_id=slow["delegation_id"])
            print(
                f"{slow['delegation_id']}: {status['state']}, steps so far {status['steps']}, "
                f"{status['tokens_used']} tokens, {status['time_left']:.0f} s left"
            )
            first = await call(
                session, "delegation_result", delegation_id=quick["delegation_id"], wait=10
            )
            print(f"{quick['delegation_id']}: {first['state']}: {first['report']['output']}")
        print("the client quit (the server with it) while the slow one still ran; starting again")

        async with lyra_mcp(state) as session:
            listed = await call(session, "list_delegations")
            print(
                "after the restart:",
                {d["delegation_id"]: d["state"] for d in listed["delegations"]},
            )
            again = await call(session, "delegation_result", delegation_id=quick["delegation_id"])
            late = await call(
                session, "delegation_result", delegation_id=slow["delegation_id"], wait=20
            )
            gone = await call(session, "delegation_status", delegation_id=doomed["delegation_id"])
        print(
            f"{slow['delegation_id']}: status={late['state']} after the restart: "
            f"{late['report']['output']}"
        )

    ok = (
        late["state"] == "completed"
        and again["report"] == first["report"]  # the recorded report, not a second run
        and gone["state"] == "cancelled"
    )
    print(
        "OK: nothing was lost, nothing ran twice, the cancelled one stayed cancelled"
        if ok
        else "UNEXPECTED"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
