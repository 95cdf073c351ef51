"""A folder one lyra process works in at a time: two processes recovering the same
checkpoints (a durable run resumed twice, two MCP servers on one state directory)
would both run the children not finished yet, and pay for them twice.

The hold is an ``flock`` on a file in the folder: the system lets it go when the
process ends, however it ends (SIGKILL included), so a crash never leaves the
folder held.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO

from lyra.errors import ConfigurationError


def claim(folder: Path, lock: str, *, what: str, busy: str) -> IO[str]:
    """Hold ``folder`` (``what`` it is, in a message) for this process while the returned
    file is open; :class:`ConfigurationError` saying ``busy`` when another process holds
    it, or why the folder cannot be used."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        held = (folder / lock).open("a+")
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
