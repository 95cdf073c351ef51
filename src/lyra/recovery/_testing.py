"""A testing switch, in the spirit of stamina's: no real sleeps in recovery loops."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

_state = {"testing": False}
waits: list[float] = []
"""Every wait the loop would have slept while testing is on, in order."""


def set_testing(on: bool) -> None:
    """Turn testing mode on or off. While on, backoff waits are recorded, not slept."""
    _state["testing"] = on
    waits.clear()


def is_testing() -> bool:
    """True while testing mode is on."""
    return _state["testing"]


@contextmanager
def record_waits() -> Iterator[list[float]]:
    """Testing mode for the ``with`` block; yields the list of recorded waits."""
    previous = _state["testing"]
    set_testing(True)
    try:
        yield waits
    finally:
        set_testing(previous)


async def sleep(seconds: float) -> None:
    """Sleep for real, or only record the wait while testing."""
    if _state["testing"]:
        waits.append(seconds)
        return
    await anyio.sleep(seconds)
