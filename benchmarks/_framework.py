"""The harness every framework benchmark shares: what a framework child costs per run.

A framework module gives its agent's sides (:class:`Sides`, built for a model
latency) and the harness runs them, so that every framework child is measured
the same way:

- **bare**: the framework's own run call;
- **bare + hook**: the same with the framework's own do-nothing hook (what the
  framework charges any run for being observed, which lyra's child must be);
- **lyra**: ``adelegate_task(prompt, child=<Framework>Child(agent), timeout=60,
  idle_timeout=30, budget=Budget(max_tokens=10**12, max_turns=10**9))``, lyra's
  events written to a file as the command line writes them;
- **plain child**: ``adelegate_task`` with the same limits around a child that
  only awaits the bare run (the delegation's cost around the run, no hook in it);
- **floor child**: the least a supervisor under deadlines does around the same
  run, for the plain child to be read against (its floor of the same shape):
  the run under ``anyio.move_on_after``, its exception survived, two events of
  lyra's names written with orjson (``_common.BareLog``, as the ``overhead``
  floors write them), and the output returned in a text with a metadata block;
- **floor + hook** (where the framework gives it): the floor of lyra's child, for
  lyra's share to be read against: the floor child around the run with the
  framework's hook doing the least that holds the same limits (:class:`FloorMeter`:
  turns counted and capped, each request's worst case of tokens held and given back,
  the usage charged, every sign of life pushing an idle deadline).

**CPU pass** (a model that answers at once, so nothing hides lyra's cost):
interleaved rounds, each side's block in a rotated order, each block in a
fresh event loop after a collection, CPU µs per run of this process
(``time.process_time``: load from other processes does not count). The
headline is **lyra's share**: lyra − bare + hook, the median of the per-round
differences (each round's two blocks ran seconds apart, under the same load),
against ≤ 150 µs; for information, plain child − floor child (what lyra's
delegation costs over the floor's, in the same place), and the share's own floor
(floor + hook − bare + hook) with lyra over it (lyra − floor + hook). **Wall pass** (a model
that takes 20 ms per request, as a fast real one does): lyra and bare
alternating (and floor + hook, for information), wall time per run, the median
of the per-round ratios against ≤ 1.01×. **Calls and bytecodes** (for
information): lyra's Python calls per run (resumes of coroutines included) over
the bare run with the hook, counted with ``sys.setprofile``, and the bytecodes it
executes, counted with ``sys.settrace``'s opcode events: exact where CPU time is
noisy (the bytecodes are the closer measure: a call may run three or three
hundred; the garbage collector's walks over what lyra allocates show in
neither); the floor's too, where there is one.
**Cold and hot** (for information): a trivial delegation, and the floor child
around the same trivial run, each timed alone right after a bare run of the
framework (cold) and again at once (hot): in a framework run each of lyra's
steps runs after the framework's own, and costs about three times what it costs
back to back, as the floor's code does.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from _common import (
    BareLog,
    Row,
    Size,
    events_to,
    floor_ended,
    floor_started,
    fmt_value,
    median,
)

Run = Callable[[str], Awaitable[str]]
"""One agent run on a prompt; its output text."""
MeteredRun = Callable[[str, "FloorMeter"], Awaitable[str]]
"""One agent run on a prompt with the framework's hook holding ``FloorMeter``'s limits."""

SHARE_TARGET = 150.0  # µs of CPU: lyra − bare + hook
WALL_TARGET = 1.01  # lyra / bare with a 20 ms model
LATENCY = 0.020  # seconds per model request in the wall pass
SIDES = ("bare", "bare + hook", "lyra", "plain child", "floor child")
FLOOR_HOOK = "floor + hook"
"""The sixth side, for a framework that gives one (``Sides.floor_hooked``)."""


def _nothing() -> None:
    pass


def text_size(text: str) -> int:
    """The UTF-8 size of ``text`` (as lyra's children measure a request's text)."""
    return len(text) if text.isascii() else len(text.encode(errors="surrogatepass"))


class FloorMeter:
    """The least a hook does to hold the limits lyra's child holds in the harness
    (``Budget(max_tokens=10**12, max_turns=10**9)``, an idle timeout), in plain Python
    and for one run only: a turn counted and capped before each model request, the
    request's worst case of tokens held (its text's bytes / 4 + 16, and its output
    limit) and given back when it is answered, the run's running usage charged against
    the token limit, and every sign of life pushing the idle deadline (``progress``,
    set by the floor's delegation). Nothing else: no tree of accounts, no prices, no
    repeats counted, no report of the run's steps."""

    __slots__ = ("asked", "held", "max_tokens", "max_turns", "progress", "tokens", "turns")

    def __init__(self, progress: Callable[[], None]) -> None:
        self.progress = progress
        self.max_tokens, self.max_turns = 10**12, 10**9
        self.tokens = self.turns = self.held = self.asked = 0

    def before(self, text_bytes: int, output: int) -> None:
        """A model request is about to be sent (the run's requests go one at a time)."""
        if self.turns >= self.max_turns:
            raise RuntimeError("max_turns reached")
        worst = text_bytes // 4 + 16 + output
        if self.tokens + self.held + worst > self.max_tokens:
            raise RuntimeError("max_tokens reached")
        self.turns += 1
        self.held += worst
        self.asked = worst
        self.progress()

    def after(self, tokens: int) -> None:
        """The request was answered; ``tokens``: the run's usage so far."""
        self.held -= self.asked
        self.tokens = tokens
        if tokens > self.max_tokens:
            raise RuntimeError("max_tokens exceeded")
        self.progress()


@dataclass(frozen=True)
class Sides:
    """One agent, built for one model latency: its bare run, the same with the
    framework's do-nothing hook, and lyra's child around it. ``fresh`` runs before
    every run of every side (a scripted model that needs refilling). ``floor_hooked``,
    where a framework gives it: the run with the framework's hook doing what
    :class:`FloorMeter` says, the floor of lyra's child (run inside the floor child)."""

    bare: Run
    hooked: Run
    child: Any
    fresh: Callable[[], None] = _nothing
    floor_hooked: MeteredRun | None = None


@dataclass(frozen=True)
class Plan:
    """Runs per block and rounds, (full, quick, smoke), for each pass."""

    cpu_runs: tuple[int, int, int] = (40, 8, 1)
    cpu_rounds: tuple[int, int, int] = (21, 3, 1)
    wall_runs: tuple[int, int, int] = (10, 2, 1)
    wall_rounds: tuple[int, int, int] = (15, 3, 1)
    cold_runs: tuple[int, int, int] = (200, 30, 1)


@dataclass(frozen=True)
class Framework:
    """What the harness needs of a framework: ``build(latency)`` makes its sides
    (``latency``: seconds a model request takes), every output contains ``answer``."""

    bench: str
    build: Callable[[float], Sides]
    prompt: str
    answer: str
    per_run: str  # e.g. "3 model requests, 2 tool calls"
    requests: int  # model requests per run
    hook: str  # the do-nothing hook, e.g. "an empty capability"
    plan: Plan = field(default_factory=Plan)


def _with_floor(sides: Sides, names: tuple[str, ...]) -> tuple[str, ...]:
    """``names``, and the floor + hook side where the framework gives one."""
    return names if sides.floor_hooked is None else (*names, FLOOR_HOOK)


def _runners(sides: Sides, log: BareLog) -> dict[str, Run]:
    """The sides as runners: lyra's two and the floors built around the framework's
    own (the floor writing its events to ``log``)."""

    async def plain_child(prompt: str, ctx: Any) -> str:
        return await sides.bare(prompt)

    runners = {
        "bare": sides.bare,
        "bare + hook": sides.hooked,
        "lyra": _delegating(sides.child),
        "plain child": _delegating(plain_child),
        "floor child": _floor(sides.bare, log),
    }
    if sides.floor_hooked is not None:
        runners[FLOOR_HOOK] = _floor_hooked(sides.floor_hooked, log)
    return runners


def _delegating(child: Any) -> Run:
    """``adelegate_task`` of ``child`` with the harness's limits."""
    from lyra import Budget, adelegate_task

    budget = Budget(max_tokens=10**12, max_turns=10**9)

    async def run(prompt: str) -> str:
        return await adelegate_task(prompt, child=child, timeout=60, idle_timeout=30, budget=budget)

    return run


def _floor_ended(log: BareLog, session: str, started: float, output: str, error: str | None) -> str:
    """A floor child's end: its closing event, and the output (or the error) in a text
    with a metadata block."""
    status = "failed" if floor_ended(log, session, started, error) else "completed"
    return (
        f"{output or error}\n\n<task_metadata>\n<status>{status}</status>\n"
        f"<session_id>{session}</session_id>\n</task_metadata>"
    )


def _floor(inner: Run, log: BareLog) -> Run:
    """The floor child around ``inner``: see the module docstring."""

    async def floor_child(prompt: str) -> str:
        session, started = floor_started(log, 60)
        output, error = "", None
        with anyio.move_on_after(60) as scope:
            try:
                output = await inner(prompt)
            except Exception as exc:  # noqa: BLE001 - the same isolation lyra gives
                error = f"{type(exc).__name__}: {exc}"
        if scope.cancelled_caught:
            error = "timed out after 60s"
        return _floor_ended(log, session, started, output, error)

    return floor_child


def _floor_hooked(inner: MeteredRun, log: BareLog, idle: float = 30.0) -> Run:
    """The floor child around ``inner`` run with the floor's hook, under the harness's
    idle timeout too: a sign of life past the scope's deadline less the idle time pushes
    it (as far as the total one) to a second beyond the idle time, so that the timer is
    moved once a second at most (as lyra re-arms its idle deadline)."""

    async def floor_child(prompt: str) -> str:
        session, started = floor_started(log, 60)
        output, error = "", None
        total = anyio.current_time() + 60
        with anyio.CancelScope(deadline=min(total, anyio.current_time() + idle)) as scope:

            def progress() -> None:
                now = time.monotonic()  # (asyncio's clock)
                if now + idle > scope.deadline and scope.deadline < total:
                    scope.deadline = min(total, now + idle + 1.0)

            try:
                output = await inner(prompt, FloorMeter(progress))
            except Exception as exc:  # noqa: BLE001 - the same isolation lyra gives
                error = f"{type(exc).__name__}: {exc}"
        if scope.cancelled_caught:
            error = "timed out"
        return _floor_ended(log, session, started, output, error)

    return floor_child


def _block(fw: Framework, sides: Sides, run: Run, runs: int, clock: Callable[[], float]) -> float:
    """Seconds (by ``clock``) per run, ``runs`` runs one after another in a fresh
    event loop, after a collection (``sides.fresh``, alike on every side, is timed too)."""

    async def body() -> float:
        started = clock()
        for i in range(runs):
            sides.fresh()
            output = await run(f"{fw.prompt} ({i})")
            if fw.answer not in output:
                raise RuntimeError(f"unexpected output: {output[:300]!r}")
        return clock() - started

    gc.collect()
    return asyncio.run(body()) / runs


def _rounds(
    fw: Framework,
    sides: Sides,
    names: tuple[str, ...],
    runs: int,
    rounds: int,
    clock: Callable[[], float],
    log: BareLog,
    *,
    warm: bool = True,
) -> dict[str, list[float]]:
    """Seconds per run of each side, one value a round; each round in a rotated order
    (after a warm-up block of each, unless not ``warm``: a smoke run measures nothing)."""
    runners = _runners(sides, log)
    for name in names if warm else ():
        _block(fw, sides, runners[name], max(1, runs // 4), clock)  # warm-up: imports, caches
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for number in range(rounds):
        shift = number % len(names)
        for name in names[shift:] + names[:shift]:
            seconds[name].append(_block(fw, sides, runners[name], runs, clock))
    return seconds


def _counted(
    fw: Framework, sides: Sides, run: Run, runs: int, *, warm: bool
) -> tuple[float, float]:
    """Python calls and bytecodes executed per run, in this thread over ``runs`` runs
    after a warm-up: the same counts on every machine, where CPU time moves with the
    host's load. Calls (coroutine and generator resumes included) are counted with
    ``sys.setprofile``; bytecodes, in a second pass, with ``sys.settrace``'s opcode
    events. A call may run three bytecodes or three hundred: the bytecodes are the
    closer measure of the work."""
    calls = bytecodes = 0

    def call(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    def bytecode(frame: Any, event: str, arg: Any) -> Any:
        nonlocal bytecodes
        if event == "opcode":
            bytecodes += 1
        return bytecode

    def entered(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        return bytecode

    async def body() -> None:
        for i in range(runs):
            sides.fresh()
            await run(f"{fw.prompt} ({i})")

    if warm:
        asyncio.run(body())  # warm-up: first-run imports and caches count for nothing
    for hook, install in ((call, sys.setprofile), (entered, sys.settrace)):
        install(hook)
        try:
            asyncio.run(body())
        finally:
            install(None)
    return calls / runs, bytecodes / runs


def _calls_rows(fw: Framework, sides: Sides, runs: int, log: BareLog, *, warm: bool) -> list[Row]:
    """lyra's Python calls and bytecodes per run over the bare run with the framework's
    hook, and the floor's (where the framework gives one)."""
    runners = _runners(sides, log)
    hooked = _counted(fw, sides, runners["bare + hook"], runs, warm=warm)
    rows = []
    for name, side in (("lyra", "lyra"), ("the floor", FLOOR_HOOK)):
        if side not in runners:
            continue
        counts = _counted(fw, sides, runners[side], runs, warm=warm)
        for what, mine, base in zip(("Python calls", "bytecodes"), counts, hooked, strict=True):
            rows.append(
                Row(
                    fw.bench,
                    f"{name}'s {what} per run",
                    mine - base,
                    "",
                    note=f"{side} {mine:,.0f} − bare + hook {base:,.0f} (counted: the same "
                    "on any host, where the share moves with its load)",
                )
            )
    return rows


async def _answer(prompt: str, ctx: Any = None) -> str:
    """A run (and a child) that answers at once."""
    return prompt


def _cold_rows(fw: Framework, sides: Sides, runs: int, log: BareLog, *, warm: bool) -> list[Row]:
    """What running after the framework costs lyra's code: a trivial delegation
    (``adelegate_task`` with the same limits, a child that answers at once) and the floor
    child around the same, each timed alone (``time.thread_time_ns``) right after a bare
    run of the framework (cold, as each of lyra's steps inside a framework run comes),
    then again at once (hot). Timing the delegation alone, not a block around a run 30
    times longer, leaves little of the host's noise in it."""
    names = ("trivial delegation", "trivial floor child")
    runners = dict(zip(names, (_delegating(_answer), _floor(_answer, log)), strict=True))
    cold: dict[str, list[float]] = {name: [] for name in names}
    hot: dict[str, list[float]] = {name: [] for name in names}

    async def timed(run: Run) -> float:
        started = time.thread_time_ns()
        output = await run(fw.prompt)
        spent = (time.thread_time_ns() - started) / 1e3
        if not output.startswith(f"{fw.prompt}\n") or "<status>completed</status>" not in output:
            raise RuntimeError(f"unexpected output: {output[:300]!r}")
        return spent

    first = 2 if warm else 0  # the first two: imports and caches count for nothing

    async def body() -> None:
        for i in range(runs + first):
            for name in names[i % 2 :] + names[: i % 2]:
                sides.fresh()
                await sides.bare(f"{fw.prompt} ({i})")
                after_run, again = await timed(runners[name]), await timed(runners[name])
                if i >= first:
                    cold[name].append(after_run)
                    hot[name].append(again)

    asyncio.run(body())
    return [
        Row(
            fw.bench,
            f"{name} after a bare run (cold), CPU µs",
            median(cold[name]),
            "µs",
            note=f"back to back (hot): {median(hot[name]):.0f} µs; median of {runs}",
        )
        for name in names
    ]


def spread(values: list[float], digits: int = 0) -> str:
    return f"min {min(values):.{digits}f}, max {max(values):.{digits}f}"


def _cpu_rows(fw: Framework, us: dict[str, list[float]], judge: bool) -> list[Row]:
    """The CPU pass's rows: lyra's share (judged), then each side and the differences."""
    bare, hooked, lyra, plain, floor = (us[name] for name in SIDES)
    share = [a - b for a, b in zip(lyra, hooked, strict=True)]
    diffs = {
        "plain child − bare": [a - b for a, b in zip(plain, bare, strict=True)],
        "floor child − bare": [a - b for a, b in zip(floor, bare, strict=True)],
        "plain child − floor child": [a - b for a, b in zip(plain, floor, strict=True)],
        "bare + hook − bare": [a - b for a, b in zip(hooked, bare, strict=True)],
    }
    ratio = [a / b for a, b in zip(lyra, bare, strict=True)]
    value = median(share)
    rounds = len(share)
    note = (
        f"median of {rounds} per-round differences lyra − bare + {fw.hook} "
        f"({spread(share)}); medians' difference {median(lyra) - median(hooked):.0f}"
    )
    rows = [
        Row(
            fw.bench,
            "lyra's share, CPU µs per run",
            value,
            "µs",
            f"≤ {SHARE_TARGET:.0f} µs",
            value <= SHARE_TARGET if judge else None,
            note,
        )
    ]
    if FLOOR_HOOK in us:  # the share's own floor, and lyra over it
        floor_hook = us[FLOOR_HOOK]
        diffs["floor + hook − bare + hook (the share's floor)"] = [
            a - b for a, b in zip(floor_hook, hooked, strict=True)
        ]
        diffs["lyra − floor + hook"] = [a - b for a, b in zip(lyra, floor_hook, strict=True)]
    for name in us:
        note = f"with {fw.hook}; {spread(us[name])}" if name == "bare + hook" else spread(us[name])
        rows.append(Row(fw.bench, f"{name}, CPU µs per run", median(us[name]), "µs", note=note))
    for name, values in diffs.items():
        rows.append(
            Row(fw.bench, f"{name}, CPU µs per run", median(values), "µs", note=spread(values))
        )
    rows.append(Row(fw.bench, "lyra / bare, CPU", median(ratio), "×", note=spread(ratio, 3)))
    return rows


def _wall_row(
    fw: Framework, seconds: dict[str, list[float]], judge: bool, side: str = "lyra"
) -> Row:
    """``side`` / bare in wall time (judged against the target for lyra only)."""
    ratio = [a / b for a, b in zip(seconds[side], seconds["bare"], strict=True)]
    value = median(ratio)
    bare_ms = median(seconds["bare"]) * 1e3
    return Row(
        fw.bench,
        f"{side} / bare, wall, {LATENCY * 1e3:.0f} ms model",
        value,
        "×",
        f"≤ {WALL_TARGET}×" if side == "lyra" else "",
        value <= WALL_TARGET if judge and side == "lyra" else None,
        f"{value:.4f}×, the median of {len(ratio)} per-round ratios ({spread(ratio, 3)}); "
        f"bare {bare_ms:.1f} ms a run",
    )


def measure(fw: Framework, size: Size) -> list[Row]:
    """Both passes, their lines printed as they end; the rows (targets judged unless
    ``size`` is the smoke size)."""
    plan, judge = fw.plan, size is not Size.SMOKE
    warm = judge  # (a smoke run only shows that each side still runs: no warm-ups)
    cpu_runs, cpu_rounds = size.pick(*plan.cpu_runs), size.pick(*plan.cpu_rounds)
    wall_runs, wall_rounds = size.pick(*plan.wall_runs), size.pick(*plan.wall_rounds)
    with (
        tempfile.TemporaryDirectory() as folder,
        events_to(Path(folder) / "events.jsonl"),
        closing(BareLog(Path(folder) / "floor.jsonl")) as log,
    ):
        sides = fw.build(0.0)
        names = _with_floor(sides, SIDES)
        cpu = _rounds(fw, sides, names, cpu_runs, cpu_rounds, time.process_time, log, warm=warm)
        us = {name: [s * 1e6 for s in values] for name, values in cpu.items()}
        rows = _cpu_rows(fw, us, judge)
        print(
            f"CPU pass: {cpu_runs} runs a block ({fw.per_run}, a model answering at once), "
            f"{cpu_rounds} interleaved rounds; CPU µs per run, median (min, max); "
            f"bare + hook is bare with {fw.hook}:"
        )
        for row in rows[1:]:
            print(f"  {row.metric:<58} {fmt_value(row.value, row.unit):>10}  ({row.note})")
        _print_judged(rows[0])
        runs = max(2 if warm else 1, cpu_runs // 4)
        for calls in _calls_rows(fw, fw.build(0.0), runs, log, warm=warm):
            print(f"{calls.metric}: {calls.value:,.0f} ({calls.note})")
            rows.append(calls)
        for row in _cold_rows(fw, fw.build(0.0), size.pick(*plan.cold_runs), log, warm=warm):
            print(f"{row.metric}: {fmt_value(row.value, row.unit)} ({row.note})")
            rows.append(row)
        sides = fw.build(LATENCY)
        paired = _with_floor(sides, ("bare", "lyra"))
        wall = _rounds(fw, sides, paired, wall_runs, wall_rounds, time.perf_counter, log, warm=warm)
        row = _wall_row(fw, wall, judge)
        print(
            f"wall pass: {wall_runs} runs a block, {fw.requests} model requests of "
            f"{LATENCY * 1e3:.0f} ms each a run, {wall_rounds} interleaved rounds"
        )
        _print_judged(row)
        rows.append(row)
        if FLOOR_HOOK in wall:
            rows.append(_wall_row(fw, wall, False, FLOOR_HOOK))
            print(f"{rows[-1].metric}: {fmt_value(rows[-1].value, '×')} ({rows[-1].note})")
    return rows


def _print_judged(row: Row) -> None:
    state = "" if row.met is None else f": {'met' if row.met else 'MISSED'}"
    value = fmt_value(row.value, row.unit)
    print(f"{row.metric}: {value} (target {row.target}{state}; {row.note})")
