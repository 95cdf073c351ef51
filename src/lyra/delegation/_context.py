"""The child contract: a child is an async callable ``child(prompt, ctx) -> str``
or an object with ``async def run(self, prompt, ctx) -> str``, and
ChildContext is how it reports progress, runs tools, spends budget, delegates
further, and declares itself blocked.

One context per attempt. It also carries the attempt's limits (DESIGN §12):
the total deadline and the idle deadline share the attempt's one cancel
scope -- progress pushes the scope's deadline forward, never past the total
-- and the account the attempt draws on, whose exhaustion ends it at once.
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from contextvars import ContextVar
from typing import (
    TYPE_CHECKING,
    Any,
    NoReturn,
    Protocol,
    TypeAlias,
    TypeVar,
    overload,
    runtime_checkable,
)

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from lyra import tracing
from lyra._taxonomy import FailureCategory
from lyra.delegation import _live
from lyra.delegation._budget import Account, Budget, Usage, checked_charge
from lyra.delegation._deadlines import Deadlines, Watch, deadlines
from lyra.delegation._models import FailedDelegation
from lyra.delegation._text import safe_str
from lyra.errors import BudgetExhausted, ChildBlocked

if TYPE_CHECKING:
    from lyra.delegation._result import DelegationResult

T = TypeVar("T")

_BLOCKABLE = frozenset(
    {FailureCategory.MISSING_CONTEXT, FailureCategory.INVALID_TASK, FailureCategory.TOOL_ERROR}
)
_NESTED_MARGIN = 0.05
"""Most seconds a grandchild's deadline comes before its parent's (see ``delegate``):
enough for the parent to hear of the grandchild's timeout on a busy event loop."""
_MAX_IDLE_SLACK = 0.02
"""Seconds an idle deadline may fire late, so that frequent progress does not
re-arm the timer on every call."""
MAX_STEPS = 200
"""Entries a context keeps in ``completed_steps`` (repeats at once are counted)."""
KEPT_FIRST_STEPS = 50
"""Of those, the first steps always kept; the rest are the latest."""
_known_token: ContextVar[tuple[int, Any] | None] = ContextVar("lyra_loop_token", default=None)


def _loop_token() -> Any:
    """The running event loop's token, for calls back from other threads.

    ``anyio.lowlevel.current_token()`` costs about a microsecond, so the token is
    remembered in the task's context (with the thread it belongs to: a worker
    thread that runs a loop of its own inherits the context, not the loop).
    """
    thread = threading.get_ident()
    known = _known_token.get()
    if known is not None and known[0] == thread:
        return known[1]
    token = anyio.lowlevel.current_token()
    _known_token.set((thread, token))
    return token


class Runner(Protocol):
    """Runs one attempt (what :meth:`ChildContext.delegate` uses for a grandchild)."""

    async def __call__(
        self,
        child: Child,
        prompt: str,
        *,
        timeout: float,
        idle_timeout: float | None,
        account: Account | None,
        subject: str | None,
        context: Mapping[str, Any] | None,
        parent: ChildContext,
    ) -> DelegationResult: ...


class ChildContext:
    """The supervisor's window into one child attempt.

    A child calls :meth:`step` for each finished piece of work,
    :meth:`file_modified` for each file it wrote, runs tools through
    :meth:`tool` (so usage is counted and blocking tools cannot hold the
    deadline), records spend with :meth:`charge`, delegates further with
    :meth:`delegate`, and calls :meth:`block` when it cannot go on.

    ``state`` is a dict the child may keep across the attempts of one task
    (a recovery loop); in durable runs it must hold JSON data, and it
    survives a crash.
    """

    # Class-level defaults: most attempts never set these, so __init__ need not.
    last_successful_tool: str | None = None
    blocked: ChildBlocked | None = None
    failed_tool: str | None = None
    _failed_tool_error: BaseException | None = None
    _idle: float | None = None
    _slack = 0.0
    _last_progress = 0.0
    _meter: Account | None = None
    _scope: anyio.CancelScope | None = None
    _deadlines: Deadlines | None = None
    _deadline_watch: Watch | None = None
    _fired: float | None = None
    _stop: Account | None = None
    _token: Any = None
    _watched: tuple[Account, ...] | list[Account] = ()
    _observed = False
    started = 0.0
    """When the attempt began (``time.monotonic()``), for a live display."""
    current_tool: str | None = None
    """The tool the child is running right now, if any."""
    depth = 0
    """How deep in the delegation tree this attempt is (0: a root delegation)."""

    def __init__(
        self,
        *,
        session_id: str,
        timeout: float,
        attempt: int = 1,
        subject: str | None = None,
        context: Mapping[str, Any] | None = None,
        idle_timeout: float | None = None,
        account: Account | None = None,
        state: dict[str, Any] | None = None,
        parent: ChildContext | None = None,
        runner: Runner | None = None,
    ) -> None:
        self.session_id = session_id
        self.timeout = timeout
        self.attempt = attempt
        self.subject = subject
        self.context: Mapping[str, Any] = context if context is not None else {}
        self.state: dict[str, Any] = state if state is not None else {}
        self.completed_steps: list[str] = []
        self.steps_done = 0
        self._last_step: str | None = None
        self._step_counts: list[int] = []  # how many steps each entry stands for
        self._counted = self.completed_steps  # the list those counts are of
        self._steps_lock = threading.Lock()
        self.files_modified: list[str] = []
        self.tool_usage: dict[str, int] = {}
        self.failed_delegations: list[FailedDelegation] = []
        self._deadlines = deadlines()
        self._deadline = self._armed = self._now() + timeout
        self._account = account
        self._parent = parent
        if parent is not None:
            self.depth = parent.depth + 1
        self._runner = runner
        self._loop_thread = threading.get_ident()
        if idle_timeout is not None:
            self._idle = idle_timeout
            self._last_progress = time.monotonic()
            self._slack = min(_MAX_IDLE_SLACK, idle_timeout / 20)
            self._armed = min(self._deadline, self._armed - timeout + idle_timeout + self._slack)
        if idle_timeout is not None or account is not None:
            # Progress or a charge from a worker thread must reach the scope.
            self._token = _loop_token()

    # -- what the child reports ------------------------------------------------

    @property
    def tool_executions(self) -> int:
        """How many tool calls the child started."""
        return sum(self.tool_usage.values())

    @property
    def made_progress(self) -> bool:
        """True once the child ran a tool or completed a step."""
        return bool(self.completed_steps) or bool(self.tool_usage)

    def remaining(self) -> float:
        """Seconds left before the total deadline (never negative)."""
        return max(0.0, self._deadline - self._now())

    def _now(self) -> float:
        """The event loop's clock (``anyio.current_time()``, without asking sniffio on
        an asyncio loop)."""
        loop = self._deadlines
        return loop.time() if loop is not None else anyio.current_time()

    def step(self, description: str) -> None:
        """Record one completed step (shown as ``✓ description`` in reports).

        The same step again at once is counted, not listed again (``Ran lookup
        (×558)``), and past :data:`MAX_STEPS` entries the middle ones give way to
        one ``… N more steps`` line: a runaway's report stays readable and its
        memory bounded. ``steps_done`` counts them all."""
        text = safe_str(description)
        with self._steps_lock:  # a sync child's threads may record steps at once
            self.steps_done += 1
            steps, counts = self.completed_steps, self._step_counts
            if steps is not self._counted or len(counts) != len(steps):
                # the list was replaced or changed by hand: count afresh
                self._counted, self._last_step = steps, None
                counts[:] = [1] * len(steps)
            if text == self._last_step and steps:
                counts[-1] += 1
                steps[-1] = f"{text} (×{counts[-1]})"
            else:
                self._last_step = text
                steps.append(text)
                counts.append(1)
                if len(steps) > MAX_STEPS:
                    self._fold_middle_steps()
        self._touch()

    def _fold_middle_steps(self) -> None:
        """Keep the first :data:`KEPT_FIRST_STEPS` entries and the latest, with one
        line counting the steps between."""
        steps, counts, head = self.completed_steps, self._step_counts, KEPT_FIRST_STEPS
        folded = counts[head] + counts[head + 1]
        del steps[head + 1], counts[head + 1]
        counts[head] = folded
        steps[head] = f"… {folded} more steps"

    def file_modified(self, path: str) -> None:
        """Record a file the child wrote; repeated paths are listed once."""
        path = safe_str(path)
        if path not in self.files_modified:
            self.files_modified.append(path)
        self._touch()

    def heartbeat(self) -> None:
        """Say the child is alive and working (resets the idle timeout)."""
        self._touch()

    @overload
    async def tool(
        self, name: str, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any
    ) -> T: ...

    @overload
    async def tool(self, name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...

    async def tool(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run a tool, counting its use; sync tools run in a worker thread.

        Starting and finishing a tool both count as progress. The worker
        thread is abandoned on cancellation, so a tool stuck in blocking code
        cannot hold the child past its deadline. An exception from the tool
        propagates unchanged and is remembered as a tool failure.
        """
        self._check_budget()
        name = safe_str(name)
        self.tool_usage[name] = self.tool_usage.get(name, 0) + 1
        self.current_tool = name
        self._touch()
        fn = tracing.tool(name, fn)
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(*args, **kwargs)
            else:
                call = functools.partial(fn, *args, **kwargs)
                result = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
                if inspect.isawaitable(result):
                    result = await result
        except Exception as exc:
            self.failed_tool, self._failed_tool_error = name, exc
            raise
        finally:
            self.current_tool = None
        self.last_successful_tool = name
        self._touch()
        return result

    def tool_started(self, name: str) -> None:
        """Record the start of a tool call that a framework runs itself (from its
        own hook), as :meth:`tool` does for the calls it runs: usage is counted
        and it is progress. Ends the attempt if the budget ran out meanwhile."""
        self._check_budget()
        name = safe_str(name)
        self.tool_usage[name] = self.tool_usage.get(name, 0) + 1
        self.current_tool = name
        self._touch()

    def tool_ended(self, name: str, error: BaseException | None = None) -> None:
        """Record the end of a tool call that :meth:`tool_started` recorded: the last
        successful tool, or (with ``error``) a tool failure; progress either way."""
        name = safe_str(name)
        if self.current_tool == name:
            self.current_tool = None
        if error is None:
            self.last_successful_tool = name
        else:
            self.failed_tool, self._failed_tool_error = name, error
        self._touch()

    def raised_by_tool(self, exc: BaseException) -> bool:
        """True when ``exc`` is the exception a tool run through :meth:`tool` raised."""
        return exc is self._failed_tool_error

    def block(self, category: FailureCategory | str, reason: str) -> NoReturn:
        """Declare the child blocked and end it.

        ``category`` is ``missing_context``, ``invalid_task`` or ``tool_error``.
        The declaration holds even if the child catches the exception.
        """
        declared = FailureCategory(category)
        if declared not in _BLOCKABLE:
            allowed = ", ".join(sorted(_BLOCKABLE))
            raise ValueError(f"a child can block only with one of {allowed}, not {declared}")
        self.blocked = ChildBlocked(declared, safe_str(reason))
        raise self.blocked

    # -- budget -------------------------------------------------------------------

    def charge(
        self,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float = 0.0,
        turns: int = 0,
        *,
        ahead: bool = False,
    ) -> None:
        """Record what the child spent; counts as progress.

        Raises :class:`~lyra.errors.BudgetExhausted` (and ends the attempt)
        when the charge takes the delegation tree over its budget. With
        ``ahead=True`` the charge pays for use about to be made (a model call's
        turn, taken before the call): one that would go over is refused, not
        recorded, and ends the attempt the same way.
        """
        checked_charge(input_tokens, output_tokens, cost_usd, turns)
        over = self._metered().charge(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost_usd,
            turns=turns,
            ahead=ahead,
        )
        self._touch()
        if over is not None:
            self._out_of_budget(over)
            raise BudgetExhausted(f"Budget exhausted: {over.exhausted}")

    def _check_budget(self) -> None:
        """End the child now if its tree ran out of budget meanwhile (the cancellation
        would only arrive at its next ``await``)."""
        if self._stop is not None:
            raise BudgetExhausted(f"Budget exhausted: {self._stop.exhausted}")

    @property
    def budget_left(self) -> Budget:
        """What the tree may still spend (``None`` fields: no limit)."""
        return self._account.left() if self._account is not None else Budget()

    @property
    def usage(self) -> Usage:
        """What this attempt (and everything it delegated) was charged so far."""
        return self._meter.usage if self._meter is not None else Usage()

    @property
    def charged(self) -> Usage | None:
        """:attr:`usage`, or ``None`` when nothing was charged."""
        if self._meter is None:
            return None
        usage = self._meter.usage
        return usage if usage else None

    def _metered(self) -> Account:
        """This attempt's own meter, drawing on the tree's account (made on first use)."""
        if self._meter is None:
            self._meter = Account(parent=self._account)
        return self._meter

    # -- nesting --------------------------------------------------------------------

    async def delegate(
        self,
        prompt: str,
        *,
        child: Child,
        timeout: float | None = None,
        idle_timeout: float | None = None,
        budget: Budget | None = None,
        subject: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> DelegationResult:
        """Run a grandchild under this attempt's limits; its failure is a result.

        Its deadline is the smaller of ``timeout`` and this attempt's time
        left; ``budget`` limits it further, drawing on this tree's account;
        cancelling this attempt cancels it.
        """
        if self._runner is None:
            raise RuntimeError("this context was not made by lyra; it cannot delegate")
        # A hair before this attempt's own deadline, so that the grandchild's
        # timeout is reported back here rather than lost in this attempt's.
        left = self.remaining() - min(_NESTED_MARGIN, self.remaining() / 20)
        own = left if timeout is None else min(timeout, left)
        result = await self._runner(
            child,
            prompt,
            timeout=round(max(own, 1e-3), 6),
            idle_timeout=idle_timeout,
            account=Account.for_budget(budget, self._metered()),
            subject=subject,
            context=context,
            parent=self,
        )
        self._check_budget()  # the grandchild may have spent what was left
        if result.failure is not None:
            failure = result.failure
            self.failed_delegations.append(
                FailedDelegation(
                    session_id=result.session_id,
                    category=failure.category,
                    error_type=failure.error_type,
                )
            )
        self._touch()
        return result

    # -- limits (used by the attempt runner) ------------------------------------------

    def _enter(self, scope: anyio.CancelScope) -> None:
        """Start enforcing the limits: ``scope`` ends the attempt at its deadline
        (kept by the loop's :mod:`._deadlines`, else by anyio), and an account
        that runs out cancels it. A live display may watch it."""
        self._scope = scope
        if self._deadlines is None:
            scope.deadline = self._armed  # another backend: anyio's own timer
        else:
            self._deadline_watch = self._deadlines.watch(self)
        if self._account is not None:
            self._watched = self._account.limited()
            for account in self._watched:
                account.watch(id(self), self._out_of_budget)
        if _live.watch(self):
            self._observed = True
            self.started = time.monotonic()
            if self._idle is None:
                self._last_progress = self.started

    def _exit(self) -> None:
        self._scope = None
        watch, self._deadline_watch = self._deadline_watch, None
        if watch is not None and self._deadlines is not None:
            self._deadlines.unwatch(watch)
        for account in self._watched:
            account.unwatch(id(self))
        if self._observed:
            _live.unwatch(self)

    def _touch(self) -> None:
        """Progress: push the idle deadline forward (and the parent's)."""
        if self._observed and self._idle is None:
            self._last_progress = time.monotonic()
        if self._idle is not None:
            now = time.monotonic()
            self._last_progress = now
            if self._armed < self._deadline and now + self._idle > self._armed:
                self._armed = min(self._deadline, now + self._idle + self._slack)
                if self._deadlines is None:  # the loop's watcher reads _armed itself
                    self._on_loop(self._rearm)
        if self._parent is not None:
            self._parent._touch()

    def _rearm(self) -> None:
        if self._scope is not None:
            self._scope.deadline = self._armed

    def _out_of_budget(self, account: Account) -> None:
        """Watcher: an account this attempt draws on ran out; end the attempt."""
        if self._stop is None:
            self._stop = account
        self._on_loop(self._cancel)

    def _cancel(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    def _on_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the event loop's thread (now, if this is it)."""
        if threading.get_ident() == self._loop_thread:
            fn()
            return
        with suppress(RuntimeError):  # the loop is gone: the attempt ended already
            anyio.from_thread.run_sync(fn, token=self._token)

    @property
    def last_progress(self) -> float:
        """When the child last showed progress (``time.monotonic()``; observed or idle
        attempts only, else when it began)."""
        return self._last_progress or self.started

    @property
    def idle_for(self) -> float | None:
        """Seconds since the last progress, when an idle timeout is set."""
        return None if self._idle is None else time.monotonic() - self._last_progress

    @property
    def idle_timeout(self) -> float | None:
        """The idle timeout of this attempt (``None``: none)."""
        return self._idle

    @property
    def stopped_by(self) -> Account | None:
        """The account whose exhaustion ended this attempt, if one did."""
        return self._stop

    @property
    def account(self) -> Account | None:
        """The account this attempt draws on (``None``: no budget anywhere above)."""
        return self._account

    @property
    def parent_session_id(self) -> str | None:
        """The session that delegated this one, for a nested delegation."""
        return self._parent.session_id if self._parent is not None else None


@runtime_checkable
class ChildAgent(Protocol):
    """A child agent object: ``await child.run(prompt, ctx)`` returns the output."""

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        """Do the task and return its result text."""
        ...


ChildFn: TypeAlias = Callable[[str, ChildContext], Awaitable[str]]
Child: TypeAlias = ChildAgent | ChildFn
