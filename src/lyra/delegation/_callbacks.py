"""The caller's ``verify=``, called without holding the loop or the deadline."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import anyio.to_thread


async def call_off_the_loop(callback: Callable[[str], Any], text: str) -> Any:
    """What the caller's ``callback`` gives for ``text``: awaited when it is async; a
    plain function runs in a worker thread (abandoned on cancellation, as ``ctx.tool``
    abandons one), so a slow one holds neither the event loop nor the deadline."""
    if inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(
        getattr(callback, "__call__", None)  # noqa: B004 - an object's async __call__
    ):
        return await callback(text)
    reply = await anyio.to_thread.run_sync(callback, text, abandon_on_cancel=True)
    return await reply if inspect.isawaitable(reply) else reply
