"""``lyra report parse``: every report in files or a transcript, as JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from lyra.cli import _stdout
from lyra.cli._options import EXIT_FAILED, EXIT_OK, Subparsers, read_text
from lyra.errors import ConfigurationError

REPORT_FIELDS = (
    "status",
    "session_id",
    "subject",
    "category",
    "retryable",
    "attempt",
    "message",
    "output",
    "completed_steps",
    "files_modified",
    "blocked_on",
    "suggested_actions",
)


def register(commands: Subparsers) -> None:
    """Add ``lyra report`` to the subcommands."""
    p = commands.add_parser(
        "report",
        help="read lyra reports back",
        description="Read lyra reports back from any text (a report, a transcript, a log, "
        "a run directory): 'lyra report parse FILE' prints them as JSON.",
    )
    sub = p.add_subparsers(dest="report_command", metavar="ACTION", required=True)
    parse = sub.add_parser(
        "parse",
        help="print every report found in FILE as JSON",
        description="Find every lyra report in each FILE (a report, a transcript, a log; a "
        "folder for every file in it, such as a run directory; - for standard input) and "
        "print one JSON list, one object per report, in order. Reports without a metadata "
        "block (as in the recovery guide) are found by their first line. A completed "
        "report's output runs from the end of the report before it (or the start of the "
        "file) to its metadata; it is null for the first of several reports (a transcript), "
        "where lyra cannot tell where the output began.",
        epilog="exit status: 0 reports found, 1 none found (the list is empty), 2 usage error "
        "(a file missing or unreadable), 4 the output could not be written",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parse.add_argument(
        "files", nargs="+", metavar="FILE", help="files or folders to read; - for stdin"
    )
    parse.add_argument(
        "--all-fields",
        action="store_true",
        help=f"include every parsed field; without it each object holds {', '.join(REPORT_FIELDS)} "
        "(not error_type, retry_after, question, duration, usage, failed_delegations, …)",
    )
    parse.set_defaults(run=_report_parse)


def _report_parse(args: argparse.Namespace) -> int:
    from lyra.delegation import find_reports

    reports = [
        report.model_dump(mode="json")
        for path, named in _files(args.files)
        for report in find_reports(_read(path, named))
    ]
    if not args.all_fields:
        reports = [{k: r[k] for k in REPORT_FIELDS} for r in reports]
    _stdout.write(json.dumps(reports, indent=2, ensure_ascii=False))
    if not reports:
        print(f"lyra: no reports found in {', '.join(args.files)}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _files(paths: list[str]) -> list[tuple[str, bool]]:
    """The files named, a folder's files (all of them, in order) in its place; each
    with whether it was named (rather than found in a folder)."""
    found: list[tuple[str, bool]] = []
    for path in paths:
        folder = Path(path)
        if path != "-" and folder.is_dir():
            found += sorted((str(p), False) for p in folder.rglob("*") if p.is_file())
        else:
            found.append((path, True))
    return found


def _read(path: str, named: bool) -> str:
    """A file's text; a file found in a folder that vanished before it was read (a run
    still writing) is skipped with a note, where a named one is an error."""
    try:
        return read_text(path)
    except ConfigurationError:
        if named or os.path.lexists(path):
            raise
    print(f"lyra report parse: {path} vanished while reading; skipped", file=sys.stderr)
    return ""
