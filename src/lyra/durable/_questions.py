"""A durable task's question while it waits for its answer: how the database holds
it, and the one way to read it and to answer it.

A task whose child asked a question nobody answered in the attempt (``ctx.ask``)
parks it in its workflow (see :mod:`lyra.durable._engine`): the workflow's
attributes say so (:func:`parked`), and it waits for a message on the
question's topic (:func:`topic`) for up to ``policy.answer_wait`` seconds. DBOS
keeps both in the database, so neither the question nor an answer is lost when
the process running the task ends: the workflow, recovered by a resumed run or
by another worker, waits again (what is left of its wait), and takes an answer
sent meanwhile at once.

Everything that reads or answers questions goes through :func:`waiting` and
:func:`answer`: the supervisor's watch over a running call
(:meth:`~lyra.durable.DurableExecutor.run`, which says a question waits and how
to answer it, and hands it to MCP's durable runner), and ``lyra answer``, which
uses a DBOS client and launches no DBOS, so it never recovers the run's
workflows in its own process.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any, Protocol

ASKS = "lyra.asks"
"""Attribute: true while the workflow waits for an answer (PostgreSQL filters on it)."""
QUESTION = "lyra.question"
SUBJECT = "lyra.subject"
UNTIL = "lyra.until"
"""Attribute: when the wait ends (seconds since the epoch)."""
ANSWERED = "lyra.answered"
"""Attribute: an answer was sent and waits for the task to take it."""
CLEARED: dict[str, Any] = {ASKS: False, QUESTION: None, SUBJECT: None, UNTIL: None, ANSWERED: None}
"""The attributes of a workflow whose question is answered, or whose wait ended."""
_OPEN = ["PENDING", "ENQUEUED"]
"""A task that can still take an answer: running, or back on the queue after its
worker died."""


class Mailbox(Protocol):
    """What reads and answers questions: ``DBOS`` itself (launched in this process)
    or a ``DBOSClient`` (launched nowhere)."""

    async def list_workflows_async(
        self,
        *,
        status: list[str] | None = None,
        workflow_id_prefix: str,
        load_input: bool,
        load_output: bool,
        attributes: dict[str, Any] | None = None,
        limit: int | None = None,
    ) -> list[Any]: ...

    async def send_async(self, destination_id: str, message: Any, topic: str | None) -> None: ...

    async def update_workflow_attributes_async(
        self, workflow_id: str, attributes: dict[str, Any] | None, *, merge: bool
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class WaitingQuestion:
    """A question a durable task waits on."""

    workflow_id: str
    """``<run id>/<call>/<position>-<subject>``: names the task in the database."""
    subject: str | None
    question: str
    until: float | None
    """When the wait ends (seconds since the epoch); an answer sent later is still
    taken by a task that was not running then (it looks once as it resumes)."""
    answered: bool
    """An answer was sent; the task takes it when it runs (at once, if it runs now)."""

    @property
    def run_id(self) -> str:
        return self.workflow_id.split("/", 1)[0]

    @property
    def call(self) -> str:
        """The call of the run it belongs to (for ``lyra mcp``, the delegation id)."""
        parts = self.workflow_id.split("/")
        return parts[1] if len(parts) > 2 else ""

    def named(self, name: str) -> bool:
        """True when ``name`` names this task: its workflow ID, subject or call."""
        return name in (self.workflow_id, self.subject, self.call)


def topic(question: str) -> str:
    """The topic an answer to ``question`` travels on (the same in every process)."""
    return "lyra.answer." + hashlib.sha256(question.encode()).hexdigest()[:32]


def parked(question: str, subject: str | None, wait: float) -> dict[str, Any]:
    """The attributes of a workflow that waits ``wait`` seconds for an answer."""
    until = time.time() + wait
    return {ASKS: True, QUESTION: question, SUBJECT: subject, UNTIL: until, ANSWERED: False}


async def waiting(mailbox: Mailbox, prefix: str, *, postgres: bool) -> list[WaitingQuestion]:
    """The questions waiting in the tasks whose workflow IDs start with ``prefix``
    (``""``: every run in the database), oldest task first. PostgreSQL picks them
    by their attribute; on SQLite (an embedded run: only its running tasks are
    open) they are picked here."""
    found = await mailbox.list_workflows_async(
        status=_OPEN,
        workflow_id_prefix=prefix,
        load_input=False,
        load_output=False,
        attributes={ASKS: True} if postgres else None,
    )
    questions = []
    for status in found:
        marks = status.attributes or {}
        if marks.get(ASKS) is True and isinstance(marks.get(QUESTION), str):
            until = marks.get(UNTIL)
            questions.append(
                WaitingQuestion(
                    workflow_id=status.workflow_id,
                    subject=marks.get(SUBJECT),
                    question=marks[QUESTION],
                    until=float(until) if isinstance(until, int | float) else None,
                    answered=marks.get(ANSWERED) is True,
                )
            )
    return questions


async def known_run(mailbox: Mailbox, prefix: str) -> bool:
    """True when some task's workflow ID starts with ``prefix`` (a run the database
    knows, whatever its tasks' state)."""
    found = await mailbox.list_workflows_async(
        workflow_id_prefix=prefix, limit=1, load_input=False, load_output=False
    )
    return bool(found)


async def answer(mailbox: Mailbox, asked: WaitingQuestion, text: str) -> None:
    """Send ``text`` to the task as the answer to its question; marked answered, so
    that nobody answers it twice (the task takes the first answer it finds)."""
    await mailbox.send_async(asked.workflow_id, text, topic(asked.question))
    await mailbox.update_workflow_attributes_async(asked.workflow_id, {ANSWERED: True}, merge=True)
