"""``lyra mcp --http``: the same server over Streamable HTTP, safe by default.

- Loopback (127.0.0.1) unless told otherwise; a bind that other machines can
  reach is refused without a bearer token.
- The SDK's DNS-rebinding protection is always on: the ``Host`` header must
  name this server (loopback names, the bound address, the machine's own
  names for a wildcard bind, and any ``allowed_hosts``) and a browser's
  ``Origin`` must be one of them, so a web page cannot drive the server
  through a name it points at 127.0.0.1.
- With a token, every request needs ``Authorization: Bearer <token>``
  (compared in constant time); without it, 401.
- Stateful sessions with SSE responses, so progress notifications and
  requests to the client (elicitation) reach it mid-call.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import anyio
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from lyra._bearer import bearer_matches
from lyra.delegation import Child
from lyra.detached import Delegations
from lyra.errors import ConfigurationError
from lyra.mcp._server import PROGRESS_EVERY, server_for
from lyra.mcp._stopping import Calls

PATH = "/mcp"
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def is_loopback(host: str) -> bool:
    """True for a name or address only this machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def transport_security(host: str, allowed_hosts: Iterable[str] = ()) -> TransportSecuritySettings:
    """DNS-rebinding protection for a server bound to ``host``: the names a client
    may use to reach it, each with any port (or none)."""
    names = ["127.0.0.1", "localhost", "[::1]"]
    if host in _WILDCARDS:
        names += [socket.gethostname(), socket.getfqdn()]
    elif not is_loopback(host):
        names.append(f"[{host}]" if ":" in host else host)
    names += allowed_hosts
    names = list(dict.fromkeys(names))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[form for name in names for form in (name, f"{name}:*")],
        allowed_origins=[
            f"{scheme}://{name}{port}"
            for name in names
            for scheme in ("http", "https")
            for port in ("", ":*")
        ],
    )


class BearerToken:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not bearer_matches(given, self._token):
                await _unauthorized(send)
                return
        await self.app(scope, receive, send)


async def _unauthorized(send: Send) -> None:
    body = b'{"error": "unauthorized: send Authorization: Bearer <LYRA_MCP_TOKEN>"}'
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="lyra"'),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: any free one), or a clear error."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise ConfigurationError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigurationError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.setblocking(False)
    return sock


async def serve_http(
    child: Child,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    allowed_hosts: Iterable[str] = (),
    delegations: Delegations | None = None,
    progress_every: float = PROGRESS_EVERY,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``child`` over Streamable HTTP at ``http://host:port/mcp`` until
    cancelled (it then stops gracefully); see the module docstring for the defaults.

    A ``host`` other machines can reach needs a ``token``
    (:class:`~lyra.errors.ConfigurationError` otherwise, before anything
    listens). ``on_ready`` gets the URL once the server accepts connections.
    """
    if not token and not is_loopback(host):
        raise ConfigurationError(
            f"refusing to serve on {host or 'every address'} without a bearer token: anyone "
            "who reaches the port could run the child. Set LYRA_MCP_TOKEN (clients then send "
            "Authorization: Bearer <token>), or serve on 127.0.0.1"
        )
    store = delegations if delegations is not None else Delegations(child)
    calls = Calls()
    server = server_for(child, store, progress_every, enter_store=False, calls=calls)
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=PATH, transport_security=transport_security(host, allowed_hosts)
    )
    if token:
        app = BearerToken(app, token)
    sock = listen(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    config = uvicorn.Config(
        app,
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=_GRACE,
    )
    web = _Server(config)
    stopped = anyio.Event()

    async def run() -> None:
        with anyio.CancelScope(shield=True):  # stopped by should_exit, so that it shuts down
            try:
                await web.serve(sockets=[sock])
            finally:
                stopped.set()
                web.settled.set()

    async with store, anyio.create_task_group() as group:
        group.start_soon(run)
        try:
            await web.settled.wait()
            if web.started and on_ready is not None:
                on_ready(f"http://{shown}:{bound_port}{PATH}")
            await stopped.wait()
        finally:
            calls.stop()  # each call in progress answers its client before the web server stops
            web.should_exit = True


_GRACE = 2
"""Seconds a stopping server waits for open requests (a progress stream) to end."""


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers (a library does not take over the process's
    signals; ``lyra mcp`` stops the server on SIGINT/SIGTERM itself, by cancelling it),
    saying when it has started (or failed to)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.settled = anyio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.settled.set()

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
