"""``lyra analyze``: the protein workload from the command line."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import ExitStack
from typing import Any, TextIO

from lyra.cli import _logging
from lyra.cli._commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE, positive_float, whole_number

_DESCRIPTION = """\
Analyse proteins, each in its own child agent under its own deadline:
fetch → analyze_structure → reason → critique → synthesize. A bad ID, a missing
protein, a slow source or a broken stage costs only that protein.

The data source is the bundled offline dataset (real AlphaFold DB and UniProt
entries) unless --source live is given. Results go to stdout (briefs, or the
final output with --json); progress and logs go to stderr. Every run writes a
run directory: events.jsonl, reports/<ID>.txt, briefs/<ID>.md, output.json.
"""

_EPILOG = """\
faults for --inject ID:FAULT[:ARG][@N] (strike every attempt, or the first N):
  hang              analyze_structure never returns (after fetch completed)
  slow:SECONDS      every stage takes that long
  tool_error        fetch raises a connection error
  structure_error   analyze_structure raises; the protein ends partial
  rate_limit:SECS   fetch gets a 429 with that retry-after
  malformed         the source answers without a description
  not_found         the source answers 404

examples:
  lyra analyze P04637 XXXXX Q8I3H7
  lyra analyze P04637 Q8I3H7 --json > output.json
  lyra analyze --question "Is the structure of P04637 reliable? structure only"
  lyra analyze P04637 --inject P04637:hang@1 --timeout 2 --retries 1
  lyra analyze P04637 Q8I3H7 --durable --run-dir runs/big   (then, after a crash:)
  lyra analyze --resume runs/big
  lyra analyze P04637 Q8I3H7 --database-url postgresql://host/lyra   (+ lyra worker …)

exit status: 0 every protein completed, 1 some failed or were partial, 2 usage error,
             130 interrupted (finished proteins stay in the run directory)
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
    p.add_argument("ids", nargs="*", metavar="ID", help="UniProt accessions, e.g. P04637")
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
    p.add_argument("-v", "--verbose", action="store_true", help="print events to stderr")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the analysis; print the result; return the exit status."""
    from lyra._sync import run_blocking
    from lyra.proteins import analyze
    from lyra.supervisor import RunDir

    request = None if args.resume else _request(args, plan=True)
    if isinstance(request, str):
        print(f"lyra analyze: {request}", file=sys.stderr)
        return EXIT_USAGE
    durable = _durable(args)  # on --resume, args get the recorded IDs and options
    if durable is not None and durable.finished is not None:
        done = durable.finished
        print(done.model_dump_json(indent=2) if args.json else render_text(done))
        print(f"run directory: {durable.run_dir} (already finished)", file=sys.stderr)
        return EXIT_OK if done.all_completed else EXIT_FAILED
    if request is None:  # resuming: the record's IDs, checked, never planned again
        request = _request(args, plan=False)
        if isinstance(request, str):
            print(f"lyra analyze: {request}", file=sys.stderr)
            if durable is not None:
                durable.close()
            return EXIT_USAGE
    ids, faults = request
    structure_only = args.structure_only
    try:
        run_dir = RunDir(args.run_dir) if args.run_dir else RunDir.new()
    except OSError as exc:
        print(
            f"lyra analyze: cannot use run directory {args.run_dir or 'runs/'}: "
            f"{exc.strerror or exc}",
            file=sys.stderr,
        )
        if durable is not None:
            durable.close()
        return EXIT_USAGE
    if durable is None and run_dir.holds_a_run():
        print(
            f"lyra analyze: {run_dir.path} already holds a run; choose another --run-dir "
            "(or leave it out for a new folder under runs/)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    source = _source(args.source)
    progress = _Progress(len(set(ids)), sys.stderr)
    with ExitStack() as cleanup:
        events = cleanup.enter_context(open(run_dir.events, "a", encoding="utf-8"))
        cleanup.callback(_logging.configure)  # the events file closes: stop writing to it
        if durable is not None:
            cleanup.callback(durable.close)
        if hasattr(source, "close"):
            cleanup.callback(source.close)
        _logging.configure(files=[events], verbose=args.verbose)
        try:
            output = run_blocking(
                "analyze",
                lambda: analyze(
                    ids,
                    source=source,
                    timeout=args.timeout,
                    concurrency=args.concurrency,
                    retries=args.retries,
                    plan="structure" if structure_only else "full",
                    faults=faults,
                    run_dir=run_dir,
                    on_result=progress.update,
                    executor=durable.executor if durable is not None else None,
                    quorum=_quorum_policy(args),
                    answer_writer=_answer_writer(),
                    question=args.question,
                ),
            )
        except KeyboardInterrupt:
            progress.close()
            print(f"lyra: finished proteins are in {run_dir.path}", file=sys.stderr)
            raise
    progress.close()
    if args.json:
        print(output.model_dump_json(indent=2))
    else:
        print(render_text(output))
    for failure in run_dir.failures:
        print(f"lyra analyze: could not write {failure}", file=sys.stderr)
    print(f"run directory: {run_dir.path}", file=sys.stderr)
    return EXIT_OK if output.all_completed else EXIT_FAILED


def _request(args: argparse.Namespace, *, plan: bool) -> tuple[list[str], list[Any]] | str:
    """The proteins and faults asked for, or what is wrong with the request.

    A question is planned here (by rule, or by the model when a key is set),
    and its proteins and plan are written back into ``args`` so that a
    durable run records them and a resume never plans again.
    """
    from lyra._sync import run_blocking
    from lyra.proteins import parse_fault, plan_question, validate_protein_id

    planned = None
    if plan and args.question:
        planned = run_blocking("plan_question", lambda: plan_question(args.question))
    ids = list(dict.fromkeys([*args.ids, *(planned.ids if planned else [])]))
    if not ids:
        where = " in the question" if args.question else ""
        return f"no protein IDs given{where} (try: lyra analyze P04637)"
    try:
        faults = [parse_fault(spec) for spec in args.inject]
    except ValueError as exc:
        return f"--inject: {exc}"
    requested = {value for ok, value in map(validate_protein_id, ids) if ok}
    stray = sorted({f.protein_id for f in faults} - requested)
    if stray:
        return f"--inject names {', '.join(stray)}, which is not requested"
    args.ids = ids
    args.structure_only = args.structure_only or (
        planned is not None and planned.plan == "structure"
    )
    return ids, faults


def _durable(args: argparse.Namespace) -> Any:
    """The durable run (lyra.durable) for --durable, --resume or --database-url, else None;
    a plain --run-dir is checked too, so it never reuses a durable run's folder."""
    if not (args.durable or args.resume or args.database_url or args.run_dir):
        return None
    from lyra.cli._durable_runs import open_run

    return open_run(args)


def _quorum_policy(args: argparse.Namespace) -> Any:
    from lyra.proteins import validate_protein_id
    from lyra.supervisor import QuorumPolicy

    critical = {value for ok, value in map(validate_protein_id, args.critical) if ok}
    return QuorumPolicy(min_success=args.min_success, critical=frozenset(critical))


def _answer_writer() -> Any:
    """A model writes the answer when a key is set; the template otherwise."""
    if not os.environ.get("ANTHROPIC_API_KEY"):
        return None
    from lyra.supervisor import ModelAnswerWriter

    return ModelAnswerWriter()


def _source(name: str) -> Any:
    from lyra.proteins import LiveSource, OfflineSource

    if name == "offline":
        return OfflineSource()
    return LiveSource(
        afdb_url=os.environ.get("LYRA_AFDB_URL") or "https://alphafold.ebi.ac.uk",
        uniprot_url=os.environ.get("LYRA_UNIPROT_URL") or "https://rest.uniprot.org",
    )


def render_text(output: Any) -> str:
    """The human-readable result: briefs, then what failed, why and what to try."""
    from lyra._templates import render

    failed = [
        {
            **entry.model_dump(),
            "next_step": next(iter(entry.suggested_actions), None),
        }
        for entry in output.failed_analyses
    ]
    return render(
        "analysis.txt.j2",
        answer=output.answer,
        completed=output.completed_analyses,
        partial=output.partial_analyses,
        failed=failed,
        summary=output.summary,
    )


class _Progress:
    """A one-line progress display on a terminal; silent when stderr is piped."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total, self.done, self.stream = total, 0, stream
        self.live = stream.isatty()

    def update(self, entry: Any) -> None:
        self.done += 1
        if not self.live:
            return
        status = type(entry).__name__.removesuffix("Analysis").lower()
        self.stream.write(f"\r\033[K[{self.done}/{self.total}] {entry.protein_id}: {status}")
        self.stream.flush()

    def close(self) -> None:
        if self.live and self.done:
            self.stream.write("\n")
            self.stream.flush()
