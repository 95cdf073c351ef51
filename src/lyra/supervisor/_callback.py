"""``Supervisor.run(on_outcome=...)``: the caller's callback, checked and adapted.

A callback takes ``(outcome)`` or ``(task, outcome)``, sync or async. Its
shape is checked when ``run`` is called, so a wrong signature is a
``TypeError`` at once rather than a failure per task. Executors call one
shape only (:data:`OnOutcome`, sync); an async callback's coroutine runs in
the task group that ``run`` waits for, so ``run`` returns after every
callback has finished. An exception raised *inside* a callback is its own bug:
it is logged (``on_outcome_failed``) and never reaches another task; so is a
cancellation nobody made of the run (a future someone else cancelled, a stray
``task.cancel()``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeAlias

from anyio.abc import TaskGroup

from lyra.recovery import RecoveryOutcome
from lyra.supervisor._executor import callback_failed, isolated
from lyra.supervisor._job import OnOutcome, Task

OutcomeCallback: TypeAlias = (
    Callable[[RecoveryOutcome], object] | Callable[[Task, RecoveryOutcome], object]
)
"""What ``on_outcome`` may be: ``cb(outcome)`` or ``cb(task, outcome)``, sync or async."""


def adapt(callback: OutcomeCallback) -> Callable[[TaskGroup], OnOutcome]:
    """Check ``callback``'s shape now (TypeError); the result makes it what executors
    call, awaiting what an async one returns in the given task group."""
    takes_task = _arity(callback) == 2
    call: Callable[..., object] = callback

    def within(group: TaskGroup) -> OnOutcome:
        def on_outcome(task: Task, outcome: RecoveryOutcome) -> None:
            returned = call(task, outcome) if takes_task else call(outcome)
            if inspect.isawaitable(returned):
                group.start_soon(_settle, returned, task)

        return on_outcome

    return within


async def _settle(pending: Awaitable[object], task: Task) -> None:
    """Await an async callback; its exception is logged like a sync one's (a
    cancellation nobody made of the run too: out of this task, it would cancel the task
    group the pool runs in, and every task's outcome with it)."""
    try:
        await pending
    except BaseException as exc:
        if not isolated(exc):
            raise
        callback_failed(task, exc)


def _arity(callback: object) -> int:
    """1 or 2: whether ``callback`` takes ``(outcome)`` or ``(task, outcome)``, by its
    required positional parameters; TypeError for any other shape."""
    if not callable(callback):
        raise TypeError(f"on_outcome must be callable, not {type(callback).__name__}")
    try:
        signature = inspect.signature(callback)
    except (TypeError, ValueError):  # a builtin without a signature: the documented shape
        return 2
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = sum(
        1
        for p in signature.parameters.values()
        if p.kind in positional and p.default is inspect.Parameter.empty
    )
    candidates = (required,) if required else (2, 1)  # cb(*args): the full shape
    for arity in candidates:
        try:
            signature.bind(*([None] * arity))
        except TypeError:
            continue
        if arity in (1, 2):
            return arity
    raise TypeError(
        f"on_outcome must take (outcome) or (task, outcome), but {callback!r} has the "
        f"signature {signature}"
    )


__all__ = ["OutcomeCallback", "adapt"]
