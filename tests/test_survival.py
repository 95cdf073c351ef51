"""Runs that survive what users and machines do to them: absurd limits, deadlines
overrun by code lyra cannot pre-empt, processes that must end when their work
ends, and the small edges of the commands."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from structlog.testing import capture_logs

from lyra import ChildContext, Supervisor, parse_report
from lyra.supervisor import LocalExecutor

pytestmark = pytest.mark.anyio

TESTS = Path(__file__).resolve().parent


def lyra(
    *args: str, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """The real ``lyra`` command in a fresh interpreter (the tests' fakes importable)."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(TESTS)}
    return subprocess.run(
        [sys.executable, "-m", "lyra", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


# -- absurd limits are bounded by the work ------------------------------------------------


async def test_a_huge_concurrency_over_a_few_items_starts_a_few_workers() -> None:
    """A pool asked for a billion workers over three lazily pulled items starts no more
    workers than it has items (plus the one that finds the end)."""
    running = peak = 0

    async def work(item: int) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.01)
        running -= 1

    done: list[int] = []

    def on_error(item: int, exc: Exception) -> None:
        done.append(item)

    started = time.perf_counter()
    await LocalExecutor().each(work, iter(range(3)), max_concurrency=10**9, on_error=on_error)
    assert peak == 3
    assert done == []
    assert time.perf_counter() - started < 5


@pytest.mark.slow
def test_lyra_analyze_with_a_billion_workers_finishes(tmp_path: Path) -> None:
    """``lyra analyze P04637 --concurrency 1000000000`` runs the one protein and exits 0."""
    done = lyra("analyze", "P04637", "--concurrency", "1000000000", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 of 1 completed" in done.stdout


# -- a deadline overrun is never silent ---------------------------------------------------


async def _blocks_the_loop(prompt: str, ctx: ChildContext) -> str:
    time.sleep(0.6)  # noqa: ASYNC251 - the mistake under test: nothing can interrupt it
    return "done, late"


async def _holds_a_thread(prompt: str, ctx: ChildContext) -> str:
    await anyio.to_thread.run_sync(time.sleep, 0.6)  # not abandoned on cancellation
    return "grandchild done, late"


async def _waits_on_its_grandchild(prompt: str, ctx: ChildContext) -> str:
    result = await ctx.delegate("help", child=_holds_a_thread)
    return f"parent saw {result.status}"


@pytest.mark.parametrize(
    ("child", "blamed"),
    [(_blocks_the_loop, "the event loop"), (_waits_on_its_grandchild, "worker thread")],
    ids=["blocked event loop", "grandchild in a thread"],
)
async def test_a_result_that_comes_after_its_deadline_says_how_late(
    child: Any, blamed: str
) -> None:
    """A result held past its deadline by code lyra cannot pre-empt keeps its status but
    carries the overrun in the result, the report's metadata and a warning event naming
    what held it."""
    with capture_logs() as logs:
        result = await Supervisor(child).delegate("x", timeout=0.2)
    assert result.overrun_s is not None
    assert result.overrun_s >= 0.3
    assert parse_report(result.report).overrun_s == result.overrun_s
    warned = [e for e in logs if e["event"] == "deadline_overrun"]
    assert warned
    assert all(blamed in e["blocked_by"] for e in warned)
    assert {e["session_id"] for e in warned} >= {result.session_id}
    finished = [e for e in logs if e["session_id"] == result.session_id and "duration" in e]
    assert finished[-1]["overrun_s"] == result.overrun_s


async def test_a_result_on_time_carries_no_overrun() -> None:
    """An attempt that ends within its deadline has no overrun anywhere."""

    async def quick(prompt: str, ctx: ChildContext) -> str:
        return "on time"

    result = await Supervisor(quick).delegate("x", timeout=5)
    assert result.overrun_s is None
    assert "overrun_s" not in result.report


async def test_a_delegation_tree_deeper_than_the_limit_is_an_invalid_task() -> None:
    """A child that delegates to itself without end meets the documented depth limit as
    an invalid_task with evidence, not a RecursionError classified as a tool error."""
    from lyra.delegation import MAX_DEPTH

    async def recurse(prompt: str, ctx: ChildContext) -> str:
        result = await ctx.delegate(prompt, child=recurse)
        if result.failure is None:
            return result.output or ""
        return f"{ctx.depth}: {result.failure.category}: {result.failure.evidence}"

    result = await Supervisor(recurse).delegate("again", timeout=30)
    assert result.ok
    assert result.output == (
        f"{MAX_DEPTH}: invalid_task: rule 3: the delegation tree is deeper than {MAX_DEPTH} levels"
    )
