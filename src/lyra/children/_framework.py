"""What the framework children share: importing the framework of an extra, and
turning a framework's final output into the child's result text.

Each framework child lives in a module of its own (``pydantic_ai``,
``openai_agents``, ``claude_agent``, ``langgraph``, ``google_adk``), as pydantic-ai keeps one
module per provider, and imports its framework only when it is built.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import reprlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from types import ModuleType
from typing import Any, TypeVar

import anyio

from lyra._extras import framework_child_for, require
from lyra.children._pricing import Price
from lyra.delegation import ChildContext
from lyra.delegation._internal import deadlines, foreign_cancellation, qualified_type_name
from lyra.errors import ChildSignal, ConfigurationError, ForeignCancellation

T = TypeVar("T")


def framework(module: str, *, extra: str, child: str) -> ModuleType:
    """Import ``module`` for the framework child ``child``, or raise a
    ConfigurationError naming the extra to install."""
    return require(module, extra=extra, what=child)


def check_wraps(
    value: Any, kind: type | tuple[type, ...], *, child: str, what: str, remedy: str = ""
) -> None:
    """Raise a TypeError unless ``value`` is a ``kind``: at construction, not at the
    first run. Another framework's agent names the child that wraps it; ``remedy``
    (``": call its .compile() first"``) says what to do instead."""
    if isinstance(value, kind):
        return
    got = f"a {qualified_type_name(value)}"
    if type(value).__module__ == "builtins":
        got = reprlib.repr(value)
    wrapper = (framework_child_for(value) or "").rpartition(".")[2]
    hint = f" (for that, use {wrapper})" if wrapper and wrapper != child else ""
    raise TypeError(f"{child} wraps {what}; got {got}{remedy or hint}")


def labelled(child: str, *parts: object) -> str:
    """A framework child as a report names it (``<child>``, ``<fallback>``): its class
    with what it has of its agent's name and its model, ``PydanticAIChild(researcher,
    gpt-4o)``, so that two children of one framework can be told apart."""
    said = [part for part in parts if isinstance(part, str) and part]
    return f"{child}({', '.join(said)})" if said else child


def model_named(model: object) -> str | None:
    """The name of a framework's model: a string as it is, else the model object's
    ``model_name`` or ``model`` (pydantic-ai's, the OpenAI Agents SDK's, ADK's)."""
    if isinstance(model, str):
        return model
    for attribute in ("model_name", "model"):
        name = getattr(model, attribute, None)
        if isinstance(name, str):
            return name
    return None


def warm(make: Callable[[], object]) -> None:
    """Build what a framework would otherwise build (and import) at its first run --
    a model named by a string, its provider's SDK and HTTP stack -- now, when the
    child is built: nothing is imported inside a deadline. A failure (no API key
    yet) is the run's to report, not the construction's."""
    with suppress(Exception):
        make()


def check_options(child: str, **options: tuple[Any, Any]) -> None:
    """Raise a TypeError for the first option (``name=(value, kind)``) that is not None
    and not a ``kind`` (``None``: a callable), naming what it must be."""
    for name, (value, kind) in options.items():
        if value is None:
            continue
        if kind is None:
            valid, what = callable(value), "callable"
        else:
            valid = isinstance(value, kind) and not isinstance(value, bool)
            kinds = kind if isinstance(kind, tuple) else (kind,)
            what = "of type " + " or ".join(k.__name__ for k in kinds)
        if not valid:
            raise TypeError(f"{child}'s {name}= must be {what}; got {reprlib.repr(value)}")


def check_flags(child: str, **flags: object) -> None:
    """Raise a TypeError for the first flag that is not ``True`` or ``False`` (a string
    such as ``"no"`` is true, and would turn the feature on)."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise TypeError(f"{child}'s {name}= must be True or False; got {reprlib.repr(value)}")


def check_each(child: str, **options: tuple[Any, type]) -> None:
    """Raise a TypeError for the first option (``name=(values, kind)``) that is not a
    sequence of ``kind`` (a string is no sequence of them), naming what it must be."""
    for name, (values, kind) in options.items():
        sequence = isinstance(values, Sequence) and not isinstance(values, str | bytes)
        wrong = [value for value in values if not isinstance(value, kind)] if sequence else [values]
        if wrong:
            raise TypeError(
                f"{child}'s {name}= must be a sequence of {kind.__name__}; "
                f"got {reprlib.repr(wrong[0])}"
            )


def check_at_least_one(child: str, **options: int | None) -> None:
    """Raise a ValueError for the first option (already checked as a whole number) that
    is below 1: a framework limit of 0 would fail every run as if out of budget."""
    for name, value in options.items():
        if value is not None and value < 1:
            raise ValueError(f"{child}'s {name}= must be at least 1 (or None), not {value!r}")


def check_prices(child: str, prices: Any) -> None:
    """``prices`` is None or a mapping of model-name prefixes to :class:`Price`."""
    check_options(child, prices=(prices, Mapping))
    for key, price in (prices or {}).items():
        if not isinstance(key, str) or not isinstance(price, Price):
            raise TypeError(
                f"{child}'s prices= maps model-name prefixes to lyra.children.Price; "
                f"got {reprlib.repr(key)}: {reprlib.repr(price)}"
            )


ASK_TOOL = "ask_question"
"""The name of the tool a framework agent asks its question with (``ask_tool=True``)."""
ASK_DESCRIPTION = (
    "Ask whoever gave you this task a question you cannot answer yourself (an identifier, "
    "a choice only they can make). Returns their answer. Ask only what you truly need, "
    "one question at a time; if nobody can answer, the task stops and the question is "
    "reported."
)
"""What the model reads about that tool."""


def limits_text(ctx: ChildContext) -> str:
    """What the attempt has left, in words, for an agent to plan with (``show_limits``)."""
    left = ctx.budget_left
    parts = [
        f"{value:,} {unit}"
        for value, unit in (
            (left.max_tokens, "tokens"),
            (left.max_turns, "model turns"),
            (left.max_tool_calls, "tool calls"),
        )
        if value is not None
    ]
    if left.max_cost_usd is not None:
        parts.insert(1 if left.max_tokens is not None else 0, f"${left.max_cost_usd:.2f}")
    budget = f"; budget left: {', '.join(parts)}" if parts else ""
    return (
        f"Limits of this task: {ctx.time_left:.0f} s left{budget}. Plan your work to finish "
        "within them; past them the task stops with what you have done so far."
    )


OWN_STOPS: tuple[type[Exception], ...] = (ChildSignal, ConfigurationError)
"""What lyra raises inside a framework's run on purpose: a stop (a budget, a blocker, a
question, a loop) or the meter's refusal of a budget it cannot keep. The report says
it, so the framework's own log record of it (with a traceback) is left out."""


def tool_done(ctx: ChildContext, name: str, error: BaseException | None = None) -> None:
    """A tool call the framework ran ended: recorded as such, and a success is a
    completed step (``Ran <tool>``), the same for every framework child. The run's own
    cancellation, which a framework may report as the tool's error, is no end: the tool
    was stopped while it ran, and the report names it as the one running."""
    if isinstance(error, asyncio.CancelledError) and not foreign_cancellation(error):
        return
    ctx.tool_ended(name, error)
    if error is None:
        ctx.step(f"Ran {name}")


_INSIDE = "raised inside the framework's run"


async def contained(run: Awaitable[T]) -> T:
    """Await a framework's run in a task of its own, and get back what it raised as an
    ordinary exception.

    A framework runs the agent's tools (and often its model calls) in tasks of its
    own and awaits them. A ``GeneratorExit`` raised there -- by a tool's code, not by
    a coroutine being closed -- reaches the awaiting task as a thrown
    ``GeneratorExit``, which Python re-raises in every coroutine up that task, past
    any handler: lyra's delegation could not turn it into the child's failure. In a
    task of its own, the run ends with it, and it comes back raised as
    :class:`~lyra.errors.ForeignCancellation` (as does Python's "coroutine ignored
    GeneratorExit" of a framework that caught it, and a ``CancelledError`` nobody
    made of the run, which anyio would otherwise take for the run's cancellation).
    The delegation's own cancellation reaches the run as anyio's, through a cancel
    scope around it: shielded cleanups inside the run finish first.
    """
    on_asyncio = deadlines()
    if on_asyncio is None:  # another backend (trio): anyio's task group does it
        return await _in_task_group(run)
    loop, scope = on_asyncio.loop, on_asyncio.cancel_scope()
    # The run's end is awaited, not its task: a cancellation of ours must reach the
    # run through its scope (as anyio's), never as a bare task.cancel(). The run
    # says it ended itself, where asyncio.shield would add a callback to its task:
    # a framework that cancels a scope of its own has anyio format the task, its
    # callbacks included, each time (pydantic-graph does, for every node it runs).
    ended = loop.create_future()
    task = loop.create_task(_runner(run, scope, ended))
    try:
        await ended
        return task.result()
    except asyncio.CancelledError:
        if task.done():  # it ended as we were cancelled: by a stop it raised, as a rule
            _read(task)  # that stop's echo (ours wins), read: asyncio would log it as lost
            raise  # (or the run's own foreign cancellation, out of task.result())
        scope.cancel()  # ours (a deadline, a limit, the caller): the run ends as anyio's
        if not await _ended(task, loop):
            raise  # its cleanups still run: left to finish on their own (CLEANUP_GRACE)
        error = None if task.cancelled() else task.exception()
        if isinstance(error, GeneratorExit):
            raise ForeignCancellation(_INSIDE) from error
        if error is not None:  # what the run raised as it stopped (a budget's refusal)
            raise error from error.__cause__
        raise
    except GeneratorExit as exc:
        raise ForeignCancellation(_INSIDE) from exc


CLEANUP_GRACE = 0.5
"""Seconds a cancelled run is waited for, for the cleanups inside it (a tool's
``finally`` closing a session, the framework's own wait for its tool tasks) to
finish, as long as A2A's cancel is given: a cleanup that takes longer, or hangs,
holds the attempt (an overrun its result reports) and the caller's cancellation
no longer than that."""


async def _ended(task: asyncio.Task[Any], loop: asyncio.AbstractEventLoop) -> bool:
    """Wait (shielded: a second cancellation, the caller's, waits too) until the
    cancelled run's ``task`` ends, for :data:`CLEANUP_GRACE` at most; False when it
    has not: it is left to end on its own, what it raises then read and dropped."""
    until = loop.time() + CLEANUP_GRACE
    with anyio.CancelScope(shield=True):
        while not task.done() and (left := until - loop.time()) > 0:
            with suppress(asyncio.CancelledError):
                await asyncio.wait((task,), timeout=left)
    if not task.done():
        task.add_done_callback(_read)
        return False
    return True


def _read(task: asyncio.Task[Any]) -> None:
    """An abandoned run's end, read so that asyncio does not report it as lost."""
    if not task.cancelled():
        task.exception()


async def _runner(run: Awaitable[T], scope: anyio.CancelScope, ended: asyncio.Future[None]) -> T:
    """The run in its own task, ending with what it raised as an ordinary exception,
    and saying so through ``ended``."""
    try:
        with scope:
            try:
                return await run
            except RuntimeError as exc:
                if str(exc) != "coroutine ignored GeneratorExit":
                    raise
                raise ForeignCancellation(_INSIDE) from GeneratorExit(str(exc))
            except asyncio.CancelledError as exc:
                if scope.cancel_called or not foreign_cancellation(exc):
                    raise  # the delegation's own: the run stops
                raise ForeignCancellation(_INSIDE) from exc
        raise asyncio.CancelledError  # the scope ended the run: the caller is cancelled
    finally:
        if not ended.done():  # (cancelled when the caller was)
            ended.set_result(None)


async def _in_task_group(run: Awaitable[T]) -> T:
    results: list[T] = []

    async def runner() -> None:
        try:
            results.append(await run)
        except RuntimeError as exc:
            if str(exc) != "coroutine ignored GeneratorExit":
                raise
            raise ForeignCancellation(_INSIDE) from GeneratorExit(str(exc))

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(runner)
    except BaseExceptionGroup as raised:
        if len(raised.exceptions) != 1:
            raise
        leaf = raised.exceptions[0]
        if isinstance(leaf, GeneratorExit):
            raise ForeignCancellation(_INSIDE) from leaf
        raise leaf from leaf.__cause__  # the run's own exception, its cause kept
    return results[0]


def output_text(value: Any) -> str:
    """A framework's final output as the child's result text: a string as it is;
    structured output (a pydantic model, a dataclass, JSON data) serialised as JSON."""
    if isinstance(value, str):
        return value
    dump = getattr(value, "model_dump_json", None)
    if callable(dump):
        return str(dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.dumps(value, ensure_ascii=False, default=str)
