"""``lyra a2a``: serve a child as an A2A agent over HTTP (the Agent2Agent protocol)."""

from __future__ import annotations

import argparse
import sys

from lyra.cli import _logging
from lyra.cli._options import (
    EXIT_INTERRUPTED,
    Subparsers,
    add_child_option,
    add_event_options,
    add_limit_options,
    add_retries_option,
    budget_of,
    port_number,
    positive_float,
)

_DESCRIPTION = """\
Serve a child as an A2A agent, for another agent (or a script with the A2A SDK)
to delegate to. Each task runs the child under the limits below, as lyra
delegate does: its steps arrive as working updates, its output as an artifact,
a failure as the classified report (text, and its fields as a data part);
a question of the child (ctx.ask) is input-required while the child waits, and
the next message is its answer (missing_context too: the task runs again with
it), invalid_task rejected, a 401/403 auth-required; cancelling the task stops
the child. The
agent card is at URL/.well-known/agent-card.json. The child is --child, else
LYRA_CHILD, else the Anthropic child when ANTHROPIC_API_KEY is set.

Loopback only by default. Another address needs a bearer token in LYRA_A2A_TOKEN
(every request but the agent card must then carry it), and every address
(0.0.0.0) needs --url, where clients reach the server. There is no TLS: put a
reverse proxy in front for that. Needs the a2a extra: pip install -e '.[a2a]' in a lyra
checkout.
"""


def register(commands: Subparsers) -> None:
    """Add ``lyra a2a`` to the subcommands."""
    p = commands.add_parser(
        "a2a",
        help="serve a child to other agents over A2A (HTTP)",
        description=_DESCRIPTION,
        epilog="examples:\n"
        "  lyra a2a --child lyra.proteins:ProteinChild --timeout 120\n"
        "  LYRA_A2A_TOKEN=… lyra a2a --host 0.0.0.0 --url https://agents.example/lyra/\n\n"
        "exit status: 130 stopped by Ctrl+C or SIGTERM (after a graceful shutdown: the\n"
        "running children are stopped), 2 usage error (no child, no extra, no token for a\n"
        "non-loopback address)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_child_option(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument(
        "--port",
        type=port_number,
        default=9999,
        help="port to bind (default 9999; 0: any free port)",
    )
    p.add_argument(
        "--url",
        help="the URL clients reach this server at, stated in the agent card "
        "(default http://HOST:PORT/)",
    )
    p.add_argument("--name", default="lyra", help="the agent's name in its card (default lyra)")
    p.add_argument(
        "--timeout", type=positive_float, default=300.0, help="seconds per task (default 300)"
    )
    add_limit_options(
        p,
        idle="seconds without progress before a task's child is stopped (default: none)",
        budget="for each task and everything it delegates",
    )
    add_retries_option(p)
    add_event_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check the extra, resolve the child and the token (clear errors now, not at the
    first task), then serve until stopped."""
    from lyra._sync import run_blocking
    from lyra.a2a import serve, served_url  # first: without the extra, nothing helps
    from lyra.children import default_child
    from lyra.delegation import Limits
    from lyra.settings import settings

    child = args.child.resolve() if args.child else default_child()
    secret = settings().a2a_token
    token = secret.get_secret_value() if secret is not None else None
    served_url(args.host, args.port, url=args.url, token=token)  # its refusals first
    limits = Limits(timeout=args.timeout, idle_timeout=args.idle_timeout, budget=budget_of(args))
    with _logging.serving_events("lyra a2a", args.events, verbose=args.verbose):
        run_blocking(
            "serve",
            lambda: serve(
                child,
                host=args.host,
                port=args.port,
                limits=limits,
                retries=args.retries,
                url=args.url,
                token=token,
                name=args.name,
                on_listening=_say_listening,
            ),
        )
    return EXIT_INTERRUPTED  # serving ends only when a signal stops it


def _say_listening(url: str) -> None:
    print(f"lyra a2a: serving at {url} (agent card: {url.rstrip('/')}/.well-known/"
          "agent-card.json; Ctrl+C stops)", file=sys.stderr)  # fmt: skip
