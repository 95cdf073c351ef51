"""The tool calls a stopping server ends with an answer, not a broken stream.

A server stopped (SIGINT, SIGTERM) while ``delegate_task`` runs, or while
``delegation_result`` waits, would leave the call to the web server's shutdown: it
waits a moment, then cancels the request, and the client gets a bare transport
error (with a traceback in the server's log). :class:`Calls` ends them first, each
with an answer of its own: the child stopped (a tool error that says so), the
delegation's status as it stands.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio


class Calls:
    """The tool calls in progress on one server (see the module docstring)."""

    def __init__(self) -> None:
        self._scopes: set[anyio.CancelScope] = set()
        self.stopping = False

    @contextmanager
    def call(self) -> Iterator[anyio.CancelScope]:
        """Run a call's work in a scope the server's stop cancels (its
        ``cancelled_caught`` then says so); one that starts as the server stops is
        cancelled at once."""
        scope = anyio.CancelScope()
        if self.stopping:
            scope.cancel()
        self._scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._scopes.discard(scope)

    def stop(self) -> None:
        """The server stops: every call in progress ends now, with its answer."""
        self.stopping = True
        for scope in list(self._scopes):
            scope.cancel()
