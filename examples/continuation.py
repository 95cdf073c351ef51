"""Continuation: a child completes some steps, then fails (``partial``).

The first attempt implements two of three steps and then its test run fails.
A failure after completed steps is ``partial``; lyra retries with a
continuation prompt that lists what was done and the blocker, so the second
attempt does only the remaining work. The script prints every attempt, the
continuation prompt the retry received, and the final report; it exits 0
when the second attempt completed without redoing the finished steps.

Run: ``python examples/continuation.py [-v]`` (``-v`` shows every lyra event).
"""

from __future__ import annotations

import argparse
import sys
import textwrap

import anyio

from lyra import ChildContext, Limits, events, parse_report
from lyra.recovery import RecoveryOutcome, RecoveryPolicy, recover

TASK = """Implement user authentication:
1. Implement hash_password in src/auth.py
2. Add tests in tests/test_auth.py
3. Run the tests"""

prompts: list[str] = []  # every prompt the child received, in order
steps_done: list[str] = []  # every step the child did, across attempts


def run_tests(hashing: str) -> str:
    """A tool: the test run fails until the code stops importing bcrypt."""
    if hashing == "bcrypt":
        raise RuntimeError("tests/test_auth.py: 3 failed (ImportError: cannot import 'bcrypt')")
    return "3 passed"


async def child(prompt: str, ctx: ChildContext) -> str:
    """A scripted child that skips the steps a continuation prompt says are done."""
    prompts.append(prompt)
    continuing = "Already completed" in prompt
    for step, path in [
        ("Implemented hash_password in src/auth.py", "src/auth.py"),
        ("Added tests in tests/test_auth.py", "tests/test_auth.py"),
    ]:
        if continuing and f"✓ {step}" in prompt:
            continue  # done by the previous attempt
        steps_done.append(step)
        ctx.file_modified(path)
        ctx.step(step)
    # The first attempt uses bcrypt; told about the blocker, the retry switches
    # to hashlib.scrypt from the standard library.
    hashing = "scrypt" if "bcrypt" in prompt else "bcrypt"
    result = await ctx.tool("run_tests", run_tests, hashing)
    steps_done.append("Ran the tests")
    return f"Authentication implemented with hashlib.{hashing}; tests: {result}."


def show(outcome: RecoveryOutcome) -> None:
    for record in outcome.attempts:
        failure = record.result.failure
        what = f"failed ({failure.category}): {failure.message}" if failure else "completed"
        print(f"attempt {record.number} [{record.strategy}, timeout={record.timeout:g}s]: {what}")
        if failure:
            for step in failure.completed_steps:
                print(f"    ✓ {step}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print lyra's events")
    args = parser.parse_args(argv)
    if args.verbose:  # lyra writes nothing until told where its events go
        events.configure(sys.stderr)

    policy = RecoveryPolicy(max_retries=2)
    outcome = anyio.run(lambda: recover(TASK, child=child, policy=policy, limits=Limits(timeout=5)))

    show(outcome)
    if len(prompts) > 1:
        print("\nThe continuation prompt of attempt 2:\n")
        print(textwrap.indent(prompts[1], "    "))
    final = parse_report(outcome.report)
    print(f"\nfinal report: status={final.status} attempt={final.attempt}")
    print(f"output: {final.output}")

    ok = (
        final.status == "completed"
        and final.attempt == 2
        and [a.strategy for a in outcome.attempts] == ["initial", "continuation"]
        and len(steps_done) == len(set(steps_done)) == 3  # no step done twice
    )
    print("OK: the retry continued where the first attempt stopped" if ok else "UNEXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
