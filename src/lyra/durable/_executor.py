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

Either way, only :meth:`lyra.supervisor.Job.run` runs in the workflow; the
outcome comes back here, where ``on_outcome`` is called, so whatever the
caller does with it (a run directory, a progress display) is the local path's.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

import anyio

from lyra import events
from lyra.delegation import exception_text
from lyra.durable._database import check_reachable, postgres_url, require_durable, sqlite_url
from lyra.durable._events import replay_events
from lyra.durable._spec import JobSpec
from lyra.recovery import RecoveryOutcome
from lyra.supervisor import Job, LocalExecutor, OnOutcome, Task, file_stem, lost_outcome
from lyra.supervisor import notify as notify_outcome

if TYPE_CHECKING:
    from lyra.durable._liveness import Liveness

_FINAL = ["SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"]
_REAP_EVERY = 2.0


def new_executor_id(role: str) -> str:
    """A unique DBOS executor ID for one process: role, host, pid and a random tag."""
    return f"lyra-{role}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class DurableChildError(RuntimeError):
    """A task's workflow ended without a result (cancelled, or it kept taking
    its process down); that task fails, no other."""


class DurableExecutor:
    """Runs each task as a DBOS workflow; see the module docstring.

    Use :meth:`embedded` or :meth:`queue`, then pass it as ``executor=`` to a
    :class:`~lyra.Supervisor` inside ``async with`` (or call :meth:`close`).
    ``run_id`` names the run: the same ID on the same database resumes it.
    ``already_logged`` names tasks (by subject) whose events the caller's log
    holds from an earlier process, so a resumed run does not log them twice.
    """

    def __init__(
        self,
        *,
        run_id: str,
        placement: Literal["embedded", "queue"],
        url: str,
        folder: Path | None = None,
        poll_interval: float = 0.1,
        already_logged: Collection[str] = (),
    ) -> None:
        require_durable()
        self.run_id = run_id
        self.placement = placement
        self.url = url
        self.folder = folder
        self.poll_interval = poll_interval
        self.executor_id = new_executor_id("supervisor")
        self._calls = 0
        self._launched = False
        self._liveness: Liveness | None = None
        self._logged = set(already_logged)

    @classmethod
    def embedded(
        cls, run_dir: Path | str, *, run_id: str, already_logged: Collection[str] = ()
    ) -> DurableExecutor:
        """Children run here; checkpoints in ``<run_dir>/dbos.sqlite``."""
        path = Path(run_dir)
        return cls(
            run_id=run_id,
            placement="embedded",
            url=sqlite_url(path),
            folder=path,
            already_logged=already_logged,
        )

    @classmethod
    def queue(
        cls, database_url: str, *, run_id: str, already_logged: Collection[str] = ()
    ) -> DurableExecutor:
        """Children run on ``lyra worker`` processes sharing this PostgreSQL database."""
        return cls(
            run_id=run_id,
            placement="queue",
            url=postgres_url(database_url),
            already_logged=already_logged,
        )

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

    async def run(
        self,
        job: Job,
        tasks: Iterable[Task],
        *,
        max_concurrency: int,
        on_outcome: OnOutcome | None = None,
        keep: bool = True,
    ) -> list[RecoveryOutcome]:
        """Run every task durably; see :class:`~lyra.supervisor.Executor`.

        The job must travel as data (:class:`~lyra.durable.JobSpec`: a child by
        importable name, no Python callables in its policy).
        """
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
        tasks = list(tasks)  # each gets a workflow ID from its position
        spec = JobSpec.of(job).model_dump_json()
        call = self._calls
        self._calls += 1
        ids = [
            f"{self.run_id}/{call}/{i}-{file_stem(task.subject or str(i))}"
            for i, task in enumerate(tasks)
        ]
        await self.start()
        runs = [
            _Run(workflow_id, task, task.model_dump_json())
            for workflow_id, task in zip(ids, tasks, strict=True)
        ]
        if self.placement == "embedded":
            outcomes = await self._embedded(spec, runs, max_concurrency, on_outcome)
        else:
            outcomes = await self._queued(spec, runs, max_concurrency, on_outcome)
        return outcomes if keep else []

    async def _embedded(
        self, spec: str, runs: list[_Run], max_concurrency: int, on_outcome: OnOutcome | None
    ) -> list[RecoveryOutcome]:
        from dbos import DBOS, SetWorkflowID
        from dbos._error import DBOSNonExistentWorkflowError

        from lyra.durable._engine import task_workflow

        async def one(run: _Run) -> RecoveryOutcome:
            handle: Any
            try:
                # Finished (its result is recorded) or being recovered by DBOS
                # since launch: wait for it, never start it again.
                handle = await DBOS.retrieve_workflow_async(run.workflow_id)
            except DBOSNonExistentWorkflowError:
                with SetWorkflowID(run.workflow_id):
                    handle = await DBOS.start_workflow_async(task_workflow, spec, run.task_json)
            result = await handle.get_result(polling_interval_sec=self.poll_interval)
            return self._finish(run, result, on_outcome)

        def lost(run: _Run, exc: Exception) -> RecoveryOutcome:
            return self._lost(run, exc, on_outcome)

        return await LocalExecutor().map(one, runs, max_concurrency=max_concurrency, on_error=lost)

    async def _queued(
        self, spec: str, runs: list[_Run], max_concurrency: int, on_outcome: OnOutcome | None
    ) -> list[RecoveryOutcome]:
        from dbos import DBOS, SetWorkflowID

        from lyra.durable import _engine

        if await anyio.to_thread.run_sync(
            lambda: _engine.ensure_queue(global_concurrency=max_concurrency)
        ):
            await anyio.sleep(2 * _engine.QUEUE_POLL)  # until every worker applies the limit
        for run in runs:
            with SetWorkflowID(run.workflow_id):  # an existing ID (a resume) is not enqueued again
                await DBOS.enqueue_workflow_async(
                    _engine.QUEUE, _engine.task_workflow, spec, run.task_json
                )
        index = {run.workflow_id: i for i, run in enumerate(runs)}
        results: list[RecoveryOutcome | None] = [None] * len(runs)
        pending = set(index)
        reaped = time.monotonic()
        while pending:
            for status in await self._finished(sorted(pending)):  # [] while the database is down
                pending.discard(status.workflow_id)
                run = runs[index[status.workflow_id]]
                try:
                    if status.status != "SUCCESS":
                        raise status.error or DurableChildError(
                            f"the task's workflow ended {status.status}"
                        )
                    results[index[run.workflow_id]] = self._finish(run, status.output, on_outcome)
                except Exception as exc:  # noqa: BLE001 - isolation: one task, not the run
                    results[index[run.workflow_id]] = self._lost(run, exc, on_outcome)
            if pending:
                if time.monotonic() - reaped > _REAP_EVERY:
                    await self._reap()
                    reaped = time.monotonic()
                await anyio.sleep(self.poll_interval)
        return [result for result in results if result is not None]

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
            events.warning("durable_poll_failed", error=exception_text(exc))
        return found

    async def _reap(self) -> None:
        from lyra.durable import _engine

        liveness = self._liveness
        if liveness is None:
            return
        try:
            await anyio.to_thread.run_sync(lambda: _engine.reap(liveness))
        except Exception as exc:  # noqa: BLE001 - the next sweep tries again
            events.warning("recovery_sweep_failed", error=exception_text(exc))

    def _finish(self, run: _Run, result: Any, on_outcome: OnOutcome | None) -> RecoveryOutcome:
        from lyra.durable._engine import decode

        outcome = decode(result)
        captured = result.get("events") or []
        if captured and run.task.subject not in self._logged:
            replay_events(captured, executor_id=result.get("executor_id"))
        notify_outcome(on_outcome, run.task, outcome)
        return outcome

    def _lost(self, run: _Run, exc: Exception, on_outcome: OnOutcome | None) -> RecoveryOutcome:
        outcome = lost_outcome(run.task, exc)
        notify_outcome(on_outcome, run.task, outcome)
        return outcome


@dataclass(frozen=True, slots=True)
class _Run:
    """One task of a durable run: its workflow ID and its input."""

    workflow_id: str
    task: Task
    task_json: str
