"""``lyra mcp``: serve lyra to a parent model over stdio (the Model Context Protocol)."""

from __future__ import annotations

import argparse
import sys

from lyra.cli import _logging
from lyra.cli._options import EXIT_OK, Subparsers, child_ref

_DESCRIPTION = """\
Serve lyra as an MCP server over stdin/stdout, for an MCP client (Claude
Desktop, an IDE, an agent framework) to start. Its tools: delegate_task
(prompt, timeout, idle_timeout, budget) runs the child once and returns the
report a script gets, as text and as structured fields, a failure included;
parse_report returns the fields of a report text. The child is --child, else
LYRA_CHILD, else the Anthropic child when ANTHROPIC_API_KEY is set; with none,
lyra mcp stops at once and says so. stdout carries the protocol only: events
go to --events FILE (or stderr with -v). Needs the mcp extra: pip install -e '.[mcp]'
in a lyra checkout (or pip install 'mcp>=2.3,<3').
"""


def register(commands: Subparsers) -> None:
    """Add ``lyra mcp`` to the subcommands."""
    p = commands.add_parser(
        "mcp",
        help="serve delegate_task and parse_report to MCP clients over stdio",
        description=_DESCRIPTION,
        epilog="examples:\n"
        "  lyra mcp --child lyra.proteins:ProteinChild\n"
        "  ANTHROPIC_API_KEY=… lyra mcp --events ~/lyra-mcp.jsonl\n\n"
        "exit status: 0 when the client hangs up (the process ends at once, even while "
        "a tool\nabandoned at its deadline still blocks a thread), 2 usage error (no "
        "child, no extra)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--child",
        type=child_ref,
        metavar="MODULE:ATTR",
        help="the child by importable name (a child, or a class or factory of one)",
    )
    p.add_argument("--events", metavar="FILE", help="append JSON events here")
    p.add_argument("-v", "--verbose", action="store_true", help="events to stderr")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check the extra, resolve the child (a clear error now rather than at the
    first call), then serve."""
    from lyra._sync import run_blocking
    from lyra.children import default_child
    from lyra.mcp import serve  # first: without the extra, nothing else can help

    child = args.child.resolve() if args.child else default_child()

    with _logging.events_to(args.events, verbose=args.verbose):
        try:
            run_blocking("serve", lambda: serve(child))
        except* BrokenPipeError:  # the client closed its end of our stdout
            print("lyra mcp: the client closed the connection; stopping", file=sys.stderr)
    return EXIT_OK
