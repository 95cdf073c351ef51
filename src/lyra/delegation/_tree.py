"""What the delegations of one tree share besides their budget: each model
provider's rate-limit cooldown, and who listens for the signals (DESIGN §5).

When one child hears "429, retry after 20 s", its siblings on the same provider
would each find out by getting a 429 of their own, back off alone and retry on
the same beat. Instead the first one starts a cooldown for that provider here;
every delegation of the tree (every child of a :class:`~lyra.Supervisor`) waits
it out before its next model request, so no request is sent into a known
cooldown. A supervisor listens (:meth:`Tree.listen`) to lower its concurrency on
the signal and raise it again as requests succeed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import anyio

from lyra import events


def tool_provider(name: str) -> str:
    """The tree's name for the service behind the tool ``name``, whose rate limit a
    storm's siblings meet too (its calls are not held: lyra cannot tell which of a
    tool's calls go to the service that refused one)."""
    return f"tool:{name}"


_SAME_END = 0.01
"""Seconds within which two cooldowns of a provider end at the same time (the one the
tree started, and a sibling's refusal that repeats what was left of it)."""

OUTAGE = 8
"""Refusals of a provider, with no request of the tree answered in between and over at
least :data:`OUTAGE_SECONDS`, that make an outage, not a storm: a storm's refused
tasks are sent again without counting as retries; in an outage the recovery policy's
retries, backoff and fallbacks hold again (a provider refusing everything took 9 tries
a task, one at a time). Each cooldown started counts once, and so do refusals without
a ``retry-after``, once a second at most (a burst of them is one)."""
OUTAGE_SECONDS = 30.0
"""The least time refusals make an outage over (a shorter one clears as a storm)."""
SAME_STORM = 1.0
"""Seconds within which a provider's refusals are one burst's when no cooldown they
asked for is longer (requests in flight together answer within about this; a 429
with no ``retry-after`` starts no cooldown at all): counted once towards an outage,
and, for a supervisor's pool, halving its concurrency once."""

MAX_COOLDOWN = 600.0
"""The longest cooldown a ``retry-after`` can start (seconds): a provider asking
for more is refused by the recovery policy's ``max_wait`` anyway."""


class Listener(Protocol):
    """Who hears a tree's rate-limit signals (a supervisor's concurrency control)."""

    def rate_limited(self, provider: str, seconds: float) -> None:
        """A provider asked the tree to wait ``seconds``."""

    def request_succeeded(self, provider: str) -> None:
        """A model request to ``provider`` was answered."""

    def crowded(self) -> bool:
        """True while siblings run beside the child that met a rate limit."""


def _alone() -> bool:
    return False  # (a listener that cannot tell: no siblings known)


class Tree:
    """The shared state of one delegation tree (see the module docstring)."""

    __slots__ = ("_listeners", "_refusing", "_started_by", "_until")

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._started_by: dict[str, str] = {}
        # refusals counted since a request was last answered, the first's and last's time
        self._refusing: dict[str, tuple[int, float, float]] = {}
        self._listeners: tuple[Listener, ...] = ()  # (replaced, not changed: rarely any)

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Tell ``listener`` of every signal from now on; returns how to stop."""
        self._listeners = (*self._listeners, listener)

        def stop() -> None:
            listeners = list(self._listeners)
            listeners.remove(listener)
            self._listeners = tuple(listeners)

        return stop

    def cooldown_left(self, provider: str) -> float:
        """Seconds before requests to ``provider`` may be sent again (0: now)."""
        until = self._until.get(provider)
        if until is None:
            return 0.0
        left = until - time.monotonic()
        if left <= 0:
            del self._until[provider]
            return 0.0
        return left

    def storm(self, provider: str, task: str) -> bool:
        """True when ``task``'s rate limit is part of a storm: siblings run beside it (a
        supervisor's pool says so), or another task met the limit first. A lone task's
        rate limit is its own: recovery's backoff and ``max_retries`` hold for it, and so
        they do in an outage (:data:`OUTAGE`)."""
        if self._out(provider):
            return False
        if any(getattr(listener, "crowded", _alone)() for listener in self._listeners):
            return True
        return self.cooldown_left(provider) > 0 and self._started_by.get(provider) != task

    def rate_limited(self, provider: str, seconds: float, *, task: str, **fields: object) -> None:
        """``provider`` refused ``task`` and asked for ``seconds`` of quiet (0: it did not
        say): every request of the tree to it waits until then (a later, longer request
        extends it; one that ends the same cooldown, a sibling's it refused, does not)."""
        seconds = min(max(0.0, seconds), MAX_COOLDOWN)
        now = time.monotonic()
        until = now + seconds
        starts = seconds > 0 and self.cooldown_left(provider) <= 0
        if starts or (seconds > 0 and until > self._until[provider] + _SAME_END):
            if starts:
                self._started_by[provider] = task
            self._until[provider] = until
            events.warning(events.RATE_LIMIT_COOLDOWN, provider=provider, seconds=seconds, **fields)
        self._count(provider, now, starts)
        for listener in self._listeners:
            listener.rate_limited(provider, seconds)

    def _count(self, provider: str, now: float, cooldown: bool) -> None:
        """Count a refusal towards an outage (see :data:`OUTAGE`)."""
        count, first, last = self._refusing.get(provider, (0, now, -SAME_STORM))
        if cooldown or now - last >= SAME_STORM:
            self._refusing[provider] = (count + 1, first, now)

    def _out(self, provider: str) -> bool:
        count, first, last = self._refusing.get(provider, (0, 0.0, 0.0))
        return count >= OUTAGE and last - first >= OUTAGE_SECONDS

    def succeeded(self, provider: str) -> None:
        """A request to ``provider`` was answered (for the listeners): no outage."""
        self._refusing.pop(provider, None)
        for listener in self._listeners:
            listener.request_succeeded(provider)

    async def cooled(self, provider: str) -> float:
        """Wait out ``provider``'s cooldown, if one runs; the seconds waited."""
        waited = 0.0
        while (left := self.cooldown_left(provider)) > 0:
            await anyio.sleep(left)
            waited += left
        return waited
