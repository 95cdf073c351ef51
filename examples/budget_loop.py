"""A recovery loop under one budget: retries spend from the same account.

A scripted model-backed child needs five turns of 3,000 tokens each; its
first attempt loses the connection after three. With
``recover(..., limits=Limits(budget=Budget(max_tokens=20_000)))`` (the loop behind
``delegate_with_retry``; it also returns every attempt, so each one's spend
can be shown) the retry is a continuation that does only the two turns left,
and the task completes within budget (15,000 tokens). With
``max_tokens=12_000`` the continuation runs out of budget on its second turn:
the child is stopped at that charge, the failure is ``timeout`` / ``budget``
with the limit and the amount as evidence, and no further attempt starts. The
script prints each attempt's spend and exits 0 when both runs kept their budget.

Run: ``python examples/budget_loop.py [-v]`` (``-v`` shows every lyra event).
"""

from __future__ import annotations

import argparse
import sys

import anyio

from lyra import Budget, ChildContext, Limits, events, parse_report
from lyra.recovery import RecoveryOutcome, RecoveryPolicy, recover

TURNS, TOKENS_PER_TURN = 5, 3_000
TASK = "Draft the migration plan for the billing database"


async def child(prompt: str, ctx: ChildContext) -> str:
    """Five model turns; the first attempt's connection drops after three."""
    done = prompt.count("✓ Turn")  # a continuation lists the turns already done
    for turn in range(done + 1, TURNS + 1):
        ctx.charge(input_tokens=2_000, output_tokens=1_000, turns=1)
        ctx.step(f"Turn {turn}: drafted section {turn}")
        if ctx.attempt == 1 and turn == 3:
            raise ConnectionError("connection reset by the model API")
    return "Migration plan: five sections, drafted."


def show(title: str, outcome: RecoveryOutcome, limit: int) -> bool:
    print(f"\n{title} (max_tokens={limit:,})")
    for record in outcome.attempts:
        result = record.result
        spent = result.usage.tokens if result.usage else 0
        what = "completed" if result.ok else f"{result.failure.category}"  # type: ignore[union-attr]
        if result.failure and result.failure.error_type == "budget":
            what += f"/budget: {result.failure.evidence}"
        print(f"  attempt {record.number} [{record.strategy}]: {spent:,} tokens, {what}")
    total = outcome.usage.tokens
    report = parse_report(outcome.report)
    print(
        f"  total: {total:,} tokens; final report: status={report.status} "
        f"attempt={report.attempt} tokens_used={report.tokens_used}"
    )
    return total <= limit + TOKENS_PER_TURN  # never past the one charge that crossed it


async def run(limit: int) -> RecoveryOutcome:
    return await recover(
        TASK,
        child=child,
        policy=RecoveryPolicy(max_retries=3),
        limits=Limits(timeout=5, budget=Budget(max_tokens=limit)),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print lyra's events")
    args = parser.parse_args(argv)
    if args.verbose:  # lyra writes nothing until told where its events go
        events.configure(sys.stderr)

    enough = anyio.run(run, 20_000)
    ok = show("Enough budget", enough, 20_000) and enough.result.ok
    ok = ok and [a.strategy for a in enough.attempts] == ["initial", "continuation"]

    short = anyio.run(run, 12_000)
    ok = show("Too little budget", short, 12_000) and ok
    failure = short.result.failure
    ok = ok and failure is not None and failure.error_type == "budget"
    ok = ok and len(short.attempts) == 2  # no attempt after the budget ran out

    print("\nOK: every retry spent from one budget, and none overspent" if ok else "UNEXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
