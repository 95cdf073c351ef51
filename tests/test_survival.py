"""Runs that survive what users and machines do to them: absurd limits, deadlines
overrun by code lyra cannot pre-empt, processes that must end when their work
ends, and the small edges of the commands."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

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
