"""How many children a supervisor runs at once while a provider pushes back.

A :class:`Throttle` listens to its delegation tree (:class:`lyra.delegation._tree.Tree`):
a rate limit halves the number of children allowed to start (never below one),
and each answered model request gives a little of it back, one more child per
``limit`` answered requests (additive increase, multiplicative decrease, as TCP
does). Children already running go on; the pool starts no new one while as
many run as the limit allows.

As TCP halves once per window, a provider's storm halves the limit once: the 429s
of requests that were in flight together when the first came, and of any sent
while the cooldown it asked for runs (a tool's calls are not held), are the same
storm's, not eight reasons to halve eight times (a burst of eight took a pool of
eight to one). Its window is the cooldown, at least :data:`SAME_STORM` seconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel

from lyra import events
from lyra.delegation._internal import SAME_STORM


class Throttle:
    """The number of children a pool may run at once (see the module docstring)."""

    __slots__ = (
        "_first",
        "_freed",
        "_storms",
        "ceiling",
        "limit",
        "returning",
        "running",
        "waiting",
    )

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        """The pool's own ``max_concurrency``: the limit never rises above it."""
        self.limit = float(ceiling)
        """Children allowed at once now (fractional while it climbs back)."""
        self.running = 0
        self.waiting = 0
        """Children held back until a place is free (siblings all the same)."""
        self.returning = 0
        """Tasks waiting between attempts: each keeps its place from new tasks."""
        self._freed = anyio.Event()
        self._first = ceiling  # the pool's first children, each to let its siblings in
        self._storms: dict[str, float] = {}  # provider: when its storm's window ends

    @property
    def allowed(self) -> int:
        """Children that may run at once now."""
        return max(1, math.floor(self.limit))

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the allowed places while a child runs (wait for one first)."""
        await self._free_place()
        self.running += 1
        try:
            if self._first:  # siblings take their places before the first children run,
                self._first -= 1  # so a rate limit met at once is seen as a storm's
                await anyio.lowlevel.checkpoint()
            yield
        finally:
            self._give_back()

    @asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """While a task held in :meth:`slot` waits between attempts (a backoff, a storm's
        cooldown), it runs nothing: its next attempt waits for a place under the limit
        as it stands then, so retries too run no more at once than the limit allows.
        Its place is kept from new tasks meanwhile (work under way finishes first)."""
        self._give_back()
        self.returning += 1
        try:
            yield
        finally:
            try:
                await self._free_place(returning=True)
            finally:
                self.returning -= 1
                self.running += 1

    async def _free_place(self, *, returning: bool = False) -> None:
        """Wait until a place is free (for a new task: one no waiting task keeps)."""
        if self._full(returning):
            self.waiting += 1
            try:
                while self._full(returning):
                    await self._freed.wait()
            finally:
                self.waiting -= 1

    def _full(self, returning: bool) -> bool:
        return self.running + (0 if returning else self.returning) >= self.allowed

    def _give_back(self) -> None:
        self.running -= 1
        self._wake()

    def crowded(self) -> bool:
        """True while more than one child runs, waits to, or waits between its attempts:
        a rate limit one meets is a storm's (a child alone in the pool because the storm
        halved it, its siblings backing off, is no lone one)."""
        return self.running + self.waiting + self.returning > 1

    def rate_limited(self, provider: str, seconds: float) -> None:
        """A provider pushed back: halve the children allowed to start, unless its storm
        already did (see the module docstring)."""
        now = time.monotonic()
        window = self._storms.get(provider, 0.0)
        if now < window:  # the same storm: a longer retry-after in it extends it
            self._storms[provider] = max(window, now + seconds)
            return
        self._storms[provider] = now + max(seconds, SAME_STORM)
        before = self.allowed
        self.limit = max(1.0, self.limit / 2)
        self._changed(before, f"rate limited by {provider}")

    def request_succeeded(self, provider: str) -> None:
        """A request was answered: one more child allowed per ``limit`` answers."""
        if self.limit >= self.ceiling:
            return
        before = self.allowed
        self.limit = min(float(self.ceiling), self.limit + 1 / self.limit)
        if self.allowed != before:
            self._changed(before, "requests succeed again")
            self._wake()

    def _changed(self, before: int, reason: str) -> None:
        if self.allowed != before:
            events.info(
                events.CONCURRENCY_CHANGED,
                concurrency=self.allowed,
                previous=before,
                ceiling=self.ceiling,
                reason=reason,
            )

    def _wake(self) -> None:
        freed, self._freed = self._freed, anyio.Event()
        freed.set()
