"""Proteome scale: 100,000 proteins read from a file, streamed, in bounded memory.

A fresh process runs ``lyra.proteins.analyze(stream=True)`` on 100,000
accessions read lazily from a file, with the seeded synthetic source (made-up
but realistic entries: a sequence, a per-residue pLDDT track of ordered
domains and disordered linkers) through the full pipeline (fetch → structure →
reason → critique → synthesis), at concurrency 64, writing every report,
brief and ``results.jsonl`` line to a run directory and JSON events to its
``events.jsonl``, as ``lyra analyze --ids-file`` does. Measured: peak RSS of
the process, proteins per second, makespan; the run directory's
``results.jsonl`` is checked to hold every protein exactly once.

Target: peak RSS ≤ 300 MB for 100,000 proteins (a human proteome is 20,000).

    python benchmarks/proteome.py [--quick | --smoke]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from _common import Row, Size, standalone

PROTEINS, QUICK_PROTEINS, SMOKE_PROTEINS = 100_000, 500, 100
CONCURRENCY = 64
TARGET_MB = 300


def accessions(path: Path) -> Iterator[str]:
    """One accession a line, read lazily (the file is never held whole)."""
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield line.strip()


def measure(count: int, folder: Path) -> dict[str, float]:
    """In this process: the streamed run, then its figures (peak RSS of the process)."""
    import anyio

    from lyra import events
    from lyra.proteins import analyze
    from lyra.proteins._synthetic import SyntheticSource

    ids = folder / "ids.txt"
    ids.write_text("".join(f"A{n:08d}\n" for n in range(count)), encoding="utf-8")
    run_dir = folder / "run"
    run_dir.mkdir()
    events.configure(run_dir / "events.jsonl")
    started = time.perf_counter()
    output = anyio.run(
        lambda: analyze(
            accessions(ids),
            source=SyntheticSource(seed=7),
            timeout=60,
            concurrency=CONCURRENCY,
            run_dir=run_dir,
            stream=True,
        )
    )
    elapsed = time.perf_counter() - started
    events.configure()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the check below
    lines, seen = 0, set()
    with (run_dir / "results.jsonl").open(encoding="utf-8") as results:
        for line in results:
            lines += 1
            seen.add(json.loads(line)["protein_id"])
    return {
        "proteins": output.summary.total_requested,
        "lines": lines,
        "distinct": len(seen),
        "seconds": elapsed,
        "peak_mb": peak,
    }


def run(size: Size) -> list[Row]:
    count = size.pick(PROTEINS, QUICK_PROTEINS, SMOKE_PROTEINS)
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(count), folder],
            capture_output=True,
            text=True,
            check=True,
        )
    figures = json.loads(done.stdout.splitlines()[-1])
    whole = figures["lines"] == figures["distinct"] == count == figures["proteins"]
    rate = figures["proteins"] / figures["seconds"]
    print(
        f"{count:,} synthetic proteins from a file at concurrency {CONCURRENCY}: "
        f"{figures['seconds']:.1f} s ({rate:.0f} proteins/s), peak RSS "
        f"{figures['peak_mb']:.0f} MB (target ≤ {TARGET_MB} MB); results.jsonl holds "
        f"{figures['lines']:,} lines, {figures['distinct']:,} distinct proteins"
    )
    return [
        Row(
            "proteome",
            f"peak RSS, {count:,} proteins streamed from a file",
            figures["peak_mb"],
            "MB",
            f"≤ {TARGET_MB} MB",
            figures["peak_mb"] <= TARGET_MB and whole,
            "every protein exactly once" if whole else "PROTEINS MISSING OR REPEATED",
        ),
        Row("proteome", "proteins per second", rate, "/s"),
        Row("proteome", "makespan", figures["seconds"], "s"),
    ]


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(measure(int(sys.argv[2]), Path(sys.argv[3]))))
    else:
        standalone(run, __doc__)
