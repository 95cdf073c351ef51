"""A scripted, local fake of the Anthropic Messages API for tests.

:class:`MessagesAPI` is a real HTTP server on ``127.0.0.1`` (a random free port)
running in a background thread, so the real ``anthropic`` SDK talks to it over a
socket while the test's event loop runs. Nothing touches the network.

The test scripts the conversation as a list of :class:`Reply` objects, served in
order to successive ``POST /v1/messages`` requests; every request is recorded::

    import anthropic
    from fakes.messages_api import MessagesAPI, message, rate_limited, text, tool_use

    async def test_tool_turn() -> None:
        with MessagesAPI([
            message([tool_use("lookup", {"q": "p53"})], stop_reason="tool_use"),
            rate_limited(7),
            message([text("done")]),
        ]) as api:
            async with anthropic.AsyncAnthropic(
                base_url=api.url, api_key="test-key", max_retries=0
            ) as client:
                ...
            assert api.requests[0]["model"] == "claude-sonnet-4-6"
            assert api.remaining == 0

Replies are built with the helpers :func:`message` (blocks :func:`text`,
:func:`tool_use`), :func:`error`, :func:`rate_limited`, :func:`overloaded`,
:func:`slow` and :func:`malformed`.

Anything unexpected -- a request beyond the script, another path or method, a
streaming request (not supported), a body that is not a JSON object -- is
answered with an API-format error (500 for beyond-the-script, with
``x-should-retry: false`` so the SDK does not retry it) and noted in
:attr:`MessagesAPI.problems`. With ``strict=True`` (the default) leaving the
``with`` block normally raises ``AssertionError`` if there are any problems, so a
caller that swallows the error still fails the test.

As a pytest fixture, a ``tests/conftest.py`` would expose it like this (tests then
call ``messages_api.add(...)`` to script replies)::

    from collections.abc import Iterator

    import pytest
    from fakes.messages_api import MessagesAPI, messages_api as _messages_api

    @pytest.fixture
    def messages_api() -> Iterator[MessagesAPI]:
        with _messages_api() as api:
            yield api

Shutdown is prompt: :func:`slow` replies wait on an ``Event`` that closing sets,
and open keep-alive connections are shut down before handler threads are joined.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import secrets
import socket
import string
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from types import TracebackType
from typing import Any, Final, Self

__all__ = [
    "DEFAULT_MODEL",
    "ERROR_TYPES",
    "MessagesAPI",
    "RecordedRequest",
    "Reply",
    "error",
    "malformed",
    "message",
    "messages_api",
    "overloaded",
    "rate_limited",
    "slow",
    "text",
    "tool_use",
]

DEFAULT_MODEL: Final = "claude-sonnet-4-6"
MESSAGES_PATH: Final = "/v1/messages"

#: The API's error types and the status each is sent with.
ERROR_TYPES: Final[Mapping[str, int]] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}

Block = dict[str, Any]

_ALPHANUMERIC: Final = string.ascii_letters + string.digits


def _new_id(prefix: str) -> str:
    """An id shaped like the API's (``msg_01…``, ``toolu_01…``, ``req_011…``)."""
    return prefix + "".join(secrets.choice(_ALPHANUMERIC) for _ in range(22))


def _json_bytes(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


# --------------------------------------------------------------------------- replies


@dataclasses.dataclass(frozen=True)
class Reply:
    """One scripted HTTP response; build it with the helper functions."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"
    delay_seconds: float = 0.0
    request_id: str = dataclasses.field(default_factory=lambda: _new_id("req_011"))

    def json(self) -> Any:
        """The body parsed as JSON (raises on a :func:`malformed` body)."""
        return json.loads(self.body)


def text(value: str) -> Block:
    """A ``text`` content block."""
    return {"type": "text", "text": value}


def tool_use(name: str, input: Mapping[str, Any], id: str | None = None) -> Block:
    """A ``tool_use`` content block; ``id`` defaults to a fresh ``toolu_01…``."""
    return {"type": "tool_use", "id": id or _new_id("toolu_01"), "name": name, "input": dict(input)}


def message(
    content_blocks: Sequence[Block] | str,
    stop_reason: str = "end_turn",
    *,
    model: str = DEFAULT_MODEL,
    usage: Mapping[str, int] | None = None,
    stop_sequence: str | None = None,
    id: str | None = None,
) -> Reply:
    """A well-formed 200 Messages API response.

    ``content_blocks`` may be a plain string, shorthand for ``[text(...)]``.
    ``usage`` is merged over ``{"input_tokens": 10, "output_tokens": 5}``.
    """
    blocks = [text(content_blocks)] if isinstance(content_blocks, str) else list(content_blocks)
    body = {
        "id": id or _new_id("msg_01"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": {"input_tokens": 10, "output_tokens": 5, **(usage or {})},
    }
    return Reply(status=200, body=_json_bytes(body))


def error(
    status: int,
    error_type: str,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    error_code: str | None = None,
) -> Reply:
    """An error response in the API's format.

    ``{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}``;
    ``error_code`` adds ``error.details.error_code``, which the SDK uses to pick a
    more specific exception subclass. See :data:`ERROR_TYPES` for the usual pairs.
    """
    request_id = _new_id("req_011")
    detail: dict[str, Any] = {"type": error_type, "message": message}
    if error_code is not None:
        detail["details"] = {"error_code": error_code}
    body = {"type": "error", "error": detail, "request_id": request_id}
    return Reply(
        status=status,
        body=_json_bytes(body),
        headers=tuple((headers or {}).items()),
        request_id=request_id,
    )


def rate_limited(retry_after_seconds: float = 1, message: str = "Rate limited.") -> Reply:
    """A 429 ``rate_limit_error`` with a ``retry-after`` header (whole seconds as ``"7"``)."""
    seconds = float(retry_after_seconds)
    value = str(int(seconds)) if seconds.is_integer() else str(seconds)
    return error(429, "rate_limit_error", message, headers={"retry-after": value})


def overloaded(message: str = "Overloaded") -> Reply:
    """A 529 ``overloaded_error``."""
    return error(529, "overloaded_error", message)


def slow(reply: Reply, delay_seconds: float) -> Reply:
    """``reply``, served after ``delay_seconds`` (cut short, unanswered, on shutdown)."""
    return dataclasses.replace(reply, delay_seconds=delay_seconds)


def malformed(
    body_bytes: bytes = b"{not json", status: int = 200, content_type: str = "application/json"
) -> Reply:
    """A response whose body is ``body_bytes`` verbatim -- broken JSON by default."""
    return Reply(status=status, body=body_bytes, content_type=content_type)


# --------------------------------------------------------------------------- server


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    """A request the fake received."""

    method: str
    path: str
    headers: Mapping[str, str]  # names lower-cased
    raw_body: bytes
    body: Any  # parsed JSON, or None if the body was not JSON


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = True  # server_close() joins handler threads (we unblock them first)

    def __init__(self, api: MessagesAPI) -> None:
        self.api = api
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up (e.g. after its own timeout) is not an error here.
        if self.api.closing.is_set():
            return
        super().handle_error(request, client_address)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real API
    timeout = 60  # backstop: an idle connection never outlives a test by much
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.api._register(self.connection)

    def finish(self) -> None:
        self.server.api._unregister(self.connection)
        with suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet

    def _handle(self) -> None:
        api = self.server.api
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        recorded = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            raw_body=raw,
            body=body,
        )
        reply = api._dispatch(recorded)
        # Wait on the closing Event, not time.sleep: shutdown ends the wait at once.
        if reply.delay_seconds > 0 and api.closing.wait(reply.delay_seconds):
            self.close_connection = True
            return
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        reason = "Overloaded" if reply.status == 529 else None  # not in http.HTTPStatus
        try:
            self.send_response(reply.status, reason)
            self.send_header("content-type", reply.content_type)
            self.send_header("content-length", str(len(reply.body)))
            self.send_header("request-id", reply.request_id)
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)
            self.wfile.flush()
        except OSError:  # the client went away (timed out, cancelled)
            self.close_connection = True

    do_POST = _handle
    do_GET = _handle
    do_PUT = _handle
    do_PATCH = _handle
    do_DELETE = _handle


class MessagesAPI:
    """The fake server. Use as a context manager; ``url`` is valid inside it."""

    def __init__(self, replies: Iterable[Reply] = (), *, strict: bool = True) -> None:
        self.strict = strict
        self.closing = threading.Event()
        self.recorded: list[RecordedRequest] = []
        self.problems: list[str] = []  # what went wrong server-side, for the test to see
        self._script: list[Reply] = list(replies)
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- scripting and inspection

    def add(self, *replies: Reply) -> None:
        """Append replies to the script (also while the server is running)."""
        with self._lock:
            self._script.extend(replies)

    @property
    def url(self) -> str:
        """The base URL to pass to the SDK, e.g. ``http://127.0.0.1:54321``."""
        if self._server is None:
            raise RuntimeError("MessagesAPI is not running; use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Parsed JSON bodies of the ``POST /v1/messages`` requests, in order."""
        with self._lock:
            return [
                r.body for r in self.recorded if _is_messages_call(r) and isinstance(r.body, dict)
            ]

    @property
    def remaining(self) -> int:
        """How many scripted replies have not been served yet."""
        with self._lock:
            return len(self._script)

    # -- lifecycle

    def start(self) -> Self:
        if self._server is not None:
            raise RuntimeError("MessagesAPI already started")
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},  # shutdown() waits at most this long
            name="fake-messages-api",
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
            raise AssertionError("fake Messages API: " + "; ".join(self.problems))

    # -- called from handler threads

    def _register(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.add(conn)
            if self.closing.is_set():  # accepted during close(): drop it now
                _shutdown_socket(conn)

    def _unregister(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.discard(conn)

    def _dispatch(self, request: RecordedRequest) -> Reply:
        """Record ``request`` and choose its reply."""
        with self._lock:
            self.recorded.append(request)
            where = f"{request.method} {request.path}"
            if not _is_messages_call(request):
                return self._problem(404, "not_found_error", f"no route for {where}")
            if not isinstance(request.body, dict):
                return self._problem(
                    400, "invalid_request_error", f"{where}: body is not a JSON object"
                )
            if request.body.get("stream"):
                return self._problem(
                    400, "invalid_request_error", f"{where}: streaming is not supported"
                )
            if not self._script:
                number = sum(1 for r in self.recorded if _is_messages_call(r))
                return self._problem(
                    500, "api_error", f"request #{number} to {where} is beyond the script"
                )
            return self._script.pop(0)

    def _problem(self, status: int, error_type: str, what: str) -> Reply:
        self.problems.append(what)
        return error(
            status, error_type, f"fake Messages API: {what}", headers={"x-should-retry": "false"}
        )


def _is_messages_call(request: RecordedRequest) -> bool:
    return request.method == "POST" and request.path.split("?", 1)[0].rstrip("/") == MESSAGES_PATH


def _shutdown_socket(conn: socket.socket) -> None:
    with suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


@contextmanager
def messages_api(replies: Iterable[Reply] = (), *, strict: bool = True) -> Iterator[MessagesAPI]:
    """Fixture factory: a running :class:`MessagesAPI`, closed on exit."""
    with MessagesAPI(replies, strict=strict) as api:
        yield api
