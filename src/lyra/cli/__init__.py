"""The ``lyra`` command line."""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]

EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Everything, even the imports, runs inside this function, so that Ctrl+C at any
    moment -- start-up included -- ends the command with a line, not a traceback.
    """
    try:
        from lyra.cli._main import run

        return run(argv)
    except KeyboardInterrupt:
        print("lyra: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
