"""Files appended to line by line (an event log, ``results.jsonl``): whole lines only.

A process killed in the middle of a write can leave a last line cut short. The
readers skip such a line; a writer that appends to the file again first cuts
it off, or its first line would be glued onto the fragment and lost as well.
"""

from __future__ import annotations

import os
import stat

_BLOCK = 1 << 16


def cut_torn_tail(fd: int) -> int:
    """Cut a last line that has no newline off the regular file open (readable)
    at ``fd``; the number of bytes cut (0 for anything but a regular file)."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        return 0
    end = os.lseek(fd, 0, os.SEEK_END)
    if end == 0 or os.pread(fd, 1, end - 1) == b"\n":
        return 0
    start = end
    while start > 0:  # back to the newline before the fragment, a block at a time
        block_start = max(0, start - _BLOCK)
        newline = os.pread(fd, start - block_start, block_start).rfind(b"\n")
        if newline >= 0:
            start = block_start + newline + 1
            break
        start = block_start
    os.ftruncate(fd, start)
    return end - start


def open_to_append(path: str | os.PathLike[str]) -> tuple[int, int]:
    """``path`` opened to append whole lines (created if need be), with a torn last
    line cut off; the descriptor and the bytes cut. A file that may be written
    but not read is opened for writing only, and nothing is cut."""
    flags = os.O_APPEND | os.O_CREAT
    try:
        fd = os.open(path, os.O_RDWR | flags, 0o644)
    except PermissionError:
        return os.open(path, os.O_WRONLY | flags, 0o644), 0
    try:
        return fd, cut_torn_tail(fd)
    except OSError:
        os.close(fd)
        raise
