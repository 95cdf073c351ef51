"""A child's question (``ctx.ask``) put to the MCP client that waits on it, as an
elicitation, where the client can take one.

That is where the client declared the elicitation capability and the session
can carry a request to the client mid-call (protocol 2025-11-25 and before,
over stdio or a stateful HTTP session). Elsewhere -- no capability, or protocol
2026-07-28, where a server sends no requests to the client -- there is no
elicitor: the attempt ends as ``missing_context`` / ``input_required`` with the
question in its report, and a detached delegation's question waits for
``answer_delegation`` instead.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

from lyra import events
from lyra.delegation import Answerer


class Answer(BaseModel):
    """What the client is asked for: one answer in words."""

    answer: str = Field(description="Your answer to the question.")


def elicitor(mcp: Context) -> Answerer | None:
    """Ask the client of this request, or ``None`` where it cannot be asked."""
    capabilities = mcp.client_capabilities
    if capabilities is None or capabilities.elicitation is None:
        return None
    if mcp.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None

    async def ask(question: str) -> str | None:
        try:
            reply = await mcp.elicit(question, Answer)
        except Exception as exc:  # noqa: BLE001 - no answer: the report carries the question
            events.warning(events.ELICITATION_FAILED, question=question, error=type(exc).__name__)
            return None
        return reply.data.answer if reply.action == "accept" else None

    return ask
