"""An OpenAI Agents SDK agent bare vs inside lyra: what ``OpenAIAgentsChild`` costs per run.

The agent: one ``agents.Agent`` with one function tool, on the SDK's own
``agents.testing.ScriptedModel`` (refilled before every run: it keeps every
call), scripted to call the tool once, then answer (two model requests, one
tool call a run, usage on each). The SDK's tracing is off on every side. The
sides (``_framework`` runs them, interleaved):

- **bare**: ``Runner.run(agent, prompt)``;
- **bare + hook**: the same with ``RunHooks`` that do nothing (``hooks=``),
  the SDK's extension point lyra's child observes the run with;
- **lyra**: ``adelegate_task(prompt, child=OpenAIAgentsChild(agent), ...)``;
- **plain child**: ``adelegate_task`` around a child that awaits ``Runner.run``.
- **floor child**: the least a supervisor does around the same run (``_framework``).
- **floor + hook**: the floor of lyra's child: the floor child around the run with
  ``RunHooks`` holding the same limits in the least code (``_framework.FloorMeter``).

Targets: lyra's share (lyra − bare + hook) ≤ 150 µs CPU per run; with a model
taking 20 ms per request, lyra ≤ 1.01× bare in wall time.

    python benchmarks/framework_openai_agents.py [--quick | --smoke] [--json FILE]
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from _common import Row, Size, standalone
from _framework import FloorMeter, Framework, Sides, measure

ANSWER = "P04637 has 393 residues."
OUTPUT = 4096  # the output lyra's child holds for a request without max_tokens


def build(latency: float) -> Sides:
    """The agent, its sides, and a refill of its scripted model for every run."""
    from agents import Agent, RunHooks, Runner, Usage, function_tool, set_tracing_disabled
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

    from lyra.children.openai_agents import OpenAIAgentsChild

    set_tracing_disabled(True)
    usage = Usage(requests=1, input_tokens=120, output_tokens=20, total_tokens=140)
    call = function_call("lookup", {"protein_id": "P04637"}, call_id="call_1")
    steps = [
        ModelStep(output=[call], usage=usage),
        ModelStep(output=[assistant_message(ANSWER)], usage=usage),
    ]

    class Model(ScriptedModel):
        """The script, each request ``latency`` seconds late."""

        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            if latency:
                await asyncio.sleep(latency)
            return await super().get_response(*args, **kwargs)

    @function_tool
    def lookup(protein_id: str) -> str:
        """Look a protein up."""
        return f"{protein_id}: 393 residues"

    agent = Agent(name="researcher", instructions="Answer.", tools=[lookup])
    hooks: Any = RunHooks()

    def refill() -> None:
        agent.model = Model(steps)

    async def bare(prompt: str) -> str:
        return str((await Runner.run(agent, prompt)).final_output)

    async def hooked(prompt: str) -> str:
        return str((await Runner.run(agent, prompt, hooks=hooks)).final_output)

    class FloorHooks(RunHooks[Any]):
        """The floor's hook: :class:`FloorMeter`'s limits in the SDK's ``RunHooks``, the
        request's size measured as lyra's child measures it (its input and instructions
        as JSON)."""

        def __init__(self, meter: FloorMeter) -> None:
            self.meter = meter

        async def on_llm_start(
            self, context: Any, agent: Any, system_prompt: Any, input_items: Any
        ) -> None:
            self.meter.before(len(json.dumps([input_items, system_prompt], default=str)), OUTPUT)

        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            usage = context.usage
            self.meter.after(usage.input_tokens + usage.output_tokens)

        async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
            self.meter.progress()

        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
            self.meter.progress()

    async def floor_hooked(prompt: str, meter: FloorMeter) -> str:
        run = Runner.run(agent, prompt, hooks=FloorHooks(meter))
        return str((await run).final_output)

    return Sides(bare, hooked, OpenAIAgentsChild(agent), fresh=refill, floor_hooked=floor_hooked)


FRAMEWORK = Framework(
    bench="framework_openai_agents",
    build=build,
    prompt="How long is P04637?",
    answer=ANSWER,
    per_run="2 model requests, 1 tool call",
    requests=2,
    hook="do-nothing RunHooks",
)


def run(size: Size) -> list[Row]:
    return measure(FRAMEWORK, size)


def main(argv: list[str] | None = None) -> None:
    standalone(run, __doc__, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
