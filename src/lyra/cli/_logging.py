"""Event logging for the command line: the only place lyra configures structlog."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TextIO

import structlog


class _Fanout:
    """A structlog logger that writes each rendered line to several streams."""

    def __init__(self, streams: Sequence[TextIO]) -> None:
        self._streams = streams

    def msg(self, message: str) -> None:
        for stream in self._streams:
            stream.write(message + "\n")
            stream.flush()

    info = debug = warning = error = critical = exception = msg


def configure(*, files: Sequence[TextIO] = (), verbose: bool = False) -> None:
    """Send events as JSON lines to ``files``, and to stderr when ``verbose``."""
    streams = [*files, sys.stderr] if verbose else list(files)
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
        structlog.processors.dict_tracebacks,
        structlog.processors.JSONRenderer(sort_keys=False),
    ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.INFO if streams else logging.CRITICAL
        ),
        logger_factory=lambda *_: _Fanout(streams),
        cache_logger_on_first_use=False,
    )


@contextmanager
def events_to(path: Path | str | None, *, verbose: bool = False) -> Iterator[None]:
    """Events appended to the file at ``path`` (and stderr when ``verbose``) for the
    ``with`` block; afterwards the file is closed and events go nowhere."""
    with ExitStack() as stack:
        files = [stack.enter_context(open(path, "a", encoding="utf-8"))] if path else []
        stack.callback(configure)  # the file closes: stop writing to it
        configure(files=files, verbose=verbose)
        yield
