"""What the attempts running right now are doing, for a live display.

Off by default (an attempt then pays one check). Inside :func:`observing`,
every attempt registers while it runs, and :func:`running` describes each:
its subject and attempt, how long it has run, how long since its last sign of
progress, the tool it is in or the last step it finished, and what it has
been charged. Read it from the event loop's thread (a display that refreshes
from an anyio task does).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from lyra.delegation._budget import Usage


class Watched(Protocol):
    """What a display reads of an attempt (a ``ChildContext``)."""

    session_id: str
    subject: str | None
    attempt: int
    started: float
    current_tool: str | None
    completed_steps: list[str]

    @property
    def last_progress(self) -> float: ...

    @property
    def usage(self) -> Usage: ...

    @property
    def parent_session_id(self) -> str | None: ...


_attempts: dict[int, Watched] | None = None
_pools: list[Pool] = []


class Pool(Protocol):
    """A supervisor's pool as a display shows it (its throttle)."""

    ceiling: int
    running: int

    @property
    def allowed(self) -> int: ...


@dataclass(frozen=True, slots=True)
class RunningAttempt:
    """One attempt as a display shows it."""

    session_id: str
    subject: str | None
    attempt: int
    elapsed: float
    """Seconds since the attempt began."""
    idle: float
    """Seconds since its last sign of progress (a step, a tool, a charge, a heartbeat)."""
    doing: str
    """The tool it is running, else the last step it finished, else "starting"."""
    tokens: int
    parent_session_id: str | None


@contextmanager
def observing() -> Iterator[None]:
    """Register every attempt that runs in this block (for :func:`running`)."""
    global _attempts
    previous, _attempts = _attempts, {}
    try:
        yield
    finally:
        _attempts = previous


@contextmanager
def observed_pool(throttle: Pool) -> Iterator[None]:
    """Show ``throttle`` (a pool's concurrency) to a display while the block runs."""
    _pools.append(throttle)
    try:
        yield
    finally:
        _pools.remove(throttle)


def concurrency() -> tuple[int, int] | None:
    """Children allowed at once now and the pool's own limit, for the pool a display
    shows (``None``: none runs, or its limit was never lowered)."""
    for shown in _pools:
        if shown.allowed < shown.ceiling:
            return shown.allowed, shown.ceiling
    return None


def watch(ctx: Watched) -> bool:
    """Register an attempt if anyone is observing; True when it was registered."""
    if _attempts is None:
        return False
    _attempts[id(ctx)] = ctx
    return True


def unwatch(ctx: Watched) -> None:
    if _attempts is not None:
        _attempts.pop(id(ctx), None)


def running() -> list[RunningAttempt]:
    """The attempts running now, oldest first (empty when nobody observes)."""
    if _attempts is None:
        return []
    now = time.monotonic()
    views = [
        RunningAttempt(
            session_id=ctx.session_id,
            subject=ctx.subject,
            attempt=ctx.attempt,
            elapsed=now - ctx.started,
            idle=now - ctx.last_progress,
            doing=_doing(ctx),
            tokens=ctx.usage.tokens,
            parent_session_id=ctx.parent_session_id,
        )
        for ctx in list(_attempts.values())
    ]
    return sorted(views, key=lambda view: -view.elapsed)


def _doing(ctx: Watched) -> str:
    if ctx.current_tool is not None:
        return f"running {ctx.current_tool}"
    if ctx.completed_steps:
        return ctx.completed_steps[-1]
    return "starting"
