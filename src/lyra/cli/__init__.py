"""The ``lyra`` command line."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from contextlib import suppress
from typing import NoReturn

__all__ = ["console", "main"]

EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Everything, even the imports, runs inside this function, so that Ctrl+C at any
    moment -- start-up included -- ends the command with a line, not a traceback.
    """
    try:
        from lyra.cli._main import run

        return run(argv)
    except KeyboardInterrupt:
        print("lyra: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def console() -> NoReturn:
    """The ``lyra`` command (and ``python -m lyra``): :func:`main`, then the process
    ends as soon as its work has ended.

    A tool lyra abandoned at its deadline may still be blocked in a worker
    thread; Python would wait for it before exiting (20 s for a 20 s
    ``time.sleep``). Once every file and stream is flushed, the command exits
    without waiting: the abandoned thread ends with the process.
    """
    status = main()
    _flush()
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not _MAIN):
        os._exit(status)
    sys.exit(status)


_MAIN = threading.main_thread()


def _flush() -> None:
    """Write out lyra's events and both standard streams (before ``os._exit``)."""
    from lyra import events

    events.flush()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a closed or broken stream: nothing more to say
            stream.flush()
