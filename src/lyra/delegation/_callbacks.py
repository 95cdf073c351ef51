"""Calling code that may be async or may block (a sync child, a tool, ``verify=``)
without holding the event loop or a deadline: the one place a plain function is sent
to a worker thread."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import anyio.to_thread

from lyra.errors import ForeignCancellation


async def in_worker_thread(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a worker thread, abandoned on cancellation (no thread
    can be killed: blocking code finishes in the background, and cannot hold the
    deadline); an awaitable it returns is awaited here."""
    call = functools.partial(fn, **kwargs) if kwargs else fn
    result = await anyio.to_thread.run_sync(_closing, call, *args, abandon_on_cancel=True)
    return await result if inspect.isawaitable(result) else result


def _closing(call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)``, a ``GeneratorExit`` it raises brought back as the failure it is:
    thrown out of the future the loop awaits, it would close every coroutine awaiting
    it instead (the delegation, and a ``Supervisor.run``'s whole pool)."""
    try:
        return call(*args)
    except GeneratorExit as exc:
        raise ForeignCancellation("raised in a worker thread") from exc


async def call_off_the_loop(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """What ``fn(*args, **kwargs)`` gives: awaited when ``fn`` is async (a function, or
    an object with an async ``__call__``); a plain function runs
    :func:`in_worker_thread`, so a slow one holds neither the event loop nor the
    deadline."""
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object's async __call__
    ):
        return await fn(*args, **kwargs)
    return await in_worker_thread(fn, *args, **kwargs)
