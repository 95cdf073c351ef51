"""Plumbing shared by the local fake servers in this package.

:class:`LocalServer` is a real HTTP server on ``127.0.0.1`` (a random free port)
running in a background thread. It owns the lifecycle (``start``/``close`` and
the context-manager protocol), tracks open connections so that ``close()`` can
drop keep-alive ones, sets :attr:`LocalServer.closing` so slow replies are cut
short, and collects :attr:`LocalServer.problems` that fail a ``strict`` ``with``
block. A subclass only implements :meth:`LocalServer.dispatch`: turn a request
into a reply (a :class:`Response`).
"""

from __future__ import annotations

import abc
import dataclasses
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from contextlib import suppress
from http import HTTPStatus
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar

__all__ = ["LocalServer", "RequestHandler", "Response"]


@dataclasses.dataclass(frozen=True)
class Response:
    """An HTTP response a fake sends; each fake's ``Reply`` extends it."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"
    delay_seconds: float = 0.0
    hold_open: bool = False
    """Send the body without a length and then nothing more until the server
    closes: a response that never finishes (a stream that hangs)."""
    pace_seconds: float = 0.0
    """Wait this long before each of the body's events (the parts of a server-sent
    event stream, each ending in a blank line): a stream that arrives slowly."""


R = TypeVar("R", bound=Response)


class LocalServer(abc.ABC, Generic[R]):
    """Base of the fakes. Use as a context manager; ``url`` is valid inside it."""

    #: Names the server thread, e.g. ``"fake-messages-api"``.
    thread_name: ClassVar[str]
    #: Prefixes the strict-mode ``AssertionError``, e.g. ``"fake Messages API"``.
    label: ClassVar[str]
    #: Methods passed to :meth:`dispatch`; others get http.server's usual 501.
    methods: ClassVar[frozenset[str]]
    #: Reason phrases for statuses that ``http.HTTPStatus`` lacks.
    reasons: ClassVar[Mapping[int, str]] = {}

    def __init__(self, *, strict: bool = True) -> None:
        self.strict = strict
        self.closing = threading.Event()
        self.problems: list[str] = []  # what went wrong server-side, for the test to see
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @abc.abstractmethod
    def dispatch(self, request: RequestHandler) -> R:
        """Record ``request`` and choose its reply (called from handler threads)."""

    def reply_headers(self, reply: R) -> Iterable[tuple[str, str]]:
        """Headers sent after ``content-type`` and ``content-length``."""
        return reply.headers

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:54321``."""
        if self._server is None:
            name = type(self).__name__
            raise RuntimeError(f"{name} is not running; use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- lifecycle

    def start(self) -> Self:
        if self._server is not None:
            raise RuntimeError(f"{type(self).__name__} already started")
        self._server = _HTTPServer(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},  # shutdown() waits at most this long
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; wake slow replies; drop open connections; join threads."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self.closing.set()
        server.shutdown()
        with self._lock:
            for conn in self._connections:
                _shutdown_socket(conn)
        server.server_close()
        if thread is not None:
            thread.join()
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        if exc_type is None and self.strict and self.problems:
            raise AssertionError(f"{self.label}: " + "; ".join(self.problems))

    # -- called from handler threads

    def _register(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.add(conn)
            if self.closing.is_set():  # accepted during close(): drop it now
                _shutdown_socket(conn)

    def _unregister(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.discard(conn)


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = True  # server_close() joins handler threads (we unblock them first)

    def __init__(self, fake: LocalServer[Any]) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), RequestHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up (e.g. after its own timeout) is not an error here.
        if self.fake.closing.is_set():
            return
        super().handle_error(request, client_address)


class RequestHandler(http.server.BaseHTTPRequestHandler):
    """Hands each request to :meth:`LocalServer.dispatch` and sends the reply."""

    protocol_version = "HTTP/1.1"  # keep-alive, like the real services
    timeout = 60  # backstop: an idle connection never outlives a test by much
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.fake._register(self.connection)

    def finish(self) -> None:
        self.server.fake._unregister(self.connection)
        with suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet

    def handle_request(self) -> None:
        fake = self.server.fake
        if self.command not in fake.methods:
            # What http.server itself answers when there is no do_<METHOD>.
            self.send_error(HTTPStatus.NOT_IMPLEMENTED, f"Unsupported method ({self.command!r})")
            return
        reply = fake.dispatch(self)
        # Wait on the closing Event, not time.sleep: shutdown ends the wait at once.
        if reply.delay_seconds > 0 and fake.closing.wait(reply.delay_seconds):
            self.close_connection = True
            return
        try:
            self.send_response(reply.status, fake.reasons.get(reply.status))
            self.send_header("content-type", reply.content_type)
            if reply.hold_open:
                self.send_header("connection", "close")  # the body ends when the server closes
            else:
                self.send_header("content-length", str(len(reply.body)))
            for name, value in fake.reply_headers(reply):
                self.send_header(name, value)
            self.end_headers()
            for part in _paced(reply):
                if reply.pace_seconds and fake.closing.wait(reply.pace_seconds):
                    self.close_connection = True
                    return
                self.wfile.write(part)
                self.wfile.flush()
            if reply.hold_open:
                self.close_connection = True
                fake.closing.wait()
        except OSError:  # the client went away (timed out, cancelled)
            self.close_connection = True

    do_GET = handle_request
    do_HEAD = handle_request
    do_POST = handle_request
    do_PUT = handle_request
    do_PATCH = handle_request
    do_DELETE = handle_request


def _paced(reply: Response) -> list[bytes]:
    """The parts of ``reply``'s body it is sent in: its events when paced, else whole."""
    if not reply.pace_seconds:
        return [reply.body]
    return [event + b"\n\n" for event in reply.body.split(b"\n\n") if event]


def _shutdown_socket(conn: socket.socket) -> None:
    with suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    """A request a fake received."""

    method: str
    path: str
    headers: Mapping[str, str]  # names lower-cased
    raw_body: bytes
    body: Any  # parsed JSON, or None if the body was not JSON
    time: float = dataclasses.field(default_factory=time.monotonic)
    """When it arrived (``time.monotonic()``)."""


def read_request(request: RequestHandler) -> RecordedRequest:
    """The request as received: its body read, and parsed when it is JSON."""
    length = int(request.headers.get("content-length") or 0)
    raw = request.rfile.read(length) if length else b""
    try:
        body: Any = json.loads(raw) if raw else None
    except ValueError:
        body = None
    return RecordedRequest(
        method=request.command,
        path=request.path,
        headers={k.lower(): v for k, v in request.headers.items()},
        raw_body=raw,
        body=body,
    )
