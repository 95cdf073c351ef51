"""A worker process: takes children from the PostgreSQL queue until told to stop.

Each worker is a DBOS executor with an ID of its own, listening to the
children's queue only. While it runs it holds its liveness lock (see
:mod:`lyra.durable._liveness`) and, every couple of seconds, hands the
children of dead executors back to the queue -- so when a worker is killed
mid-child, another one (or the supervisor) runs that child again, and no
finished child ever runs twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from lyra import events
from lyra.delegation import exception_text
from lyra.durable._database import ensure_database, postgres_url, require_durable
from lyra.durable._events import install, write_local
from lyra.durable._executor import new_executor_id, quiet_dbos

if TYPE_CHECKING:
    from lyra.durable._liveness import Liveness

REAP_EVERY = 1.0


def run_worker(
    database_url: str,
    *,
    concurrency: int | None = None,
    stop: threading.Event | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Process children until ``stop`` is set (blocking).

    ``concurrency`` sets how many children each worker runs at once (a
    setting of the shared queue). ``ready`` is called with this worker's
    executor ID once it takes work. A database that does not exist yet is
    created. Raises DatabaseUnreachable when the server does not answer.
    """
    require_durable()
    from lyra.durable import _engine
    from lyra.durable._liveness import Liveness

    url = postgres_url(database_url)
    ensure_database(url)  # (before DBOS would make it: the liveness lock is taken there)
    executor_id = new_executor_id("worker")
    stop = stop or threading.Event()
    liveness = Liveness(url, executor_id)  # before any child is taken
    install(write_local, unsaved=True)  # also sent back to the supervisor with each result
    try:
        _engine.launch(url, executor_id=executor_id, listen=[_engine.QUEUE])
        try:
            _engine.ensure_queue(worker_concurrency=concurrency)
            events.info(events.WORKER_STARTED, executor_id=executor_id, queue=_engine.QUEUE)
            if ready is not None:
                ready(executor_id)
            while True:
                _reap(liveness)
                if stop.wait(REAP_EVERY):
                    break
            events.info(events.WORKER_STOPPED, executor_id=executor_id)
        finally:
            quiet_dbos()  # the children still running go back to the queue, without a word each
            _engine.destroy()
    finally:
        install(None)
        liveness.close()


def _reap(liveness: Liveness) -> None:
    from lyra.durable import _engine

    try:
        _engine.reap(liveness)
    except Exception as exc:  # noqa: BLE001 - a failed sweep is retried on the next one
        events.warning(events.RECOVERY_SWEEP_FAILED, error=exception_text(exc))
