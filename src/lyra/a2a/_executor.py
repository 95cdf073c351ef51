"""A delegation as an A2A task: the one place that maps lyra's outcomes to task states.

| lyra                                        | A2A task                                 |
| ------------------------------------------- | ---------------------------------------- |
| a completed step                            | ``working``, the step as its message     |
| other progress (tool call, charge, beat)    | ``working`` without a message            |
| success                                     | the output as an artifact, ``completed`` |
| a question (``ctx.ask``; the child waits)   | ``input-required``: the next message answers |
| ``missing_context`` (its blocker the question) | ``input-required``: the next message answers |
| ``invalid_task``                            | ``rejected``                             |
| ``error_type`` ``auth`` (a 401/403)         | ``auth-required``                        |
| any other failure                           | ``failed``                               |
| ``tasks/cancel``                            | the child stopped, ``canceled``          |
| the server stops (Ctrl+C, SIGTERM)          | the child stopped, ``failed``, saying so |
| a message to a task that waits for none     | refused: ``UnsupportedOperationError``   |

Every status update carries the task's usage so far (``metadata["usage"]``, see
:mod:`lyra.children._a2a_wire`); a final one carries the report's fields
(``parse_report``'s) as a data part, and a failure's the report text too (a
success's text is its ``output`` artifact).

A child that asks (``ctx.ask``) waits for the answer while its deadline runs:
the task is ``input-required`` with the question, and the client's next message
is the answer, returned by ``ctx.ask`` in the same attempt, whose steps go on
arriving on that message's stream. A task whose child no longer waits (it
ended on ``missing_context``, or its deadline ran out while it waited) runs
again on the next message: the prompt, enriched with the question and its
answer (recovery's enrichment), under the same limits, the answer ready for the
same question; after ``auth-required`` the next message runs the prompt again.
A message without text (blank, or data parts only) is no answer: the task stays
``input-required`` with the same question, its metadata saying the answer was
refused (``answer_refused``); the child, if it still waits, goes on waiting and
nothing runs, as ``lyra answer`` and MCP's ``answer_delegation`` refuse a blank
answer. A message sent while the task works is refused as it comes (the SDK would
hold it until the task's request ended): it answers no question asked later.
"""

from __future__ import annotations

import logging
from contextlib import aclosing
from dataclasses import dataclass

import anyio
from a2a.helpers import get_message_text, new_data_part, new_task, new_text_part
from a2a.server.agent_execution import (
    AgentExecutor,
    RequestContext,
    SimpleRequestContextBuilder,
)
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskStore, TaskUpdater
from a2a.types import Part, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError

from lyra.a2a._delegations import (
    Beat,
    Delegation,
    Delegations,
    Finished,
    Halted,
    Happening,
    Question,
    Step,
)
from lyra.children.a2a import KEEPALIVE, usage_metadata
from lyra.delegation import (
    Child,
    ChildFailure,
    DelegationResult,
    ErrorType,
    FailureCategory,
    Limits,
    Usage,
)
from lyra.recovery import RecoveryPolicy, enriched_prompt

_S = TaskState


@dataclass
class _Task:
    """What the server keeps of a task between its messages."""

    prompt: str
    delegation: Delegation | None = None
    question: str | None = None
    """What the child asked, while the task waits for the answer."""
    waiting: bool = False
    """True while the task waits for the client's next message (input- or auth-required)."""


class DelegationExecutor(AgentExecutor):
    """Runs each A2A task as a lyra delegation of ``child`` under ``limits``, recovering
    as ``policy`` says."""

    def __init__(
        self, child: Child, limits: Limits, policy: RecoveryPolicy, delegations: Delegations
    ) -> None:
        self.child = child
        self.limits = limits
        self.policy = policy
        self.delegations = delegations
        self._tasks: dict[str, _Task] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Start the task (or resume it with the answer) and report until it ends or asks."""
        task_id, text = str(context.task_id), context.get_user_input()
        if context.message is None:  # the SDK calls it for a message, never without
            raise _refusal(InvalidParamsError("a task starts with a message"))
        if context.current_task is None:
            # (not new_task_from_user_message: it raises on an empty text part, where an
            # empty prompt is a task rejected as invalid_task, as over MCP)
            started = new_task(
                task_id, str(context.context_id), _S.TASK_STATE_SUBMITTED, history=[context.message]
            )
            await event_queue.enqueue_event(started)
            task = self._tasks[task_id] = _Task(prompt=text)
            delegation = task.delegation = self._start(task.prompt)
        else:
            current = context.current_task
            self._check_waits(str(current.id), current)
            if current.status.state == _S.TASK_STATE_INPUT_REQUIRED and not text.strip():
                await self._ask_again(current, event_queue, _NO_ANSWER)
                return
            task, delegation = await self._resumed(task_id, current, text)
        updater = TaskUpdater(event_queue, task_id, str(context.context_id))
        await updater.start_work()
        async with aclosing(delegation.happenings()) as happenings:
            async for happening in happenings:
                if await self._report(happening, task_id, task, updater):
                    return
        # Stopped without a result: only cancel() does that, and the SDK cancels this
        # request right after; returning first could end the client's stream before
        # cancel() has written ``canceled`` to it.
        await anyio.sleep_forever()

    def _start(self, prompt: str, answers: dict[str, str] | None = None) -> Delegation:
        delegation = Delegation(self.child, prompt, self.limits, self.policy, answers)
        return self.delegations.start(delegation)

    async def _report(
        self, happening: Happening, task_id: str, task: _Task, updater: TaskUpdater
    ) -> bool:
        """Say ``happening`` as the task's status; True when this message's exchange
        ends with it (the task ended, or waits for an answer)."""
        match happening:
            case Step(text=step, usage=usage):
                message = updater.new_agent_message([new_text_part(step)])
                await updater.update_status(
                    _S.TASK_STATE_WORKING, message, metadata=_metadata(usage)
                )
            case Beat(usage=usage, keepalive=keepalive):
                metadata = _metadata(usage)
                if keepalive:
                    metadata = {**(metadata or {}), KEEPALIVE: True}
                await updater.update_status(_S.TASK_STATE_WORKING, metadata=metadata)
            case Question(text=question, usage=usage):
                assert task.delegation is not None
                if not task.delegation.waits_on(happening):
                    return False  # answered meanwhile, or its wait is over
                task.question, task.waiting = question, True
                message = updater.new_agent_message([new_text_part(question)])
                await updater.update_status(
                    _S.TASK_STATE_INPUT_REQUIRED, message, metadata=_metadata(usage)
                )
                return True
            case Halted(usage=usage):
                message = updater.new_agent_message([new_text_part(_HALTED)])
                await updater.update_status(
                    _S.TASK_STATE_FAILED, message, metadata=_metadata(usage)
                )
                self._tasks.pop(task_id, None)
                return True
            case Finished(result=result, usage=usage):
                await self._finish(task_id, task, result, usage, updater)
                return True
        return False

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Stop the task's child (waiting until it has stopped), then say so."""
        task = self._tasks.pop(str(context.task_id), None)
        if task is not None and task.delegation is not None:
            await task.delegation.stop()
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()

    async def _ask_again(self, current: Task, event_queue: EventQueue, refusal: str) -> None:
        """A message that is no answer to a task that asked (without text, or sent before
        the question): the question again (this server's, else the one its status says),
        still waiting, the ``refusal`` in its metadata."""
        task = self._tasks.get(current.id)
        question = task.question if task is not None else None
        if question is None:
            question = get_message_text(current.status.message)
        delegation = task.delegation if task is not None else None
        usage = delegation.usage if delegation is not None else Usage()
        updater = TaskUpdater(event_queue, current.id, current.context_id)
        await updater.update_status(
            _S.TASK_STATE_INPUT_REQUIRED,
            updater.new_agent_message([new_text_part(question)]),
            metadata={**(_metadata(usage) or {}), "answer_refused": refusal},
        )

    def waits(self, task_id: str) -> bool | None:
        """True while the task waits for the client's next message; ``None`` for a task
        this server does not know (it ended, or it ran on a server before a restart)."""
        task = self._tasks.get(task_id)
        return None if task is None else task.waiting

    def _check_waits(self, task_id: str, current: Task) -> None:
        """Refuse a message to a task that waits for none: one still working, or one that
        ended meanwhile (the SDK held the message until the task's request ended, and may
        hand over the status it had before). A task this server does not know waits as
        its stored status says (a server restarted over a persistent task store)."""
        task = self._tasks.get(task_id)
        asked = current.status.state in _WAITING  # (as the task stood when it was handed over)
        waits = asked and (task is None or task.waiting)
        if not waits:
            raise _not_waiting(task_id, "still working" if task is not None else "over")

    async def _resumed(self, task_id: str, current: Task, text: str) -> tuple[_Task, Delegation]:
        """A task's next message: the answer its child waits for; else the answer to
        the question it ended on, or (after ``auth-required``) the word to try again,
        either of which runs the task again (``text`` then changes nothing)."""
        task = self._tasks.get(task_id) or _Task(prompt=_first_prompt(current))
        self._tasks[task_id] = task
        question, task.question, task.waiting = task.question, None, False
        asked = current.status.state == _S.TASK_STATE_INPUT_REQUIRED and question is not None
        answers: dict[str, str] = {}
        if task.delegation is not None:
            if asked and task.delegation.answer(text):
                return task, task.delegation  # ctx.ask returns it: the same attempt goes on
            await task.delegation.stop()  # past waiting: it ended (or ends now)
            answers = task.delegation.answers
        if asked:
            assert question is not None
            failure = ChildFailure(
                category=FailureCategory.MISSING_CONTEXT,
                message=question,
                session_id="",
                duration=0.0,
                blocked_on=question,
            )
            task.prompt = enriched_prompt(task.prompt, failure, {"answer": text})
            answers = {**answers, question: text}
        task.delegation = self._start(task.prompt, answers)
        return task, task.delegation

    async def _finish(
        self, task_id: str, task: _Task, result: DelegationResult, usage: Usage, up: TaskUpdater
    ) -> None:
        """The result as the task's last status: terminal, or a question that waits."""
        metadata, failure = _metadata(usage), result.failure
        if failure is None:
            await up.add_artifact([new_text_part(result.output or "")], name="output")
            message = up.new_agent_message([_fields(result)])
            await up.update_status(_S.TASK_STATE_COMPLETED, message, metadata=metadata)
            self._tasks.pop(task_id, None)
            return
        if failure.category is FailureCategory.MISSING_CONTEXT:
            state, task.question = (
                _S.TASK_STATE_INPUT_REQUIRED,
                failure.blocked_on or failure.message,
            )
            message = up.new_agent_message([new_text_part(task.question), _fields(result)])
        else:
            state = _state_of(failure)
            message = up.new_agent_message([new_text_part(result.report), _fields(result)])
        task.waiting = state in _WAITING
        await up.update_status(state, message, metadata=metadata)
        if not task.waiting:  # a waiting task keeps its prompt for the next message
            self._tasks.pop(task_id, None)


_NO_ANSWER = "the message held no text: the question still waits for an answer"
_HALTED = (
    "lyra a2a is stopping: the child was stopped before it finished, and no report was "
    "made; send the task again once the server is back"
)


class ArrivalNoted(SimpleRequestContextBuilder):
    """The SDK's request context, built as each message comes in: a message to a task
    this server runs that waits for none is refused here, before the SDK queues it
    behind the task's running request (a client would wait for the task's end). So is
    one to a task that has ended: the SDK refuses it too, but only once it has set up
    the task's event queues, which it then never closes (a2a-sdk 1.3: they were still
    dispatching when the server stopped, and asyncio said so on Ctrl+C)."""

    def __init__(self, executor: DelegationExecutor, store: TaskStore) -> None:
        super().__init__()
        self._executor = executor
        self._store = store

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        if task_id:
            waits = self._executor.waits(task_id)
            if waits is False:
                raise _not_waiting(task_id, "still working")
            if waits is None:  # (a task this server does not know: ended, or from before)
                stored = await self._store.get(task_id, context)
                if stored is not None and stored.status.state in _ENDED:
                    raise _not_waiting(task_id, "over")
        return await super().build(context, params, task_id, context_id, task)


def _not_waiting(task_id: str, state: str) -> Exception:
    """The refusal of a message to a task that waits for none (``state``: how it is)."""
    return _refusal(
        UnsupportedOperationError(
            message=f"task {task_id} is {state}: a message continues a task only while it "
            "waits for one (input-required, auth-required); send a new task instead"
        )
    )


_WAITING = frozenset({_S.TASK_STATE_INPUT_REQUIRED, _S.TASK_STATE_AUTH_REQUIRED})
_ENDED = frozenset({_S.TASK_STATE_COMPLETED, _S.TASK_STATE_FAILED, _S.TASK_STATE_CANCELED,
                    _S.TASK_STATE_REJECTED})  # fmt: skip


class RefusalsUnlogged(logging.Filter):
    """Drops the A2A SDK's error records (each with a traceback) of the refusals this
    executor raises on purpose -- a message to a task that waits for none: the client
    is answered with the error; the server's log need not say it as a crash."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not getattr(error, _REFUSAL, False)  # (the SDK's own errors are logged)


_REFUSAL = "lyra_refusal"


def _refusal(error: Exception) -> Exception:
    """``error``, marked as one of this executor's deliberate refusals."""
    setattr(error, _REFUSAL, True)
    return error


def quiet_refusals() -> None:
    """Install :class:`RefusalsUnlogged` on the SDK's task logger (once)."""
    logger = logging.getLogger(_SDK_TASK_LOGGER)
    if not any(isinstance(known, RefusalsUnlogged) for known in logger.filters):
        logger.addFilter(RefusalsUnlogged())


_SDK_TASK_LOGGER = "a2a.server.agent_execution.active_task"


def _state_of(failure: ChildFailure) -> TaskState:
    """The task state a failure other than ``missing_context`` ends in."""
    if failure.category is FailureCategory.INVALID_TASK:
        return _S.TASK_STATE_REJECTED
    if failure.error_type is ErrorType.AUTH:
        return _S.TASK_STATE_AUTH_REQUIRED
    return _S.TASK_STATE_FAILED


def _fields(result: DelegationResult) -> Part:
    """The report's fields (what ``parse_report`` reads from its text) as a data part."""
    return new_data_part(result.to_report().model_dump(mode="json"))


def _metadata(usage: Usage) -> dict[str, object] | None:
    return usage_metadata(usage) or None


def _first_prompt(task: Task) -> str:
    """The task's first message from the client (a task this server did not start)."""
    first = next((m for m in task.history if m.role == Role.ROLE_USER), None)
    return get_message_text(first) if first is not None else ""
