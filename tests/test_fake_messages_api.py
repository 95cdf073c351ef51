"""Tests of the fake Messages API (tests/fakes/messages_api.py), driven by the real SDK."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import anthropic
import anyio
import pytest
from anthropic.types import MessageParam, TextBlock, ToolUseBlock

from fakes.messages_api import (
    DEFAULT_MODEL,
    ERROR_TYPES,
    MessagesAPI,
    Reply,
    error,
    malformed,
    message,
    messages_api,
    overloaded,
    rate_limited,
    slow,
    stalled,
    text,
    thinking,
    tool_use,
)

MODEL = DEFAULT_MODEL  # a deprecated model would warn, and warnings are errors
HELLO: list[MessageParam] = [{"role": "user", "content": "hello"}]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def api() -> Iterator[MessagesAPI]:
    with messages_api() as server:
        yield server


@pytest.fixture
async def client(api: MessagesAPI) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=api.url, api_key="test-key", max_retries=0) as c:
        yield c


async def create(client: anthropic.AsyncAnthropic, **kwargs: Any) -> anthropic.types.Message:
    params: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "messages": HELLO, **kwargs}
    return cast(anthropic.types.Message, await client.messages.create(**params))


@pytest.mark.anyio
async def test_two_turn_tool_use_conversation(
    api: MessagesAPI, client: anthropic.AsyncAnthropic
) -> None:
    api.add(
        message(
            [text("Let me look."), tool_use("lookup", {"gene": "TP53", "n": 2})],
            stop_reason="tool_use",
        ),
        message([text("TP53 is a tumour suppressor.")], usage={"output_tokens": 9}),
    )
    tools: list[anthropic.types.ToolParam] = [
        {"name": "lookup", "input_schema": {"type": "object"}, "description": "Look a gene up."}
    ]

    first = await create(client, tools=tools)
    assert first.stop_reason == "tool_use"
    assert first.id.startswith("msg_01")
    call = first.content[1]
    assert isinstance(call, ToolUseBlock)
    assert (call.name, call.input) == ("lookup", {"gene": "TP53", "n": 2})
    assert call.id.startswith("toolu_01")

    second_turn: list[MessageParam] = [
        *HELLO,
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.input},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "found: 1"}],
        },
    ]
    second = await create(client, tools=tools, messages=second_turn)
    assert second.stop_reason == "end_turn"
    assert isinstance(second.content[0], TextBlock)
    assert second.content[0].text == "TP53 is a tumour suppressor."
    assert second.usage.output_tokens == 9

    assert len(api.requests) == 2
    assert api.requests[0]["tools"][0]["name"] == "lookup"
    assert api.requests[1]["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_use_id": call.id, "content": "found: 1"}
    ]
    assert api.recorded[0].headers["content-type"] == "application/json"
    assert api.remaining == 0


def test_ids_are_unique_and_well_formed() -> None:
    ids = {tool_use("t", {})["id"] for _ in range(200)}
    assert len(ids) == 200
    assert all(i.startswith("toolu_01") for i in ids)
    assert tool_use("t", {}, id="toolu_fixed")["id"] == "toolu_fixed"
    body = message("hi").json()
    assert body["content"] == [{"type": "text", "text": "hi"}]
    assert body["stop_sequence"] is None
    assert body["usage"] == {"input_tokens": 10, "output_tokens": 5}


@pytest.mark.anyio
async def test_rate_limited_carries_retry_after(
    api: MessagesAPI, client: anthropic.AsyncAnthropic
) -> None:
    reply = rate_limited(7)
    api.add(reply)
    with pytest.raises(anthropic.RateLimitError) as info:
        await create(client)
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "7"
    assert info.value.request_id == reply.request_id
    assert info.value.type == "rate_limit_error"


@pytest.mark.anyio
async def test_overloaded_is_overloaded_error(
    api: MessagesAPI, client: anthropic.AsyncAnthropic
) -> None:
    api.add(overloaded())
    with pytest.raises(anthropic.OverloadedError) as info:
        await create(client)
    # SDK 2.12 has a dedicated class for 529; it subclasses InternalServerError.
    assert type(info.value) is anthropic.OverloadedError
    assert isinstance(info.value, anthropic.InternalServerError)
    assert info.value.status_code == 529


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("error_type", "expected"),
    [
        ("invalid_request_error", anthropic.BadRequestError),
        ("authentication_error", anthropic.AuthenticationError),
        ("permission_error", anthropic.PermissionDeniedError),
        ("not_found_error", anthropic.NotFoundError),
        ("request_too_large", anthropic.ContentTooLargeError),  # alias RequestTooLargeError
        ("api_error", anthropic.InternalServerError),
    ],
)
async def test_error_statuses_map_to_sdk_exceptions(
    api: MessagesAPI,
    client: anthropic.AsyncAnthropic,
    error_type: str,
    expected: type[anthropic.APIStatusError],
) -> None:
    status = ERROR_TYPES[error_type]
    api.add(error(status, error_type, "nope"))
    with pytest.raises(anthropic.APIStatusError) as info:
        await create(client)
    assert type(info.value) is expected
    assert info.value.status_code == status
    assert info.value.body == {
        "type": "error",
        "error": {"type": error_type, "message": "nope"},
        "request_id": info.value.request_id,
    }
    assert info.value.api_message == "nope"


@pytest.mark.anyio
async def test_malformed_json_raises_raw_json_decode_error(
    api: MessagesAPI, client: anthropic.AsyncAnthropic
) -> None:
    api.add(malformed())
    # The SDK does not wrap this: a plain json.JSONDecodeError escapes messages.create.
    with pytest.raises(json.JSONDecodeError) as info:
        await create(client)
    assert type(info.value) is json.JSONDecodeError


@pytest.mark.anyio
async def test_non_json_content_type_is_returned_as_text(
    api: MessagesAPI, client: anthropic.AsyncAnthropic
) -> None:
    api.add(malformed(b"<html>gateway</html>", content_type="text/html"))
    # Without strict response validation the SDK hands back the body as a str.
    result: object = await create(client)
    assert result == "<html>gateway</html>"


@pytest.mark.anyio
async def test_slow_reply_times_out_and_teardown_is_prompt() -> None:
    started = time.monotonic()
    with MessagesAPI([slow(message("late"), 30)]) as server:
        async with anthropic.AsyncAnthropic(
            base_url=server.url, api_key="test-key", max_retries=0, timeout=0.2
        ) as c:
            with pytest.raises(anthropic.APITimeoutError):
                await create(c)
    assert time.monotonic() - started < 2
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_slow_reply_within_timeout_is_served(
    api: MessagesAPI, client: anthropic.AsyncAnthropic
) -> None:
    api.add(slow(message("eventually"), 0.1))
    started = time.monotonic()
    result = await create(client)
    assert time.monotonic() - started >= 0.1
    assert isinstance(result.content[0], TextBlock)
    assert result.content[0].text == "eventually"


@pytest.mark.anyio
async def test_request_beyond_script_fails_loudly() -> None:
    # Leaving the block normally raises AssertionError because of the recorded problem.
    with (  # noqa: PT012
        pytest.raises(AssertionError, match="beyond the script"),
        MessagesAPI([message("only one")]) as server,
    ):
        async with anthropic.AsyncAnthropic(
            base_url=server.url, api_key="test-key", max_retries=0
        ) as c:
            await create(c)
            with pytest.raises(anthropic.InternalServerError, match="beyond the script"):
                await create(c)
        assert server.problems == ["request #2 to POST /v1/messages is beyond the script"]
        assert server.remaining == 0


@pytest.mark.anyio
async def test_beyond_script_is_not_retried_by_the_sdk() -> None:
    with MessagesAPI(strict=False) as server:
        async with anthropic.AsyncAnthropic(
            base_url=server.url, api_key="test-key", max_retries=3
        ) as c:
            with pytest.raises(anthropic.InternalServerError):
                await create(c)
    assert len(server.requests) == 1  # x-should-retry: false


@pytest.mark.anyio
async def test_unknown_route_and_streaming_are_problems() -> None:
    with MessagesAPI([message("unused")], strict=False, streaming=False) as server:
        async with anthropic.AsyncAnthropic(
            base_url=server.url, api_key="test-key", max_retries=0
        ) as c:
            with pytest.raises(anthropic.NotFoundError):
                await c.models.list()
            with pytest.raises(anthropic.BadRequestError, match="streaming is not supported"):
                await c.messages.create(model=MODEL, max_tokens=8, messages=HELLO, stream=True)
    assert len(server.problems) == 2
    assert server.remaining == 1


def test_url_and_reply_shapes() -> None:
    server = MessagesAPI()
    with pytest.raises(RuntimeError):
        _ = server.url
    with server:
        assert server.url.startswith("http://127.0.0.1:")
    reply = error(404, "not_found_error", "gone", headers={"x-extra": "1"})
    assert isinstance(reply, Reply)
    assert reply.json()["request_id"] == reply.request_id
    assert ("x-extra", "1") in reply.headers
    assert rate_limited(1.5).headers == (("retry-after", "1.5"),)


@pytest.mark.anyio
async def test_a_streaming_server_sends_each_reply_as_server_sent_events() -> None:
    """With streaming=True a streamed request gets its message as the API's events,
    which the real SDK assembles back into the same message, usage included."""
    blocks = [thinking("hmm"), text("Let me look."), tool_use("lookup", {"q": "p53"})]
    usage = {"input_tokens": 40, "output_tokens": 12, "cache_read_input_tokens": 7}
    with MessagesAPI([message(blocks, "tool_use", usage=usage)], streaming=True) as server:
        async with (
            anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0) as c,
            c.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream,
        ):
            events = [event.type async for event in stream]
            final = await stream.get_final_message()
    assert final.model_dump(include={"content", "stop_reason", "usage"}, exclude_none=True) == {
        "content": blocks,
        "stop_reason": "tool_use",
        "usage": usage,
    }
    assert events[0] == "message_start"
    assert server.recorded[0].body["stream"] is True


@pytest.mark.anyio
async def test_a_streaming_error_is_sent_before_any_event_and_a_stall_hangs() -> None:
    """An error reply to a streamed request is the plain error; a stalled reply stops
    after its first events and hangs until the server closes."""
    script = [rate_limited(3), stalled(message("never finished"), after_events=1)]
    with MessagesAPI(script, streaming=True) as server:
        async with anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0) as c:
            with pytest.raises(anthropic.RateLimitError):
                await c.messages.create(model=MODEL, max_tokens=8, messages=HELLO, stream=True)
            stream = await c.messages.create(model=MODEL, max_tokens=8, messages=HELLO, stream=True)
            seen: list[str] = []
            with anyio.move_on_after(0.3) as waited:
                async for event in stream:
                    seen.append(event.type)
            await stream.close()
    assert (seen, waited.cancelled_caught) == (["message_start"], True)
