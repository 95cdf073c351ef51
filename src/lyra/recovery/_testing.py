"""A testing switch, in the spirit of stamina's: no real sleeps in recovery loops."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import anyio

_sink: ContextVar[list[float] | None] = ContextVar("lyra_recorded_waits", default=None)


def set_testing(on: bool) -> None:
    """Turn testing mode on or off: while on, backoff waits are recorded, not slept."""
    _sink.set([] if on else None)


def is_testing() -> bool:
    """True while testing mode is on."""
    return _sink.get() is not None


@contextmanager
def record_waits() -> Iterator[list[float]]:
    """Testing mode for the ``with`` block; yields the list of the waits skipped.

    The list stays readable after the block; blocks nest, each with its own list.
    """
    recorded: list[float] = []
    token = _sink.set(recorded)
    try:
        yield recorded
    finally:
        _sink.reset(token)


async def sleep(seconds: float) -> None:
    """Sleep for real, or only record the wait while testing."""
    recorded = _sink.get()
    if recorded is None:
        await anyio.sleep(seconds)
    else:
        recorded.append(seconds)
