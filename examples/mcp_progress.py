"""Progress over MCP: a parent that gives up after 1 s of silence, and a 3.5 s child.

Many MCP clients abandon a tool call after some seconds without news unless
progress notifications arrive (each one resets their clock). lyra's
``delegate_task`` sends them when the client asks (by passing a progress
callback, which sends a progress token): the child's latest step as the
message, at most one a tick, and a keep-alive every few ticks while the child
lives, even when it is quiet. Here lyra serves a slow child over Streamable
HTTP on 127.0.0.1 (``lyra.mcp.serve_http``, what ``lyra mcp --http`` runs),
and the official MCP client calls ``delegate_task`` with a callback that
restarts a 1 s patience on every notification. The child is silent for 2 s in
the middle; the keep-alives carry the call to its report.

Run: ``python examples/mcp_progress.py [-v]`` (``-v`` shows every lyra event).
"""

from __future__ import annotations

import argparse
import sys

import anyio
from mcp import Client

from lyra import ChildContext, events
from lyra.mcp import serve_http


async def slow_reader(prompt: str, ctx: ChildContext) -> str:
    """Reads three files, then thinks for 2 s without a word, then answers."""
    for name in ("notes.md", "results.csv", "draft.md"):
        await anyio.sleep(0.5)
        ctx.step(f"Read {name}")
    await anyio.sleep(2.0)  # a long model call: no step, no tool
    return f"Summary of 3 files for: {prompt}"


async def parent(url: str) -> tuple[str | None, list[str]]:
    """Delegate as an impatient client would: give up after 1 s without news."""
    heard: list[str] = []
    report = None
    async with Client(url) as client:
        with anyio.CancelScope() as patience:
            patience.deadline = anyio.current_time() + 1.0

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                heard.append(message or "")
                print(f"  progress {progress:5.1f} s of {total:g}: {message}")
                patience.deadline = anyio.current_time() + 1.0  # news: wait on

            result = await client.call_tool(
                "delegate_task",
                {"prompt": "the Q3 results", "timeout": 30},
                progress_callback=on_progress,
            )
            report = result.content[0].text  # type: ignore[union-attr]
    return report, heard


async def main() -> int:
    ready = anyio.Event()
    url = ""

    def serving(at: str) -> None:
        nonlocal url
        url = at
        ready.set()

    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: serve_http(
                slow_reader, host="127.0.0.1", port=0, progress_every=0.25, on_ready=serving
            )
        )
        await ready.wait()
        print(f"lyra serves MCP at {url}")
        report, heard = await parent(url)
        group.cancel_scope.cancel()

    if report is None:
        print("UNEXPECTED: the client gave up")
        return 1
    print(report)
    first_line = report.splitlines()[0]
    status = "completed" if "<status>completed</status>" in report else "failed"
    print(f"status={status}: {first_line}")
    ok = status == "completed" and heard.count("Read draft.md") >= 2  # the step, keep-alives
    print(
        f"OK: {len(heard)} notifications kept a 1 s client waiting through a 2 s silence"
        if ok
        else "UNEXPECTED"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print lyra's events")
    if parser.parse_args().verbose:
        events.configure(sys.stderr)
    sys.exit(anyio.run(main))
