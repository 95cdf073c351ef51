"""A pydantic-ai agent bare vs inside lyra: what ``PydanticAIChild`` costs per run.

The agent: one ``pydantic_ai.Agent`` with one async tool, on pydantic-ai's own
``FunctionModel`` scripted to call the tool twice, then answer (three model
requests, two tool calls a run, usage on each response). The sides
(``_framework`` runs them, interleaved):

- **bare**: ``await agent.run(prompt)``;
- **bare + hook**: the same with one empty pydantic-ai capability
  (``capabilities=[...]``), pydantic-ai's extension point, which lyra's child
  holds the limits with: pydantic-ai dispatches every hook of a run to every
  capability (copying the run context each time), so the first one costs the
  same whatever it does;
- **lyra**: ``adelegate_task(prompt, child=PydanticAIChild(agent), ...)``;
- **plain child**: ``adelegate_task`` around a child that awaits ``agent.run``.
- **floor child**: the least a supervisor does around the same run (``_framework``).

Targets: lyra's share (lyra − bare + hook) ≤ 150 µs CPU per run; with a model
taking 20 ms per request, lyra ≤ 1.01× bare in wall time.

    python benchmarks/framework_pydantic_ai.py [--quick | --smoke] [--json FILE]
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from _common import Row, Size, standalone
from _framework import Framework, Sides, measure


def build_agent(latency: float) -> Any:
    """The agent: two tool calls, then the answer; each request takes ``latency`` s."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    async def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        if latency:
            await asyncio.sleep(latency)
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


def build(latency: float) -> Sides:
    from pydantic_ai.capabilities import AbstractCapability

    from lyra.children.pydantic_ai import PydanticAIChild

    agent = build_agent(latency)

    class Nothing(AbstractCapability[Any]):
        """A capability with no hook of its own."""

    async def bare(prompt: str) -> str:
        return str((await agent.run(prompt)).output)

    async def hooked(prompt: str) -> str:
        return str((await agent.run(prompt, capabilities=[Nothing()])).output)

    return Sides(bare, hooked, PydanticAIChild(agent))


FRAMEWORK = Framework(
    bench="framework_pydantic_ai",
    build=build,
    prompt="Triage issue 42",
    answer="Duplicate of #7",
    per_run="3 model requests, 2 tool calls",
    requests=3,
    hook="an empty capability",
)


def run(size: Size) -> list[Row]:
    return measure(FRAMEWORK, size)


def main(argv: list[str] | None = None) -> None:
    standalone(run, __doc__, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
