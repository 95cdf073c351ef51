"""The DBOS side: the task workflow, its checkpointed steps, starting and stopping DBOS.

This is the only module that imports ``dbos`` (about a second of imports), and
it is imported only by the durable paths.

Each task is one workflow, ``lyra.task(job, task)``, that runs the task's
recovery loop -- strategies, budget, events, classification and the report,
exactly the code the local path runs (:meth:`lyra.supervisor.Job.run`) --
with each attempt its own step, ``lyra.task_attempt``, through the loop's
:class:`lyra.recovery.Replay` seam. The job names its child by an importable
name (:class:`lyra.ChildRef`), so any process -- this one after a crash, or a
``lyra worker`` on another machine -- builds the same child.

DBOS records each attempt's result, with the child's ``ctx.state`` after it,
before the next one starts, so a finished attempt is never run again: not
after a crash, not on ``--resume``, not when another worker recovers the
workflow. On recovery DBOS replays the recorded attempts (returning their
results without running them), the workflow restores the state from each, and
the loop continues with the attempt that was interrupted, which runs again
from its start -- with the state the last finished attempt left.

**Events are written only once their checkpoint is saved.** An attempt's
events are held while it runs and recorded with its result; the workflow
writes them after DBOS has saved that result, so the log never shows an
attempt finished that a crash would run again. Every event of a task gets a
stable ``event_id`` (``<workflow id>#<n>``, the same on every replay), and an
event whose ID the log already holds is not written again (see
:class:`TaskLog`).

Replay takes the same path because the workflow body is a function of the
recorded results only: the backoff jitter is drawn from a generator seeded
with the task ID (derived from the workflow ID), a time budget is charged
with the recorded durations and waits rather than read from a clock, a token
budget with the recorded usage, and the wait before a retry is a durable
``DBOS.sleep`` (its wake-up time is recorded; in testing mode it is only
recorded, for the whole run).

Inputs, results and step outputs are stored as JSON (:class:`JsonSerializer`),
never pickles, so no process ever unpickles what another wrote into a shared
database.

Test hooks (:class:`lyra.settings.Settings`, read when DBOS launches): with
``LYRA_TEST_INVOCATION_LOG``, every start of an attempt appends
``<subject> <attempt> <pid> <executor id>`` (tab-separated) to that file (tests count
lines to prove that no finished attempt ran twice); with ``LYRA_TEST_PAUSE``
set to ``before_checkpoint`` or ``after_checkpoint``, every attempt stops for
an hour at that point (noting ``paused:<point>`` as a fifth column), so that a
test can kill the process in that window.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import orjson
import sqlalchemy as sa
from dbos import DBOS, DBOSClient, DBOSConfig, PortableWorkflowError, Serializer
from dbos import _dbos as dbos_internals

from lyra import events
from lyra.delegation import Budget, DelegationResult, exception_text
from lyra.delegation._internal import Account
from lyra.durable import _dbos_log
from lyra.durable import _questions as questions
from lyra.durable._database import storage_failure
from lyra.durable._events import deliver, deliver_unsaved
from lyra.durable._liveness import Liveness
from lyra.durable._spec import JobSpec
from lyra.errors import ConfigurationError
from lyra.recovery import (
    AnswerSource,
    Attempt,
    Plan,
    RecoveryOutcome,
    RecoveryPolicy,
    Replay,
    attempt_plan,
    is_testing,
)
from lyra.recovery import sleep as testing_sleep
from lyra.settings import settings
from lyra.supervisor import Job, Task, unrun_outcome

APP = "lyra"
VERSION = "lyra-durable-6"
"""The workflows' shape, not lyra's release: recovery only resumes workflows of
the same application version, and bumping this orphans unfinished runs."""
QUEUE = "lyra_children"
WORKFLOW = "lyra.task"
STEP = "lyra.task_attempt"
MAX_CRASHES = settings().max_crashes
"""A child whose process ends this many times while it runs (``LYRA_MAX_CRASHES``)
ends as a failed task: DBOS counts each start of a workflow and, past its limit,
gives up on it (``MAX_RECOVERY_ATTEMPTS_EXCEEDED``); lyra turns that into the
task's failure, and the run goes on (see :func:`crashed_outcome`). A start that
ended in a clean stop (Ctrl+C, SIGTERM) is taken off that count (:func:`destroy`)."""

QUEUE_POLL = 0.05
"""Seconds between a worker's looks at the queue (each look is one short transaction)."""
_STORED: Any = {"result": True, "attempts": {"__all__": {"result": {"report"}}}}
"""What a task's output leaves out: the last result (it is the last attempt's) and
the reports (rendered again from the fields when read)."""
_ERROR = "__lyra_error__"


class JsonSerializer(Serializer):
    """DBOS's serializer for everything lyra stores: compact JSON (orjson), values
    it cannot encode as their text; an exception as its name and message."""

    def serialize(self, data: Any) -> str:
        if isinstance(data, BaseException):
            data = {_ERROR: {"name": type(data).__name__, "message": exception_text(data)}}
        return orjson.dumps(data, default=str).decode()

    def deserialize(self, serialized_data: str) -> Any:
        value = orjson.loads(serialized_data)
        if isinstance(value, dict) and _ERROR in value:
            return PortableWorkflowError(value[_ERROR]["message"], value[_ERROR]["name"])
        return value

    def name(self) -> str:
        return "lyra_json"


@dataclasses.dataclass(frozen=True)
class _Hooks:
    """The test hooks, read once per launch (settings are costly to read per attempt)."""

    invocation_log: Path | None = None
    pause: str | None = None


_hooks = _Hooks()
_running: set[str] = set()
"""The task workflows whose body runs in this process and has not ended yet."""


@functools.lru_cache(maxsize=16)
def _job(spec: str) -> Job:
    """The job for a serialised spec, built once per process (its child too)."""
    return JobSpec.model_validate_json(spec).job()


async def run_one_attempt(
    spec: str,
    task: str,
    task_id: str,
    plan: dict[str, Any],
    number: int,
    state: dict[str, Any],
    budget_left: dict[str, Any] | None,
    answers: dict[str, str],
) -> dict[str, Any]:
    """One attempt of a task's recovery loop, from the child state ``state``: its
    result, the state after it and its events (held, not yet written). The
    attempt may spend what the task's budget had left when it began; ``answers``
    are the answers its questions got so far."""
    job, work = _job(spec), Task.model_validate_json(task)
    _note_invocation(work.subject or task_id, number)
    left = Budget.model_validate(budget_left) if budget_left is not None else None
    progress = orjson.loads(orjson.dumps(state, option=orjson.OPT_NON_STR_KEYS))  # a JSON copy
    attempt = _plan(plan)
    with events.capturing(hold=True) as held:
        result = await attempt_plan(
            job.child_at(attempt.child),
            Attempt(attempt, number, progress, answers=answers),
            subject=work.subject,
            context=work.context,
            task_id=task_id,
            limits=job.limits.but(idle_timeout=work.idle_timeout),
            account=Account.for_budget(left),
            tree=job.tree,
        )
    return {
        "result": result.model_dump(mode="json", exclude={"report"}),
        "state": progress,
        "events": list(held),
    }


@DBOS.step(name=STEP)
async def task_attempt(
    spec: str,
    task: str,
    task_id: str,
    plan: dict[str, Any],
    number: int,
    state: dict[str, Any],
    budget_left: dict[str, Any] | None,
    answers: dict[str, str],
) -> dict[str, Any]:
    """:func:`run_one_attempt` as a step: DBOS records what it returns."""
    recorded = await run_one_attempt(spec, task, task_id, plan, number, state, budget_left, answers)
    await pause("before_checkpoint", task, number)
    return recorded


# DBOS allows the first start plus max_recovery_attempts restarts.
@DBOS.workflow(name=WORKFLOW, max_recovery_attempts=MAX_CRASHES - 1)
async def task_workflow(spec: str, task: str) -> dict[str, Any]:
    """A task's recovery loop, one checkpointed step per attempt -- except, under
    a policy whose questions do not wait (``answer_wait=0``), the last attempt
    it allows: none can follow it, so the workflow's own output is its
    checkpoint (one transaction fewer; with ``max_retries=0``, every task's only
    attempt). Where questions wait, an answer may follow any attempt, and the
    attempt before it must never run again."""
    job, work = _job(spec), Task.model_validate_json(task)
    workflow_id = DBOS.workflow_id
    assert workflow_id is not None  # inside a workflow
    task_id = task_id_of(workflow_id)
    log = TaskLog(workflow_id)
    _running.add(workflow_id)  # until it ends; a stop of this process is one of DBOS's starts

    async def run_attempt(attempt: Attempt) -> DelegationResult:
        log.write_body(body)  # the loop's own events so far (a recovery_attempt)
        left = attempt.budget_left.model_dump() if attempt.budget_left is not None else None
        plan = _plan_data(attempt.plan)
        answers = dict(attempt.answers)
        args = (spec, task, task_id, plan, attempt.number, attempt.state, left, answers)
        if attempt.number > job.policy.max_retries and not job.policy.answer_wait:
            # The last (an answered question, which is no retry, cannot follow it):
            # saved with the output.
            recorded = await run_one_attempt(*args)
            log.hold()
        else:
            recorded = await task_attempt(*args)
            await pause("after_checkpoint", task, attempt.number)
        log.write(recorded["events"])
        attempt.state.clear()
        attempt.state.update(recorded["state"])
        return DelegationResult.model_validate(recorded["result"])

    try:
        with events.capturing(hold=True) as body:
            mailbox = _mailbox(job.policy, work.subject, lambda: log.write_body(body))
            replay = Replay(run_attempt, _durable_sleep, mailbox)
            outcome = await job.run(work, task_id=task_id, replay=replay)
    except Exception as exc:
        why = storage_failure(exc)
        if why is None:
            _running.discard(workflow_id)  # DBOS records this end
            raise
        raise StorageGaveOut(why) from exc
    except asyncio.CancelledError:
        raise  # the process stops cleanly (Ctrl+C, SIGTERM): not counted (see destroy)
    except BaseException:
        _running.discard(workflow_id)  # a child's own exit or interrupt takes the process
        raise  # down: a crash, counted, as the next start finds
    _running.discard(workflow_id)
    log.write_body(body)
    if log.held:
        deliver_unsaved(log.records[log.held_from :])
        await pause("before_checkpoint", task, len(outcome.attempts))
    return {
        "outcome": outcome.model_dump(mode="json", exclude=_STORED),
        "events": log.records,
        "held": log.held,
        "executor_id": DBOS.executor_id,
    }


class StorageGaveOut(BaseException):
    """The checkpoint storage failed under a task (a full disk). A BaseException on
    purpose: DBOS records an ``Exception`` as the workflow's end (``ERROR``, never
    run again), where this leaves it pending, for a resume to finish once there
    is room. The executor stops the run on it."""


class TaskLog:
    """A task's events in order, each with its stable ``event_id``, written as
    they become safe to write (see :func:`lyra.durable._events.deliver`).

    The order is the same on every replay: the loop's own events are a function
    of the recorded results, and an attempt's events are recorded with it. From
    an attempt whose checkpoint is the workflow's output on (:meth:`hold`),
    events are only kept: whoever reads the saved output writes them.
    """

    def __init__(self, workflow_id: str) -> None:
        self.prefix = f"{workflow_id}#"
        self.records: list[dict[str, Any]] = []
        self.held = False
        self.held_from = 0
        self._body_taken = 0

    def hold(self) -> None:
        """Keep every event from now on; none is written before the output is saved."""
        if not self.held:
            self.held, self.held_from = True, len(self.records)

    def write_body(self, body: list[dict[str, Any]]) -> None:
        """The loop's own events emitted since the last call."""
        start, self._body_taken = self._body_taken, len(body)
        self.write(body[start:])

    def write(self, records: list[dict[str, Any]]) -> None:
        """Number the records, keep them, and deliver them unless held."""
        fresh = [
            {**record, "event_id": f"{self.prefix}{len(self.records) + i}"}
            for i, record in enumerate(records)
        ]
        self.records += fresh
        if fresh and not self.held:
            deliver(fresh)


async def _durable_sleep(seconds: float) -> None:
    """The wait before a retry: a DBOS sleep (its wake-up time is recorded, so a
    replay does not wait again), or only recorded in testing mode."""
    if is_testing():
        await testing_sleep(seconds)
    else:
        await DBOS.sleep_async(seconds)


def _mailbox(
    policy: RecoveryPolicy, subject: str | None, flush: Callable[[], None]
) -> AnswerSource | None:
    """Where a durable task's question waits for its answer: the workflow's mailbox,
    for up to ``policy.answer_wait`` seconds (see :mod:`lyra.durable._questions`).
    The question is recorded in the workflow's attributes, so it survives a restart;
    so does an answer sent meanwhile. ``flush`` writes the task's events so far: the
    log says at once that the task waits."""
    wait = policy.answer_wait
    if not wait:
        return None

    async def answer(question: str) -> str | None:
        workflow_id = DBOS.workflow_id
        assert workflow_id is not None  # inside a workflow
        marks = questions.parked(question, subject, wait)
        await DBOS.update_workflow_attributes_async(workflow_id, marks, merge=True)
        events.info(
            events.QUESTION_PARKED,
            question=question,
            subject=subject,
            workflow_id=workflow_id,
            answer_wait=wait,
        )
        flush()
        reply = await DBOS.recv_async(questions.topic(question), timeout_seconds=wait)
        await DBOS.update_workflow_attributes_async(workflow_id, questions.CLEARED, merge=True)
        return reply if isinstance(reply, str) else None

    return answer


def _plan_data(plan: Plan) -> dict[str, Any]:
    return {**dataclasses.asdict(plan), "subtasks": list(plan.subtasks)}


def _plan(data: Mapping[str, Any]) -> Plan:
    return Plan(**{**data, "subtasks": tuple(data["subtasks"])})


def task_id_of(workflow_id: str) -> str:
    """The task ID of a workflow's recovery loop: the same on every replay."""
    return f"task-{workflow_id}"


def crashed_outcome(task: Task, workflow_id: str) -> RecoveryOutcome:
    """The outcome of a task DBOS gave up on: its process ended MAX_CRASHES times
    while it ran. Retryable: the cause (memory, a native crash, a kill) may be
    gone in another run. Its events: ``task_crash_loop``, and the
    ``delegation_failed`` of the attempt that never ended (none of its own events
    was ever written: they wait for a checkpoint), so the log counts the task as
    the output does."""
    task_id = task_id_of(workflow_id)
    events.error(events.TASK_CRASH_LOOP, subject=task.subject, task_id=task_id, crashes=MAX_CRASHES)
    times = "once" if MAX_CRASHES == 1 else f"{MAX_CRASHES} times"
    return unrun_outcome(
        task,
        message=f"The process running this child ended {times} before it finished (a "
        "crash, an out-of-memory kill, a SIGKILL); lyra stopped resuming it",
        evidence=f"rule 6: the process died {times} while this child ran (LYRA_MAX_CRASHES)",
        actions=(
            "Find what ends the process while this child runs (memory, a native crash)",
            "Run this task again in a new run once that is fixed",
        ),
        retryable=True,
        task_id=task_id,
    )


def decode(result: Mapping[str, Any]) -> RecoveryOutcome:
    """The outcome a :func:`task_workflow` returned."""
    stored = result["outcome"]
    return RecoveryOutcome.model_validate({**stored, "result": stored["attempts"][-1]["result"]})


def _note_invocation(subject: str, attempt: int, note: str = "") -> None:
    path = _hooks.invocation_log
    if path is not None:
        extra = f"\t{note}" if note else ""
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"{subject}\t{attempt}\t{os.getpid()}\t{DBOS.executor_id}{extra}\n")


async def pause(point: str, task: str, attempt: int) -> None:
    """Tests only: stop here (for an hour) so that a test can kill the process."""
    if _hooks.pause == point:
        work = Task.model_validate_json(task)
        _note_invocation(work.subject or "", attempt, f"paused:{point}")
        await anyio.sleep(3600)


# -- starting and stopping ------------------------------------------------------


def sqlite_engine(url: str) -> sa.Engine:
    """DBOS's SQLite engine settings plus write-ahead logging: one fsync per commit
    instead of several, still durable across a crash or power loss."""
    engine = sa.create_engine(url, pool_size=20, max_overflow=0, pool_timeout=30)

    @sa.event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = "IMMEDIATE"  # as DBOS's own engine: serialise writers
        for pragma in ("busy_timeout=30000", "foreign_keys=ON", "journal_mode=WAL"):
            dbapi_conn.execute(f"PRAGMA {pragma}")
        dbapi_conn.execute("PRAGMA synchronous=FULL")

    return engine


@contextmanager
def dbos_client(url: str) -> Iterator[Any]:
    """A DBOS client on a run's database, closed after use (``lyra answer``). It
    launches no DBOS: nothing of the run runs in the process that holds it."""
    engine = sqlite_engine(url) if url.startswith("sqlite") else None
    client = (
        DBOSClient(system_database_engine=engine, serializer=JsonSerializer())
        if engine is not None
        else DBOSClient(system_database_url=url, serializer=JsonSerializer())
    )
    try:
        yield client
    finally:
        client.destroy()
        if engine is not None:
            engine.dispose()  # a client leaves an engine it was given open


def reopen_stopped_by_storage(engine: sa.Engine) -> int:
    """Before DBOS starts: children whose end DBOS recorded as an error of the
    checkpoint storage (it could still write that much once the disk was full) go
    back to pending, so that DBOS's recovery at launch finishes them from their last
    checkpoint. The disk stopped the run, not them. Returns how many.

    DBOS has no public way to resume a workflow it recorded as failed, so this
    writes its two tables directly; the full-disk test guards the schema."""
    if not sa.inspect(engine).has_table("workflow_status"):
        return 0  # a new run: nothing recorded yet
    with engine.begin() as conn:
        ended = conn.execute(
            sa.text(
                "SELECT o.workflow_uuid, o.error FROM workflow_output o JOIN workflow_status s "
                "ON s.workflow_uuid = o.workflow_uuid WHERE s.status = 'ERROR' AND s.name = :name"
            ),
            {"name": WORKFLOW},
        ).all()
        stopped = [row[0] for row in ended if row[1] and storage_failure(Exception(row[1]))]
        for workflow_id in stopped:
            where = {"id": workflow_id}
            conn.execute(sa.text("DELETE FROM workflow_output WHERE workflow_uuid = :id"), where)
            conn.execute(
                sa.text(
                    "UPDATE workflow_status SET status = 'PENDING', completed_at = NULL "
                    "WHERE workflow_uuid = :id AND status = 'ERROR'"
                ),
                where,
            )
    return len(stopped)


def launch(
    url: str,
    *,
    executor_id: str | None = None,
    listen: list[str] | None = None,
    engine: sa.Engine | None = None,
) -> None:
    """Configure and launch DBOS in this process (blocking; call it from a thread)."""
    global _hooks
    if dbos_internals._dbos_global_instance is not None:
        raise ConfigurationError("DBOS is already running in this process")
    now = settings()
    _hooks = _Hooks(now.test_invocation_log, now.test_pause)
    config: DBOSConfig = {
        "name": APP,
        "system_database_url": url,
        "application_version": VERSION,
        "serializer": JsonSerializer(),
        "log_level": "WARNING",
        # Its listener sleeps this long between polls, and shutting down waits for it.
        "notification_listener_polling_interval_sec": 0.1,
    }
    if executor_id is not None:
        config["executor_id"] = executor_id
    if engine is not None:
        config["system_database_engine"] = engine
    _dbos_log.route()  # before DBOS() adds a console of its own
    DBOS(config=config)
    dbos_logger = logging.getLogger("dbos")
    dbos_logger.addFilter(_dbos_log.no_launch_failure)  # lyra says it itself, in one line
    try:
        if listen is not None:
            DBOS.listen_queues(listen)
        DBOS.launch()
    except BaseException:
        DBOS.destroy()
        raise
    finally:
        dbos_logger.removeFilter(_dbos_log.no_launch_failure)


def destroy() -> None:
    """Stop DBOS in this process (blocking); unfinished workflows stay pending, and the
    start of each one running here is not counted as a crash (:func:`_stopped_cleanly`)."""
    with suppress(Exception):  # (a full disk): those starts stay counted, as a crash's
        _stopped_cleanly()
    DBOS.destroy(workflow_completion_timeout_sec=0)


def _stopped_cleanly() -> int:
    """Take the workflows this process runs, and leaves unfinished, off DBOS's count of
    their starts: DBOS counts a start before it runs, so a stop that took nothing down
    (Ctrl+C, SIGTERM, a cancelled run) would else count as a crash, and five of them
    fail a healthy child. A process that dies never gets here: its starts stay counted.
    Returns how many."""
    stopped, instance = sorted(_running), dbos_internals._dbos_global_instance
    _running.clear()
    if not stopped or instance is None:
        return 0
    sys_db = instance._sys_db
    status = sys_db.tables.workflow_status
    with sys_db.engine.begin() as conn:
        done = conn.execute(
            status.update()
            .where(status.c.workflow_uuid.in_(stopped))
            .where(status.c.status == "PENDING", status.c.recovery_attempts > 0)
            .values(recovery_attempts=status.c.recovery_attempts - 1)
        )
    return int(done.rowcount)


def ensure_queue(
    *, global_concurrency: int | None = None, worker_concurrency: int | None = None
) -> bool:
    """Create the children's queue if needed and apply the limits given (blocking).

    The limits live in the queue's database row, so they hold for every
    process: the global one across all workers, the worker one on each.
    Returns True when a limit changed: workers see it on their next look at
    the queue (within ``2 * QUEUE_POLL``), so wait that long before enqueueing.
    """
    changed = False
    queue = DBOS.register_queue(
        QUEUE,
        global_concurrency=global_concurrency,
        worker_concurrency=worker_concurrency,
        polling_interval_sec=QUEUE_POLL,
        on_conflict="never_update",
    )
    if global_concurrency is not None and queue.global_concurrency != global_concurrency:
        queue.set_global_concurrency(global_concurrency)
        changed = True
    if worker_concurrency is not None and queue.worker_concurrency != worker_concurrency:
        queue.set_worker_concurrency(worker_concurrency)
        changed = True
    return changed


def reap(liveness: Liveness) -> int:
    """Hand the running children of dead executors back to the queue (blocking).

    Returns how many were recovered. Safe to run from every process at once:
    DBOS re-enqueues a workflow only while the dead executor still owns it.
    """
    pending = DBOS.list_workflows(
        status="PENDING", queue_name=QUEUE, name=WORKFLOW, load_input=False, load_output=False
    )
    owners = sorted({w.executor_id for w in pending if w.executor_id})
    recovered = 0
    for owner in owners:
        if liveness.is_alive(owner):
            continue
        handles = DBOS._recover_pending_workflows([owner])
        recovered += len(handles)
        if handles:
            events.warning(
                events.CHILDREN_RECOVERED,
                dead_executor=owner,
                children=len(handles),
                executor_id=liveness.executor_id,
            )
    return recovered
