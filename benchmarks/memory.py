"""Memory: 10,000 delegations, peak RSS and growth per delegation.

Runs in a fresh subprocess so that nothing else measured in the same run
pollutes it. The delegations go through the full path (``Supervisor.delegate``
under ``LocalExecutor().map`` at concurrency 100, events to a temporary file,
one child in ten failing with a rendered report) in batches of 500 whose
results are dropped, as a caller that streams results would. Measured:

- peak RSS of the process (``ru_maxrss``), and RSS after 2,000 and after
  10,000 delegations: growth per delegation = the difference / 8,000;
- bytes still held (``tracemalloc``, after ``gc.collect()``) by 1,000 more
  delegations: a leak shows up here even when RSS hides it in freed pages.

Target (DESIGN §9): peak RSS ≤ 200 MB, no growth per delegation.

    python benchmarks/memory.py [--quick]
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
from _common import Row, current_rss_mb, events_to, rss_mb, standalone

from lyra import ChildContext, Supervisor
from lyra.errors import TransientError
from lyra.supervisor import LocalExecutor

TOTAL, QUICK_TOTAL = 10_000, 2_500
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


def run(quick: bool) -> list[Row]:
    total = QUICK_TOTAL if quick else TOTAL
    out = subprocess.run(
        [sys.executable, __file__, "--worker", str(total)],
        check=True,
        capture_output=True,
        text=True,
    )
    m = json.loads(out.stdout.strip().splitlines()[-1])
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
    else:
        standalone(run, __doc__)
