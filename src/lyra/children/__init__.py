"""Ready-made children: the Anthropic tool-use child, structured model calls,
the default child, and what model calls cost."""

from lyra.children._anthropic import AnthropicChild, Tool
from lyra.children._default import NO_CHILD, default_child
from lyra.children._pricing import PRICES, Price, price_of
from lyra.children._structured import ask_structured, model_configured
from lyra.settings import DEFAULT_MODEL

__all__ = [
    "DEFAULT_MODEL",
    "NO_CHILD",
    "PRICES",
    "AnthropicChild",
    "Price",
    "Tool",
    "ask_structured",
    "default_child",
    "model_configured",
    "price_of",
]
