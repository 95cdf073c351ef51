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

Streaming (the default; ``streaming=False`` for a server that refuses it): a
request with ``"stream": true`` gets its scripted 200 :func:`message` as the
API's server-sent events (``message_start``, a
``content_block_start``/``_delta``/``_stop`` triple per block,
``message_delta`` with the stop reason and the final usage, ``message_stop``),
which is what the Claude Code CLI and lyra's ``AnthropicChild`` ask for; an
error reply is sent as it is, before any event, as the API does. :func:`stalled` sends the
first events of a message and then nothing until the server closes (a model
that hangs mid-answer), :func:`cut` ends the connection there, and :func:`paced`
sends every event a while after the one before (a long answer being written).
With ``streaming=False`` a streaming request is a problem (below).

Anything unexpected -- a request beyond the script, another path or method, a
streaming request to a server not built with ``streaming=True``, a body that is
not a JSON object -- is
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
import json
import secrets
import string
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, Final

from ._server import LocalServer, RecordedRequest, RequestHandler, Response, read_request

__all__ = [
    "DEFAULT_MODEL",
    "ERROR_TYPES",
    "MessagesAPI",
    "RecordedRequest",
    "Reply",
    "cut",
    "error",
    "interrupted",
    "malformed",
    "message",
    "messages_api",
    "overloaded",
    "paced",
    "rate_limited",
    "slow",
    "stalled",
    "text",
    "thinking",
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
class Reply(Response):
    """One scripted HTTP response; build it with the helper functions."""

    request_id: str = dataclasses.field(default_factory=lambda: _new_id("req_011"))
    stall_after_events: int | None = None
    """Streaming only: send this many events, then hang until the server closes."""
    cut_short: bool = False
    """With ``stall_after_events``: end the connection there instead of hanging."""
    error_event: str | None = None
    """With ``cut_short``: an ``error`` event of this type ends the stream."""

    def json(self) -> Any:
        """The body parsed as JSON (raises on a :func:`malformed` body)."""
        return json.loads(self.body)


def text(value: str) -> Block:
    """A ``text`` content block."""
    return {"type": "text", "text": value}


def thinking(value: str) -> Block:
    """A ``thinking`` content block (its signature is a placeholder)."""
    return {"type": "thinking", "thinking": value, "signature": "c2lnbmF0dXJl"}


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


def stalled(reply: Reply, after_events: int = 2) -> Reply:
    """A streamed ``reply`` that stops after ``after_events`` events and then sends
    nothing until the server closes (streaming servers only)."""
    return dataclasses.replace(reply, stall_after_events=after_events)


def paced(reply: Reply, seconds: float) -> Reply:
    """A streamed ``reply`` whose events come ``seconds`` apart (a model writing a long
    answer; streaming servers only)."""
    return dataclasses.replace(reply, pace_seconds=seconds)


def interrupted(reply: Reply, error_type: str = "overloaded_error", after_events: int = 2) -> Reply:
    """A streamed ``reply`` that sends an ``error`` event of ``error_type`` after
    ``after_events`` events and ends there: the API's trouble met mid-answer, on a
    response whose status (200) was already sent (streaming servers only)."""
    return dataclasses.replace(
        reply, stall_after_events=after_events, cut_short=True, error_event=error_type
    )


def cut(reply: Reply, after_events: int = 2) -> Reply:
    """A streamed ``reply`` whose connection ends after ``after_events`` events, before
    the message does (streaming servers only)."""
    return dataclasses.replace(reply, stall_after_events=after_events, cut_short=True)


def malformed(
    body_bytes: bytes = b"{not json", status: int = 200, content_type: str = "application/json"
) -> Reply:
    """A response whose body is ``body_bytes`` verbatim -- broken JSON by default."""
    return Reply(status=status, body=body_bytes, content_type=content_type)


# --------------------------------------------------------------------------- server


class MessagesAPI(LocalServer[Reply]):
    """The fake server. Use as a context manager; ``url`` is valid inside it."""

    thread_name = "fake-messages-api"
    label = "fake Messages API"
    methods = frozenset({"POST", "GET", "PUT", "PATCH", "DELETE"})
    reasons: ClassVar[Mapping[int, str]] = {529: "Overloaded"}

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        strict: bool = True,
        streaming: bool = True,
        routes: Iterable[tuple[Callable[[dict[str, Any]], bool], Iterable[Reply]]] = (),
    ) -> None:
        super().__init__(strict=strict)
        self.streaming = streaming
        self.recorded: list[RecordedRequest] = []
        self._script: list[Reply] = list(replies)
        self._routes = [(matches, list(script)) for matches, script in routes]
        """Scripts of their own for requests a predicate picks out (a subagent's, whose
        requests race the main agent's): the first match serves, else the script."""

    # -- scripting and inspection

    def add(self, *replies: Reply) -> None:
        """Append replies to the script (also while the server is running)."""
        with self._lock:
            self._script.extend(replies)

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

    # -- called from handler threads

    def reply_headers(self, reply: Reply) -> Iterable[tuple[str, str]]:
        """Every reply carries its ``request-id``, like the API's."""
        return (("request-id", reply.request_id), *reply.headers)

    def dispatch(self, request: RequestHandler) -> Reply:
        """Record ``request`` and choose its reply."""
        recorded = read_request(request)
        body = recorded.body
        with self._lock:
            self.recorded.append(recorded)
            where = f"{recorded.method} {recorded.path}"
            if not _is_messages_call(recorded):
                return self._problem(404, "not_found_error", f"no route for {where}")
            if not isinstance(body, dict):
                return self._problem(
                    400, "invalid_request_error", f"{where}: body is not a JSON object"
                )
            if body.get("stream") and not self.streaming:
                return self._problem(
                    400, "invalid_request_error", f"{where}: streaming is not supported"
                )
            script = next((s for matches, s in self._routes if matches(body)), self._script)
            if not script:
                number = sum(1 for r in self.recorded if _is_messages_call(r))
                return self._problem(
                    500, "api_error", f"request #{number} to {where} is beyond the script"
                )
            reply = script.pop(0)
            return _as_events(reply) if body.get("stream") else reply

    def _problem(self, status: int, error_type: str, what: str) -> Reply:
        self.problems.append(what)
        return error(
            status, error_type, f"{self.label}: {what}", headers={"x-should-retry": "false"}
        )


def _as_events(reply: Reply) -> Reply:
    """A 200 message reply as the API streams it (server-sent events); any other
    reply (an error, a malformed body) as it is."""
    if reply.status != 200 or reply.content_type != "application/json":
        return reply
    try:
        body = reply.json()
    except ValueError:
        return reply
    if not isinstance(body, dict) or body.get("type") != "message":
        return reply
    usage = dict(body["usage"])
    start_usage = {**usage, "output_tokens": min(1, usage.get("output_tokens", 0))}
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "message": {
                    **body,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                }
            },
        ),
    ]
    for index, block in enumerate(body["content"]):
        events.extend(_block_events(index, block))
    events.append(
        (
            "message_delta",
            {
                "delta": {
                    "stop_reason": body["stop_reason"],
                    "stop_sequence": body["stop_sequence"],
                },
                "usage": usage,
            },
        )
    )
    events.append(("message_stop", {}))
    stall = reply.stall_after_events
    if stall is not None:
        events = events[:stall]
    if reply.error_event is not None:
        trouble = {"type": reply.error_event, "message": f"{reply.error_event} mid-stream"}
        events.append(("error", {"error": trouble}))
    stream = b"".join(
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()
        for name, data in events
    )
    hanging = stall is not None and not reply.cut_short
    return dataclasses.replace(
        reply, body=stream, content_type="text/event-stream", hold_open=hanging
    )


def _block_events(index: int, block: Block) -> list[tuple[str, dict[str, Any]]]:
    """The start, delta and stop events of one content block."""
    kind = block["type"]
    if kind == "text":
        start, delta = {**block, "text": ""}, {"type": "text_delta", "text": block["text"]}
    elif kind == "tool_use":
        start = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    elif kind == "thinking":
        start = {**block, "thinking": "", "signature": ""}
        delta = {"type": "thinking_delta", "thinking": block["thinking"]}
    else:  # a block without deltas (redacted thinking, server tool results)
        return [
            ("content_block_start", {"index": index, "content_block": block}),
            ("content_block_stop", {"index": index}),
        ]
    events = [
        ("content_block_start", {"index": index, "content_block": start}),
        ("content_block_delta", {"index": index, "delta": delta}),
    ]
    if kind == "thinking":
        signature = {"type": "signature_delta", "signature": block["signature"]}
        events.append(("content_block_delta", {"index": index, "delta": signature}))
    events.append(("content_block_stop", {"index": index}))
    return events


def _is_messages_call(request: RecordedRequest) -> bool:
    return request.method == "POST" and request.path.split("?", 1)[0].rstrip("/") == MESSAGES_PATH


@contextmanager
def messages_api(
    replies: Iterable[Reply] = (), *, strict: bool = True, streaming: bool = True
) -> Iterator[MessagesAPI]:
    """Fixture factory: a running :class:`MessagesAPI`, closed on exit."""
    with MessagesAPI(replies, strict=strict, streaming=streaming) as api:
        yield api
