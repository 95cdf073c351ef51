"""How fast ``lyra.logs`` reads event logs, and in how much memory.

Generates an event log of ``--mb`` megabytes (default 500) in a temporary
folder, shaped like ``lyra analyze`` output (started / completed / failed /
recovery events, a few malformed lines), then times ``collect_stats`` over it
and prints MB/s and peak RSS. Not a test: run it by hand.

    .venv/bin/python benchmarks/logs_throughput.py --mb 50
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lyra.logs import ReadStats, StatsBuilder, read_events

MB = 1 << 20
FAILURES = [
    ("timeout", True, "timeout", "Time limit insufficient"),
    ("timeout", False, "timeout", "No progress before the deadline"),
    ("tool_error", True, "unknown", "ModuleNotFoundError: No module named '{mod}'"),
    ("tool_error", True, "rate_limit", "HTTP 429 from https://rest.uniprot.org/uniprotkb/{pid}"),
    ("tool_error", True, "connection", "ConnectError: connection refused to 10.0.0.{n}:443"),
    ("invalid_task", False, "not_found", "Protein {pid} not found"),
    ("missing_context", False, "data", "Need the organism for {pid}"),
    ("partial", True, "unknown", "RuntimeError: structure step failed after {n} residues"),
]
MODULES = ["bcrypt", "numpy", "pandas", "biopython", "requests"]


def _protein(rng: random.Random) -> str:
    return (
        rng.choice("OPQ")
        + str(rng.randint(0, 9))
        + "".join(rng.choices("ABCDEFGHXYZ0123456789", k=3))
        + str(rng.randint(0, 9))
    )


def _line(
    name: str, at: datetime, session: str, subject: str, attempt: int, **fields: object
) -> str:
    data = {
        **fields,
        "session_id": session,
        "subject": subject,
        "attempt": attempt,
        "event": name,
        "level": "info",
        "timestamp": at.isoformat().replace("+00:00", "Z"),
    }
    return json.dumps(data) + "\n"


def _task(rng: random.Random, at: datetime) -> Iterator[str]:
    """The events of one protein's recovery loop: up to three attempts."""
    pid = _protein(rng)
    timeout = 300.0
    for attempt in (1, 2, 3):
        session = f"child-{rng.getrandbits(48):012x}"
        yield _line("delegation_started", at, session, pid, attempt, timeout=timeout)
        duration = round(rng.lognormvariate(2.5, 0.8), 6)
        at += timedelta(seconds=min(duration, timeout))
        if rng.random() < 0.75:
            yield _line("delegation_completed", at, session, pid, attempt, duration=duration)
            return
        category, retryable, error_type, blocker = rng.choice(FAILURES)
        text = blocker.format(mod=rng.choice(MODULES), pid=pid, n=rng.randint(1, 999))
        yield _line(
            "delegation_failed", at, session, pid, attempt,
            category=category, retryable=retryable, error_type=error_type, blocked_on=text,
            duration=duration, evidence="rule 6: transient infrastructure failure",
        )  # fmt: skip
        if not retryable:
            return
        timeout *= 2
        yield _line(
            "recovery_attempt", at, session, pid, attempt + 1,
            strategy="double_timeout", timeout=timeout, wait=0.0, task_id=f"task-{pid}",
        )  # fmt: skip


def generate(path: Path, megabytes: float, seed: int = 7) -> int:
    """Write about ``megabytes`` of events to ``path``; returns the bytes written."""
    rng = random.Random(seed)
    target, written = int(megabytes * MB), 0
    batch: list[str] = []
    at = datetime(2026, 1, 1, tzinfo=UTC)
    with path.open("w", encoding="utf-8") as out:
        while written < target:
            at += timedelta(seconds=rng.random() * 2)
            batch.extend(_task(rng, at))
            if rng.random() < 0.001:
                batch.append('{"event": "delegation_completed", "trunc\n')  # a torn write
            if len(batch) >= 10_000:
                chunk = "".join(batch)
                out.write(chunk)
                written += len(chunk)
                batch.clear()
        chunk = "".join(batch)
        out.write(chunk)
        written += len(chunk)
    return written


def _rss_mb() -> float:
    """Peak resident set size of this process so far, MB (ru_maxrss is KB on Linux)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (MB if sys.platform == "darwin" else 1024)


def main(argv: list[str] | None = None) -> None:
    """Generate a log, read it, print throughput and memory."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=500.0, help="log size in MB (default 500)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "events.jsonl"
        started = time.perf_counter()
        size = generate(path, args.mb, args.seed)
        print(f"generated {size / MB:.1f} MB in {time.perf_counter() - started:.1f}s")
        before = _rss_mb()
        read = ReadStats()
        started = time.perf_counter()
        stats = StatsBuilder().add_all(read_events([path], stats=read)).build(read)
        elapsed = time.perf_counter() - started
    print(
        f"read {stats.events:,} events ({stats.delegations:,} delegations, "
        f"{stats.failed:,} failed, {stats.recovered:,} recovered, "
        f"{stats.malformed_lines:,} malformed lines) in {elapsed:.1f}s"
    )
    print(f"throughput: {size / MB / elapsed:.1f} MB/s")
    print(f"peak RSS: {_rss_mb():.1f} MB (before reading: {before:.1f} MB)")


if __name__ == "__main__":
    main()
