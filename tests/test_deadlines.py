"""The attempts on an asyncio loop share one timer for their deadlines (delegation/_deadlines):
each still ends at its own deadline, progress moves an idle one, finished ones are let go."""

from __future__ import annotations

import math
import subprocess
import sys
import time

import anyio
import pytest

from lyra import ChildContext, Supervisor
from lyra.delegation import _deadlines

pytestmark = pytest.mark.anyio


async def sleeper(prompt: str, ctx: ChildContext) -> str:
    await anyio.sleep(float(prompt))
    return "woke"


async def test_attempts_with_different_deadlines_each_end_at_their_own() -> None:
    """Twelve attempts sharing the loop's timer, with deadlines in no particular order:
    each times out at its own deadline, and the one with time to spare completes."""
    supervisor = Supervisor(sleeper)
    timeouts = [0.35, 0.05, 0.25, 0.1, 0.3, 0.15, 0.2, 0.05, 0.4, 0.1, 0.45, 2.0]
    results: dict[int, tuple[bool, float]] = {}

    async def one(index: int, timeout: float) -> None:
        result = await supervisor.delegate("1.0", timeout=timeout)
        results[index] = (result.ok, result.duration)

    async with anyio.create_task_group() as group:
        for index, timeout in enumerate(timeouts):
            group.start_soon(one, index, timeout)
    for index, timeout in enumerate(timeouts):
        ok, duration = results[index]
        assert ok is (timeout > 1.0)
        assert duration == pytest.approx(min(timeout, 1.0), abs=0.1)


async def test_progress_moves_an_idle_deadline_without_a_new_timer() -> None:
    """A child that steps every 50 ms outlives an idle timeout of 0.15 s for 0.5 s, then
    stops stepping and is ended about 0.15 s later."""

    async def steps_then_stalls(prompt: str, ctx: ChildContext) -> str:
        for _ in range(10):
            await anyio.sleep(0.05)
            ctx.step("tick")
        await anyio.sleep(30)
        return "never"

    started = time.monotonic()
    result = await Supervisor(steps_then_stalls).delegate("x", timeout=30, idle_timeout=0.15)
    assert result.failure is not None
    assert result.failure.error_type == "idle"
    assert 0.6 <= time.monotonic() - started <= 0.9


async def test_an_attempt_on_asyncio_is_kept_by_the_shared_watcher() -> None:
    """On asyncio no attempt arms a timer of its own: its scope has no deadline, and
    the loop's watcher holds it while it runs."""
    seen: list[tuple[float, int]] = []

    async def looks(prompt: str, ctx: ChildContext) -> str:
        watcher = _deadlines.deadlines()
        assert watcher is not None
        seen.append((ctx._limiter.scope.deadline, watcher._live))  # type: ignore[union-attr]
        return "seen"

    assert (await Supervisor(looks).delegate("x", timeout=5)).ok
    assert seen == [(math.inf, 1)]


async def test_an_attempt_runs_in_anyios_own_cancel_scope() -> None:
    """The scope that holds an attempt's deadline is the one ``anyio.CancelScope()``
    makes on this backend (asked once per loop), so children that use anyio keep
    its semantics; the attempt's clock is anyio's."""
    seen: list[tuple[type, float]] = []

    async def looks(prompt: str, ctx: ChildContext) -> str:
        seen.append((type(ctx._limiter.scope), ctx.remaining()))
        return "seen"

    assert (await Supervisor(looks).delegate("x", timeout=5)).ok
    [(scope, remaining)] = seen
    assert scope is type(anyio.CancelScope())
    assert 4.5 < remaining <= 5


async def test_finished_attempts_are_let_go() -> None:
    """Thousands of quick attempts with long deadlines leave no more than a bounded
    heap behind (finished ones are dropped, not kept until their deadline)."""
    supervisor = Supervisor(sleeper)
    for _ in range(3000):
        await supervisor.delegate("0", timeout=300)
    watcher = _deadlines.deadlines()
    assert watcher is not None
    assert len(watcher._heap) <= 2 * _deadlines._PURGE_AT
    assert all(entry[2].ctx is None for entry in watcher._heap)  # none kept alive


@pytest.mark.parametrize("idle", [None, 0.1])
async def test_a_child_that_catches_the_deadline_and_returns_timed_out(idle: float | None) -> None:
    """A child that catches the deadline's cancellation and returns what it has is not a
    success: the deadline (or the idle timeout) passed, and the result says so."""

    async def catches(prompt: str, ctx: ChildContext) -> str:
        try:
            await anyio.sleep(10)
            return "full answer"
        except anyio.get_cancelled_exc_class():
            return "half-finished answer"

    result = await Supervisor(catches).delegate("x", timeout=0.2, idle_timeout=idle)
    assert result.failure is not None
    assert (result.failure.category, result.failure.error_type) == (
        "timeout",
        "timeout" if idle is None else "idle",
    )


_SLOW_BACKEND_IMPORT = """
import asyncio, importlib.abc, sys, time

class Slow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "anyio._backends._asyncio":
            time.sleep(0.5)  # a cold disk
        return None

sys.meta_path.insert(0, Slow())
from lyra import adelegate_task

left = []

async def child(prompt, ctx):
    left.append(ctx.time_left)
    return "ok"

asyncio.run(adelegate_task("x", child=child, timeout=2.0))
print(left[0])
"""


def test_the_first_attempt_in_a_process_keeps_its_whole_deadline() -> None:
    """anyio's asyncio backend, imported by the first cancel scope of a process run by
    ``asyncio.run``, is imported before the first deadline starts: however slowly it
    loads, the child begins with its whole time (here 0.5 s of import, out of 2 s)."""
    run = subprocess.run(
        [sys.executable, "-c", _SLOW_BACKEND_IMPORT], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert float(run.stdout) > 1.8
