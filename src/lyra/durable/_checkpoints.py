"""Are a run's checkpoints all there? Checked before a resume trusts them.

A resume that finds no record of a finished child runs it again, silently
paying twice. So before resuming, the run's evidence of finished work -- the
events its log holds (each names its workflow) and the children its caller
saw finish -- is compared with what the database records, and an embedded
run's SQLite file is checked for damage before DBOS opens it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping
from contextlib import closing
from pathlib import Path

from lyra.errors import ConfigurationError

GAVE_UP = "MAX_RECOVERY_ATTEMPTS_EXCEEDED"
"""DBOS's status of a workflow it stopped recovering: its process kept dying while
it ran (a crash loop). The task has a failed outcome; its record is intact."""


class CheckpointsDamaged(ConfigurationError):
    """A run's checkpoints are missing or damaged: resuming would re-run finished work."""


def check_sqlite(path: Path, *, expected: bool) -> None:
    """CheckpointsDamaged when the SQLite file is unreadable or damaged, or
    missing or empty while ``expected`` (the run has finished work on record).
    Empty, with nothing expected, it is a start a full disk stopped before anything
    was recorded: SQLite reads it as a new database, and the resume starts afresh."""
    if not path.exists() or (not expected and path.is_file() and not path.stat().st_size):
        if expected:
            raise CheckpointsDamaged(f"{path} is missing")
        return
    problem = _header_problem(path)
    if problem is not None:
        raise CheckpointsDamaged(f"{path} {problem}")
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            (verdict,) = conn.execute("PRAGMA quick_check").fetchone()
    except sqlite3.Error as exc:
        raise CheckpointsDamaged(f"{path} is damaged ({exc})") from None
    if verdict != "ok":
        raise CheckpointsDamaged(f"{path} is damaged ({' '.join(str(verdict).split())[:200]})")


def check_recorded(
    recorded: Mapping[str, str], *, logged: Collection[str], finished: Collection[str]
) -> None:
    """CheckpointsDamaged unless every workflow the log has events of is
    recorded, and every task whose file stem is in ``finished`` (workflow IDs
    end in ``/<index>-<stem>``) is recorded as finished: succeeded, or given up
    on after a crash loop (that is the engine's record, not damage)."""
    unrecorded = {_stem(workflow) for workflow in logged if workflow not in recorded}
    done = {workflow for workflow, status in recorded.items() if status in ("SUCCESS", GAVE_UP)}
    stems = {_stem(workflow) for workflow in done}
    unfinished = {stem for stem in finished if stem not in stems}
    if unrecorded or unfinished:
        lost = len(unrecorded | unfinished)  # (a child that finished is in both: once)
        raise CheckpointsDamaged(
            f"the checkpoint database has no record of {lost} child(ren) that ran "
            f"(of {len(recorded)} recorded)"
        )


def _stem(workflow: str) -> str:
    """The file stem of the task a workflow ID names (``…/<index>-<stem>``)."""
    return workflow.rpartition("/")[2].partition("-")[2]


def _header_problem(path: Path) -> str | None:
    """What the file's SQLite header says is wrong: not a database, or shorter
    than the pages it declares (SQLite would read the missing part as empty);
    or why it cannot be read at all."""
    if not path.is_file():
        return "is not a file"
    try:
        with path.open("rb") as db:
            header = db.read(100)
            size = db.seek(0, 2)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if size == 0:
        return "is empty"
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return "is not a SQLite database"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if size % page_size:
        return f"is truncated ({size} bytes, not whole pages of {page_size})"
    if size < pages * page_size and not _has_wal(path):
        # With a write-ahead log the newest pages may live there, not yet copied
        # into the file: SQLite reads them from it, and so does quick_check.
        return f"is truncated ({size} bytes, {pages} pages of {page_size} declared)"
    return None


def _has_wal(path: Path) -> bool:
    wal = path.with_name(f"{path.name}-wal")
    try:
        return wal.stat().st_size > 0
    except OSError:
        return False
