"""Timeout precision: how late after the deadline does the report come back?

Two children that never finish on their own: a cooperative one (awaits
forever) and one stuck in blocking sync code inside a tool (time.sleep in a
worker thread). Each runs under a short deadline, many times; lateness is the
time from the deadline to the returned report. Targets (DESIGN §9): p99 ≤ 20 ms
cooperative, ≤ 100 ms blocking.

    python benchmarks/timeouts.py [--trials 200] [--timeout 0.05]
"""

from __future__ import annotations

import argparse
import statistics
import time

import anyio

from lyra import ChildContext, Supervisor


async def cooperative(prompt: str, ctx: ChildContext) -> str:
    await anyio.sleep_forever()
    return "never"


async def blocking(prompt: str, ctx: ChildContext) -> str:
    await ctx.tool("stuck", time.sleep, 0.5)
    return "never"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def lateness(child: object, trials: int, timeout: float) -> list[float]:
    supervisor = Supervisor(child)  # type: ignore[arg-type]
    late = []
    for _ in range(trials):
        started = time.perf_counter()
        result = await supervisor.delegate("never ends", timeout=timeout)
        late.append(time.perf_counter() - started - timeout)
        assert result.failure is not None
        assert result.failure.category == "timeout"
    return late


async def main(trials: int, timeout: float) -> None:
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(50))
    rows = []
    for name, child, target in (("cooperative", cooperative, 0.020), ("blocking", blocking, 0.100)):
        late = await lateness(child, trials, timeout)
        p50, p99 = percentile(late, 0.50), percentile(late, 0.99)
        rows.append((name, p50, p99, target))
        print(
            f"{name:12} p50 {p50 * 1000:6.2f} ms  p99 {p99 * 1000:6.2f} ms  "
            f"max {max(late) * 1000:6.2f} ms  mean {statistics.fmean(late) * 1000:6.2f} ms  "
            f"(target p99 ≤ {target * 1000:.0f} ms)"
        )
    for name, _p50, p99, target in rows:
        verdict = "met" if p99 <= target else "MISSED"
        print(f"ratio {name}: p99/target = {p99 / target:.3f} ({verdict})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=0.05)
    args = parser.parse_args()
    anyio.run(main, args.trials, args.timeout)
