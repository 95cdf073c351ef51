"""Decomposition: a timeout without progress on a numbered task list.

Given the whole list at once, the child never gets started: it neither runs
a tool nor completes a step before the deadline. A timeout without progress
is not worth retrying as it is, so lyra splits the numbered list into
subtasks and runs each under its share of the time, then aggregates the
results into one report. The script prints every subtask with its timeout
and the final report; it exits 0 when every subtask completed in the
decomposed second attempt.

Run: ``python examples/decomposition.py [-v]`` (``-v`` shows every lyra event).
"""

from __future__ import annotations

import argparse
import re
import sys

import anyio

from lyra import ChildContext, Limits, events, parse_report
from lyra.recovery import RecoveryPolicy, recover

TASK = """Prepare the 2.0 release:
1. Update the changelog
2. Bump the version in pyproject.toml
3. Tag the release commit"""
BASE_TIMEOUT = 0.9
ITEM = re.compile(r"^\s*\d+[.)]\s", re.MULTILINE)

calls: list[tuple[str, float]] = []  # (first line of the prompt, its timeout) per call


async def child(prompt: str, ctx: ChildContext) -> str:
    """A scripted child that can do one item, but stalls on a list of them."""
    task = prompt.split("\n\n")[0]  # the task itself; what follows is background
    calls.append((task.splitlines()[0], ctx.timeout))
    if len(ITEM.findall(task)) > 1:
        await anyio.sleep_forever()  # stuck planning everything at once: no progress
    await anyio.sleep(0.05)  # the work
    ctx.step(task)
    return f"Done: {task}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print lyra's events")
    args = parser.parse_args(argv)
    if args.verbose:  # lyra writes nothing until told where its events go
        events.configure(sys.stderr)

    policy = RecoveryPolicy(max_retries=2)
    outcome = anyio.run(
        lambda: recover(TASK, child=child, policy=policy, limits=Limits(timeout=BASE_TIMEOUT))
    )

    for record in outcome.attempts:
        failure = record.result.failure
        what = f"failed ({failure.category}): {failure.blocked_on}" if failure else "completed"
        print(f"attempt {record.number} [{record.strategy}, timeout={record.timeout:g}s]: {what}")
    print("\nchild calls:")
    for first_line, timeout in calls:
        print(f"  timeout={timeout:.2f}s  {first_line}")
    final = parse_report(outcome.report)
    print(f"\nfinal report: status={final.status} attempt={final.attempt}")
    print(f"output:\n{final.output}")

    subtasks = calls[1:]
    ok = (
        final.status == "completed"
        and final.attempt == 2
        and [a.strategy for a in outcome.attempts] == ["initial", "decomposition"]
        and len(subtasks) == 3
        and all(abs(timeout - BASE_TIMEOUT / 3) < 1e-6 for _, timeout in subtasks)
    )
    print("OK: each subtask completed within its share" if ok else "UNEXPECTED: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
