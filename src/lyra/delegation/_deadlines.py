"""One timer for the deadlines of every attempt on an event loop.

anyio's cancel scope arms an event-loop timer for its deadline. asyncio keeps
its timers in one heap whose entries compare in Python, so with thousands of
attempts in flight a timer per attempt (armed, cancelled, later popped) costs
more than the rest of the delegation. The attempts on an asyncio loop instead
share one heap of ``(deadline, serial, attempt)`` tuples, compared in C, and
one loop timer for the earliest. Progress that moves an idle deadline forward
only changes the attempt's ``_armed`` time: when the old deadline comes, the
watcher sees the new one and waits for it. Other backends (trio) keep anyio's
own deadline on the scope.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import threading
from itertools import count
from typing import Any, Protocol


class Watched(Protocol):
    """An attempt as the watcher sees it (a ChildContext)."""

    _armed: float
    """When the attempt ends, unless progress moves it."""
    _scope: Any
    """Its cancel scope; ``None`` once it ended."""


_PURGE_AT = 64
"""Finished attempts left in the heap before it may be rebuilt without them."""
_serial = count()
_local = threading.local()


class Deadlines:
    """The deadlines of the attempts running on one asyncio event loop."""

    __slots__ = ("_heap", "_live", "_timer", "_when", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._heap: list[tuple[float, int, Watched]] = []
        self._live = 0
        self._timer: asyncio.TimerHandle | None = None
        self._when = math.inf

    def watch(self, ctx: Watched) -> None:
        """End ``ctx``'s attempt (cancel its scope) once its ``_armed`` time passes."""
        when = ctx._armed
        heapq.heappush(self._heap, (when, next(_serial), ctx))
        self._live += 1
        if when < self._when:
            self._arm(when)

    def unwatch(self) -> None:
        """An attempt ended (its scope is gone): forget it, a rebuild now and then."""
        self._live -= 1
        heap = self._heap
        if len(heap) > _PURGE_AT and len(heap) > 2 * self._live:
            heap[:] = [entry for entry in heap if entry[2]._scope is not None]
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
            _, _, ctx = heapq.heappop(heap)
            scope = ctx._scope
            if scope is None:
                continue  # the attempt ended before its deadline
            if ctx._armed > now:  # progress moved the deadline: wait for the new one
                heapq.heappush(heap, (ctx._armed, next(_serial), ctx))
            else:
                scope.cancel()
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
