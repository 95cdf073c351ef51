"""A folder one lyra process works in at a time: two processes recovering the same
checkpoints (a durable run resumed twice, two MCP servers on one state directory)
would both run the children not finished yet, and pay for them twice.

The hold is an ``flock`` on a file in the folder: the system lets it go when the
process ends, however it ends (SIGKILL included), so a crash never leaves the
folder held. Within one process, a second claim of a folder it holds shares that
hold (``lyra analyze`` holds its run directory before its executor starts, and the
executor claims it too): ``flock`` would refuse the process its own folder.
"""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from lyra.errors import ConfigurationError

_held: dict[Path, tuple[IO[str], int]] = {}
"""The lock files this process holds, with how many claims share each."""
_guard = threading.Lock()


class Claim:
    """This process's hold on a folder, until :meth:`close` (or the ``with`` block ends)."""

    def __init__(self, lock: Path) -> None:
        self._lock: Path | None = lock

    @property
    def closed(self) -> bool:
        """True once this claim let the folder go."""
        return self._lock is None

    def close(self) -> None:
        """Let the folder go (once every claim of it in this process is closed)."""
        lock, self._lock = self._lock, None
        if lock is None:
            return
        with _guard:
            held, claims = _held.pop(lock)
            if claims > 1:
                _held[lock] = (held, claims - 1)
            else:
                held.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def claim(folder: Path, lock: str, *, what: str, busy: str) -> Claim:
    """Hold ``folder`` (``what`` it is, in a message) for this process until the claim is
    closed; :class:`ConfigurationError` saying ``busy`` when another process holds it, or
    why the folder cannot be used."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = (folder / lock).resolve()
    except OSError as exc:
        raise ConfigurationError(f"cannot use {what} {folder}: {exc.strerror}") from None
    with _guard:
        if path in _held:
            held, claims = _held[path]
            _held[path] = (held, claims + 1)
            return Claim(path)
        _held[path] = (_locked(path, what, folder, busy), 1)
    return Claim(path)


def _locked(path: Path, what: str, folder: Path, busy: str) -> IO[str]:
    """``path`` opened and locked for this process."""
    try:
        held = path.open("a+")
    except OSError as exc:
        raise ConfigurationError(f"cannot use {what} {folder}: {exc.strerror}") from None
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        held.close()
        raise ConfigurationError(busy) from None
    except OSError:  # a file system that keeps no locks (some network mounts):
        pass  # the folder is used as it was before it had one
    return held
