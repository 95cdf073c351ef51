"""lyra's events (DESIGN §8): one place emits them, and nothing is written until
you say where.

Unconfigured, lyra writes nothing at all -- not to stdout, not to stderr -- and
an event costs one check. One call turns them on::

    import lyra.events
    lyra.events.configure("events.jsonl")          # JSON lines (a path or a stream)
    lyra.events.configure(sys.stderr, level="warning")
    lyra.events.configure(structlog=True)          # into your structlog configuration
    lyra.events.configure(logging=True)            # into stdlib logging (logger "lyra")
    lyra.events.configure()                        # off again

An event is a flat dict: ``event``, ``level``, ``timestamp`` (ISO 8601, UTC)
and its fields. Lines for a file are gathered while the event loop runs its
current callbacks and written together, whole, in one system call as soon as
they are done, or as soon as they reach 64 KB (a turn of the loop can be long:
a worker whose children never wait runs a whole fan-out in one), or at once
outside an event loop; so a killed process never leaves half a line and loses
at most the events of the moment it died; a write that fails (a full disk) is
cut back to the last whole line and remembered (:func:`problems`), never
raised.

Every event's name is a constant here (``events.DELEGATION_FAILED`` is
``"delegation_failed"``): lyra's writers and ``lyra logs`` use them, so a name is
spelled once; docs/events.md says what each event means, its level and fields.
"""

from __future__ import annotations

import asyncio
import atexit
import io
import json
import logging as stdlib_logging
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

import orjson

from lyra._files import open_to_append
from lyra._text import valid_text

__all__ = [
    "A2A_CANCEL_UNCONFIRMED",
    "ANSWER_WRITER_FAILED",
    "CHILDREN_RECOVERED",
    "CONCURRENCY_CHANGED",
    "DBOS_MESSAGE",
    "DEADLINE_OVERRUN",
    "DECOMPOSITION_FINISHED",
    "DELEGATION_CANCELLED",
    "DELEGATION_COMPLETED",
    "DELEGATION_FAILED",
    "DELEGATION_STARTED",
    "DETACHED_ANSWERED",
    "DETACHED_CANCELLED",
    "DETACHED_QUESTION",
    "DETACHED_STARTED",
    "DURABLE_POLL_FAILED",
    "ELICITATION_FAILED",
    "LEVELS",
    "MODEL_DECOMPOSER_FAILED",
    "MODEL_PLANNER_FAILED",
    "ON_OUTCOME_FAILED",
    "PICTURES_FAILED",
    "PROTEIN_ID_INVALID",
    "PROTEIN_ID_NOT_ACCESSION",
    "PROTEIN_ID_RESOLVED",
    "PROTEIN_INTERNAL_ERROR",
    "PROTEIN_RESPONSE_INVALID",
    "QUESTION_ASKED",
    "QUESTION_PARKED",
    "QUESTION_RELAY_FAILED",
    "QUESTION_WAITING",
    "QUORUM_DECISION",
    "RATE_LIMIT_COOLDOWN",
    "RECOVERY_ATTEMPT",
    "RECOVERY_CALLBACK_FAILED",
    "RECOVERY_SWEEP_FAILED",
    "RUN_DIR_WRITE_FAILED",
    "RUN_FINISHED",
    "RUN_INTERRUPTED",
    "SUPERVISOR_STEP_FAILED",
    "TASK_CRASH_LOOP",
    "TASK_INTERNAL_ERROR",
    "TORN_LINE_ENDED",
    "TRACING_FAILED",
    "WORKER_STARTED",
    "WORKER_STOPPED",
    "capturing",
    "configure",
    "enabled",
    "error",
    "flush",
    "info",
    "problems",
    "replay",
    "warning",
]

# -- names ----------------------------------------------------------------------------
# Every event lyra emits. Never rename one: logs on disk carry these names, and
# `lyra logs` reads them back. docs/events.md describes each (a test holds it to
# these constants and to the calls that emit them).

# one attempt (lyra.delegation)
DELEGATION_STARTED = "delegation_started"
DELEGATION_COMPLETED = "delegation_completed"
DELEGATION_FAILED = "delegation_failed"
DELEGATION_CANCELLED = "delegation_cancelled"
DEADLINE_OVERRUN = "deadline_overrun"
QUESTION_ASKED = "question_asked"
RATE_LIMIT_COOLDOWN = "rate_limit_cooldown"

# recovery (lyra.recovery)
RECOVERY_ATTEMPT = "recovery_attempt"
DECOMPOSITION_FINISHED = "decomposition_finished"
MODEL_DECOMPOSER_FAILED = "model_decomposer_failed"
RECOVERY_CALLBACK_FAILED = "recovery_callback_failed"

# the supervisor and its run directory (lyra.supervisor), the event log itself
CONCURRENCY_CHANGED = "concurrency_changed"
ON_OUTCOME_FAILED = "on_outcome_failed"
TASK_INTERNAL_ERROR = "task_internal_error"
SUPERVISOR_STEP_FAILED = "supervisor_step_failed"
ANSWER_WRITER_FAILED = "answer_writer_failed"
RUN_DIR_WRITE_FAILED = "run_dir_write_failed"
TORN_LINE_ENDED = "torn_line_ended"

# children, traces, MCP (lyra.children, lyra.tracing, lyra.mcp)
A2A_CANCEL_UNCONFIRMED = "a2a_cancel_unconfirmed"
TRACING_FAILED = "tracing_failed"
ELICITATION_FAILED = "elicitation_failed"

# detached delegations (lyra.detached)
DETACHED_STARTED = "detached_started"
DETACHED_CANCELLED = "detached_cancelled"
DETACHED_ANSWERED = "detached_answered"
DETACHED_QUESTION = "detached_question"

# durable runs and workers (lyra.durable)
WORKER_STARTED = "worker_started"
WORKER_STOPPED = "worker_stopped"
RECOVERY_SWEEP_FAILED = "recovery_sweep_failed"
DURABLE_POLL_FAILED = "durable_poll_failed"
QUESTION_PARKED = "question_parked"
QUESTION_WAITING = "question_waiting"
QUESTION_RELAY_FAILED = "question_relay_failed"
TASK_CRASH_LOOP = "task_crash_loop"
CHILDREN_RECOVERED = "children_recovered"
DBOS_MESSAGE = "dbos_message"

# the protein workload (lyra.proteins)
RUN_FINISHED = "run_finished"
RUN_INTERRUPTED = "run_interrupted"
QUORUM_DECISION = "quorum_decision"
PROTEIN_ID_RESOLVED = "protein_id_resolved"
PROTEIN_INTERNAL_ERROR = "protein_internal_error"
PROTEIN_RESPONSE_INVALID = "protein_response_invalid"
PROTEIN_ID_INVALID = "protein_id_invalid"
PROTEIN_ID_NOT_ACCESSION = "protein_id_not_accession"
PICTURES_FAILED = "pictures_failed"
MODEL_PLANNER_FAILED = "model_planner_failed"


LEVELS = ("debug", "info", "warning", "error", "critical")
_RANK = {name: rank for rank, name in enumerate(LEVELS)}


class _Sink(Protocol):
    def write(self, event: dict[str, Any]) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


_sinks: tuple[_Sink, ...] = ()
_floor = _RANK["info"]
_problems: list[str] = []
_captured: ContextVar[list[dict[str, Any]] | None] = ContextVar("lyra_captured", default=None)


def configure(
    *targets: str | os.PathLike[str] | IO[str] | IO[bytes],
    structlog: bool = False,
    logging: bool = False,
    level: str = "info",
) -> None:
    """Send events to ``targets`` (JSON lines: files are appended to, streams
    written), to structlog, to stdlib logging, or -- with no arguments -- nowhere.

    Replaces any earlier configuration and closes the files it opened.
    """
    global _sinks, _floor
    if isinstance(level, str):
        level = level.lower()  # (as logging spells them: "WARNING" is "warning")
    if level not in _RANK:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
    for target in targets:  # (None, a number: refused now, not by each event of a run)
        if not isinstance(target, str | os.PathLike) and not callable(
            getattr(target, "write", None)
        ):
            raise TypeError(
                f"an event target is a path or a writable stream, not {type(target).__name__}"
                " (configure() with no target sends events nowhere)"
            )
    for sink in _sinks:
        sink.close()
    sinks: list[_Sink] = [_JsonLines(target) for target in targets]
    if structlog:
        sinks.append(_Structlog())
    if logging:
        sinks.append(_Logging())
    _sinks, _floor = tuple(sinks), _RANK[level]
    _problems.clear()
    for sink in sinks:
        if isinstance(sink, _JsonLines) and sink.lead:
            warning(TORN_LINE_ENDED, path=sink.name)


def flush() -> None:
    """Write out events still gathered for a file (before a process ends abruptly)."""
    for sink in _sinks:
        sink.flush()


atexit.register(flush)


def enabled() -> bool:
    """True when events go somewhere (or are being captured)."""
    return bool(_sinks) or _captured.get() is not None


def problems() -> list[str]:
    """What could not be written since :func:`configure` (a full disk, a closed
    stream), one line each; the events after a failed write to a file are dropped
    for that file only."""
    return list(_problems)


def info(event: str, /, **fields: Any) -> None:
    """Emit an event at info level."""
    if _sinks or _captured.get() is not None:
        _emit("info", event, fields)


def warning(event: str, /, **fields: Any) -> None:
    """Emit an event at warning level (something degraded, the run goes on)."""
    if _sinks or _captured.get() is not None:
        _emit("warning", event, fields)


def error(event: str, /, **fields: Any) -> None:
    """Emit an event at error level (lyra's own bug, contained)."""
    if _sinks or _captured.get() is not None:
        _emit("error", event, fields)


def _emit(level: str, name: str, fields: dict[str, Any]) -> None:
    record = {"event": name, "level": level, "timestamp": timestamp(), **fields}
    captured = _captured.get()
    if captured is not None:
        captured.append(record)
        if type(captured) is _Held:
            return
    if _RANK[level] >= _floor:
        for sink in _sinks:
            sink.write(record)


class _Held(list[dict[str, Any]]):
    """Events kept and not written (see :func:`capturing`)."""


@contextmanager
def capturing(*, hold: bool = False) -> Iterator[list[dict[str, Any]]]:
    """Also keep every event emitted in this context (a durable worker sends a
    child's events back with its result); events still go to the sinks, unless
    ``hold``: then they are only kept, for the caller to write later with
    :func:`replay` (a durable engine writes a step's events once its checkpoint
    is saved, so the log never shows work that a crash would run again)."""
    events: list[dict[str, Any]] = _Held() if hold else []
    token = _captured.set(events)
    try:
        yield events
    finally:
        _captured.reset(token)


def replay(
    records: Iterable[Mapping[str, Any]],
    *,
    into: str | os.PathLike[str] | None = None,
    **extra: Any,
) -> None:
    """Write events recorded elsewhere (:func:`capturing`) as they were, with
    ``extra`` fields added (which worker ran them). With ``into``, they are also
    appended to that JSON-lines file, unless a configured target writes it."""
    records = list(records)
    for record in records:
        level = str(record.get("level", "info"))
        if level in _RANK and _RANK[level] >= _floor:
            for sink in _sinks:
                sink.write({**record, **extra})
    if into is not None and records and not _writes(Path(into)):
        log = _JsonLines(into)
        try:
            for record in records:
                log.write({**record, **extra})
        finally:
            log.close()


def _writes(path: Path) -> bool:
    """True when a configured target appends to the file at ``path``."""
    where = path.resolve()
    return any(isinstance(sink, _JsonLines) and sink.path == where for sink in _sinks)


# -- time ---------------------------------------------------------------------------

_second: list[Any] = [-1, ""]  # the current second, and its text up to the decimal point


def timestamp() -> str:
    """Now, as ISO 8601 UTC with microseconds (the date part is formatted once a second)."""
    ns = time.time_ns()
    second = ns // 1_000_000_000
    if second != _second[0]:
        text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        _second[:] = [second, text]
    return "%s%06dZ" % (_second[1], ns // 1000 % 1_000_000)  # noqa: UP031 - the fastest here


# -- sinks ----------------------------------------------------------------------------


def encode(record: Mapping[str, Any]) -> bytes:
    """One event as a JSON line (bytes, newline included); never raises.

    Text that is not valid Unicode (a lone surrogate from a child or a data
    source) is written with ``\\u`` escapes instead of failing the event.
    """
    try:
        return orjson.dumps(record, default=_text_of, option=orjson.OPT_APPEND_NEWLINE)
    except (TypeError, orjson.JSONEncodeError):
        return (json.dumps(record, default=_text_of, ensure_ascii=True) + "\n").encode("ascii")


def _text_of(value: object) -> str:
    """A value JSON cannot hold, as its ``str``; one whose ``str`` raises, by its type
    (a hostile object in a child's context must not stop the delegation it names)."""
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - whatever its __str__ raises
        return f"<{type(value).__name__} whose str() raised>"


_GATHER = 64 * 1024
"""Bytes of whole lines gathered for a file before they are written, even within one
turn of the event loop (which may run a whole fan-out: memory stays bounded)."""


class _JsonLines:
    """JSON lines to a file (appended, whole lines per ``write``) or a stream."""

    def __init__(self, target: str | os.PathLike[str] | IO[str] | IO[bytes]) -> None:
        self.name = str(getattr(target, "name", target))
        self.path: Path | None = None
        self.fd: int | None = None
        self.lead = b""  # a newline, when a killed writer left the file's last line torn
        self.stream: IO[Any] | None = None
        self.broken = False
        # Whole lines waiting to be written. A bytearray, not a list of the
        # encoder's bytes objects: keeping thousands of those alive within one
        # turn of the event loop made each event cost ten times its encoding.
        self.pending = bytearray()
        self.lock = threading.Lock()
        if isinstance(target, str | os.PathLike):
            self.fd, torn = open_to_append(Path(target))
            self.path = Path(target).resolve()
            self.lead = b"\n" if torn else b""
        else:
            self.stream = target

    def write(self, record: dict[str, Any]) -> None:
        if self.broken:
            return
        try:  # encode(), inlined: this runs for every event of a large fan-out
            line = orjson.dumps(record, default=_text_of, option=orjson.OPT_APPEND_NEWLINE)
        except (TypeError, orjson.JSONEncodeError):
            line = encode(record)
        if self.fd is None:
            self._guarded(self._to_stream, line)
            return
        with self.lock:
            first = not self.pending
            self.pending += line
            full = len(self.pending) >= _GATHER
        if full:  # a long turn: write what it gathered so far
            self.flush()
        elif first:
            try:  # gather the lines of this turn of the event loop, write them after it
                asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:  # no loop in this thread: write now
                self.flush()

    def flush(self) -> None:
        with self.lock:
            data = bytes(self.pending)
            self.pending.clear()
            if data and self.lead:
                data, self.lead = self.lead + data, b""
        if data and not self.broken:
            self._guarded(self._write_whole, data)

    def _guarded(self, write: Any, data: bytes) -> None:
        try:
            write(data)
        except OSError as exc:
            self.broken = True
            _problems.append(f"could not write events to {self.name}: {exc.strerror or exc}")
        except ValueError as exc:  # a closed stream
            self.broken = True
            _problems.append(f"could not write events to {self.name}: {exc}")

    def _write_whole(self, data: bytes) -> None:
        """One system call; a short write (a full disk) is cut back, then raised."""
        assert self.fd is not None
        written = os.write(self.fd, data)
        if written != len(data):
            end = os.lseek(self.fd, 0, os.SEEK_END)
            os.ftruncate(self.fd, end - written)
            raise OSError(28, os.strerror(28))  # ENOSPC: what a short write means here

    def _to_stream(self, line: bytes) -> None:
        assert self.stream is not None
        if isinstance(self.stream, io.TextIOBase):
            self.stream.write(line.decode("utf-8", "replace"))
        else:
            self.stream.write(line)
        self.stream.flush()

    def close(self) -> None:
        self.flush()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.broken = True


def _printable(value: object) -> object:
    """A field as a text-only sink can write it: text whose lone surrogates (from a
    child's subject, say) are U+FFFD, an object whose ``str`` raises by its type."""
    if isinstance(value, str):
        return valid_text(value)
    if value is None or isinstance(value, int | float | list | dict | tuple):
        return value
    return _text_of(value)


class _Structlog:
    """Into the application's structlog configuration (logger ``lyra``)."""

    def __init__(self) -> None:
        import structlog

        self.logger = structlog.get_logger("lyra")

    def write(self, record: dict[str, Any]) -> None:
        fields = {
            k: _printable(v) for k, v in record.items() if k not in ("event", "level", "timestamp")
        }
        getattr(self.logger, record["level"])(record["event"], **fields)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Logging:
    """Into stdlib logging (logger ``lyra``): ``event key=value …``, the fields also
    on the record as ``lyra_event``."""

    def __init__(self) -> None:
        self.logger = stdlib_logging.getLogger("lyra")

    def write(self, record: dict[str, Any]) -> None:
        level = stdlib_logging.getLevelName(record["level"].upper())
        if not self.logger.isEnabledFor(level):
            return
        fields = " ".join(
            f"{k}={_printable(v)!r}"
            for k, v in record.items()
            if k not in ("event", "level", "timestamp")
        )
        self.logger.log(level, "%s %s", record["event"], fields, extra={"lyra_event": record})

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass
