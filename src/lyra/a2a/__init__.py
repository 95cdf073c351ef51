"""``lyra a2a``: lyra as an A2A agent (the Agent2Agent protocol), so that another
agent (or a script with the A2A SDK) can delegate to it.

A task is a delegation of the served child under the server's limits: its
steps are ``working`` updates, a success is ``completed`` with the output as an
artifact, a failure is ``failed`` with the report text and its fields as a data
part; ``missing_context`` is ``input-required`` (the next message answers the
question and resumes the task), ``invalid_task`` is ``rejected``, a 401/403 is
``auth-required``; ``tasks/cancel`` stops the child. A child that asks
(``ctx.ask``) waits, its task ``input-required``, and the next message is the
answer ``ctx.ask`` returns. Status updates carry the task's usage (see
:data:`lyra.children.a2a.USAGE_EXTENSION`), so a lyra parent
(:class:`lyra.children.a2a.A2AChild`) holds the server to its own budget.
Limits are :class:`lyra.Limits`.

Needs the ``a2a`` extra (the official ``a2a-sdk``, with its HTTP
server, and uvicorn).
"""

from lyra.a2a._app import (
    CARD_PATH,
    DEFAULT_HOST,
    DEFAULT_PORT,
    agent_card,
    build_app,
    serve,
    served_url,
)

__all__ = [
    "CARD_PATH",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "agent_card",
    "build_app",
    "serve",
    "served_url",
]
