"""Streaming readers: event logs and raw reports in, :class:`Event` tuples out.

Nothing here loads a whole file. Event logs (JSON lines, DESIGN §8) are read
in bounded chunks split into lines (of bounded length) and decoded with
orjson; malformed lines are skipped and counted. A last line cut short by a killed writer (no
newline, no valid JSON) is skipped and named apart from malformed lines, and
so is a compressed file that ends early: what it holds is read. A file that
holds no events at all (a parent transcript, a plain log) is read a second
time, in bounded chunks, for the reports the delegation core's parser finds in
it (:func:`lyra.delegation.find_reports`). Input that is not text (NUL bytes
before any event: a device such as ``/dev/zero``, a binary file, UTF-16) is
refused with :class:`NotTextError` as soon as it shows, however long it is; a
pipe is kept as it is read (for the second reading), never copied ahead.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import sys
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, NamedTuple, cast

import orjson

from lyra.delegation import TaskReport, find_reports
from lyra.delegation._internal import REPORT_HEADER, report_boundary
from lyra.errors import LyraError
from lyra.events import (
    DECOMPOSITION_FINISHED,
    DELEGATION_CANCELLED,
    DELEGATION_COMPLETED,
    DELEGATION_FAILED,
    DELEGATION_STARTED,
    RECOVERY_ATTEMPT,
    RUN_FINISHED,
)

_KNOWN = frozenset(
    {
        DELEGATION_STARTED,
        DELEGATION_COMPLETED,
        DELEGATION_FAILED,
        DELEGATION_CANCELLED,
        RECOVERY_ATTEMPT,
        RUN_FINISHED,
        DECOMPOSITION_FINISHED,
    }
)
"""The events read field by field; any other keeps only its name and time."""

MAX_LINE = 1 << 20
"""Longest event line read whole, in bytes; a longer line is skipped as malformed."""
_CHUNK = 1 << 16  # what an event log is read by (never more than MAX_LINE)
CHUNK = 1 << 20
"""Characters read at a time when looking for reports in text."""
MAX_BUFFER = 8 << 20
"""Text held while waiting for the end of a report, in characters."""
_HEADER = "\n" + REPORT_HEADER  # a header at the start of a line

PathLike = str | os.PathLike[str]


class NotTextError(LyraError, OSError):
    """The input holds binary data (NUL bytes) before any event: it is neither an
    event log nor text with reports. An ``OSError``, as :class:`gzip.BadGzipFile`
    is: the file cannot be read as what it should be; ``filename`` names it."""


class Event(NamedTuple):
    """One event of a log, or one raw report read as the event it stands for.

    A NamedTuple rather than a model: millions are made per gigabyte, and a
    tuple is the cheapest immutable record Python has.
    """

    name: str
    source: str = ""
    timestamp: datetime | None = None
    session_id: str | None = None
    subject: str | None = None
    attempt: int = 1
    task_id: str | None = None
    category: str | None = None
    retryable: bool | None = None
    error_type: str | None = None
    blocked_on: str | None = None
    """The blocker; for a report that names none, its message."""
    duration: float | None = None
    timeout: float | None = None
    strategy: str | None = None
    is_report: bool = False
    """True when read from a raw report rather than an event line."""
    parent_task_id: str | None = None
    """On a subtask's delegation events: the decomposed task it belongs to."""
    status: str | None = None
    """On ``decomposition_finished``: ``completed`` or ``failed``."""
    parent_session_id: str | None = None
    """On a nested delegation (``ctx.delegate``): the session that delegated it."""
    tokens_used: int | None = None
    """Tokens charged to the delegation and everything below it."""
    cost_usd: float | None = None
    """Spend charged to the delegation and everything below it."""
    turns: int | None = None
    """Turns (model calls) charged to the delegation and everything below it."""

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "") -> Event | None:
        """The event of one decoded JSON line, or ``None`` when it is no event."""
        if type(data.get("event")) is not str:
            return None
        return event_of(data, source)

    @classmethod
    def from_report(cls, report: TaskReport, source: str = "") -> Event:
        """The completion or failure event a parsed report stands for."""
        # Positional, from the model's values (cheaper than its attributes, and a
        # tuple made directly skips the generated __new__): a transcript of tens of
        # thousands of reports makes one each.
        fields = report.__dict__
        failed = fields["status"] == "failed"
        category, error_type = fields["category"], fields["error_type"]
        return _tuple_new(
            cls,
            (
                DELEGATION_FAILED if failed else DELEGATION_COMPLETED,
                source,
                None,
                fields["session_id"],
                fields["subject"],
                fields["attempt"],
                None,
                None if category is None else str(category),
                fields["retryable"],
                None if error_type is None else str(error_type),
                (fields["blocked_on"] or fields["message"]) if failed else None,
                fields["duration"],
                None,
                None,
                True,
                None,
                None,
                fields["parent_session_id"],
                fields["tokens_used"],
                fields["cost_usd"],
                fields["turns"],
            ),
        )


_tuple_new = tuple.__new__


@dataclass(slots=True)
class ReadStats:
    """What the readers saw, filled in as they go."""

    files: int = 0
    lines: int = 0
    events: int = 0
    reports: int = 0
    malformed_lines: int = 0
    torn_files: list[str] = field(default_factory=list)
    """Files whose last line was cut short (a writer killed mid-line), skipped."""
    truncated_files: list[str] = field(default_factory=list)
    """Compressed files that end early or are damaged: read up to the damage."""

    def merge(self, other: ReadStats) -> None:
        """Add another tally to this one."""
        self.files += other.files
        self.lines += other.lines
        self.events += other.events
        self.reports += other.reports
        self.malformed_lines += other.malformed_lines
        self.torn_files += other.torn_files
        self.truncated_files += other.truncated_files


Record = dict[str, Any]
"""One decoded event line: a JSON object whose ``event`` is a string."""


def event_of(data: Record, source: str = "") -> Event:
    """The :class:`Event` of one record; fields of the wrong type read as absent."""
    get = data.get
    name: str = data["event"]
    moment = parse_timestamp(get("timestamp"))
    if name not in _KNOWN:  # a warning or another component's event: its name will do
        return Event(name, source, moment)
    # Positional, in field order: this runs once per line of a gigabyte log.
    return Event(
        name,
        source,
        moment,
        _text(get("session_id")),
        _text(get("subject")),
        _attempt(get("attempt")),
        _text(get("task_id")),
        _text(get("category")),
        _bool(get("retryable")),
        _text(get("error_type")),
        _text(get("blocked_on")),
        _number(get("duration")),
        _number(get("timeout")),
        _text(get("strategy")),
        False,
        _text(get("parent_task_id")),
        _text(get("status")),
        _text(get("parent_session_id")),
        _count(get("tokens_used")),
        _number(get("cost_usd")),
        _count(get("turns")),
    )


# -- field coercion: a log written by another version must not crash us ---------


def parse_timestamp(value: object) -> datetime | None:
    """An ISO 8601 timestamp as an aware datetime (naive means UTC), else ``None``."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _text(value: object) -> str | None:
    return value if type(value) is str and value else None


def _bool(value: object) -> bool | None:
    return value if type(value) is bool else None


def _number(value: object) -> float | None:
    kind = type(value)  # exact types: a bool is an int, but no duration
    return float(value) if kind is float or kind is int else None  # type: ignore[arg-type]


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _attempt(value: object) -> int:
    return value if type(value) is int and value > 0 else 1


# -- JSON lines ------------------------------------------------------------------

_NEWLINES = (b"\n", "\n")
_BRACES = (b"{", "{")
_CLOSING = (b"}", "}")
_STDLIB_ONLY = ((b"NaN", b"Infinity"), ("NaN", "Infinity"))
_BOM = (b"\xef\xbb\xbf", "\ufeff")
_NUL = (b"\0", "\0")


@dataclass(slots=True)
class _FileTally:
    """Counts for one file, kept apart until we know whether it is an event log."""

    lines: int = 0
    events: int = 0
    json_like_bad: int = 0  # malformed lines that begin with "{": broken events
    other_bad: int = 0  # malformed lines of any other shape: maybe prose
    torn: bool = False  # the last line is the start of an event, cut short
    truncated: bool = False  # a compressed stream ended early or is damaged

    def read_stats(self, source: str, *, prose: bool = False) -> ReadStats:
        """This file's tally; in ``prose`` (no events) only broken events are malformed."""
        return ReadStats(
            lines=self.lines,
            events=self.events,
            malformed_lines=self.json_like_bad + (0 if prose else self.other_bad),
            torn_files=[source] if self.torn and not self.truncated else [],  # cut, not torn
            truncated_files=[source] if self.truncated else [],
        )


def _line_blocks(
    stream: IO[bytes] | Iterable[bytes | str],
) -> Iterator[tuple[list[bytes] | list[str], bool, bool]]:
    """The lines of ``stream`` a block at a time, without their newlines, whether
    the block's last line ended in one (only the stream's last may not), and
    whether a NUL byte was read so far (found in C, a chunk at a time: only then
    are lines searched for one).

    A file is read in large chunks split in C, so a megabyte of tiny lines costs
    little. No line is longer than :data:`MAX_LINE`: a longer one keeps its
    first :data:`MAX_LINE` characters (which then fail to parse, so it counts
    as malformed) and the rest is skipped, so one huge line without a newline
    cannot pull a whole file into memory.
    """
    read = getattr(stream, "read", None)
    if read is None:  # an in-memory iterable: its lines already exist
        for line in cast("Iterable[Any]", stream):
            ended = line[-1:] in _NEWLINES
            yield [line[:-1] if ended else line], ended, _NUL[type(line) is str] in line
        return
    rest: Any = None  # the start of a line not ended yet
    skipping = False  # inside a line longer than MAX_LINE, whose start is out already
    first = True
    nul = False  # a NUL byte read so far
    while chunk := read(min(_CHUNK, MAX_LINE)):
        if first:  # a byte order mark is no part of the first line
            chunk, first = chunk.removeprefix(_BOM[isinstance(chunk, str)]), False
        nul = nul or _NUL[not isinstance(chunk, bytes)] in chunk
        parts = chunk.split(b"\n" if isinstance(chunk, bytes) else "\n")
        if skipping:
            if len(parts) == 1:
                continue
            skipping = False
            del parts[0]
        elif rest:
            parts[0] = rest + parts[0]
        rest = parts.pop()
        if parts and len(parts[0]) > MAX_LINE:  # only the first can be: a chunk is no longer
            parts[0] = parts[0][:MAX_LINE]
        if len(rest) >= MAX_LINE:  # its start now; the rest is skipped, never copied
            parts.append(rest[:MAX_LINE])
            rest, skipping = None, True
        if parts:
            yield parts, True, nul
    if rest:
        yield [rest], False, nul


def _loads(line: bytes | str, why: str) -> Any:
    """What orjson refuses (``why``) but the standard library reads: a lone
    surrogate that :func:`lyra.events.encode` escaped, a number too large for a
    double, ``NaN``; ``None`` for anything else, which is never handed to the
    slow parser at all."""
    nan, infinity = _STDLIB_ONLY[isinstance(line, str)]
    readable = "surrogate" in why or "infinity" in why
    if not (readable or nan in line or infinity in line):  # type: ignore[operator]
        return None
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError alike
        return None


_BINARY = "binary data (NUL bytes) before any event: not an event log or text"


def _scan_records(stream: IO[bytes] | Iterable[bytes | str], tally: _FileTally) -> Iterator[Record]:
    """The event records of one stream, each line decoded once (the hot loop).

    Only a line that opens with ``{`` can be an event: any other is blank (skipped)
    or malformed without being handed to a JSON parser. Such a line holding a NUL
    byte before any event raises :class:`NotTextError`: a log whose tail a crash
    filled with zeros still reads (its events came first), a binary input never
    reads to its end."""
    loads, refused = orjson.loads, orjson.JSONDecodeError
    cut: bytes | str | None = None  # a broken event without a newline: torn if it stays last
    lines = events = other_bad = json_like_bad = 0  # counted here, not on the tally: hot
    try:
        for block, ended, binary in _line_blocks(stream):
            lines += len(block)
            as_str = not isinstance(block[0], bytes)  # (a block is never empty)
            brace, nul = _BRACES[as_str], _NUL[as_str]
            binary = binary and not events  # a NUL, and no event yet: which line holds it?
            line: bytes | str  # (mypy joins the two list types to Sequence[object])
            # empty lines are skipped in C: a file may be mostly empty lines
            for line in filter(None, block):  # type: ignore[assignment]
                junk = line[:1] != brace and (line := line.strip())[:1] != brace
                if junk and not line:
                    continue  # a blank line
                if cut is not None:  # a line follows the broken event: it was not torn
                    json_like_bad += 1
                    cut = None
                if junk:
                    if binary and not events and nul in line:  # type: ignore[operator]
                        raise NotTextError(_BINARY)  # ends /dev/zero too: lines are bounded
                    other_bad += 1
                    continue  # prose or junk: never handed to a JSON parser
                if line[-1:] not in _CLOSING and line.rstrip()[-1:] not in _CLOSING:
                    data = None  # no JSON object; spares orjson's exception (1 µs)
                else:
                    try:
                        data = loads(line)
                    except refused as exc:
                        data = _loads(line, exc.msg)
                if type(data) is dict and type(data.get("event")) is str:
                    events += 1
                    yield data
                elif data is None and not ended:
                    cut = line
                else:
                    json_like_bad += 1
        tally.torn = cut is not None
    finally:
        tally.lines += lines
        tally.events += events
        tally.other_bad += other_bad
        tally.json_like_bad += json_like_bad


def _scan_lines(
    stream: IO[bytes] | Iterable[bytes | str], source: str, tally: _FileTally
) -> Iterator[Event]:
    for record in _scan_records(stream, tally):
        yield event_of(record, source)


def iter_events(
    stream: IO[bytes] | Iterable[bytes | str],
    *,
    source: str = "",
    stats: ReadStats | None = None,
) -> Iterator[Event]:
    """The events of one JSON-lines stream, in order; bad lines are counted.

    ``stream`` is a binary file object (read in bounded chunks) or any
    iterable of lines. Blank lines are ignored; every other line that is
    not a JSON object with an ``event`` name adds one to
    ``stats.malformed_lines``, except a last line that is the start of an
    event cut short (no newline): that one is torn, and ``source`` is added
    to ``stats.torn_files``. Raises :class:`NotTextError` for binary input.
    """
    tally = _FileTally()
    try:
        yield from _scan_lines(stream, source, tally)
    finally:
        if stats is not None:
            stats.merge(tally.read_stats(source))


# -- raw reports -------------------------------------------------------------------


def iter_reports(
    stream: IO[str],
    *,
    source: str = "",
    stats: ReadStats | None = None,
    chunk_size: int = CHUNK,
) -> Iterator[Event]:
    """The reports in a text stream, read ``chunk_size`` characters at a time.

    Text is cut only right after a report's closing metadata tag, where one
    report ends and the next region begins, so the parser sees each report
    whole. Text without such a tag is held up to :data:`MAX_BUFFER`; beyond
    that it is cut before the last failure header (a report without metadata).
    Both markers come from :mod:`lyra.delegation`, which owns the format.
    Each character is searched for a cut once, so reading is linear in the
    text however it is chunked.
    """
    buffer = ""
    while chunk := stream.read(chunk_size):
        held = len(buffer)  # what was held holds no closing tag
        buffer += chunk
        cut = _cut_point(buffer, held)
        if cut:
            yield from _reports_in(buffer[:cut], source, stats)
            buffer = buffer[cut:]
    if buffer:
        yield from _reports_in(buffer, source, stats)


def _cut_point(buffer: str, held: int = 0) -> int:
    """Where ``buffer`` may be split without splitting a report; 0 for nowhere yet.

    No closing tag ends within ``buffer[:held]``.
    """
    boundary = report_boundary(buffer, held)
    if boundary >= 0:
        return boundary
    if len(buffer) <= MAX_BUFFER:
        return 0
    # No metadata for MAX_BUFFER characters: keep only the last header onward,
    # or, when there is none, only a tail that may hold the start of one.
    header = buffer.rfind(_HEADER)
    return header + 1 if header >= 0 else len(buffer) - len(_HEADER)


def _reports_in(text: str, source: str, stats: ReadStats | None) -> Iterator[Event]:
    for report in find_reports(text):
        if stats is not None:
            stats.reports += 1
        yield Event.from_report(report, source)


# -- files -------------------------------------------------------------------------


def expand_paths(paths: Iterable[PathLike]) -> list[str]:
    """The files behind ``paths``: a directory stands for every ``events.jsonl`` in it.

    Run directories also hold ``reports/*.txt`` (the same failures again), so
    a directory never means every file in it.
    """
    files: list[str] = []
    for path in paths:
        if str(path) != "-" and Path(path).is_dir():
            files += sorted(str(p) for p in Path(path).rglob("events.jsonl"))
        else:
            files.append(str(path))
    return files


def read_records(path: PathLike, *, stats: ReadStats | None = None) -> Iterator[Record | Event]:
    """The records of one file's event lines, or, in a file without events, the
    events its raw reports stand for (``-`` for stdin, ``.gz`` decompressed).

    What :func:`read_file` reads, before each record becomes an :class:`Event`:
    statistics count most events from their record alone, which is cheaper.
    In a file without events only lines that look like broken events
    (beginning with ``{``) count as malformed, since the rest is just prose.
    """
    source = str(path)
    tally = _FileTally()
    found = ReadStats(files=1)
    try:
        with _open_binary(source) as stream:
            try:
                yield from _scan_records(stream, tally)
                tally.truncated = _damaged(stream)
                if tally.events == 0:
                    stream.seek(0)
                    text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="")
                    try:
                        yield from iter_reports(text, source=source, stats=found)
                    finally:
                        text.detach()  # the outer `with` closes the binary stream
                    tally.truncated |= _damaged(stream)
            finally:
                read = tally.read_stats(source, prose=tally.events == 0)
                read.files, read.reports = found.files, found.reports
                if stats is not None:
                    stats.merge(read)
    except OSError as exc:  # e.g. not a gzip file: say which file
        exc.filename = exc.filename or source
        raise


def read_file(path: PathLike, *, stats: ReadStats | None = None) -> Iterator[Event]:
    """The events of one file (``-`` for stdin, ``.gz`` decompressed).

    A file with no events is read again for raw reports; see :func:`read_records`.
    """
    source = str(path)
    for item in read_records(path, stats=stats):
        yield event_of(item, source) if isinstance(item, dict) else item


def read_events(paths: Iterable[PathLike], *, stats: ReadStats | None = None) -> Iterator[Event]:
    """The events of every file in ``paths``, in order, streaming (see :func:`read_file`)."""
    for path in expand_paths(paths):
        yield from read_file(path, stats=stats)


class _Kept(io.RawIOBase):
    """A pipe, a device or stdin, kept as it is read (in memory up to
    :data:`MAX_BUFFER` bytes, then on disk) so that it can be read again from its
    start (a file without events is read a second time, for reports). Nothing is
    read ahead of the reader: input refused early (:class:`NotTextError`) is never
    read to its end, and an endless one (``/dev/zero``) is refused in bounded time."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._source: IO[bytes] = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115 - closed by close()
        self._owned = path != "-"
        self._kept: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=MAX_BUFFER)  # noqa: SIM115
        self._again = False  # reading what was kept
        self._at = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True  # to its start only (and to where it is: BufferedReader asks)

    def readinto(self, buffer: Any) -> int:
        if self._again:
            data = self._kept.read(len(buffer))
        else:
            data = self._source.read(len(buffer))
            self._kept.write(data)
        buffer[: len(data)] = data
        self._at += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if (offset, whence) == (0, io.SEEK_CUR):
            return self._at
        if (offset, whence) != (0, io.SEEK_SET):
            raise io.UnsupportedOperation("a pipe is read again only from its start")
        if not self._again:
            shutil.copyfileobj(self._source, self._kept)  # what the first reading left
            self._again = True
        self._kept.seek(0)
        self._at = 0
        return 0

    def close(self) -> None:
        if not self.closed:
            self._kept.close()
            if self._owned:
                self._source.close()
        super().close()


class _Salvaged(io.RawIOBase):
    """A gzip file read as far as its data goes: where it ends early or turns to
    garbage, it ends (and says so in ``damaged``). Read in single steps
    (``read1``), so nothing decompressed before the damage is lost."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._inner = gzip.GzipFile(path, "rb")
        self._started = False  # damage before any data means it is no gzip file at all
        self.damaged = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.damaged:
            return 0
        try:
            data = self._inner.read1(len(buffer))
        except (EOFError, zlib.error):  # no end-of-stream marker, or corrupt data
            self.damaged = True
            return 0
        except gzip.BadGzipFile:  # a bad header first, or a bad checksum later
            if not self._started:
                raise
            self.damaged = True
            return 0
        self._started = True
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.damaged = False  # it will be found again, at the same place
        return self._inner.seek(offset, whence)

    def close(self) -> None:
        self._inner.close()
        super().close()


def _damaged(stream: IO[bytes]) -> bool:
    raw = getattr(stream, "raw", None)
    return isinstance(raw, _Salvaged) and raw.damaged


def _open_binary(path: str) -> IO[bytes]:
    if path == "-" or (os.path.exists(path) and not os.path.isfile(path)):
        return io.BufferedReader(_Kept(path))  # the caller's `with` closes it
    if path.endswith(".gz"):
        return io.BufferedReader(_Salvaged(path))  # the caller's `with` closes it
    return open(path, "rb")  # the caller's `with` closes it
