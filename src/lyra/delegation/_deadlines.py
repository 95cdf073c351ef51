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
    """Its cancel scope."""
    _fired: float | None
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
    """The deadlines of the attempts running on one asyncio event loop."""

    __slots__ = ("_heap", "_live", "_timer", "_when", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._heap: list[tuple[float, int, Watch]] = []
        self._live = 0
        self._timer: asyncio.TimerHandle | None = None
        self._when = math.inf

    def watch(self, ctx: Watched) -> Watch:
        """End ``ctx``'s attempt (cancel its scope) once its ``_armed`` time passes,
        until :meth:`unwatch`."""
        when, watch = ctx._armed, Watch(ctx)
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
            if ctx._armed > now:  # progress moved the deadline: wait for the new one
                heapq.heappush(heap, (ctx._armed, next(_serial), watch))
            else:
                ctx._fired = now
                ctx._scope.cancel()
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
