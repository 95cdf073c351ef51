"""Progress notifications while a tool call waits on a child.

A client that asked for progress (a ``progressToken``) gets a
``notifications/progress`` when the child completes a step, starts or ends a
tool, or sends a heartbeat -- at most one per ``every`` seconds -- and one at
least every :data:`KEEPALIVE` ticks while the child lives, so that a client
which resets its timeout on progress never gives up on a live child. The
progress value is the seconds elapsed and the total the deadline (each
notification's progress is larger than the last, as the protocol asks); the
message is the child's latest step, or the tool it is in. A wait on a detached
delegation (``total=None``) gives its attempt's own: the seconds since it began,
of its deadline, where the attempt runs in this process (else the seconds of the
wait, without a total).
"""

from __future__ import annotations

import math

import anyio
from mcp.server.mcpserver import Context

from lyra.delegation import ChildContext
from lyra.detached import attempt

KEEPALIVE = 3
"""Ticks without news after which a notification goes out all the same."""


def _news(ctx: ChildContext | None) -> tuple[object, ...]:
    """What changes when the child shows progress (a heartbeat moves
    ``last_progress`` where it is tracked: under an idle timeout)."""
    if ctx is None:
        return ()
    return (ctx.steps_done, ctx.tool_executions, ctx.current_tool, ctx.last_progress)


def _message(ctx: ChildContext | None) -> str:
    if ctx is None:  # not started yet, or running in another process
        return "working"
    if ctx.current_tool is not None:
        return f"running {ctx.current_tool}"
    if ctx.completed_steps:
        return ctx.completed_steps[-1]
    return "working"


async def report_progress(
    mcp: Context, delegation_id: str, *, total: float | None, every: float
) -> None:
    """Send progress for the delegation's attempt until cancelled (``total``: its
    deadline, counted from now; ``None``: the attempt's own, see the module docstring);
    a client that asked for none gets nothing (the SDK drops it), and a failure to
    send (the client went away) only ends the notifications, never the child."""
    started = anyio.current_time()
    sent = -math.inf
    last: tuple[object, ...] | None = None
    quiet = 0
    while True:
        await anyio.sleep(every)
        ctx = attempt(delegation_id)
        news = _news(ctx)
        quiet += 1
        if news == last and quiet < KEEPALIVE:
            continue
        last, quiet = news, 0
        elapsed, deadline = anyio.current_time() - started, total
        if total is None and ctx is not None:  # the attempt's own clock
            elapsed, deadline = ctx.timeout - ctx.remaining(), ctx.timeout
        progress = max(round(elapsed, 3), sent + 0.001)  # (it must only grow)
        if deadline is not None and progress > deadline:  # an ended attempt's keep-alives,
            deadline = None  # or a later one's shorter deadline: no total it would pass
        try:
            await mcp.report_progress(progress, deadline, _message(ctx))
        except Exception:  # noqa: BLE001 - the client is gone; the child goes on
            return
        sent = progress
