"""Events of a child that ran in another process travel back with its result.

A worker (:func:`lyra.durable._worker.run_worker`) turns transport on: while a
child runs there, every event it emits is also kept
(:func:`lyra.events.capturing`) and returned with the child's result, and the
supervisor writes them into the run's own event log as they were, tagged with
the worker that ran them (:func:`lyra.events.replay`). In an embedded run the
children log in the supervisor's process, so nothing is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from lyra import events

_transport = False


def transport(on: bool) -> None:
    """Keep the events of the children this process runs, to send them back."""
    global _transport
    _transport = on


@contextmanager
def capturing() -> Iterator[list[dict[str, Any]]]:
    """The events emitted in this context, when this process sends them back."""
    if not _transport:
        yield []
        return
    with events.capturing() as kept:
        yield kept


def replay_events(records: Iterable[Mapping[str, Any]], *, executor_id: str | None) -> None:
    """Write a remote child's events here, as they were, plus the worker that ran them."""
    events.replay(records, worker=executor_id)
