"""SIGINT and SIGTERM inside a running command: a cancellation, not an exception
thrown anywhere.

Raised from a signal handler, KeyboardInterrupt lands in whatever bytecode runs at
the moment -- an ID half read from a file, a task half started -- and asyncio's
shutdown then finds tasks torn apart (tracebacks, coroutines never awaited). While
an async command runs, :func:`until_interrupted` instead cancels it through its
cancel scopes, so every ``finally`` and ``except BaseException`` runs where it
stands (an interrupted ``analyze`` saves what finished); the command then ends in
KeyboardInterrupt as before. A second signal while that cleanup runs is said and
waited out (it saves what the run did: every protein named once); a third ends
the process at once, the events gathered so far written. Outside async commands
the signals stay asyncio's and ``_main``'s (which turns SIGTERM into
KeyboardInterrupt).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import NoReturn, TypeVar

import anyio

from lyra import events
from lyra.cli._options import EXIT_INTERRUPTED

__all__ = ["exit_interrupted", "interrupt", "until_interrupted"]

T = TypeVar("T")


def interrupt(signum: int, frame: FrameType | None) -> None:
    """A signal handler: the signal stops the command the way Ctrl+C does."""
    raise KeyboardInterrupt


async def until_interrupted(work: Callable[[], Awaitable[T]]) -> T:
    """``await work()``; a SIGINT or SIGTERM meanwhile cancels it, then raises
    KeyboardInterrupt; a third one while it stops ends the process at once."""
    if threading.current_thread() is not threading.main_thread():
        return await work()  # signals reach the main thread only
    previous = {number: signal.getsignal(number) for number in _SIGNALS}
    stopped = 0  # signals received
    try:
        with anyio.open_signal_receiver(*_SIGNALS) as received:
            async with anyio.create_task_group() as group:
                working = anyio.CancelScope()

                async def watch() -> None:
                    nonlocal stopped
                    async for _ in received:
                        stopped += 1
                        if stopped == 1:
                            working.cancel()
                        elif stopped == 2:
                            print(_SAVING, file=sys.stderr, flush=True)
                        else:  # worker threads and cleanups are left behind
                            exit_interrupted("lyra: interrupted again: stopping at once")

                group.start_soon(watch)
                with working:
                    result = await work()
                group.cancel_scope.cancel()
    except BaseExceptionGroup as raised:  # the work's own exception, as it raised it
        if len(raised.exceptions) == 1:
            raise raised.exceptions[0] from None
        raise
    finally:
        for number, handler in previous.items():
            if handler is not None:  # (None: a handler set from C, which Python cannot set again)
                signal.signal(number, handler)  # asyncio leaves SIG_DFL behind
    if stopped:
        raise KeyboardInterrupt
    return result


_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_SAVING = (
    "lyra: stopping: saving what finished and naming the rest (Ctrl+C once more stops at "
    "once, without that)"
)


def exit_interrupted(said: str) -> NoReturn:
    """End the process now with exit status 130, ``said`` on stderr and the events
    gathered so far written (``os._exit`` skips atexit; worker threads abandoned in
    blocking tools would hold a normal exit)."""
    print(said, file=sys.stderr)
    events.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)
