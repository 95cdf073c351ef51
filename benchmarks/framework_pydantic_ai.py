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
- **floor + hook**: the floor of lyra's child: the floor child around the run with
  a capability holding the same limits in the least code (``_framework.FloorMeter``).

Targets: lyra's share (lyra − bare + hook) ≤ 150 µs CPU per run; with a model
taking 20 ms per request, lyra ≤ 1.01× bare in wall time.

    python benchmarks/framework_pydantic_ai.py [--quick | --smoke] [--json FILE]
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from _common import Row, Size, standalone
from _framework import FloorMeter, Framework, Sides, measure, text_size


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


_ANY_MODEL_WRITES = 4096  # the output lyra's child holds for a request without max_tokens


def build(latency: float) -> Sides:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.usage import RunUsage

    from lyra.children.pydantic_ai import PydanticAIChild

    agent = build_agent(latency)

    class Nothing(AbstractCapability[Any]):
        """A capability with no hook of its own."""

    async def bare(prompt: str) -> str:
        return str((await agent.run(prompt)).output)

    async def hooked(prompt: str) -> str:
        return str((await agent.run(prompt, capabilities=[Nothing()])).output)

    class FloorLimits(AbstractCapability[Any]):
        """The floor's hook: :class:`FloorMeter`'s limits in a capability, as lyra's
        ``Limits`` capability holds lyra's (the request's text measured the same way)."""

        def __init__(self, meter: FloorMeter, usage: Any) -> None:
            self.meter, self.usage = meter, usage

        async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
            sent = 0
            for message in request_context.messages:
                for part in message.parts:
                    content = getattr(part, "content", None)
                    if type(content) is not str:
                        args = getattr(part, "args", None)
                        content = str(args if args is not None else content or "")
                    sent += text_size(content)
            self.meter.before(sent, _ANY_MODEL_WRITES)
            return request_context

        async def after_model_request(
            self, ctx: Any, *, request_context: Any, response: Any
        ) -> Any:
            usage = self.usage
            self.meter.after(usage.input_tokens + usage.output_tokens)
            return response

        async def wrap_tool_execute(
            self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
        ) -> Any:
            self.meter.progress()
            result = await handler(args)
            self.meter.progress()
            return result

    async def floor_hooked(prompt: str, meter: FloorMeter) -> str:
        usage = RunUsage()
        run = agent.run(prompt, capabilities=[FloorLimits(meter, usage)], usage=usage)
        return str((await run).output)

    return Sides(bare, hooked, PydanticAIChild(agent), floor_hooked=floor_hooked)


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
