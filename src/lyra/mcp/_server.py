"""The MCP server: lyra's tools over its public API, built with the official SDK."""

from __future__ import annotations

import secrets
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
    redirect_stdout,
)
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from lyra import Supervisor, TaskReport, __version__, parse_report
from lyra.delegation import Child
from lyra.detached import Delegations, Observed
from lyra.detached._internal import KEY, release
from lyra.errors import ReportParseError
from lyra.mcp._arguments import BudgetLimits, IdleTimeout, Prompt, Timeout
from lyra.mcp._detached import detached_tools
from lyra.mcp._progress import report_progress
from lyra.mcp._questions import elicitor
from lyra.mcp._stdio import answering_stdio
from lyra.mcp._stopping import Calls

PROGRESS_EVERY = 1.0
"""Seconds between two progress notifications at most (see :mod:`lyra.mcp._progress`)."""

INSTRUCTIONS = """\
lyra runs a child agent on a task under a deadline, an idle timeout and a budget, \
and reports back. Call delegate_task with a complete, self-contained prompt; it \
waits for the report (pass a progress token to hear of the child's steps). For a \
long task, or several at once, start_delegation returns an id at once: follow it \
with delegation_status, collect it with delegation_result, stop it with \
cancel_delegation. A report ends in a <task_metadata> block; the structured \
content has the same fields. On failure, read the report before doing anything \
else: the category (timeout, missing_context, tool_error, invalid_task, partial), \
whether a retry may help (retryable), the steps already completed, what the child \
was blocked on and the suggested recovery actions. A non-retryable failure fails \
again the same way: change the task (add the missing context, split it, fix it) \
instead. parse_report reads the fields of a report text you already have."""

_DELEGATE = """\
Run the child agent once on `prompt` and return its output, or its failure \
report, ending in a <task_metadata> block (status, category, retryable, \
attempt, duration, usage). A failure is a normal result, never an error: \
read its category and retryable fields before retrying. If the child asks a \
question and you cannot be asked (elicitation), it ends missing_context with \
the question in the report: delegate again with the answer in the prompt."""

_STOPPED = (
    "lyra mcp is stopping: the child was stopped before it finished, and no report was "
    "made; delegate again once the server is back (a detached delegation with --durable "
    "would go on after a restart)"
)

_PARSE = """\
Read a lyra report (the text delegate_task returned, or one found in a log) \
and return its fields: status, category, retryable, message, completed steps, \
files modified, what it was blocked on, suggested actions, usage."""

DelegateTool = Callable[..., Awaitable[CallToolResult]]
Lifespan = Callable[[MCPServer], AbstractAsyncContextManager[dict[str, Any]]]


def build_server(
    child: Child,
    *,
    delegations: Delegations | None = None,
    progress_every: float = PROGRESS_EVERY,
) -> MCPServer:
    """An MCP server whose tools run ``child``, for any transport the SDK offers
    (``lyra mcp`` serves it over stdio with :func:`serve`, over HTTP with
    :func:`~lyra.mcp.serve_http`).

    ``delegations`` is the store of detached delegations (default: a new one in
    memory, running ``child``); the server's lifespan enters it, so it lives as
    long as the server, not a session. ``progress_every``: seconds between two
    progress notifications at most.
    """
    store = delegations if delegations is not None else Delegations(child)
    return server_for(child, store, progress_every, enter_store=True)


async def serve(
    child: Child,
    *,
    delegations: Delegations | None = None,
    progress_every: float = PROGRESS_EVERY,
) -> None:
    """Serve ``child`` over stdin/stdout until the client hangs up; nothing but the
    protocol is written to stdout."""
    store = delegations if delegations is not None else Delegations(child)
    async with store:  # entered first: a store that cannot start says so before serving
        server = server_for(child, store, progress_every, enter_store=False, quiet_stdout=True)
        # MCPServer.run_stdio_async, on the transport that answers an unparsable line
        lowlevel = server._lowlevel_server
        async with answering_stdio() as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())


@asynccontextmanager
async def _stdout_to_stderr() -> AsyncIterator[None]:
    """While serving, Python's ``sys.stdout`` is stderr. The SDK points fd 1 at
    stderr too, but restores it on exit, when a print still sitting in stdout's
    buffer would be flushed into the protocol stream."""
    sys.stdout.flush()
    with redirect_stdout(sys.stderr):
        yield


def _lifespan(store: Delegations | None, *, quiet_stdout: bool) -> Lifespan:
    """Divert stdout and enter the store (each if asked) for as long as the server
    runs: the SDK enters a server's lifespan once, not per session."""

    @asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[dict[str, Any]]:
        async with AsyncExitStack() as stack:
            if quiet_stdout:
                await stack.enter_async_context(_stdout_to_stderr())
            if store is not None:
                await stack.enter_async_context(store)
            yield {}

    return lifespan


def server_for(
    child: Child,
    store: Delegations,
    progress_every: float,
    *,
    enter_store: bool,
    quiet_stdout: bool = False,
    calls: Calls | None = None,
) -> MCPServer:
    """The server (see :func:`build_server`); its lifespan enters ``store`` when
    ``enter_store``, else the caller runs it. ``calls``: the tool calls in progress,
    for a caller that stops the server to end them with an answer."""
    calls = calls if calls is not None else Calls()
    if not progress_every > 0:
        raise ValueError(f"progress_every must be a positive number, not {progress_every!r}")
    server: MCPServer = MCPServer(
        name="lyra",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        lifespan=_lifespan(store if enter_store else None, quiet_stdout=quiet_stdout),
    )
    observed = Observed(child)
    server.add_tool(
        delegate_tool(observed, progress_every=progress_every, calls=calls),
        name="delegate_task",
        title="Delegate a task to a child agent",
        description=_DELEGATE,
        annotations=ToolAnnotations(read_only_hint=False, open_world_hint=True),
    )
    server.add_tool(
        parse_report_tool,
        name="parse_report",
        title="Parse a lyra report",
        description=_PARSE,
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )
    names = ["delegate_task", "parse_report"]
    for tool in detached_tools(store, progress_every=progress_every, calls=calls):
        server.add_tool(
            tool.fn,
            name=tool.name,
            title=tool.title,
            description=tool.description,
            annotations=tool.annotations,
        )
        names.append(tool.name)
    for name in names:
        _refuse_unknown_arguments(server, name)
    return server


def _refuse_unknown_arguments(server: MCPServer, name: str) -> None:
    """An argument the tool does not take is refused, not ignored (a misspelt
    ``idle_timout`` would otherwise run the child without its limit): the input
    schema says ``additionalProperties: false`` and validation enforces it. The
    SDK offers no public handle on a registered tool, hence its tool manager."""
    tool = server._tool_manager.get_tool(name)
    if tool is None:  # pragma: no cover - registered just above
        raise RuntimeError(f"tool {name} is not registered")
    lenient = tool.fn_metadata.arg_model
    config = {**lenient.model_config, "extra": "forbid"}
    tool.fn_metadata.arg_model = type(lenient.__name__, (lenient,), {"model_config": config})
    tool.parameters["additionalProperties"] = False


def delegate_tool(
    child: Observed, *, progress_every: float = PROGRESS_EVERY, calls: Calls | None = None
) -> DelegateTool:
    """The ``delegate_task`` tool for ``child``: the report text as the content, its
    fields as the structured content, a failure included; progress notifications
    while it runs, when the client asks for them. A server that stops meanwhile
    (``calls``) stops the child, and the call ends with a tool error saying so."""
    calls = calls if calls is not None else Calls()

    async def delegate_task(
        ctx: Context,
        prompt: Prompt,
        timeout: Timeout = 300.0,
        idle_timeout: IdleTimeout = None,
        budget: BudgetLimits = None,
    ) -> Annotated[CallToolResult, TaskReport]:
        key = f"call-{secrets.token_hex(8)}"  # how the progress finds the attempt
        result = None
        with calls.call():
            async with anyio.create_task_group() as progress:
                progress.start_soon(
                    lambda: report_progress(ctx, key, total=timeout, every=progress_every)
                )
                try:
                    supervisor = Supervisor(child, budget=budget, answer=elicitor(ctx))
                    result = await supervisor.delegate(
                        prompt, timeout=timeout, idle_timeout=idle_timeout, context={KEY: key}
                    )
                finally:
                    progress.cancel_scope.cancel()
                    release(key)
        if result is None:  # the stop came first (one after the child finished loses nothing)
            raise ToolError(_STOPPED)
        return CallToolResult(
            content=[TextContent(type="text", text=result.report)],
            structured_content=result.to_report().model_dump(mode="json"),
        )

    return delegate_task


async def parse_report_tool(
    text: Annotated[str, Field(description="Text holding a lyra report.")],
) -> TaskReport:
    """The fields of the last report in ``text``; a text without one is a tool error."""
    try:
        return parse_report(text)
    except ReportParseError as exc:
        raise ToolError(str(exc)) from None
