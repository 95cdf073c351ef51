"""One model call whose answer must be a single tool call: structured output.

Used where lyra asks a model for data rather than work (a plan, a list of
subtasks). The answer is validated by the caller; any failure here raises,
and every caller falls back to its rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lyra.children._anthropic import AnthropicChild
from lyra.settings import settings

if TYPE_CHECKING:
    import anthropic


def model_configured() -> bool:
    """True when an Anthropic API key is set (so model-backed helpers may run)."""
    return settings().model_configured


async def ask_structured(
    prompt: str,
    *,
    system: str,
    tool: str,
    schema: Mapping[str, Any],
    client: anthropic.AsyncAnthropic | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """Ask the model to answer ``prompt`` by calling ``tool`` once; return its input."""
    holder = AnthropicChild(client=client, model=model)
    async with holder.session() as session:
        response = await session.messages.create(
            model=holder.model,
            max_tokens=1024,
            system=system,
            tools=[{"name": tool, "description": system, "input_schema": dict(schema)}],
            tool_choice={"type": "tool", "name": tool},
            messages=[{"role": "user", "content": prompt}],
        )
    for block in response.content:
        if block.type == "tool_use" and block.name == tool:
            return dict(block.input or {})
    raise ValueError(f"the model did not call {tool}")
