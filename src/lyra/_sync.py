"""Blocking forms of async API functions."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")


def run_blocking(async_name: str, fn: Callable[[], Awaitable[T]]) -> T:
    """Run an async API function to completion from synchronous code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(fn)
    raise RuntimeError(
        f"this blocking call cannot run inside an event loop; use 'await {async_name}(...)'"
    )
