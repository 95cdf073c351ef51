"""Tracing cost: what lyra's OpenTelemetry hooks cost per delegation, off and on.

5,000 delegations of a child that makes one ``ctx.tool`` call and returns
(``Supervisor(child).delegate`` under ``LocalExecutor().map`` at
``max_concurrency=100``, events off, so only tracing differs), three ways,
interleaved (each round in a rotated order) and compared by medians:

- **off**: lyra as installed, no tracer provider set (the hooks check and step
  aside);
- **bare**: the same with the attempt hook taken out (``_run`` as it was before
  ``@tracing.attempt``), the floor "off" is measured against (the tool hook,
  one call that returns the tool as it is, stays);
- **on**: an OpenTelemetry SDK ``TracerProvider`` with a ``SimpleSpanProcessor``
  into an ``InMemorySpanExporter`` (two spans per delegation: ``invoke_agent``
  and ``execute_tool``), cleared after each run.

Also the hooks' own cost when off, timed alone over a million calls: what the
per-delegation difference is made of, free of the noise of a whole fan-out.

    python benchmarks/tracing.py [--quick | --smoke]
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
import timeit
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from _common import Row, Size, median, silence_events, standalone

from lyra import ChildContext, Supervisor, tracing
from lyra.delegation import _delegate
from lyra.supervisor import LocalExecutor

N, QUICK_N, SMOKE_N = 5_000, 500, 100
CONCURRENCY = 100
REPEATS, QUICK_REPEATS, SMOKE_REPEATS = 7, 3, 1
CALLS, QUICK_CALLS, SMOKE_CALLS = 200_000, 20_000, 1_000  # per timing of a hook alone


async def noop() -> str:
    return "ok"


async def child(prompt: str, ctx: ChildContext) -> str:
    """One tool call, then done."""
    return await ctx.tool("noop", noop)


async def delegations(n: int) -> None:
    supervisor = Supervisor(child)

    async def work(i: int) -> Any:
        return await supervisor.delegate(f"task {i}", timeout=60.0)

    results = await LocalExecutor().map(
        work, range(n), max_concurrency=CONCURRENCY, on_error=lambda item, exc: None
    )
    if not all(result is not None and result.ok for result in results):
        raise RuntimeError("a delegation failed")


def timed(n: int) -> float:
    """Seconds for ``n`` delegations in a fresh event loop (garbage of the run
    before collected first, so that no side pays for another's spans)."""
    gc.collect()
    started = time.perf_counter()
    asyncio.run(delegations(n))
    return time.perf_counter() - started


@contextmanager
def bare() -> Iterator[None]:
    """The attempt hook taken out: ``_run`` as it was before it was decorated."""
    hooked = _delegate._run
    _delegate._run = hooked.__wrapped__  # type: ignore[attr-defined]
    try:
        yield
    finally:
        _delegate._run = hooked


@contextmanager
def traced() -> Iterator[Any]:
    """An SDK provider with an in-memory exporter, given to lyra."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(tracer_provider=provider)
    try:
        yield exporter
    finally:
        tracing.configure()
        provider.shutdown()


def hook_cost_ns(number: int) -> float:
    """Nanoseconds one delegation's hooks add when off, timed alone: the attempt
    hook against the bare function it wraps (each call returns a coroutine,
    closed unawaited), plus the tool hook's whole call."""

    async def work(*args: Any) -> None:
        return None

    def best(call: Callable[[], Any]) -> float:
        return min(timeit.repeat(call, number=number, repeat=5)) / number * 1e9

    hooked = tracing.attempt(work)
    attempt_ns = best(lambda: hooked(None, "p", None).close()) - best(
        lambda: work(None, "p", None).close()
    )
    tool_ns = best(lambda: tracing.tool("noop", noop)) - best(lambda: None)
    return attempt_ns + tool_ns


def run(size: Size) -> list[Row]:
    silence_events()
    n = size.pick(N, QUICK_N, SMOKE_N)
    repeats = size.pick(REPEATS, QUICK_REPEATS, SMOKE_REPEATS)
    if tracing.enabled():
        raise RuntimeError("a tracer provider is already set: 'off' cannot be measured")
    seconds: dict[str, list[float]] = {"off": [], "bare": [], "on": []}
    spans = 0
    timed(n // 10)  # warm-up: imports, caches
    with traced():
        timed(n // 10)
    for repeat in range(repeats):
        for side in ["off", "bare", "on"][repeat % 3 :] + ["off", "bare", "on"][: repeat % 3]:
            if side == "off":
                seconds[side].append(timed(n))
            elif side == "bare":
                with bare():
                    seconds[side].append(timed(n))
            else:
                with traced() as exporter:
                    seconds[side].append(timed(n))
                    spans = len(exporter.get_finished_spans())
    us = {name: median(values) / n * 1e6 for name, values in seconds.items()}
    hook_ns = hook_cost_ns(size.pick(CALLS, QUICK_CALLS, SMOKE_CALLS))
    print(
        f"delegations: {n:,} per run at max_concurrency={CONCURRENCY}, one tool call each, "
        f"events off; median of {repeats} interleaved runs"
    )
    print(f"spans per delegation with tracing on: {spans / n:.0f}")
    for name, label in (
        ("bare", "attempt hook taken out"),
        ("off", "tracing off (no provider)"),
        ("on", "tracing on (SDK, in-memory exporter)"),
    ):
        runs = ", ".join(f"{s / n * 1e6:.1f}" for s in seconds[name])
        print(f"{us[name]:8.1f} µs per delegation, {label}  (runs: {runs})")
    print(f"{hook_ns:8.1f} ns per delegation: the hooks' own cost when off, timed alone")
    off_ratio, on_ratio = us["off"] / us["bare"], us["on"] / us["off"]
    spread = statistics.stdev(s / n * 1e6 for s in seconds["bare"]) if repeats > 1 else 0.0
    difference = f"{us['off'] - us['bare']:+.1f} µs; run-to-run stdev {spread:.1f} µs"
    print(f"ratio off / attempt hook taken out = {off_ratio:.3f}× ({difference})")
    print(f"ratio on / off = {on_ratio:.2f}× (+{us['on'] - us['off']:.1f} µs per delegation)")
    return [
        Row("tracing", "per delegation, tracing off (no provider)", us["off"], "µs"),
        Row("tracing", "per delegation, attempt hook taken out", us["bare"], "µs"),
        Row("tracing", "per delegation, tracing on (SDK + in-memory exporter)", us["on"], "µs"),
        Row("tracing", "hooks' own cost per delegation when off", hook_ns / 1000, "µs"),
        Row(
            "tracing",
            "tracing off / attempt hook taken out",
            off_ratio,
            "×",
            note=difference,
        ),
        Row("tracing", "tracing on / off", on_ratio, "×", note="2 spans per delegation"),
    ]


def main(argv: list[str] | None = None) -> None:
    standalone(run, __doc__, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
