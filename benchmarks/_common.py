"""Helpers shared by the benchmarks: result rows, statistics, event logging, RSS.

Every benchmark module exposes ``run(size: Size) -> list[Row]`` (it prints
its own lines as it goes, ratio last) and ``main()`` for running it alone.
``python -m benchmarks`` collects the rows of all of them into one table.
"""

from __future__ import annotations

import argparse
import enum
import json
import math
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from itertools import count
from pathlib import Path
from typing import IO, Any, TypeVar

import orjson

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")


class Size(enum.Enum):
    """How big a run is: ``FULL`` measures (the README's table); ``QUICK`` is a rough
    read in seconds (every benchmark of ``python -m benchmarks --quick`` together
    35-60 s on 2 cores, by the host); ``SMOKE`` only runs the code (CI: every benchmark still
    works; its figures mean nothing and no target is judged)."""

    FULL = "full"
    QUICK = "quick"
    SMOKE = "smoke"

    def pick(self, full: T, quick: T, smoke: T) -> T:
        """The value for this size."""
        return full if self is Size.FULL else quick if self is Size.QUICK else smoke


@dataclass(frozen=True)
class Row:
    """One line of the summary table."""

    benchmark: str
    metric: str
    value: float
    unit: str  # "×", "µs", "s", "ms", "MB", "%", ...
    target: str = ""  # e.g. "≤ 2.5×"; empty when the row is informative only
    met: bool | None = None  # None: no target
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def fmt_value(value: float, unit: str) -> str:
    if math.isnan(value):
        return "n/a"
    if unit == "×":
        return f"{value:.2f}×"
    if unit == "%":
        return f"{value:.1f}%"
    if abs(value) >= 100:
        return f"{value:,.0f} {unit}".strip()
    return f"{value:.2f} {unit}".strip()


def verdict(met: bool | None) -> str:
    return "" if met is None else ("met" if met else "MISSED")


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux: ru_maxrss is KB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / ((1 << 20) if sys.platform == "darwin" else 1024)


def current_rss_mb() -> float:
    """Current resident set size in MB, from /proc (falls back to the peak)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return rss_mb()
    return pages * resource.getpagesize() / (1 << 20)


@contextmanager
def events_to(path: Path) -> Iterator[Path]:
    """Events as the CLI writes them: JSON lines appended to ``path``."""
    from lyra import events

    events.configure(path)
    try:
        yield path
    finally:
        events.configure()  # silence events once the file closes


class BareLog:
    """The events a bare supervisor writes, for the floors lyra is measured against:
    the same two events per delegation as lyra's (``delegation_started``, then
    ``delegation_completed`` or ``delegation_failed``), with the same fields, an
    ISO 8601 timestamp (its date part formatted once a second, as lyra does) and a
    session id, encoded by orjson and appended to a file through Python's own
    buffered writer (one system call per 8 KB; lyra makes one per loop turn)."""

    def __init__(self, path: Path) -> None:
        self.file: IO[bytes] = open(path, "ab")  # noqa: SIM115 - closed by close()
        self.serial = count(1)
        self.second = -1
        self.text = ""

    def session_id(self) -> str:
        return f"child-{next(self.serial):x}"

    def timestamp(self) -> str:
        ns = time.time_ns()
        second = ns // 1_000_000_000
        if second != self.second:
            self.second = second
            self.text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        return "%s%06dZ" % (self.text, ns // 1000 % 1_000_000)  # noqa: UP031

    def write(self, event: str, level: str = "info", /, **fields: Any) -> None:
        record = {"event": event, "level": level, "timestamp": self.timestamp(), **fields}
        self.file.write(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))

    def close(self) -> None:
        self.file.close()


def floor_started(log: BareLog | None, timeout: float) -> tuple[str, float]:
    """A floor's delegation begins: its ``delegation_started`` event (none without a
    ``log``); its session id and start time."""
    session = log.session_id() if log is not None else ""
    if log is not None:
        log.write(
            "delegation_started", session_id=session, subject=None, attempt=1, timeout=timeout
        )
    return session, time.perf_counter()


def floor_ended(log: BareLog | None, session: str, started: float, error: str | None) -> bool:
    """A floor's delegation ends: its closing event (``error``: failed); True when it
    failed."""
    if log is not None:
        duration = round(time.perf_counter() - started, 6)
        common = {"duration": duration, "session_id": session, "subject": None, "attempt": 1}
        if error is None:
            log.write("delegation_completed", **common)
        else:
            log.write("delegation_failed", error=error, **common)
    return error is not None


def silence_events() -> None:
    """Drop every lyra event (for benchmarks that time something else)."""
    from lyra import events

    events.configure()


def standalone(
    run: Callable[[Size], list[Row]], doc: str | None, argv: list[str] | None = None
) -> None:
    """``main()`` of a benchmark module: ``--quick`` or ``--smoke`` (see :class:`Size`),
    and ``--json FILE`` (the rows, for the runner)."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true", help="reduced sizes: a rough read")
    sizes.add_argument("--smoke", action="store_true", help="tiny sizes: it runs (no figures)")
    parser.add_argument("--json", metavar="FILE", help="also write the result rows to FILE")
    args = parser.parse_args(argv)
    rows = run(Size.SMOKE if args.smoke else Size.QUICK if args.quick else Size.FULL)
    if args.json:
        Path(args.json).write_text(json.dumps([row.as_dict() for row in rows]), encoding="utf-8")
