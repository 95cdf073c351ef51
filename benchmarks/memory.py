"""Memory: 10,000 delegations, peak RSS and growth per delegation; what a kept
result holds; and 100,000 results kept against a bare pool's peak.

Every measurement runs in a fresh subprocess so that nothing else measured in
the same run pollutes it, with lyra's events written to a file as the command
line writes them.

- **Streaming**: delegations through the full path (``Supervisor.delegate``
  under ``LocalExecutor().map`` at concurrency 100, one child in ten failing
  with a rendered report) in batches of 500 whose results are dropped, as a
  caller that streams results would: peak RSS (``ru_maxrss``), RSS after 2,000
  and after 10,000 delegations (growth per delegation = the difference /
  8,000), and bytes still held (``tracemalloc``, after ``gc.collect()``) by
  1,000 more: a leak shows up here even when RSS hides it in freed pages.
- **Kept results**: 10,000 delegations of the overhead benchmark's no-op child
  (output ``"ok"``, one in ten failing with a ``TransientError``) kept in the
  list ``LocalExecutor().map`` returns; bytes held per result = what
  ``tracemalloc`` sees freed when the list is dropped (after ``gc.collect()``),
  divided by 10,000. Successes alone and failures alone for information.
- **100,000 kept, against the floor**: ``LocalExecutor().map`` over
  ``Supervisor.delegate`` on 100,000 items of the same child, keeping every
  ``DelegationResult``, against a bare anyio pool of as many workers (each item
  under ``anyio.move_on_after``, the same two events per item written with
  orjson by ``_common.BareLog``) keeping for each item the least a caller needs:
  the output, or the error's text. Peak RSS of each, each in its own process.

Targets (DESIGN §9): peak RSS ≤ 200 MB, no growth per delegation; ≤ 600 B held
per kept ``DelegationResult``; 100,000 kept ≤ 1.5× the bare pool's peak RSS.

    python benchmarks/memory.py [--quick | --smoke]
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
from _common import (
    BareLog,
    Row,
    Size,
    current_rss_mb,
    events_to,
    floor_ended,
    floor_started,
    rss_mb,
    standalone,
)
from overhead import noop_child, prompts

from lyra import ChildContext, Supervisor
from lyra.errors import TransientError
from lyra.supervisor import LocalExecutor

TOTAL, QUICK_TOTAL, SMOKE_TOTAL = 10_000, 2_000, 1_000
KEPT, QUICK_KEPT, SMOKE_KEPT = 10_000, 1_000, 200
MANY, QUICK_MANY, SMOKE_MANY = 100_000, 10_000, 1_000
HELD_TARGET = 600.0  # bytes per kept DelegationResult
PEAK_RATIO_TARGET = 1.5  # 100,000 kept: lyra's peak RSS / the bare pool's
TIMEOUT = 60.0
BATCH = 500
CONCURRENCY = 100
PEAK_TARGET_MB = 200.0
# "No growth": under 100 bytes per delegation (a million delegations → < 100 MB).
GROWTH_TARGET_BYTES = 100.0


async def child(prompt: str, ctx: ChildContext) -> str:
    ctx.step("did the one thing")
    if prompt.endswith("!"):
        raise TransientError("HTTP 503 from the tool", status=503)
    return f"output of {prompt}"


async def batch(start: int) -> None:
    supervisor = Supervisor(child)

    async def work(prompt: str) -> Any:
        return await supervisor.delegate(prompt, timeout=60.0)

    items = [f"task {i}!" if i % 10 == 0 else f"task {i}" for i in range(start, start + BATCH)]
    results = await LocalExecutor().map(
        work, items, max_concurrency=CONCURRENCY, on_error=lambda item, exc: None
    )
    if sum(1 for r in results if r is not None and r.ok) != BATCH - BATCH // 10:
        raise RuntimeError("unexpected results in a memory batch")


def worker(total: int) -> dict[str, float]:
    """The measurement itself (in the fresh subprocess)."""
    early = total // 5
    with tempfile.TemporaryDirectory() as folder, events_to(Path(folder) / "events.jsonl"):
        start_rss = current_rss_mb()
        done = 0
        for _ in range(early // BATCH):
            anyio.run(batch, done)
            done += BATCH
        gc.collect()
        rss_early = current_rss_mb()
        while done < total:
            anyio.run(batch, done)
            done += BATCH
        gc.collect()
        rss_late = current_rss_mb()
        tracemalloc.start()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(2):
            anyio.run(batch, done)
            done += BATCH
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
    return {
        "start_rss": start_rss,
        "rss_early": rss_early,
        "rss_late": rss_late,
        "peak_rss": rss_mb(),
        "growth_bytes": (rss_late - rss_early) * (1 << 20) / max(1, total - early),
        "held_bytes": held / (2 * BATCH),  # per traced delegation
        "delegations": done,
        "measured": total,
        "early": early,
        "traced": 2 * BATCH,
    }


async def lyra_kept(items: list[str]) -> list[Any]:
    """``LocalExecutor().map`` over ``Supervisor.delegate``: every result kept."""
    supervisor = Supervisor(noop_child)

    async def work(prompt: str) -> Any:
        return await supervisor.delegate(prompt, timeout=TIMEOUT)

    return await LocalExecutor().map(
        work, items, max_concurrency=CONCURRENCY, on_error=lambda item, exc: None
    )


async def bare_kept(items: list[str], log: BareLog) -> list[str]:
    """The floor: a bare anyio pool, each item under a deadline with the same two
    events, keeping the output or the error's text."""
    results: list[str] = [""] * len(items)
    pending = iter(enumerate(items))

    async def worker() -> None:
        for index, prompt in pending:
            session, started = floor_started(log, TIMEOUT)
            error = None
            with anyio.move_on_after(TIMEOUT):
                try:
                    results[index] = await noop_child(prompt, None)
                except Exception as exc:  # noqa: BLE001 - the same isolation lyra gives
                    results[index] = error = f"{type(exc).__name__}: {exc}"
            floor_ended(log, session, started, error)

    async with anyio.create_task_group() as group:
        for _ in range(min(CONCURRENCY, len(items))):
            group.start_soon(worker)
    return results


def held_worker(count: int) -> dict[str, float]:
    """Bytes held per kept result (in the fresh subprocess): mixed, successes, failures."""
    every = prompts(count)
    shapes = {
        "mixed": every,
        "success": [f"task {i}" for i in range(1, count + 1)],
        "failure": [f"task {i}!" for i in range(1, count + 1)],
    }
    held = {}
    with tempfile.TemporaryDirectory() as folder, events_to(Path(folder) / "events.jsonl"):
        anyio.run(lyra_kept, every[: count // 10])  # warm-up: imports, caches
        for name, items in shapes.items():
            gc.collect()
            tracemalloc.start()
            results = anyio.run(lyra_kept, items)
            gc.collect()
            kept = tracemalloc.get_traced_memory()[0]
            del results
            gc.collect()
            held[name] = (kept - tracemalloc.get_traced_memory()[0]) / count
            tracemalloc.stop()
    return held


def peak_worker(side: str, count: int) -> dict[str, float]:
    """Peak RSS of keeping ``count`` results, lyra's or the bare pool's (fresh process)."""
    items = prompts(count)
    with tempfile.TemporaryDirectory() as folder:
        log_path = Path(folder) / "events.jsonl"
        start = current_rss_mb()
        if side == "lyra":
            with events_to(log_path):
                results: list[Any] = anyio.run(lyra_kept, items)
            failures = sum(1 for r in results if r is None or r.failure is not None)
        else:
            log = BareLog(log_path)
            try:
                results = anyio.run(bare_kept, items, log)
            finally:
                log.close()
            failures = sum(1 for r in results if r != "ok")
    if failures != len(range(0, count, 10)):
        raise RuntimeError(f"{failures} failures among {count} kept results")
    return {"start_rss": start, "peak_rss": rss_mb(), "kept": len(results)}


def subprocess_json(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def run(size: Size) -> list[Row]:
    rows = streaming_rows(size)
    kept = size.pick(KEPT, QUICK_KEPT, SMOKE_KEPT)
    held = subprocess_json("--held", str(kept))
    print(
        f"bytes held per kept DelegationResult ({kept:,} kept, one in ten a failure): "
        f"{held['mixed']:.0f} B (successes alone {held['success']:.0f} B, failures alone "
        f"{held['failure']:.0f} B; target ≤ {HELD_TARGET:.0f} B)"
    )
    rows.append(
        Row(
            "memory",
            "bytes held per kept DelegationResult",
            held["mixed"],
            "B",
            f"≤ {HELD_TARGET:.0f} B",
            held["mixed"] <= HELD_TARGET,
            f"one in ten a failure; successes {held['success']:.0f} B, "
            f"failures {held['failure']:.0f} B",
        )
    )
    many = size.pick(MANY, QUICK_MANY, SMOKE_MANY)
    lyra = subprocess_json("--peak", "lyra", str(many))
    bare = subprocess_json("--peak", "bare", str(many))
    ratio = lyra["peak_rss"] / bare["peak_rss"]
    print(
        f"{many:,} results kept: peak RSS lyra {lyra['peak_rss']:.1f} MB (from "
        f"{lyra['start_rss']:.1f} MB), bare pool {bare['peak_rss']:.1f} MB (from "
        f"{bare['start_rss']:.1f} MB): {ratio:.2f}× (target ≤ {PEAK_RATIO_TARGET:g}×)"
    )
    rows += [
        Row("memory", f"peak RSS, {many:,} results kept, lyra", lyra["peak_rss"], "MB"),
        Row("memory", f"peak RSS, {many:,} results kept, bare pool", bare["peak_rss"], "MB"),
        Row(
            "memory",
            f"{many:,} results kept: peak RSS lyra / bare pool",
            ratio,
            "×",
            f"≤ {PEAK_RATIO_TARGET:g}×",
            ratio <= PEAK_RATIO_TARGET,
            f"from {lyra['start_rss']:.0f} and {bare['start_rss']:.0f} MB at start",
        ),
    ]
    return rows


def streaming_rows(size: Size) -> list[Row]:
    total = size.pick(TOTAL, QUICK_TOTAL, SMOKE_TOTAL)
    m = subprocess_json("--worker", str(total))
    print(
        f"{m['measured']:,} delegations (+{m['traced']:,} traced) in a fresh process: RSS "
        f"{m['start_rss']:.1f} MB at start, {m['rss_early']:.1f} MB after {m['early']:,}, "
        f"{m['rss_late']:.1f} MB after {m['measured']:,}"
    )
    print(
        f"growth: {m['growth_bytes']:.1f} bytes per delegation by RSS ({m['early']:,} → "
        f"{m['measured']:,}); {m['held_bytes']:.1f} bytes per delegation still "
        f"held by tracemalloc after {m['traced']:,} more"
    )
    grows = max(m["growth_bytes"], m["held_bytes"]) > GROWTH_TARGET_BYTES
    print(
        f"ratio peak RSS / target = {m['peak_rss']:.1f} / {PEAK_TARGET_MB:.0f} MB = "
        f"{m['peak_rss'] / PEAK_TARGET_MB:.2f}× ({'grows' if grows else 'no growth'})"
    )
    return [
        Row("memory", "peak RSS", m["peak_rss"], "MB", "≤ 200 MB", m["peak_rss"] <= PEAK_TARGET_MB),
        Row(
            "memory",
            "RSS growth per delegation",
            m["growth_bytes"],
            "B",
            "≈ 0 (< 100 B)",
            m["growth_bytes"] <= GROWTH_TARGET_BYTES,
            f"RSS after {m['early']:,} vs {m['measured']:,}",
        ),
        Row(
            "memory",
            "bytes held per delegation",
            m["held_bytes"],
            "B",
            "≈ 0 (< 100 B)",
            m["held_bytes"] <= GROWTH_TARGET_BYTES,
            "tracemalloc, after gc",
        ),
        Row(
            "memory",
            "peak RSS / target",
            m["peak_rss"] / PEAK_TARGET_MB,
            "×",
            "≤ 1×",
            m["peak_rss"] <= PEAK_TARGET_MB,
        ),
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        print(json.dumps(worker(int(sys.argv[2]))))
    elif sys.argv[1:2] == ["--held"]:
        print(json.dumps(held_worker(int(sys.argv[2]))))
    elif sys.argv[1:2] == ["--peak"]:
        print(json.dumps(peak_worker(sys.argv[2], int(sys.argv[3]))))
    else:
        standalone(run, __doc__)
