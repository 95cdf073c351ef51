"""The meter every model-backed child charges through: a framework's running total,
foreign counts made whole, nothing charged twice."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from lyra import Budget, ChildContext
from lyra.children._meter import Meter, Tokens, worst_case
from lyra.children._pricing import Price, PriceList, tokens_of
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


@pytest.mark.parametrize("broken", [math.nan, math.inf, -math.inf, -0.5])
async def test_a_frameworks_cost_that_is_no_number_is_priced_by_lyra(broken: float) -> None:
    """A NaN stays in a framework's running cost for good: taken as it was, it charged
    nothing for the rest of the run, and a cost budget never ran out (a negative one
    lowered the base the next figure was charged from). lyra prices the tokens
    instead."""
    price = Price(input=1.0, output=1.0)
    usage = await _charged(
        [(100, 10, 0, 0, broken), (200, 20, 0, 0, broken)], PriceList({"m": price})
    )
    assert usage.cost_usd == pytest.approx(220 / 1_000_000)


def test_every_sonnet_the_table_names_has_its_price_whatever_the_naming() -> None:
    """Sonnet 3.7's API name puts the version first (``claude-3-7-sonnet-20250219``): it
    found no price, so a cost budget on it was refused."""
    from lyra.children._pricing import price_of

    assert price_of("claude-3-7-sonnet-20250219") == price_of("claude-sonnet-4-5-20250929")
    assert price_of("claude-3-7-sonnet-20250219") is not None


# -- a model request's two steps: its turn and hold, then its answer --------------------


async def _attempt(account: Account, body: Any) -> Any:
    """Run ``body(meter)`` as an attempt drawing on ``account``; its result."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        await body(Meter(ctx, PriceList(None), child="TestChild"))
        return "done"

    return await run_attempt(child, "go", limits=Limits(timeout=5), account=account)


async def test_a_request_takes_its_turn_and_holds_its_worst_case_in_one_step() -> None:
    """Before a request: a turn charged and its worst case held, up the whole chain;
    its answer gives the hold back and charges what it used."""
    tree = Account(Budget(max_tokens=100_000, max_turns=5))
    seen: dict[str, Any] = {}

    async def body(meter: Meter) -> None:
        # 400 bytes: 100 tokens + 16 of framing, and 1,000 of output held
        allowed = await meter.before_request("m", key="a", text_bytes=400, output=1_000)
        seen["allowed"], seen["held"], seen["turns"] = allowed, tree.reserved, tree.turns
        meter.answer("a", Tokens(120, 30), "m")
        seen["after"] = tree.reserved

    result = await _attempt(tree, body)
    assert result.status == "completed", result.report
    assert seen == {"allowed": 1_000, "held": 1_116, "turns": 1, "after": 0}
    assert (tree.input_tokens, tree.output_tokens, tree.turns) == (120, 30, 1)


async def test_a_request_with_no_turn_left_is_refused_and_holds_nothing() -> None:
    """The one step charges nothing when the turn is not there: the refusal is the
    budget's, and no token stays held."""
    tree = Account(Budget(max_tokens=100_000, max_turns=1))

    async def body(meter: Meter) -> None:
        await meter.before_request("m", key=1, text_bytes=40, output=100)
        meter.answer(1, Tokens(10, 5), "m")
        await meter.before_request("m", key=2, text_bytes=40, output=100)

    result = await _attempt(tree, body)
    assert result.status == "failed"
    assert "max_turns=1" in result.report
    assert (tree.turns, tree.reserved, tree.input_tokens) == (1, 0, 10)


async def test_a_request_waits_for_room_a_sibling_gives_back_with_its_answer() -> None:
    """Two requests in flight together: the second finds no room, waits, and goes once
    the first's answer gives its hold back (the waiter is told in the same step)."""
    tree = Account(Budget(max_tokens=2_000))
    order: list[str] = []
    first_holds = anyio.Event()

    async def first(meter: Meter) -> None:
        await meter.before_request("m", key="a", text_bytes=0, output=1_500)
        order.append("first sent")
        first_holds.set()
        await anyio.sleep(0.05)
        meter.answer("a", Tokens(16, 100), "m")
        order.append("first answered")

    async def second(meter: Meter) -> None:
        await first_holds.wait()
        await meter.before_request("m", key="b", text_bytes=0, output=1_500)
        order.append("second sent")
        meter.answer("b", Tokens(16, 100), "m")

    async with anyio.create_task_group() as group:
        group.start_soon(_attempt, tree, first)
        group.start_soon(_attempt, tree, second)
    assert order == ["first sent", "first answered", "second sent"]
    assert (tree.turns, tree.reserved, tree.input_tokens + tree.output_tokens) == (2, 0, 232)


async def test_an_answer_over_the_budget_still_gives_its_hold_back() -> None:
    """An answer that takes the tree over ``max_tokens`` ends the attempt; what its
    request held is given back all the same."""
    tree = Account(Budget(max_tokens=1_000))

    async def body(meter: Meter) -> None:
        await meter.before_request("m", key=0, text_bytes=0, output=500)
        meter.answer(0, Tokens(900, 200), "m")

    result = await _attempt(tree, body)
    assert result.status == "failed"
    assert "max_tokens=1000" in result.report
    assert (tree.reserved, tree.input_tokens, tree.output_tokens) == (0, 900, 200)


async def test_a_running_total_that_settles_gives_back_even_when_nothing_is_new() -> None:
    """pydantic-ai's way: the response's hold goes back with the total's growth, or
    alone when the total did not move (a response with no usage counted yet)."""
    tree = Account(Budget(max_tokens=100_000))
    held: list[int] = []

    async def body(meter: Meter) -> None:
        await meter.before_request("m", text_bytes=0, output=100, capped=True)
        meter.total(50, 5, model="m", settles=True)
        held.append(tree.reserved)
        await meter.before_request("m", text_bytes=0, output=100, capped=True)
        meter.total(50, 5, model="m", settles=True)  # the same figures again
        held.append(tree.reserved)

    result = await _attempt(tree, body)
    assert result.status == "completed", result.report
    assert held == [0, 0]
    assert (tree.input_tokens, tree.output_tokens, tree.turns) == (50, 5, 2)


async def test_a_dropped_answer_under_a_float_output_limit_is_charged_whole() -> None:
    """A user's ``max_tokens=1000.0`` (the OpenAI Agents SDK takes it unchecked) is
    1,000 tokens held, and 1,000 charged when the answer is dropped: the tallies stay
    whole numbers."""
    tree = Account(Budget(max_tokens=100_000))

    async def body(meter: Meter) -> None:
        held = await meter.before_request("m", key=1, text_bytes=40, output=1000.0)  # type: ignore[arg-type]
        assert held == 1000
        meter.dropped(1, worst_case(40, 1000.0), "m")  # type: ignore[arg-type]

    result = await _attempt(tree, body)
    assert (tree.input_tokens, tree.output_tokens, tree.reserved) == (26, 1000, 0)
    assert type(tree.output_tokens) is int
    assert result.status == "completed", result.report


async def test_an_answer_that_cannot_be_priced_still_gives_its_hold_back() -> None:
    """Pricing that raises (a count past what a float holds) leaves nothing held."""
    tree = Account(Budget(max_tokens=10**500))
    seen: dict[str, int] = {}

    async def body(meter: Meter) -> None:
        await meter.before_request("m", key="k", text_bytes=40, output=1000)
        with pytest.raises(OverflowError):
            meter.answer("k", Tokens(10**400, 1), "m")
        seen["reserved"] = tree.reserved

    prices = PriceList({"m": Price(input=3.0, output=15.0)})

    async def child(prompt: str, ctx: ChildContext) -> str:
        await body(Meter(ctx, prices, child="TestChild"))
        return "done"

    await run_attempt(child, "go", limits=Limits(timeout=5), account=tree)
    assert seen == {"reserved": 0}


async def test_a_request_closed_by_hand_is_checked_as_a_charge_is() -> None:
    """``ctx.close_request`` is public: what ``ctx.charge`` refuses, it refuses (a NaN
    cost would have stopped every cost limit from ever running out)."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        for bad in ((0, 5, math.nan), (0, True, 0.0), (-1, 0, 0.0)):
            with pytest.raises(ValueError, match="must be"):
                ctx.close_request(0, *bad)  # type: ignore[arg-type]
        return "done"

    result = await run_attempt(
        child, "go", limits=Limits(timeout=5), account=Account(Budget(max_cost_usd=1.0))
    )
    assert result.status == "completed", result.report


def test_a_bool_in_a_messages_api_usage_is_no_count() -> None:
    """The Messages API's usage read as counts: a bool is none (it charged 1 token)."""
    usage = SimpleNamespace(input_tokens=True, output_tokens=7, cache_read_input_tokens=False)
    assert tokens_of(usage) == (0, 7)


async def test_a_negative_running_cost_between_two_figures_overcharges_nothing() -> None:
    """$0.02, then a negative figure, then $0.05: $0.05 in all, with the tokens of the
    middle reading priced by lyra (it charged $0.06: the negative figure became the
    base the last one was charged from)."""
    price = Price(input=1.0, output=1.0)
    readings = [(100, 10, 0, 0, 0.02), (200, 20, 0, 0, -0.01), (300, 30, 0, 0, 0.05)]
    usage = await _charged(readings, PriceList({"m": price}))
    assert usage.cost_usd == pytest.approx(0.05 + 110 / 1_000_000)
