"""Budgets of a delegation tree (DESIGN §12): frozen limits, a live account.

A :class:`Budget` is a value: limits on tokens, cost and turns. An
:class:`Account` is the live tally behind one: every attempt of a recovery
loop, every decomposed subtask and every nested delegation draws on the same
account, or on a child account whose charges also count against its parent.
The first charge that takes an account over a limit marks it exhausted and
tells every attempt drawing on it (their watchers end them at once), so no
work continues on an account that has run out.

Charges may come from worker threads (a sync tool): one lock per tree keeps
the tallies exact.
"""

from __future__ import annotations

import math
import reprlib
import threading
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Budget(BaseModel):
    """Limits for a delegation tree; ``None`` means no limit on that measure."""

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    max_tokens: int | None = Field(None, ge=0, description="Input plus output tokens.")
    max_cost_usd: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="Spend in US dollars."
    )
    max_turns: int | None = Field(None, ge=0, description="Model calls (or agent turns).")

    @property
    def unlimited(self) -> bool:
        """True when no measure is limited."""
        return self.max_tokens is None and self.max_cost_usd is None and self.max_turns is None


class Usage(BaseModel):
    """What a delegation (with everything below it) was charged."""

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    turns: int = 0

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __bool__(self) -> bool:
        return bool(self.input_tokens or self.output_tokens or self.cost_usd or self.turns)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=_dollars(self.cost_usd + other.cost_usd),
            turns=self.turns + other.turns,
        )

    def fields(self) -> dict[str, Any]:
        """Flat event fields (``tokens_used``, …)."""
        return {
            "tokens_used": self.tokens,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "turns": self.turns,
        }


def _dollars(amount: float) -> float:
    """A sum of costs without binary noise (0.02 * 3 is 0.06, not 0.060000000000000005):
    a trillionth of a dollar is far below any price."""
    return round(amount, 12)


Watcher = Callable[["Account"], None]
"""Called (once) with the account that ran out, by whichever thread charged it."""


class Account:
    """The live tally of one budget; ``parent`` accounts are charged too.

    An account without ``limits`` only meters (an attempt's own usage).
    """

    __slots__ = (
        "_lock",
        "_watchers",
        "cost_usd",
        "exhausted",
        "input_tokens",
        "limits",
        "output_tokens",
        "parent",
        "retries_included",
        "turns",
    )

    def __init__(self, limits: Budget | None = None, parent: Account | None = None) -> None:
        limits = checked_budget(limits)
        self.limits = limits if limits is not None and not limits.unlimited else None
        self.parent = parent
        self.input_tokens = self.output_tokens = self.turns = 0
        self.cost_usd = 0.0
        self.exhausted: str | None = None
        """Why the account ran out (the limit and the amount used), once it has."""
        self._lock: threading.Lock = parent._lock if parent is not None else threading.Lock()
        self._watchers: dict[int, Watcher] = {}
        self.retries_included = False
        """True for a recovery loop's account: every retry draws on it, so a
        failure for want of it is not retryable, whatever the accounts above hold."""

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
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost_usd=self.cost_usd,
            turns=self.turns,
        )

    def chain(self) -> list[Account]:
        """This account and its ancestors, innermost first."""
        chain: list[Account] = []
        account: Account | None = self
        while account is not None:
            chain.append(account)
            account = account.parent
        return chain

    def charge(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float = 0.0,
        turns: int = 0,
        ahead: bool = False,
    ) -> Account | None:
        """Record use here and in every ancestor; the innermost account that is
        (now or already) over its limits, else ``None``.

        ``ahead``: the charge pays for use not made yet (a model call's turn,
        taken before the call). When it would take an account over a limit,
        nothing is recorded and that account is exhausted as having reached it.
        """
        ran_out: list[Account] = []
        with self._lock:
            chain = self.chain()
            refusal = None
            if ahead:  # the first account it would take over, and why
                tokens = input_tokens + output_tokens
                refusal = next(
                    ((a, why) for a in chain if (why := a._over(tokens, cost_usd, turns))), None
                )
            if refusal is not None:
                refused, why = refusal
                if refused.exhausted is None:
                    refused.exhausted = why
                    ran_out.append(refused)
            else:
                for account in chain:
                    account.input_tokens += input_tokens
                    account.output_tokens += output_tokens
                    account.cost_usd = _dollars(account.cost_usd + cost_usd)
                    account.turns += turns
                    if account.limits is not None and account.exhausted is None:
                        account.exhausted = account._over()
                        if account.exhausted is not None:
                            ran_out.append(account)
            over = next((a for a in chain if a.exhausted is not None), None)
            told = [(w, account) for account in ran_out for w in account._watchers.values()]
        for watcher, account in told:  # outside the lock: a watcher may cancel work
            watcher(account)
        return over

    def _over(self, tokens: int = 0, cost_usd: float = 0.0, turns: int = 0) -> str | None:
        """Which limit the tally exceeds, in words, or ``None``; with amounts
        given, which limit charging them would exceed (they are refused)."""
        limits = self.limits
        if limits is None:
            return None
        used = self.input_tokens + self.output_tokens
        ahead = bool(tokens or cost_usd or turns)
        verb = "reached" if ahead else "exceeded"
        if limits.max_tokens is not None and used + tokens > limits.max_tokens:
            amount = f"{used} tokens used" + (f", {tokens} more refused" if ahead else "")
            return f"max_tokens={limits.max_tokens} {verb}: {amount}"
        if (
            limits.max_cost_usd is not None
            and _dollars(self.cost_usd + cost_usd) > limits.max_cost_usd
        ):
            amount = f"${self.cost_usd:.4f} used"
            amount += f", ${cost_usd:.4f} more refused" if ahead else ""
            return f"max_cost_usd={limits.max_cost_usd:g} {verb}: {amount}"
        if limits.max_turns is not None and self.turns + turns > limits.max_turns:
            amount = f"{self.turns} turns used" + (f", {turns} more refused" if ahead else "")
            return f"max_turns={limits.max_turns} {verb}: {amount}"
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
                ):
                    if limit is not None:
                        room = 0 if out else max(0, _dollars(limit - used))
                        spare[name] = min(spare.get(name, room), room)
        tokens, turns = spare.get("max_tokens"), spare.get("max_turns")
        return Budget(
            max_tokens=None if tokens is None else int(tokens),
            max_cost_usd=spare.get("max_cost_usd"),
            max_turns=None if turns is None else int(turns),
        )

    def has_room(self) -> bool:
        """True while every limit up the chain leaves something to spend (checked
        before every attempt, so it builds no :class:`Budget`)."""
        with self._lock:
            return all(account._room() for account in self.chain() if account.limits is not None)

    def _room(self) -> bool:
        limits = self.limits
        assert limits is not None
        tokens = self.input_tokens + self.output_tokens
        return self.exhausted is None and (  # a refused charge ran it out, too
            (limits.max_tokens is None or tokens < limits.max_tokens)
            and (limits.max_cost_usd is None or self.cost_usd < limits.max_cost_usd)
            and (limits.max_turns is None or self.turns < limits.max_turns)
        )

    def limited(self) -> list[Account]:
        """The accounts up the chain that have limits (the ones that can run out)."""
        return [account for account in self.chain() if account.limits is not None]

    def watch(self, key: int, watcher: Watcher) -> None:
        """Call ``watcher`` when this account runs out (until :meth:`unwatch`)."""
        with self._lock:
            self._watchers[key] = watcher

    def unwatch(self, key: int) -> None:
        """Stop watching."""
        with self._lock:
            self._watchers.pop(key, None)


def checked_charge(input_tokens: int, output_tokens: int, cost_usd: float, turns: int) -> None:
    """A clear error for a caller's impossible charge (negative, NaN, not a number)."""
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
