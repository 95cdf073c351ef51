"""Ready-made children: the Anthropic tool-use child."""

from lyra.children._anthropic import DEFAULT_MODEL, AnthropicChild, Tool

__all__ = ["DEFAULT_MODEL", "AnthropicChild", "Tool"]
