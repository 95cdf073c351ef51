"""Files appended to line by line (an event log, ``results.jsonl``): whole lines only.

A process killed in the middle of a write can leave a last line cut short. A
writer that appends to such a file again first ends that line with a newline:
the fragment stays behind as a line of its own, which every reader skips as
malformed, and the new lines are whole. (Cutting the fragment off instead
would race with another process appending to the same file.)
"""

from __future__ import annotations

import os
import stat


def open_to_append(path: str | os.PathLike[str]) -> tuple[int, bool]:
    """``path`` opened to append (created if need be, write-only: a pipe whose
    reader has gone fails rather than blocks), and whether it is a regular file
    whose last line was cut short, so that the first write must begin with a
    newline."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        return fd, _torn(fd, path)
    except OSError:
        os.close(fd)
        raise


def _torn(fd: int, path: str | os.PathLike[str]) -> bool:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        return False
    try:
        reader = os.open(path, os.O_RDONLY)
    except OSError:  # may be written but not read: nothing to look at
        return False
    try:
        size = os.fstat(reader).st_size
        return size > 0 and os.pread(reader, 1, size - 1) != b"\n"
    finally:
        os.close(reader)
