"""The final answer: written by a model when one is configured, by a template
otherwise, and by a fixed last-resort message when writing it fails.

The answer is told the quorum decision, the error contexts and the health of
every service, so it can say what was found, what was not, how far to trust
it and what to try next. The user never sees a stack trace.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import anyio
from pydantic import BaseModel, ConfigDict, Field

from lyra import events
from lyra.children import AnthropicChild
from lyra.delegation import ErrorType, escape_for_reading, exception_text, valid_text
from lyra.supervisor._graceful import ErrorContext
from lyra.supervisor._health import ServiceHealth
from lyra.supervisor._quorum import QuorumDecision
from lyra.templates import Templates, render

_ANSWERS = Templates("lyra", escape=escape_for_reading)
"""The answer's template: every fact it shows is escaped, so none can forge metadata."""

LAST_RESORT: dict[ErrorType, str] = {
    ErrorType.TIMEOUT: "The run ran out of time before an answer could be written. "
    "Results that finished are in the run directory; try again with a longer timeout.",
    ErrorType.IDLE: "The run stopped making progress before an answer could be written. "
    "Results that finished are in the run directory; try again.",
    ErrorType.BUDGET: "The budget ran out before an answer could be written. "
    "Results that finished are in the run directory; raise the budget and try again.",
    ErrorType.CONNECTION: "A service could not be reached, so no answer could be written. "
    "Results that finished are in the run directory; try again.",
    ErrorType.RATE_LIMIT: "A service is limiting requests, so no answer could be written. "
    "Wait a minute and run the same command again.",
    ErrorType.NOT_FOUND: "Nothing requested could be found. Check the identifiers and try again.",
    ErrorType.AUTH: "Access to a service was refused. Check credentials, then try again.",
    ErrorType.DATA: "A service returned unusable data, so no answer could be written. "
    "Results that finished are in the run directory.",
    ErrorType.ENVIRONMENT: "Something the run needs is missing on this machine (a module, "
    "a file, a permission). Results that finished are in the run directory; see events.jsonl.",
    ErrorType.UNKNOWN: "Something unexpected stopped the answer from being written. "
    "Results that finished are in the run directory (see output.json and events.jsonl).",
}


class AnswerFacts(BaseModel):
    """Everything the answer may say, and nothing more."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    question: str
    found: list[str] = Field(default_factory=list)
    partial: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)
    comparison: list[str] = Field(default_factory=list)
    quorum: QuorumDecision | None = None
    health: list[ServiceHealth] = Field(default_factory=list)
    errors: list[ErrorContext] = Field(default_factory=list)
    next_steps: list[str] = Field(default_factory=list)
    more: dict[str, int] = Field(default_factory=dict)
    """How many more ``found``, ``partial`` or ``failed`` there are than the list
    shows: a run too large to list (a streamed one) gives a sample of each."""


class AnswerWriter(Protocol):
    """Turns the facts into the answer text."""

    async def write(self, facts: AnswerFacts) -> str:
        """The answer; may raise, and then the next writer takes over."""
        ...


class TemplateAnswerWriter:
    """The answer from the ``answer.md.j2`` template: no model needed."""

    async def write(self, facts: AnswerFacts) -> str:
        """Render the facts."""
        degraded = [h for h in facts.health if not h.healthy]
        return _ANSWERS.render("answer.md.j2", facts=facts, degraded=degraded).strip()


class ModelAnswerWriter:
    """The answer written by an Anthropic model from the facts (and only them)."""

    def __init__(self, client: Any = None, model: str | None = None) -> None:
        self._child = AnthropicChild(client=client, model=model, max_turns=1)

    async def write(self, facts: AnswerFacts) -> str:
        """Ask the model; an empty answer counts as a failure."""
        async with self._child.session() as client:
            response = await client.messages.create(
                model=self._child.model,
                max_tokens=1500,
                system=render("answer_system.txt.j2"),
                messages=[{"role": "user", "content": json.dumps(facts.model_dump(mode="json"))}],
            )
        text = "\n".join(b.text for b in response.content if b.type == "text").strip()
        if not text:
            raise ValueError("the model wrote an empty answer")
        return escape_for_reading(valid_text(text))  # a model's words are untrusted too


async def final_answer(
    facts: AnswerFacts, writer: AnswerWriter | None = None, *, timeout: float = 60.0
) -> str:
    """The answer from ``writer``, else the template, else the last-resort message.

    Each writer gets at most ``timeout`` seconds: a slow model never holds
    the answer back.
    """
    writers: list[AnswerWriter] = [writer] if writer is not None else []
    if not isinstance(writer, TemplateAnswerWriter):
        writers.append(TemplateAnswerWriter())
    failed: str | None = None
    for candidate in writers:
        try:
            with anyio.fail_after(timeout):
                answer = await candidate.write(facts)
        except Exception as exc:  # noqa: BLE001 - the answer must exist whatever broke
            failed = failed or f"{type(candidate).__name__} failed: {exception_text(exc)}"
            events.warning(
                events.ANSWER_WRITER_FAILED,
                writer=type(candidate).__name__,
                error=exception_text(exc),
            )
            continue
        if failed is not None:  # say so: a model-written answer was asked for
            answer = f"(Written from a template; {failed}.)\n{answer}"
        return answer
    error_type = facts.errors[0].error_type if facts.errors else ErrorType.UNKNOWN
    return LAST_RESORT[error_type]
