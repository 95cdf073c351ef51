"""Events for the command line: where each command sends lyra's events."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lyra import events


@contextmanager
def events_to(path: Path | str | None, *, verbose: bool = False) -> Iterator[list[str]]:
    """Events appended to the file at ``path`` (and to stderr when ``verbose``) for
    the ``with`` block; afterwards the file is closed and events go nowhere. The
    list yielded gets, at the end, what could not be written."""
    targets: list[Any] = [path] if path else []
    if verbose:
        targets.append(sys.stderr)
    problems: list[str] = []
    try:
        events.configure(*targets)
    except OSError as exc:  # cannot even open it: the run goes on without events
        problems.append(f"could not write events to {path}: {exc.strerror or exc}")
        events.configure(*targets[1:])
    try:
        yield problems
    finally:
        problems.extend(events.problems())
        events.configure()


def say_unwritten(command: str, problems: list[str]) -> None:
    """Each problem writing events, one line on stderr (``lyra delegate: could not …``)."""
    for problem in problems:
        print(f"{command}: {problem}", file=sys.stderr)


@contextmanager
def serving_events(
    command: str, path: Path | str | None, *, verbose: bool = False
) -> Iterator[None]:
    """:func:`events_to` for a server, which runs until stopped: a file that cannot be
    opened is said on stderr at once, what could not be written later as it stops."""
    shown, unwritten = 0, []
    try:
        with events_to(path, verbose=verbose) as unwritten:
            say_unwritten(command, unwritten)
            shown = len(unwritten)
            yield
    finally:
        say_unwritten(command, unwritten[shown:])
