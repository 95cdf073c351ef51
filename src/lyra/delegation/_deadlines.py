"""One timer for the deadlines of every attempt on an event loop.

anyio's cancel scope arms an event-loop timer for its deadline. asyncio keeps
its timers in one heap whose entries compare in Python, so with thousands of
attempts in flight a timer per attempt (armed, cancelled, later popped) costs
more than the rest of the delegation. The attempts on an asyncio loop instead
share one heap of ``(deadline, serial, attempt)`` tuples, compared in C, and
one loop timer for the earliest. Progress that moves an idle deadline forward
only changes the attempt's ``armed`` time: when the old deadline comes, the
watcher sees the new one and waits for it. Other backends (trio) keep anyio's
own deadline on the scope.

The same per-loop object remembers what anyio's API would otherwise look up on
every call: which backend runs (``anyio.CancelScope()``, ``anyio.current_time()``
and ``anyio.get_cancelled_exc_class()`` each ask sniffio, about half a
microsecond, several times a delegation). On an asyncio loop these are the
asyncio backend's cancel scope class and cancellation exception, found once
through anyio's public API, and the loop's own clock, which is what
``anyio.current_time()`` reads there: the scopes and their semantics are
anyio's, unchanged.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import threading
from collections.abc import Callable
from contextlib import suppress
from itertools import count
from typing import Any, Protocol

import anyio


class Watched(Protocol):
    """An attempt as the watcher sees it (its :class:`~._limiter.Limiter`)."""

    armed: float
    """When the attempt ends, unless progress moves it."""
    scope: Any
    """Its cancel scope."""
    fired: float | None
    """When the watcher ended it (loop time), for telling a blocked loop apart."""


_PURGE_AT = 64
"""Finished attempts left in the heap before it may be rebuilt without them."""
_serial = count()
_local = threading.local()


class Watch:
    """One attempt's place in the heap; let go of the attempt as soon as it ends."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: Watched) -> None:
        self.ctx: Watched | None = ctx


class Deadlines:
    """The deadlines of the attempts running on one asyncio event loop, and what
    anyio would look up for them on every call."""

    __slots__ = ("_cancelled", "_heap", "_live", "_scope", "_timer", "_when", "loop", "time")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.time: Callable[[], float] = loop.time
        """The loop's clock: ``anyio.current_time()`` on this loop."""
        self._heap: list[tuple[float, int, Watch]] = []
        self._live = 0
        self._timer: asyncio.TimerHandle | None = None
        self._when = math.inf
        self._scope: Callable[[], anyio.CancelScope] | None = None
        self._cancelled: type[BaseException] | None = None
        with suppress(RuntimeError):  # (outside a task: asked later, in one)
            # Now, before any deadline runs: the first ask imports anyio's backend,
            # which would take the first attempt's time (tens of ms on a cold disk).
            self._scope = type(anyio.CancelScope())

    def cancel_scope(self) -> anyio.CancelScope:
        """A new cancel scope, as ``anyio.CancelScope()`` makes one on this loop (in a
        task: the backend is asked once, the first time)."""
        if self._scope is None:
            self._scope = type(anyio.CancelScope())
        return self._scope()

    def cancelled(self) -> type[BaseException]:
        """``anyio.get_cancelled_exc_class()`` on this loop (in a task)."""
        if self._cancelled is None:
            self._cancelled = anyio.get_cancelled_exc_class()
        return self._cancelled

    def watch(self, ctx: Watched) -> Watch:
        """End ``ctx``'s attempt (cancel its scope) once its ``armed`` time passes,
        until :meth:`unwatch`."""
        when, watch = ctx.armed, Watch(ctx)
        heapq.heappush(self._heap, (when, next(_serial), watch))
        self._live += 1
        if when < self._when:
            self._arm(when)
        return watch

    def unwatch(self, watch: Watch) -> None:
        """The attempt ended: let it go now, and its place in the heap in time."""
        watch.ctx = None
        self._live -= 1
        heap = self._heap
        if len(heap) > _PURGE_AT and len(heap) > 2 * self._live:
            heap[:] = [entry for entry in heap if entry[2].ctx is not None]
            heapq.heapify(heap)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._when = when
        self._timer = self.loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer, self._when = None, math.inf
        heap, now = self._heap, self.loop.time()
        while heap and heap[0][0] <= now:
            _, _, watch = heapq.heappop(heap)
            ctx = watch.ctx
            if ctx is None:
                continue  # the attempt ended before its deadline
            if ctx.armed > now:  # progress moved the deadline: wait for the new one
                heapq.heappush(heap, (ctx.armed, next(_serial), watch))
            else:
                ctx.fired = now
                ctx.scope.cancel()
        if heap:
            self._arm(heap[0][0])


def deadlines() -> Deadlines | None:
    """The running asyncio loop's deadlines; ``None`` on another backend."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    known: Deadlines | None = getattr(_local, "deadlines", None)
    if known is None or known.loop is not loop:
        known = _local.deadlines = Deadlines(loop)
    return known
