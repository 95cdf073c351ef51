"""Blocking forms of async API functions."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import anyio

T = TypeVar("T")
P = ParamSpec("P")


def run_blocking(async_name: str, fn: Callable[[], Awaitable[T]]) -> T:
    """Run an async API function to completion from synchronous code."""
    if _loop_running():
        raise RuntimeError(
            f"this blocking call cannot run inside an event loop; use 'await {async_name}(...)'"
        )
    return anyio.run(fn)  # (not in a handler: what fn raises carries no context of ours)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def blocking(async_fn: Callable[P, Awaitable[T]], name: str, doc: str) -> Callable[P, T]:
    """The blocking form of an async API function, with the same parameters."""

    signature = inspect.signature(async_fn)

    @functools.wraps(async_fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:  # arguments it does not take are refused here, in its name, not inside a loop
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{name}(): {exc}") from None
        return run_blocking(async_fn.__name__, functools.partial(async_fn, *args, **kwargs))

    call.__name__ = call.__qualname__ = name
    call.__doc__ = doc
    return call
