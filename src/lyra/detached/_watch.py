"""The attempts of watched delegations while they run.

A delegation that someone outside wants to follow -- its steps for a progress
notification, its spend and time left for a status, a way to stop it -- runs
its child wrapped in :class:`Observed`, with its delegation id in the task's
context under :data:`KEY`. The wrapper makes the attempt's
:class:`~lyra.ChildContext` findable by that id while it runs, in this
process, whichever path ran it: in-process, or inside a durable workflow
(where the child travels by name: :func:`observed`).
"""

from __future__ import annotations

from typing import Any

import anyio

from lyra.delegation import Child, ChildContext, ChildRef
from lyra.delegation._internal import as_callable
from lyra.errors import LyraError

KEY = "lyra_delegation"
"""The key of ``ctx.context`` that names the delegation an attempt belongs to."""


class Stopped(LyraError):
    """The attempt was stopped from outside (its delegation was cancelled)."""


class _Running:
    __slots__ = ("ctx", "ended", "scope")

    def __init__(self, ctx: ChildContext) -> None:
        self.ctx = ctx
        self.scope = anyio.CancelScope()
        self.ended = False


_running: dict[str, _Running] = {}
_stopped: set[str] = set()
"""Delegations stopped before their attempt began here: it ends as it begins."""


class Observed:
    """``child``, with each attempt findable (:func:`attempt`) and stoppable
    (:func:`stop`) by the delegation id in its context, from its start until
    whoever watches it lets it go (:func:`release`): the last attempt's steps
    stay readable after it ends."""

    def __init__(self, child: Child) -> None:
        self.child = child
        self._call = as_callable(child)  # a clear error now for something that is no child

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        """Run the child, visible under its delegation id."""
        key = ctx.context.get(KEY)
        if not isinstance(key, str):
            return await self._call(prompt, ctx)
        running = _running[key] = _Running(ctx)
        if key in _stopped:  # stopped before it began
            _stopped.discard(key)
            running.scope.cancel()
        try:
            with running.scope:
                return await self._call(prompt, ctx)
        finally:
            running.ended = True
        raise Stopped("the delegation was cancelled by its client")


def observed(target: str, options: dict[str, Any] | None = None) -> Observed:
    """The child ``target`` names, observed: a factory for a :class:`~lyra.ChildRef`
    (``ChildRef("lyra.detached:observed", {"target": …})``), so that a durable
    workflow builds the observed child by name."""
    return Observed(ChildRef(target=target, options=options).resolve())


def attempt(delegation_id: str) -> ChildContext | None:
    """The context of the delegation's attempt running in this process, if one is."""
    running = _running.get(delegation_id)
    return running.ctx if running is not None else None


def time_left(delegation_id: str) -> float | None:
    """Seconds left to the deadline of the delegation's attempt in this process: 0 once
    it ended (a durable one's question then waits for the next attempt); ``None``
    when none ran here."""
    running = _running.get(delegation_id)
    if running is None:
        return None
    return 0.0 if running.ended else round(running.ctx.remaining(), 3)


def release(delegation_id: str) -> ChildContext | None:
    """Stop watching the delegation; the context of its last attempt, if one ran here."""
    running = _running.pop(delegation_id, None)
    return running.ctx if running is not None else None


def forget(delegation_id: str) -> None:
    """Drop all that is kept about the delegation (it is forgotten)."""
    _running.pop(delegation_id, None)
    _stopped.discard(delegation_id)


def stop(delegation_id: str) -> bool:
    """Stop the delegation's attempt running in this process; False when none runs.

    Needed where the attempt does not run in the caller's own task (a durable
    workflow): the child gets a cancellation, and the attempt ends as a failure
    (:class:`Stopped`) that its cancelled delegation never reports. An attempt
    that has not begun yet ends as it begins."""
    running = _running.get(delegation_id)
    if running is None:
        _stopped.add(delegation_id)
        return False
    running.scope.cancel()
    return True
