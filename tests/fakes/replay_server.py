"""A local fake of AlphaFold DB and UniProt that replays recorded responses.

:class:`ReplayServer` is a real HTTP server on ``127.0.0.1`` (a random free
port) in a background thread, so :class:`lyra.proteins._live.LiveSource`
talks to it over a socket with its real ``httpx`` client. Nothing touches the
network. Both services live on the one server (pass its ``url`` as
``afdb_url`` and ``uniprot_url``)::

    from fakes.replay_server import ReplayServer, rate_limited

    def test_rate_limit() -> None:
        with ReplayServer() as server:
            server.script("/uniprotkb/P04637.json", rate_limited(7))
            ...  # first request for that path gets the 429, later ones the recording
            assert server.paths == ["/uniprotkb/P04637.json"]

Routes, filled from ``tests/fixtures/recorded`` and, for answers built for
tests (not recordings), ``tests/fixtures/built`` (see their READMEs):

- ``GET /api/prediction/{ACC}`` -- ``afdb_prediction_{ACC}.json``;
- ``GET /uniprotkb/{ACC}.json`` -- ``uniprot_{ACC}.json``;
- ``GET /files/{NAME}`` -- ``recorded/files/{NAME}`` (the model, confidence and
  PAE files an AlphaFold DB record names; 404 for one not there).

An accession without a recording gets a 404 with the service's error body:
UniProt's documented ``{"url": …, "messages": ["Resource not found"]}``, and
for AlphaFold DB ``{"detail": "Not Found"}`` (not recorded -- an assumption;
lyra never reads a 404 body). Any other path or method is a 404 noted in
:attr:`ReplayServer.problems`; with ``strict=True`` (the default) leaving the
``with`` block then raises ``AssertionError``.

:meth:`ReplayServer.script` queues replies for one path, served in order
before that path falls back to its recording. Build them with :func:`reply`,
:func:`json_reply`, :func:`rate_limited`, :func:`server_error`,
:func:`malformed` and :func:`slow`. Shutdown is prompt: slow replies wait on an
``Event`` that closing sets, and open connections are shut down before
handler threads are joined.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from ._server import LocalServer, RequestHandler, Response

__all__ = [
    "RECORDED",
    "RecordedRequest",
    "ReplayServer",
    "Reply",
    "json_reply",
    "malformed",
    "rate_limited",
    "replay_server",
    "reply",
    "server_error",
    "slow",
]

RECORDED: Final = Path(__file__).resolve().parents[1] / "fixtures" / "recorded"
BUILT: Final = Path(__file__).resolve().parents[1] / "fixtures" / "built"
_FILES_PATH: Final = re.compile(r"/files/(?P<name>[A-Za-z0-9._-]+)")
_AFDB_PATH: Final = re.compile(r"/api/prediction/(?P<acc>[^/?]+)")
_UNIPROT_PATH: Final = re.compile(r"/uniprotkb/(?P<acc>[^/?]+)\.json")
_AFDB_FILE: Final = re.compile(r"afdb_prediction_(?P<acc>.+)\.json")
_UNIPROT_FILE: Final = re.compile(r"uniprot_(?P<acc>.+)\.json")


# --------------------------------------------------------------------------- replies


@dataclasses.dataclass(frozen=True)
class Reply(Response):
    """One HTTP response; build it with the helper functions."""


def reply(status: int, body: bytes = b"", *, headers: Mapping[str, str] | None = None) -> Reply:
    """A response with ``body`` verbatim."""
    return Reply(status=status, body=body, headers=tuple((headers or {}).items()))


def json_reply(value: Any, status: int = 200, *, headers: Mapping[str, str] | None = None) -> Reply:
    """A JSON response."""
    return reply(status, json.dumps(value).encode(), headers=headers)


def rate_limited(retry_after: float | str = 1) -> Reply:
    """A 429 with ``retry-after`` (a number of seconds, or any string, e.g. an HTTP date)."""
    if isinstance(retry_after, str):
        value = retry_after
    else:
        value = str(int(retry_after)) if float(retry_after).is_integer() else str(retry_after)
    return json_reply({"messages": ["Too many requests"]}, 429, headers={"retry-after": value})


def server_error(status: int = 500) -> Reply:
    """A 5xx (or any status) with a small JSON body."""
    return json_reply({"messages": [f"Server error {status}"]}, status)


def malformed(body: bytes = b"{not json", status: int = 200) -> Reply:
    """A response whose body is ``body`` verbatim -- broken JSON by default."""
    return reply(status, body)


def slow(reply: Reply, delay_seconds: float) -> Reply:
    """``reply``, served after ``delay_seconds`` (cut short, unanswered, on shutdown)."""
    return dataclasses.replace(reply, delay_seconds=delay_seconds)


# --------------------------------------------------------------------------- server


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    """A request the fake received."""

    method: str
    path: str
    headers: Mapping[str, str]  # names lower-cased


def _load_recordings(directory: Path) -> dict[str, bytes]:
    """Path → recorded body for every recording in ``directory`` (and, for the
    default recordings, the answers built for tests)."""
    routes: dict[str, bytes] = {}
    folders = [directory, BUILT] if directory == RECORDED else [directory]
    for file in sorted(f for folder in folders for f in folder.glob("*.json")):
        if match := _AFDB_FILE.fullmatch(file.name):
            routes[f"/api/prediction/{match['acc']}"] = file.read_bytes()
        elif match := _UNIPROT_FILE.fullmatch(file.name):
            routes[f"/uniprotkb/{match['acc']}.json"] = file.read_bytes()
    for file in sorted((directory / "files").glob("*")):
        routes[f"/files/{file.name}"] = file.read_bytes()
    return routes


class ReplayServer(LocalServer[Reply]):
    """The fake services. Use as a context manager; ``url`` is valid inside it."""

    thread_name = "fake-replay-server"
    label = "fake replay server"
    methods = frozenset({"GET", "POST", "HEAD"})

    def __init__(self, recordings: Path = RECORDED, *, strict: bool = True) -> None:
        super().__init__(strict=strict)
        self.recorded: list[RecordedRequest] = []
        self.routes = _load_recordings(recordings)
        self._scripts: dict[str, list[Reply]] = {}

    # -- scripting and inspection

    def script(self, path: str, *replies: Reply) -> None:
        """Queue ``replies`` for ``path``; once used up, the path answers as recorded."""
        with self._lock:
            self._scripts.setdefault(path, []).extend(replies)

    @property
    def paths(self) -> list[str]:
        """The paths requested so far, in order."""
        with self._lock:
            return [r.path for r in self.recorded]

    # -- called from handler threads

    def dispatch(self, request: RequestHandler) -> Reply:
        """Record ``request`` and choose its reply."""
        recorded = RecordedRequest(
            method=request.command,
            path=request.path,
            headers={k.lower(): v for k, v in request.headers.items()},
        )
        host = request.headers.get("host", "127.0.0.1")
        path = recorded.path.split("?", 1)[0]
        with self._lock:
            self.recorded.append(recorded)
            queued = self._scripts.get(path)
            if queued:
                return queued.pop(0)
            if recorded.method != "GET":
                self.problems.append(f"unexpected {recorded.method} {recorded.path}")
                return json_reply({"detail": "Method Not Allowed"}, 405)
            if path in self.routes:
                return reply(200, self.routes[path])
            if _UNIPROT_PATH.fullmatch(path):
                url = f"http://{host}{path}"
                return json_reply({"url": url, "messages": ["Resource not found"]}, 404)
            if _AFDB_PATH.fullmatch(path) or _FILES_PATH.fullmatch(path):
                return json_reply({"detail": "Not Found"}, 404)
            self.problems.append(f"no route for GET {recorded.path}")
            return json_reply({"detail": "Not Found"}, 404)


@contextmanager
def replay_server(recordings: Path = RECORDED, *, strict: bool = True) -> Iterator[ReplayServer]:
    """Fixture factory: a running :class:`ReplayServer`, closed on exit."""
    with ReplayServer(recordings, strict=strict) as server:
        yield server
