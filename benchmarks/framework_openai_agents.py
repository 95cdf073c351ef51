"""OpenAI Agents SDK child: what lyra adds to an SDK agent's run, bare vs inside lyra.

The same ``agents.Agent`` (one function tool) on the same fake model -- the SDK's
own ``agents.testing.ScriptedModel``, answering at once, so that the SDK's own
work is all there is to compare against -- runs two model turns and one tool
call per task:

- **bare**: ``Runner.run(agent, prompt)``;
- **lyra**: ``adelegate_task(prompt, child=OpenAIAgentsChild(agent), timeout=…,
  idle_timeout=…, budget=…)`` with lyra's events written to a file as the CLI
  configures them: the attempt's limits, lyra's hooks, model-input filter and
  tool-error formatter in the run, a turn charged ahead of each model call and
  the usage after it, tool progress, and the report;
- for information, **bare + hooks** (the bare run with ``RunHooks`` that do
  nothing: the SDK's price for being observed) and **plain child** (the same
  ``adelegate_task`` around a child that only awaits ``Runner.run``: the
  delegation's own cost around the run, no hook inside it).

Tasks run one after another (the SDK's cost per run is the denominator), in
blocks of ten, the sides' blocks interleaved, each side first in turn, in
one process so that load from other processes hits every side alike. Each
block is timed by the wall clock and by the process's CPU time: lyra's cost is
CPU work (no waits), and CPU time is what a machine shared with other work
measures steadily; both medians are compared, min and max shown. The SDK's own
tracing is off on both sides.

Target: lyra ≤ 1.02× the bare run (median CPU time per task; wall clock shown).

    python benchmarks/framework_openai_agents.py [--quick | --smoke] [--json FILE]
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from _common import Row, Size, events_to, median, standalone

from lyra import Budget, adelegate_task, parse_report

BLOCK = 10
PAIRS, QUICK_PAIRS, SMOKE_PAIRS = 150, 6, 1
TARGET = 1.02

Side = Callable[[int], Awaitable[tuple[float, float]]]


def make_agent() -> tuple[Any, Callable[[], None]]:
    """The agent and a ``refill()`` that scripts its model for one more task."""
    from agents import Agent, Usage, function_tool, set_tracing_disabled
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

    set_tracing_disabled(True)
    usage = Usage(requests=1, input_tokens=120, output_tokens=20, total_tokens=140)

    @function_tool
    def lookup(protein_id: str) -> str:
        """Look a protein up."""
        return f"{protein_id}: 393 residues"

    steps = [
        ModelStep(
            output=[function_call("lookup", {"protein_id": "P04637"}, call_id="call_1")],
            usage=usage,
        ),
        ModelStep(output=[assistant_message("P04637 has 393 residues.")], usage=usage),
    ]
    agent = Agent(name="researcher", instructions="Answer.", tools=[lookup])

    def refill() -> None:  # a fresh model per task: a ScriptedModel keeps every call
        agent.model = ScriptedModel(steps)

    return agent, refill


def bare_side(agent: Any, refill: Callable[[], None]) -> Side:
    from agents import Runner

    async def run(n: int) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            refill()
            result = await Runner.run(agent, f"How long is P04637? ({i})")
            assert result.final_output == "P04637 has 393 residues."
        return time.perf_counter() - wall, time.process_time() - cpu

    return run


def hooked_side(agent: Any, refill: Callable[[], None]) -> Side:
    """The bare run with run hooks that do nothing: the SDK's price for being observed."""
    from agents import RunHooks, Runner

    hooks: Any = RunHooks()

    async def run(n: int) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            refill()
            result = await Runner.run(agent, f"How long is P04637? ({i})", hooks=hooks)
            assert result.final_output == "P04637 has 393 residues."
        return time.perf_counter() - wall, time.process_time() - cpu

    return run


def plain_side(agent: Any, refill: Callable[[], None]) -> Side:
    """lyra around the bare run: a child that only awaits ``Runner.run``."""
    from agents import Runner

    async def child(prompt: str, ctx: Any) -> str:
        result = await Runner.run(agent, prompt)
        return str(result.final_output)

    return _delegating(child, refill)


def lyra_side(agent: Any, refill: Callable[[], None]) -> Side:
    from lyra.children.openai_agents import OpenAIAgentsChild

    return _delegating(OpenAIAgentsChild(agent), refill)


def _delegating(child: Any, refill: Callable[[], None]) -> Side:
    budget = Budget(max_tokens=10**12, max_turns=10**9)

    async def run(n: int) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            refill()
            report = await adelegate_task(
                f"How long is P04637? ({i})",
                child=child,
                timeout=60,
                idle_timeout=30,
                budget=budget,
            )
            assert parse_report(report).status == "completed", report
        return time.perf_counter() - wall, time.process_time() - cpu

    return run


def run(size: Size) -> list[Row]:
    pairs = size.pick(PAIRS, QUICK_PAIRS, SMOKE_PAIRS)
    warm = size.pick(5, 2, 1) * BLOCK
    agent, refill = make_agent()
    sides = {
        "lyra": lyra_side(agent, refill),
        "bare": bare_side(agent, refill),
        "bare + hooks": hooked_side(agent, refill),
        "plain child": plain_side(agent, refill),
    }
    names = list(sides)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as tmp, events_to(Path(tmp) / "events.jsonl"):

        async def measure() -> None:
            for side in sides.values():  # warm-up: imports, caches
                await side(warm)
            for pair in range(pairs):
                shift = pair % len(names)  # each side first in turn
                for name in names[shift:] + names[:shift]:
                    times[name].append(await sides[name](BLOCK))

        anyio.run(measure)
    print(
        f"{pairs * BLOCK} tasks per side (2 model turns + 1 tool call each, one at a time), "
        f"in {pairs} interleaved rounds of blocks of {BLOCK}"
    )
    rows: list[Row] = []
    ratios: dict[str, float] = {}
    for clock, index in (("wall", 0), ("cpu", 1)):
        per_task = {
            name: [t[index] / BLOCK * 1e3 for t in values] for name, values in times.items()
        }
        for name, label in (
            ("bare", "Runner.run, bare"),
            ("bare + hooks", "Runner.run + do-nothing hooks"),
            ("plain child", "a plain child in lyra"),
            ("lyra", "inside lyra"),
        ):
            values = per_task[name]
            spread = f"min {min(values):.3f}, max {max(values):.3f}"
            print(f"  {label:<30} {clock:>4} {median(values):7.3f} ms per task  ({spread})")
            rows.append(
                Row(
                    "framework_openai_agents",
                    f"{label}, {clock} time per task",
                    median(values),
                    "ms",
                    note=spread,
                )
            )
        ratios[clock] = median(per_task["lyra"]) / median(per_task["bare"])
        if clock == "cpu":
            for name in ("bare + hooks", "plain child"):
                ratio = median(per_task[name]) / median(per_task["bare"])
                rows.append(Row("framework_openai_agents", f"{name} / bare, CPU time", ratio, "×"))
    print(f"ratio lyra / bare, wall clock = {ratios['wall']:.3f}× (for information)")
    print(f"ratio lyra / bare, CPU time = {ratios['cpu']:.3f}× (target ≤ {TARGET}×)")
    rows.append(
        Row(
            "framework_openai_agents",
            "OpenAI Agents SDK run inside lyra / bare, wall clock",
            ratios["wall"],
            "×",
        )
    )
    rows.append(
        Row(
            "framework_openai_agents",
            "OpenAI Agents SDK run inside lyra / bare, CPU time",
            ratios["cpu"],
            "×",
            f"≤ {TARGET}×",
            ratios["cpu"] <= TARGET,
        )
    )
    return rows


def main(argv: list[str] | None = None) -> None:
    standalone(run, __doc__, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
