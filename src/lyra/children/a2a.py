"""Remote A2A agents as lyra children: ``A2AChild(url)``.

Install the ``a2a`` extra (``pip install -e '.[a2a]'`` in a lyra checkout: the
official ``a2a-sdk``) and point lyra at an agent that speaks the Agent2Agent protocol
(any A2A server, ``lyra a2a`` included)::

    from lyra import Budget, adelegate_task
    from lyra.children.a2a import A2AChild

    remote = A2AChild("http://127.0.0.1:9999", headers={"Authorization": f"Bearer {token}"})
    report = await adelegate_task("Triage issue 42", child=remote,
                                  timeout=600, idle_timeout=60, budget=Budget(max_tokens=200_000))

The agent card is read from ``URL/.well-known/agent-card.json`` (once per child);
the prompt is sent as a text message and the task is followed over the agent's
stream (JSON-RPC; a remote whose card does not stream is asked for the task,
``tasks/get``, until it ends or pauses: every 0.1 s at first, then less often, every
2 s at most).

**The limits hold across the network.**

- Progress: each ``working`` update with text is a completed step (``ctx.step``);
  every other status update, artifact chunk or changed task snapshot is a
  heartbeat, so the idle timeout ends a remote that went quiet and spares one that
  works. A keep-alive is not progress: a status update whose metadata says
  ``keepalive`` (``lyra a2a`` sends one after 2 s of silence, so that a client's
  read timeout does not take a quiet child for a dead server).
- Budget: A2A has no word for spend; a server that declares lyra's usage extension
  (:data:`USAGE_EXTENSION`, as ``lyra a2a`` does) reports the task's usage in each
  status update, and it is charged as it grows: going over ends the attempt at
  once. Under a token, cost or turn budget, a remote that reports nothing is
  refused before the message is sent, never run unmetered. (``max_tool_calls``
  counts this tree's tool calls; the remote's are its own.)
- Stopping: the deadline, the idle timeout, the budget, a cancellation, or any
  other end before the remote task has ended sends ``tasks/cancel`` to the remote
  (shielded, at most :data:`~lyra.children._a2a_run.CANCEL_GRACE` seconds), so a
  stopped delegation does not leave the remote working.

**Questions.** A remote task in ``input-required`` asks this attempt's question
(``ctx.ask``): whoever answers it (``answer=``, a parent, an MCP or A2A client)
does, and the answer is the same remote task's next message. With nobody to
answer, the attempt ends ``missing_context`` / ``input_required`` with the
question. A question the remote asks again in the same task, after its answer was
sent, ends the attempt ``missing_context``, naming the question and the answer the
remote did not take: the same answer is never sent twice.

**How a remote task ends here.** ``completed``: its artifacts' text is the
output (structured data as JSON). ``rejected``:
``invalid_task``; ``auth-required``: ``tool_error`` / ``auth``; ``failed``:
``tool_error`` (``partial`` after steps), or, from a server that declares lyra's
usage extension (``lyra a2a``), the category of the report it sends carried over
(its deadline, idle timeout or budget is ``timeout`` here). A stream that breaks
before the task ends is followed again (``tasks/get``, then ``tasks/resubscribe``).
The SDK's own exceptions (a refused connection, a 401, a card that cannot be read)
are classified in :mod:`lyra.delegation._foreign._a2a`.

**Continuation.** The remote's ``contextId`` is kept in ``ctx.state``: a retry of
the same task (a continuation, an enriched prompt) goes to the same A2A context.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from lyra.children._a2a_wire import KEEPALIVE, USAGE_EXTENSION, usage_metadata
from lyra.children._framework import check_options, framework, labelled
from lyra.delegation import ChildContext

__all__ = ["EXTRA", "KEEPALIVE", "USAGE_EXTENSION", "A2AChild", "usage_metadata"]

EXTRA = "a2a"
"""The extra that installs the A2A SDK."""


class A2AChild:
    """A remote A2A agent at ``url`` as a lyra child.

    ``url`` is the agent's base URL (its card is at ``/.well-known/agent-card.json``
    below it). ``headers`` go with every request, the card's included: an
    ``Authorization: Bearer …`` header for a server that asks for a token.
    """

    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None) -> None:
        framework("a2a.client", extra=EXTRA, child="A2AChild")
        from lyra.children._a2a_run import Remote  # the SDK's client side, loaded now

        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"A2AChild needs the agent's http(s) URL; got {reprlib.repr(url)}")
        check_options("A2AChild", headers=(headers, Mapping))
        for name, value in (headers or {}).items():
            if not isinstance(name, str) or not isinstance(value, str):  # never shows a value
                raise TypeError(f"A2AChild's headers= maps str names to str values: {name!r}")
        self.url = url
        self._remote = Remote(url, dict(headers or {}))

    @property
    def name(self) -> str:
        """The child as a report names it (its address, without credentials or query)."""
        return labelled("A2AChild", _address(self.url))

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        """Send ``prompt`` to the remote agent and follow its task to the end."""
        return await self._remote.run(prompt, ctx)

    def __repr__(self) -> str:
        return f"A2AChild({self.url!r})"


def _address(url: str) -> str:
    """``url`` as a report may show it: no user, password, query or fragment (a password
    that holds a ``/`` or ``#`` unescaped included: all up to the last ``@`` goes)."""
    scheme, _, rest = url.partition("://")
    parts = urlsplit(f"{scheme}://{rest.rpartition('@')[2]}")
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
