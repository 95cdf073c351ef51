"""Nested delegation: a child delegates further under its own limits.

A "researcher" child asks three grandchildren through ``ctx.delegate``: one
answers, one hangs on a stuck call (it may take 60 s, but its idle timeout
ends it after 0.3 s without progress, and it could never outlive the
researcher's own deadline), and one spends past its own token budget. Their failures come
back as results, never as exceptions; the researcher finishes with what it
has, and its report lists each failed grandchild in metadata that
``parse_report`` reads back. The whole tree draws on one budget, so the
researcher's usage includes its grandchildren's. The script prints the tree
and exits 0 when every node ended as it should.

Run: ``python examples/nested_delegation.py [-v]`` (``-v`` shows every lyra event).
"""

from __future__ import annotations

import argparse
import sys

import anyio

from lyra import Budget, ChildContext, DelegationResult, Supervisor, events, parse_report

results: dict[str, DelegationResult] = {}


async def quick_lookup(prompt: str, ctx: ChildContext) -> str:
    ctx.charge(input_tokens=800, output_tokens=200, turns=1)
    return "P04637 is the p53 tumour suppressor."


async def stuck_call(prompt: str, ctx: ChildContext) -> str:
    ctx.step("Opened a connection to the slow mirror")
    await anyio.sleep(60)  # a call that never returns, and never reports progress
    return "never"


async def verbose_writer(prompt: str, ctx: ChildContext) -> str:
    for _ in range(10):
        ctx.charge(input_tokens=1_500, output_tokens=1_500, turns=1)  # 3,000 a turn
        ctx.step("Wrote another paragraph")
    return "ten paragraphs"


async def researcher(prompt: str, ctx: ChildContext) -> str:
    """Delegates three sub-questions and writes what it could find."""
    asks = {
        "lookup": ("What is P04637?", quick_lookup, {}),
        "mirror": ("Fetch the structure from the mirror", stuck_call, {"idle_timeout": 0.3}),
        "essay": ("Write the background", verbose_writer, {"budget": Budget(max_tokens=5_000)}),
    }
    found = []
    for name, (question, child, limits) in asks.items():
        result = await ctx.delegate(question, child=child, timeout=60, **limits)
        results[name] = result
        found.append(result.output if result.ok else f"({name}: {result.failure.category})")  # type: ignore[union-attr]
    return " ".join(found)


def show(parent: DelegationResult) -> None:
    usage = parent.usage
    print(
        f"researcher {parent.session_id}: {parent.status}, {usage.tokens if usage else 0:,} tokens"
    )
    for name, result in results.items():
        failure = result.failure
        how = "completed" if failure is None else f"{failure.category}/{failure.error_type}"
        spent = result.usage.tokens if result.usage else 0
        print(
            f"  └─ {name:<7} {result.session_id} (parent {result.parent_session_id}): {how}, "
            f"{spent:,} tokens, {result.duration:.2f}s"
        )
        if failure is not None:
            print(f"       evidence: {failure.evidence}")
    report = parse_report(parent.report)
    print(f"\nthe researcher's report lists {len(report.failed_delegations)} failed grandchildren:")
    for failed in report.failed_delegations:
        fields = f"{failed.session_id} {failed.category} {failed.error_type}"
        print(f"  <failed_delegation>{fields}</failed_delegation>")
    print(f"output: {parent.output}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print lyra's events")
    args = parser.parse_args(argv)
    if args.verbose:  # lyra writes nothing until told where its events go
        events.configure(sys.stderr)

    supervisor = Supervisor(researcher, budget=Budget(max_tokens=50_000))
    parent = anyio.run(lambda: supervisor.delegate("Brief me on P04637", timeout=5))
    show(parent)

    kinds = {name: (r.failure.error_type if r.failure else "ok") for name, r in results.items()}
    ok = (
        parent.ok
        and kinds == {"lookup": "ok", "mirror": "idle", "essay": "budget"}
        and all(r.parent_session_id == parent.session_id for r in results.values())
        and len(parse_report(parent.report).failed_delegations) == 2
        and parent.usage is not None
        and parent.usage.tokens == sum(r.usage.tokens for r in results.values() if r.usage)
    )
    print(
        "\nOK: failures came back as results, and the tree kept its limits" if ok else "UNEXPECTED"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
