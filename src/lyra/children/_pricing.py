"""What model calls cost: a small price table, per model, that users override.

Prices are US dollars per million tokens, as Anthropic's pricing page
(platform.claude.com/docs/en/about-claude/pricing) listed them when this
table was last checked (2026-11). A model is matched by the longest key its
name starts with, so dated names (``claude-sonnet-4-5-20250929``) find their
family. Pass ``prices=`` to :class:`~lyra.children.AnthropicChild` to add or
replace entries (a negotiated rate, a new model).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens; cache prices default to Anthropic's multipliers."""

    input: float
    output: float
    cache_write: float | None = None
    """5-minute cache writes (1.25 × input when not given)."""
    cache_read: float | None = None
    """Cache hits and refreshes (0.1 × input when not given)."""

    def cost(self, usage: Any) -> float:
        """The cost of one response's ``usage`` (an anthropic SDK ``Usage`` or alike)."""
        return self.of_tokens(
            input_tokens=_tokens(usage, "input_tokens"),
            output_tokens=_tokens(usage, "output_tokens"),
            cache_write_tokens=_tokens(usage, "cache_creation_input_tokens"),
            cache_read_tokens=_tokens(usage, "cache_read_input_tokens"),
        )

    def of_tokens(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cache_write_tokens: int = 0,
        cache_read_tokens: int = 0,
    ) -> float:
        """The cost of token counts (``input_tokens`` without the cache's)."""
        write = self.cache_write if self.cache_write is not None else self.input * 1.25
        read = self.cache_read if self.cache_read is not None else self.input * 0.1
        return (
            input_tokens * self.input
            + output_tokens * self.output
            + cache_write_tokens * write
            + cache_read_tokens * read
        ) / 1_000_000


PRICES: Mapping[str, Price] = {
    "claude-fable-5-1": Price(10.0, 50.0, cache_read=0.25),
    "claude-fable-5": Price(10.0, 50.0, cache_read=1.0),
    "claude-opus-5": Price(5.0, 25.0),
    "claude-opus-4-8": Price(5.0, 25.0),
    "claude-opus-4-7": Price(5.0, 25.0),
    "claude-opus-4-6": Price(5.0, 25.0),
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-sonnet-5": Price(2.0, 10.0),
    "claude-sonnet": Price(3.0, 15.0),  # Sonnet 4 to 4.6
    "claude-3-7-sonnet": Price(3.0, 15.0),  # (named the old way: family after version)
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-3-5-haiku": Price(0.8, 4.0),
    "claude-3-haiku": Price(0.25, 1.25, cache_write=0.30, cache_read=0.03),
}
"""The default table (see the module docstring)."""


def price_of(model: str | None, prices: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: the longest key of ``prices`` (over the defaults) that its
    name starts with. A model with no name (a framework's test model) is ``""``, so
    ``prices={"": Price(...)}`` prices every model the table does not."""
    model = model or ""
    table = {**PRICES, **(prices or {})}
    matches = [key for key in table if model.startswith(key)]
    return table[max(matches, key=len)] if matches else None


class PriceList:
    """``prices`` over lyra's table, as a function of the model's name: each model
    is looked up once (a child keeps one across its runs)."""

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self.prices = prices
        self._known: dict[str, Price | None] = {}

    def __call__(self, model: str | None) -> Price | None:
        model = model or ""
        try:
            return self._known[model]
        except KeyError:
            price = self._known[model] = price_of(model, self.prices)
            return price


def tokens_of(usage: Any) -> tuple[int, int]:
    """Input tokens (cache writes and reads included) and output tokens of a ``usage``."""
    incoming = (
        _tokens(usage, "input_tokens")
        + _tokens(usage, "cache_creation_input_tokens")
        + _tokens(usage, "cache_read_input_tokens")
    )
    return incoming, _tokens(usage, "output_tokens")


def _tokens(usage: Any, name: str) -> int:
    value = getattr(usage, name, None)
    return value if type(value) is int and value > 0 else 0  # (a bool is no count)
