"""Backoff on rate limits: exponential waits with jitter, never shorter than retry-after.

The child's API answers 429 (with ``retry-after: 0.2``) and then 503 twice
(without one) before it works. Both are retryable ``tool_error`` failures;
lyra waits before each retry: ``backoff_base * 2**(retry-1)`` plus up to
``jitter`` of that again, capped, and never less than the ``retry-after``
the service sent. The script prints each attempt's wait and the real time
between attempts; it exits 0 when every wait obeyed those rules and the
fourth attempt completed.

The waits are real but short (``backoff_base=0.05`` s, ``retry-after`` 0.2 s),
so the whole run sleeps about half a second; real services use seconds
(the default policy has ``backoff_base=1``, ``backoff_cap=60``).

Run: ``python examples/backoff_rate_limit.py [-v]`` (``-v`` shows every lyra event).
"""

from __future__ import annotations

import argparse
import sys
import time

import anyio

from lyra import ChildContext, events, parse_report
from lyra.errors import TransientError
from lyra.recovery import RecoveryPolicy, recover

RETRY_AFTER = 0.2
POLICY = RecoveryPolicy(max_retries=4, backoff_base=0.05, backoff_cap=1.0, jitter=0.5)

started_at: list[float] = []  # monotonic time each attempt started


async def child(prompt: str, ctx: ChildContext) -> str:
    """A scripted child whose API is rate limited, then overloaded, then fine."""
    started_at.append(time.monotonic())
    if ctx.attempt == 1:
        raise TransientError("429 Too Many Requests", retry_after=RETRY_AFTER, status=429)
    if ctx.attempt in (2, 3):
        raise TransientError("503 Service Unavailable", status=503)
    return "Fetched 120 records."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print lyra's events")
    args = parser.parse_args(argv)
    if args.verbose:  # lyra writes nothing until told where its events go
        events.configure(sys.stderr)

    outcome = anyio.run(lambda: recover("Fetch the records", child=child, policy=POLICY))

    ok = True
    previous = None
    for record, start in zip(outcome.attempts, started_at, strict=True):
        failure = record.result.failure
        line = f"attempt {record.number} [{record.strategy}]"
        if previous is not None:
            retry = record.number - 1
            low = min(POLICY.backoff_cap, POLICY.backoff_base * 2 ** (retry - 1))
            high = low * (1 + POLICY.jitter)
            asked = previous.retry_after or 0.0
            slept = start - started_at[record.number - 2]
            line += (
                f" waited {record.wait:.3f}s (backoff range {low:.3f}-{high:.3f}s, "
                f"retry-after {f'{asked:g}s' if asked else 'none'}; {slept:.3f}s passed)"
            )
            ok = ok and record.wait >= asked and low <= record.wait <= max(high, asked)
            ok = ok and slept >= record.wait - 0.01  # the wait was really slept
        print(f"{line}: {f'{failure.message} ({failure.category})' if failure else 'completed'}")
        previous = failure

    final = parse_report(outcome.report)
    print(f"final report: status={final.status} attempt={final.attempt} output={final.output!r}")
    ok = ok and final.status == "completed" and final.attempt == 4
    ok = ok and all(a.strategy == "backoff" for a in outcome.attempts[1:])
    print("OK: every wait obeyed the policy and retry-after" if ok else "UNEXPECTED: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
