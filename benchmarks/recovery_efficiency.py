"""Recovery efficiency: lyra's recovery policy against "retry everything" and "never retry".

A seeded simulation of 1,000 tasks with a known ground truth. Each task is a
scripted lyra child with one failure mode:

| mode | first attempt | what makes it succeed | could succeed? |
| --- | --- | --- | --- |
| ok | succeeds | - | yes |
| rate_limit | HTTP 429 (retry-after 10-30 s) | trying again; clears after 1-3 tries | yes |
| flaky_connection | connection reset | trying again once | yes |
| needs_time | timeout after progress | a timeout twice as long | yes |
| partial | crash after 2 completed steps | a continuation prompt | yes |
| missing_context | blocked: organism not given | a prompt enriched with the organism | yes |
| missing_module | ModuleNotFoundError | an allow-listed fixer installing it | yes |
| invalid_task | protein not found | nothing | no |
| auth | HTTP 401 | nothing | no |
| stuck | timeout without progress | nothing | no |

Time is simulated by accounting, not by sleeping: every attempt adds its
simulated duration (a 300 s timeout is 20 ms of real time; a timed-out
attempt costs its whole timeout), and waits between attempts are recorded
(``lyra.recovery.record_waits()``), never slept. Compared:

- lyra: ``lyra.recovery.recover`` with ``RecoveryPolicy(max_retries=3,
  fixers=(install_module,))`` and a context provider;
- retry everything: up to 3 retries of the same prompt with the same timeout,
  at once (a loop over ``Supervisor().delegate``);
- never retry: one ``Supervisor().delegate`` per task.

Measured: share of tasks that end completed, share of the recoverable
failures recovered, wasted retries (retries of tasks that could never
succeed), total attempts, and total simulated time (attempts + waits).
Rate limits here clear after a number of *tries*; a real service that rejects
early retries would make "retry everything" slower than shown.

A second run is the **field mix**: the failures agent users report most
(DESIGN §3), each again with its ground truth:

| mode | first attempt | what makes it succeed |
| --- | --- | --- |
| loop | the same tool call for ever (2 s each) | being told what it repeats |
| storm | HTTP 429, retry-after 20-60 s | waiting at least that long |
| overflow | "prompt is too long" after 2 steps | a continuation without the transcript |
| false_success | "done", no brief written | being told the output was rejected |
| question | asks which organism (``ctx.ask``) | an answer |
| quota | HTTP 402 (quota exhausted) | another model (a fallback child) |

lyra runs with ``max_repeats=8``, ``verify=``, ``answer=`` and ``fallbacks=``;
the two baselines are supervisors without them (no loop detection: a loop runs
to its deadline; a false success counts as done). Measured: the share of tasks
whose result is *correct* (a claimed success without its brief is not), the
recoverable failures recovered, and the simulated time spent on tasks that end
without a correct result (wasted spend).

    python benchmarks/recovery_efficiency.py [--quick | --smoke]
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from _common import Row, Size, silence_events, standalone

from lyra import ChildContext, ChildFailure, Limits, Supervisor
from lyra.errors import SubjectNotFound, TransientError
from lyra.recovery import RecoveryPolicy, record_waits, recover
from lyra.supervisor import LocalExecutor

TASKS, QUICK_TASKS, SMOKE_TASKS = 1_000, 200, 50
SEED = 1
BASE_TIMEOUT = 0.02  # real seconds ...
SCALE = 300.0 / BASE_TIMEOUT  # ... standing for 300 simulated seconds
MAX_RETRIES = 3
CONCURRENCY = 100
MODES = {  # mode: (weight, could succeed)
    "ok": (35, True),
    "rate_limit": (12, True),
    "flaky_connection": (8, True),
    "needs_time": (10, True),
    "partial": (10, True),
    "missing_context": (8, True),
    "missing_module": (5, True),
    "invalid_task": (6, False),
    "auth": (3, False),
    "stuck": (3, False),
}
FIELD_MODES = {  # mode: (weight, could succeed)
    "ok": (30, True),
    "loop": (12, True),
    "storm": (12, True),
    "overflow": (10, True),
    "false_success": (12, True),
    "question": (12, True),
    "quota": (8, True),
    "invalid_task": (4, False),
}
REPEATS = 8
_MODULE = re.compile(r"No module named '([A-Za-z0-9_]+)'")


@dataclass
class World:
    """What the fixers change: modules installed so far."""

    installed: set[str] = field(default_factory=set)


@dataclass
class ScriptedTask:
    """One task: a lyra child whose behaviour follows its failure mode."""

    index: int
    mode: str
    world: World
    clears_after: int = 1  # rate_limit: failing tries before it clears
    retry_after: float = 0.0
    tries: int = 0
    sim: list[float] = field(default_factory=list)  # simulated seconds of each attempt

    @property
    def prompt(self) -> str:
        return f"Task {self.index}: analyse sample S{self.index:04d} and write a brief"

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        self.tries += 1
        mode = self.mode
        if mode == "ok":
            return self._done(60.0)
        if mode == "rate_limit":
            if self.tries <= self.clears_after:
                self.sim.append(2.0)
                raise TransientError(
                    "HTTP 429 Too Many Requests", status=429, retry_after=self.retry_after
                )
            return self._done(60.0)
        if mode == "flaky_connection":
            if self.tries == 1:
                self.sim.append(3.0)
                raise TransientError("Connection reset by peer", error_type="connection")
            return self._done(60.0)
        if mode == "needs_time":
            ctx.step("Fetched the sample")
            if ctx.timeout * SCALE < 450.0:  # needs 450 simulated seconds
                return await self._hang(ctx)
            return self._done(450.0)
        if mode == "partial":
            if prompt.startswith("Continue a task"):
                return self._done(40.0)
            ctx.step("Fetched the sample")
            ctx.step("Computed the structure summary")
            self.sim.append(120.0)
            raise RuntimeError("critique stage crashed: index out of range")
        if mode == "missing_context":
            if "organism: Homo sapiens" in prompt:
                return self._done(60.0)
            self.sim.append(15.0)
            ctx.block("missing_context", f"Organism not given for sample S{self.index:04d}")
        if mode == "missing_module":
            module = f"plugin{self.index}"
            if module in self.world.installed:
                return self._done(60.0)
            self.sim.append(8.0)
            raise ModuleNotFoundError(f"No module named '{module}'", name=module)
        if mode == "invalid_task":
            self.sim.append(5.0)
            raise SubjectNotFound(f"Sample S{self.index:04d} not found")
        if mode == "auth":
            self.sim.append(1.0)
            raise TransientError("HTTP 401 Unauthorized", status=401)
        if mode == "stuck":
            return await self._hang(ctx)
        return await self._field(prompt, ctx)

    async def _field(self, prompt: str, ctx: ChildContext) -> str:
        """The field mix's modes (see the module docstring)."""
        mode = self.mode
        if mode == "loop":
            if "kept repeating the same call" in prompt:
                return self._done(60.0)
            while True:  # 2 simulated seconds a call, until something stops it
                self.sim.append(2.0)
                await ctx.tool("poll_job", _poll, f"S{self.index:04d}")
                if sum(self.sim) >= ctx.timeout * SCALE:
                    return await self._hang(ctx)
        if mode == "storm":
            # Clears for a try that waited out its retry-after (lyra's backoff always
            # does: it is never shorter than retry-after); an immediate retry meets it.
            if self.tries > 1 and ctx.context.get("strategy") in ("backoff", "redispatch"):
                return self._done(60.0)
            self.sim.append(2.0)
            raise TransientError(
                "HTTP 429 Too Many Requests", status=429, retry_after=self.retry_after
            )
        if mode == "overflow":
            if ctx.fresh:
                return self._done(60.0)
            ctx.step("Read the first half of the log")
            ctx.step("Read the second half of the log")
            self.sim.append(90.0)
            raise TaskTooLong("prompt is too long: 212000 tokens > 200000 maximum")
        if mode == "false_success":
            if "Output rejected" in prompt:
                return self._done(60.0)
            self.sim.append(30.0)
            return "Done! (no brief written)"
        if mode == "question":
            organism = await ctx.ask(f"Which organism is sample S{self.index:04d} from?")
            return self._done(60.0) + f" ({organism})"
        if mode == "quota":
            self.sim.append(1.0)
            raise TransientError("HTTP 402: quota exhausted", status=402)
        raise AssertionError(mode)

    def _done(self, seconds: float) -> str:
        self.sim.append(seconds)
        return f"brief of sample S{self.index:04d}"

    async def _hang(self, ctx: ChildContext) -> str:
        self.sim.append(ctx.timeout * SCALE)  # a timed-out attempt costs its whole timeout
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


class TaskTooLong(Exception):
    """What a provider raises for a prompt over the context window (its 400's words)."""


def _poll(job: str) -> str:
    return f"{job}: still running"


class Backup:
    """The fallback child: another model, which answers."""

    name = "backup-model"

    def __init__(self, task: ScriptedTask) -> None:
        self.task = task

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        return self.task._done(60.0)


def make_tasks(
    n: int, seed: int = SEED, modes: dict[str, tuple[int, bool]] = MODES
) -> list[ScriptedTask]:
    rng = random.Random(seed)
    names = list(modes)
    weights = [modes[name][0] for name in names]
    world = World()
    tasks = []
    for i in range(n):
        mode = rng.choices(names, weights)[0]
        task = ScriptedTask(i, mode, world)
        if mode == "rate_limit":
            task.clears_after = rng.randint(1, 3)
            task.retry_after = float(rng.randint(10, 30))
        if mode == "storm":
            task.retry_after = float(rng.randint(20, 60))
        tasks.append(task)
    return tasks


# -- the three policies --------------------------------------------------------------


@dataclass
class Outcome:
    ok: bool
    attempts: int
    waits: float


def install_module(failure: ChildFailure) -> bool:
    """An allow-listed fixer: installs (in the simulated world) the module a failure names."""
    match = _MODULE.search(failure.message)
    if match is None:
        return False
    _current_world.installed.add(match.group(1))
    return True


_current_world = World()


def organism_provider(failure: ChildFailure) -> dict[str, str]:
    return {"organism": "Homo sapiens"}


async def lyra_policy(task: ScriptedTask) -> Outcome:
    outcome = await recover(
        task.prompt,
        child=task,
        policy=RecoveryPolicy(max_retries=MAX_RETRIES, fixers=(install_module,)),
        context_provider=organism_provider,
        limits=Limits(timeout=BASE_TIMEOUT),
    )
    waits = sum(record.wait for record in outcome.attempts)
    return Outcome(outcome.result.ok, len(outcome.attempts), waits)


async def retry_everything(task: ScriptedTask) -> Outcome:
    supervisor = Supervisor(task)
    for attempt in range(1, MAX_RETRIES + 2):
        result = await supervisor.delegate(task.prompt, timeout=BASE_TIMEOUT, attempt=attempt)
        if result.ok:
            return Outcome(True, attempt, 0.0)
    return Outcome(False, MAX_RETRIES + 1, 0.0)


async def never_retry(task: ScriptedTask) -> Outcome:
    result = await Supervisor(task).delegate(task.prompt, timeout=BASE_TIMEOUT)
    return Outcome(result.ok, 1, 0.0)


POLICIES: dict[str, Callable[[ScriptedTask], Awaitable[Outcome]]] = {
    "lyra policy": lyra_policy,
    "retry everything ×3": retry_everything,
    "never retry": never_retry,
}


def _correct(output: str | None) -> bool:
    """A result is correct when it is the brief (a claimed success without one is not)."""
    return output is not None and output.startswith("brief of sample")


async def check_brief(output: str) -> str | None:
    """lyra's verify=: a claimed success must hold the brief. (Async: a plain function
    runs in a worker thread, and with 100 tasks at once the pool's queue took longer
    than a 20 ms attempt -- 300 simulated seconds -- so that a fourth of the successes
    failed their check at the deadline: the thread pool measured, not recovery.)"""
    return None if _correct(output) else "no brief was written"


async def lyra_field(task: ScriptedTask) -> Outcome:
    outcome = await recover(
        task.prompt,
        child=task,
        policy=RecoveryPolicy(max_retries=MAX_RETRIES),
        limits=Limits(timeout=BASE_TIMEOUT, max_repeats=REPEATS),
        verify=check_brief,
        answer=lambda question: "Homo sapiens",
        fallbacks=[Backup(task)],
    )
    waits = sum(record.wait for record in outcome.attempts)
    return Outcome(_correct(outcome.result.output), len(outcome.attempts), waits)


async def retry_everything_field(task: ScriptedTask) -> Outcome:
    supervisor = Supervisor(task, max_repeats=None)  # no loop detection, no checks
    for attempt in range(1, MAX_RETRIES + 2):
        result = await supervisor.delegate(task.prompt, timeout=BASE_TIMEOUT, attempt=attempt)
        if result.ok:  # a claimed success is taken as it is
            return Outcome(_correct(result.output), attempt, 0.0)
    return Outcome(False, MAX_RETRIES + 1, 0.0)


async def never_retry_field(task: ScriptedTask) -> Outcome:
    result = await Supervisor(task, max_repeats=None).delegate(task.prompt, timeout=BASE_TIMEOUT)
    return Outcome(_correct(result.output), 1, 0.0)


FIELD_POLICIES: dict[str, Callable[[ScriptedTask], Awaitable[Outcome]]] = {
    "lyra policy": lyra_field,
    "retry everything ×3": retry_everything_field,
    "never retry": never_retry_field,
}


@dataclass
class Score:
    completed: float
    recovered: float
    wasted: int
    attempts: int
    sim_hours: float
    by_mode: dict[str, int]
    seconds: float
    wasted_hours: float = 0.0
    """Simulated time of the tasks that ended without a correct result."""


def simulate(
    policy: Callable[[ScriptedTask], Awaitable[Outcome]],
    n: int,
    modes: dict[str, tuple[int, bool]] = MODES,
) -> Score:
    global _current_world
    tasks = make_tasks(n, modes=modes)
    _current_world = tasks[0].world
    random.seed(SEED)  # backoff jitter

    def failed_item(task: ScriptedTask, exc: BaseException) -> Outcome:
        raise exc  # a crash of the benchmark itself must not pass unnoticed

    started = time.perf_counter()
    with record_waits() as recorded:
        outcomes = anyio.run(
            lambda: LocalExecutor().map(
                policy, tasks, max_concurrency=CONCURRENCY, on_error=failed_item
            )
        )
        recorded_waits = sum(recorded)
    elapsed = time.perf_counter() - started
    waits = sum(o.waits for o in outcomes)
    if abs(waits - recorded_waits) > 1e-6:
        raise RuntimeError(f"waits disagree: {waits} in attempts, {recorded_waits} recorded")
    pairs = list(zip(tasks, outcomes, strict=True))
    recoverable = [(t, o) for t, o in pairs if modes[t.mode][1] and t.mode != "ok"]
    return Score(
        completed=sum(o.ok for o in outcomes) / n,
        recovered=sum(o.ok for _, o in recoverable) / max(1, len(recoverable)),
        wasted=sum(o.attempts - 1 for t, o in pairs if not modes[t.mode][1]),
        attempts=sum(o.attempts for o in outcomes),
        sim_hours=(sum(sum(t.sim) for t in tasks) + waits) / 3600,
        by_mode=dict(Counter(t.mode for t, o in pairs if o.ok)),
        seconds=elapsed,
        wasted_hours=sum(sum(t.sim) for t, o in pairs if not o.ok) / 3600,
    )


def run(size: Size) -> list[Row]:
    silence_events()
    n = size.pick(TASKS, QUICK_TASKS, SMOKE_TASKS)
    tasks = make_tasks(n)
    mix = Counter(t.mode for t in tasks)
    impossible = sum(count for mode, count in mix.items() if not MODES[mode][1])
    print(f"{n:,} tasks (seed {SEED}): " + ", ".join(f"{m} {mix[m]}" for m in MODES))
    print(f"could succeed: {n - impossible:,}; could never succeed: {impossible:,}")
    scores = {name: simulate(policy, n) for name, policy in POLICIES.items()}
    print(
        f"{'policy':22} {'completed':>9} {'recovered':>9} {'wasted':>7} {'attempts':>8} "
        f"{'sim. time':>10} {'real':>6}"
    )
    for name, s in scores.items():
        print(
            f"{name:22} {s.completed:9.1%} {s.recovered:9.1%} {s.wasted:7,} {s.attempts:8,} "
            f"{s.sim_hours:8.1f} h {s.seconds:5.1f}s"
        )
    print(
        "completed by mode: "
        + "; ".join(
            f"{m}: " + "/".join(str(s.by_mode.get(m, 0)) for s in scores.values()) for m in MODES
        )
        + "  (lyra / retry everything / never)"
    )
    lyra, naive, _never = scores.values()
    ratio = naive.sim_hours / lyra.sim_hours
    print(
        f"ratio recovered lyra / retry-everything = {lyra.recovered:.1%} / {naive.recovered:.1%}"
        f"; wasted retries {lyra.wasted} vs {naive.wasted}; simulated time retry-everything "
        f"/ lyra = {ratio:.2f}×"
    )
    rows = field_mix(n)
    for name, s in scores.items():
        rows.append(
            Row(
                "recovery",
                f"{name}: recoverable failures recovered",
                s.recovered * 100,
                "%",
                note=f"wasted {s.wasted}, {s.attempts} attempts, {s.sim_hours:.1f} h simulated",
            )
        )
    rows += [
        recovered_gain("recovered, lyra − retry everything", lyra, naive),
        Row(
            "recovery",
            "wasted retries lyra / retry everything",
            lyra.wasted / max(1, naive.wasted),
            "×",
            "< 1×",
            lyra.wasted < naive.wasted,
        ),
        Row(
            "recovery",
            "simulated time retry everything / lyra",
            ratio,
            "×",
            "",
            None,
            "attempts + waits",
        ),
    ]
    return rows


def recovered_gain(metric: str, lyra: Score, naive: Score) -> Row:
    """The judged row: lyra recovers more of the recoverable failures (percentage points)."""
    gain = (lyra.recovered - naive.recovered) * 100
    return Row("recovery", metric, gain, "%", "> 0", gain > 0, "percentage points")


def field_mix(n: int) -> list[Row]:
    """The field mix (see the module docstring): correct results and wasted spend."""
    tasks = make_tasks(n, modes=FIELD_MODES)
    mix = Counter(t.mode for t in tasks)
    print(f"\nfield mix, {n:,} tasks: " + ", ".join(f"{m} {mix[m]}" for m in FIELD_MODES))
    scores = {name: simulate(policy, n, FIELD_MODES) for name, policy in FIELD_POLICIES.items()}
    print(f"{'policy':22} {'correct':>8} {'recovered':>9} {'attempts':>8} {'wasted spend':>13}")
    for name, s in scores.items():
        print(
            f"{name:22} {s.completed:8.1%} {s.recovered:9.1%} {s.attempts:8,} "
            f"{s.wasted_hours:10.1f} h"
        )
    print(
        "correct by mode: "
        + "; ".join(
            f"{m}: " + "/".join(str(s.by_mode.get(m, 0)) for s in scores.values())
            for m in FIELD_MODES
        )
        + "  (lyra / retry everything / never)"
    )
    lyra, naive, never = scores.values()
    return [
        Row(
            "recovery",
            f"field mix, {name}: recoverable failures recovered",
            s.recovered * 100,
            "%",
            note=f"{s.completed:.0%} correct, wasted spend {s.wasted_hours:.1f} h simulated",
        )
        for name, s in scores.items()
    ] + [
        recovered_gain("field mix: recovered, lyra − retry everything", lyra, naive),
        Row(
            "recovery",
            "field mix: wasted spend lyra / retry everything",
            lyra.wasted_hours / max(1e-9, naive.wasted_hours),
            "×",
            "< 1×",
            lyra.wasted_hours < naive.wasted_hours,
            f"never retry: {never.wasted_hours:.1f} h",
        ),
    ]


if __name__ == "__main__":
    standalone(run, __doc__)
