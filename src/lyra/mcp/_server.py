"""The MCP server: two tools over lyra's public API, built with the official SDK."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, redirect_stdout
from typing import Annotated, Any

from pydantic import Field

from lyra import Budget, Supervisor, TaskReport, __version__, parse_report
from lyra._extras import missing_extra
from lyra.delegation import Child
from lyra.errors import ReportParseError

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import CallToolResult, TextContent, ToolAnnotations
except ModuleNotFoundError as missing:
    if (missing.name or "").partition(".")[0] not in ("mcp", "mcp_types"):
        raise
    raise missing_extra("the MCP server", "mcp", "the MCP SDK") from None

INSTRUCTIONS = """\
lyra runs a child agent on a task under a deadline, an idle timeout and a budget, \
and reports back. Call delegate_task with a complete, self-contained prompt. \
Its text ends in a <task_metadata> block; its structured content has the same \
fields. On failure, read the report before doing anything else: the category \
(timeout, missing_context, tool_error, invalid_task, partial), whether a retry \
may help (retryable), the steps already completed, what the child was blocked \
on and the suggested recovery actions. A non-retryable failure fails again the \
same way: change the task (add the missing context, split it, fix it) instead. \
parse_report reads the fields of a report text you already have."""

_DELEGATE = """\
Run the child agent once on `prompt` and return its output, or its failure \
report, ending in a <task_metadata> block (status, category, retryable, \
attempt, duration, usage). A failure is a normal result, never an error: \
read its category and retryable fields before retrying."""

_PARSE = """\
Read a lyra report (the text delegate_task returned, or one found in a log) \
and return its fields: status, category, retryable, message, completed steps, \
files modified, what it was blocked on, suggested actions, usage."""

DelegateTool = Callable[..., Awaitable[CallToolResult]]
Lifespan = Callable[[MCPServer], AbstractAsyncContextManager[dict[str, Any]]]


def build_server(child: Child) -> MCPServer:
    """An MCP server whose ``delegate_task`` runs ``child``, for any transport the
    SDK offers (``lyra mcp`` serves it over stdio with :func:`serve`)."""
    return _server(child)


async def serve(child: Child) -> None:
    """Serve ``child`` over stdin/stdout until the client hangs up; nothing but the
    protocol is written to stdout."""
    await _server(child, lifespan=_stdout_to_stderr).run_stdio_async()


@asynccontextmanager
async def _stdout_to_stderr(server: MCPServer) -> AsyncIterator[dict[str, Any]]:
    """While serving, Python's ``sys.stdout`` is stderr. The SDK points fd 1 at
    stderr too, but restores it on exit, when a print still sitting in stdout's
    buffer would be flushed into the protocol stream."""
    sys.stdout.flush()
    with redirect_stdout(sys.stderr):
        yield {}


def _server(child: Child, lifespan: Lifespan | None = None) -> MCPServer:
    server: MCPServer = MCPServer(
        name="lyra",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        lifespan=lifespan,
    )
    server.add_tool(
        delegate_tool(child),
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
    for name in ("delegate_task", "parse_report"):
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


def delegate_tool(child: Child) -> DelegateTool:
    """The ``delegate_task`` tool for ``child``: the report text as the content, its
    fields as the structured content, a failure included."""

    async def delegate_task(
        prompt: Annotated[str, Field(description="The task, complete in itself.")],
        timeout: Annotated[
            float,
            Field(gt=0, allow_inf_nan=False, description="Seconds the child may take in all."),
        ] = 300.0,
        idle_timeout: Annotated[
            float | None,
            Field(
                gt=0,
                allow_inf_nan=False,
                description="Seconds without progress before the child is stopped.",
            ),
        ] = None,
        budget: Annotated[
            Budget | None,
            Field(description="Limits for the child and everything it delegates."),
        ] = None,
    ) -> Annotated[CallToolResult, TaskReport]:
        result = await Supervisor(child, budget=budget).delegate(
            prompt, timeout=timeout, idle_timeout=idle_timeout
        )
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
