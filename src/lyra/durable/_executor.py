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
The children's events reach this process's log only once their checkpoints
are saved, each once (:mod:`lyra.durable._events`). A queued run with no
worker taking its children for ``worker_wait`` seconds stops with
:class:`NoWorkers`; its children stay queued for a later resume.
"""

from __future__ import annotations

import logging
import os
import re
import reprlib
import shlex
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

import anyio

from lyra import events
from lyra._claims import Claim, claim
from lyra.delegation import exception_text
from lyra.durable import _questions as questions
from lyra.durable._checkpoints import GAVE_UP
from lyra.durable._database import (
    SQLITE_FILE,
    check_reachable,
    postgres_url,
    redacted,
    require_durable,
    sqlite_url,
    storage_failure,
)
from lyra.durable._events import Ledger, install
from lyra.durable._questions import WaitingQuestion
from lyra.durable._spec import JobSpec
from lyra.errors import ConfigurationError, LyraError, RunStopped
from lyra.recovery import RecoveryOutcome
from lyra.supervisor import (
    Job,
    LocalExecutor,
    OnOutcome,
    RunDir,
    Task,
    file_stem,
    lost_outcome,
)
from lyra.supervisor import notify as notify_outcome

if TYPE_CHECKING:
    from lyra.durable._liveness import Liveness

_FINAL = ["SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"]
_REAP_EVERY = 2.0
_CHUNK = 500
_ENQUEUERS = 16
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
QUESTION_POLL = 0.25
"""Seconds between two looks for the questions a running call's tasks wait on."""
OnQuestion = Callable[[WaitingQuestion], Awaitable[str | None]]
"""Given a question a task waits on, its answer (``None``: none from here)."""
RUN_LOCK = RunDir.LOCK
"""The file in an embedded run's directory that the process running it holds."""
_COMMIT_LAG_MS = 5_000
"""How far back each look for finished children reaches before the newest one
seen: a transaction may commit a little after the time it recorded."""


def new_executor_id(role: str) -> str:
    """A unique DBOS executor ID for one process: role, host, pid and a random tag."""
    return f"lyra-{role}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class DurableChildError(LyraError, RuntimeError):
    """A task's workflow ended without a result (cancelled, or it kept taking
    its process down); that task fails, no other."""


class NoWorkers(BaseException):
    """No ``lyra worker`` took a queued child within ``worker_wait`` seconds.

    Like ``KeyboardInterrupt`` it stops the whole run (no handler that contains
    one task's failure holds it back); the children stay queued and recorded,
    so the same run finishes once workers run.
    """

    def __init__(self, seconds: float, waiting: int) -> None:
        super().__init__(
            f"no worker took a child in {seconds:g} s ({waiting} waiting on the queue); "
            "start workers with: lyra worker --database-url URL"
        )
        self.seconds = seconds
        self.waiting = waiting

    def __reduce__(self) -> tuple[Any, ...]:  # (pickled with its own arguments, not args)
        return type(self), (self.seconds, self.waiting), self.__dict__


class DurableExecutor:
    """Runs each task as a DBOS workflow; see the module docstring.

    Use :meth:`embedded` or :meth:`queue`, then pass it as ``executor=`` to a
    :class:`~lyra.Supervisor` inside ``async with`` (or call :meth:`close`).
    ``run_id`` names the run: the same ID on the same database resumes it.
    ``event_log`` is the JSON-lines file the run's events go to
    (:func:`lyra.events.configure`): a resumed run does not write again the
    events it already holds.
    """

    def __init__(
        self,
        *,
        run_id: str,
        placement: Literal["embedded", "queue"],
        url: str,
        folder: Path | None = None,
        poll_interval: float = 0.1,
        event_log: Path | str | None = None,
        worker_wait: float | None = None,
    ) -> None:
        require_durable()
        if not _RUN_ID.match(run_id):
            raise ConfigurationError(
                f"run_id must be letters, digits, '.', '_' or '-' (at most 64), not {run_id!r}"
            )
        self.run_id = run_id
        self.placement = placement
        self.url = url
        self.folder = folder
        self.poll_interval = poll_interval
        self.event_log = event_log
        self.worker_wait = worker_wait
        self.executor_id = new_executor_id("supervisor")
        self._calls = 0
        self._launched = False
        self._liveness: Liveness | None = None
        self._hold: Claim | None = None
        self._ledger = Ledger()

    @classmethod
    def embedded(
        cls, run_dir: Path | str, *, run_id: str, event_log: Path | str | None = None
    ) -> DurableExecutor:
        """Children run here; checkpoints in ``<run_dir>/dbos.sqlite``."""
        path = Path(run_dir)
        return cls(
            run_id=run_id,
            placement="embedded",
            url=sqlite_url(path),
            folder=path,
            event_log=event_log,
        )

    @classmethod
    def queue(
        cls,
        database_url: str,
        *,
        run_id: str,
        event_log: Path | str | None = None,
        worker_wait: float | None = None,
    ) -> DurableExecutor:
        """Children run on ``lyra worker`` processes sharing this PostgreSQL database.

        ``worker_wait``: when no worker has taken a child for this many seconds
        while children wait on the queue, :meth:`run` raises :class:`NoWorkers`
        (``None``: wait for workers however long it takes).
        """
        if worker_wait is not None and not worker_wait > 0:
            raise ConfigurationError(f"worker_wait must be a positive number, not {worker_wait}")
        return cls(
            run_id=run_id,
            placement="queue",
            url=postgres_url(database_url),
            event_log=event_log,
            worker_wait=worker_wait,
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
        self._ledger = Ledger.of_log(self.event_log)
        if self.placement == "embedded":
            assert self.folder is not None
            self._hold = hold_run_dir(self.folder)
            try:
                engine = _engine.sqlite_engine(self.url)
                _engine.reopen_stopped_by_storage(engine)
                _engine.launch(self.url, engine=engine)
            except BaseException as exc:
                self._let_go()
                self._stop_if_full(exc)
                raise
            install(self._ledger.write)  # the children run here: their events too
            self._launched = True
            return
        from lyra.durable._liveness import Liveness

        check_reachable(self.url)
        self._liveness = Liveness(self.url, self.executor_id)
        try:
            # This process enqueues and waits; only workers dequeue.
            _engine.launch(self.url, executor_id=self.executor_id, listen=[])
        except BaseException as exc:
            self._liveness.close()
            self._liveness = None
            self._stop_if_full(exc)
            raise
        self._launched = True

    def _stop_if_full(self, exc: BaseException) -> None:
        """:class:`RunStopped` when ``exc`` says the checkpoints cannot be written (a
        full disk): the run stops as a whole, no task is blamed."""
        why = storage_failure(exc)
        if why is not None:
            raise RunStopped(
                f"the checkpoints could not be written to {self.where}: {why}", path=self.where
            ) from None

    def close(self) -> None:
        """Stop DBOS in this process (blocking); unfinished children stay recorded."""
        if self._launched:
            from lyra.durable import _engine

            install(None)
            _engine.destroy()
            self._launched = False
        if self._liveness is not None:
            self._liveness.close()
            self._liveness = None
        self._let_go()

    def _let_go(self) -> None:
        if self._hold is not None:
            self._hold.close()
            self._hold = None

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

    async def tasks(self) -> list[RecordedTask]:
        """Every task of this run the database holds, oldest first: which call it
        belongs to, its input and its status (after :meth:`start`). A process that
        names its calls (``run(call=…)``) finds here what an earlier one started."""
        found = await _task_workflows(f"{self.run_id}/")
        return [
            RecordedTask(
                call=status.workflow_id.removeprefix(f"{self.run_id}/").partition("/")[0],
                task=task,
                status=str(status.status),
                created_at=(status.created_at or 0) / 1000,
                completed_at=None if status.completed_at is None else status.completed_at / 1000,
            )
            for status, task in sorted(found, key=lambda pair: pair[0].created_at or 0)
        ]

    async def cancel(self, call: str) -> int:
        """Record the unfinished tasks of ``call`` as cancelled, so that no process
        resumes them (a child running in this process is the caller's to stop).
        Returns how many the database records as cancelled: one that finished between
        the listing and the cancel keeps its outcome (DBOS leaves a finished task as it
        is) and is not counted."""
        from dbos import DBOS

        ids = await self._unfinished(call)
        if not ids:
            return 0
        await DBOS.cancel_workflows_async(ids)
        cancelled = await DBOS.list_workflows_async(
            workflow_ids=ids, status="CANCELLED", load_input=False, load_output=False
        )
        return len(cancelled)

    async def questions(self, call: str | None = None) -> list[WaitingQuestion]:
        """The questions tasks of this run (of ``call`` only, when given) wait on for
        their answers (their policy's ``answer_wait``), after :meth:`start`."""
        from dbos import DBOS

        prefix = f"{self.run_id}/" if call is None else f"{self.run_id}/{_call_name(call)}/"
        return await questions.waiting(DBOS, prefix, postgres=self.placement == "queue")

    async def answer(self, asked: WaitingQuestion, answer: str) -> None:
        """Send ``answer`` to the task that waits on ``asked`` (as ``lyra answer``
        does); recorded, so a restart keeps it."""
        from dbos import DBOS

        await questions.answer(DBOS, asked, answer)

    def answer_command(self, asked: WaitingQuestion) -> str:
        """The ``lyra answer`` command that answers ``asked`` (``ANSWER`` for the text;
        the database's password left out)."""
        task = shlex.quote(asked.subject or asked.workflow_id)
        if self.folder is not None:
            return f"lyra answer {shlex.quote(str(self.folder))} {task} 'ANSWER'"
        where = f"--database-url {shlex.quote(redacted(self.url))}"
        return f"lyra answer {where} --run-id {shlex.quote(self.run_id)} {task} 'ANSWER'"

    async def _unfinished(self, call: str) -> list[str]:
        from dbos import DBOS

        found = await DBOS.list_workflows_async(
            workflow_id_prefix=f"{self.run_id}/{_call_name(call)}/",
            status=["PENDING", "ENQUEUED"],
            load_input=False,
            load_output=False,
        )
        return [status.workflow_id for status in found]

    def recorded(self) -> dict[str, str]:
        """Every workflow of this run the database holds, with its status
        (``SUCCESS``, ``PENDING``, …); blocking, after :meth:`start_blocking`."""
        from dbos import DBOS

        found = DBOS.list_workflows(
            workflow_id_prefix=f"{self.run_id}/", load_input=False, load_output=False
        )
        return {status.workflow_id: str(status.status) for status in found}

    @property
    def where(self) -> str:
        """Where the checkpoints go, for messages: the SQLite file, or the database URL
        (without its password)."""
        if self.folder is not None:
            return str(self.folder / SQLITE_FILE)
        return redacted(self.url)

    # -- the seam ------------------------------------------------------------------

    async def run(
        self,
        job: Job,
        tasks: Iterable[Task],
        *,
        max_concurrency: int,
        on_outcome: OnOutcome | None = None,
        keep: bool = True,
        call: str | None = None,
        on_recorded: Callable[[Task], None] | None = None,
        on_question: OnQuestion | None = None,
    ) -> list[RecoveryOutcome]:
        """Run every task durably; see :class:`~lyra.supervisor.Executor`.

        The job must travel as data (:class:`~lyra.durable.JobSpec`: a child by
        importable name, no Python callables in its policy). The tasks' workflows
        are named after the run, this call and their position: calls are numbered
        in the order this process makes them, unless ``call`` names this one (a
        long-lived process whose calls come one by one, in no order a later
        process could repeat: the same name finds the same workflows).
        ``on_recorded(task)`` is called as each task's workflow is in the database
        (started, enqueued, or found from an earlier process): from then on a
        crash of this process loses it no more.

        A question a task waits on (``job.policy.answer_wait``) is said as it is
        seen (the event ``question_waiting``, with the ``lyra answer`` command that
        answers it), and handed to ``on_question``, whose answer, when it gives
        one, is sent to the task; it is stopped once the question is answered
        otherwise, or its wait ends.
        """
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
        if self.placement == "embedded":  # (in a queued run, the workers build them)
            job.build_children()
        tasks = list(tasks)  # each gets a workflow ID from its position
        spec = JobSpec.of(job).model_dump_json()
        if call is None:
            call = str(self._calls)
            self._calls += 1
        prefix = f"{self.run_id}/{_call_name(call)}/"
        await self.start()
        runs = [
            _Run(f"{prefix}{i}-{file_stem(task.subject or str(i))}", task, task.model_dump_json())
            for i, task in enumerate(tasks)
        ]
        await self._check_recorded(prefix, runs)
        try:
            async with self._questions_watched(job, prefix, on_question):
                if self.placement == "embedded":
                    outcomes = await self._embedded(
                        spec, runs, max_concurrency, on_outcome, on_recorded or _ignore
                    )
                else:
                    outcomes = await self._queued(
                        spec, prefix, runs, max_concurrency, on_outcome, on_recorded or _ignore
                    )
        except BaseException as exc:
            quiet_dbos()  # an interrupted run: DBOS need not describe every child it leaves
            self._stop_if_full(exc)
            raise
        return outcomes if keep else []

    async def _check_recorded(self, prefix: str, runs: list[_Run]) -> None:
        """ConfigurationError, before anything runs, when the run holds another task where
        one of ``runs`` goes: a task is known by its place in the call, so it would be
        handed the result recorded there, another task's."""
        recorded = {status.workflow_id: task for status, task in await _task_workflows(prefix)}
        for index, run in enumerate(runs):
            before = recorded.get(run.workflow_id)
            if before is None or run.task == before:
                continue
            fields = "" if run.task.prompt != before.prompt else " (its other fields differ)"
            raise ConfigurationError(
                f"the durable run {self.run_id!r} was given another task {index}: "
                f"{reprlib.repr(run.task.prompt)}, where it recorded "
                f"{reprlib.repr(before.prompt)}{fields}; a task is known by its place, and "
                "would get the result recorded there. Give the run its tasks as they were "
                "(new ones after them), or use a new run_id"
            )

    @asynccontextmanager
    async def _questions_watched(
        self, job: Job, prefix: str, on_question: OnQuestion | None
    ) -> AsyncIterator[None]:
        """Watch the call's questions (see :meth:`run`) while the body runs, where they
        wait; the body's own exception comes out as it was raised."""
        if not job.policy.answer_wait:
            yield
            return
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._watch_questions, prefix, on_question)
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()
        except BaseExceptionGroup as failed:
            if len(failed.exceptions) == 1:
                raise failed.exceptions[0] from None
            raise

    async def _watch_questions(self, prefix: str, on_question: OnQuestion | None) -> None:
        """Look for the call's questions every :data:`QUESTION_POLL` seconds: say each
        new one, hand it to ``on_question``, and stop that once the question is gone."""
        from dbos import DBOS

        handed: dict[tuple[str, str], anyio.CancelScope] = {}
        async with anyio.create_task_group() as group:
            while True:
                await anyio.sleep(QUESTION_POLL)
                try:
                    found = await questions.waiting(
                        DBOS, prefix, postgres=self.placement == "queue"
                    )
                except Exception as exc:  # noqa: BLE001 - the questions stay recorded
                    events.warning(events.DURABLE_POLL_FAILED, error=exception_text(exc))
                    continue
                now = {(q.workflow_id, q.question): q for q in found if not q.answered}
                for gone in handed.keys() - now.keys():  # answered, or its wait over
                    handed.pop(gone).cancel()
                for key, asked in now.items():
                    if key in handed:
                        continue
                    handed[key] = anyio.CancelScope()
                    self._say_waiting(asked)
                    if on_question is not None:
                        group.start_soon(self._hand_over, asked, on_question, handed, key)

    async def _hand_over(
        self,
        asked: WaitingQuestion,
        on_question: OnQuestion,
        handed: dict[tuple[str, str], anyio.CancelScope],
        key: tuple[str, str],
    ) -> None:
        """``on_question``'s answer to ``asked``, sent to the task; on a failure the
        next look hands the question over again."""
        with handed[key]:
            try:
                reply = await on_question(asked)
                if reply is not None:
                    await self.answer(asked, reply)
            except Exception as exc:  # noqa: BLE001 - a database hiccup: look again
                handed.pop(key, None)
                events.warning(
                    events.QUESTION_RELAY_FAILED,
                    workflow_id=asked.workflow_id,
                    error=exception_text(exc),
                )

    def _say_waiting(self, asked: WaitingQuestion) -> None:
        """``question_waiting`` in the run's log (and wherever events go)."""
        until = None
        if asked.until is not None:
            until = datetime.fromtimestamp(asked.until, UTC).isoformat(timespec="seconds")
        with events.capturing(hold=True) as said:
            events.warning(
                events.QUESTION_WAITING,
                subject=asked.subject,
                question=asked.question,
                workflow_id=asked.workflow_id,
                waits_until=until,
                answer_with=self.answer_command(asked),
            )
        self._ledger.write(said)

    async def _embedded(
        self,
        spec: str,
        runs: list[_Run],
        max_concurrency: int,
        on_outcome: OnOutcome | None,
        on_recorded: Callable[[Task], None],
    ) -> list[RecoveryOutcome]:
        from dbos import DBOS, SetWorkflowID

        from lyra.durable._engine import pause, task_workflow

        results: list[RecoveryOutcome | None] = [None] * len(runs)
        known: set[str] = set()
        for start in range(0, len(runs), _CHUNK):  # a resumed run: finished tasks at once
            chunk = runs[start : start + _CHUNK]
            found = await DBOS.list_workflows_async(
                workflow_ids=[run.workflow_id for run in chunk], load_input=False
            )
            done = {s.workflow_id: s.output for s in found if s.status == "SUCCESS"}
            gave_up = {s.workflow_id for s in found if s.status == GAVE_UP}
            known.update(s.workflow_id for s in found)
            for i, run in enumerate(chunk, start):
                if run.workflow_id in known:
                    on_recorded(run.task)
                if run.workflow_id in done:
                    results[i] = self._finish_safely(run, done[run.workflow_id], on_outcome)
                elif run.workflow_id in gave_up:
                    results[i] = self._crashed(run, on_outcome)

        async def one(i: int) -> RecoveryOutcome:
            run = runs[i]
            handle: Any
            if run.workflow_id in known:
                # Being recovered by DBOS since launch (or ended without a result):
                # wait for it, never start it again.
                handle = await DBOS.retrieve_workflow_async(run.workflow_id)
            else:
                with SetWorkflowID(run.workflow_id):
                    handle = await DBOS.start_workflow_async(task_workflow, spec, run.task_json)
                on_recorded(run.task)
            try:
                result = await handle.get_result(polling_interval_sec=self.poll_interval)
            except Exception as exc:
                if type(exc).__name__ != "DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded":
                    raise
                return self._crashed(run, on_outcome)  # given up as this process started
            if result.get("held"):  # its last attempt's events wait for the saved output
                await pause("after_checkpoint", run.task_json, len(result["outcome"]["attempts"]))
            return self._finish(run, result, on_outcome)

        stop, full = anyio.CancelScope(), list[BaseException]()

        def lost(i: int, exc: BaseException) -> RecoveryOutcome:
            if storage_failure(exc) is None:
                return self._lost(runs[i], exc, on_outcome)
            full.append(exc)  # the run's storage, not this child: stop every child
            stop.cancel()
            return None  # type: ignore[return-value]  # never read: the map is cancelled

        todo = [i for i, result in enumerate(results) if result is None]
        with stop:
            ran = await LocalExecutor().map(
                one, todo, max_concurrency=max_concurrency, on_error=lost
            )
        if full:
            raise full[0]  # run() says it as RunStopped
        for i, outcome in zip(todo, ran, strict=True):
            results[i] = outcome
        return [outcome for outcome in results if outcome is not None]

    async def _queued(
        self,
        spec: str,
        prefix: str,
        runs: list[_Run],
        max_concurrency: int,
        on_outcome: OnOutcome | None,
        on_recorded: Callable[[Task], None],
    ) -> list[RecoveryOutcome]:
        from lyra.durable import _engine

        if await anyio.to_thread.run_sync(
            lambda: _engine.ensure_queue(global_concurrency=max_concurrency)
        ):
            await anyio.sleep(2 * _engine.QUEUE_POLL)  # until every worker applies the limit
        await _enqueue_all(spec, runs)
        for run in runs:
            on_recorded(run.task)
        index = {run.workflow_id: i for i, run in enumerate(runs)}
        results: list[RecoveryOutcome | None] = [None] * len(runs)
        watch = _Watch(prefix, set(index), self.worker_wait)
        reaped = time.monotonic()
        while watch.pending:
            for status in await watch.finished():  # [] while the database is down
                run = runs[index[status.workflow_id]]
                if status.status == "SUCCESS":
                    results[index[run.workflow_id]] = self._finish_safely(
                        run, status.output, on_outcome
                    )
                elif status.status == GAVE_UP:
                    results[index[run.workflow_id]] = self._crashed(run, on_outcome)
                else:
                    failure = status.error or DurableChildError(
                        f"the task's workflow ended {status.status}"
                    )
                    results[index[run.workflow_id]] = self._lost(run, failure, on_outcome)
            if watch.pending:
                if time.monotonic() - reaped > _REAP_EVERY:
                    await self._reap()
                    reaped = time.monotonic()
                await watch.check_workers()
                await anyio.sleep(self.poll_interval)
        return [result for result in results if result is not None]

    async def _reap(self) -> None:
        from lyra.durable import _engine

        liveness = self._liveness
        if liveness is None:
            return
        try:
            await anyio.to_thread.run_sync(lambda: _engine.reap(liveness))
        except Exception as exc:  # noqa: BLE001 - the next sweep tries again
            events.warning(events.RECOVERY_SWEEP_FAILED, error=exception_text(exc))

    def _finish(self, run: _Run, result: Any, on_outcome: OnOutcome | None) -> RecoveryOutcome:
        from lyra.durable._engine import decode

        outcome = decode(result)
        worker = result.get("executor_id") if self.placement == "queue" else None
        self._ledger.write(result.get("events") or [], **({"worker": worker} if worker else {}))
        notify_outcome(on_outcome, run.task, outcome)
        return outcome

    def _finish_safely(
        self, run: _Run, result: Any, on_outcome: OnOutcome | None
    ) -> RecoveryOutcome:
        """:meth:`_finish`, or a lost outcome for that task alone when it breaks."""
        try:
            return self._finish(run, result, on_outcome)
        except Exception as exc:  # noqa: BLE001 - isolation: one task, not the run
            return self._lost(run, exc, on_outcome)

    def _crashed(self, run: _Run, on_outcome: OnOutcome | None) -> RecoveryOutcome:
        from lyra.durable._engine import crashed_outcome

        with events.capturing(hold=True) as said:  # in the log once, however often resumed
            outcome = crashed_outcome(run.task, run.workflow_id)
        self._ledger.write(
            {**record, "event_id": f"{run.workflow_id}#crash-{i}"} for i, record in enumerate(said)
        )
        notify_outcome(on_outcome, run.task, outcome)
        return outcome

    def _lost(self, run: _Run, exc: BaseException, on_outcome: OnOutcome | None) -> RecoveryOutcome:
        outcome = lost_outcome(run.task, exc)
        notify_outcome(on_outcome, run.task, outcome)
        return outcome


async def _enqueue_all(spec: str, runs: list[_Run]) -> None:
    """Put every task on the queue, several at once (each is a transaction: one
    at a time, enqueueing alone took ~5 ms a child); the first failure is raised."""
    from dbos import DBOS, SetWorkflowID

    from lyra.durable import _engine

    failures: list[BaseException] = []

    async def enqueue(run: _Run) -> None:
        with SetWorkflowID(run.workflow_id):  # an existing ID (a resume) is not enqueued again
            await DBOS.enqueue_workflow_async(
                _engine.QUEUE, _engine.task_workflow, spec, run.task_json
            )

    await LocalExecutor().map(
        enqueue, runs, max_concurrency=_ENQUEUERS, on_error=lambda _, exc: failures.append(exc)
    )
    if failures:
        raise failures[0]


async def _task_workflows(prefix: str) -> list[tuple[Any, Task]]:
    """The task workflows whose IDs start with ``prefix``, each with its task (DBOS's
    workflow status, and the input it was started with)."""
    from dbos import DBOS

    found = await DBOS.list_workflows_async(
        workflow_id_prefix=prefix, load_input=True, load_output=False
    )
    return [
        (status, Task.model_validate_json(status.input["args"][1]))
        for status in found
        # (another workflow, or a task workflow of another version: not ours to read)
        if status.input is not None and len(status.input["args"]) == 2
    ]


def hold_run_dir(folder: Path, busy: str | None = None) -> Claim:
    """This process's hold on an embedded run's directory (see :mod:`lyra._claims`):
    two processes resuming the same checkpoints would both run every unfinished task.
    ConfigurationError saying ``busy`` (or why) when another process holds it."""
    busy = busy or (
        f"another process is running the durable run in {folder} now (it holds "
        f"{folder / RUN_LOCK}); let it finish or stop it, then run this again"
    )
    return claim(folder, RUN_LOCK, what="the run directory", busy=busy)


def _ignore(task: Task) -> None:
    return None


def _call_name(call: str) -> str:
    """A call's name, checked: it becomes part of its workflows' IDs."""
    if not _RUN_ID.match(call):
        raise ConfigurationError(
            f"a call's name must be letters, digits, '.', '_' or '-' (at most 64), not {call!r}"
        )
    return call


@dataclass(frozen=True, slots=True)
class RecordedTask:
    """A task the database holds (:meth:`DurableExecutor.tasks`)."""

    call: str
    """The call it belongs to: the ``call`` name given to ``run``, or its number."""
    task: Task
    status: str
    """DBOS's status of its workflow: ``PENDING``, ``ENQUEUED``, ``SUCCESS``,
    ``CANCELLED``, ``ERROR``, ``MAX_RECOVERY_ATTEMPTS_EXCEEDED``."""
    created_at: float
    """When it was started (seconds since the epoch)."""
    completed_at: float | None


def quiet_dbos() -> None:
    """Silence DBOS's own logger (an interrupted run: every unfinished child
    would otherwise be described, with its inputs, as a warning)."""
    logging.getLogger("dbos").setLevel(logging.CRITICAL + 1)


@dataclass(frozen=True, slots=True)
class _Run:
    """One task of a durable run: its workflow ID and its input."""

    workflow_id: str
    task: Task
    task_json: str


class _Watch:
    """The queued children of one call: which finished, and whether any worker
    is taking them.

    Each look asks only for the workflows of the call that finished since the
    newest one seen (by the database's own clock), so a look costs the same
    with 20 or 20,000 children waiting.
    """

    def __init__(self, prefix: str, pending: set[str], worker_wait: float | None) -> None:
        self.prefix = prefix
        self.pending = pending
        self.worker_wait = worker_wait
        self.newest_ms: int | None = None
        self.progress = time.monotonic()

    async def finished(self) -> list[Any]:
        """The pending workflows that finished since the last look, with their results."""
        from dbos import DBOS

        try:
            since = None
            if self.newest_ms is not None:
                moment = (self.newest_ms - _COMMIT_LAG_MS) / 1000
                since = datetime.fromtimestamp(moment, UTC).isoformat()
            done = await DBOS.list_workflows_async(
                workflow_id_prefix=self.prefix,
                status=_FINAL,
                completed_after=since,
                load_input=False,
                load_output=False,
            )
            for status in done:
                if status.completed_at is not None:
                    self.newest_ms = max(self.newest_ms or 0, status.completed_at)
            fresh = sorted(s.workflow_id for s in done if s.workflow_id in self.pending)
            found: list[Any] = []
            for start in range(0, len(fresh), _CHUNK):
                found += await DBOS.list_workflows_async(
                    workflow_ids=fresh[start : start + _CHUNK], load_input=False
                )
        except Exception as exc:  # noqa: BLE001 - results stay recorded; look again soon
            events.warning(events.DURABLE_POLL_FAILED, error=exception_text(exc))
            return []
        if found:
            self.progress = time.monotonic()
        self.pending.difference_update(status.workflow_id for status in found)
        return found

    async def check_workers(self) -> None:
        """Raise :class:`NoWorkers` when no child finished or ran for ``worker_wait`` s."""
        from dbos import DBOS

        if self.worker_wait is None or time.monotonic() - self.progress < self.worker_wait:
            return
        try:
            running = await DBOS.list_workflows_async(
                workflow_id_prefix=self.prefix,
                status="PENDING",
                limit=1,
                load_input=False,
                load_output=False,
            )
        except Exception as exc:  # noqa: BLE001 - a database hiccup is not a missing worker
            events.warning(events.DURABLE_POLL_FAILED, error=exception_text(exc))
            return
        if running:
            self.progress = time.monotonic()  # a worker is on a long child
            return
        raise NoWorkers(self.worker_wait, len(self.pending))
