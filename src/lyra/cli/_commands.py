"""The subcommands: each registers its parser and its ``run``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lyra.cli import _logging

Subparsers = Any  # argparse's _SubParsersAction is private
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def positive_float(text: str) -> float:
    """An argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum``."""

    def convert(text: str) -> int:
        if not text.isdigit() or int(text) < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number ≥ {minimum}: {text!r}")
        return int(text)

    return convert


def read_text(path: str) -> str:
    """A file's text, or standard input for ``-``; a clear error when unreadable."""
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SystemExit(f"lyra: cannot read {path}: {exc.strerror or exc}") from None


# -- lyra delegate -------------------------------------------------------------


def _register_delegate(commands: Subparsers) -> None:
    p = commands.add_parser(
        "delegate",
        help="run one child on a prompt and print its report",
        description="Run one child agent on PROMPT under a deadline and print its output "
        "or failure report (both end in a <task_metadata> block). The child is the "
        "configured default: Anthropic when ANTHROPIC_API_KEY is set, otherwise the "
        "offline protein child (set LYRA_CHILD to choose).",
    )
    p.add_argument("prompt", help="the task for the child")
    p.add_argument("--timeout", type=positive_float, default=300.0, help="seconds (default 300)")
    p.add_argument("--subject", help="what the task is about (shown in the report)")
    p.add_argument("--json", action="store_true", help="print the parsed report as JSON")
    p.add_argument("--events", type=argparse.FileType("a"), help="append JSON events here")
    p.add_argument("-v", "--verbose", action="store_true", help="events to stderr")
    p.set_defaults(run=_delegate)


def _delegate(args: argparse.Namespace) -> int:
    from lyra._sync import run_blocking
    from lyra.delegation import TaskReport
    from lyra.supervisor import Supervisor

    _logging.configure(files=[args.events] if args.events else [], verbose=args.verbose)

    async def go() -> Any:
        return await Supervisor().delegate(args.prompt, timeout=args.timeout, subject=args.subject)

    result = run_blocking("Supervisor().delegate", go)
    if args.json:
        report = TaskReport.of(
            output=result.output,
            failure=result.failure,
            attempt=result.attempt,
            subject=result.subject,
            session_id=result.session_id,
            duration=result.duration,
        )
        print(json.dumps({**report.model_dump(mode="json"), "report": result.report}, indent=2))
    else:
        print(result.report)
    return EXIT_OK if result.ok else EXIT_FAILED


# -- lyra report parse -----------------------------------------------------------

REPORT_FIELDS = (
    "status",
    "session_id",
    "category",
    "retryable",
    "attempt",
    "message",
    "completed_steps",
    "files_modified",
    "blocked_on",
    "suggested_actions",
)


def _register_report(commands: Subparsers) -> None:
    p = commands.add_parser("report", help="read lyra reports back")
    sub = p.add_subparsers(dest="report_command", metavar="ACTION", required=True)
    parse = sub.add_parser(
        "parse",
        help="print every report found in FILE as JSON",
        description="Find every lyra report in each FILE (a report, a transcript, a log; - "
        "for standard input) and print one JSON list, one object per report, in order. "
        "Reports without a metadata block (as in the recovery guide) are found by their "
        "first line.",
    )
    parse.add_argument("files", nargs="+", metavar="FILE", help="files to read; - for stdin")
    parse.add_argument("--all-fields", action="store_true", help="include every parsed field")
    parse.set_defaults(run=_report_parse)


def _report_parse(args: argparse.Namespace) -> int:
    from lyra.delegation import find_reports

    reports = [
        report.model_dump(mode="json")
        for path in args.files
        for report in find_reports(read_text(path))
    ]
    if not args.all_fields:
        reports = [{k: r[k] for k in REPORT_FIELDS} for r in reports]
    print(json.dumps(reports, indent=2, ensure_ascii=False))
    if not reports:
        print(f"lyra: no reports found in {', '.join(args.files)}", file=sys.stderr)
    return EXIT_OK


def _registry() -> list[Callable[[Subparsers], None]]:
    from lyra.cli import _analyze_command, _logs_command, _worker_command

    return [
        _analyze_command.register,
        _register_delegate,
        _logs_command.register,
        _register_report,
        _worker_command.register,
    ]
