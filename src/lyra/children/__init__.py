"""Ready-made children: the Anthropic tool-use child, and structured model calls."""

from lyra.children._anthropic import DEFAULT_MODEL, AnthropicChild, Tool
from lyra.children._structured import ask_structured, model_configured

__all__ = ["DEFAULT_MODEL", "AnthropicChild", "Tool", "ask_structured", "model_configured"]
