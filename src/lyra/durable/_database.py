"""Database URLs: the embedded SQLite file, PostgreSQL URLs, and a quick reachability check.

Nothing here imports DBOS: a bad URL or an unreachable server is reported in
one line before the (slow) engine starts.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from lyra._extras import installed, missing_extra
from lyra.errors import ConfigurationError

SQLITE_FILE = "dbos.sqlite"
_POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")


class DatabaseUnreachable(ConfigurationError):
    """The PostgreSQL server behind ``--database-url`` cannot be reached."""


def require_durable() -> None:
    """ConfigurationError naming the extra to install when DBOS or its drivers are missing."""
    missing = [name for name in ("dbos", "sqlalchemy", "psycopg") if not installed(name)]
    if missing:
        raise missing_extra("a durable run", "durable", ", ".join(missing))


def sqlite_url(run_dir: Path) -> str:
    """The SQLAlchemy URL of a run directory's embedded system database."""
    return f"sqlite:///{(run_dir / SQLITE_FILE).resolve()}"


def postgres_url(url: str) -> str:
    """``url`` as a ``postgresql://`` URL; ConfigurationError for anything else."""
    parts = urlsplit(url.strip())
    if parts.scheme not in _POSTGRES_SCHEMES or not parts.netloc:
        raise ConfigurationError(
            f"--database-url must be a PostgreSQL URL such as "
            f"postgresql://user@host:5432/lyra, not {redacted(url)!r}"
        )
    return urlunsplit(parts._replace(scheme="postgresql"))


def redacted(url: str) -> str:
    """``url`` with any password replaced by ``***``, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


T = TypeVar("T")


def check_reachable(url: str, *, timeout: float = 5.0) -> None:
    """Connect once; DatabaseUnreachable (one line, no traceback) if the server does not answer.

    A database that does not exist yet is fine: DBOS creates it.
    """
    _on_connection(url, timeout, lambda db: None)


def ensure_database(url: str, *, timeout: float = 5.0) -> None:
    """Connect once, creating the database first where it does not exist yet (as DBOS
    does when a run starts: a worker may start before the run that fills its queue);
    DatabaseUnreachable (one line) when the server does not answer or refuses."""
    if _on_connection(url, timeout, lambda db: True) is not None:
        return
    from psycopg import errors, sql

    name = urlsplit(url).path.lstrip("/")
    maintenance = urlunsplit(urlsplit(url)._replace(path="/postgres"))

    def create(db: Any) -> bool:
        with suppress(errors.DuplicateDatabase):  # (another worker made it meanwhile)
            db.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return True

    if _on_connection(maintenance, timeout, create) is None:  # (no postgres database)
        raise DatabaseUnreachable(
            f"the database at {redacted(url)} does not exist, and the server has no "
            "postgres database to create it from: create it (createdb NAME)"
        )


def holds_runs(url: str, *, timeout: float = 5.0) -> bool:
    """True when the PostgreSQL database at ``url`` has DBOS's tables (a durable run
    used it); False for a database no run has used, or one that does not exist;
    DatabaseUnreachable as :func:`check_reachable` raises it."""
    row = _on_connection(
        url, timeout, lambda db: db.execute("SELECT to_regclass('dbos.workflow_status')").fetchone()
    )
    return row is not None and row[0] is not None


def _on_connection(url: str, timeout: float, work: Callable[[Any], T]) -> T | None:
    """``work`` on one connection to ``url``; None for a database that does not exist
    yet; DatabaseUnreachable (one line, no traceback) when the server does not answer."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=max(1, round(timeout)), autocommit=True) as db:
            return work(db)
    except psycopg.Error as exc:
        reason = _first_line(exc)
        if "does not exist" in reason and "database" in reason:
            return None
        raise DatabaseUnreachable(
            f"cannot reach the database at {redacted(url)}: {reason}"
        ) from None


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0].removeprefix("connection failed: ") if lines else type(exc).__name__
    return " ".join(text.split())


_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
_FULL_MESSAGES = ("database or disk is full", "disk i/o error", "no space left on device")
_FULL_SQLSTATES = frozenset({"53100", "53400"})  # PostgreSQL: disk_full, configuration_limit


def storage_failure(exc: BaseException) -> str | None:
    """What went wrong, when ``exc`` (or an error it wraps: SQLAlchemy's ``orig``,
    a cause) says the checkpoint storage is full or cannot be written; else None."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        error = pending.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in _FULL_ERRNOS:
            return error.strerror or str(error)
        text = str(error).lower()
        if getattr(error, "sqlstate", None) in _FULL_SQLSTATES or any(
            message in text for message in _FULL_MESSAGES
        ):
            return str(error).splitlines()[0].removeprefix("(sqlite3.OperationalError) ")
        pending += [getattr(error, "orig", None), error.__cause__, error.__context__]
        if isinstance(error, BaseExceptionGroup):
            pending += error.exceptions
    return None
