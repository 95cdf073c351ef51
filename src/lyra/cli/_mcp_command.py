"""``lyra mcp``: serve lyra to a parent model (the Model Context Protocol), over stdio
or Streamable HTTP."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Awaitable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from lyra._claims import claim
from lyra.cli import _logging, _stdout
from lyra.cli._options import (
    EXIT_OK,
    Subparsers,
    add_child_option,
    add_event_options,
    port_number,
    positive_float,
)
from lyra.cli._signals import interrupt
from lyra.errors import ConfigurationError

DEFAULT_STATE_DIR = Path.home() / ".lyra" / "mcp"

_DESCRIPTION = """\
Serve lyra as an MCP server, for an MCP client (Claude Desktop, an IDE, an
agent framework) to start (stdio, the default) or reach (--http). Its tools:

  delegate_task      runs the child once and returns the report a script gets,
                     as text and as structured fields, a failure included; sends
                     progress notifications while it runs when the client asks
  start_delegation   starts the child in the background and returns an id at once
  delegation_status  state, steps so far, spend, time left
  delegation_result  the report (waits up to `wait` seconds for it)
  answer_delegation  answers the question its child waits on (ctx.ask)
  cancel_delegation, list_delegations
  parse_report       the fields of a report text

A child's question goes to the client as an elicitation where the client
takes one (protocol 2025-11-25 and before); otherwise delegate_task's report
carries it (missing_context / input_required), and a detached delegation
waits for answer_delegation (with --durable or --database-url, lyra answer
answers it too, even while this server is down).

Detached delegations live in memory, as long as the server; with --durable
(a SQLite database in --state-dir) or --database-url (PostgreSQL, children run
by `lyra worker`) they survive a restart, and a finished child is never run
again. The child is --child, else LYRA_CHILD, else the Anthropic child when
ANTHROPIC_API_KEY is set; with none, lyra mcp stops at once and says so.

--http serves Streamable HTTP at http://HOST:PORT/mcp, on 127.0.0.1 unless
--host says otherwise, with DNS-rebinding protection on (the Host header must
name this server: loopback names, --host, --allow-host). With LYRA_MCP_TOKEN
set, every request needs `Authorization: Bearer <token>`; a --host other
machines can reach is refused without it. The URL is printed on stderr once
the server listens.

stdout carries the protocol only (stdio) or nothing (HTTP): events go to
--events FILE (or stderr with -v). Needs the mcp extra: pip install -e '.[mcp]' in a lyra
checkout, or pip install 'mcp>=2.3,<3' (and the durable extra for --durable /
--database-url).
"""


@dataclass(frozen=True)
class McpRequest:
    """What ``lyra mcp`` was asked to serve, and how."""

    http: bool
    host: str
    port: int
    allowed_hosts: tuple[str, ...]
    durable: bool
    state_dir: Path
    database_url: str | None
    keep_results: float
    progress_every: float

    @classmethod
    def of(cls, args: argparse.Namespace) -> McpRequest:
        """The request, or a clear error for options that do not go together."""
        if not args.http and (args.host or args.port is not None or args.allow_host):
            raise ConfigurationError("--host, --port and --allow-host need --http")
        if args.state_dir and not args.durable:
            raise ConfigurationError("--state-dir needs --durable")
        if args.durable and args.database_url:
            raise ConfigurationError(
                "--durable keeps delegations in a SQLite file here; --database-url in "
                "PostgreSQL: give one of them"
            )
        return cls(
            http=args.http,
            host=args.host or "127.0.0.1",
            port=8000 if args.port is None else args.port,
            allowed_hosts=tuple(args.allow_host),
            durable=args.durable,
            state_dir=Path(args.state_dir) if args.state_dir else DEFAULT_STATE_DIR,
            database_url=args.database_url,
            keep_results=args.keep_results,
            progress_every=args.progress_every,
        )


def register(commands: Subparsers) -> None:
    """Add ``lyra mcp`` to the subcommands."""
    p = commands.add_parser(
        "mcp",
        help="serve delegate_task, detached delegations and parse_report to MCP clients",
        description=_DESCRIPTION,
        epilog="examples:\n"
        "  lyra mcp --child lyra.proteins:ProteinChild\n"
        "  ANTHROPIC_API_KEY=… lyra mcp --events ~/lyra-mcp.jsonl --durable\n"
        "  lyra mcp --child mypkg.agents:Triager --http --port 8765\n"
        "  LYRA_MCP_TOKEN=… lyra mcp --http --host 0.0.0.0 --allow-host lyra.internal\n\n"
        "exit status: 0 when the client hangs up (stdio; the process ends at once, even "
        "while a tool\nabandoned at its deadline still blocks a thread), 2 usage error (no "
        "child, no extra,\nno token for a non-loopback --host, a port in use, a state "
        "directory another server\nholds), 130 interrupted (Ctrl+C, SIGTERM; with --http the "
        "server stops gracefully\nand exits 0)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_child_option(p)
    http = p.add_argument_group("Streamable HTTP")
    http.add_argument("--http", action="store_true", help="serve Streamable HTTP, not stdio")
    http.add_argument("--host", metavar="HOST", help="address to listen on (default 127.0.0.1)")
    http.add_argument(
        "--port", type=port_number, metavar="PORT", help="default 8000; 0: any free port"
    )
    http.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another name clients use to reach the server (its Host header; repeatable)",
    )
    detached = p.add_argument_group("detached delegations")
    detached.add_argument(
        "--durable",
        action="store_true",
        help="keep them in a SQLite database in --state-dir: a restart loses nothing",
    )
    detached.add_argument("--state-dir", metavar="DIR", help="with --durable (default ~/.lyra/mcp)")
    detached.add_argument(
        "--database-url",
        metavar="URL",
        help="postgresql://… : keep them in PostgreSQL; `lyra worker` processes run the children",
    )
    detached.add_argument(
        "--keep-results",
        type=positive_float,
        default=3600.0,
        metavar="S",
        help="seconds a finished delegation stays readable (default 3600)",
    )
    p.add_argument(
        "--progress-every",
        type=positive_float,
        default=1.0,
        metavar="S",
        help="seconds between progress notifications at most (default 1; one goes out at "
        "least every 3 S while a child runs)",
    )
    add_event_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check the extra, resolve the child (a clear error now rather than at the
    first call), then serve."""
    from lyra._sync import run_blocking
    from lyra.children import default_child
    from lyra.mcp import serve, serve_http  # first: without the extra, nothing else can help

    request = McpRequest.of(args)
    with _stdout.data_stdout():  # a child module that prints as it loads: onto stderr
        child = args.child.resolve() if args.child else default_child()

    with ExitStack() as stack:
        stack.enter_context(_logging.serving_events("lyra mcp", args.events, verbose=args.verbose))
        delegations = _delegations(request, args, child, stack)
        if request.http:
            token = _token()

            def ready(url: str) -> None:
                print(f"lyra mcp: serving MCP (Streamable HTTP) at {url}", file=sys.stderr)
                sys.stderr.flush()

            run_blocking(
                "serve_http",
                lambda: _until_signalled(
                    serve_http(
                        child,
                        host=request.host,
                        port=request.port,
                        token=token,
                        allowed_hosts=request.allowed_hosts,
                        delegations=delegations,
                        progress_every=request.progress_every,
                        on_ready=ready,
                    )
                ),
            )
            return EXIT_OK
        try:
            with _ctrl_c_stops():
                run_blocking(
                    "serve",
                    lambda: serve(
                        child, delegations=delegations, progress_every=request.progress_every
                    ),
                )
        except* BrokenPipeError:  # the client closed its end of our stdout
            print("lyra mcp: the client closed the connection; stopping", file=sys.stderr)
    return EXIT_OK


@contextmanager
def _ctrl_c_stops() -> Iterator[None]:
    """Ctrl+C stops the stdio server at once, as SIGTERM does: asyncio's own Ctrl+C
    only cancels the server, which then waits on the thread reading stdin, until the
    client closes it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


async def _until_signalled(serving: Awaitable[None]) -> None:
    """Serve until SIGINT or SIGTERM, then stop the server gracefully; the server's
    own error (a port in use) as it raised it."""

    async def stop_on_signal(group: anyio.abc.TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                print(f"lyra mcp: {signal.Signals(signum).name}: stopping", file=sys.stderr)
                group.cancel_scope.cancel()
                return

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(stop_on_signal, group)
            await serving
            group.cancel_scope.cancel()
    except BaseExceptionGroup as failed:
        if len(failed.exceptions) == 1:
            raise failed.exceptions[0] from None
        raise


def _token() -> str | None:
    from lyra.settings import settings

    secret = settings().mcp_token
    return secret.get_secret_value() if secret is not None else None


def _delegations(
    request: McpRequest, args: argparse.Namespace, child: Any, stack: ExitStack
) -> Any:
    """The detached delegations' store: in memory, or durable (its state directory
    held by this process alone, for as long as it serves)."""
    from lyra.detached import Delegations, DurableRunner

    if not (request.durable or request.database_url):
        return Delegations(child, keep_for=request.keep_results)
    from lyra.durable._internal import require_durable

    require_durable()
    ref = _child_ref(args)
    if request.database_url:
        from lyra.durable._internal import check_reachable, postgres_url

        url = postgres_url(request.database_url)
        check_reachable(url)
        runner = DurableRunner.queue(url, ref, event_log=args.events)
    else:
        stack.enter_context(_hold(request.state_dir))
        runner = DurableRunner.embedded(request.state_dir, ref, event_log=args.events)
    return Delegations(runner=runner, keep_for=request.keep_results)


def _child_ref(args: argparse.Namespace) -> Any:
    """The child by name, as a durable workflow records it."""
    from lyra import ChildRef
    from lyra.settings import settings

    if args.child is not None:
        return args.child
    config = settings()
    if config.child:
        return ChildRef(target=config.child)
    return ChildRef(target="lyra.children:AnthropicChild")


@contextmanager
def _hold(folder: Path) -> Iterator[None]:
    """This process's claim on a state directory, while it serves (see ``_claims``)."""
    busy = (
        f"another lyra mcp serves the state directory {folder}; give this one its own --state-dir"
    )
    with claim(folder, "lyra-mcp.lock", what="the state directory", busy=busy):
        yield
