"""The one meter every model-backed child charges through (DESIGN §13).

Each framework reports usage its own way -- a running total (pydantic-ai's
``RunUsage``, the OpenAI Agents SDK's ``Usage``), one figure per response
(LangChain's ``usage_metadata``, the Messages API's ``usage``) -- and each child
reads it into :class:`Tokens`. What happens then is the same for all of them,
and written here once:

- before a model request: a blocker a tool declared (and the framework caught)
  ends the run; a cost budget on a model without a price is refused before
  anything is sent; the request's turn is charged *ahead*, so a spent account
  refuses the request;
- after a response: its tokens are priced (the framework's own cost where it
  has one, else lyra's price table) and charged; nothing new is a heartbeat; a
  token budget over a model that reports no usage stops the run at the first
  response, never silently unlimited; a cost that cannot be priced stops it too.

Counts from a framework are foreign data: a float is rounded up, anything that
is not a finite number ≥ 0 counts as nothing, and a cost of its own that is no
finite number ≥ 0 is priced by lyra instead (a user's own ``ctx.charge`` is still
checked strictly).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from lyra.children._pricing import Price, PriceList
from lyra.delegation import ChildContext
from lyra.errors import ConfigurationError

BYTES_PER_TOKEN = 4
"""How a request's input is estimated before it is sent: one token per this many bytes
of what it carries (its text, as the JSON a provider is sent). Tokenizers take about
four bytes of English text per token; denser text (code, Chinese, Japanese) is
underestimated, and requests in flight together can then pass ``max_tokens`` by the
difference (README, "Budgets")."""
REQUEST_OVERHEAD = 16
"""Tokens held for what a provider adds around a request's text (roles, framing)."""
DEFAULT_OUTPUT = 4096
"""The output held for a request whose output limit lyra does not know."""


def text_bytes(text: str) -> int:
    """The UTF-8 size of ``text``, without encoding it when it is ASCII (asking costs
    nothing in CPython: a request's whole history is measured before every request). A
    lone surrogate (text from a tool that decoded bytes leniently) counts, never raises."""
    return len(text) if text.isascii() else len(text.encode(errors="surrogatepass"))


def count(value: Any) -> int:
    """A token count from a framework: whole, never negative (0 for what is no number)."""
    if type(value) is int:  # (the usual case, at once: several per response)
        return value if value > 0 else 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float):
        return math.ceil(value) if math.isfinite(value) and value > 0 else 0
    return max(0, value)


class Tokens(NamedTuple):
    """Token counts of a response (or a running total): ``input`` includes the cache's.

    (A tuple: several are made for every response of every model-backed child, and a
    frozen dataclass costs several times more to build.)"""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @classmethod
    def of(
        cls, input: Any = 0, output: Any = 0, cache_read: Any = 0, cache_write: Any = 0
    ) -> Tokens:
        """Counts as a framework gave them, made whole (see :func:`count`)."""
        return cls(  # (count() only for what is not already a whole number ≥ 0)
            input if type(input) is int and input >= 0 else count(input),
            output if type(output) is int and output >= 0 else count(output),
            cache_read if type(cache_read) is int and cache_read >= 0 else count(cache_read),
            cache_write if type(cache_write) is int and cache_write >= 0 else count(cache_write),
        )

    def __bool__(self) -> bool:
        return bool(self.input or self.output)

    def cost(self, price: Price) -> float:
        """What these tokens cost at ``price`` (cache reads and writes at their rates)."""
        return price.of_tokens(
            input_tokens=max(0, self.input - self.cache_read - self.cache_write),
            output_tokens=self.output,
            cache_write_tokens=self.cache_write,
            cache_read_tokens=self.cache_read,
        )


def worst_case(text_bytes: int, output: int | None) -> Tokens:
    """The most a request may use, estimated before it is sent: its input from the
    ``text_bytes`` it carries (one token per :data:`BYTES_PER_TOKEN` bytes, plus
    :data:`REQUEST_OVERHEAD`) and its output limit (``output``, else
    :data:`DEFAULT_OUTPUT`)."""
    inputs, worst, _ = _sizes(text_bytes, output, capped=False)
    return Tokens(inputs, worst - inputs)


def _sizes(text_bytes: int, output: int | None, capped: bool) -> tuple[int, int, int]:
    """A request's input tokens, its worst case (:func:`worst_case`) and the fewest
    tokens it may go with: its input and a token to answer with when its output may be
    capped (or its limit is not known), else its worst case."""
    inputs = -(-text_bytes // BYTES_PER_TOKEN) + REQUEST_OVERHEAD
    output = count(output)  # (a user's setting: 1000.0 is 1000)
    if not output:
        return inputs, inputs + DEFAULT_OUTPUT, inputs + 1
    return inputs, inputs + output, inputs + 1 if capped else inputs + output


class Meter:
    """lyra's accounting of one run of a model-backed child (one per attempt).

    ``child`` names the child in refusals (``"PydanticAIChild"``); ``prices`` is the
    child's price list (lyra's table with the user's ``prices=`` over it).
    """

    __slots__ = (
        "_charged",
        "_cost_charged",
        "_figures",
        "_held",
        "_unsent",
        "child",
        "cost_limited",
        "ctx",
        "prices",
        "provider",
        "token_limited",
    )

    def __init__(self, ctx: ChildContext, prices: PriceList, *, child: str) -> None:
        self.ctx = ctx
        self.prices = prices
        self.child = child
        account = ctx.account
        limited = account.limited if account is not None else frozenset()
        self.cost_limited = "max_cost_usd" in limited
        """True when a cost budget holds: every response must be priced."""
        self.token_limited = "max_tokens" in limited
        """True when a token budget holds: every response must report its usage."""
        self._charged = Tokens()  # the running total charged so far
        self._cost_charged = 0.0
        self._figures: tuple[Any, ...] = (0, 0, 0, 0, None)
        self._held: dict[object, list[int]] = {}
        self._unsent = False  # a turn taken ahead for a request not yet sent
        self.provider: str | None = None
        """The provider of the last request (``"anthropic"``, ``"openai"``, …)."""

    async def before_request(
        self,
        model: str | None,
        *,
        provider: str | None = None,
        known: bool = True,
        turn: bool = True,
        key: object = None,
        text_bytes: int | None = None,
        output: int | None = None,
        capped: bool = False,
    ) -> int | None:
        """A model request is about to be sent to ``model`` (``None``: unnamed) of
        ``provider``.

        A stop that a framework caught (a tool's ``ctx.block(...)`` or question, a
        loop, the budget run out meanwhile) ends the run here; a cost budget with no
        price for the model is refused before anything is paid (``known=False``: the
        framework picks the model itself, so its price is checked on the response);
        a rate-limit cooldown the tree knows of for ``provider`` is waited out (not
        idle time); then the turn is charged ahead (``turn=False`` when the
        framework charged it another way) and, given the ``text_bytes`` the request
        sends, its worst case is held under a token budget as :meth:`reserve` holds
        it (``key``, ``output``, ``capped``: see there), in the same step when the
        tree has room: what :meth:`reserve` returns."""
        ctx = self.ctx
        ctx.raise_if_stopped()
        if self.cost_limited and known and self.prices(model) is None:
            raise self.unpriced(model)
        if provider is not None:
            self.provider = ctx.provider = provider
            if ctx.tree.cooldown_left(provider) > 0:
                await ctx.cooled(provider)
        self._unsent = False
        if text_bytes is None or not self.token_limited:
            if turn:
                ctx.take_turn()
                self._unsent = True
            return None
        if turn:  # (most requests: the turn and the hold in one step)
            inputs, worst, least = _sizes(text_bytes, output, capped)
            held = ctx.open_request(worst, least)
            if held:
                self._hold(key, held)
                return held - inputs
            ctx.take_turn()  # (what stands in the way raises here, or waits below)
            self._unsent = True
        return await self.reserve(key, text_bytes=text_bytes, output=output, capped=capped)

    async def reserve(
        self, key: object, *, text_bytes: int, output: int | None, capped: bool = False
    ) -> int | None:
        """Hold the worst case of the request ``key`` names against a token budget, so
        that requests in flight together never take the tree past ``max_tokens``: its
        input estimated from the ``text_bytes`` it sends, and its output limit
        (:func:`worst_case`). Waits while requests in flight hold the room it needs
        (not idle time).

        With ``capped`` (the framework lets lyra set the request's ``max_tokens``), the
        request may go with less than its output limit: the output it may write is
        returned, to cap it with. Otherwise it waits until its whole output limit fits
        -- except when that limit is not known, where it goes with what is left and
        can pass the budget by its output beyond that (README, "Budgets"). ``None``
        without a token budget. :meth:`answer` or :meth:`settled` gives the tokens
        back. A request it refuses, or that the attempt ends while it waits, was never
        sent: the turn :meth:`before_request` charged for it is given back."""
        if not self.token_limited:
            return None
        inputs, worst, least = _sizes(text_bytes, output, capped)
        unsent, self._unsent = self._unsent, False
        try:
            held = await self.ctx.reserve_tokens(worst, least)
        except BaseException:  # never sent: refused, or the attempt ended as it waited
            if unsent:
                self.ctx.give_back_turn()
            raise
        self._hold(key, held)
        return held - inputs

    def _hold(self, key: object, tokens: int) -> None:
        self._held.setdefault(key, []).append(tokens)  # (one step: hooks run in threads too)

    def _unhold(self, key: object) -> int:
        """Forget what the request ``key`` names holds (every request's, with ``key=None``):
        the tokens to give back."""
        holding = self._held
        if not holding:
            return 0  # (no token budget: nothing is ever held)
        if key is None:
            held = sum(sum(holds) for holds in holding.values())
            holding.clear()
            return held
        waiting = holding.get(key)
        if not waiting:
            return 0
        held = waiting.pop(0)
        if not waiting:
            del holding[key]
        return held

    def settled(self, key: object = None) -> None:
        """The request ``key`` names ended without an answer to charge (it failed, or
        the framework charges its usage another way): what it held is given back
        (every request's, with ``key=None``)."""
        held = self._unhold(key)
        if held:
            self.ctx.release_tokens(held)

    def dropped(self, key: object, tokens: Tokens, model: str | None) -> None:
        """The request ``key`` names was answered, but the framework raised on the answer
        and kept no usage of it (an answer cut off at its output limit): what it held is
        given back and ``tokens``, its estimate (:func:`worst_case`), charged in place
        of the usage, so that a budget still counts it."""
        self._charge(*tokens, model, None, self._unhold(key))

    def answer(
        self, key: object, tokens: Tokens | None, model: str | None, *, cost: float | None = None
    ) -> None:
        """The request ``key`` names was answered (``key=None``: every request held
        for), with ``tokens`` (``None``: the framework reported no usage): what it held
        is given back and its tokens priced (unless ``cost`` is the framework's own
        figure) and charged, in one step; the provider answered (what a supervisor's
        concurrency climbs back on)."""
        self.answered()
        if tokens is None:
            self.settled(key)
            self.unreported(model)
            return
        self._charge(*tokens, model, cost, self._unhold(key))

    def add(self, tokens: Tokens, model: str | None) -> None:
        """More usage of a response already counted (a stream's later frames)."""
        self._charge(*tokens, model, None)

    def answered(self) -> None:
        """The provider answered a request: the tree's listeners hear of it."""
        if self.provider is not None:
            self.ctx.requests_answered += 1
            self.ctx.tree.succeeded(self.provider)

    def total(
        self,
        input: Any,
        output: Any,
        cache_read: Any = 0,
        cache_write: Any = 0,
        *,
        model: str | None,
        cost: float | None = None,
        settles: bool = False,
    ) -> bool:
        """A running total of the run's usage, as the framework counts it (and its
        running cost, if it has one): what it added since the last call is charged.
        False when nothing (the same figures again cost one comparison: frameworks
        report their totals far more often than they change). With ``settles`` (a
        response the total counts), what every request held is given back first, in
        the same step."""
        new = self._growth(input, output, cache_read, cache_write, cost)
        if new is None:
            if settles:
                self.settled()
            return False
        input, output, cache_read, cache_write, added = new
        held = self._unhold(None) if settles else 0
        self._charge(input, output, cache_read, cache_write, model, added, held)
        return True

    def _growth(
        self, input: Any, output: Any, cache_read: Any, cache_write: Any, cost: float | None
    ) -> tuple[int, int, int, int, float | None] | None:
        """What a running total added since the last (tokens never negative, and the
        cost, if the framework counts one), now taken as charged; ``None``: nothing. A
        cost that is no finite number ≥ 0 is no figure (a NaN stays in a running sum
        for good; a negative one would lower the base the next is charged from): lyra
        prices the tokens instead."""
        if cost is not None and not 0.0 <= cost < math.inf:
            cost = None
        figures = (input, output, cache_read, cache_write, cost)
        if figures == self._figures:
            return None
        self._figures = figures
        tokens, before = Tokens.of(input, output, cache_read, cache_write), self._charged
        new = (  # what the total added (never negative), as plain ints: no Tokens built
            max(0, tokens.input - before.input),
            max(0, tokens.output - before.output),
            max(0, tokens.cache_read - before.cache_read),
            max(0, tokens.cache_write - before.cache_write),
        )
        added = None if cost is None else max(0.0, cost - self._cost_charged)
        if not (new[0] or new[1] or added):
            return None
        self._charged = tokens
        if cost is not None:
            self._cost_charged = cost
        return (*new, added)

    def unreported(self, model: str | None) -> None:
        """A response without usage figures: a heartbeat, unless a token or cost budget
        holds -- then it cannot be kept, and the run stops here, saying why."""
        if self.token_limited or self.cost_limited:
            raise ConfigurationError(
                f"the model {_named(model)} reports no token usage, so the budget's "
                f"{'max_tokens' if self.token_limited else 'max_cost_usd'} cannot be kept; "
                "use a model (or a chat-model integration) that reports usage, or drop that "
                "limit"
            )
        self.ctx.heartbeat()

    def _charge(
        self,
        input: int,
        output: int,
        cache_read: int,
        cache_write: int,
        model: str | None,
        cost: float | None,
        held: int = 0,
    ) -> None:
        """Charge a response's tokens (whole, ≥ 0), priced unless ``cost`` is given,
        after giving back the ``held`` tokens of its request."""
        ctx = self.ctx
        if cost is None and (input or output):
            try:
                price = self.prices(model)
                if price is not None:
                    cost = Tokens(input, output, cache_read, cache_write).cost(price)
            except BaseException:  # (what the request held is given back all the same)
                ctx.release_tokens(held)
                raise
        if not (input or output or cost):
            ctx.release_tokens(held)
            ctx.heartbeat()
            return
        if cost is not None and not 0.0 <= cost < math.inf:  # a framework's own figure
            ctx.release_tokens(held)
            ctx.charge(input, output, cost)  # (refused: it says why)
            return
        ctx.close_request(held, input, output, cost or 0.0)
        if cost is None and self.cost_limited:
            raise self.unpriced(model)

    def unpriced(self, model: str | None) -> ConfigurationError:
        """The refusal of a cost budget over a model lyra cannot price."""
        return ConfigurationError(
            f"no price is known for the model {_named(model)}, so a cost budget cannot "
            f"be kept; pass prices={{...}} to {self.child}"
        )


def _named(model: str | None) -> str:
    return repr(model) if model else "'(unnamed)'"
