"""``lyra logs stats`` against bare decoding loops over the same event log: orjson's
(the strictest floor: lyra reads with orjson) and the standard library's.

Writes an event log of 20 MB (2 MB with ``--quick``) the way the CLI writes it:
each line encoded by ``lyra.events.encode`` with the fields, in the order, that
the supervisor and the recovery loop emit (``delegation_started`` /
``_completed`` / ``_failed`` with usage, ``recovery_attempt``, a data-source
warning now and then, ``quorum_decision`` and ``run_finished`` per run). Then,
interleaved (bare, lyra, bare, lyra, …):

- orjson: ``for line in file: orjson.loads(line)`` over the file opened in
  binary, the floor of any reader that decodes every line with the decoder lyra
  uses -- the target's floor (DESIGN §9: ≤ 1.5× this loop);
- json.loads: the same loop with the standard library, whose ratio is printed
  too (the floor of a reader without orjson);
- lyra: ``lyra logs stats FILE --json`` run in-process through
  ``lyra.cli.main`` (stdout captured), i.e. read, count, summarise, print;
  its cache of blocker patterns is cleared first, as in a fresh process.

Prints min/median/max seconds of each (CPU time of this process: both sides
are single-threaded and CPU-bound on a file in the page cache, and CPU time
stays steady when other work loads the machine), events per second, the ratio
of the medians against each floor (target: ≤ 1.5× the orjson loop) and the peak
RSS of the process (the reader streams: it must not grow with the file).

    python benchmarks/logs_throughput.py [--quick | --smoke]
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from _common import Row, Size, current_rss_mb, median, rss_mb, standalone

from lyra.events import encode

MB = 1 << 20
SIZE_MB, QUICK_SIZE_MB, SMOKE_SIZE_MB = 20.0, 2.0, 0.2
REPEATS, QUICK_REPEATS, SMOKE_REPEATS = 9, 3, 1
TARGET = 1.5
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


# -- the log ----------------------------------------------------------------------------


class _Writer:
    """Event lines as ``lyra.events`` writes them: event, level, timestamp, fields."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.at = datetime(2026, 1, 1, tzinfo=UTC)
        self.sessions = 0
        self.prefix = f"{rng.getrandbits(32):08x}"[:7]

    def line(self, name: str, level: str = "info", **fields: Any) -> bytes:
        stamp = self.at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return encode({"event": name, "level": level, "timestamp": stamp, **fields})

    def session(self) -> str:
        self.sessions += 1
        return f"child-{self.prefix}{self.sessions}"

    def usage(self) -> dict[str, Any]:
        inputs, outputs = self.rng.randint(500, 5000), self.rng.randint(100, 2000)
        return {
            "tokens_used": inputs + outputs,
            "input_tokens": inputs,
            "output_tokens": outputs,
            "cost_usd": round((inputs * 3 + outputs * 15) / 1e6, 6),
            "turns": self.rng.randint(1, 8),
        }

    def task(self) -> Iterator[bytes]:
        """One protein's recovery loop: up to three attempts."""
        rng = self.rng
        pid = _protein(rng)
        task_id = f"task-{rng.getrandbits(48):012x}"
        timeout = 300.0
        self.at += timedelta(seconds=rng.random() * 2)
        if rng.random() < 0.02:
            yield self.line(
                "protein_response_invalid", "warning",
                uniprot_id=pid, source="live", reason=f"Protein {pid} answer had no sequence",
            )  # fmt: skip
        for attempt in (1, 2, 3):
            session = self.session()
            ids: dict[str, Any] = {
                "session_id": session,
                "subject": pid,
                "attempt": attempt,
                "task_id": task_id,
            }
            yield self.line("delegation_started", **ids, timeout=timeout)
            duration = round(rng.lognormvariate(2.5, 0.8), 6)
            self.at += timedelta(seconds=min(duration, timeout))
            if rng.random() < 0.75:
                yield self.line("delegation_completed", duration=duration, **ids, **self.usage())
                return
            category, retryable, error_type, blocker = rng.choice(FAILURES)
            yield self.line(
                "delegation_failed",
                category=category, retryable=retryable, error_type=error_type,
                blocked_on=blocker.format(mod=rng.choice(MODULES), pid=pid, n=rng.randint(1, 999)),
                duration=duration, evidence="rule 6: transient infrastructure failure",
                **ids, **self.usage(),
            )  # fmt: skip
            if not retryable:
                return
            timeout *= 2
            yield self.line(
                "recovery_attempt",
                task_id=task_id, session_id=session, subject=pid, attempt=attempt + 1,
                strategy="double_timeout", category=category, timeout=timeout, wait=0.0,
                subtasks=None,
            )  # fmt: skip

    def run_end(self, proteins: int) -> Iterator[bytes]:
        yield self.line("quorum_decision", met=True, completed=proteins, required=proteins)
        yield self.line("run_finished", proteins=proteins, duration=1.0)


def _protein(rng: random.Random) -> str:
    letters = "".join(rng.choices("ABCDEFGHXYZ0123456789", k=3))
    return f"{rng.choice('OPQ')}{rng.randint(0, 9)}{letters}{rng.randint(0, 9)}"


def generate(path: Path, megabytes: float, seed: int = 7) -> int:
    """Write about ``megabytes`` of events to ``path``; returns the bytes written."""
    writer = _Writer(random.Random(seed))
    target, written = int(megabytes * MB), 0
    with path.open("wb") as out:
        while written < target:
            batch = [line for _ in range(100) for line in writer.task()]
            batch += writer.run_end(100)
            chunk = b"".join(batch)
            out.write(chunk)
            written += len(chunk)
    return written


# -- the two readers ----------------------------------------------------------------------


def bare(path: Path) -> int:
    """A floor: decode every line with the standard library, nothing else."""
    lines = 0
    with path.open("rb") as stream:
        for line in stream:
            json.loads(line)
            lines += 1
    return lines


def bare_orjson(path: Path) -> int:
    """The strictest floor: decode every line with orjson (as lyra does), nothing else."""
    lines = 0
    with path.open("rb") as stream:
        for line in stream:
            orjson.loads(line)
            lines += 1
    return lines


def lyra_stats(path: Path) -> dict[str, Any]:
    """``lyra logs stats FILE --json``, in-process; the JSON it printed."""
    from lyra.cli import main
    from lyra.logs import normalize_blocker

    normalize_blocker.cache_clear()  # as in a fresh process: each run pays for its blockers
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["logs", "stats", str(path), "--json"])
    if status != 0:
        raise RuntimeError(f"lyra logs stats exited {status}")
    printed: dict[str, Any] = json.loads(out.getvalue())
    return printed


def _timed(action: Any, path: Path) -> float:
    started = time.process_time()
    action(path)
    return time.process_time() - started


def _spread(seconds: list[float]) -> str:
    return f"min {min(seconds):.3f} s  median {median(seconds):.3f} s  max {max(seconds):.3f} s"


def run(size: Size) -> list[Row]:
    """Generate a log, time both readers interleaved, print and return the rows."""
    size_mb = size.pick(SIZE_MB, QUICK_SIZE_MB, SMOKE_SIZE_MB)
    repeats = size.pick(REPEATS, QUICK_REPEATS, SMOKE_REPEATS)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "events.jsonl"
        written = generate(path, size_mb)
        lines = bare(path)
        stats = lyra_stats(path)  # a warm-up round for both, and the check below
        if stats["events"] != lines or stats["malformed_lines"]:
            raise RuntimeError(f"lyra read {stats['events']} of {lines} lines")
        before = current_rss_mb()
        times: dict[str, list[float]] = {"orjson": [], "json.loads": [], "lyra": []}
        readers = {"orjson": bare_orjson, "json.loads": bare, "lyra": lyra_stats}
        for _ in range(repeats):
            for name, reader in readers.items():
                times[name].append(_timed(reader, path))
    peak = rss_mb()
    print(
        f"{written / MB:.1f} MB, {lines:,} events ({stats['delegations']:,} delegations, "
        f"{stats['failed']:,} failed), {repeats} interleaved rounds"
    )
    for name, seconds in times.items():
        rate = lines / median(seconds)
        print(f"{name:<10} {_spread(seconds)}  {rate:,.0f} events/s")
    to_orjson = median(times["lyra"]) / median(times["orjson"])
    to_json = median(times["lyra"]) / median(times["json.loads"])
    print(f"peak RSS {peak:.1f} MB (before timing {before:.1f} MB)")
    print(f"lyra logs stats / bare json.loads loop: {to_json:.2f}× (for information)")
    print(f"lyra logs stats / bare orjson loop: {to_orjson:.2f}× (target ≤ {TARGET}×)")
    bench = "logs_throughput"
    return [
        Row(bench, "bare orjson loop", lines / median(times["orjson"]), "events/s"),
        Row(bench, "bare json.loads loop", lines / median(times["json.loads"]), "events/s"),
        Row(bench, "lyra logs stats", lines / median(times["lyra"]), "events/s"),
        Row(bench, "peak RSS", peak, "MB", note=f"{written / MB:.0f} MB log"),
        Row(bench, "lyra logs stats / bare json.loads loop", to_json, "×",
            note="medians, interleaved"),
        Row(bench, "lyra logs stats / bare orjson loop (the floor)", to_orjson, "×",
            f"≤ {TARGET}×", to_orjson <= TARGET, "medians, interleaved"),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """Run alone: ``--quick`` or ``--smoke`` for a smaller log, ``--json FILE`` for the rows."""
    standalone(run, __doc__, argv)


if __name__ == "__main__":
    main()
