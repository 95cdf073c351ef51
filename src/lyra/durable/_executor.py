"""The durable executor: the supervisor's execution seam on DBOS.

Two placements of the same workflows:

- **embedded** -- a SQLite system database in the run directory; this process
  runs the children, fanned out under anyio exactly like
  :class:`~lyra.supervisor.LocalExecutor` (it *is* a LocalExecutor pool), each
  child a DBOS workflow with a deterministic ID. Started again on the same
  run directory, DBOS recovers the children that were running, and every
  finished one returns its recorded result without running.
- **queue** -- a PostgreSQL system database; children are enqueued on one
  DBOS queue whose global concurrency limit is ``max_concurrency``, and
  ``lyra worker`` processes on any machine run them. This process only
  enqueues, waits, recovers the children of dead workers, and assembles.

Either way, only :meth:`ProteinWork.child` runs remotely; writing the run
directory and ``on_result`` happen here through :meth:`ProteinWork.finish`, so
the output, reports and briefs are the local path's.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar, cast

import anyio
import structlog

from lyra.delegation import exception_text
from lyra.durable._database import check_reachable, postgres_url, sqlite_url
from lyra.durable._events import replay_events
from lyra.errors import ConfigurationError
from lyra.proteins import ProteinEntry, ProteinWork
from lyra.supervisor import LocalExecutor, file_stem

if TYPE_CHECKING:
    from lyra.durable._liveness import Liveness

T = TypeVar("T")
R = TypeVar("R")
log = structlog.get_logger("lyra")

_FINAL = ["SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"]
_REAP_EVERY = 2.0


def new_executor_id(role: str) -> str:
    """A unique DBOS executor ID for one process: role, host, pid and a random tag."""
    return f"lyra-{role}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class DurableChildError(RuntimeError):
    """A protein's workflow ended without a result (cancelled, or it kept
    taking its process down); that protein fails, no other."""


class DurableExecutor:
    """Runs each protein's child as a DBOS workflow; see the module docstring.

    Use :meth:`embedded` or :meth:`queue`, then pass it as ``executor=`` to
    :func:`lyra.proteins.analyze` inside ``async with`` (or call :meth:`close`).
    ``run_id`` names the run: the same ID on the same database resumes it.
    """

    def __init__(
        self,
        *,
        run_id: str,
        placement: Literal["embedded", "queue"],
        url: str,
        folder: Path | None = None,
        poll_interval: float = 0.1,
    ) -> None:
        self.run_id = run_id
        self.placement = placement
        self.url = url
        self.folder = folder
        self.poll_interval = poll_interval
        self.executor_id = new_executor_id("supervisor")
        self._calls = 0
        self._launched = False
        self._liveness: Liveness | None = None
        self._logged: set[str] = set()
        """Proteins whose report predates this process: a resumed run logged their events."""

    @classmethod
    def embedded(cls, run_dir: Path | str, *, run_id: str) -> DurableExecutor:
        """Children run here; checkpoints in ``<run_dir>/dbos.sqlite``."""
        path = Path(run_dir)
        return cls(run_id=run_id, placement="embedded", url=sqlite_url(path), folder=path)

    @classmethod
    def queue(cls, database_url: str, *, run_id: str) -> DurableExecutor:
        """Children run on ``lyra worker`` processes sharing this PostgreSQL database."""
        return cls(run_id=run_id, placement="queue", url=postgres_url(database_url))

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        """Launch DBOS (once); the database must be reachable."""
        if not self._launched:
            await anyio.to_thread.run_sync(self.start_blocking)

    def start_blocking(self) -> None:
        """:meth:`start` for code outside an event loop (the command line)."""
        from lyra.durable import _engine

        if self._launched:
            return
        if self.placement == "embedded":
            assert self.folder is not None
            self.folder.mkdir(parents=True, exist_ok=True)
            _engine.launch(self.url, engine=_engine.sqlite_engine(self.url))
            self._launched = True
            return
        from lyra.durable._liveness import Liveness

        check_reachable(self.url)
        self._liveness = Liveness(self.url, self.executor_id)
        try:
            # This process enqueues and waits; only workers dequeue.
            _engine.launch(self.url, executor_id=self.executor_id, listen=[])
        except BaseException:
            self._liveness.close()
            self._liveness = None
            raise
        self._launched = True

    def close(self) -> None:
        """Stop DBOS in this process (blocking); unfinished children stay recorded."""
        if self._launched:
            from lyra.durable import _engine

            _engine.destroy()
            self._launched = False
        if self._liveness is not None:
            self._liveness.close()
            self._liveness = None

    async def aclose(self) -> None:
        """Async form of :meth:`close`."""
        await anyio.to_thread.run_sync(self.close)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- the seam ------------------------------------------------------------------

    async def map(
        self,
        work: Callable[[T], Awaitable[R]],
        items: Sequence[T],
        *,
        max_concurrency: int,
        on_error: Callable[[T, Exception], R],
    ) -> list[R]:
        """Run ``work`` over ``items`` durably; see :class:`~lyra.supervisor.Executor`.

        ``work`` must be a :class:`~lyra.proteins.ProteinWork` whose settings
        can travel as data (the offline or live source, no Python fixers).
        """
        if not isinstance(work, ProteinWork):
            raise ConfigurationError("the durable executor runs protein analyses only")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
        options = work.options().model_dump_json()
        call = self._calls
        self._calls += 1
        if call == 0 and work.run_dir is not None:
            self._logged = {str(p) for p in items if work.run_dir.report(str(p)).exists()}
        ids = [f"{self.run_id}/{call}/{i}-{file_stem(str(item))}" for i, item in enumerate(items)]
        await self.start()
        if self.placement == "embedded":
            results = await self._embedded(work, ids, items, options, max_concurrency, on_error)
        else:
            results = await self._queued(work, ids, items, options, max_concurrency, on_error)
        return cast(list[R], results)

    async def _embedded(
        self,
        work: ProteinWork,
        ids: list[str],
        items: Sequence[Any],
        options: str,
        max_concurrency: int,
        on_error: Callable[[Any, Exception], Any],
    ) -> list[Any]:
        from dbos import DBOS, SetWorkflowID
        from dbos._error import DBOSNonExistentWorkflowError

        from lyra.durable._engine import protein_workflow

        async def one(index: int) -> ProteinEntry:
            handle: Any
            try:
                # Finished (its result is recorded) or being recovered by DBOS
                # since launch: wait for it, never start it again.
                handle = await DBOS.retrieve_workflow_async(ids[index])
            except DBOSNonExistentWorkflowError:
                with SetWorkflowID(ids[index]):
                    handle = await DBOS.start_workflow_async(
                        protein_workflow, items[index], options
                    )
            result = await handle.get_result(polling_interval_sec=self.poll_interval)
            return self._finish(work, result)

        return await LocalExecutor().map(
            one,
            range(len(items)),
            max_concurrency=max_concurrency,
            on_error=lambda index, exc: on_error(items[index], exc),
        )

    async def _queued(
        self,
        work: ProteinWork,
        ids: list[str],
        items: Sequence[Any],
        options: str,
        max_concurrency: int,
        on_error: Callable[[Any, Exception], Any],
    ) -> list[Any]:
        from dbos import DBOS, SetWorkflowID

        from lyra.durable import _engine

        if await anyio.to_thread.run_sync(
            lambda: _engine.ensure_queue(global_concurrency=max_concurrency)
        ):
            await anyio.sleep(2 * _engine.QUEUE_POLL)  # until every worker applies the limit
        for workflow_id, item in zip(ids, items, strict=True):
            with SetWorkflowID(workflow_id):  # an existing ID (a resumed run) is not enqueued again
                await DBOS.enqueue_workflow_async(
                    _engine.QUEUE, _engine.protein_workflow, item, options
                )
        index = {workflow_id: i for i, workflow_id in enumerate(ids)}
        results: list[Any] = [None] * len(items)
        pending = set(ids)
        reaped = time.monotonic()
        while pending:
            for status in await self._finished(sorted(pending)):  # [] while the database is down
                pending.discard(status.workflow_id)
                i = index[status.workflow_id]
                try:
                    if status.status != "SUCCESS":
                        raise status.error or DurableChildError(
                            f"the child's workflow ended {status.status}"
                        )
                    results[i] = self._finish(work, status.output)
                except Exception as exc:  # noqa: BLE001 - isolation: one protein, not the run
                    results[i] = on_error(items[i], exc)
            if pending:
                if time.monotonic() - reaped > _REAP_EVERY:
                    await self._reap()
                    reaped = time.monotonic()
                await anyio.sleep(self.poll_interval)
        return results

    async def _finished(self, workflow_ids: list[str]) -> list[Any]:
        from dbos import DBOS

        found: list[Any] = []
        try:
            for start in range(0, len(workflow_ids), 500):
                found += await DBOS.list_workflows_async(
                    workflow_ids=workflow_ids[start : start + 500],
                    status=_FINAL,
                    load_input=False,
                )
        except Exception as exc:  # noqa: BLE001 - results stay recorded; look again soon
            log.warning("durable_poll_failed", error=exception_text(exc))
        return found

    async def _reap(self) -> None:
        from lyra.durable import _engine

        liveness = self._liveness
        if liveness is None:
            return
        try:
            await anyio.to_thread.run_sync(lambda: _engine.reap(liveness))
        except Exception as exc:  # noqa: BLE001 - the next sweep tries again
            log.warning("recovery_sweep_failed", error=exception_text(exc))

    def _finish(self, work: ProteinWork, result: Any) -> ProteinEntry:
        from lyra.durable._engine import decode

        entry, report = decode(result)
        events = result.get("events") or []
        if events and entry.protein_id not in self._logged:
            replay_events(events, executor_id=result.get("executor_id"))
        return work.finish(entry, report)
