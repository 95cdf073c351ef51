"""``lyra``: delegate, analyze proteins, parse reports, read event logs.

Data goes to stdout, progress and logs to stderr. Exit status: 0 when
everything completed, 1 when something failed, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence

from lyra.cli import (
    _a2a_command,
    _analyze_command,
    _answer_command,
    _delegate_command,
    _logs_command,
    _mcp_command,
    _report_command,
    _stdout,
    _worker_command,
)
from lyra.cli._options import (
    EXIT_OK,
    EXIT_UNWRITTEN,
    EXIT_USAGE,
)
from lyra.cli._signals import exit_interrupted, interrupt
from lyra.errors import ConfigurationError

_COMMANDS = (
    _a2a_command,
    _analyze_command,
    _answer_command,
    _delegate_command,
    _logs_command,
    _mcp_command,
    _report_command,
    _worker_command,
)

_EPILOG = """\
examples:
  lyra analyze P04637 XXXXX Q8I3H7          analyse three proteins offline
  lyra analyze P04637 --json                the final output as JSON
  lyra delegate "Analyze P04637" --child lyra.proteins:ProteinChild
  lyra report parse transcript.txt          every report in a file, as JSON
  lyra logs stats runs/*/events.jsonl       failure statistics
  lyra answer runs/triage                   questions a durable run's children wait on

exit status: 0 all completed, 1 some failed, 2 usage error, 3 no worker took the
             queued run (analyze --database-url), 4 finished but some files could
             not be written (disk full), 130 interrupted
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="lyra",
        description="Delegate work to child agents under deadlines; classify and "
        "recover from their failures.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"lyra {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in _COMMANDS:
        command.register(commands)
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    _listed_after_options(parser, args, rest)
    _import_from_the_current_directory()
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, interrupt) if main_thread else None
    try:
        return _run(args)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


_LISTS = ("ids", "files")
"""The commands' lists of positional arguments (``analyze``'s IDs, ``logs``' and
``report parse``'s files)."""


def _listed_after_options(
    parser: argparse.ArgumentParser, args: argparse.Namespace, rest: list[str]
) -> None:
    """Add to a command's list what followed one of its options (``lyra analyze P04637
    --timeout 60 Q8I3H7``): argparse reads a list of positional arguments in one place
    and leaves the rest unrecognised. Anything else left over is a usage error."""
    dashed = rest[:1] == ["--"]  # what follows a `--` is the list's, whatever it looks like
    rest = rest[1:] if dashed else rest
    if not rest:
        return
    name = next((name for name in _LISTS if isinstance(getattr(args, name, None), list)), None)
    options = not dashed and any(arg.startswith("-") and arg != "-" for arg in rest)
    if name is None or options:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    setattr(args, name, [*getattr(args, name), *rest])


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command; lyra's own errors become messages and exit codes."""
    try:
        with _stdout.for_command(args.command):
            status: int = args.run(args)
    except ConfigurationError as exc:
        print(f"lyra: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `lyra … | head` closed the pipe: not an error
        sys.stderr.close()
        return EXIT_OK
    except OSError as exc:  # stdout itself cannot be written (a full disk)
        if exc.filename is not None:
            raise  # a file of lyra's: that is a bug to see, not an output problem
        print(f"lyra: could not write the output: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_UNWRITTEN
    except KeyboardInterrupt:  # Ctrl+C: stop at once, without a traceback
        exit_interrupted("lyra: interrupted")
    return status


def _import_from_the_current_directory() -> None:
    """``--child mychild:agent`` and ``LYRA_CHILD`` find ``mychild.py`` in the current
    directory first, as ``python -m`` does (the ``lyra`` script's own folder is the
    first place Python looks otherwise)."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def _version() -> str:
    from lyra import __version__

    return __version__
