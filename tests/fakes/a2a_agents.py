"""A2A agents for tests, built with the official SDK (not lyra), and a real HTTP server
for any ASGI app on ``127.0.0.1`` (uvicorn, in the test's event loop).

:class:`Scripted` is an agent that answers each message of a task with the next
scripted turn: a list of actions (:func:`working`, :func:`artifact`, :func:`ends`,
:func:`hang`) run against the SDK's ``TaskUpdater``.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
import uvicorn
from a2a.helpers import new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Part,
    TaskState,
)
from starlette.applications import Starlette
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lyra.children.a2a import USAGE_EXTENSION

Action = Callable[[TaskUpdater], Awaitable[None]]


class _Server(uvicorn.Server):
    """uvicorn's server, saying when it is ready."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = anyio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


@asynccontextmanager
async def serving(make_app: Callable[[str], ASGIApp]) -> AsyncIterator[str]:
    """Serve ``make_app(url)`` over HTTP on a free port of 127.0.0.1; yields ``url``."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    config = uvicorn.Config(make_app(url), log_level="warning", timeout_graceful_shutdown=1)
    server = _Server(config)
    async with anyio.create_task_group() as group:
        group.start_soon(partial(server.serve, sockets=[sock]))
        await server.ready.wait()
        try:
            yield url
        finally:
            server.should_exit = True


def working(text: str | None = None, usage: dict[str, Any] | None = None) -> Action:
    """A ``working`` update (with ``text`` as its message, ``usage`` in its metadata)."""

    async def act(up: TaskUpdater) -> None:
        message = up.new_agent_message([new_text_part(text)]) if text else None
        metadata = {"usage": usage} if usage else None
        await up.update_status(TaskState.TASK_STATE_WORKING, message, metadata=metadata)

    return act


def artifact(*texts: str, append: bool = False, data: Any = None) -> Action:
    """An artifact chunk (of the artifact ``out``) with ``texts`` (and ``data``)."""

    async def act(up: TaskUpdater) -> None:
        parts: list[Part] = [new_text_part(text) for text in texts]
        if data is not None:
            parts.append(new_data_part(data))
        await up.add_artifact(parts, artifact_id="out", name="out", append=append)

    return act


def ends(state: str, text: str | None = None, data: Any = None) -> Action:
    """The task's status becomes ``TASK_STATE_<state>``, with a message of ``text``
    (and ``data`` as a data part)."""

    async def act(up: TaskUpdater) -> None:
        parts: list[Part] = [new_text_part(text)] if text else []
        if data is not None:
            parts.append(new_data_part(data))
        message = up.new_agent_message(parts) if parts else None
        await up.update_status(TaskState.Value(f"TASK_STATE_{state}"), message)

    return act


def pause(seconds: float) -> Action:
    """Work quietly for ``seconds``."""

    async def act(up: TaskUpdater) -> None:
        await anyio.sleep(seconds)

    return act


def hang() -> Action:
    """Work for ever (until the task is cancelled)."""

    async def act(up: TaskUpdater) -> None:
        await anyio.sleep_forever()

    return act


class Scripted(AgentExecutor):
    """Answers each message of a task with the next turn of ``turns``; remembers what
    it was sent and which tasks were cancelled."""

    def __init__(self, *turns: list[Action]) -> None:
        self.turns = list(turns)
        self.received: list[str] = []
        self.cancelled: list[str] = []
        self.cancel_seen = anyio.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.received.append(context.get_user_input())
        if context.current_task is None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        for action in self.turns.pop(0):
            await action(updater)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.cancelled.append(str(context.task_id))
        self.cancel_seen.set()
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()


def card(url: str, *, streaming: bool = True, usage: bool = False) -> AgentCard:
    """The card of a test agent at ``url`` (``usage``: it declares lyra's usage extension)."""
    extensions = [AgentExtension(uri=USAGE_EXTENSION)] if usage else []
    return AgentCard(
        name="scripted",
        description="a scripted A2A agent for tests",
        version="1.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=streaming, extensions=extensions),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="script", name="script", description="scripted", tags=["test"])],
    )


def cut_first_stream(app: ASGIApp) -> ASGIApp:
    """``app``, but the first event stream it answers ends after its first event, as a
    dropped connection ends it (the agent goes on with the task)."""
    cut = False

    async def cutting(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal cut
        if scope["type"] != "http" or cut:
            await app(scope, receive, send)
            return
        stream = done = False

        async def send_until_cut(message: Message) -> None:
            nonlocal stream, done, cut
            if done:
                return
            if message["type"] == "http.response.start":
                content_type = dict(message["headers"]).get(b"content-type", b"")
                stream = content_type.startswith(b"text/event-stream")
            elif message["type"] == "http.response.body" and stream and message.get("body"):
                cut = done = True
                message = {**message, "more_body": False}
            await send(message)

        await app(scope, receive, send_until_cut)

    return cutting


def agent_app(
    executor: AgentExecutor, *, cut: bool = False, **card_options: Any
) -> Callable[[str], ASGIApp]:
    """The app of an agent run by ``executor`` (for :func:`serving`; ``cut``: its first
    stream breaks, see :func:`cut_first_stream`)."""

    def make(url: str) -> ASGIApp:
        agent_card = card(url, **card_options)
        handler = DefaultRequestHandler(
            agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=agent_card
        )

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            try:
                yield
            finally:
                await handler.aclose()

        routes = create_agent_card_routes(agent_card) + create_jsonrpc_routes(handler, "/")
        app = Starlette(routes=routes, lifespan=lifespan)
        return cut_first_stream(app) if cut else app

    return make
