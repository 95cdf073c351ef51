"""Enrichment: a child blocked on ``missing_context`` until it gets a file path.

The task says "the auth file" without naming it. The child cannot guess, so
it blocks with ``missing_context``. Without a context provider lyra stops
there (retrying the same prompt cannot help); with a
``context_provider(failure) -> dict`` lyra asks it once for more context,
adds that to the prompt, and tries again. The script runs both and prints
the enriched prompt and the final reports; it exits 0 when the run without
a provider stopped after one attempt and the run with one completed on the
second.

Run: ``python examples/enrichment.py [-v]`` (``-v`` shows every lyra event).
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from typing import Any

from lyra import ChildContext, ChildFailure, delegate_with_retry, events, parse_report

TASK = "Add rate limiting to the login handler in the auth file."
PATH = re.compile(r"\b[\w/]+\.py\b")

prompts: list[str] = []  # every prompt the child received, in order


async def child(prompt: str, ctx: ChildContext) -> str:
    """A scripted child that needs a concrete file path in its prompt."""
    prompts.append(prompt)
    match = PATH.search(prompt)
    if match is None:
        ctx.block("missing_context", "Cannot find 'the auth file' mentioned in the prompt")
    ctx.file_modified(match.group())
    ctx.step(f"Added a rate limiter to login() in {match.group()}")
    return f"Rate limiting added to {match.group()} (5 attempts per minute)."


def context_provider(failure: ChildFailure) -> dict[str, Any]:
    """What the parent knows and the child does not: here, a fixed project map."""
    print(f"  context_provider called; the child was blocked on: {failure.blocked_on}")
    return {"auth file": "src/myapp/auth.py", "tests": "tests/test_auth.py"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print lyra's events")
    args = parser.parse_args(argv)
    if args.verbose:  # lyra writes nothing until told where its events go
        events.configure(sys.stderr)

    print("1. Without a context provider:")
    bare = parse_report(delegate_with_retry(TASK, child=child, max_retries=2, base_timeout=5))
    print(f"  final report: status={bare.status} category={bare.category} attempt={bare.attempt}")
    print(f"  blocked on: {bare.blocked_on}")
    print(f"  child called {len(prompts)} time(s): retrying the same prompt cannot help")

    prompts.clear()
    print("\n2. With a context provider:")
    report = delegate_with_retry(
        TASK, child=child, max_retries=2, base_timeout=5, context_provider=context_provider
    )
    final = parse_report(report)
    if len(prompts) > 1:
        print("  The enriched prompt of attempt 2:\n")
        print(textwrap.indent(prompts[1], "      "))
    print(f"  final report: status={final.status} attempt={final.attempt}")
    print(f"  output: {final.output}")

    ok = (
        (bare.status, bare.category, bare.attempt) == ("failed", "missing_context", 1)
        and (final.status, final.attempt) == ("completed", 2)
        and "src/myapp/auth.py" in (final.output or "")
    )
    print("OK: the enriched prompt unblocked the child" if ok else "UNEXPECTED: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
