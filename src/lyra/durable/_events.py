"""Where a durable task's events go once they are safe to write.

A task's events are held while its attempt runs (:func:`lyra.events.capturing`
with ``hold=True``) and written only after DBOS has saved the attempt's
checkpoint (:class:`lyra.durable._engine.TaskLog`), each with a stable
``event_id``. They go to the deliverer this process installed:

- the embedded executor writes them to the run's log, skipping the IDs it
  already holds (an earlier process wrote them before it was killed);
- a worker writes them to its own log (``--events``), and they also travel
  back with the task's result, for the supervisor to write into the run's log.

Nothing is written where no deliverer is installed: the events wait in the
workflow's result. The events of a task's last attempt are saved with the
workflow's result itself, so the supervisor writes them when it reads that
result; a worker also writes them to its own log as the workflow ends.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from lyra import events

Deliverer = Callable[[list[dict[str, Any]]], None]
_deliverer: Deliverer | None = None
_unsaved = False
_EVENT_ID = re.compile(rb'"event_id":"([^"]+)#([^"#]+)"')


def install(deliverer: Deliverer | None, *, unsaved: bool = False) -> None:
    """Send the events of the tasks this process runs to ``deliverer`` (None: keep
    them); with ``unsaved``, also those whose checkpoint is still being saved."""
    global _deliverer, _unsaved
    _deliverer, _unsaved = deliverer, unsaved


def deliver(records: list[dict[str, Any]]) -> None:
    """Write a task's events whose checkpoint is saved (see the module docstring)."""
    if _deliverer is not None:
        _deliverer(records)


def deliver_unsaved(records: list[dict[str, Any]]) -> None:
    """Events whose checkpoint the workflow's output will be: only a worker's own
    log takes them now."""
    if _deliverer is not None and _unsaved and records:
        _deliverer(records)


def write_local(records: list[dict[str, Any]]) -> None:
    """A worker's deliverer: this process's own event log."""
    events.replay(records)


class Ledger:
    """Which events of each task a run's log holds: a prefix of the task's
    numbered events (``<workflow id>#<n>``), so the next number to write is
    enough; and the named ones (``<workflow id>#<name>``: what this process says
    of a task, such as its crash loop), each written once per log."""

    def __init__(
        self,
        logged: Mapping[str, int] | None = None,
        path: Path | None = None,
        named: Iterable[str] = (),
    ) -> None:
        self.next: dict[str, int] = dict(logged or {})
        self.named = set(named)
        self.path = path
        """The run's event log, written to whether or not events are configured."""

    @classmethod
    def of_log(cls, path: Path | str | None) -> Ledger:
        """What the JSON-lines log at ``path`` already holds (nothing when absent)."""
        logged: dict[str, int] = {}
        named: set[str] = set()
        if path is not None and Path(path).is_file():
            for match in _EVENT_ID.finditer(Path(path).read_bytes()):
                task, tag = match.group(1).decode(), match.group(2).decode()
                if tag.isdigit():
                    logged[task] = max(logged.get(task, 0), int(tag) + 1)
                else:
                    named.add(f"{task}#{tag}")
        return cls(logged, Path(path) if path is not None else None, named)

    def write(self, records: Iterable[Mapping[str, Any]], **extra: Any) -> None:
        """Write the records the log does not hold yet, with ``extra`` fields."""
        fresh = []
        for record in records:
            event_id = str(record.get("event_id", ""))
            task, mark, tag = event_id.rpartition("#")
            if not (task and mark):
                fresh.append(record)  # not a durable task's event: nothing to match
            elif tag.isdigit():
                if int(tag) >= self.next.get(task, 0):
                    self.next[task] = int(tag) + 1
                    fresh.append(record)
            elif event_id not in self.named:
                self.named.add(event_id)
                fresh.append(record)
        if fresh:
            events.replay(fresh, into=self.path, **extra)

    def tasks(self) -> set[str]:
        """The workflow IDs the log holds events of."""
        return set(self.next) | {event_id.rpartition("#")[0] for event_id in self.named}
