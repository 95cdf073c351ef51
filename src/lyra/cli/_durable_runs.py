"""A durable run's identity (``run.json`` in its run directory) and ``--resume``.

``run.json`` holds the run's ID (it names the run's workflows), where its
children run (``embedded`` or ``postgres``) and the typed request
(:class:`~lyra.cli._request.AnalyzeRequest`) that shapes the result.
``lyra analyze --resume DIR`` runs that request again; options given on the
command line must agree with it, or the directory belongs to another run (a
usage error, exit 2). ``--concurrency`` may differ (it does not change the
result), and the recorded one holds unless it is given.
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from lyra.cli._request import AnalyzeRequest
from lyra.durable import DurableExecutor
from lyra.durable._database import check_reachable, postgres_url, redacted, require_durable
from lyra.errors import ConfigurationError
from lyra.proteins import AnalysisOutput, requested_ids
from lyra.supervisor import RunDir, write_atomic

RUN_FILE = "run.json"


class RunRecord(BaseModel):
    """What ``run.json`` holds."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    run_id: str
    backend: Literal["embedded", "postgres"]
    request: AnalyzeRequest
    database: str | None = None
    """host:port/name of the PostgreSQL database (no user, no password)."""


@dataclass
class DurableRun:
    """A durable ``lyra analyze`` about to run (or already finished)."""

    run_dir: Path
    request: AnalyzeRequest | None
    executor: DurableExecutor | None
    finished: AnalysisOutput | None = None

    def close(self) -> None:
        """Stop DBOS in this process."""
        if self.executor is not None:
            self.executor.close()


@dataclass(frozen=True)
class Placement:
    """Where the command line asks a run to live and run."""

    run_dir: str | None
    resume: str | None
    durable: bool
    database_url: str | None


def open_run(
    request: AnalyzeRequest | None,
    where: Placement,
    given: dict[str, Any],
    stderr: TextIO = sys.stderr,
) -> DurableRun | None:
    """The durable run asked for, or None for a plain in-process run.

    ``request`` is None on ``--resume`` (the record's is used, with a given
    ``--concurrency``). Raises ConfigurationError (exit 2) for a directory of
    another run, a missing run, a backend mismatch or an unreachable database.
    """
    resume, run_dir = _path(where.resume), _path(where.run_dir)
    if resume is not None and run_dir is not None and resume.resolve() != run_dir.resolve():
        raise ConfigurationError("--resume and --run-dir name different folders")
    folder = resume or run_dir
    existing = _load(folder)
    if not (where.durable or where.database_url or resume is not None):
        if existing is not None:
            raise ConfigurationError(
                f"{folder} holds a durable run; resume it with: lyra analyze --resume {folder}"
            )
        return None
    if resume is not None and existing is None:
        return _resume_plain(resume)
    require_durable()
    if existing is not None and folder is not None:
        _check_same(existing, request, given, folder)
        _check_backend(existing, where.database_url, folder)
        concurrency = given.get("concurrency", existing.request.concurrency)
        request = existing.request.model_copy(update={"concurrency": concurrency})
        record = existing
    else:
        assert request is not None  # a new run always has one
        folder = folder or RunDir.new().path
        record = RunRecord(
            run_id=uuid.uuid4().hex[:12],
            backend="postgres" if where.database_url else "embedded",
            request=request,
            database=_database(where.database_url),
        )
        RunDir(folder)
        write_atomic(folder / RUN_FILE, record.model_dump_json(indent=2))
    output = folder / "output.json"
    if output.exists():
        finished = AnalysisOutput.model_validate_json(output.read_text(encoding="utf-8"))
        return DurableRun(folder, request, None, finished)
    logged = _reported(folder, list(record.request.ids))
    if record.backend == "embedded":
        executor = DurableExecutor.embedded(folder, run_id=record.run_id, already_logged=logged)
    else:
        url = postgres_url(where.database_url or "")
        check_reachable(url)
        executor = DurableExecutor.queue(url, run_id=record.run_id, already_logged=logged)
        print(
            f"lyra analyze: children go to the queue on {redacted(url)}; "
            f"run `lyra worker --database-url URL` on any machine to process them",
            file=stderr,
        )
    _start(executor)
    return DurableRun(folder, request, executor)


def _reported(folder: Path, ids: list[str]) -> set[str]:
    """Proteins whose report (so whose events) an earlier process already wrote."""
    run_dir = RunDir(folder)
    return {p for p in requested_ids(ids) if run_dir.report(p).exists()}


def _start(executor: DurableExecutor) -> None:
    """Start DBOS now, so that a failure is a usage error, not a run of failed proteins."""
    try:
        executor.start_blocking()
    except ConfigurationError:
        raise
    except Exception as exc:  # noqa: BLE001 - shown in one line, as every usage error
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise ConfigurationError(f"cannot start the durable engine: {text}") from None


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _load(folder: Path | None) -> RunRecord | None:
    if folder is None or not (folder / RUN_FILE).is_file():
        return None
    try:
        return RunRecord.model_validate_json((folder / RUN_FILE).read_text(encoding="utf-8"))
    except ValueError:
        raise ConfigurationError(f"{folder / RUN_FILE} is not a lyra run record") from None


def _resume_plain(folder: Path) -> DurableRun:
    """``--resume`` of a folder without a run record: only a finished run can be shown."""
    output = folder / "output.json"
    if not folder.is_dir():
        raise ConfigurationError(f"--resume: there is no run directory at {folder}")
    if not output.is_file():
        raise ConfigurationError(
            f"{folder} holds no durable run to resume (no {RUN_FILE}); "
            f"start runs with --durable or --database-url to make them resumable"
        )
    finished = AnalysisOutput.model_validate_json(output.read_text(encoding="utf-8"))
    return DurableRun(folder, None, None, finished)


def _check_same(
    record: RunRecord, request: AnalyzeRequest | None, given: dict[str, Any], folder: Path
) -> None:
    """ConfigurationError unless the IDs and options given match the record."""
    recorded = record.request
    ids = request.ids if request is not None else given.get("ids")
    if ids and requested_ids(ids) != requested_ids(recorded.ids):
        raise ConfigurationError(
            f"{folder} belongs to another run (of {' '.join(recorded.ids)}); "
            f"resume it with: lyra analyze --resume {folder}"
        )
    for name, was, now in recorded.differences(given):
        option = "--" + name.replace("_", "-")
        raise ConfigurationError(
            f"{folder} belongs to another run: its {option} is {was!r}, not {now!r}; "
            f"resume it with: lyra analyze --resume {folder}"
        )


def _check_backend(record: RunRecord, database_url: str | None, folder: Path) -> None:
    if record.backend == "postgres" and not database_url:
        raise ConfigurationError(
            f"{folder} ran on PostgreSQL workers; resume it with "
            f"--resume {folder} --database-url URL"
        )
    if record.database and record.database != _database(database_url):
        raise ConfigurationError(
            f"{folder} ran on the database {record.database}, not {_database(database_url)}"
        )
    if record.backend == "embedded" and database_url:
        raise ConfigurationError(
            f"{folder} ran embedded (its checkpoints are in {folder}/dbos.sqlite); "
            f"resume it without --database-url"
        )


def _database(url: str | None) -> str | None:
    """Where a PostgreSQL URL points, without credentials."""
    if not url:
        return None
    parts = urlsplit(postgres_url(url))
    return f"{parts.hostname}:{parts.port or 5432}{parts.path}"
