"""The run directory: events, one report per child, one brief per subject, the output.

Every file is written atomically (a temporary file renamed into place), so
a run interrupted at any moment leaves only whole files behind.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path

from lyra import events
from lyra._files import open_to_append

_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def write_atomic(path: Path, text: str | bytes, *, sync: bool = True) -> None:
    """Write ``text`` (or bytes) to ``path`` so readers see the old file or the new one,
    never half; a write that fails leaves no partial file behind.

    ``sync`` also waits for the disk (it survives a power cut, not only a crash):
    for the files a run is resumed from, not for each of a million small ones.
    A ``path`` that is no regular file of its own (a pipe, a device, a link such
    as ``/dev/stdout``) is written into, never replaced.
    """
    data = text.encode("utf-8", "replace") if isinstance(text, str) else text
    if path.is_symlink() or (path.exists() and not path.is_file()):
        with path.open("wb") as stream:
            stream.write(data)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; these files are meant to be read
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def file_stem(subject: str) -> str:
    """A file name for a subject; unsafe ones (bad IDs, paths) get a stable hash."""
    if _SAFE.match(subject) and subject not in (".", ".."):
        return subject
    return "invalid-" + hashlib.sha256(subject.encode("utf-8", "replace")).hexdigest()[:12]


class RunDir:
    """A folder holding one run's files.

    Creating it raises ``OSError`` when the folder cannot be made; a file
    that cannot be written later is logged and remembered in ``failures``
    (the run goes on: its results still reach the caller).
    """

    LOCK = "lyra-run.lock"
    """The file whose lock a process running in the folder holds (see :mod:`lyra._claims`)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.failures: list[str] = []
        self._appending: dict[Path, int | None] = {}

    def holds_a_run(self) -> bool:
        """True when the folder already has another run's events or output."""
        return self.output.exists() or (self.events.exists() and self.events.stat().st_size > 0)

    def save(self, path: Path, text: str, *, sync: bool = True) -> None:
        """Write one file of the run atomically; a failure is logged, not raised."""
        try:
            write_atomic(path, text, sync=sync)
        except OSError as exc:
            self.failed(path, exc)

    def append(self, path: Path, line: str) -> None:
        """Add one line to a file of the run, whole, in one system call (a kill never
        leaves half of it); a failure is logged once, not raised, and the file is
        left as it was."""
        fd = self._appending.get(path, -1)
        if fd is None:
            return  # this file failed already
        data = line.encode("utf-8", "replace") + b"\n"
        try:
            if fd == -1:
                fd, torn = open_to_append(path)
                self._appending[path] = fd
                if torn:  # an earlier process was killed mid-line: end that line first
                    events.warning(events.TORN_LINE_ENDED, path=str(path))
                    data = b"\n" + data
            written = os.write(fd, data)
            if written != len(data):  # a full disk: cut back to the last whole line
                os.ftruncate(fd, os.lseek(fd, 0, os.SEEK_END) - written)
                raise OSError(28, os.strerror(28))
        except OSError as exc:
            self._appending[path] = None
            self.failed(path, exc)

    def close(self) -> None:
        """Close the files :meth:`append` keeps open."""
        for fd in self._appending.values():
            if fd not in (None, -1):
                os.close(fd)
        self._appending = {path: None for path in self._appending}

    def failed(self, path: Path, exc: OSError) -> None:
        """A file of the run that could not be written (a full disk): logged, and named
        in ``failures`` for the caller to tell."""
        self.failures.append(f"{path}: {exc.strerror or exc}")
        events.warning(events.RUN_DIR_WRITE_FAILED, path=str(path), error=str(exc))

    @classmethod
    def new(cls, base: Path | str = "runs") -> RunDir:
        """A fresh folder under ``base``, named by the UTC time."""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        return cls(Path(base) / f"{stamp}-{uuid.uuid4().hex[:6]}")

    @property
    def events(self) -> Path:
        """The JSON-lines event log."""
        return self.path / "events.jsonl"

    @property
    def output(self) -> Path:
        """The final output (JSON)."""
        return self.path / "output.json"

    @property
    def results(self) -> Path:
        """One JSON line per subject, appended as each finishes."""
        return self.path / "results.jsonl"

    def report(self, subject: str) -> Path:
        """Where a subject's last report lives."""
        return self.path / "reports" / f"{file_stem(subject)}.txt"

    def brief(self, subject: str) -> Path:
        """Where a subject's brief lives."""
        return self.path / "briefs" / f"{file_stem(subject)}.md"
