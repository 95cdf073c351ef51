"""``lyra logs stats|report|suggest-timeout``: event logs → statistics, a page, a timeout.

Data goes to stdout, notes to stderr. Exit status: 0 ok, 1 no delegation
found, 2 usage error (bad option, unreadable file), 4 the output could not be
written (a full disk).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lyra.cli import _stdout
from lyra.cli._options import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNWRITTEN,
    EXIT_USAGE,
    Subparsers,
    cannot_read,
)
from lyra.delegation._internal import printable
from lyra.errors import LyraError

if TYPE_CHECKING:  # lyra.logs is imported when a command runs: --help stays fast
    from lyra.logs import FailureStats, ReadStats, TimeoutSuggestion

EXIT_NOTHING = EXIT_FAILED  # no delegation found
GROUPS = ("subject", "category", "error_type")
"""The fields ``--by`` groups by (``lyra.logs.GroupBy``; a test keeps them equal)."""


def _since(text: str) -> datetime:
    """An argparse type for ``--since``."""
    from lyra.logs import parse_since

    try:
        return parse_since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not 0 < value < math.inf:  # NaN fails both; an infinite margin overflows
            raise argparse.ArgumentTypeError(f"must be a positive finite number: {text!r}")
        return value

    return convert


def _add_files(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="event logs (JSON lines, .gz too), run directories (their events.jsonl), "
        "text with raw reports, or - for standard input",
    )


def _add_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--since",
        type=_since,
        metavar="T",
        help="only events at or after T: 2h, 30m, 1d ago, or an ISO date/time (UTC if naive)",
    )
    p.add_argument("--top", type=_positive(int), default=10, help="blocker patterns (default 10)")


def _action(
    sub: Any, name: str, *, help: str, description: str, examples: str, nothing: str
) -> argparse.ArgumentParser:
    """One ``lyra logs`` action, its --help with examples and exit statuses (``nothing``:
    what exit status 1 means for it); its FILE arguments added."""
    action: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help,
        description=description,
        epilog=f"examples:\n{examples}\n\nexit status:\n  0  read and printed\n"
        f"  1  {nothing}\n  2  usage error (a file missing or unreadable, a folder "
        "without an events.jsonl)\n"
        "  4  the output could not be written",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_files(action)
    return action


def register(commands: Subparsers) -> None:
    """Add ``lyra logs`` and its three actions to an argparse subparsers object."""
    p = commands.add_parser(
        "logs",
        help="failure statistics from event logs and reports",
        description="Read lyra event logs (and raw reports in any text) back: failure "
        "statistics, an HTML page with charts, a timeout suggestion.",
    )
    sub = p.add_subparsers(dest="logs_command", metavar="ACTION", required=True)

    stats = _action(
        sub,
        "stats",
        help="failure statistics as a table or JSON",
        description="Count delegations and tasks, their failures by category, the blockers "
        "seen most (as patterns), retries and recoveries, from event logs and from any "
        "text holding raw reports.",
        examples="  lyra logs stats runs/20261127T101500Z-ab12cd\n"
        "  lyra logs stats events.jsonl.gz --since 2h --by subject --json",
        nothing="no delegation found",
    )
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _add_filters(stats)
    stats.add_argument("--by", choices=GROUPS, help="add a breakdown by this field")
    stats.set_defaults(run=_stats)

    report = _action(
        sub,
        "report",
        help="a self-contained HTML page with charts",
        description="Write the statistics of 'lyra logs stats' as one HTML page with charts "
        "(no network needed to view it).",
        examples="  lyra logs report runs/*/ --html failures.html",
        nothing="no delegation found (the page is written all the same)",
    )
    report.add_argument(
        "--html", required=True, metavar="OUT", help="the page to write (- for stdout)"
    )
    report.add_argument("--title", default="lyra failure statistics", help="the page title")
    _add_filters(report)
    report.set_defaults(run=_report)

    suggest = _action(
        sub,
        "suggest-timeout",
        help="a timeout from the durations of completed delegations",
        description=(
            "Suggest a timeout per kind of subject: the durations of completed delegations at\n"
            "a percentile, times a margin, where a kind has enough samples.\n"
            "\n"
            "A subject's kind is the shape of its ID, each capital letter A, small letter a\n"
            "and digit 9 (P04637 and Q15086 are both A99999; A0A0C5B5G6 is A9A9A9A9A9): tasks\n"
            "on IDs of one shape tend to take alike. A kind with too few samples takes the\n"
            "overall suggestion."
        ),
        examples="  lyra logs suggest-timeout runs/*/ --percentile 99 --margin 2",
        nothing="no completed delegation to learn from",
    )
    suggest.add_argument("--json", action="store_true", help="print JSON instead of text")
    suggest.add_argument(
        "--percentile", type=_percentile, default=95.0, help="0 < P ≤ 100 (default 95)"
    )
    suggest.add_argument(
        "--margin", type=_positive(float), default=1.5, help="factor (default 1.5)"
    )
    suggest.add_argument(
        "--min-samples", type=_positive(int), default=20, help="per subject kind (default 20)"
    )
    suggest.set_defaults(run=_suggest)


def _percentile(text: str) -> float:
    value = _positive(float)(text)
    if value > 100:
        raise argparse.ArgumentTypeError(f"a percentile is at most 100, not {text}")
    return value


def _note(text: str) -> None:
    print(f"lyra logs: {text}", file=sys.stderr)


class _Unwritable(LyraError, OSError):
    """stdout could not be written (no file name: lyra's main reports it as output)."""


def _out(text: str, end: str = "\n") -> None:
    """Data to stdout, flushed, so that a failure to write it is told apart from a
    failure to read the input; what the logs hold is untrusted (a subject, a blocker):
    its control characters cannot move the cursor (JSON escapes them anyway)."""
    try:
        _stdout.write(printable(text), end)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise _Unwritable(exc.errno, exc.strerror) from None


def _guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn missing and unreadable files into one line and exit status 2, before any
    output when a file is missing."""

    def guarded(args: argparse.Namespace) -> int:
        for path in args.files:
            if path != "-":
                try:
                    os.stat(path)  # missing, a symlink loop, no permission: said now
                    folder = os.path.isdir(path)
                    if folder:
                        os.listdir(path)  # (a folder we may not read: rglob says nothing)
                except OSError as exc:
                    return cannot_read(path, exc)
                if folder and next(Path(path).rglob("events.jsonl"), None) is None:
                    _note(
                        f"{path} holds no events.jsonl (a folder is read for the event logs "
                        "in it; name other files one by one, or read reports with lyra "
                        "report parse)"
                    )
                    return EXIT_USAGE
        try:
            return run(args)
        except BrokenPipeError:
            raise  # `| head` closed the pipe: the CLI ends quietly
        except _Unwritable:
            raise  # stdout, not the input (a full disk): lyra's main says so, exit 4
        except OSError as exc:  # a directory we may not read, a file that is no gzip
            return cannot_read(exc.filename or "input", exc)

    return guarded


def _reading_notes(read: ReadStats | FailureStats) -> None:
    """What was skipped while reading, and why."""
    if read.malformed_lines:
        _note(f"skipped {read.malformed_lines} malformed line(s)")
    for path in read.torn_files:
        _note(f"skipped a torn last line in {path} (its writer was stopped mid-line)")
    for path in read.truncated_files:
        _note(f"{path} ends early (truncated or damaged): read what it holds")


def _read_notes(stats: FailureStats) -> int:
    """Notes about what was skipped; the exit status for what was found."""
    _reading_notes(stats)
    if stats.duplicates:
        _note(
            f"counted {stats.duplicates} repeated finishing or recovery event(s) once "
            "(a session logged twice, as a resumed run may)"
        )
    if stats.skipped_undated:
        _note(f"--since left out {stats.skipped_undated} record(s) without a timestamp")
    if stats.delegations == 0:
        _note("no delegations found")
        return EXIT_NOTHING
    return EXIT_OK


# -- stats --------------------------------------------------------------------------


@_guarded
def _stats(args: argparse.Namespace) -> int:
    from lyra.logs import collect_stats

    stats = collect_stats(args.files, since=args.since, by=args.by, top=args.top)
    if args.json:
        _out(json.dumps(stats.model_dump(mode="json"), indent=2, ensure_ascii=False))
    elif stats.delegations:  # (else a table of zeros: the note says what was found)
        _out(format_stats(stats))
    return _read_notes(stats)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _rows(head: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Columns: the first left-aligned, the rest right-aligned."""
    cells = [[str(c) for c in head], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    return [
        "  ".join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ).rstrip()
        for row in cells
    ]


def format_stats(stats: FailureStats) -> str:
    """The terminal table of ``lyra logs stats``: attempts, then tasks, then outcomes."""
    finished = stats.completed + stats.failed
    lines = [
        f"{stats.files} file(s), {stats.events} events, {stats.reports} raw reports, "
        f"{stats.malformed_lines} malformed lines",
        "",
        *_rows(
            ["", "attempts"],
            [
                ["delegations", stats.delegations],
                ["completed", stats.completed],
                ["failed", f"{stats.failed} ({stats.failure_rate:.1%} of {finished})"],
                ["retryable", stats.retryable],
                ["cancelled", stats.cancelled],
                ["unfinished", stats.unfinished],
                ["recovery attempts", stats.recovery_attempts],
            ],
        ),
        "",
        *_rows(
            ["", "tasks"],
            [
                ["tasks", stats.tasks],
                ["completed", stats.tasks_completed],
                ["recovered", stats.recovered],
                [
                    "failed",
                    f"{stats.tasks_failed} ({stats.task_failure_rate:.1%} of {stats.tasks})",
                ],
                ["cancelled", stats.tasks_cancelled],
            ],
        ),
        "",
        *_category_rows(stats),
    ]
    if stats.spend:
        lines += ["", *_spend_rows(stats)]
    errors = [[k, n] for k, n in stats.by_error_type.items() if n]
    if errors:
        lines += ["", *_rows(["error type", "failed"], errors)]
    if stats.top_blockers:
        lines += ["", *_blocker_rows(stats.top_blockers, shutil.get_terminal_size().columns)]
    if stats.by is not None:
        lines += ["", *_breakdown_rows(stats)]
    return "\n".join(lines)


def _blocker_rows(blockers: Sequence[tuple[str, int]], columns: int) -> list[str]:
    """The blockers and their counts, each blocker wrapped to fit ``columns`` (its
    further lines indented): a blocker may be 200 characters long."""
    count = max(len("failed"), *(len(str(n)) for _, n in blockers))
    room = max(24, columns - count - 2)
    wrapped = [
        (textwrap.wrap(text, room, subsequent_indent="  ") or [""], n) for text, n in blockers
    ]
    width = max(len("top blockers"), *(len(line) for lines, _ in wrapped for line in lines))
    rows = [f"{'top blockers'.ljust(width)}  {'failed'.rjust(count)}"]
    for lines, n in wrapped:
        rows.append(f"{lines[0].ljust(width)}  {str(n).rjust(count)}")
        rows += lines[1:]
    return rows


def _category_rows(stats: FailureStats) -> list[str]:
    """Per outcome: attempts, their share of the failed ones, tasks that ended so, times."""
    rows: list[list[object]] = []
    for key in ["completed", *stats.by_category]:
        done = key == "completed"
        count = stats.completed if done else stats.by_category[key]
        tasks = stats.tasks_completed if done else stats.tasks_by_category.get(key, 0)
        share = "" if done or not stats.failed else f"{count / stats.failed:.0%}"
        d = stats.durations.get(key)
        p50, p95 = (d.p50, d.p95) if d is not None else (None, None)
        rows.append([key, count, share, tasks, _seconds(p50), _seconds(p95)])
    return _rows(["outcome", "attempts", "share", "tasks", "p50 s", "p95 s"], rows)


def _spend_rows(stats: FailureStats) -> list[str]:
    """What each outcome cost: the failures' share of the spend."""
    rows: list[list[object]] = [
        [key, spent.delegations, spent.tokens, f"${spent.cost_usd:.4f}", spent.turns]
        for key, spent in stats.spend.items()
    ]
    rows.append(["total", "", stats.tokens_used, f"${stats.cost_usd:.4f}", stats.turns])
    return _rows(["spend", "charged", "tokens", "cost", "turns"], rows)


def _breakdown_rows(stats: FailureStats) -> list[str]:
    assert stats.by is not None
    rows = [
        [
            g.key,
            g.delegations,
            g.failed,
            f"{g.failure_rate:.0%}",
            g.retryable,
            _seconds(g.duration_p95),
        ]
        for g in stats.by.groups
    ]
    return _rows([f"by {stats.by.field}", "n", "failed", "rate", "retryable", "p95 s"], rows)


# -- report --html ---------------------------------------------------------------------


@_guarded
def _report(args: argparse.Namespace) -> int:
    from lyra.logs import collect_stats, render_html
    from lyra.supervisor import write_atomic

    stats = collect_stats(args.files, since=args.since, top=args.top)
    page = render_html(stats, title=args.title)
    if args.html in ("-", "/dev/stdout"):  # descriptor 1 is stderr while lyra runs
        _out(page, end="")
    else:
        if not Path(args.html).parent.is_dir():  # a typo'd folder is not made silently
            _note(f"cannot write {args.html}: no such folder")
            return EXIT_USAGE
        try:
            write_atomic(Path(args.html), page)
        except OSError as exc:  # a full disk, no permission: the page is not written
            _note(f"cannot write {args.html}: {exc.strerror or exc}")
            return EXIT_UNWRITTEN
        _note(f"wrote {args.html}")
    return _read_notes(stats)


# -- suggest-timeout -------------------------------------------------------------------


@_guarded
def _suggest(args: argparse.Namespace) -> int:
    from lyra.logs import ReadStats, suggest_from_files

    read = ReadStats()
    result = suggest_from_files(
        args.files,
        percentile_q=args.percentile,
        margin=args.margin,
        min_samples=args.min_samples,
        stats=read,
    )
    _reading_notes(read)
    if args.json:
        _out(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        _out(format_suggestion(result))
    if result.overall.suggested_timeout is None:
        _note(result.note)
    return EXIT_NOTHING if result.overall.samples == 0 else EXIT_OK


def format_suggestion(result: TimeoutSuggestion) -> str:
    """The terminal text of ``lyra logs suggest-timeout``."""
    q = f"p{result.percentile:g}"
    overall = result.overall
    head = (
        f"suggested timeout: {overall.suggested_timeout:g}s "
        f"({q} {_seconds(overall.percentile_value)}s × {result.margin:g}, "
        f"{overall.samples} completed delegations)"
        if overall.suggested_timeout is not None
        else f"no suggestion: {result.note}"
    )
    rows = [
        [
            k.kind,
            k.samples,
            k.timed_out,
            _seconds(k.percentile_value),
            "-" if k.suggested_timeout is None else f"{k.suggested_timeout:g}",
            k.basis,
            " ".join(k.examples),
        ]
        for k in result.kinds
    ]
    lines = [head, ""]
    lines += _rows(["kind", "n", "timed out", f"{q} s", "timeout s", "from", "e.g."], rows)
    if result.timeouts_used:
        used = ", ".join(f"{t}s ×{n}" for t, n in result.timeouts_used.items())
        lines += ["", f"timeouts used: {used}"]
    if result.note != "ok" and overall.suggested_timeout is not None:
        lines += [f"note: {result.note}"]
    return "\n".join(lines)
