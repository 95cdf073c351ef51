"""Detached delegations: started now, collected later, by id.

:class:`Delegations` runs each delegation in the background of its own task
group (enter it with ``async with``) and answers for it by id: its state, the
steps so far, its spend and time left, the report once it finished, the
question its child waits on. Where the children run is its
:class:`Runner`'s business: in this process (:class:`InProcess`, the
default; everything is gone when the process ends), or durably
(:class:`lyra.detached.DurableRunner`: a restarted process finds every
delegation again, and resumes the unfinished ones without running any
finished attempt twice).

A finished delegation is kept for ``keep_for`` seconds, then forgotten.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol, Self

import anyio
import anyio.abc

from lyra import events
from lyra.delegation import Child, DelegationResult, Usage
from lyra.detached._models import FINISHED, DelegationRequest, DelegationStatus, State
from lyra.detached._watch import KEY, Observed, attempt, forget, release, stop, time_left
from lyra.errors import LyraError
from lyra.supervisor import Supervisor, Task, isolated, lost_outcome

KEEP_FOR = 3600.0
"""Seconds a finished delegation stays readable, by default."""
_PROMPT_SHOWN = 200
_RESTORE_WAIT = 60.0
"""Seconds a store waits, as it starts, for the recorded results of the delegations an
earlier process finished (read from the database, not run again)."""
_CANCEL_WAIT = 5.0
"""Seconds a cancel waits for its delegation's run to end (a cut run ends at once; one
stuck past this is said cancelled all the same)."""


class UnknownDelegation(LyraError, LookupError):
    """No delegation has this id (never started here, or forgotten since it finished)."""


class NoQuestion(LyraError, LookupError):
    """The delegation waits for no answer: its child asked nothing, or not any more."""


Asker = Callable[[str], Awaitable[str | None]]
"""How a delegation's child asks (``ctx.ask``): the question in, the answer out
(``None``: none will come)."""


@dataclass(frozen=True, slots=True)
class Recorded:
    """A delegation an earlier process started (what a durable runner finds)."""

    delegation_id: str
    request: DelegationRequest
    created_at: float
    finished_at: float | None
    cancelled: bool
    question: str | None = None
    """The question its child left waiting for an answer, if any."""


class Runner(Protocol):
    """Where a store's children run."""

    async def start(self) -> list[Recorded]:
        """Get ready; the delegations an earlier process left, oldest first."""
        ...

    async def run(
        self,
        delegation_id: str,
        request: DelegationRequest,
        recorded: Callable[[], None],
        ask: Asker,
    ) -> DelegationResult:
        """Run the delegation to its end (or wait for the end of a recorded one);
        ``recorded()`` as soon as a crash of this process could no longer lose it;
        ``ask`` answers the child's questions, where the runner can pass it on."""
        ...

    async def cancel(self, delegation_id: str) -> bool | None:
        """Make sure the delegation is never resumed (its running task is cancelled by
        the store): ``True`` when it is now recorded as cancelled (that is its outcome,
        whatever its run still returns), ``False`` when it had finished already (its
        recorded result stands: its run is not cut), ``None`` when nothing is recorded
        (in process: the run is cut, and a result it returned first stands)."""
        ...

    async def close(self) -> None:
        """Release what :meth:`start` took."""
        ...


class InProcess:
    """Children run in this process, under a :class:`~lyra.Supervisor` each; nothing
    outlives it."""

    def __init__(self, child: Child) -> None:
        self._child = Observed(child)

    async def start(self) -> list[Recorded]:
        return []

    async def run(
        self,
        delegation_id: str,
        request: DelegationRequest,
        recorded: Callable[[], None],
        ask: Asker,
    ) -> DelegationResult:
        recorded()  # as recorded as it will ever be: in this process's memory
        return await Supervisor(self._child, budget=request.budget, answer=ask).delegate(
            request.prompt,
            timeout=request.timeout,
            idle_timeout=request.idle_timeout,
            context={KEY: delegation_id},
        )

    async def cancel(self, delegation_id: str) -> None:
        return None  # nothing recorded: a child that finished before its cut stands

    async def close(self) -> None:
        return None


@dataclass(eq=False)
class _Delegation:
    delegation_id: str
    request: DelegationRequest
    created_at: float
    updated_at: float
    state: State = "working"
    result: DelegationResult | None = None
    finished_at: float | None = None
    question: str | None = None
    answered: anyio.Event | None = None
    """Set when the question that waits gets its answer (``None``: none waits)."""
    answer: str | None = None
    recorded_question: str | None = None
    """The question a restored delegation's child left waiting, until its run asks it
    again: an answer given meanwhile is the one that run gets."""
    steps: tuple[str, ...] = ()
    """The steps of its last attempt in this process, once it ended."""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    changed: anyio.Event = field(default_factory=anyio.Event)
    recorded: anyio.Event = field(default_factory=anyio.Event)
    """Set once the runner holds it (a durable one: in its database)."""
    cancel_recorded: bool = False
    """The runner recorded it as cancelled: whatever its run returns, it is cancelled."""

    def move(self, state: State, now: float) -> None:
        """Change state and wake whoever waits for a change."""
        self.state, self.updated_at = state, now
        if state in FINISHED:
            self.finished_at = now
        self.changed.set()
        self.changed = anyio.Event()


class Delegations:
    """A store of detached delegations; see the module docstring.

    ``child`` runs them in this process; ``runner`` runs them elsewhere (give
    one or the other). ``keep_for``: seconds a finished delegation stays
    readable. ``clock``: seconds since the epoch (tests move it).
    """

    def __init__(
        self,
        child: Child | None = None,
        *,
        runner: Runner | None = None,
        keep_for: float = KEEP_FOR,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not keep_for > 0:
            raise ValueError(f"keep_for must be a positive number of seconds, not {keep_for!r}")
        if child is not None and runner is None:
            runner = InProcess(child)
        elif runner is None or child is not None:
            raise TypeError("give Delegations a child or a runner (one of them)")
        self.runner: Runner = runner
        self.keep_for = keep_for
        self._clock = clock
        self._delegations: dict[str, _Delegation] = {}
        self._group: anyio.abc.TaskGroup | None = None
        self._stack: AsyncExitStack | None = None

    # -- lifecycle ---------------------------------------------------------------

    async def __aenter__(self) -> Self:
        async with AsyncExitStack() as stack:
            recorded = await self.runner.start()
            stack.push_async_callback(self.runner.close)
            self._group = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(self._group.cancel_scope.cancel)  # unfinished ones stay recorded
            finished = [self._restore(found) for found in recorded]
            with anyio.move_on_after(_RESTORE_WAIT):  # (then they say so when they have it)
                for delegation in finished:
                    if delegation is not None:
                        await _ended(delegation)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._stack, self._group = self._stack, None, None
        if stack is not None:
            await stack.__aexit__(*exc_info)  # type: ignore[arg-type]

    def _restore(self, found: Recorded) -> _Delegation | None:
        """A delegation an earlier process started: cancelled, forgotten, or run
        again (a finished one returns its recorded result without running: that one
        is returned, for the store to say it finished before it serves anyone)."""
        if found.finished_at is not None and found.finished_at + self.keep_for < self._clock():
            return None
        delegation = _Delegation(
            found.delegation_id, found.request, found.created_at, found.created_at
        )
        self._delegations[found.delegation_id] = delegation
        if found.cancelled:
            delegation.move("cancelled", found.finished_at or found.created_at)
            return None
        if found.question is not None and found.finished_at is None:  # answerable at once
            delegation.question = delegation.recorded_question = found.question
            delegation.answered = anyio.Event()
            delegation.move("input_required", self._clock())
        self._spawn(delegation)
        return delegation if found.finished_at is not None else None

    # -- the operations ----------------------------------------------------------------

    async def start(self, request: DelegationRequest) -> DelegationStatus:
        """Start a delegation in the background; its status (with its id) as soon as the
        runner holds it (a durable runner: once it is in the database, so that a crash
        from then on loses nothing)."""
        now = self._clock()
        delegation = _Delegation(f"d-{secrets.token_hex(8)}", request, now, now)
        self._delegations[delegation.delegation_id] = delegation
        self._spawn(delegation)
        await delegation.recorded.wait()
        events.info(events.DETACHED_STARTED, delegation_id=delegation.delegation_id)
        return self._status(delegation)

    def status(self, delegation_id: str) -> DelegationStatus:
        """Where the delegation is now; :class:`UnknownDelegation` for an unknown id."""
        return self._status(self._find(delegation_id))

    async def result(self, delegation_id: str, wait: float = 0.0) -> DelegationStatus:
        """The delegation's status, its report included once it finished. Waits up to
        ``wait`` seconds for it to finish, or for its child to ask a question."""
        delegation = self._find(delegation_id)
        with anyio.move_on_after(wait):
            while delegation.state == "working":
                await delegation.changed.wait()
        return self._status(delegation)

    async def cancel(self, delegation_id: str) -> DelegationStatus:
        """Stop the delegation (no report is made); its status once its run ended.

        A finished one stays as it is -- and so does one whose child finished while the
        cancel was on its way: its report is kept (it was paid for), and the state
        says ``completed`` (or ``failed``), never ``cancelled`` beside a report. A
        durable one ends as its database records it, so a restart tells the same."""
        delegation = self._find(delegation_id)
        if delegation.state in FINISHED:
            return self._status(delegation)
        recorded = await self.runner.cancel(delegation_id)  # first: a crash must not resume it
        if recorded is True and delegation.state in FINISHED:
            # Its run ended while the cancel was recorded (ended by it, or with a result
            # the database did not take): cancelled, as a restart will find it, and no
            # report beside that state.
            delegation.result = None
            self._cancelled(delegation)
            return self._status(delegation)
        if recorded is not False:  # (False: it had finished; its run returns that result)
            delegation.cancel_recorded = recorded is True
            delegation.answered = delegation.question = None  # nobody may answer it now
            stop(delegation_id)  # an attempt running outside its task (a durable workflow)
            delegation.scope.cancel()
        # (a run recorded finished returns that result, however long its return takes)
        with anyio.move_on_after(None if recorded is False else _CANCEL_WAIT):
            await _ended(delegation)
        if delegation.state not in FINISHED:  # a run that would not stop: said cancelled
            self._cancelled(delegation)
        return self._status(delegation)

    def answer(self, delegation_id: str, answer: str) -> DelegationStatus:
        """Answer the question the delegation's child waits on; it goes on working.
        :class:`NoQuestion` when none waits; a ``ValueError`` for a blank answer (the
        question still waits), as ``lyra answer`` refuses one."""
        delegation = self._find(delegation_id)
        if delegation.answered is None:
            raise NoQuestion(
                f"{delegation_id} waits for no answer (it is {delegation.state}): its child "
                "asked nothing, or its question was answered or ended it"
            )
        if not answer.strip():
            raise ValueError(
                f"the answer is empty: {delegation_id} still waits for an answer to: "
                f"{delegation.question}"
            )
        delegation.answer = answer
        delegation.answered.set()
        delegation.answered = delegation.question = None
        delegation.move("working", self._clock())
        events.info(events.DETACHED_ANSWERED, delegation_id=delegation_id)
        return self._status(delegation)

    def list(self) -> list[DelegationStatus]:
        """Every delegation known (finished ones until they are forgotten), newest first."""
        self._forget_expired()
        found = sorted(self._delegations.values(), key=lambda d: d.created_at, reverse=True)
        return [self._status(delegation) for delegation in found]

    # -- inside ------------------------------------------------------------------------

    def _spawn(self, delegation: _Delegation) -> None:
        if self._group is None:
            raise RuntimeError("enter the store first: async with Delegations(...) as store")
        self._group.start_soon(self._run, delegation, name=delegation.delegation_id)

    async def _run(self, delegation: _Delegation) -> None:
        key = delegation.delegation_id
        result: DelegationResult | None = None
        broke = False
        with delegation.scope:  # cancelled by cancel() alone
            try:
                result = await self.runner.run(
                    key, delegation.request, delegation.recorded.set, partial(self._ask, delegation)
                )
            except BaseException as exc:  # this delegation fails, alone: lyra's own error,
                if not isolated(exc):  # or a cancellation nobody made of it (a stray
                    raise  # task.cancel() of its task, a watchdog its child left armed)
                result, broke = (
                    lost_outcome(Task(prompt=delegation.request.prompt), exc).result,
                    True,
                )
            finally:
                delegation.recorded.set()  # (a runner that broke before it recorded it)
                ctx = release(key)
                if ctx is not None:
                    delegation.steps = tuple(ctx.completed_steps)
        if delegation.state in FINISHED:  # (a cancel that stopped waiting for this end)
            return
        cut = delegation.scope.cancel_called
        if result is None or (cut and (broke or delegation.cancel_recorded)):
            self._cancelled(delegation)
            return
        delegation.result = result  # (cut too late: the child had finished, and stands)
        delegation.question = delegation.answered = delegation.recorded_question = None
        delegation.move(result.status, self._clock())

    def _cancelled(self, delegation: _Delegation) -> None:
        delegation.question = delegation.answered = delegation.recorded_question = None
        delegation.move("cancelled", self._clock())
        events.info(events.DETACHED_CANCELLED, delegation_id=delegation.delegation_id)

    async def _ask(self, delegation: _Delegation, question: str) -> str | None:
        """The child's question waits (state ``input_required``) until :meth:`answer`;
        the child's deadline still runs meanwhile, and a cancel ends the wait."""
        recorded, delegation.recorded_question = delegation.recorded_question, None
        if recorded == question and delegation.answered is None and delegation.answer:
            return delegation.answer  # answered as the store restarted, before it asked
        answered = delegation.answered = anyio.Event()
        delegation.question, delegation.answer = question, None
        delegation.move("input_required", self._clock())
        events.info(
            events.DETACHED_QUESTION, delegation_id=delegation.delegation_id, question=question
        )
        try:
            await answered.wait()
        finally:
            if delegation.answered is answered:  # ended unanswered (a deadline, a cancel)
                delegation.answered = delegation.question = None
        return delegation.answer

    def _find(self, delegation_id: str) -> _Delegation:
        self._forget_expired()
        delegation = self._delegations.get(delegation_id)
        if delegation is None:
            raise UnknownDelegation(
                f"no delegation {delegation_id!r} here: never started, or finished more than "
                f"{self.keep_for:g} s ago (finished results are kept that long)"
            )
        return delegation

    def _forget_expired(self) -> None:
        now = self._clock()
        expired = [
            key
            for key, delegation in self._delegations.items()
            if delegation.finished_at is not None and delegation.finished_at + self.keep_for < now
        ]
        for key in expired:
            del self._delegations[key]
            forget(key)

    def _status(self, delegation: _Delegation) -> DelegationStatus:
        status = DelegationStatus(
            delegation_id=delegation.delegation_id,
            state=delegation.state,
            prompt=delegation.request.prompt[:_PROMPT_SHOWN],
            created_at=delegation.created_at,
            updated_at=delegation.updated_at,
            question=delegation.question,
            expires_at=None
            if delegation.finished_at is None
            else delegation.finished_at + self.keep_for,
        )
        result = delegation.result
        if result is not None:
            report = result.to_report()
            steps = delegation.steps or report.completed_steps
            return status.model_copy(
                update={**_usage(result.usage), "steps": steps, "report": report}
            )
        ctx = attempt(delegation.delegation_id)
        if ctx is None or delegation.state in FINISHED:  # (cancelled: what it did stays said)
            update: dict[str, object] = {"steps": delegation.steps} if delegation.steps else {}
            if delegation.recorded_question is not None:  # restored, its attempt ended
                update["time_left"] = 0.0
            return status.model_copy(update=update) if update else status
        return status.model_copy(
            update={
                **_usage(ctx.usage),
                "steps": tuple(ctx.completed_steps),
                "current_tool": ctx.current_tool,
                "time_left": time_left(delegation.delegation_id),
            }
        )


async def _ended(delegation: _Delegation) -> None:
    """Wait until the delegation is finished (completed, failed or cancelled)."""
    while delegation.state not in FINISHED:
        await delegation.changed.wait()


def _usage(usage: Usage | None) -> dict[str, object]:
    if not usage:
        return {}
    return {"tokens_used": usage.tokens, "cost_usd": usage.cost_usd, "turns": usage.turns}
