"""What holds one attempt to its limits (DESIGN §12): its cancel scope, the total
deadline and the idle deadline that progress pushes forward, and the budget
accounts whose exhaustion ends it.

The runner (:func:`~._delegate.run_attempt`) owns one :class:`Limiter` per
attempt; the attempt's :class:`~._context.ChildContext` only tells it of progress
(:meth:`Limiter.touch`) and asks what is left. The total and the idle deadline
share the attempt's one cancel scope: progress moves the scope's deadline
forward, never past the total. While the child waits for something that is not
its own work (an answer to its question, a provider's cooldown), the idle
deadline is held (:meth:`Limiter.waiting`); the total deadline still runs.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import Any

import anyio
import anyio.lowlevel

from lyra.delegation._budget import Account
from lyra.delegation._deadlines import Deadlines, Watch, deadlines
from lyra.errors import BudgetExhausted

_MAX_IDLE_SLACK = 0.02
"""Seconds an idle deadline may fire late, so that frequent progress does not
re-arm the timer on every call."""
OVERRUN_TOLERANCE = 0.1
"""Seconds past its deadline an attempt may end without being called late: the
lateness allowed a deadline on a busy loop (DESIGN §9, blocking children)."""


class Limiter:
    """The limits of one attempt, enforced: see the module docstring."""

    __slots__ = (
        "_held",
        "_loop_thread",
        "_token",
        "_waiting",
        "_watch",
        "_watched",
        "account",
        "armed",
        "deadline",
        "deadlines",
        "ended",
        "fired",
        "idle",
        "last_progress",
        "missed",
        "observed",
        "parent",
        "scope",
        "slack",
        "stop",
    )

    def __init__(
        self,
        timeout: float,
        *,
        idle_timeout: float | None = None,
        account: Account | None = None,
        parent: Limiter | None = None,
    ) -> None:
        self.deadlines: Deadlines | None = deadlines()
        """The loop's shared deadline heap (``None`` on a backend other than asyncio)."""
        self.deadline = self.armed = self.now() + timeout
        """When the attempt must end (loop time); ``armed``: when it ends unless
        progress moves the idle deadline."""
        self.idle = idle_timeout
        self.slack = 0.0
        self.last_progress = 0.0
        """When the child last showed progress (``time.monotonic()``)."""
        self.account = account
        self.parent = parent
        self.scope: anyio.CancelScope | None = None
        self.fired: float | None = None
        """When the watcher ended the attempt (loop time), to tell a blocked loop apart."""
        self.stop: Account | None = None
        """The account whose exhaustion ended the attempt."""
        self.observed = False
        self.ended = False
        """True once the attempt is over: what it left running shows no progress of it
        (an abandoned thread's heartbeats would hold off its parent's idle timeout)."""
        self.missed = 0.0
        """Seconds the loop was held past the idle deadline before progress moved it."""
        self._watch: Watch | None = None
        self._watched: tuple[Account, ...] = ()
        self._waiting = 0
        self._held = 0.0  # (armed, while the idle deadline is held)
        self._token: Any = None
        self._loop_thread = threading.get_ident()
        if idle_timeout is not None:
            self.last_progress = time.monotonic()
            self.slack = min(_MAX_IDLE_SLACK, idle_timeout / 20)
            self.armed = min(self.deadline, self.armed - timeout + idle_timeout + self.slack)
        if idle_timeout is not None or account is not None:
            # Progress or a charge from a worker thread must reach the scope.
            self._token = _loop_token()

    def now(self) -> float:
        """The event loop's clock (``anyio.current_time()``, without asking sniffio on an
        asyncio loop)."""
        loop = self.deadlines
        return loop.time() if loop is not None else anyio.current_time()

    def remaining(self) -> float:
        """Seconds left before the total deadline (never negative)."""
        return max(0.0, self.deadline - self.now())

    def new_scope(self) -> anyio.CancelScope:
        loop = self.deadlines
        return loop.cancel_scope() if loop is not None else anyio.CancelScope()

    def cancelled_class(self) -> type[BaseException]:
        loop = self.deadlines
        return loop.cancelled() if loop is not None else anyio.get_cancelled_exc_class()

    # -- the attempt's life -------------------------------------------------------------

    def enter(self, scope: anyio.CancelScope, key: int) -> None:
        """Start enforcing: ``scope`` ends the attempt at its deadline (kept by the
        loop's :mod:`._deadlines`, else by anyio), and an account that runs out cancels
        it (``key`` names this attempt to the accounts)."""
        self.scope = scope
        if self.deadlines is None:
            scope.deadline = self.armed  # another backend: anyio's own timer
        else:
            self._watch = self.deadlines.watch(self)
        if self.account is not None:
            self._watched = self.account.limiting()
            for account in self._watched:
                account.watch(key, self.out_of_budget)

    def exit(self, key: int) -> None:
        self.scope, self.ended = None, True
        watch, self._watch = self._watch, None
        if watch is not None and self.deadlines is not None:
            self.deadlines.unwatch(watch)
        for account in self._watched:
            account.unwatch(key)

    # -- progress ---------------------------------------------------------------------------

    def touch(self) -> None:
        """Progress: push the idle deadline forward (and the parent's)."""
        if self.ended:
            return
        if self.idle is not None:
            now = time.monotonic()
            self.last_progress = now
            if self.armed < self.deadline and now + self.idle > self.armed:
                if now - self.armed > OVERRUN_TOLERANCE and self.fired is None:
                    # progress after the idle deadline passed unseen (the loop was
                    # held): it moves the deadline, and the lateness is kept
                    self.missed = max(self.missed, now - self.armed)
                self.armed = min(self.deadline, now + self.idle + self.slack)
                if self.deadlines is None:  # the loop's watcher reads armed itself
                    self.on_loop(self._rearm)
        elif self.observed:
            self.last_progress = time.monotonic()
        if self.parent is not None:
            self.parent.touch()

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """While the child waits on others (an answer, a cooldown): no idle deadline,
        for it nor for the attempts it belongs to, which wait on it (the total ones still
        hold), and progress again once the wait is over."""
        held: list[Limiter] = []
        limiter: Limiter | None = self
        while limiter is not None:
            limiter._hold()
            held.append(limiter)
            limiter = limiter.parent
        try:
            yield
        finally:
            for limiter in reversed(held):
                limiter._release()

    def _hold(self) -> None:
        """Hold the idle deadline (the first of waits that overlap keeps what it was)."""
        self._waiting += 1
        if self._waiting == 1:
            self._held, self.armed = self.armed, self.deadline
            if self.deadlines is None and self.idle is not None:
                self.on_loop(self._rearm)

    def _release(self) -> None:
        """The end of a wait; the last of those that overlap gives the idle clock back."""
        self._waiting -= 1
        if self._waiting == 0 and self.idle is not None:
            # the idle clock starts again now (a held deadline the wait passed is no miss)
            self.armed = min(max(self._held, time.monotonic()), self.deadline)
            self.touch()
            self._rewatch()  # the deadline came nearer: the heap only moves it later
        else:
            self.touch()

    def _rearm(self) -> None:
        if self.scope is not None:
            self.scope.deadline = self.armed

    def _rewatch(self) -> None:
        if self.deadlines is None:
            self.on_loop(self._rearm)
        elif self._watch is not None:
            self.deadlines.unwatch(self._watch)
            self._watch = self.deadlines.watch(self)

    # -- the budget -------------------------------------------------------------------------

    def out_of_budget(self, account: Account) -> None:
        """Watcher: an account this attempt draws on ran out; end the attempt."""
        if self.stop is None:
            self.stop = account
        self.on_loop(self._cancel)

    def ending(self) -> bool:
        """True once the attempt (or one it belongs to) is being ended by its limits: a
        deadline, an idle timeout, a budget."""
        limiter: Limiter | None = self
        while limiter is not None:
            if limiter.stop is not None or (
                limiter.scope is not None and limiter.scope.cancel_called
            ):
                return True
            limiter = limiter.parent
        return False

    def check_budget(self) -> None:
        """End the child now if its tree ran out of budget meanwhile (the cancellation
        would only arrive at its next ``await``)."""
        if self.stop is not None:
            raise BudgetExhausted(f"Budget exhausted: {self.stop.exhausted}")

    def _cancel(self) -> None:
        if self.scope is not None:
            self.scope.cancel()

    def on_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the event loop's thread: now, if this is it, else soon, without
        waiting for it (the caller may be another loop's thread: waiting on a loop that
        is ending, or that waits on the caller's, would hang both)."""
        if threading.get_ident() == self._loop_thread:
            fn()
            return
        native = self._token.native_token
        with suppress(RuntimeError):  # the loop is gone: the attempt ended already
            if isinstance(native, asyncio.AbstractEventLoop):
                native.call_soon_threadsafe(fn)
            else:  # trio's token (its RunFinishedError is a RuntimeError)
                native.run_sync_soon(fn)

    # -- after the attempt ------------------------------------------------------------------

    def overrun(self) -> float | None:
        """Seconds the attempt ended after its deadline, beyond the tolerance: the total
        one, or the idle one when no progress moved it (``armed``: the earlier of the two;
        a loop held by synchronous code passes the idle one as silently as the total), or
        the idle one that progress moved only after it had passed (:attr:`missed`)."""
        late = max(self.now() - self.armed, self.missed)
        return round(late, 3) if late > OVERRUN_TOLERANCE else None

    @property
    def idle_passed(self) -> bool:
        """True when the deadline :meth:`overrun` measures from is the idle one."""
        return self.armed < self.deadline or self.missed >= self.now() - self.armed

    def blocker(self) -> str:
        """What held an attempt past its deadline, as far as lyra can tell."""
        fired = self.fired
        if self.deadlines is None:
            return "unknown (this event loop keeps anyio's own deadlines)"
        if fired is None or fired - self.armed > OVERRUN_TOLERANCE:
            return (
                "the event loop: synchronous code in an async child or tool, or a plain "
                "answer= function, kept it from running (run blocking work through ctx.tool, "
                "or as a plain def child; give answer= as an async function)"
            )
        return (
            "cancellation was held after the deadline: a worker thread that cannot be "
            "abandoned (anyio.to_thread.run_sync without abandon_on_cancel) or shielded code"
        )


_known_token: ContextVar[tuple[int, Any] | None] = ContextVar("lyra_loop_token", default=None)


def _loop_token() -> Any:
    """The running event loop's token, for calls back from other threads.

    ``anyio.lowlevel.current_token()`` costs about a microsecond, so the token is
    remembered in the task's context (with the thread it belongs to: a worker
    thread that runs a loop of its own inherits the context, not the loop).
    """
    thread = threading.get_ident()
    known = _known_token.get()
    if known is not None and known[0] == thread:
        return known[1]
    token = anyio.lowlevel.current_token()
    _known_token.set((thread, token))
    return token
