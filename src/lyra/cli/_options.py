"""What every subcommand shares: exit codes and argument types."""

from __future__ import annotations

import argparse
import codecs
import sys
from collections.abc import Callable
from typing import Any

Subparsers = Any  # argparse's _SubParsersAction is private
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_WORKERS, EXIT_UNWRITTEN = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130
"""Exit statuses: 3 is a queued run no worker took up; 4 a run that finished but
could not write all of its files."""


def positive_float(text: str) -> float:
    """An argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def task_text(text: str) -> str:
    """An argparse type: a prompt with something in it (a blank one is no task)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the prompt is empty: give the task as text")
    return text


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum``."""

    def convert(text: str) -> int:
        if not text.isdigit() or int(text) < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number ≥ {minimum}: {text!r}")
        return int(text)

    return convert


def port_number(text: str) -> int:
    """An argparse type: a TCP port to bind, 0 (any free port) to 65535."""
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"must be a port, 0 to 65535: {text!r}")
    return int(text)


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number ≥ 0 (dollars)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number ≥ 0: {text!r}")
    return value


def child_ref(text: str) -> Any:
    """An argparse type: a child by importable name (``module:attribute``)."""
    from pydantic import ValidationError

    from lyra import ChildRef

    try:
        return ChildRef(target=text)
    except ValidationError:
        raise argparse.ArgumentTypeError(
            f"not module:attribute: {text!r} (e.g. lyra.proteins:ProteinChild)"
        ) from None


def add_child_option(p: argparse.ArgumentParser) -> None:
    """``--child MODULE:ATTR``: the child by importable name."""
    p.add_argument(
        "--child",
        type=child_ref,
        metavar="MODULE:ATTR",
        help="the child by importable name (a child, or a class or factory of one)",
    )


def add_retries_option(p: argparse.ArgumentParser) -> None:
    """``--retries N``: recovery attempts after a failure."""
    p.add_argument(
        "--retries",
        type=whole_number(0),
        default=0,
        metavar="N",
        help="recover from a failure with up to N more attempts (default 0)",
    )


def add_event_options(p: argparse.ArgumentParser) -> None:
    """``--events FILE`` and ``-v``: where the JSON events go."""
    p.add_argument("--events", metavar="FILE", help="append JSON events here")
    p.add_argument("-v", "--verbose", action="store_true", help="events to stderr")


def add_limit_options(p: argparse.ArgumentParser, *, idle: str, budget: str) -> None:
    """``--idle-timeout`` and the budget flags (DESIGN §12)."""
    p.add_argument("--idle-timeout", type=positive_float, metavar="S", help=idle)
    p.add_argument(
        "--max-tokens", type=whole_number(0), metavar="N", help=f"token budget, {budget}"
    )
    p.add_argument(
        "--max-cost", type=non_negative_float, metavar="USD", help=f"spend budget, {budget}"
    )
    p.add_argument("--max-turns", type=whole_number(0), metavar="N", help=f"model turns, {budget}")


def budget_of(args: argparse.Namespace) -> Any:
    """The budget the flags ask for, or None."""
    from lyra import Budget

    budget = Budget(
        max_tokens=args.max_tokens, max_cost_usd=args.max_cost, max_turns=args.max_turns
    )
    return None if budget.unlimited else budget


def cannot_read(path: str, exc: OSError) -> int:
    """An input that cannot be read is a usage error: one line on stderr; exit status 2."""
    print(f"lyra: cannot read {path}: {why(exc)}", file=sys.stderr)
    return EXIT_USAGE


def why(exc: OSError) -> str:
    """What went wrong with a file, in words: the system's (a symlink loop is "Too many
    levels of symbolic links"), else the library's (a gzip file that is none)."""
    if exc.strerror:
        return exc.strerror
    if exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    return type(exc).__name__


MAX_TEXT = 100 * 1024 * 1024
"""The most bytes of one input read whole (``lyra report parse``): more is refused,
so an endless input (``/dev/zero``) is an error, not a process the OS kills."""


def read_text(path: str) -> str:
    """A file's text, or standard input for ``-``; a usage error (exit 2, one line)
    when unreadable or larger than :data:`MAX_TEXT`."""
    from lyra.errors import ConfigurationError

    try:
        if path == "-":
            stdin = getattr(sys.stdin, "buffer", None)  # none for a text stream put there
            data = stdin.read(MAX_TEXT + 1) if stdin else sys.stdin.read(MAX_TEXT + 1).encode()
        else:
            with open(path, "rb") as stream:
                data = stream.read(MAX_TEXT + 1)
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {why(exc)}") from None
    if len(data) > MAX_TEXT:
        raise ConfigurationError(
            f"cannot read {path}: more than {MAX_TEXT // 2**20} MiB, which is read whole; "
            "split it (event logs of any size: lyra logs)"
        )
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):  # Notepad's "Unicode"
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")  # a byte order mark is no text
