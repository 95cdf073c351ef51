"""Events of a child that ran in another process travel back with its result.

A worker's command line adds :func:`capture_events` to its structlog
processors; while a child runs, every event it emits is also kept (as JSON
data) and returned with the child's result, and the supervisor writes them
into the run's own event log (:func:`replay_events`), tagged with the worker
that ran them. The local and embedded paths need none of this: their
children log in the supervisor's process.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import structlog

_CAPTURED: ContextVar[list[dict[str, Any]] | None] = ContextVar("lyra_captured", default=None)
_LEVELS = ("debug", "info", "warning", "error", "critical")


def capture_events(logger: Any, method: str, event_dict: Any) -> Any:
    """A structlog processor: keep a JSON copy of the event for the running child."""
    captured = _CAPTURED.get()
    if captured is not None:
        captured.append(json.loads(json.dumps(dict(event_dict), default=str)))
    return event_dict


@contextmanager
def capturing() -> Iterator[list[dict[str, Any]]]:
    """Collect the events emitted in this context (empty unless a worker captures)."""
    events: list[dict[str, Any]] = []
    token = _CAPTURED.set(events)
    try:
        yield events
    finally:
        _CAPTURED.reset(token)


def replay_events(events: Iterable[Mapping[str, Any]], *, executor_id: str | None) -> None:
    """Emit a remote child's events here, as they were, plus the worker that ran them."""
    log = structlog.get_logger("lyra")
    for event in events:
        fields = {k: v for k, v in event.items() if k not in ("event", "level", "timestamp")}
        level = str(event.get("level", "info"))
        emit = getattr(log, level if level in _LEVELS else "info")
        emit(
            str(event.get("event", "event")),
            **fields,
            worker=executor_id,
            worker_timestamp=event.get("timestamp"),
        )
