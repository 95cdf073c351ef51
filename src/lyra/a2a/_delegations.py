"""Delegations that outlive the request that started them.

A :class:`Delegation` runs one task through lyra's recovery loop (the same as
``lyra delegate``) in the server's task group, not in the request: a client may
hang up, come back with an answer, or cancel, and the child goes on or stops
accordingly. While it runs it says what happens, in order, on
:attr:`Delegation.happenings`: each completed step, each other sign of progress
(a tool call, a charge, a heartbeat, at most one a :data:`PROGRESS_INTERVAL`),
each question the child asks (``ctx.ask``: it waits, the deadline running, until
:meth:`Delegation.answer`), and at last the result. Nothing here knows A2A: the
executor turns these into task events (another protocol could do the same).
"""

from __future__ import annotations

import re
import weakref
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import anyio
from anyio.abc import TaskGroup

from lyra.delegation import Child, ChildContext, DelegationResult, Limits, Usage, observing
from lyra.delegation._internal import as_callable
from lyra.recovery import RecoveryPolicy, recover

PROGRESS_INTERVAL = 0.1
"""Seconds between two looks at a running attempt's progress."""
KEEPALIVE = 2.0
"""Seconds of silence after which a running child's task says it still works (a
``Beat``): a client's read timeout (httpx's default, 5 s, in the A2A SDK's client)
never takes a quiet child for a dead server."""


@dataclass(frozen=True, slots=True)
class Step:
    """A completed step, and the task's usage so far."""

    text: str
    usage: Usage


@dataclass(frozen=True, slots=True)
class Beat:
    """Progress without a step (a tool call, a charge, a heartbeat); a ``keepalive``
    says only that the server still runs the task, after :data:`KEEPALIVE` seconds of
    silence (no progress: a client's idle timeout does not count it)."""

    usage: Usage
    keepalive: bool = False


@dataclass(frozen=True, slots=True)
class Question:
    """The child asks (``ctx.ask``) and waits for :meth:`Delegation.answer`."""

    text: str
    usage: Usage
    pending: object = field(compare=False, repr=False)
    """Which ask this is (see :meth:`Delegation.waits_on`)."""


@dataclass(frozen=True, slots=True)
class Halted:
    """The server stops: the child was stopped before it finished, and no result will come."""

    usage: Usage


@dataclass(frozen=True, slots=True)
class Finished:
    """The task's result (its last attempt's), and what every attempt used."""

    result: DelegationResult
    usage: Usage


Happening = Step | Beat | Question | Halted | Finished


@dataclass
class _Seen:
    """How far the watcher has read one attempt."""

    steps: int = 0
    entries: int = 0
    last: str | None = None
    progress: float = 0.0
    usage: Usage = field(default_factory=Usage)


@dataclass
class _Pending:
    """A question that waits for its answer."""

    question: str
    answered: anyio.Event = field(default_factory=anyio.Event)


class Delegation:
    """One task's delegation, running apart from the requests about it.

    ``answers`` are answers the task already has, by question: a ``ctx.ask`` of one
    of them gets it at once (a task run again after its child stopped waiting)."""

    def __init__(
        self,
        child: Child,
        prompt: str,
        limits: Limits,
        policy: RecoveryPolicy,
        answers: dict[str, str] | None = None,
    ) -> None:
        self.prompt = prompt
        self.limits = limits
        self.policy = policy
        self.answers: dict[str, str] = dict(answers or {})
        """Every answer the child was given, by question."""
        self._child = _watched(child, self)
        self._asking = anyio.Lock()
        self._pending: _Pending | None = None
        self._said: deque[Happening] = deque()
        self._news = anyio.Event()
        self._attempts: dict[ChildContext, _Seen] = {}
        self._used = Usage()  # by the attempts that ended
        self._scope = anyio.CancelScope()
        self._ended = anyio.Event()
        self._finished = False  # recover returned: a result to say, whatever comes now
        self._last_said = 0.0  # (anyio's clock; set as it starts)

    async def run(self) -> None:
        """Run the task to its result (or until :meth:`stop`); the happenings end after."""
        self._last_said = anyio.current_time()
        try:
            with self._scope:
                async with anyio.create_task_group() as watching:
                    watching.start_soon(self._watch)
                    outcome = await recover(
                        self.prompt,
                        child=self._child,
                        limits=self.limits,
                        policy=self.policy,
                        answer=self.ask,
                    )
                    self._finished = True
                    watching.cancel_scope.cancel()
                self._say(Finished(outcome.result, outcome.usage))
        finally:
            self._ended.set()
            self._news.set()

    async def happenings(self) -> AsyncGenerator[Happening, None]:
        """What it said and was not read yet, then what it says next, until it ends."""
        while True:
            while self._said:
                yield self._said.popleft()
            if self._ended.is_set():
                return
            self._news = anyio.Event()
            await self._news.wait()

    def _say(self, happening: Happening) -> None:
        self._said.append(happening)
        self._news.set()
        self._last_said = anyio.current_time()

    async def ask(self, question: str) -> str:
        """The child's question (its ``answer=``): said, then waited on until
        :meth:`answer` (the deadline still runs); one question at a time."""
        async with self._asking:
            known = self.answers.get(question)
            if known is not None:
                return known
            pending = self._pending = _Pending(question)
            self._look_at_all()  # the steps that led to the question, said before it
            self._say(Question(question, self.usage, pending))
            try:
                await pending.answered.wait()
            finally:
                self._pending = None
            return self.answers[question]

    def waits_on(self, question: Question) -> bool:
        """True while ``question`` is still unanswered (not one answered since it was said)."""
        return self._pending is not None and question.pending is self._pending

    def answer(self, text: str) -> bool:
        """Give the waiting question its answer; False when none waits (the child
        stopped waiting: its deadline, the task's end)."""
        pending, self._pending = self._pending, None
        if pending is None:
            return False
        self.answers[pending.question] = text  # kept, should the child be past waiting
        pending.answered.set()
        return True

    async def stop(self) -> None:
        """Stop the child now and wait until it has stopped."""
        self._scope.cancel()
        await self._ended.wait()

    def halt(self) -> None:
        """The server stops: the child stops, and :class:`Halted` is said (the last word
        of its happenings, where a stop by :meth:`stop` says nothing); a child that
        had finished keeps its result (said as it ends)."""
        if not (self._ended.is_set() or self._finished):
            self._say(Halted(self.usage))
            self._scope.cancel()

    def attempt_started(self, ctx: ChildContext) -> None:
        """An attempt of the child began: watch it."""
        self._attempts[ctx] = _Seen(progress=ctx.last_progress)

    def attempt_ended(self, ctx: ChildContext) -> None:
        """An attempt ended: keep what it used, and say what it did last (with it)."""
        seen = self._attempts.pop(ctx)
        self._used += ctx.usage
        self._look(ctx, seen)

    async def _watch(self) -> None:
        while True:
            await anyio.sleep(PROGRESS_INTERVAL)
            self._look_at_all()
            quiet = anyio.current_time() - self._last_said
            if quiet >= KEEPALIVE and self._pending is None and self._attempts:
                self._say(Beat(self.usage, keepalive=True))  # for a client's read timeout

    def _look_at_all(self) -> None:
        for ctx, seen in list(self._attempts.items()):
            self._look(ctx, seen)

    def _look(self, ctx: ChildContext, seen: _Seen) -> None:
        """Say what ``ctx`` did since the last look: its new steps, else its progress."""
        steps, usage = ctx.completed_steps, ctx.usage
        if ctx.steps_done != seen.steps:
            total = self.usage
            for text in _new_steps(steps, seen):
                self._say(Step(text, total))
        elif ctx.last_progress != seen.progress or usage != seen.usage:
            self._say(Beat(self.usage))
        seen.steps, seen.progress, seen.usage = ctx.steps_done, ctx.last_progress, usage
        seen.entries, seen.last = len(steps), steps[-1] if steps else None

    @property
    def usage(self) -> Usage:
        """What the task's attempts used so far, the running one included."""
        total = self._used
        for ctx in self._attempts:
            total = total + ctx.usage
        return total


_REPEATED = re.compile(r"^(.*) \(×\d+\)$", re.DOTALL)
"""How ``ctx.step`` writes a step done again at once (``Ran lookup (×3)``)."""


def _new_steps(steps: list[str], seen: _Seen) -> list[str]:
    """The steps written since the last look, as the child wrote them: the last entry
    seen, if it was done again since (a repeat is said once a look), and the entries
    after it. (Past ``MAX_STEPS`` entries, where the middle ones give way, the last.)"""
    start = max(0, seen.entries - 1)
    fresh = steps[start:] if start < len(steps) else steps[-1:]
    if seen.entries and fresh and fresh[0] == seen.last:
        fresh = fresh[1:]
    return [match.group(1) if (match := _REPEATED.match(text)) else text for text in fresh]


class _Watched:
    """The served child, each of its attempts watched by its delegation; anything else
    (a ``decompose`` of its own) is the child's."""

    def __init__(self, child: Child, delegation: Delegation) -> None:
        self._child = child
        self._call = as_callable(child)
        self._delegation = delegation

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        self._delegation.attempt_started(ctx)
        try:
            return await self._call(prompt, ctx)
        finally:
            self._delegation.attempt_ended(ctx)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._child, name)


def _watched(child: Child, delegation: Delegation) -> _Watched:
    """``child`` watched, under its own name (the one traces give its attempts)."""
    name = getattr(child, "__name__", None)
    return _named(name if isinstance(name, str) else type(child).__name__)(child, delegation)


@cache
def _named(name: str) -> type[_Watched]:
    return type(name, (_Watched,), {"__module__": __name__})


class Delegations:
    """The delegations a server runs, in a task group that lives as long as it serves."""

    def __init__(self) -> None:
        self._group: TaskGroup | None = None
        self._started: weakref.WeakSet[Delegation] = weakref.WeakSet()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """While serving: delegations can start; on the way out, those still running stop.
        Every attempt is observed, so that a heartbeat shows as progress."""
        with observing():
            async with anyio.create_task_group() as group:
                self._group = group
                try:
                    yield
                finally:
                    self._group = None
                    group.cancel_scope.cancel()

    def start(self, delegation: Delegation) -> Delegation:
        """Start running ``delegation`` now."""
        if self._group is None:
            raise RuntimeError("delegations start only while the server runs (its lifespan)")
        self._group.start_soon(delegation.run)
        self._started.add(delegation)
        return delegation

    def halt_all(self) -> None:
        """The server stops: every running delegation stops, saying so to its task
        (before the web server waits for their requests to end)."""
        for delegation in list(self._started):
            delegation.halt()
