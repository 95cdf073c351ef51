"""A scripted model of Google ADK's model interface (``BaseLlm``), for offline tests.

:class:`ScriptedLlm` answers each request with the next turn of its script:

- an ``LlmResponse`` (see :func:`reply`: text, function calls, usage, a finish
  reason), yielded as it is;
- a list: a streamed answer, its chunks (``partial=True`` responses, then the
  whole) yielded in order, a number in it a pause of that many seconds;
- an exception, raised from the model call (``google.genai``'s ``ClientError`` /
  ``ServerError`` are what ADK's Gemini model raises for HTTP errors);
- a number: wait that many seconds first (cancellable), then the next entry.

Every request (ADK's ``LlmRequest``: the contents so far) is recorded in
:attr:`ScriptedLlm.requests`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from typing import Any

import anyio
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import errors, types
from pydantic import PrivateAttr


def reply(
    text: str = "",
    *calls: tuple[str, dict[str, Any]],
    tokens: tuple[int, int] | None = (100, 20),
    finish_reason: types.FinishReason | None = None,
    partial: bool | None = None,
) -> LlmResponse:
    """A model turn: ``text``, function calls ``(name, args)``, usage (input, output
    tokens; ``None``: none reported), a finish reason."""
    parts = [types.Part(text=text)] if text else []
    parts += [types.Part(function_call=types.FunctionCall(name=n, args=a)) for n, a in calls]
    usage = None
    if tokens is not None:
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=tokens[0], candidates_token_count=tokens[1]
        )
    return LlmResponse(
        content=types.Content(role="model", parts=parts),
        usage_metadata=usage,
        finish_reason=finish_reason,
        partial=partial,
    )


def http_error(status: int, *, retry_after: str | None = None) -> errors.APIError:
    """The error google-genai raises for an HTTP ``status`` (with a RetryInfo delay)."""
    names = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED"}
    error: dict[str, Any] = {
        "code": status,
        "message": f"HTTP {status}",
        "status": names.get(status, "INTERNAL"),
    }
    if retry_after is not None:
        retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_after}
        error["details"] = [retry]
    kind = errors.ClientError if status < 500 else errors.ServerError
    return kind(status, {"error": error})


class ScriptedLlm(BaseLlm):
    """A scripted ADK model (see the module docstring)."""

    model: str = "scripted"
    _turns: Iterator[Any] = PrivateAttr()
    _requests: list[LlmRequest] = PrivateAttr(default_factory=list)

    @classmethod
    def of(cls, *turns: Any, model: str = "scripted") -> ScriptedLlm:
        """A model answering ``turns`` in order (an ``Iterator`` for an endless script)."""
        llm = cls(model=model)
        llm._turns = turns[0] if len(turns) == 1 and isinstance(turns[0], Iterator) else iter(turns)
        return llm

    @property
    def requests(self) -> list[LlmRequest]:
        return self._requests

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self._requests.append(llm_request)
        turn = next(self._turns)
        while isinstance(turn, int | float):
            await anyio.sleep(turn)
            turn = next(self._turns)
        if isinstance(turn, BaseException):
            raise turn
        for chunk in turn if isinstance(turn, list) else [turn]:
            if isinstance(chunk, int | float):
                await anyio.sleep(chunk)
            else:
                yield chunk


def tool_results(request: LlmRequest) -> list[str]:
    """The results of the function calls a request carried, in order."""
    return [
        str((part.function_response.response or {}).get("result"))
        for content in request.contents
        for part in content.parts or ()
        if part.function_response is not None
    ]
