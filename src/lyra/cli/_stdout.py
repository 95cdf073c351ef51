"""Where output goes: the one place that decides it for every command.

stdout carries data only (a report, JSON, briefs, a protocol). While a command
runs, whatever else writes to stdout -- a child's ``print()``, a library, a
tool's subprocess that inherited the descriptor -- goes to stderr instead, so
``lyra delegate --json | jq`` always reads JSON. lyra's own data is written
with :func:`write` to the stream that was stdout when the command began.

``lyra mcp`` is the exception: the MCP SDK claims stdout for its protocol and
diverts descriptor 1 itself (it reads ``sys.stdout`` as it starts, so nothing
may be diverted before), and :func:`lyra.mcp.serve` points Python's
``sys.stdout`` at stderr while it serves.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import (
    AbstractContextManager,
    contextmanager,
    nullcontext,
    redirect_stdout,
    suppress,
)
from typing import TextIO

_data: TextIO | None = None


def write(text: str, end: str = "\n") -> None:
    """Write data to stdout (the real one, even while children's output is diverted)
    and flush it, so that a failure to write surfaces here."""
    out = _data if _data is not None else sys.stdout
    out.write(text + end)
    out.flush()


@contextmanager
def data_stdout() -> Iterator[None]:
    """For the command's duration, stdout is for :func:`write` alone; everything
    else written to it (Python's ``sys.stdout`` and descriptor 1) reaches stderr."""
    global _data
    original = sys.stdout
    original.flush()
    private = _divert_descriptor(original)
    data = original if private is None else _reopen(private, original)
    _data = data
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        _data = None
        if private is not None:
            with suppress(OSError):  # a full disk: what could not be written is lost
                data.flush()
            os.dup2(private, 1)
            with suppress(OSError):
                data.close()  # and with it the private descriptor


def for_command(command: str) -> AbstractContextManager[None]:
    """Where stdout goes while ``command`` runs (see the module docstring)."""
    return nullcontext() if command == "mcp" else data_stdout()


def _divert_descriptor(stream: TextIO) -> int | None:
    """Point descriptor 1 at stderr and return a private duplicate of what it was;
    ``None`` when ``stream`` is not descriptor 1 (a test's capture) or the
    descriptors cannot be moved."""
    try:
        if stream.fileno() != 1:
            return None
        private = os.dup(1)
    except (AttributeError, OSError, ValueError):
        return None
    try:
        os.dup2(2, 1)
    except OSError:
        os.close(private)
        return None
    return private


def _reopen(fd: int, like: TextIO) -> TextIO:
    """A text stream on ``fd`` with the encoding and error handling of ``like``."""
    return open(
        fd,
        "w",
        encoding=like.encoding,
        errors=like.errors,
        closefd=True,
    )
