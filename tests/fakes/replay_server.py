"""A local fake of AlphaFold DB and UniProt that replays recorded responses.

:class:`ReplayServer` is a real HTTP server on ``127.0.0.1`` (a random free
port) in a background thread, so :class:`lyra.proteins._sources.LiveSource`
talks to it over a socket with its real ``httpx`` client. Nothing touches the
network. Both services live on the one server (pass its ``url`` as
``afdb_url`` and ``uniprot_url``)::

    from fakes.replay_server import ReplayServer, rate_limited

    def test_rate_limit() -> None:
        with ReplayServer() as server:
            server.script("/uniprotkb/P04637.json", rate_limited(7))
            ...  # first request for that path gets the 429, later ones the recording
            assert server.paths == ["/uniprotkb/P04637.json"]

Routes, filled from ``tests/fixtures/recorded`` (see its README):

- ``GET /api/prediction/{ACC}`` -- ``afdb_prediction_{ACC}.json``;
- ``GET /uniprotkb/{ACC}.json`` -- ``uniprot_{ACC}.json``.

An accession without a recording gets a 404 with the service's error body:
UniProt's documented ``{"url": …, "messages": ["Resource not found"]}``, and
for AlphaFold DB ``{"detail": "Not Found"}`` (not recorded -- an assumption;
lyra never reads a 404 body). Any other path or method is a 404 noted in
:attr:`ReplayServer.problems`; with ``strict=True`` (the default) leaving the
``with`` block then raises ``AssertionError``.

:meth:`ReplayServer.script` queues replies for one path, served in order
before that path falls back to its recording. Build them with :func:`reply`,
:func:`json_reply`, :func:`rate_limited`, :func:`server_error`,
:func:`malformed` and :func:`slow`. Shutdown is prompt: slow replies wait on an
``Event`` that closing sets, and open connections are shut down before
handler threads are joined.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import re
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

__all__ = [
    "RECORDED",
    "RecordedRequest",
    "ReplayServer",
    "Reply",
    "json_reply",
    "malformed",
    "rate_limited",
    "replay_server",
    "reply",
    "server_error",
    "slow",
]

RECORDED: Final = Path(__file__).resolve().parents[1] / "fixtures" / "recorded"
_AFDB_PATH: Final = re.compile(r"/api/prediction/(?P<acc>[^/?]+)")
_UNIPROT_PATH: Final = re.compile(r"/uniprotkb/(?P<acc>[^/?]+)\.json")
_AFDB_FILE: Final = re.compile(r"afdb_prediction_(?P<acc>.+)\.json")
_UNIPROT_FILE: Final = re.compile(r"uniprot_(?P<acc>.+)\.json")


# --------------------------------------------------------------------------- replies


@dataclasses.dataclass(frozen=True)
class Reply:
    """One HTTP response; build it with the helper functions."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"
    delay_seconds: float = 0.0


def reply(status: int, body: bytes = b"", *, headers: Mapping[str, str] | None = None) -> Reply:
    """A response with ``body`` verbatim."""
    return Reply(status=status, body=body, headers=tuple((headers or {}).items()))


def json_reply(value: Any, status: int = 200, *, headers: Mapping[str, str] | None = None) -> Reply:
    """A JSON response."""
    return reply(status, json.dumps(value).encode(), headers=headers)


def rate_limited(retry_after: float | str = 1) -> Reply:
    """A 429 with ``retry-after`` (a number of seconds, or any string, e.g. an HTTP date)."""
    if isinstance(retry_after, str):
        value = retry_after
    else:
        value = str(int(retry_after)) if float(retry_after).is_integer() else str(retry_after)
    return json_reply({"messages": ["Too many requests"]}, 429, headers={"retry-after": value})


def server_error(status: int = 500) -> Reply:
    """A 5xx (or any status) with a small JSON body."""
    return json_reply({"messages": [f"Server error {status}"]}, status)


def malformed(body: bytes = b"{not json", status: int = 200) -> Reply:
    """A response whose body is ``body`` verbatim -- broken JSON by default."""
    return reply(status, body)


def slow(reply: Reply, delay_seconds: float) -> Reply:
    """``reply``, served after ``delay_seconds`` (cut short, unanswered, on shutdown)."""
    return dataclasses.replace(reply, delay_seconds=delay_seconds)


# --------------------------------------------------------------------------- server


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    """A request the fake received."""

    method: str
    path: str
    headers: Mapping[str, str]  # names lower-cased


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = True  # server_close() joins handler threads (we unblock them first)

    def __init__(self, fake: ReplayServer) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if self.fake.closing.is_set():  # a client that hung up during shutdown
            return
        super().handle_error(request, client_address)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real services
    timeout = 60  # backstop: an idle connection never outlives a test by much
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.fake._register(self.connection)

    def finish(self) -> None:
        self.server.fake._unregister(self.connection)
        with suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet

    def _handle(self) -> None:
        fake = self.server.fake
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
        )
        answer = fake._dispatch(request, self.headers.get("host", "127.0.0.1"))
        # Wait on the closing Event, not time.sleep: shutdown ends the wait at once.
        if answer.delay_seconds > 0 and fake.closing.wait(answer.delay_seconds):
            self.close_connection = True
            return
        self._send(answer)

    def _send(self, answer: Reply) -> None:
        try:
            self.send_response(answer.status)
            self.send_header("content-type", answer.content_type)
            self.send_header("content-length", str(len(answer.body)))
            for name, value in answer.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(answer.body)
            self.wfile.flush()
        except OSError:  # the client went away (timed out, cancelled)
            self.close_connection = True

    do_GET = _handle
    do_POST = _handle
    do_HEAD = _handle


def _load_recordings(directory: Path) -> dict[str, bytes]:
    """Path → recorded body for every recording in ``directory``."""
    routes: dict[str, bytes] = {}
    for file in sorted(directory.glob("*.json")):
        if match := _AFDB_FILE.fullmatch(file.name):
            routes[f"/api/prediction/{match['acc']}"] = file.read_bytes()
        elif match := _UNIPROT_FILE.fullmatch(file.name):
            routes[f"/uniprotkb/{match['acc']}.json"] = file.read_bytes()
    return routes


class ReplayServer:
    """The fake services. Use as a context manager; ``url`` is valid inside it."""

    def __init__(self, recordings: Path = RECORDED, *, strict: bool = True) -> None:
        self.strict = strict
        self.closing = threading.Event()
        self.recorded: list[RecordedRequest] = []
        self.problems: list[str] = []
        self.routes = _load_recordings(recordings)
        self._scripts: dict[str, list[Reply]] = {}
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- scripting and inspection

    def script(self, path: str, *replies: Reply) -> None:
        """Queue ``replies`` for ``path``; once used up, the path answers as recorded."""
        with self._lock:
            self._scripts.setdefault(path, []).extend(replies)

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:54321``."""
        if self._server is None:
            raise RuntimeError("ReplayServer is not running; use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def paths(self) -> list[str]:
        """The paths requested so far, in order."""
        with self._lock:
            return [r.path for r in self.recorded]

    # -- lifecycle

    def start(self) -> Self:
        if self._server is not None:
            raise RuntimeError("ReplayServer already started")
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},  # shutdown() waits at most this long
            name="fake-replay-server",
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
            raise AssertionError("fake replay server: " + "; ".join(self.problems))

    # -- called from handler threads

    def _register(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.add(conn)
            if self.closing.is_set():  # accepted during close(): drop it now
                _shutdown_socket(conn)

    def _unregister(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.discard(conn)

    def _dispatch(self, request: RecordedRequest, host: str) -> Reply:
        """Record ``request`` and choose its reply."""
        path = request.path.split("?", 1)[0]
        with self._lock:
            self.recorded.append(request)
            queued = self._scripts.get(path)
            if queued:
                return queued.pop(0)
            if request.method != "GET":
                self.problems.append(f"unexpected {request.method} {request.path}")
                return json_reply({"detail": "Method Not Allowed"}, 405)
            if path in self.routes:
                return reply(200, self.routes[path])
            if _UNIPROT_PATH.fullmatch(path):
                url = f"http://{host}{path}"
                return json_reply({"url": url, "messages": ["Resource not found"]}, 404)
            if _AFDB_PATH.fullmatch(path):
                return json_reply({"detail": "Not Found"}, 404)
            self.problems.append(f"no route for GET {request.path}")
            return json_reply({"detail": "Not Found"}, 404)


def _shutdown_socket(conn: socket.socket) -> None:
    with suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


@contextmanager
def replay_server(recordings: Path = RECORDED, *, strict: bool = True) -> Iterator[ReplayServer]:
    """Fixture factory: a running :class:`ReplayServer`, closed on exit."""
    with ReplayServer(recordings, strict=strict) as server:
        yield server
