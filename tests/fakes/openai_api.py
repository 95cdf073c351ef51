"""A scripted, local fake of the OpenAI API (Chat Completions and Responses) for tests.

:class:`OpenAIAPI` is a real HTTP server on ``127.0.0.1`` (a random free port)
running in a background thread, so the real ``openai`` SDK -- and the OpenAI
Agents SDK's ``OpenAIChatCompletionsModel`` / ``OpenAIResponsesModel`` on top
of it -- talk to it over a socket while the test's event loop runs. Nothing
touches the network.

The test scripts what the model says as a list of :class:`Reply` objects,
served in order to successive ``POST /v1/chat/completions`` or
``POST /v1/responses`` requests. A model turn (:func:`message`,
:func:`tool_calls`, :func:`refusal`, :func:`truncated`) is written in the wire
format of the endpoint that asked, so one script serves either API; every
request is recorded::

    import openai
    from agents import Agent, OpenAIChatCompletionsModel
    from fakes.openai_api import OpenAIAPI, call, message, rate_limited, tool_calls

    async def test_tool_turn() -> None:
        with OpenAIAPI([
            tool_calls(call("lookup", {"q": "p53"})),
            rate_limited(7),
            message("done"),
        ]) as api:
            client = openai.AsyncOpenAI(base_url=api.base_url, api_key="test", max_retries=0)
            model = OpenAIChatCompletionsModel("gpt-test", openai_client=client)
            ...
            assert api.requests[0]["model"] == "gpt-test"
            assert api.remaining == 0

Errors come in the API's format (``{"error": {"message", "type", "param",
"code"}}``): :func:`error`, :func:`rate_limited` (with ``retry-after``),
:func:`server_error`; :func:`malformed` sends a body verbatim and :func:`slow`
delays any reply.

Anything unexpected -- a request beyond the script, another path or method, a
streaming request (not supported), a body that is not a JSON object -- is
answered with an API-format error (500 for beyond-the-script, with
``x-should-retry: false`` so the SDK does not retry it) and noted in
:attr:`OpenAIAPI.problems`. With ``strict=True`` (the default) leaving the
``with`` block normally raises ``AssertionError`` if there are any problems.

Shutdown is prompt: :func:`slow` replies wait on an ``Event`` that closing sets,
and open keep-alive connections are shut down before handler threads are joined.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import string
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

from ._server import LocalServer, RecordedRequest, RequestHandler, Response, read_request

__all__ = [
    "CHAT_PATH",
    "RESPONSES_PATH",
    "OpenAIAPI",
    "RecordedRequest",
    "Reply",
    "Turn",
    "call",
    "error",
    "malformed",
    "message",
    "openai_api",
    "rate_limited",
    "refusal",
    "server_error",
    "slow",
    "tool_calls",
    "truncated",
]

CHAT_PATH: Final = "/v1/chat/completions"
RESPONSES_PATH: Final = "/v1/responses"
_ALPHANUMERIC: Final = string.ascii_letters + string.digits


def _new_id(prefix: str) -> str:
    """An id shaped like the API's (``chatcmpl-…``, ``call_…``, ``resp_…``)."""
    return prefix + "".join(secrets.choice(_ALPHANUMERIC) for _ in range(24))


def _json_bytes(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


# --------------------------------------------------------------------------- turns


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """One function call the model makes (build it with :func:`call`)."""

    name: str
    arguments: str
    call_id: str


@dataclasses.dataclass(frozen=True)
class Turn:
    """What the model says in one response, whatever the endpoint."""

    text: str | None = None
    calls: tuple[ToolCall, ...] = ()
    refusal: str | None = None
    finish_reason: str = "stop"
    input_tokens: int = 10
    output_tokens: int = 5
    cached_tokens: int = 0

    def chat_completion(self, model: str) -> dict[str, Any]:
        """The turn as a Chat Completions ``chat.completion`` object."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text, "refusal": None}
        if self.refusal is not None:
            message["refusal"] = self.refusal
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.calls
            ]
        return {
            "id": _new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            "usage": {
                "prompt_tokens": self.input_tokens,
                "completion_tokens": self.output_tokens,
                "total_tokens": self.input_tokens + self.output_tokens,
                "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
            },
        }

    def response(self, model: str) -> dict[str, Any]:
        """The turn as a Responses API ``response`` object."""
        output: list[dict[str, Any]] = []
        content: list[dict[str, Any]] = []
        if self.text is not None:
            content.append({"type": "output_text", "text": self.text, "annotations": []})
        if self.refusal is not None:
            content.append({"type": "refusal", "refusal": self.refusal})
        incomplete = self.finish_reason == "length"
        if content:
            output.append(
                {
                    "type": "message",
                    "id": _new_id("msg_"),
                    "status": "incomplete" if incomplete else "completed",
                    "role": "assistant",
                    "content": content,
                }
            )
        output.extend(
            {
                "type": "function_call",
                "id": _new_id("fc_"),
                "call_id": c.call_id,
                "name": c.name,
                "arguments": c.arguments,
                "status": "completed",
            }
            for c in self.calls
        )
        return {
            "id": _new_id("resp_"),
            "object": "response",
            "created_at": int(time.time()),
            "status": "incomplete" if incomplete else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "error": None,
            "model": model,
            "output": output,
            "instructions": None,
            "metadata": {},
            "parallel_tool_calls": True,
            "temperature": 1.0,
            "top_p": 1.0,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": self.input_tokens,
                "input_tokens_details": {"cached_tokens": self.cached_tokens},
                "output_tokens": self.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self.input_tokens + self.output_tokens,
            },
        }


@dataclasses.dataclass(frozen=True)
class Reply(Response):
    """One scripted HTTP response: a model turn (rendered for the endpoint that
    asked) or a fixed status and body."""

    turn: Turn | None = None
    request_id: str = dataclasses.field(default_factory=lambda: _new_id("req_"))


def _turn(turn: Turn) -> Reply:
    return Reply(status=200, body=b"", turn=turn)


def call(
    name: str, arguments: Mapping[str, Any] | str = "{}", call_id: str | None = None
) -> ToolCall:
    """A function call; ``arguments`` is JSON data (or a JSON text, sent verbatim)."""
    text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return ToolCall(name=name, arguments=text, call_id=call_id or _new_id("call_"))


def message(
    text: str, *, input_tokens: int = 10, output_tokens: int = 5, cached_tokens: int = 0
) -> Reply:
    """A final assistant message."""
    return _turn(
        Turn(
            text=text,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_tokens=cached_tokens,
        )
    )


def tool_calls(
    *calls: ToolCall,
    text: str | None = None,
    input_tokens: int = 10,
    output_tokens: int = 5,
    cached_tokens: int = 0,
) -> Reply:
    """An assistant turn that calls tools (``finish_reason="tool_calls"``)."""
    return _turn(
        Turn(
            text=text,
            calls=calls,
            finish_reason="tool_calls",
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_tokens=cached_tokens,
        )
    )


def refusal(text: str = "I can't help with that.") -> Reply:
    """The model refuses (a ``refusal`` on the message)."""
    return _turn(Turn(refusal=text))


def truncated(text: str | None = None, *, output_tokens: int = 5) -> Reply:
    """A response cut off by the output token limit (``length``), before any text or
    (with ``text``) in the middle of it, having written ``output_tokens``."""
    return _turn(Turn(text=text, finish_reason="length", output_tokens=output_tokens))


def error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An error response in the API's format."""
    body = {"error": {"message": message, "type": type, "param": None, "code": code}}
    return Reply(status=status, body=_json_bytes(body), headers=tuple((headers or {}).items()))


def rate_limited(retry_after_seconds: float = 1, message: str = "Rate limit reached.") -> Reply:
    """A 429 with a ``retry-after`` header (whole seconds as ``"7"``)."""
    seconds = float(retry_after_seconds)
    value = str(int(seconds)) if seconds.is_integer() else str(seconds)
    return error(
        429, message, type="requests", code="rate_limit_exceeded", headers={"retry-after": value}
    )


def server_error(status: int = 500, message: str = "The server had an error.") -> Reply:
    """A 5xx ``server_error``."""
    return error(status, message, type="server_error")


def slow(reply: Reply, delay_seconds: float) -> Reply:
    """``reply``, served after ``delay_seconds`` (cut short, unanswered, on shutdown)."""
    return dataclasses.replace(reply, delay_seconds=delay_seconds)


def malformed(
    body_bytes: bytes = b"{not json", status: int = 200, content_type: str = "application/json"
) -> Reply:
    """A response whose body is ``body_bytes`` verbatim -- broken JSON by default."""
    return Reply(status=status, body=body_bytes, content_type=content_type)


# --------------------------------------------------------------------------- server


class OpenAIAPI(LocalServer[Reply]):
    """The fake server. Use as a context manager; ``url`` is valid inside it."""

    thread_name = "fake-openai-api"
    label = "fake OpenAI API"
    methods = frozenset({"POST", "GET", "PUT", "PATCH", "DELETE"})

    def __init__(self, replies: Iterable[Reply] = (), *, strict: bool = True) -> None:
        super().__init__(strict=strict)
        self.recorded: list[RecordedRequest] = []
        self._script: list[Reply] = list(replies)

    @property
    def base_url(self) -> str:
        """What ``openai.AsyncOpenAI(base_url=...)`` takes: ``url`` + ``/v1``."""
        return f"{self.url}/v1"

    # -- scripting and inspection

    def add(self, *replies: Reply) -> None:
        """Append replies to the script (also while the server is running)."""
        with self._lock:
            self._script.extend(replies)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Parsed JSON bodies of the model requests (either endpoint), in order."""
        with self._lock:
            return [r.body for r in self.recorded if _is_model_call(r) and isinstance(r.body, dict)]

    @property
    def remaining(self) -> int:
        """How many scripted replies have not been served yet."""
        with self._lock:
            return len(self._script)

    # -- called from handler threads

    def reply_headers(self, reply: Reply) -> Iterable[tuple[str, str]]:
        """Every reply carries its ``x-request-id``, like the API's."""
        return (("x-request-id", reply.request_id), *reply.headers)

    def dispatch(self, request: RequestHandler) -> Reply:
        """Record ``request`` and choose its reply."""
        recorded = read_request(request)
        body = recorded.body
        with self._lock:
            self.recorded.append(recorded)
            where = f"{recorded.method} {recorded.path}"
            if not _is_model_call(recorded):
                return self._problem(404, f"no route for {where}")
            if not isinstance(body, dict):
                if _cut_off(recorded):  # the client was cancelled while sending it
                    return error(499, f"{self.label}: {where}: the client hung up mid-body")
                return self._problem(400, f"{where}: body is not a JSON object")
            if body.get("stream"):
                return self._problem(400, f"{where}: streaming is not supported")
            if not self._script:
                number = sum(1 for r in self.recorded if _is_model_call(r))
                return self._problem(500, f"request #{number} to {where} is beyond the script")
            reply = self._script.pop(0)
        if reply.turn is None:
            return reply
        model = str(body.get("model", "gpt-test"))
        rendered = (
            reply.turn.chat_completion(model)
            if _path(recorded) == CHAT_PATH
            else reply.turn.response(model)
        )
        return dataclasses.replace(reply, body=_json_bytes(rendered))

    def _problem(self, status: int, what: str) -> Reply:
        self.problems.append(what)
        return error(status, f"{self.label}: {what}", headers={"x-should-retry": "false"})


def _cut_off(request: RecordedRequest) -> bool:
    """True when the body ended before its ``content-length``: a request abandoned by a
    cancelled client, not a malformed one."""
    return len(request.raw_body) < int(request.headers.get("content-length") or 0)


def _path(request: RecordedRequest) -> str:
    return request.path.split("?", 1)[0].rstrip("/")


def _is_model_call(request: RecordedRequest) -> bool:
    return request.method == "POST" and _path(request) in (CHAT_PATH, RESPONSES_PATH)


@contextmanager
def openai_api(replies: Iterable[Reply] = (), *, strict: bool = True) -> Iterator[OpenAIAPI]:
    """Fixture factory: a running :class:`OpenAIAPI`, closed on exit."""
    with OpenAIAPI(replies, strict=strict) as api:
        yield api
