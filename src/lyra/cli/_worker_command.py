"""``lyra worker``: process children queued by ``lyra analyze --database-url`` (any machine)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
from typing import Any

from lyra.cli import _logging
from lyra.cli._options import EXIT_OK, EXIT_UNWRITTEN, whole_number

_DESCRIPTION = """\
Take children from the PostgreSQL queue that `lyra analyze --database-url
URL` (or any durable lyra.Supervisor run on that database) fills, run them,
and record their results there, until stopped (Ctrl+C or SIGTERM). A worker
builds each child from the importable name the run recorded (lyra.ChildRef),
so your own children run here too when their package is installed. Run as
many workers as you like, on any machine that reaches the database; `lyra
analyze --concurrency N` caps the children running at once across all of
them. When a worker dies mid-child, another worker (or the supervisor) runs
that child again; a finished child never runs twice. Events go to --events
FILE (or stderr with -v) and also travel back to the supervisor's run
directory.
"""


def register(commands: Any) -> None:
    """Add ``lyra worker`` to the subcommands."""
    p = commands.add_parser(
        "worker",
        help="process children queued on PostgreSQL by lyra analyze --database-url",
        description=_DESCRIPTION,
        epilog="exit status: 0 stopped by SIGTERM, 2 usage error (no extra, bad URL), 4 some\n"
        "events could not be written (each named on stderr), 130 interrupted (Ctrl+C)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--database-url", required=True, metavar="URL", help="postgresql://user@host:5432/db"
    )
    p.add_argument(
        "--concurrency",
        type=whole_number(1),
        metavar="N",
        help="children at once on each worker (a setting shared by all workers of the queue)",
    )
    p.add_argument("--events", metavar="FILE", help="append JSON events here")
    p.add_argument("-v", "--verbose", action="store_true", help="print events to stderr")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the worker until Ctrl+C or SIGTERM."""
    from lyra.durable._internal import run_worker

    stop = threading.Event()
    interrupted = False

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop.set()

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        # Ctrl+C stops the worker as SIGTERM does, between two of its steps: raised
        # wherever the main thread is (a database call of DBOS's), it could leave a
        # lock held that the shutdown then waits on. A second Ctrl+C stops at once.
        nonlocal interrupted
        interrupted = True
        signal.signal(signal.SIGINT, previous_interrupt)
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_term)
    previous_interrupt = signal.signal(signal.SIGINT, on_interrupt)
    problems: list[str] = []  # what could not be written, each told once on stderr
    told = 0

    def tell() -> None:
        nonlocal told
        for problem in problems[told:]:
            print(f"lyra worker: {problem}", file=sys.stderr)
        told = len(problems)

    def ready(executor_id: str) -> None:
        tell()  # an event log that cannot even be opened: say so at once
        print(f"lyra worker {executor_id}: taking children (Ctrl+C to stop)", file=sys.stderr)
        sys.stderr.flush()

    try:
        with _logging.events_to(args.events, verbose=args.verbose) as problems:
            run_worker(args.database_url, concurrency=args.concurrency, stop=stop, ready=ready)
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_interrupt)
        tell()  # on Ctrl+C too: events that were lost are never lost quietly
    if interrupted:
        raise KeyboardInterrupt  # (exit status 130, as for any interrupted command)
    return EXIT_UNWRITTEN if problems else EXIT_OK
