"""The child contract: a child is an async callable ``child(prompt, ctx) -> str``
or an object with ``async def run(self, prompt, ctx) -> str``, and
ChildContext is how it reports progress, runs tools, spends budget, asks a
question, delegates further, and declares itself blocked.

One context per attempt. The attempt's limits are enforced by its
:class:`~._limiter.Limiter`, which the runner owns: the context tells it of
progress and reads what is left.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
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
import orjson

from lyra import events, tracing
from lyra._taxonomy import ErrorType, FailureCategory
from lyra._text import clipped, safe_str, type_name
from lyra.delegation import _live
from lyra.delegation._budget import Account, Budget, Usage, checked_charge
from lyra.delegation._callbacks import call_off_the_loop
from lyra.delegation._limiter import Limiter
from lyra.delegation._limits import Limits, check_timeout
from lyra.delegation._models import FailedDelegation
from lyra.delegation._tree import Tree
from lyra.errors import (
    BudgetExhausted,
    ChildBlocked,
    ChildSignal,
    LoopDetected,
    QuestionAsked,
    TransientError,
)

if TYPE_CHECKING:
    from lyra.delegation._result import DelegationResult

T = TypeVar("T")

Answerer: TypeAlias = Callable[[str], "str | Awaitable[str | None] | None"]
"""Answers a child's question (``ctx.ask``): given the question, the answer, or
``None`` when it has none; sync or async."""
Verifier: TypeAlias = Callable[[str], "bool | str | Awaitable[bool | str | None] | None"]
"""Checks a child's output: ``None`` or ``True`` accepts it; ``False`` or a reason
(a string) rejects it; sync or async."""

_BLOCKABLE = frozenset(
    {FailureCategory.MISSING_CONTEXT, FailureCategory.INVALID_TASK, FailureCategory.TOOL_ERROR}
)
_NESTED_MARGIN = 0.05
"""Most seconds a grandchild's deadline comes before its parent's (see ``delegate``):
enough for the parent to hear of the grandchild's timeout on a busy event loop."""
MAX_STEPS = 200
"""Entries a context keeps in ``completed_steps`` (repeats at once are counted)."""
KEPT_FIRST_STEPS = 50
"""Of those, the first steps always kept; the rest are the latest."""
SHOWN_ARGUMENTS = 200
"""Characters of a repeated call's arguments a loop's report shows."""

_MORE_STEPS = "… {} more steps"
_COUNTED = re.compile(r"… (\d+) more steps|.* \(×(\d+)\)")


def folded_steps(steps: Sequence[str]) -> tuple[str, ...]:
    """``steps`` as a report keeps them: past :data:`MAX_STEPS` entries, the first
    :data:`KEPT_FIRST_STEPS` and the latest, with one line counting the steps between
    (steps an earlier fold counted included)."""
    if len(steps) <= MAX_STEPS:
        return tuple(steps)
    tail = MAX_STEPS - KEPT_FIRST_STEPS - 1
    more = _MORE_STEPS.format(sum(map(_count, steps[KEPT_FIRST_STEPS:-tail])))
    return (*steps[:KEPT_FIRST_STEPS], more, *steps[-tail:])


def _count(step: str) -> int:
    """How many steps one entry stands for (``… 12 more steps``, ``Ran lookup (×3)``)."""
    counted = _COUNTED.fullmatch(step)
    return int(counted.group(1) or counted.group(2)) if counted else 1


class Runner(Protocol):
    """Runs one attempt (what :meth:`ChildContext.delegate` uses for a grandchild)."""

    async def __call__(
        self,
        child: Child,
        prompt: str,
        *,
        limits: Limits,
        account: Account | None,
        subject: str | None,
        context: Mapping[str, Any] | None,
        parent: ChildContext,
        verify: Verifier | None,
    ) -> DelegationResult: ...


class ChildContext:
    """The supervisor's window into one child attempt.

    A child calls :meth:`step` for each finished piece of work,
    :meth:`file_modified` for each file it wrote, runs tools through
    :meth:`tool` (so usage is counted and blocking tools cannot hold the
    deadline), records spend with :meth:`charge`, asks what it cannot know with
    :meth:`ask`, delegates further with :meth:`delegate`, and calls
    :meth:`block` when it cannot go on. :attr:`time_left` and
    :attr:`budget_left` say what it has left to plan with.

    ``state`` is a dict the child may keep across the attempts of one task
    (a recovery loop); in durable runs it must hold JSON data, and it
    survives a crash.
    """

    # Class-level defaults: most attempts never set these, so __init__ need not.
    last_successful_tool: str | None = None
    stopped: ChildSignal | None = None
    """A stop that holds even if the child catches it: a blocker it declared, a
    question nobody answered, a loop lyra saw."""
    failed_tool: str | None = None
    _failed_tool_error: BaseException | None = None
    _meter: Account | None = None
    _tool_started: float = 0.0
    _holding = 0
    _repeats: dict[tuple[str, str], int] | None = None
    _answer: Answerer | None = None
    started = 0.0
    """When the attempt began (``time.monotonic()``), for a live display."""
    current_tool: str | None = None
    """The tool the child is running right now, if any."""
    asking: str | None = None
    """The question the child waits on an answer to right now (``ctx.ask``), if any."""
    provider: str | None = None
    """The model provider the child sent its last request to (set by the meter, and
    by :meth:`cooled`)."""
    requests_answered = 0
    """How many of the child's model requests to a known provider were answered, as a
    framework child's meter counts them: each gives a supervisor's lowered concurrency
    a little back (with none counted, the attempt's success does)."""
    spent_last = False
    """True when this attempt's own charge ran the budget out (not a sibling's)."""
    fresh = False
    """True when the attempt starts without the transcript of earlier attempts (after
    a context overflow): a framework child does not resume its conversation."""
    depth = 0
    """How deep in the delegation tree this attempt is (0: a root delegation)."""
    cooldown_refused = False
    """True when lyra refused the attempt's request because the tree's cooldown for its
    provider outlasted the deadline (:meth:`cooled`): the provider said nothing new."""
    ended = False
    """True once the attempt is over (its result given): code it left running (a worker
    thread the deadline abandoned, a framework's run in it) may spend no more."""

    def __init__(
        self,
        *,
        session_id: str,
        limiter: Limiter,
        limits: Limits,
        attempt: int = 1,
        subject: str | None = None,
        context: Mapping[str, Any] | None = None,
        state: dict[str, Any] | None = None,
        parent: ChildContext | None = None,
        runner: Runner | None = None,
        tree: Tree | None = None,
        answer: Answerer | None = None,
        answers: Mapping[str, str] | None = None,
        fresh: bool = False,
    ) -> None:
        self.session_id = session_id
        self.limits = limits
        """The limits this attempt runs under."""
        self.timeout = limits.timeout
        self.attempt = attempt
        self.subject = subject
        self.context: Mapping[str, Any] = context if context is not None else {}
        self.state: dict[str, Any] = state if state is not None else {}
        self.completed_steps: list[str] = []
        self.steps_done = 0
        self._last_step: str | None = None
        self._step_counts: list[int] = []  # how many steps each entry stands for
        self._counted = self.completed_steps  # the list those counts are of
        self._records_lock = threading.Lock()  # steps and tool counts, from threads at once
        self.files_modified: list[str] = []
        self.tool_usage: dict[str, int] = {}
        self.failed_delegations: list[FailedDelegation] = []
        self.spent_by: dict[str, Usage] = {}
        """What each delegation this attempt made (``ctx.delegate``) was charged, by
        session id and subject (:func:`spender`): the names a budget failure gives."""
        self.answers: dict[str, str] = dict(answers) if answers else {}
        """Answers to questions (``ctx.ask``), carried from earlier attempts or given
        in this one, by question."""
        self._limiter = limiter
        self._parent = parent
        self._runner = runner
        self.tree = tree if tree is not None else Tree()
        """What the whole delegation tree shares (rate-limit cooldowns)."""
        if parent is not None:
            self.depth = parent.depth + 1
        if answer is not None:
            self._answer = answer
        if limits.max_repeats is not None:
            self._repeats = {}
        if fresh:
            self.fresh = True

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
        return self._limiter.remaining()

    @property
    def time_left(self) -> float:
        """Seconds left before the attempt's deadline (never negative): to plan with."""
        return self._limiter.remaining()

    def step(self, description: str) -> None:
        """Record one completed step (shown as ``✓ description`` in reports).

        The same step again at once is counted, not listed again (``Ran lookup
        (×558)``), and past :data:`MAX_STEPS` entries the middle ones give way to
        one ``… N more steps`` line: a runaway's report stays readable and its
        memory bounded. ``steps_done`` counts them all."""
        text = safe_str(description)
        with self._records_lock:  # a sync child's threads may record steps at once
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
        self._limiter.touch()

    def _fold_middle_steps(self) -> None:
        """Keep the first :data:`KEPT_FIRST_STEPS` entries and the latest, with one
        line counting the steps between."""
        steps, counts, head = self.completed_steps, self._step_counts, KEPT_FIRST_STEPS
        folded = counts[head] + counts[head + 1]
        del steps[head + 1], counts[head + 1]
        counts[head] = folded
        steps[head] = _MORE_STEPS.format(folded)

    def file_modified(self, path: str) -> None:
        """Record a file the child wrote; repeated paths are listed once."""
        path = safe_str(path)
        if path not in self.files_modified:
            self.files_modified.append(path)
        self._limiter.touch()

    def heartbeat(self) -> None:
        """Say the child is alive and working (resets the idle timeout)."""
        self._limiter.touch()

    # -- tools --------------------------------------------------------------------------

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
        propagates unchanged and is remembered as a tool failure. The call is
        refused (and the attempt ends) when the tree's ``max_tool_calls`` is
        spent, or when it repeats an identical call past ``max_repeats``.
        """
        name = safe_str(name)
        self._begin_tool(name, args, kwargs)
        fn = tracing.tool(name, fn)
        try:
            result = await call_off_the_loop(fn, *args, **kwargs)
        except Exception as exc:
            self.current_tool = None
            self.failed_tool, self._failed_tool_error = name, exc
            raise
        # (A tool stopped by a cancellation stays current: an idle report names it.)
        self.current_tool = None
        self.last_successful_tool = name
        self._limiter.touch()
        return result

    def tool_started(self, name: str, arguments: object = None) -> str | None:
        """Record the start of a tool call that a framework runs itself (from its own
        hook), as :meth:`tool` does for the calls it runs: usage is counted, it is
        progress, the tree's tool-call budget is charged, a repeat past
        ``max_repeats`` ends the attempt. ``arguments`` (a dict or JSON text) tells
        identical calls apart. Returns a note for the model when this call is the
        last identical one allowed (for frameworks that let lyra shape a result)."""
        name = safe_str(name)
        count = self._begin_tool(name, arguments=arguments)
        return self._note(name, count)

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
        self._limiter.touch()

    def repeat_note(self, name: str, /, *args: Any, **kwargs: Any) -> str | None:
        """The note for the model after :meth:`tool` ran ``name`` with these arguments,
        when that was the last identical call ``max_repeats`` allows (else ``None``)."""
        repeats = self._repeats
        if repeats is None:
            return None
        return self._note(name, repeats.get((safe_str(name), _arguments_key(args, kwargs)), 0))

    def _note(self, name: str, count: int) -> str | None:
        limit = self.limits.max_repeats
        if limit is None or count != limit:
            return None
        return (
            f"[lyra] {name} has now been called {count} times with these same arguments; "
            "one more identical call ends this task as a loop. Use what you have or "
            "change approach."
        )

    def _begin_tool(
        self,
        name: str,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        arguments: object = None,
    ) -> int:
        """A tool call starts: stops checked, repeats counted, a tool call charged ahead;
        how many identical calls this one makes (0 when nobody counts)."""
        self.raise_if_stopped()
        count = 0
        repeats = self._repeats
        if repeats is not None:
            key = _arguments_key(args, kwargs) if arguments is None else _json_key(arguments)
            with self._records_lock:  # (a framework's sync tools start in threads at once)
                count = repeats[(name, key)] = repeats.get((name, key), 0) + 1
            if count > (self.limits.max_repeats or count):
                self.stopped = LoopDetected(name, _shortened(_readable(key)), count)
                raise self.stopped
        account = self._limiter.account
        if account is not None and account.counts_tool_calls:
            self._after_charge((self._meter or self._metered()).charge(tool_calls=1, ahead=True))
        with self._records_lock:
            self.tool_usage[name] = self.tool_usage.get(name, 0) + 1
        self.current_tool = name
        self._tool_started = self._limiter.now()
        self._limiter.touch()
        return count

    @property
    def tool_running_for(self) -> float | None:
        """Seconds the tool now running has run (``None``: no tool is running)."""
        if self.current_tool is None:
            return None
        return max(0.0, self._limiter.now() - self._tool_started)

    def raised_by_tool(self, exc: BaseException) -> bool:
        """True when ``exc`` is the exception a tool raised (run through :meth:`tool`, or
        ended with :meth:`tool_ended`), or was raised ``from`` it (a framework's wrapper:
        a few links of the chain at most, as it may loop)."""
        failed = self._failed_tool_error
        link: BaseException | None = exc
        for _ in range(8):
            if link is None or failed is None:
                return False
            if link is failed:
                return True
            link = link.__cause__
        return False

    # -- stopping -------------------------------------------------------------------------

    def block(self, category: FailureCategory | str, reason: str) -> NoReturn:
        """Declare the child blocked and end it.

        ``category`` is ``missing_context``, ``invalid_task`` or ``tool_error``.
        The declaration holds even if the child catches the exception.
        """
        declared = FailureCategory(category)
        if declared not in _BLOCKABLE:
            allowed = ", ".join(sorted(_BLOCKABLE))
            raise ValueError(f"a child can block only with one of {allowed}, not {declared}")
        text = clipped(safe_str(reason).strip())
        if not text:  # (the report's "Blocked on:" would say nothing)
            raise ValueError("ctx.block needs a reason: what the task is blocked on")
        self.stopped = ChildBlocked(declared, text)
        raise self.stopped

    @property
    def blocked(self) -> ChildBlocked | None:
        """The blocker the child declared (a question nobody answered is one)."""
        stopped = self.stopped
        return stopped if isinstance(stopped, ChildBlocked) else None

    @property
    def question(self) -> str | None:
        """The question the child asked and nobody answered, if it did (or the one
        whose answer it still waited for when the attempt ended)."""
        stopped = self.stopped
        return stopped.question if isinstance(stopped, QuestionAsked) else self.asking

    def raise_if_stopped(self) -> None:
        """Raise the stop that ends this attempt, if one came (a blocker or a question a
        framework caught, a loop, the tree's budget run out meanwhile)."""
        if self.stopped is not None:
            raise self.stopped
        if self._limiter.stop is not None:  # (asked before every request: no call unless so)
            self._limiter.check_budget()
        if self.ended:
            raise _over()

    # -- questions ------------------------------------------------------------------------

    async def ask(self, question: str) -> str:
        """Ask whoever can answer (the ``answer=`` of the delegation, a parent, an MCP
        or A2A client) and return the answer.

        The wait is not idle time (the deadline still runs). An answer an earlier
        attempt of the task received comes back at once. Without anyone to answer
        (or when the answerer has none), the attempt ends as ``missing_context`` /
        ``input_required`` with the question in its report, and a later attempt
        that carries the answer gets it here. A blank answer is none; an answerer that
        raises gives none either (its error is named in the report's evidence: the
        caller's ``answer=`` failed, not the child)."""
        if not isinstance(question, str):
            raise TypeError(f"ctx.ask needs a question (a string), not {type_name(question)}")
        question = clipped(safe_str(question).strip())
        if not question:
            raise ValueError("ctx.ask needs a question")
        self.raise_if_stopped()
        known = self.answers.get(question)
        failed: str | None = None
        try:
            if known is None and self._answer is not None:
                known, failed = await self._answered(question)
        finally:  # (the deadline may end the wait: the question was asked all the same)
            events.info(
                events.QUESTION_ASKED,
                session_id=self.session_id,
                subject=self.subject,
                attempt=self.attempt,
                question=question,
                answered=known is not None,
            )
        if known is None:
            self.stopped = QuestionAsked(question, answerer_failed=failed)
            raise self.stopped
        self._limiter.touch()
        return known

    async def _answered(self, question: str) -> tuple[str | None, str | None]:
        """The answerer's answer to ``question`` (``None``: none, or a blank one), and,
        when it raised, its error."""
        assert self._answer is not None
        failed: str | None = None
        self.asking = question
        try:
            with self._limiter.waiting():
                # (a plain function is called here, on the loop: one in a worker
                # thread abandoned at the deadline would read the human's late answer
                # from stdin and lose it, where the next attempt waits for it)
                reply = self._answer(question)
                if inspect.isawaitable(reply):
                    reply = await reply
        except ChildSignal:
            raise  # (a parent's ctx.ask as the answerer: its own stop, passed on)
        except Exception as exc:  # noqa: BLE001 - the caller's answerer, not the child
            reply, failed = None, f"{type_name(exc)}: {safe_str(exc)}"
        self.asking = None  # (left set when the wait ends otherwise: the report names it)
        text = safe_str(reply) if reply is not None else ""
        if not text.strip():  # (a blank is no answer: the question stays open)
            return None, failed
        self.answers[question] = text
        return text, failed

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
        recorded, and ends the attempt the same way; so is one made once the
        attempt is over (by a worker thread its deadline abandoned).
        """
        checked_charge(input_tokens, output_tokens, cost_usd, turns)
        if ahead and self.ended:
            raise _over()
        self._after_charge(
            (self._meter or self._metered()).charge(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost_usd=cost_usd,
                turns=turns,
                ahead=ahead,
            )
        )

    def take_turn(self) -> None:
        """Charge the turn of a model request about to be sent (``charge(turns=1,
        ahead=True)``): a spent budget refuses it (:class:`~lyra.errors.BudgetExhausted`),
        as does an attempt that is over."""
        if self.ended:
            raise _over()
        self._after_charge((self._meter or self._metered()).take_turn())

    def give_back_turn(self) -> None:
        """The request :meth:`take_turn` charged was never sent (the token budget had no
        room for it, or the attempt ended while it waited): its turn is given back, so
        ``turns`` counts the requests sent."""
        if self._meter is not None:
            self._meter.give_back_turn()

    def _after_charge(self, over: Account | None) -> None:
        """A charge was made: progress, and the end of the attempt when ``over`` (the
        account it found out of budget) is not ``None``."""
        self._limiter.touch()
        if over is not None:
            self.spent_last = True
            self._limiter.out_of_budget(over)
            raise BudgetExhausted(f"Budget exhausted: {over.exhausted}")

    async def reserve_tokens(self, worst: int, least: int) -> int:
        """Hold tokens of the tree's budget for a model request about to be sent: up to
        ``worst`` (its output limit plus its input), at least ``least`` (its input and
        a token to answer with). While requests in flight hold the room it needs, it
        waits for them to be answered (not idle time); with none in flight and no
        room, the request is refused and the attempt ends as out of budget. Returns
        the tokens held: give them back with :meth:`release_tokens` once answered."""
        account = self._meter or self._metered()
        self.raise_if_stopped()
        granted = account.reserve(worst, least)  # (most requests find room at once)
        while not granted:
            spent = account.spent()  # (another's request or tool call was refused meanwhile)
            if spent is not None:
                self._limiter.out_of_budget(spent)
                raise BudgetExhausted(f"Budget exhausted: {spent.exhausted}")
            released = anyio.Event()  # (told before trying again: no release is missed)
            account.when_released(functools.partial(self._limiter.on_loop, released.set))
            granted = account.reserve(worst, least)
            if granted:
                break
            if not account.holds_others():
                over = account.refuse(least)
                if over is not None:
                    self._limiter.out_of_budget(over)
                why = over.exhausted if over is not None else "no room for the next request"
                raise BudgetExhausted(f"Budget exhausted: {why}")
            with self._limiter.waiting():
                await released.wait()
            self.raise_if_stopped()
        self._holding += granted
        return granted

    def release_tokens(self, tokens: int) -> None:
        """Give back what :meth:`reserve_tokens` held (the request was answered, or ended)."""
        tokens = min(tokens, self._holding)
        if tokens and self._meter is not None:
            self._holding -= tokens
            self._meter.release(tokens)

    def open_request(self, worst: int, least: int) -> int:
        """A model request about to be sent, when nothing stands in its way: its turn
        charged ahead and up to ``worst`` tokens held (at least ``least`` ≥ 1) in one
        step, as progress; the tokens held. 0 when something does (a stop, an attempt
        that is over, an account out of turns or of room): nothing is charged nor held,
        and :meth:`take_turn` then :meth:`reserve_tokens` say what (the meter's way
        for every model request; :meth:`close_request` ends it)."""
        if self.stopped is not None or self.ended or self._limiter.stop is not None:
            return 0
        granted = (self._meter or self._metered()).open_request(worst, least)
        if granted:
            self._holding += granted
            self._limiter.touch()
        return granted

    def close_request(
        self, held: int, input_tokens: int, output_tokens: int, cost_usd: float
    ) -> None:
        """A model request answered: the ``held`` tokens given back and its usage
        charged, in one step, as progress. Raises :class:`~lyra.errors.BudgetExhausted`
        as :meth:`charge` does, and refuses what :meth:`charge` refuses."""
        checked_charge(input_tokens, output_tokens, cost_usd, 0)
        held = min(held, self._holding)
        self._holding -= held
        account = self._meter or self._metered()
        self._after_charge(account.settle(held, input_tokens, output_tokens, cost_usd))

    def release_all_tokens(self) -> None:
        """Give back every token this attempt still holds (the runner calls it when the
        attempt ends: a request cut off by a stop holds nothing after it)."""
        self.release_tokens(self._holding)

    @property
    def budget_left(self) -> Budget:
        """What the tree may still spend (``None`` fields: no limit)."""
        account = self._limiter.account
        return account.left() if account is not None else Budget()

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
        """This attempt's own meter, drawing on the tree's account (made on first use;
        charges read ``self._meter or self._metered()``, a call less per model request)."""
        if self._meter is None:
            self._meter = Account(parent=self._limiter.account)
        return self._meter

    # -- model providers ------------------------------------------------------------------

    async def cooled(self, provider: str) -> None:
        """Before a model request to ``provider``: wait out a rate-limit cooldown the
        tree knows of (not idle time; the deadline still runs). One that outlasts the
        deadline is not waited for: the request is refused at once as the provider's
        rate limit, which recovery sends again after the cooldown or to a fallback
        child (waited for, it ended as a timeout that said nothing of the storm)."""
        self.provider = provider
        left = self.tree.cooldown_left(provider)
        if left <= 0:
            return
        if left >= self._limiter.remaining():
            self.cooldown_refused = True
            raise TransientError(
                f"Rate limited: {provider}'s cooldown ends in {left:.1f}s, after this "
                "attempt's deadline",
                retry_after=left,
                status=429,
                error_type="rate_limit",
            )
        with self._limiter.waiting():
            await self.tree.cooled(provider)

    # -- nesting --------------------------------------------------------------------------------

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
        verify: Verifier | None = None,
    ) -> DelegationResult:
        """Run a grandchild under this attempt's limits; its failure is a result.

        Its deadline is the smaller of ``timeout`` and this attempt's time
        left; ``budget`` limits it further, drawing on this tree's account;
        cancelling this attempt cancels it. Its questions go to whoever answers
        this attempt's; ``verify`` checks its output.
        """
        if self._runner is None:
            raise RuntimeError("this context was not made by lyra; it cannot delegate")
        self.raise_if_stopped()  # (an attempt that is over, or stopped, starts no grandchild)
        if timeout is not None:  # (a caller's mistake, said as adelegate_task says it)
            timeout = check_timeout(timeout)
        # A hair before this attempt's own deadline, so that the grandchild's
        # timeout is reported back here rather than lost in this attempt's.
        left = self.remaining() - min(_NESTED_MARGIN, self.remaining() / 20)
        own = left if timeout is None else min(timeout, left)
        result = await self._runner(
            child,
            prompt,
            limits=Limits(
                timeout=round(max(own, 1e-3), 3),  # (as a report says it: ms)
                idle_timeout=idle_timeout,
                budget=budget,
                max_repeats=self.limits.max_repeats,
            ),
            account=Account.for_budget(budget, self._metered()),
            subject=subject,
            context=context,
            parent=self,
            verify=verify,
        )
        if result.usage is not None:
            self.spent_by[spender(result.session_id, subject)] = result.usage
        if result.failure is not None:
            failure = result.failure
            self.failed_delegations.append(
                FailedDelegation(
                    session_id=result.session_id,
                    category=failure.category,
                    error_type=failure.error_type,
                )
            )
        self._limiter.check_budget()  # the grandchild may have spent what was left
        self._limiter.touch()
        return result

    def delegation_stopped(
        self, session_id: str, subject: str | None, usage: Usage | None, budget: bool
    ) -> None:
        """A delegation of this attempt was stopped from outside: what it spent is kept;
        stopped with this attempt (its deadline, or its tree's budget run out elsewhere),
        it is listed in this attempt's report as failed. One this attempt's own code
        stopped (a race it no longer needed, a wait it gave up) failed nothing."""
        if usage:
            self.spent_by[spender(session_id, subject)] = usage
        if not (budget or self._limiter.ending()):
            return
        error_type = ErrorType.BUDGET if budget else ErrorType.TIMEOUT
        self.failed_delegations.append(
            FailedDelegation(
                session_id=session_id, category=FailureCategory.TIMEOUT, error_type=error_type
            )
        )

    # -- what the runner and displays read -----------------------------------------------

    @property
    def last_progress(self) -> float:
        """When the child last showed progress (``time.monotonic()``; observed or idle
        attempts only, else when it began)."""
        return self._limiter.last_progress or self.started

    @property
    def idle_for(self) -> float | None:
        """Seconds since the last progress, when an idle timeout is set."""
        limiter = self._limiter
        if limiter.idle is None:
            return None
        return max(0.0, time.monotonic() - limiter.last_progress)

    @property
    def idle_timeout(self) -> float | None:
        """The idle timeout of this attempt (``None``: none)."""
        return self._limiter.idle

    @property
    def stopped_by(self) -> Account | None:
        """The account whose exhaustion ended this attempt, if one did."""
        return self._limiter.stop

    @property
    def account(self) -> Account | None:
        """The account this attempt draws on (``None``: no budget anywhere above)."""
        return self._limiter.account

    @property
    def parent(self) -> ChildContext | None:
        """The attempt that delegated this one, for a nested delegation."""
        return self._parent

    @property
    def parent_session_id(self) -> str | None:
        """The session that delegated this one, for a nested delegation."""
        return self._parent.session_id if self._parent is not None else None

    def observe(self) -> None:
        """Register with a live display, if one observes (the runner calls it)."""
        if _live.watch(self):
            self._limiter.observed = True
            self.started = time.monotonic()
            if self._limiter.idle is None:
                self._limiter.last_progress = self.started

    def unobserve(self) -> None:
        if self._limiter.observed:
            _live.unwatch(self)


def _arguments_key(args: tuple[Any, ...], kwargs: Mapping[str, Any] | None) -> str:
    """The arguments of a ``ctx.tool`` call as canonical JSON that tells identical calls
    apart, as a report shows them: the keyword arguments an object, the positional ones
    an array (with both, the object last in it). An object JSON cannot hold is written
    as its ``str`` (one shown by address is never identical to another)."""
    if not kwargs:
        return _json_key(list(args))
    return _json_key(dict(kwargs) if not args else [*args, dict(kwargs)])


def _json_key(arguments: object) -> str:
    """A framework's tool arguments (a dict, or JSON text) as canonical text."""
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return safe_str(arguments)
    try:  # (orjson: several times quicker than json, on every tool call)
        key = orjson.dumps(arguments, default=_unjsonable, option=_CANONICAL)
        if b"null" not in key:  # (orjson writes NaN and infinities as null, too)
            return key.decode()
    except TypeError:  # an integer past 64 bits, …
        pass
    try:
        return json.dumps(arguments, sort_keys=True, default=_unjsonable, ensure_ascii=False)
    except (TypeError, ValueError):
        return safe_str(arguments)


def _unjsonable(value: object) -> str:
    """An argument JSON cannot hold, as its ``str``; one that cannot describe itself (a
    lazy proxy not bound yet), by its address: never identical to another, and never a
    reason for the tool call to fail."""
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - a hostile __str__/__repr__
        return f"<{type_name(value)} at {id(value):#x}>"


_CANONICAL = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_NON_STR_KEYS
    | orjson.OPT_PASSTHROUGH_DATETIME  # (to str(), as json's default=str writes them)
    | orjson.OPT_PASSTHROUGH_DATACLASS
)


def _readable(key: str) -> str:
    """A call's arguments as a report shows them: JSON spaced as people write it."""
    try:
        return json.dumps(json.loads(key), sort_keys=True, ensure_ascii=False)
    except ValueError:
        return key


def _shortened(text: str) -> str:
    return text if len(text) <= SHOWN_ARGUMENTS else text[: SHOWN_ARGUMENTS - 1] + "…"


def _over() -> BudgetExhausted:
    """The refusal of a charge ahead (a model request) once the attempt is over."""
    return BudgetExhausted(
        "Budget closed: the attempt is over (its deadline passed, or it was stopped), "
        "so nothing more is spent for it"
    )


def spender(session_id: str, subject: str | None) -> str:
    """A delegation as a budget failure names it: its session id, and its subject when
    it has one (what a reader knows it by: the session id alone is in the logs only)."""
    return f"{session_id} [{_shortened(subject)}]" if subject else session_id


@runtime_checkable
class ChildAgent(Protocol):
    """A child agent object: ``await child.run(prompt, ctx)`` returns the output."""

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        """Do the task and return its result text."""
        ...


ChildFn: TypeAlias = Callable[[str, ChildContext], Awaitable[str]]
SyncChildFn: TypeAlias = Callable[[str, ChildContext], str]
"""A plain ``def`` child: lyra runs it in a worker thread."""
Child: TypeAlias = ChildAgent | ChildFn | SyncChildFn
