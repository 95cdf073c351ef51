"""The A2A server: an agent card, the JSON-RPC endpoint, and what guards them.

Safe defaults, as ``lyra mcp --http`` has them: it binds to loopback; every
request must name this server in its ``Host`` header (a DNS-rebinding page
cannot reach a loopback server through another name: 421); a bind to any other
address needs a bearer token (``LYRA_A2A_TOKEN``), which every request but the
agent card must then carry (401 without it). The card says so (an HTTP bearer
security scheme), and states the URL clients use, so a bind to every address
(``0.0.0.0``) needs that URL given.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import anyio

from lyra import __version__
from lyra._bearer import bearer_matches
from lyra._extras import missing_extra
from lyra.a2a._delegations import Delegations
from lyra.children.a2a import USAGE_EXTENSION
from lyra.delegation import Child, Limits
from lyra.delegation._internal import as_callable
from lyra.errors import ConfigurationError
from lyra.recovery import RecoveryPolicy

try:
    import uvicorn
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentExtension,
        AgentInterface,
        AgentSkill,
        HTTPAuthSecurityScheme,
        SecurityRequirement,
        SecurityScheme,
        StringList,
    )
    from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_CURRENT
    from starlette.applications import Starlette
    from starlette.datastructures import Headers
    from starlette.responses import JSONResponse, PlainTextResponse
    from starlette.types import ASGIApp, Receive, Scope, Send

    from lyra.a2a._executor import ArrivalNoted, DelegationExecutor, quiet_refusals
except ModuleNotFoundError as missing:
    if (missing.name or "").partition(".")[0] not in (
        "a2a",
        "starlette",
        "sse_starlette",
        "uvicorn",
    ):
        raise
    raise missing_extra("the A2A server", "a2a", "the A2A SDK") from None

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 9999
CARD_PATH = AGENT_CARD_WELL_KNOWN_PATH
"""Where the agent card is served (and the one path open without the token)."""
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

_DESCRIPTION = """\
lyra runs a child agent on each task under a deadline, an idle timeout and a \
budget, and reports back: steps as working updates; the output as an artifact; \
a failure as its classified report (category timeout, missing_context, \
tool_error, invalid_task or partial; retryable; steps done; suggested actions) \
in text and as a data part. A question of the child is input-required: answer \
it in the next message."""


def agent_card(url: str, *, name: str = "lyra", bearer: bool = False) -> AgentCard:
    """The card of a lyra server reached at ``url`` (``bearer``: it asks for a token)."""
    card = AgentCard(
        name=name,
        description=_DESCRIPTION,
        version=__version__,
        supported_interfaces=[
            AgentInterface(
                url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION_CURRENT
            )
        ],
        capabilities=AgentCapabilities(
            streaming=True,
            extensions=[
                AgentExtension(
                    uri=USAGE_EXTENSION,
                    description="Status updates carry the task's usage so far in "
                    "metadata['usage']: input_tokens, output_tokens, cost_usd, turns.",
                )
            ],
        ),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="delegate",
                name="Delegate a task",
                description="Runs the task to its end under lyra's limits; a failure comes "
                "back classified, with what was done and what to try next.",
                tags=["delegation", "supervisor", "failure-report"],
            )
        ],
    )
    if bearer:
        scheme = SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))
        card.security_schemes["bearer"].CopyFrom(scheme)
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card


def build_app(
    child: Child,
    *,
    limits: Limits | None = None,
    retries: int = 0,
    url: str = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}/",
    token: str | None = None,
    name: str = "lyra",
) -> Starlette:
    """An ASGI app that serves ``child`` as an A2A agent reached at ``url``.

    Each task runs ``child`` under ``limits`` (``limits.budget`` holds each task and
    all it delegates) through lyra's recovery loop, as ``lyra delegate`` does, with
    up to ``retries`` attempts after the first; with ``token``, every request but
    the agent card needs ``Authorization: Bearer <token>``. Only requests whose
    ``Host`` is ``url``'s host (or a loopback name) are served. Run it with any ASGI
    server whose lifespan support is on (``serve`` uses uvicorn): the delegations
    run there.
    """
    as_callable(child)  # a clear error now for something that is no child
    if token is not None and not token:
        raise ConfigurationError("the bearer token is empty")
    policy = RecoveryPolicy(max_retries=retries)
    card = agent_card(url, name=name, bearer=token is not None)
    delegations = Delegations()
    executor = DelegationExecutor(child, limits or Limits(), policy, delegations)
    quiet_refusals()
    store = InMemoryTaskStore()
    handler = DefaultRequestHandler(
        agent_executor=executor,
        task_store=store,
        agent_card=card,
        request_context_builder=ArrivalNoted(executor, store),
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with delegations.serving():
            try:
                yield
            finally:
                await handler.aclose()  # the requests' tasks first, then the delegations

    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/")
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.halt = delegations.halt_all  # (serve: before the web server's shutdown)
    hosts = frozenset({*_LOOPBACK_NAMES, urlsplit(url).hostname or ""} - {""})
    app.add_middleware(_Guard, hosts=hosts, token=token)
    return app


async def serve(
    child: Child,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    limits: Limits | None = None,
    retries: int = 0,
    url: str | None = None,
    token: str | None = None,
    name: str = "lyra",
    on_listening: Callable[[str], object] | None = None,
) -> None:
    """Serve ``child`` over HTTP until stopped (Ctrl+C, SIGTERM).

    A bind to anything but loopback needs ``token``; one to every address
    (``0.0.0.0``, ``::``) needs ``url``, the address clients reach it at.
    ``port`` 0 binds any free port. ``on_listening`` is called with the URL once
    the port is bound. Cancelled, it shuts down as on Ctrl+C: the running
    children are stopped.
    """
    stated = served_url(host, port, url=url, token=token)  # its refusals before the bind
    listening = _listen(host, port)
    if url is None and port == 0:  # the port the system picked
        stated = _default_url(host, listening.getsockname()[1])
    app = build_app(child, limits=limits, retries=retries, url=stated, token=token, name=name)
    if on_listening is not None:
        on_listening(stated)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    server = _Server(config, before_shutdown=app.state.halt)

    async def shut_down_when_cancelled() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            server.should_exit = True

    stopped: BaseException | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(shut_down_when_cancelled)
        try:
            with anyio.CancelScope(shield=True):  # cancelled, it shuts down as on Ctrl+C
                await server.serve(sockets=[listening])
        except BaseException as exc:  # noqa: BLE001 - raised below as it is, not as a group
            stopped = exc  # Ctrl+C or SIGTERM, which uvicorn raises again once it shut down
        group.cancel_scope.cancel()
    if stopped is not None:
        raise stopped


class _Server(uvicorn.Server):
    """uvicorn, whose shutdown first ends the running tasks, each with its last status:
    it then waits for their streams to end, where it would cut them off."""

    def __init__(self, config: uvicorn.Config, *, before_shutdown: Callable[[], None]) -> None:
        super().__init__(config)
        self._before_shutdown = before_shutdown

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._before_shutdown()
        await super().shutdown(sockets)


def _listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound now: a port in use is a clear error, not a log line."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        raise ConfigurationError(f"cannot listen on {host}:{port}: {why}") from None


def served_url(host: str, port: int, *, url: str | None = None, token: str | None = None) -> str:
    """The URL a server bound to ``host:port`` states in its card (``url`` when given);
    a ConfigurationError for a bind that is not safe as asked (see :func:`serve`)."""
    if token is None and not _is_loopback(host):
        raise ConfigurationError(
            f"serving on {host} (not loopback) needs a bearer token: set LYRA_A2A_TOKEN"
        )
    return url or _default_url(host, port)


def _default_url(host: str, port: int) -> str:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"http://{host}:{port}/"
    if address.is_unspecified:
        raise ConfigurationError(
            f"serving on every address ({host}) needs --url, the URL clients reach it at "
            "(the agent card tells them)"
        )
    return f"http://[{host}]:{port}/" if address.version == 6 else f"http://{host}:{port}/"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_named(header: str) -> str | None:
    """The host a ``Host`` header names; ``None`` for one that names none (``[``)."""
    try:
        return urlsplit(f"//{header}").hostname
    except ValueError:  # an unclosed IPv6 bracket, a port that is no number
        return None


class _Guard:
    """Serves only requests that name this server, with the token where one is set."""

    def __init__(self, app: ASGIApp, *, hosts: frozenset[str], token: str | None) -> None:
        self.app = app
        self.hosts = hosts
        self.token = token.encode() if token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal: Any = None
        if _host_named(headers.get("host", "")) not in self.hosts:
            refusal = PlainTextResponse("Misdirected request: unknown Host header", 421)
        elif (
            self.token is not None
            and scope["path"] != CARD_PATH
            and not bearer_matches(headers.get("authorization", ""), self.token)
        ):
            refusal = JSONResponse(
                {"error": "a bearer token is required (Authorization: Bearer …)"},
                401,
                headers={"WWW-Authenticate": 'Bearer realm="lyra"'},
            )
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)
