"""Budgets of a delegation tree (DESIGN §12): frozen limits, a live account.

A :class:`Budget` is a value: limits on tokens, cost, turns and tool calls. An
:class:`Account` is the live tally behind one: every attempt of a recovery
loop, every decomposed subtask and every nested delegation draws on the same
account, or on a child account whose charges also count against its parent.
The first charge that takes an account over a limit marks it exhausted and
tells every attempt drawing on it (their watchers end them at once), so no
work continues on an account that has run out. A charge *ahead* that it has no
room for (a request's turn, a tool call, a request's tokens) is refused: the
attempt it was refused to ends, the account is spent (no attempt starts on it,
every later charge ahead is refused), and the attempts already under way keep
what they paid for -- a request in flight is answered and charged.

Charges may come from worker threads (a sync tool): one lock per tree keeps
the tallies exact.
"""

from __future__ import annotations

import functools
import math
import reprlib
import threading
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lyra.delegation._models import builder


class Budget(BaseModel):
    """Limits for a delegation tree; ``None`` means no limit on that measure.

    Strict: a limit is a number (a whole one for counts), never a string or a bool."""

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid", strict=True)

    max_tokens: int | None = Field(default=None, ge=0, description="Input plus output tokens.")
    max_cost_usd: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="Spend in US dollars."
    )
    max_turns: int | None = Field(default=None, ge=0, description="Model calls (or agent turns).")
    max_tool_calls: int | None = Field(
        default=None, ge=0, description="Tool calls (ctx.tool and every framework tool call)."
    )

    @property
    def unlimited(self) -> bool:
        """True when no measure is limited."""
        return (
            self.max_tokens is None
            and self.max_cost_usd is None
            and self.max_turns is None
            and self.max_tool_calls is None
        )


class Usage(BaseModel):
    """What a delegation (with everything below it) was charged."""

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    turns: int = 0
    tool_calls: int = 0
    """Tool calls charged (only under a budget that limits them)."""

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __bool__(self) -> bool:
        return bool(
            self.input_tokens
            or self.output_tokens
            or self.cost_usd
            or self.turns
            or self.tool_calls
        )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=_dollars(self.cost_usd + other.cost_usd),
            turns=self.turns + other.turns,
            tool_calls=self.tool_calls + other.tool_calls,
        )

    def less(self, other: Usage) -> Usage:
        """This usage without ``other``'s (a part of it), never below nothing."""
        return Usage(
            input_tokens=max(0, self.input_tokens - other.input_tokens),
            output_tokens=max(0, self.output_tokens - other.output_tokens),
            cost_usd=max(0.0, _dollars(self.cost_usd - other.cost_usd)),
            turns=max(0, self.turns - other.turns),
            tool_calls=max(0, self.tool_calls - other.tool_calls),
        )

    def fields(self) -> dict[str, Any]:
        """Flat event fields (``tokens_used``, …)."""
        fields: dict[str, Any] = {
            "tokens_used": self.tokens,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "turns": self.turns,
        }
        if self.tool_calls:
            fields["tool_calls"] = self.tool_calls
        return fields


def _dollars(amount: float) -> float:
    """A sum of costs without binary noise (0.02 * 3 is 0.06, not 0.060000000000000005):
    a trillionth of a dollar is far below any price."""
    return round(amount, 12)


_usage = builder(Usage, "input_tokens", "output_tokens", "cost_usd", "turns", "tool_calls")
"""A :class:`Usage` of an account's tallies (checked as they were charged)."""

Watcher = Callable[["Account"], None]
"""Called (once) with the account that ran out, by whichever thread charged it."""


class Account:
    """The live tally of one budget; ``parent`` accounts are charged too.

    An account without ``limits`` only meters (an attempt's own usage).
    """

    __slots__ = (
        "_caps",
        "_chain",
        "_limiting",
        "_lock",
        "_released",
        "_watchers",
        "cost_usd",
        "counts_tool_calls",
        "exhausted",
        "input_tokens",
        "limited",
        "limits",
        "output_tokens",
        "parent",
        "passed",
        "reserved",
        "retries_included",
        "tool_calls",
        "turns",
    )

    _limiting: tuple[Account, ...]
    _caps: tuple[float, float, float, float]

    def __init__(self, limits: Budget | None = None, parent: Account | None = None) -> None:
        if limits is not None and type(limits) is not Budget:
            limits = checked_budget(limits)
        self.limits = None if limits is None or limits.unlimited else limits
        self.parent = parent
        self._chain: tuple[Account, ...] = (self, *parent._chain) if parent else (self,)
        self.input_tokens = self.output_tokens = self.turns = self.tool_calls = 0
        self.reserved = 0
        """Tokens held for model requests in flight (their worst case), not yet charged."""
        self._released: list[Callable[[], None]] | None = None  # (a list once one waits)
        self.cost_usd = 0.0
        self.exhausted: str | None = None
        """Why the account ran out (the limit and the amount used), once it has."""
        self.passed = False
        """True once a charge of use made took the tallies past a limit (not a charge
        ahead refused): every attempt drawing on the account was ended."""
        self._lock: threading.Lock = parent._lock if parent is not None else threading.Lock()
        self._watchers: dict[int, Watcher] = {}
        self.retries_included = False
        """True for a recovery loop's account: every retry draws on it, so a
        failure for want of it is not retryable, whatever the accounts above hold."""
        if self.limits is None:  # (an attempt's own meter: one for every attempt)
            self._caps = _NO_CAPS
            self.limited: frozenset[str] = parent.limited if parent is not None else _NONE
            """What this account or one above it limits (``"max_tokens"``, …)."""
            self._limiting = parent._limiting if parent is not None else ()
            """The accounts up the chain that have limits, innermost first."""
        else:
            self._caps = tokens, cost, turns, calls = _caps(self.limits)
            own = _measures(tokens < math.inf, cost < math.inf, turns < math.inf, calls < math.inf)
            self.limited = _union(own, parent.limited) if parent is not None else own
            self._limiting = (self, *parent._limiting) if parent is not None else (self,)
        self.counts_tool_calls = "max_tool_calls" in self.limited
        """True when this account or one above it limits tool calls (each is charged)."""

    @classmethod
    def for_budget(cls, budget: Budget | None, parent: Account | None = None) -> Account | None:
        """A child account when ``budget`` limits anything, else ``parent`` itself."""
        budget = checked_budget(budget)
        if budget is None or budget.unlimited:
            return parent
        return cls(budget, parent)

    @property
    def usage(self) -> Usage:
        """What this account was charged (including every account below it)."""
        return _usage(
            self.input_tokens, self.output_tokens, self.cost_usd, self.turns, self.tool_calls
        )

    def chain(self) -> tuple[Account, ...]:
        """This account and its ancestors, innermost first."""
        return self._chain

    def charge(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float = 0.0,
        turns: int = 0,
        tool_calls: int = 0,
        ahead: bool = False,
    ) -> Account | None:
        """Record use here and in every ancestor; the innermost account that is
        (now or already) over its limits, else ``None``.

        ``ahead``: the charge pays for use not made yet (a model call's turn, a tool
        call, taken before the call). When it would take an account over a limit,
        nothing is recorded and that account is exhausted as having reached it (no
        attempt is told: the use never comes); on an account out already, nothing is
        recorded either. A charge of use made is refused nothing: it returns the
        account it took past a limit, or one past it already.
        """
        # Every model request of every framework child passes here twice: written
        # for the common case (no limit passed), with nothing built on the way.
        ran_out: list[Account] = []
        with self._lock:
            tokens = input_tokens + output_tokens
            if ahead:  # the first account it would take over, and why
                for account in self._limiting:
                    if account.exhausted is not None:
                        break  # out already: nothing is paid ahead (the use never comes)
                    if account._would_pass(tokens, cost_usd, turns, tool_calls):
                        account.exhausted = account._over(tokens, cost_usd, turns, tool_calls, True)
                        break
                else:
                    self._add(input_tokens, output_tokens, cost_usd, turns, tool_calls, ran_out)
            else:
                self._add(input_tokens, output_tokens, cost_usd, turns, tool_calls, ran_out)
            over, told = self._outcome(ran_out, ahead)
        for watcher, account in told:  # outside the lock: a watcher may cancel work
            watcher(account)
        return over

    def take_turn(self) -> Account | None:
        """``charge(turns=1, ahead=True)``, the turn of a model request about to be sent:
        every request of every model-backed child takes one, so the usual case (no
        account out, turns to spare) is quick."""
        with self._lock:
            for account in self._limiting:
                if account.exhausted is not None or account.turns >= account._caps[2]:
                    break
            else:
                for account in self._chain:
                    account.turns += 1
                return None
        return self.charge(turns=1, ahead=True)

    def give_back_turn(self) -> None:
        """The turn :meth:`take_turn` charged for a request that was never sent."""
        with self._lock:
            for account in self._chain:
                account.turns = max(0, account.turns - 1)

    def _add(
        self,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float,
        turns: int,
        tool_calls: int,
        ran_out: list[Account],
    ) -> None:
        """Record a charge up the chain (under the lock); the accounts it ran out are
        exhausted and added to ``ran_out``."""
        for account in self._chain:
            account.input_tokens += input_tokens
            account.output_tokens += output_tokens
            if cost_usd:
                account.cost_usd = _dollars(account.cost_usd + cost_usd)
            account.turns += turns
            account.tool_calls += tool_calls
        for account in self._limiting:
            if not account.passed and account._would_pass(0, 0.0, 0, 0):
                account._ran_out(ran_out)

    def reserve(self, worst: int, least: int) -> int:
        """Hold up to ``worst`` tokens for a request about to be sent, here and in every
        ancestor: as many as every token limit up the chain leaves beside what is
        charged and held, if that is at least ``least``; else nothing (0), and nothing
        on a spent account (:meth:`spent`)."""
        with self._lock:
            granted = worst
            for a in self._limiting:  # (an account without a token limit: room is inf)
                if a.exhausted is not None:
                    return 0
                room = a._caps[0] - a.input_tokens - a.output_tokens - a.reserved
                if room < granted:
                    granted = int(room)
            if granted < least:
                return 0
            for account in self._chain:
                account.reserved += granted
            return granted

    def release(self, tokens: int) -> None:
        """Give back tokens :meth:`reserve` held (their request was answered or ended);
        whoever waits for room is told."""
        with self._lock:
            chain = self._chain
            for account in chain:
                account.reserved = max(0, account.reserved - tokens)
            root = chain[-1]
            waiting, root._released = root._released, None
        for wake in waiting or ():
            wake()

    def open_request(self, worst: int, least: int) -> int:
        """A model request about to be sent, when every account up the chain lets it go
        at once: its turn charged ahead (:meth:`take_turn`) and up to ``worst`` tokens
        held (:meth:`reserve`, at least ``least`` ≥ 1), under one lock. The tokens held;
        0 when an account is out, or has no turn or no room left: nothing is charged
        nor held, and those two calls say what stands in the way."""
        with self._lock:
            granted = worst
            for a in self._limiting:  # (an account without a limit has inf of it)
                caps = a._caps
                if a.exhausted is not None or a.turns >= caps[2]:
                    return 0
                room = caps[0] - a.input_tokens - a.output_tokens - a.reserved
                if room < granted:
                    granted = int(room)
            if granted < least:
                return 0
            for account in self._chain:
                account.turns += 1
                account.reserved += granted
            return granted

    def settle(
        self, held: int, input_tokens: int, output_tokens: int, cost_usd: float
    ) -> Account | None:
        """A model request answered: the ``held`` tokens :meth:`reserve` gave it given
        back (whoever waits for room is told) and its usage charged (:meth:`charge`),
        under one lock; the innermost account now or already over its limits."""
        ran_out: list[Account] = []
        waiting = None
        with self._lock:
            if held:
                chain = self._chain
                for account in chain:
                    account.reserved = max(0, account.reserved - held)
                root = chain[-1]
                waiting, root._released = root._released, None
            self._add(input_tokens, output_tokens, cost_usd, 0, 0, ran_out)
            over, told = self._outcome(ran_out, ahead=False)
        for wake in waiting or ():
            wake()
        for watcher, account in told:  # outside the lock: a watcher may cancel work
            watcher(account)
        return over

    def _ran_out(self, ran_out: list[Account]) -> None:
        """A charge of use made took this account past a limit (under the lock): why,
        kept (in place of a refusal's), and the account added to ``ran_out``."""
        self.passed = True
        self.exhausted = self._over(0, 0.0, 0, 0, False)
        ran_out.append(self)

    def _outcome(
        self, ran_out: list[Account], ahead: bool
    ) -> tuple[Account | None, list[tuple[Watcher, Account]]]:
        """After a charge (under the lock): the innermost account that ends the charger
        -- for a charge ahead, one that is out (refused or passed); for use made, one
        past a limit -- and the watchers to tell of the accounts it ran out."""
        over = None
        for account in self._limiting:
            if account.passed or (ahead and account.exhausted is not None):
                over = account
                break
        return over, [(w, account) for account in ran_out for w in account._watchers.values()]

    def spent(self) -> Account | None:
        """The innermost account up the chain that is out (refused a charge ahead, or
        passed a limit): no request may go on it any more."""
        with self._lock:
            for account in self._limiting:
                if account.exhausted is not None:
                    return account
        return None

    def why_spent(self) -> str:
        """Why nothing is left to spend up the chain, in words: what ran an account out
        (the limit and the amount used), else the limits used up to the last unit."""
        spent = self.spent()
        if spent is not None and spent.exhausted is not None:
            return spent.exhausted
        left = self.left()
        used_up = [
            f"{name} used up"
            for name, value in (
                ("max_tokens", left.max_tokens),
                ("max_cost_usd", left.max_cost_usd),
                ("max_turns", left.max_turns),
                ("max_tool_calls", left.max_tool_calls),
            )
            if value is not None and value <= 0
        ]
        return ", ".join(used_up) or "no room"

    def holds_others(self, mine: int = 0) -> bool:
        """True while requests other than the caller's (``mine`` tokens) hold tokens of
        a token limit up the chain: waiting for them may free room."""
        with self._lock:
            return any(a.reserved > mine for a in self._limiting if a._caps[0] < math.inf)

    def when_released(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` (once) at the next :meth:`release` anywhere in this tree."""
        with self._lock:
            root = self._chain[-1]
            if root._released is None:
                root._released = []
            root._released.append(wake)

    def refuse(self, tokens: int) -> Account | None:
        """A request that no token limit up the chain has room for (``tokens``: the
        least it can go with), with nothing held that could free some: the tightest
        account is exhausted as having reached its limit, and returned (as a charge
        ahead refused: the attempts under way are not told)."""
        with self._lock:
            for account in self._limiting:
                why = account._over(tokens, 0.0, 0, 0, True)
                if why is not None and why.startswith("max_tokens"):
                    if account.exhausted is None:
                        account.exhausted = why + " (the least the next request needs)"
                        return account
                    break
        return None

    def _would_pass(self, tokens: int, cost_usd: float, turns: int, calls: int) -> bool:
        """True when the tally with these amounts more passes a limit (the quick test
        before :meth:`_over` says which)."""
        max_tokens, max_cost, max_turns, max_calls = self._caps
        return (
            self.input_tokens + self.output_tokens + tokens > max_tokens
            or self.turns + turns > max_turns
            or self.tool_calls + calls > max_calls
            or (max_cost != math.inf and _dollars(self.cost_usd + cost_usd) > max_cost)
        )

    def _over(
        self, tokens: int, cost_usd: float, turns: int, calls: int, ahead: bool
    ) -> str | None:
        """Which limit the tally exceeds, in words, or ``None``; ``ahead``: which limit
        charging these amounts more would exceed (they are refused)."""
        limits = self.limits
        if limits is None:
            return None
        used = self.input_tokens + self.output_tokens
        if limits.max_tokens is not None and used + tokens > limits.max_tokens:
            return _passed("max_tokens", limits.max_tokens, used, tokens, "tokens", ahead)
        cost = limits.max_cost_usd
        if cost is not None and _dollars(self.cost_usd + cost_usd) > cost:
            verb = "reached" if ahead else "exceeded"
            refused = f", ${cost_usd:.4f} more refused" if ahead else ""
            return f"max_cost_usd={cost:g} {verb}: ${self.cost_usd:.4f} used{refused}"
        if limits.max_turns is not None and self.turns + turns > limits.max_turns:
            return _passed("max_turns", limits.max_turns, self.turns, turns, "turns", ahead)
        limit = limits.max_tool_calls
        if limit is not None and self.tool_calls + calls > limit:
            return _passed("max_tool_calls", limit, self.tool_calls, calls, "tool calls", ahead)
        return None

    def left(self) -> Budget:
        """What may still be spent, the tightest over the whole chain (nothing on the
        limited measures of an account that ran out, a refused charge included)."""
        spare: dict[str, float] = {}
        with self._lock:
            for account in self.chain():
                limits = account.limits
                if limits is None:
                    continue
                out = account.exhausted is not None
                for name, limit, used in (
                    ("max_tokens", limits.max_tokens, account.input_tokens + account.output_tokens),
                    ("max_cost_usd", limits.max_cost_usd, account.cost_usd),
                    ("max_turns", limits.max_turns, account.turns),
                    ("max_tool_calls", limits.max_tool_calls, account.tool_calls),
                ):
                    if limit is not None:
                        room = 0 if out else max(0, _dollars(limit - used))
                        spare[name] = min(spare.get(name, room), room)
        whole = {
            name: int(spare[name])
            for name in ("max_tokens", "max_turns", "max_tool_calls")
            if name in spare
        }
        return Budget(max_cost_usd=spare.get("max_cost_usd"), **whole)

    def has_room(self) -> bool:
        """True while every limit up the chain leaves something to spend (checked
        before every attempt, so it builds no :class:`Budget`)."""
        with self._lock:
            return all(account._room() for account in self._limiting)

    def _room(self) -> bool:
        max_tokens, max_cost, max_turns, max_calls = self._caps
        return self.exhausted is None and (  # a refused charge ran it out, too
            self.input_tokens + self.output_tokens < max_tokens
            and self.cost_usd < max_cost
            and self.turns < max_turns
            and self.tool_calls < max_calls
        )

    def limiting(self) -> tuple[Account, ...]:
        """The accounts up the chain that have limits (the ones that can run out)."""
        return self._limiting

    def watch(self, key: int, watcher: Watcher) -> None:
        """Call ``watcher`` when this account runs out (until :meth:`unwatch`)."""
        with self._lock:
            self._watchers[key] = watcher

    def unwatch(self, key: int) -> None:
        """Stop watching."""
        with self._lock:
            self._watchers.pop(key, None)


_MEASURES = ("max_tokens", "max_cost_usd", "max_turns", "max_tool_calls")


@functools.cache
def _measures(*limited: bool) -> frozenset[str]:
    """The names of the measures (in :data:`_MEASURES`' order) that are ``limited``: one
    of sixteen sets, made once (an account is made for every delegation)."""
    return frozenset(name for name, on in zip(_MEASURES, limited, strict=True) if on)


_NO_CAPS = (math.inf, math.inf, math.inf, math.inf)
_NONE: frozenset[str] = frozenset()


@functools.cache
def _union(own: frozenset[str], above: frozenset[str]) -> frozenset[str]:
    """What an account and the ones above it limit: made once for each pair of sets."""
    return own | above


def _caps(limits: Budget | None) -> tuple[float, float, float, float]:
    """A budget's limits (tokens, cost, turns, tool calls), infinite where it has none."""
    if limits is None:
        return _NO_CAPS  # (one tuple for every account that only meters)
    tokens, cost = limits.max_tokens, limits.max_cost_usd
    turns, calls = limits.max_turns, limits.max_tool_calls
    return (
        math.inf if tokens is None else tokens,
        math.inf if cost is None else cost,
        math.inf if turns is None else turns,
        math.inf if calls is None else calls,
    )


def _passed(name: str, limit: int, used: int, extra: int, unit: str, ahead: bool) -> str:
    """A limit passed, in words: ``extra`` more refused (``ahead``), or exceeded."""
    if ahead:
        return f"{name}={limit} reached: {used} {unit} used, {extra} more refused"
    return f"{name}={limit} exceeded: {used} {unit} used"


def checked_charge(input_tokens: int, output_tokens: int, cost_usd: float, turns: int) -> None:
    """A clear error for a caller's impossible charge (negative, NaN, not a number)."""
    if (  # the charges of lyra's own meters, at once (an OR of ints ≥ 0 is ≥ 0)
        type(input_tokens) is int is type(output_tokens) is type(turns)
        and type(cost_usd) is float
        and input_tokens | output_tokens | turns >= 0
        and 0.0 <= cost_usd < math.inf
    ):
        return
    for name, value in (
        ("input_tokens", input_tokens),
        ("output_tokens", output_tokens),
        ("turns", turns),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a whole number ≥ 0, not {value!r}")
    if (
        isinstance(cost_usd, bool)
        or not isinstance(cost_usd, int | float)
        or not math.isfinite(cost_usd)
        or cost_usd < 0
    ):
        raise ValueError(f"cost_usd must be a finite number ≥ 0, not {cost_usd!r}")


def checked_budget(budget: object) -> Budget | None:
    """``budget`` itself, or a TypeError that shows how to write one."""
    if budget is None or isinstance(budget, Budget):
        return budget
    example = "Budget(**budget)" if isinstance(budget, dict) else "Budget(max_tokens=100_000)"
    raise TypeError(f"budget must be a lyra.Budget, e.g. {example}; got {reprlib.repr(budget)}")
