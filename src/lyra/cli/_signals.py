"""SIGTERM inside a running command: a cancellation, not an exception thrown anywhere.

The command line turns SIGTERM into KeyboardInterrupt (``_main``). Raised from a
signal handler, that exception lands in whatever bytecode runs at the moment --
an ID half read from a file, a task half started -- and asyncio's shutdown then
finds tasks torn apart (tracebacks, coroutines never awaited). While an async
command runs, :func:`until_sigterm` instead cancels it through its cancel scopes,
as asyncio does for Ctrl+C, so every ``finally`` and ``except BaseException``
runs where it stands; the command then ends in KeyboardInterrupt as before.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import TypeVar

import anyio

__all__ = ["interrupt", "until_sigterm"]

T = TypeVar("T")


def interrupt(signum: int, frame: FrameType | None) -> None:
    """A signal handler: the signal stops the command the way Ctrl+C does."""
    raise KeyboardInterrupt


async def until_sigterm(work: Callable[[], Awaitable[T]]) -> T:
    """``await work()``; a SIGTERM meanwhile cancels it, then raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        return await work()  # signals reach the main thread only
    previous = signal.getsignal(signal.SIGTERM)
    stopped = False
    try:
        with anyio.open_signal_receiver(signal.SIGTERM) as received:
            async with anyio.create_task_group() as group:

                async def watch() -> None:
                    nonlocal stopped
                    async for _ in received:
                        stopped = True
                        group.cancel_scope.cancel()

                group.start_soon(watch)
                result = await work()
                group.cancel_scope.cancel()
    except BaseExceptionGroup as raised:  # the work's own exception, as it raised it
        if len(raised.exceptions) == 1:
            raise raised.exceptions[0] from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)  # asyncio leaves SIG_DFL behind
    if stopped:
        raise KeyboardInterrupt
    return result
