"""``lyra mcp``: lyra as a stdio MCP server, so that a parent model can delegate.

Its tools are ``delegate_task`` (prompt, timeout, idle_timeout, budget), which
runs the configured child once and returns the report a script gets (as text)
with its fields (as structured content), and ``parse_report`` (report text in,
its fields out). A child's failure is a normal result carrying the failure
report; only bad arguments are tool errors. Needs the ``mcp`` extra (the
official ``mcp`` SDK).
"""

from lyra.mcp._server import INSTRUCTIONS, build_server, serve

__all__ = ["INSTRUCTIONS", "build_server", "serve"]
