"""Timeout doubling: a child that needs more time than its first deadline.

The child starts a slow tool (0.5 s) under a 0.4 s deadline. It made
progress (a tool ran), so the timeout is retryable, and
``delegate_with_retry`` tries again with the timeout doubled (0.8 s), which
is enough. The script prints the ``recovery_attempt`` event lyra logged and
the final report's status and attempt; it exits 0 when the second attempt
completed under a doubled timeout.

Run: ``python examples/timeout_doubling.py [-v]`` (``-v`` shows every lyra event).
"""

from __future__ import annotations

import argparse
import sys

import anyio

from lyra import ChildContext, delegate_with_retry, events, parse_report

BASE_TIMEOUT = 0.4
WORK_SECONDS = 0.5  # more than BASE_TIMEOUT, well under twice it


async def build_index() -> int:
    """A slow tool: pretend to index a repository."""
    await anyio.sleep(WORK_SECONDS)
    return 1284


async def child(prompt: str, ctx: ChildContext) -> str:
    """A scripted child: one slow tool call, then the answer."""
    print(f"  attempt {ctx.attempt}: child started with timeout={ctx.timeout:g}s")
    files = await ctx.tool("build_index", build_index)  # counts as progress at once
    return f"Indexed {files} files."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print lyra's events")
    args = parser.parse_args(argv)
    if args.verbose:  # lyra writes nothing until told where its events go
        events.configure(sys.stderr)

    print(f"Delegating with base_timeout={BASE_TIMEOUT}s; the work takes {WORK_SECONDS}s.")
    with events.capturing() as emitted:  # keep the events to show the recovery below
        report = delegate_with_retry(
            "Index the repository", child=child, max_retries=2, base_timeout=BASE_TIMEOUT
        )
    recovery_events = [e for e in emitted if e["event"] == "recovery_attempt"]

    for event in recovery_events:
        print(
            f"recovery_attempt: attempt={event['attempt']} strategy={event['strategy']} "
            f"after {event['category']}, new timeout={event['timeout']}s"
        )
    final = parse_report(report)
    print(f"final report: status={final.status} attempt={final.attempt} output={final.output!r}")

    ok = (
        final.status == "completed"
        and final.attempt == 2
        and [e["strategy"] for e in recovery_events] == ["timeout_doubling"]
        and recovery_events[0]["timeout"] == BASE_TIMEOUT * 2
    )
    print("OK: the doubled timeout was enough" if ok else "UNEXPECTED: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
