"""A pydantic-ai agent bare vs inside lyra: what PydanticAIChild costs per run.

The same ``pydantic_ai.Agent`` on the same fake model (pydantic-ai's own
``FunctionModel``, answering at once: two tool calls, then the answer; three
model requests and two async tool calls per run, each response with usage)
is run two ways:

- **bare**: ``await agent.run(prompt)``;
- **lyra**: ``await adelegate_task(prompt, child=PydanticAIChild(agent),
  timeout=60, idle_timeout=30, budget=Budget(max_tokens=..., max_turns=...))``
  with lyra's events written to a file as the command line writes them: the
  attempt, its deadline and idle timeout, a turn charged ahead of each model
  request, each response's usage charged, each tool call as progress, the
  report rendered.

For information, two more sides. **bare + a capability**: the same bare run
with one empty pydantic-ai capability added (``capabilities=[...]``).
PydanticAIChild holds the limits with a capability, pydantic-ai's extension
point for lifecycle hooks, and pydantic-ai dispatches every hook of a run to
every capability it has (copying the run context each time), so the first
capability in a run costs the same whatever it does; agents that already use
one (instrumentation, fallback models, hooks) pay it already. The ratio of
lyra to that side is what lyra itself adds. **plain child**: ``adelegate_task``
(same limits, same events) around a child that only awaits ``agent.run``: the
delegation's own cost around the run, without any hook inside it. Between two
framework runs lyra's code finds the CPU caches cold, so a delegation costs
several times what the ``overhead`` benchmark measures back to back.

The model answers instantly, so the ratios weigh lyra's cost against
pydantic-ai's own per run (the worst case: a real model's latency would
dwarf both). Each side is timed in CPU time of this process
(``time.process_time``: the runs never wait on a thread or a timer), so that
load from other processes on a shared machine does not count; rounds are
interleaved, each in a rotated order, and the median of the per-round
ratios is compared with the target.

Target: ≤ 1.02× (lyra / bare, median of the rounds).

    python benchmarks/framework_pydantic_ai.py [--quick | --smoke] [--json FILE]
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import Row, Size, events_to, median, standalone

RUNS, QUICK_RUNS, SMOKE_RUNS = 50, 8, 2
ROUNDS, QUICK_ROUNDS, SMOKE_ROUNDS = 31, 3, 1
TARGET = 1.02
BENCH = "framework_pydantic_ai"


def build_agent() -> Any:
    """The agent both sides run: two tool calls, then the answer."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    async def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(message, ModelResponse) for message in messages)
        usage = RequestUsage(input_tokens=400 + 100 * step, output_tokens=40)
        if step < 2:
            return ModelResponse([ToolCallPart("lookup", {"issue": 42 + step})], usage=usage)
        return ModelResponse([TextPart("Duplicate of #7")], usage=usage)

    agent = Agent(FunctionModel(model), name="triage")

    @agent.tool_plain
    async def lookup(issue: int) -> str:
        """Look an issue up."""
        return f"issue {issue}: the nightly build fails"

    return agent


Runner = Callable[[int], Awaitable[str]]


def sides(agent: Any) -> dict[str, Runner]:
    from pydantic_ai.capabilities import AbstractCapability

    from lyra import Budget, adelegate_task
    from lyra.children.pydantic_ai import PydanticAIChild

    child = PydanticAIChild(agent)
    budget = Budget(max_tokens=10**12, max_turns=10**9)

    class Nothing(AbstractCapability[Any]):
        """A capability with no hook of its own."""

    async def bare(i: int) -> str:
        result = await agent.run(f"Triage issue {i}")
        return str(result.output)

    async def capability(i: int) -> str:
        result = await agent.run(f"Triage issue {i}", capabilities=[Nothing()])
        return str(result.output)

    async def lyra(i: int) -> str:
        return await adelegate_task(
            f"Triage issue {i}", child=child, timeout=60, idle_timeout=30, budget=budget
        )

    async def plain_child(prompt: str, ctx: Any) -> str:
        result = await agent.run(prompt)
        return str(result.output)

    async def plain(i: int) -> str:
        return await adelegate_task(
            f"Triage issue {i}", child=plain_child, timeout=60, idle_timeout=30, budget=budget
        )

    return {"bare": bare, "bare + a capability": capability, "lyra": lyra, "plain child": plain}


def timed(run: Runner, runs: int) -> float:
    """µs per agent run, ``runs`` runs one after another in a fresh event loop."""

    async def body() -> None:
        for i in range(runs):
            output = await run(i)
            if not output.startswith("Duplicate of #7"):
                raise RuntimeError(f"unexpected output: {output[:200]}")

    gc.collect()
    started = time.process_time()
    asyncio.run(body())
    return (time.process_time() - started) / runs * 1e6


def run(size: Size) -> list[Row]:
    runs = size.pick(RUNS, QUICK_RUNS, SMOKE_RUNS)
    rounds = size.pick(ROUNDS, QUICK_ROUNDS, SMOKE_ROUNDS)
    contenders = sides(build_agent())
    names = list(contenders)
    us: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as folder, events_to(Path(folder) / "events.jsonl"):
        for run_side in contenders.values():
            timed(run_side, max(1, runs // 4))  # warm-up: imports, schemas, caches
        for number in range(rounds):
            shift = number % len(names)
            for name in names[shift:] + names[:shift]:
                us[name].append(timed(contenders[name], runs))
    bare, capability, lyra, plain = (us[name] for name in names)
    ratios = {
        "lyra / bare": [a / b for a, b in zip(lyra, bare, strict=True)],
        "bare + a capability / bare": [a / b for a, b in zip(capability, bare, strict=True)],
        "lyra / bare + a capability": [a / b for a, b in zip(lyra, capability, strict=True)],
        "plain child / bare": [a / b for a, b in zip(plain, bare, strict=True)],
    }
    print(
        f"{runs} agent runs per round (3 model requests, 2 tool calls each), {rounds} "
        "interleaved rounds; CPU µs per run, median (min, max):"
    )
    for name, values in us.items():
        print(f"  {name:<20} {median(values):9.1f}  ({min(values):.1f}, {max(values):.1f})")
    print(f"lyra's cost per run: {median(lyra) - median(bare):+.1f} µs")
    for name, values in ratios.items():
        print(f"  {name:<27} {median(values):.3f}×  (rounds {spread(values)})")
    ratio = median(ratios["lyra / bare"])
    print(f"target lyra / bare ≤ {TARGET}×: {'met' if ratio <= TARGET else 'MISSED'}")
    rows = [
        Row(BENCH, f"{name}, CPU µs per run", median(values), "µs", note=spread(values))
        for name, values in us.items()
    ]
    rows.append(
        Row(
            BENCH,
            "lyra / bare",
            ratio,
            "×",
            f"≤ {TARGET}×",
            ratio <= TARGET,
            spread(ratios["lyra / bare"]),
        )
    )
    rows += [
        Row(BENCH, name, median(values), "×", note=spread(values))
        for name, values in ratios.items()
        if name != "lyra / bare"
    ]
    return rows


def spread(values: list[float]) -> str:
    return f"min {min(values):.3f}, max {max(values):.3f}"


def main(argv: list[str] | None = None) -> None:
    standalone(run, __doc__, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
