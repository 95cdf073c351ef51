"""The meter every model-backed child charges through: a framework's running total,
foreign counts made whole, nothing charged twice."""

from __future__ import annotations

import math
from typing import Any

import pytest

from lyra import Budget, ChildContext
from lyra.children._meter import Meter
from lyra.children._pricing import Price, PriceList
from lyra.delegation import Limits
from lyra.delegation._internal import Account, run_attempt

pytestmark = pytest.mark.anyio


async def _charged(totals: list[tuple[Any, ...]], prices: PriceList | None = None) -> Any:
    """The usage an attempt is charged when its meter reads these running totals
    (input, output, cache read, cache write, cost) in turn."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        meter = Meter(ctx, prices or PriceList(None), child="TestChild")
        for *tokens, cost in totals:
            meter.total(*tokens, model="m", cost=cost)
        return "done"

    account = Account(Budget(max_tokens=10**18))
    result = await run_attempt(child, "go", limits=Limits(timeout=5), account=account)
    assert result.status == "completed", result.report
    return result.usage


async def test_a_running_total_is_charged_by_what_it_added() -> None:
    """Each reading charges its growth since the last; the same figures again, or a
    total that went down (a framework's reset), add nothing."""
    usage = await _charged(
        [(100, 10, 0, 0, None), (100, 10, 0, 0, None), (250, 30, 0, 0, None), (200, 5, 0, 0, None)]
    )
    assert (usage.input_tokens, usage.output_tokens) == (250, 30)


@pytest.mark.parametrize(
    ("counted", "whole"),
    [
        (2.5, 3),  # a float rounded up
        (-7, 0),
        (math.nan, 0),
        (math.inf, 0),
        (True, 0),  # a bool is no count
        ("12", 0),
        (None, 0),
        (10**15, 10**15),
    ],
)
async def test_foreign_counts_in_a_running_total_are_made_whole(counted: Any, whole: int) -> None:
    usage = await _charged([(counted, 4, 0, 0, None)])
    assert (usage.input_tokens, usage.output_tokens) == (whole, 4)


async def test_a_frameworks_running_cost_is_charged_by_its_growth() -> None:
    """A framework's own cost is taken as it is (not priced again), by its growth."""
    usage = await _charged([(100, 10, 0, 0, 0.002), (150, 20, 0, 0, 0.005)])
    assert usage.cost_usd == pytest.approx(0.005)


async def test_tokens_without_a_cost_are_priced_with_the_cache_at_its_rates() -> None:
    price = Price(input=3.0, output=15.0, cache_read=0.3)
    usage = await _charged([(1_000_000, 100_000, 500_000, 0, None)], PriceList({"m": price}))
    assert usage.cost_usd == pytest.approx(0.5 * 3.0 + 0.5 * 0.3 + 0.1 * 15.0)


def test_every_sonnet_the_table_names_has_its_price_whatever_the_naming() -> None:
    """Sonnet 3.7's API name puts the version first (``claude-3-7-sonnet-20250219``): it
    found no price, so a cost budget on it was refused."""
    from lyra.children._pricing import price_of

    assert price_of("claude-3-7-sonnet-20250219") == price_of("claude-sonnet-4-5-20250929")
    assert price_of("claude-3-7-sonnet-20250219") is not None
