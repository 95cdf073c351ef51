"""``lyra analyze``: the protein workload from the command line."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lyra.cli import _logging, _stdout
from lyra.cli._live import LiveView
from lyra.cli._options import (
    EXIT_FAILED,
    EXIT_NO_WORKERS,
    EXIT_OK,
    EXIT_UNWRITTEN,
    add_limit_options,
    non_negative_float,
    positive_float,
    whole_number,
)
from lyra.cli._request import Placement
from lyra.errors import ConfigurationError, RunStopped

if TYPE_CHECKING:
    from lyra.proteins import AnalyzeRequest

STREAM_ABOVE = 100
"""Runs of more proteins than this (from arguments or --ids-file alike) stream their
results to the run directory and print counts, not one brief per protein."""

_DESCRIPTION = """\
Analyse proteins, each in its own child agent under its own deadline:
fetch → analyze_structure → reason → critique → synthesize. A bad ID, a missing
protein, a slow source or a broken stage costs only that protein.

The data source is the bundled offline dataset (real AlphaFold DB and UniProt
entries) unless --source live is given. Results go to stdout (briefs, or the
final output with --json); progress and logs go to stderr. Every run writes a
run directory: events.jsonl, reports/<ID>.txt, briefs/<ID>.md, figures/ (each
protein's pLDDT track, and its PAE heatmap where PAE is held), results.jsonl
(one line per protein, as it ends) and output.json, and lyra-run.lock, held while
the run works there (another run into the same folder is refused).
"""

_EPILOG = """\
faults for --inject ID:FAULT[:ARG][@N] (strike every attempt, or the first N):
  hang              analyze_structure never returns (after fetch completed)
  slow:SECONDS      every stage takes that long
  tool_error        fetch raises a connection error
  structure_error   analyze_structure raises; the protein ends partial (with
                    --structure-only too: its summary names the problem)
  rate_limit:SECS   fetch gets a 429 with that retry-after
  malformed         the source answers without a description
  not_found         the source answers 404

examples:
  lyra analyze P04637 XXXXX Q8I3H7
  lyra analyze P04637 Q8I3H7 --json > output.json
  lyra analyze --ids-file proteome.txt --concurrency 64   (>100 IDs: streams results.jsonl)
  lyra analyze --question "Is the structure of P04637 reliable? structure only"
  lyra analyze P04637 --inject P04637:hang@1 --timeout 2 --retries 1
  lyra analyze P04637 Q8I3H7 --durable --run-dir runs/big   (then, after a crash:)
  lyra analyze --resume runs/big
  lyra analyze P04637 Q8I3H7 --database-url postgresql://host/lyra   (+ lyra worker …)

exit status: 0 every protein completed, 1 some failed or were partial, 2 usage error,
             3 no worker took a queued child within --worker-wait (start `lyra worker
             --database-url URL`, then --resume), 4 finished but some run files could
             not be written (disk full; the results are printed), 130 interrupted
             (finished proteins stay in the run directory)
"""


def register(commands: Any) -> None:
    """Add ``lyra analyze`` to the subcommands."""
    p = commands.add_parser(
        "analyze",
        help="analyse proteins, one child per protein (offline by default)",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "ids",
        nargs="*",
        metavar="ID",
        help="UniProt accessions, e.g. P04637 (isoform: P05067-2; several in one argument "
        "joined by commas or spaces; an entry name or secondary accession the bundled data "
        "record, e.g. P53_HUMAN, is resolved to its accession with a note)",
    )
    p.add_argument(
        "--ids-file",
        metavar="FILE",
        action="append",
        help="more accessions, one or more a line (repeatable: each file's are added; - for "
        "stdin; spaces, tabs or commas "
        "between them; of a tab- or comma-separated table headed with an Entry column, as "
        "UniProt exports, that column; of a FASTA file, the accession each header names; "
        "blank lines, # comments and a header skipped, "
        "duplicates analysed once; a file that is not text or holds no accession is a "
        "usage error); a run of more than 100 proteins streams its results to results.jsonl",
    )
    p.add_argument(
        "--question",
        help="a free-text question: the proteins and the plan come "
        "from it (by rule; planned by the model when ANTHROPIC_API_KEY is set)",
    )
    p.add_argument("--structure-only", action="store_true", help="stop after analyze_structure")
    p.add_argument("--json", action="store_true", help="print the final output as JSON")
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=300.0,
        help="seconds per protein attempt (default 300)",
    )
    add_limit_options(
        p,
        idle="seconds without progress before a protein's attempt ends (default: none)",
        budget="for the whole run (in one process: not with --durable), every protein, retry "
        "and model call together",
    )
    p.add_argument(
        "--concurrency", type=whole_number(1), default=8, help="proteins at once (default 8)"
    )
    p.add_argument(
        "--retries",
        type=whole_number(0),
        default=0,
        help="recovery attempts after a failure (default 0)",
    )
    p.add_argument("--run-dir", help="where to write the run's files (default: runs/<time>)")
    p.add_argument(
        "--source",
        choices=("offline", "live"),
        default="offline",
        help="offline bundled data (default) or AlphaFold DB + UniProt over HTTP",
    )
    p.add_argument(
        "--inject",
        action="append",
        default=[],
        metavar="ID:FAULT[:ARG][@N]",
        help="inject a fault (repeatable); see below",
    )
    p.add_argument(
        "--min-success",
        type=whole_number(0),
        default=1,
        metavar="N",
        help="fewest proteins that must succeed for an answer (default 1)",
    )
    p.add_argument(
        "--critical",
        action="append",
        default=[],
        metavar="ID",
        help="a protein that must succeed (repeatable); retried first if it fails",
    )
    p.add_argument(
        "--durable",
        action="store_true",
        help="checkpoint every child in the run directory (dbos.sqlite) so --resume works",
    )
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="finish an interrupted durable run without re-running finished children",
    )
    p.add_argument(
        "--database-url",
        metavar="URL",
        help="postgresql://… : queue the children for `lyra worker` processes (many machines)",
    )
    p.add_argument(
        "--worker-wait",
        type=non_negative_float,
        metavar="S",
        help="with --database-url: stop (exit 3) when no worker took a child for S seconds; "
        "0 waits forever (default 120)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --resume: run again when the checkpoints are missing or damaged",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="print events to stderr")
    p.set_defaults(run=run)


_WORKER_WAIT = 120.0
"""Seconds a queued run waits for a worker to take a child, unless told otherwise."""


@dataclass(frozen=True)
class _Invocation:
    """Everything ``lyra analyze`` was asked, typed: the namespace ends here."""

    request: AnalyzeRequest | None
    """None on --resume: the run's record holds it."""
    where: Placement
    given: dict[str, Any]
    """Options set explicitly (a resume checks them against the record)."""
    json: bool
    verbose: bool

    @classmethod
    def of(cls, args: argparse.Namespace) -> _Invocation:
        from lyra.cli._request import given_options, request_from

        if args.force and not args.resume:  # (an option that does nothing is refused)
            raise ConfigurationError("--force needs --resume: lyra analyze --resume DIR --force")
        if args.worker_wait is not None and not args.database_url:
            raise ConfigurationError("--worker-wait needs --database-url (workers take children)")
        wait = _WORKER_WAIT if args.worker_wait is None else args.worker_wait
        return cls(
            request=None if args.resume else request_from(args),
            where=Placement(
                args.run_dir,
                args.resume,
                args.durable,
                args.database_url,
                worker_wait=wait or None,
                force=args.force,
            ),
            given=given_options(args, _defaults()),
            json=args.json,
            verbose=args.verbose,
        )


def run(args: argparse.Namespace) -> int:
    """Run the analysis; print the result; return the exit status."""
    return _invoke(_Invocation.of(args))


def _invoke(asked: _Invocation) -> int:
    where = asked.where
    if not (where.durable or where.database_url or where.resume):
        _refuse_a_durable_run_dir(where.run_dir)
        assert asked.request is not None  # only a resume has none
        return _analyze(asked.request, asked, None)
    return _invoke_durable(asked)


def _refuse_a_durable_run_dir(folder: str | None) -> None:
    """A plain run may not write into the run directory of a durable one."""
    from lyra.cli._run_record import (  # it reads a request: the workload loads
        load_record,
        resume_command,
    )

    if folder is not None and load_record(Path(folder)) is not None:
        raise ConfigurationError(
            f"{folder} holds a durable run; resume it with: {resume_command(folder)}"
        )


def _invoke_durable(asked: _Invocation) -> int:
    from lyra.cli._durable_runs import open_run  # the durable engine loads for durable runs only
    from lyra.durable import NoWorkers

    try:
        durable = open_run(asked.request, asked.where, asked.given)
    except RunStopped as stopped:  # the checkpoints' disk is full: exit 4, as later on
        print(f"lyra analyze: stopped: {stopped}", file=sys.stderr)
        return EXIT_UNWRITTEN
    if durable is None:
        assert asked.request is not None  # a resume without a record ended above
        return _analyze(asked.request, asked, None)
    try:
        if durable.finished is not None:
            done = durable.finished
            _stdout.write(done.model_dump_json(indent=2) if asked.json else done.text())
            print(f"run directory: {durable.run_dir} (already finished)", file=sys.stderr)
            return _status(done)
        assert durable.request is not None
        return _analyze(durable.request, asked, durable)
    except NoWorkers as exc:  # the children stay queued: --resume once workers run
        print(f"lyra: {exc}", file=sys.stderr)
        print(f"lyra: once workers run, finish the run with: {durable.resume}", file=sys.stderr)
        return EXIT_NO_WORKERS
    finally:
        durable.close()


def _analyze(request: AnalyzeRequest, asked: _Invocation, durable: Any) -> int:
    """Run ``request`` with its run directory, events and progress display; print it."""
    from lyra.proteins import requested_ids

    folder = str(durable.run_dir) if durable is not None else asked.where.run_dir
    run_dir = _run_dir(folder, durable)
    total = len(requested_ids(request.ids))  # each protein once, P04637 and p04637 alike
    stream = total > STREAM_ABOVE
    progress = LiveView(total, sys.stderr, streamed=stream)
    with (
        _held(run_dir, durable),
        _logging.events_to(run_dir.events, verbose=asked.verbose) as unwritten,
    ):
        try:
            output = _run_analysis(request, run_dir, durable, progress, stream=stream)
        except KeyboardInterrupt:
            print(_interrupted(run_dir, durable), file=sys.stderr)
            if asked.json and durable is None and run_dir.output.is_file():
                _stdout.write(run_dir.output.read_text(encoding="utf-8"))  # "interrupted": true
            raise
        except RunStopped as stopped:
            print(_stopped(stopped, progress, durable), file=sys.stderr)
            from lyra.proteins import AnalysisOutput

            if asked.json and isinstance(stopped.output, AnalysisOutput):  # (as it stood)
                _stdout.write(stopped.output.model_dump_json(indent=2))
            return EXIT_UNWRITTEN
    _stdout.write(output.model_dump_json(indent=2) if asked.json else output.text())
    unwritten += [f"could not write {failure}" for failure in run_dir.failures]
    _logging.say_unwritten("lyra analyze", unwritten)
    print(f"run directory: {run_dir.path}", file=sys.stderr)
    if unwritten:
        return EXIT_UNWRITTEN  # the results are above; the run directory is incomplete
    return _status(output)


def _interrupted(run_dir: Any, durable: Any) -> str:
    """What an interrupted run kept, and how to finish it."""
    from lyra.proteins import UNFINISHED, AnalysisOutput

    folder, listed = run_dir.path, run_dir.path / UNFINISHED
    if durable is not None:
        return f"lyra: finished proteins are in {folder}; finish the run with: {durable.resume}"
    if not listed.is_file():
        return f"lyra: finished proteins are in {folder}"
    left = AnalysisOutput.model_validate_json(run_dir.output.read_bytes()).summary.unfinished
    if not left:
        return f"lyra: every protein finished; they are in {folder}"
    return (
        f"lyra: finished proteins are in {folder}; the {left} that did not finish are "
        f"listed in {listed}: run them with: lyra analyze --ids-file {listed}"
    )


def _stopped(stopped: RunStopped, progress: LiveView, durable: Any) -> str:
    """One message for a durable run whose checkpoints could not be written: what
    failed, what is kept, how much room to make, how to finish."""
    kept = f"{progress.done} of {progress.total} proteins finished and are kept"
    room = "make room"
    if progress.done >= _ESTIMATED_FROM and durable is not None:
        # What the run directory holds per protein finished, per protein left: its
        # database with the write-ahead log a full disk keeps from being folded back
        # (the main file alone can be a page while the log holds megabytes), and the
        # results, reports and briefs, which fill the same disk.
        used = _size_of(Path(durable.run_dir))
        left = progress.total - progress.done
        room = f"free about {_megabytes(used / progress.done * left)} for the {left} left"
    return (
        f"lyra analyze: stopped: {stopped}; {kept}; {room}, then finish the run with: "
        f"{durable.resume}"
    )


_ESTIMATED_FROM = 10
"""Proteins finished before the room the rest need is estimated from them: with fewer,
the database's own tables outweigh theirs (one finished of 40 asked for 48 MB, where the
whole run takes about 1 MB)."""


def _size_of(folder: Path) -> int:
    """Bytes the files under ``folder`` hold (one that vanishes meanwhile: none)."""
    total = 0
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):
            total += path.stat().st_size if path.is_file() else 0
    return total


def _megabytes(size: float) -> str:
    return f"{max(size / 2**20, 1):.0f} MB"


def _run_dir(folder: str | None, durable: Any) -> Any:
    """The run's folder (a new one under runs/ by default); ConfigurationError (exit 2)
    when it cannot be made or belongs to another run."""
    from lyra.supervisor import RunDir

    try:
        run_dir = RunDir(folder) if folder else RunDir.new()
    except OSError as exc:
        where = folder or "runs/"
        why = "it is a file" if folder and os.path.isfile(folder) else exc.strerror or exc
        raise ConfigurationError(f"cannot use run directory {where}: {why}") from None
    return run_dir


@contextlib.contextmanager
def _held(run_dir: Any, durable: Any) -> Iterator[None]:
    """The run's folder held by this process while the run writes to it (a durable run
    holds it already); ConfigurationError (exit 2) when another run is in it, or was:
    two plain runs started together each saw an empty folder, and both wrote there."""
    if durable is not None:  # (its executor holds the folder, and checked it when new)
        yield
        return
    from lyra._claims import claim
    from lyra.cli._run_record import another_run

    busy = str(another_run(run_dir.path))
    with claim(run_dir.path, run_dir.LOCK, what="the run directory", busy=busy):
        if run_dir.holds_a_run():
            raise another_run(run_dir.path)
        yield


def _run_analysis(
    request: AnalyzeRequest, run_dir: Any, durable: Any, progress: LiveView, *, stream: bool
) -> Any:
    """The analysis itself, under the progress display."""
    from lyra._sync import run_blocking
    from lyra.cli._signals import until_interrupted
    from lyra.proteins import analyze

    return run_blocking(
        "analyze",
        lambda: until_interrupted(
            lambda: progress.show(
                lambda: analyze(
                    request,
                    run_dir=run_dir,
                    on_result=progress.update,
                    executor=durable.executor if durable is not None else None,
                    answer_writer=_answer_writer(),
                    stream=stream,
                )
            )
        ),
    )


def _status(output: Any) -> int:
    """0 when every protein completed and the quorum was met, else 1."""
    met = output.quorum is None or output.quorum.met
    return EXIT_OK if output.all_completed and met else EXIT_FAILED


def _defaults() -> argparse.Namespace:
    """Every option's default (to tell what the command line set explicitly)."""
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["analyze"])


def _answer_writer() -> Any:
    """A model writes the answer when a key is set; the template otherwise."""
    from lyra.settings import settings

    if not settings().model_configured:
        return None
    from lyra.supervisor import ModelAnswerWriter

    return ModelAnswerWriter()
