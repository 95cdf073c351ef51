"""``lyra mcp``: lyra as an MCP server, so that a parent model can delegate.

Its tools: ``delegate_task`` (prompt, timeout, idle_timeout, budget) runs the
configured child once and returns the report a script gets (as text) with its
fields (as structured content), sending progress notifications while it runs
when the client asks for them; ``parse_report`` (report text in, its fields
out); and the detached delegations, ``start_delegation`` (an id at once),
``delegation_status``, ``delegation_result`` (may wait), ``cancel_delegation``,
``list_delegations`` and ``answer_delegation``, on a
:class:`lyra.detached.Delegations` store. A child's question (``ctx.ask``) goes
to the client as an elicitation where it can take one. A child's failure is a
normal result carrying the failure report; only bad arguments are tool errors.
Served over stdio (:func:`serve`) or Streamable HTTP (:func:`serve_http`).
Needs the ``mcp`` extra (the official ``mcp`` SDK).
"""

from lyra._extras import missing_extra

try:  # first: every module here needs the SDK (and a clear word when it is missing)
    import mcp_types
    import uvicorn
    from mcp.server import mcpserver
except ModuleNotFoundError as missing:
    if (missing.name or "").partition(".")[0] not in ("mcp", "mcp_types", "uvicorn"):
        raise
    raise missing_extra("the MCP server", "mcp", "the MCP SDK") from None
del mcp_types, mcpserver, uvicorn

from lyra.mcp._http import serve_http  # noqa: E402
from lyra.mcp._server import INSTRUCTIONS, build_server, serve  # noqa: E402

__all__ = ["INSTRUCTIONS", "build_server", "serve", "serve_http"]
