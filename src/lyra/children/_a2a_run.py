"""One :class:`~lyra.children.a2a.A2AChild` run: a remote A2A task followed to its end
under the attempt's limits. Imported when a child is built, never inside a deadline."""

from __future__ import annotations

import ssl
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, suppress
from typing import Any, cast

import anyio
import httpx
from a2a.client import A2ACardResolver, A2AClientError, Client, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, get_text_parts, new_text_message
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from lyra import events
from lyra.children._a2a_wire import KEEPALIVE, USAGE_EXTENSION, report_of, usage_of
from lyra.children._framework import output_text
from lyra.delegation import ChildContext, FailureCategory, Usage
from lyra.errors import ConfigurationError

CANCEL_GRACE = 0.5
"""Most seconds a stopped run waits for the remote to confirm ``tasks/cancel``."""
FOLLOW_AGAIN = 3
"""How many times a stream that broke before the task ended is followed again."""
CONTEXT_KEY = "a2a_context_id"
"""Where ``ctx.state`` keeps the remote's ``contextId`` for the next attempt."""
POLL_FIRST, POLL_MOST = 0.1, 2.0
"""Seconds between two ``tasks/get`` of a remote that does not stream: the first wait,
growing by half each time up to the most."""

_TIMEOUT = httpx.Timeout(30.0, read=None)  # a quiet stream is the idle timeout's to judge
_S = TaskState
_ENDED = frozenset({_S.TASK_STATE_COMPLETED, _S.TASK_STATE_FAILED, _S.TASK_STATE_CANCELED,
                    _S.TASK_STATE_REJECTED})  # fmt: skip
_PAUSED = frozenset({_S.TASK_STATE_INPUT_REQUIRED, _S.TASK_STATE_AUTH_REQUIRED})
_METERED = ("max_tokens", "max_cost_usd", "max_turns")
"""The limits a remote's usage reports keep."""


class Remote:
    """One remote agent: where it is, what goes with each request, its card once read."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url = url
        self.headers = headers
        self._card: AgentCard | None = None
        # Made once: an HTTP client per run (clients belong to one event loop) would
        # otherwise load the CA bundle each time, 25 ms of CPU.
        self._tls = httpx.create_ssl_context()
        _warm(self._tls)

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        """Send ``prompt`` as a new task and follow it to its end."""
        options: dict[str, Any] = {"headers": self.headers, "timeout": _TIMEOUT}
        async with httpx.AsyncClient(verify=self._tls, **options) as http:
            if self._card is None:
                self._card = await A2ACardResolver(http, self.url).get_agent_card()
            _check_measurable(self._card, ctx, self.url)
            client = ClientFactory(ClientConfig(httpx_client=http)).create(self._card)
            return await _Conversation(client, ctx, self.url, self._card).run(prompt)


def _warm(tls: ssl.SSLContext) -> None:
    """Load now what a first run would load inside its deadline: the HTTP transport
    (httpcore, h11) and protobuf's timestamp parser (Python's ``_strptime``)."""
    httpx.AsyncClient(verify=tls)
    Timestamp().FromJsonString("1970-01-01T00:00:00Z")


def _check_measurable(card: AgentCard, ctx: ChildContext, url: str) -> None:
    """Refuse a budget the remote cannot be held to: it must report its usage. (A
    ``max_tool_calls`` counts this tree's tool calls: the remote's are its own.)"""
    left = ctx.budget_left
    limited = [name for name in _METERED if getattr(left, name) is not None]
    if limited and not _speaks_lyra(card):
        raise ConfigurationError(
            f"the A2A agent at {url} reports no usage (its card declares no "
            f"{USAGE_EXTENSION} extension), so a budget of {', '.join(limited)} cannot be "
            "kept; delegate to it without a token, cost or turn budget"
        )


def _speaks_lyra(card: AgentCard) -> bool:
    """True when the remote declares lyra's extension: its usage, keep-alives and
    reports are read as ``_a2a_wire`` says (from any other agent, they are its data)."""
    return any(extension.uri == USAGE_EXTENSION for extension in card.capabilities.extensions)


class _Conversation:
    """The messages of one remote task, and what its events say so far."""

    def __init__(self, client: Client, ctx: ChildContext, url: str, card: AgentCard) -> None:
        self.client = client
        self.ctx = ctx
        self.url = url
        self.lyra = _speaks_lyra(card)
        self.streams = card.capabilities.streaming
        self.task_id: str | None = None
        self.state = _S.TASK_STATE_UNSPECIFIED
        self.status: TaskStatus | None = None
        self.artifacts: dict[str, list[Part]] = {}
        self.reply: Message | None = None  # an agent that answers without a task
        self.charged = Usage()
        self.answered: TaskStatus | None = None
        """The status whose question was answered last: until the task's status changes,
        the task is still where it was asked, not paused again."""

    async def run(self, prompt: str) -> str:
        text = prompt
        sent: dict[str, str] = {}  # the questions answered in this task, and the answers
        try:
            while True:
                request = SendMessageRequest(message=self._message(text))
                # A remote that does not stream answers a send at once, and is read
                # (tasks/get) while it works: its updates are heartbeats and steps too.
                request.configuration.return_immediately = not self.streams
                await self._follow(self.client.send_message(request))
                if self.state != _S.TASK_STATE_INPUT_REQUIRED:
                    return self._outcome()
                question = self._status_text() or "The remote agent asks for input."
                if question in sent:  # (sent again, the same answer would loop at once)
                    self.ctx.block(
                        FailureCategory.MISSING_CONTEXT,
                        f"The remote agent asked again after it was answered: {question} "
                        f"(the answer it did not take: {sent[question]})",
                    )
                text = sent[question] = await self.ctx.ask(question)
                self.answered = self.status
        finally:
            if self.task_id is not None and self.state not in _ENDED:
                await self._cancel()

    def _message(self, text: str) -> Message:
        context_id = self.ctx.state.get(CONTEXT_KEY)
        return new_text_message(
            text,
            role=Role.ROLE_USER,
            task_id=self.task_id,
            context_id=context_id if isinstance(context_id, str) else None,
        )

    async def _follow(self, stream: AsyncIterator[StreamResponse]) -> None:
        """Read ``stream`` until the task ends or pauses; follow a broken one again."""
        for again in range(FOLLOW_AGAIN + 1):
            try:  # (the SDK's streams are async generators: closed when left)
                async with aclosing(cast(AsyncGenerator[StreamResponse], stream)) as events_:
                    async for event in events_:
                        self._on(event)
                        if self._settled:
                            return
            except UnsupportedOperationError:  # it ended between tasks/get and resubscribe
                if not again:
                    raise
            if self.task_id is None:
                return
            if not self.streams:  # (no stream to follow again: the SDK cannot resubscribe)
                await self._poll()
                return
            self._on_task(await self.client.get_task(GetTaskRequest(id=self.task_id)))
            if self._settled:
                return
            stream = self.client.subscribe(SubscribeToTaskRequest(id=self.task_id))

    async def _poll(self) -> None:
        """Ask a remote that does not stream for its task until it ends or pauses; a
        changed status is a step or a heartbeat, as a streamed update is."""
        assert self.task_id is not None
        idle = self.ctx.idle_timeout
        most = POLL_MOST if idle is None else min(POLL_MOST, idle / 4)  # (read well within it)
        wait = POLL_FIRST
        while not self._settled:
            await anyio.sleep(wait)
            wait = min(most, wait * 1.5)
            task = await self.client.get_task(GetTaskRequest(id=self.task_id))
            if task.status != self.status:
                self._on_status(task.status, task.metadata)
            self._on_task(task)

    @property
    def _settled(self) -> bool:
        if self.state in _PAUSED:  # (paused anew, not the status an answer was sent to)
            return self.status != self.answered
        return self.reply is not None or self.state in _ENDED

    def _on(self, event: StreamResponse) -> None:
        kind = event.WhichOneof("payload")
        if kind == "task":
            self._on_task(event.task)
        elif kind == "status_update":
            self._on_status(event.status_update.status, event.status_update.metadata)
        elif kind == "artifact_update":
            self._on_artifact(event.artifact_update)
        elif kind == "message":
            self.reply = event.message
        if kind != "status_update":  # a status update is a step or a heartbeat itself
            self.ctx.heartbeat()

    def _on_task(self, task: Task) -> None:
        if not self.task_id:
            self.task_id = task.id
            self.ctx.state[CONTEXT_KEY] = task.context_id
        self.artifacts = {artifact.artifact_id: list(artifact.parts) for artifact in task.artifacts}
        self._charge(task.metadata)
        self.state, self.status = task.status.state, task.status

    def _on_status(self, status: TaskStatus, metadata: Struct) -> None:
        self.state, self.status = status.state, status
        text = self._status_text()
        if status.state == _S.TASK_STATE_WORKING and text:
            self.ctx.step(text)  # done there, before the charge its update carries can stop it
        elif not (self.lyra and _keepalive(metadata)):
            self.ctx.heartbeat()
        self._charge(metadata)

    def _on_artifact(self, update: TaskArtifactUpdateEvent) -> None:
        artifact = update.artifact
        parts = self.artifacts.setdefault(artifact.artifact_id, [])
        if not update.append:
            parts.clear()
        parts.extend(artifact.parts)

    def _charge(self, metadata: Struct) -> None:
        """Charge what the remote's reported usage grew by since the last report."""
        if not (self.lyra and metadata.fields):
            return
        usage = usage_of(MessageToDict(metadata))
        if usage is None:
            return
        before, self.charged = self.charged, usage
        grown = {
            name: max(0, getattr(usage, name) - getattr(before, name))
            for name in ("input_tokens", "output_tokens", "turns")
        }
        self.ctx.charge(cost_usd=max(0.0, usage.cost_usd - before.cost_usd), **grown)

    def _status_text(self) -> str:
        message = self.status.message if self.status is not None else None
        return "\n".join(get_text_parts(message.parts)) if message is not None else ""

    def _outcome(self) -> str:
        """The output of a completed task; any other end raised for classification."""
        if self.reply is not None:
            return _text(self.reply.parts)
        if self.state == _S.TASK_STATE_COMPLETED:
            parts = [part for artifact in self.artifacts.values() for part in artifact]
            return _text(parts) if parts else self._status_text()
        message = self.status.message if self.status is not None else None
        report = None
        if self.lyra and message is not None:
            report = report_of(get_data_parts(message.parts))
        name = TaskState.Name(self.state)
        text = (report.message if report is not None else None) or self._status_text()
        ended = name.removeprefix("TASK_STATE_").lower().replace("_", "-")
        raise A2AClientError(
            f"the remote A2A task ended {ended}" + (f": {text}" if text else ""),
            data={
                "task_state": name,
                "report": report.model_dump(mode="json") if report is not None else None,
            },
        )

    async def _cancel(self) -> None:
        """Tell the remote to stop the task (the attempt ended before it did)."""
        assert self.task_id is not None
        confirmed = False
        shielded = anyio.CancelScope(shield=True)
        with shielded, anyio.move_on_after(CANCEL_GRACE), suppress(Exception):
            await self.client.cancel_task(CancelTaskRequest(id=self.task_id))
            confirmed = True
        if not confirmed:
            events.warning(
                events.A2A_CANCEL_UNCONFIRMED,
                session_id=self.ctx.session_id,
                url=self.url,
                task_id=self.task_id,
                state=TaskState.Name(self.state),
            )


def _keepalive(metadata: Struct) -> bool:
    value = metadata.fields.get(KEEPALIVE)
    return value is not None and value.bool_value


def _text(parts: list[Part]) -> str:
    """What message or artifact parts say, as the child's output: text as it is,
    data as JSON, one part a line (files and raw bytes are not text)."""
    return "\n".join(
        part.text if part.HasField("text") else output_text(_whole(MessageToDict(part.data)))
        for part in parts
        if part.HasField("text") or part.HasField("data")
    )


def _whole(value: Any) -> Any:
    """Data with its whole numbers as integers again (protobuf keeps every number as a
    double: the agent's ``393`` arrives as ``393.0``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole(item) for item in value]
    return value
