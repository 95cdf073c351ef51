"""The stdio transport, where a line that is no JSON-RPC message gets an answer.

The SDK's ``stdio_server`` hands such a line on as an exception, which its
dispatcher logs and drops: the client that sent it waits for a reply that never
comes. Over HTTP the SDK answers it; here it is answered the same way, as JSON-RPC
2.0 says: ``-32700`` (parse error) for text that is not JSON (or JSON that Python
cannot hold, a lone surrogate escape), ``-32600`` (invalid request) for JSON that
is no message, each with ``"id": null`` (the request's id is not known).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

Incoming = SessionMessage | Exception


@asynccontextmanager
async def answering_stdio() -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[Incoming], MemoryObjectSendStream[SessionMessage]]
]:
    """``stdio_server()``'s streams, with every unparsable line answered, never passed on."""
    async with stdio_server() as (read, write):
        send, receive = anyio.create_memory_object_stream[Incoming]()
        async with anyio.create_task_group() as group:
            group.start_soon(_forward, read, send, write)
            try:
                yield receive, write
            finally:
                group.cancel_scope.cancel()


async def _forward(
    read: MemoryObjectReceiveStream[Incoming],
    to_server: MemoryObjectSendStream[Incoming],
    write: MemoryObjectSendStream[SessionMessage],
) -> None:
    """Messages go on to the server; an unparsable line is answered here."""
    async with to_server:
        async for item in read:
            if isinstance(item, Exception):
                await write.send(SessionMessage(_error_for(item)))
            else:
                await to_server.send(item)


def _error_for(exc: Exception) -> JSONRPCError:
    """The answer to the line ``exc`` (the SDK's reading of it) says is no message."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    unparsed = [error["msg"] for error in errors if error["type"] == "json_invalid"]
    if unparsed or not errors:
        error = ErrorData(code=PARSE_ERROR, message=f"Parse error: {(unparsed or [str(exc)])[0]}")
    else:
        error = ErrorData(
            code=INVALID_REQUEST, message="Invalid request: the line is no JSON-RPC 2.0 message"
        )
    return JSONRPCError(jsonrpc="2.0", id=None, error=error)
