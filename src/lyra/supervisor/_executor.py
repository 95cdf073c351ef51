"""The execution seam: how many children run, and where.

:class:`LocalExecutor` runs a run's tasks in this process under anyio. A
durable executor (:mod:`lyra.durable`) implements the same :class:`Executor`
protocol, so classification, recovery and reporting never know which one ran
them: both call :meth:`Job.run` for each task.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import anyio

from lyra import events
from lyra.delegation import (
    ChildFailure,
    DelegationResult,
    ErrorType,
    FailureCategory,
    exception_text,
)
from lyra.delegation._internal import (
    foreign_cancellation,
    log_failure,
    new_session_id,
    observed_pool,
)
from lyra.recovery import AttemptRecord, RecoveryOutcome
from lyra.supervisor._job import Job, OnOutcome, Task
from lyra.supervisor._throttle import Throttle

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Runs a job's tasks, at most ``max_concurrency`` at once."""

    async def run(
        self,
        job: Job,
        tasks: Iterable[Task],
        *,
        max_concurrency: int,
        on_outcome: OnOutcome | None = None,
        keep: bool = True,
    ) -> list[RecoveryOutcome]:
        """One outcome per task, in order; ``on_outcome`` as each finishes. A
        task whose handling raises (or meets a cancellation nobody made of the run)
        gets :func:`lost_outcome` and never disturbs the others. With
        ``keep=False`` outcomes reach ``on_outcome`` only and the list is empty:
        memory stays flat however many tasks stream in."""
        ...


class LocalExecutor:
    """In-process fan-out: a fixed pool of anyio workers pulling from the tasks.

    A pool (rather than one task per item behind a limiter) keeps memory flat
    however many items there are.
    """

    async def run(
        self,
        job: Job,
        tasks: Iterable[Task],
        *,
        max_concurrency: int,
        on_outcome: OnOutcome | None = None,
        keep: bool = True,
    ) -> list[RecoveryOutcome]:
        """Run every task here; see :class:`Executor`."""

        job.build_children()
        throttle = Throttle(checked_concurrency(max_concurrency))

        async def one(task: Task) -> RecoveryOutcome:
            async with throttle.slot():
                outcome = await job.run(task, pause=throttle.paused)
            notify(on_outcome, task, outcome)
            return outcome

        def lost(task: Task, exc: BaseException) -> RecoveryOutcome:
            outcome = lost_outcome(task, exc)
            notify(on_outcome, task, outcome)
            return outcome

        stop_listening = job.tree.listen(throttle)
        try:
            with observed_pool(throttle):
                if not keep:
                    await self.each(one, tasks, max_concurrency=max_concurrency, on_error=lost)
                    return []
                return await self.map(
                    one, list(tasks), max_concurrency=max_concurrency, on_error=lost
                )
        finally:
            stop_listening()

    async def each(
        self,
        work: Callable[[T], Awaitable[object]],
        items: Iterable[T],
        *,
        max_concurrency: int,
        on_error: Callable[[T, BaseException], object],
    ) -> None:
        """``work`` over ``items``, pulled lazily by the pool and kept nowhere; an item
        whose work raises gets ``on_error(item, exc)`` and never disturbs the others.

        The pool grows as items are taken: a worker that takes an item starts the
        next worker, up to ``max_concurrency``, so a huge limit over a few items
        starts a few workers, not the limit's worth. A stream that raises (a bad item,
        its own error) is pulled no further: the items running finish, then its error
        is raised."""
        checked_concurrency(max_concurrency)
        broken: list[Exception] = []

        def pulled() -> Iterator[T]:
            try:
                yield from items
            except Exception as exc:  # noqa: BLE001 - the caller's stream broke, whatever it raised
                broken.append(exc)  # the items running finish first, their outcomes kept

        pending = pulled()
        started = 1

        async def worker() -> None:
            nonlocal started
            for item in pending:
                if started < max_concurrency:
                    started += 1
                    group.start_soon(worker)
                try:
                    await work(item)
                except BaseException as exc:
                    if not isolated(exc):
                        raise
                    on_error(item, exc)

        async with anyio.create_task_group() as group:
            group.start_soon(worker)
        for item in pending:  # (a pool stopped that nobody cancelled: see map)
            on_error(item, RuntimeError("the pool stopped first"))
        if broken:
            raise broken[0]

    async def map(
        self,
        work: Callable[[T], Awaitable[R]],
        items: Sequence[T],
        *,
        max_concurrency: int,
        on_error: Callable[[T, BaseException], R],
    ) -> list[R]:
        """``work`` over ``items`` in a pool, results in order; an item whose work
        raises gets ``on_error(item, exc)`` and never disturbs the others."""
        checked_concurrency(max_concurrency)
        results: list[Any] = [_UNRUN] * len(items)
        pending = iter(enumerate(items))

        async def worker() -> None:
            for index, item in pending:
                try:
                    results[index] = await work(item)
                except BaseException as exc:
                    if not isolated(exc):
                        raise
                    results[index] = on_error(item, exc)

        async with anyio.create_task_group() as group:
            for _ in range(min(max_concurrency, len(items))):
                group.start_soon(worker)
        for index, result in enumerate(results):  # (a pool stopped that nobody cancelled)
            if result is _UNRUN:
                results[index] = on_error(items[index], RuntimeError("the pool stopped first"))
        return results


_UNRUN = object()
"""A slot of :meth:`LocalExecutor.map` whose item has not run yet."""


def checked_concurrency(max_concurrency: object) -> int:
    """``max_concurrency`` itself, or a clear error (not a bool, a float, a string)."""
    if type(max_concurrency) is not int:
        raise TypeError(f"max_concurrency must be a whole number ≥ 1, not {max_concurrency!r}")
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
    return max_concurrency


def isolated(exc: BaseException) -> bool:
    """True for an item's error the pool keeps to that item (called in the worker that
    ran it): any exception, and a cancellation nobody made of the pool -- a future
    someone else cancelled, or a stray ``task.cancel()`` of the worker. An interrupt,
    an exit and a real cancellation pass through. (A stray cancellation is withdrawn
    from the task as it is judged: ask once, where the error is handled.)"""
    if isinstance(exc, Exception):
        return True
    if _interrupts(exc):
        _note_interrupt()
        return False
    return foreign_cancellation(exc) or _stray(exc)


_interrupted: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
"""Event loops an interrupt or an exit has passed through: each is being left, and
``asyncio.run`` cancels every task still in it with a plain ``task.cancel()``, which
is no stray one (see :func:`_stray`): the pool stops, it starts no other child."""


def _interrupts(exc: BaseException) -> bool:
    """True for a ``KeyboardInterrupt`` or a ``SystemExit``, or a group holding one."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_interrupts(inner) for inner in exc.exceptions)
    return isinstance(exc, KeyboardInterrupt | SystemExit)


def _note_interrupt() -> None:
    with contextlib.suppress(RuntimeError):  # (no asyncio loop runs here: nothing to note)
        _interrupted.add(asyncio.get_running_loop())


def _stray(exc: BaseException) -> bool:
    """True for a cancellation of this worker that neither lyra nor anyio made (no scope
    around it is cancelled) and that came all the way out of an item: a child called
    ``task.cancel()`` on the task it ran in, as a watchdog it left behind does later, in
    another child's time. Whoever cancels a task to catch it (``asyncio.timeout``, a
    task group) did so inside the item, so nobody waits for this one: it is withdrawn,
    and it fails the item it hit, never the pool."""
    if not isinstance(exc, asyncio.CancelledError):
        return False  # (another backend's cancellation is always real)
    task = asyncio.current_task()
    if task is None or anyio.current_effective_deadline() == -math.inf:
        return False  # the run's own cancellation
    if task.get_loop() in _interrupted:
        return False  # the loop's end, after an interrupt
    while task.cancelling():
        task.uncancel()
    return True


def notify(on_outcome: OnOutcome | None, task: Task, outcome: RecoveryOutcome) -> None:
    """Call ``on_outcome``; its failure is logged, never passed to other tasks (a
    cancellation nobody made of the run included: see :func:`isolated`)."""
    if on_outcome is None:
        return
    try:
        on_outcome(task, outcome)
    except BaseException as exc:  # a callback's bug must not lose the outcome
        if not isolated(exc):
            raise
        callback_failed(task, exc)


def callback_failed(task: Task, exc: BaseException) -> None:
    """``on_outcome`` raised ``exc`` for ``task``: its own bug, logged."""
    events.error(events.ON_OUTCOME_FAILED, subject=task.subject, error=exception_text(exc))


def lost_outcome(task: Task, exc: BaseException) -> RecoveryOutcome:
    """The outcome of a task whose handling broke (lyra's own bug), or that a
    cancellation nobody made of the run stopped: a failure that says so, contained
    to that task."""
    if not isinstance(exc, Exception):  # (what isolated() lets through: not lyra's bug)
        return unrun_outcome(
            task,
            message=f"Cancelled by code outside lyra: {exception_text(exc)}",
            evidence="a task.cancel() lyra did not make (a watchdog a child left behind), "
            "or a future someone else cancelled, stopped the task; no other task is affected",
            actions=("Run it again", "Find the code that cancels a task it does not own"),
            retryable=True,
        )
    text = f"Internal error in lyra: {exception_text(exc)}"
    events.error(events.TASK_INTERNAL_ERROR, subject=task.subject, error=text)
    return unrun_outcome(
        task,
        message=text,
        evidence="lyra's own error while handling the task; no other task is affected",
        actions=("Report the error; the run directory's events.jsonl has details",),
    )


def unrun_outcome(
    task: Task,
    *,
    message: str,
    evidence: str,
    actions: tuple[str, ...],
    retryable: bool = False,
    **event_fields: Any,
) -> RecoveryOutcome:
    """A failed outcome for a task whose attempts produced none (lyra's own error, a
    process that kept dying): ``tool_error``, with the words given. Its
    ``delegation_failed`` is written here (with ``event_fields``): no attempt lived to
    write one, and the log must count the task as the output does."""
    session_id = new_session_id()
    failure = ChildFailure(
        category=FailureCategory.TOOL_ERROR,
        message=message,
        session_id=session_id,
        duration=0.0,
        blocked_on=message,
        suggested_retry=retryable,
        error_type=ErrorType.UNKNOWN,
        evidence=evidence,
        suggested_actions=actions,
    )
    result = DelegationResult(
        status="failed",
        output=None,
        failure=failure,
        session_id=session_id,
        duration=0.0,
        subject=task.subject,
    )
    record = AttemptRecord(
        number=1, strategy="initial", prompt=task.prompt, timeout=0.0, wait=0.0, result=result
    )
    log_failure(
        failure, session_id=session_id, subject=task.subject, attempt=record.number, **event_fields
    )
    return RecoveryOutcome(task_id=f"lost-{session_id}", result=result, attempts=(record,))
