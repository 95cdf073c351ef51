"""``lyra answer``: the questions a durable run's children wait on, and their answers.

It reads and writes the run's database through a DBOS client (see
:mod:`lyra.durable._questions`) and launches no DBOS, so nothing of the run ever
runs in this process: an answer is a message in the database, taken by the
task the next time it runs (at once, when its run is running now).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lyra.cli import _stdout
from lyra.cli._options import EXIT_FAILED, EXIT_OK, Subparsers, read_text
from lyra.errors import ConfigurationError

if TYPE_CHECKING:
    from lyra.durable import WaitingQuestion

_DESCRIPTION = """\
A child that asks a question (answer = await ctx.ask("Which organism?")) in a
durable run -- lyra.Supervisor on a DurableExecutor, or lyra mcp --durable --
waits for its answer in the run's database (RecoveryPolicy.answer_wait, an hour
by default), and the run says so with the command to answer it. With no TASK,
lyra answer lists the questions waiting; with TASK and ANSWER, it answers one.

The answer is kept in the database even while no process of the run is alive:
the task takes it at once if its run is running, else when the run is resumed
(the same DurableExecutor run started again, lyra analyze --resume DIR, or a
worker that recovers it). The task's attempt then runs again from its start,
and ctx.ask returns the answer at once; no finished attempt runs twice.

RUN is a run directory: that of lyra analyze --durable, the folder of
DurableExecutor.embedded(folder, ...), or lyra mcp's --state-dir. A run on
PostgreSQL is named by --database-url URL (and --run-id ID, or every run in the
database; a lyra analyze run directory gives its own). TASK is the task's
subject (P04637), its workflow ID, or an MCP delegation id.
"""

_EPILOG = """\
examples:
  lyra answer runs/triage                          the questions waiting, as a table
  lyra answer runs/triage --json                   ... as JSON
  lyra answer runs/triage issue-42 "Linux, kernel 6.8"
  lyra answer runs/triage issue-42 - < answer.txt  the answer from standard input
  lyra answer --database-url postgresql://db/lyra --run-id triage-1 issue-42 "yes"

exit status: 0 answered, or some question waits for an answer (listed); 1 none
             waits; 2 usage error (no such run or task, no question waiting, one
             answered already)
"""


def register(commands: Subparsers) -> None:
    """Add ``lyra answer`` to the subcommands."""
    p = commands.add_parser(
        "answer",
        help="list or answer the questions a durable run's children wait on",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dir", nargs="?", metavar="RUN", help="the run directory")
    p.add_argument("task", nargs="?", metavar="TASK", help="the task to answer")
    p.add_argument("answer", nargs="?", metavar="ANSWER", help="the answer; - reads stdin")
    p.add_argument("--database-url", metavar="URL", help="postgresql://… : a run on PostgreSQL")
    p.add_argument("--run-id", metavar="ID", help="the run in that database (default: all)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=run)


@dataclass(frozen=True)
class _Run:
    """Where a run's questions are: its database and its workflows' ID prefix."""

    url: str
    prefix: str
    """``<run id>/``, or ``""`` for every run in the database."""
    postgres: bool
    shown: str
    """How messages name the run."""
    resume: str
    """How to run it again, in words."""


def run(args: argparse.Namespace) -> int:
    """List the questions waiting, or answer one."""
    from lyra.durable._internal import require_durable

    require_durable()
    run_dir, task, text = _words(args)
    where = _where(run_dir, args.database_url, args.run_id)
    if task is None:
        return _list(where, json_out=args.json)
    if text is None:
        raise ConfigurationError(
            f'give the answer too: lyra answer {where.shown} {task} "ANSWER" (or - to read it '
            "from standard input)"
        )
    if text == "-":
        text = read_text("-").rstrip("\n")
    if not text.strip():
        raise ConfigurationError("the answer is empty")
    return _answer(where, task, text, json_out=args.json)


def _words(args: argparse.Namespace) -> tuple[str | None, str | None, str | None]:
    """RUN, TASK and ANSWER: with --database-url, RUN is given only as a directory
    (a lyra analyze run on PostgreSQL), so the first word may be the TASK."""
    words = [args.run_dir, args.task, args.answer]
    if args.database_url and args.run_dir is not None and not Path(args.run_dir).is_dir():
        if args.answer is not None:
            raise ConfigurationError(
                f"{args.run_dir} is not a run directory; with --database-url give TASK and "
                "ANSWER (or a run directory of lyra analyze first)"
            )
        words = [None, args.run_dir, args.task]
    if words[0] is None and not args.database_url:
        raise ConfigurationError(
            "name the run: lyra answer RUN_DIR, or lyra answer --database-url URL [--run-id ID]"
        )
    return words[0], words[1], words[2]


def _where(run_dir: str | None, database_url: str | None, run_id: str | None) -> _Run:
    """The run named; a usage error for a folder that holds none, or options that
    do not fit it."""
    from lyra.cli._run_record import load_record, resume_command
    from lyra.durable._internal import (
        SQLITE_FILE,
        holds_runs,
        postgres_url,
        redacted,
        sqlite_url,
    )

    record = None
    if run_dir is not None:
        folder = Path(run_dir)
        if not folder.is_dir():
            raise ConfigurationError(f"there is no run directory at {run_dir}")
        record = load_record(folder)
        if record is not None:
            if run_id is not None and run_id != record.run_id:
                raise ConfigurationError(
                    f"{run_dir} holds the run {record.run_id}, not {run_id}: leave out --run-id"
                )
            run_id = record.run_id
            if record.backend == "postgres" and not database_url:
                raise ConfigurationError(
                    f"{run_dir} ran on PostgreSQL: lyra answer {run_dir} --database-url URL"
                )
        if not database_url:
            if not (folder / SQLITE_FILE).is_file():
                raise ConfigurationError(
                    f"{run_dir} holds no durable run (no {SQLITE_FILE}): questions wait only "
                    "in durable runs (lyra analyze --durable, DurableExecutor, lyra mcp --durable)"
                )
            return _Run(
                url=sqlite_url(folder),
                prefix=f"{run_id}/" if run_id else "",
                postgres=False,
                shown=run_dir,
                resume=resume_command(run_dir)
                if record is not None
                else "start its run again (the same run ID resumes it; a lyra mcp --durable "
                f"server: lyra mcp --durable --state-dir {run_dir} ...)",
            )
        if record is not None and record.backend == "embedded":
            raise ConfigurationError(
                f"{run_dir} ran embedded (its database is {run_dir}/{SQLITE_FILE}): leave out "
                "--database-url"
            )
    assert database_url is not None  # _words asked for a run directory otherwise
    url = postgres_url(database_url)
    named = run_dir if run_dir is not None else f"--run-id {run_id}" if run_id else ""
    shown = f"{named} --database-url {redacted(url)}".strip()
    if not holds_runs(url):  # (and a server that does not answer: DatabaseUnreachable)
        raise ConfigurationError(
            f"the database at {redacted(url)} holds no durable run (no run has used it): "
            "is it the --database-url the run was started with?"
        )
    return _Run(
        url=url,
        prefix=f"{run_id}/" if run_id else "",
        postgres=True,
        shown=shown,
        resume=resume_command(run_dir, postgres=True)
        if record is not None and run_dir is not None  # a record is read from a run_dir
        else "a worker takes it (start lyra worker --database-url URL if none runs)",
    )


def _waiting(where: _Run, mailbox: Any) -> list[WaitingQuestion]:
    """The questions waiting in the run; a usage error (exit 2) when the database knows
    no run of the --run-id given."""
    from lyra._sync import run_blocking
    from lyra.durable._internal import known_run, questions_waiting

    found = run_blocking(
        "waiting", lambda: questions_waiting(mailbox, where.prefix, postgres=where.postgres)
    )
    if (
        not found
        and where.prefix
        and not run_blocking("known", lambda: known_run(mailbox, where.prefix))
    ):
        raise ConfigurationError(f"no run {where.prefix[:-1]} in {where.shown}")
    return found


def _list(where: _Run, *, json_out: bool) -> int:
    """Print the questions waiting; 0 when one waits for an answer, else 1."""
    from lyra.delegation._internal import printable
    from lyra.durable._internal import dbos_client

    with dbos_client(where.url) as mailbox:
        found = _waiting(where, mailbox)
    if json_out:
        _stdout.write(json.dumps([_fields(asked) for asked in found], indent=2, ensure_ascii=False))
    elif found:
        rows = [("TASK", "WAITS UNTIL", "QUESTION")]
        for asked in found:
            until = _time(asked.until) + (" (answered)" if asked.answered else "")
            rows.append((_name(asked), until, printable(" ".join(asked.question.split()))))
        widths = [max(len(row[i]) for row in rows) for i in range(2)]
        for row in rows:
            _stdout.write(f"{row[0].ljust(widths[0])}  {row[1].ljust(widths[1])}  {row[2]}")
    open_ones = [asked for asked in found if not asked.answered]
    if not open_ones:
        answered = f" ({len(found)} answered, waiting for their run)" if found else ""
        print(
            f"lyra answer: no question waits for an answer in {where.shown}{answered}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if not json_out:
        print(f'answer one with: lyra answer {where.shown} TASK "ANSWER"', file=sys.stderr)
    return EXIT_OK


def _answer(where: _Run, task: str, text: str, *, json_out: bool) -> int:
    """Answer the one question ``task`` waits on."""
    from lyra._sync import run_blocking
    from lyra.durable._internal import answer_question, dbos_client

    with dbos_client(where.url) as mailbox:
        asked = _one(where, task, _waiting(where, mailbox), mailbox)
        run_blocking("answer", lambda: answer_question(mailbox, asked, text))
    if json_out:
        _stdout.write(json.dumps({**_fields(asked), "answer": text}, indent=2, ensure_ascii=False))
    else:
        _stdout.write(f"answered {_name(asked)}")
    print(
        f"lyra answer: {_name(asked)} takes the answer at once if its run is running; "
        f"if it was stopped: {where.resume}",
        file=sys.stderr,
    )
    return EXIT_OK


def _one(where: _Run, task: str, found: list[WaitingQuestion], mailbox: Any) -> WaitingQuestion:
    """The question ``task`` waits on; a usage error saying why there is none."""
    named = [asked for asked in found if asked.named(task)]
    if len(named) > 1:
        ids = ", ".join(asked.workflow_id for asked in named)
        raise ConfigurationError(
            f"{task} names {len(named)} tasks waiting for an answer in {where.shown}; name one "
            f"by its workflow ID: {ids}"
        )
    if named and named[0].answered:
        raise ConfigurationError(
            f"{task}'s question is answered already; the task takes that answer when it runs "
            f"(if its run was stopped: {where.resume})"
        )
    if named:
        return named[0]
    if _known(where, task, mailbox):
        raise ConfigurationError(
            f"{task} waits for no answer: it asked nothing, its question was answered, its "
            "wait ended, or it finished"
        )
    waiting = ", ".join(_name(asked) for asked in found if not asked.answered)
    these = f"; these wait for one: {waiting}" if waiting else "; no task waits for one"
    raise ConfigurationError(
        f"{where.shown} has no task {task!r} (a task is named by its subject, workflow ID or "
        f"MCP delegation id){these}"
    )


def _known(where: _Run, task: str, mailbox: Any) -> bool:
    """True when a task of the run has that name (its subject is read from its
    workflow ID, so a subject lyra had to rename for the ID is not found here)."""
    from lyra._sync import run_blocking
    from lyra.supervisor import file_stem

    listed = run_blocking(
        "list_workflows",
        lambda: mailbox.list_workflows_async(
            workflow_id_prefix=where.prefix, load_input=False, load_output=False
        ),
    )
    for status in listed:
        parts = status.workflow_id.split("/")
        if task in (status.workflow_id, parts[1] if len(parts) > 2 else None):
            return True
        if parts[-1].partition("-")[2] == file_stem(task):
            return True
    return False


def _name(asked: WaitingQuestion) -> str:
    """How a task is named to a user: its subject, else (a ``lyra mcp`` delegation) its
    delegation id, else its workflow ID."""
    from lyra.detached._internal import RUN_ID

    detached = asked.run_id == RUN_ID and asked.call
    return asked.subject or (asked.call if detached else asked.workflow_id)


def _fields(asked: WaitingQuestion) -> dict[str, Any]:
    return {
        "task": _name(asked),
        "subject": asked.subject,
        "workflow_id": asked.workflow_id,
        "question": asked.question,
        "waits_until": None
        if asked.until is None
        else datetime.fromtimestamp(asked.until, UTC).isoformat(timespec="seconds"),
        "answered": asked.answered,
    }


def _time(moment: float | None) -> str:
    if moment is None:
        return "-"
    return datetime.fromtimestamp(moment).astimezone().strftime("%Y-%m-%d %H:%M:%S")
