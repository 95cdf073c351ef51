"""A durable run's identity (``run.json`` in its run directory) and ``--resume``.

``run.json`` holds the run's ID (it names the run's workflows), where its
children run (``embedded`` or ``postgres``), the protein IDs and the options
that shape the result. ``lyra analyze --resume DIR`` takes all of them from
there; IDs or options given on the command line must agree with them, or the
directory belongs to another run (a usage error, exit 2). Options that do not
change the result (``--concurrency``, ``--json``, ``-v``) may differ.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from lyra.durable._database import check_reachable, postgres_url, redacted
from lyra.durable._executor import DurableExecutor
from lyra.errors import ConfigurationError
from lyra.proteins import AnalysisOutput, requested_ids
from lyra.supervisor import RunDir, write_atomic

RUN_FILE = "run.json"
_NOT_IDENTITY = frozenset(
    {"command", "run", "ids", "run_dir", "resume", "durable", "database_url"}
    | {"json", "verbose", "concurrency"}
)


class RunRecord(BaseModel):
    """What ``run.json`` holds."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    backend: Literal["embedded", "postgres"]
    ids: list[str]
    settings: dict[str, Any]
    database: str | None = None
    """host:port/name of the PostgreSQL database (no user, no password)."""


@dataclass
class DurableRun:
    """A durable ``lyra analyze`` about to run (or already finished)."""

    run_dir: Path
    record: RunRecord | None
    executor: DurableExecutor | None
    finished: AnalysisOutput | None = None

    def close(self) -> None:
        """Stop DBOS in this process."""
        if self.executor is not None:
            self.executor.close()


def open_run(args: argparse.Namespace, stderr: TextIO = sys.stderr) -> DurableRun | None:
    """The durable run ``args`` ask for, or None for a plain in-process run.

    On a resume, ``args`` get the recorded IDs and options. Raises
    ConfigurationError (exit 2) for a directory of another run, a missing
    run, a backend mismatch or an unreachable database.
    """
    resume, run_dir = _path(args.resume), _path(args.run_dir)
    if resume is not None and run_dir is not None and resume.resolve() != run_dir.resolve():
        raise ConfigurationError("--resume and --run-dir name different folders")
    folder = resume or run_dir
    existing = _load(folder)
    if not (args.durable or args.database_url or resume is not None):
        if existing is not None:
            raise ConfigurationError(
                f"{folder} holds a durable run; resume it with: lyra analyze --resume {folder}"
            )
        return None
    if resume is not None and existing is None:
        return _resume_plain(resume, args)
    if existing is not None and folder is not None:
        _check_same(existing, args, folder)
        _check_backend(existing, args, folder)
        _apply(existing, args)
        record = existing
    else:
        if not _runnable(args):
            return None  # the command line reports what is wrong; nothing is recorded
        folder = folder or RunDir.new().path
        record = RunRecord(
            run_id=uuid.uuid4().hex[:12],
            backend="postgres" if args.database_url else "embedded",
            ids=list(args.ids),
            settings=_settings(args),
            database=_database(args.database_url),
        )
        RunDir(folder)
        write_atomic(folder / RUN_FILE, record.model_dump_json(indent=2))
    args.run_dir = str(folder)
    output = folder / "output.json"
    if output.exists():
        finished = AnalysisOutput.model_validate_json(output.read_text(encoding="utf-8"))
        return DurableRun(folder, record, None, finished)
    if record.backend == "embedded":
        executor = DurableExecutor.embedded(folder, run_id=record.run_id)
    else:
        url = postgres_url(args.database_url)
        check_reachable(url)
        executor = DurableExecutor.queue(url, run_id=record.run_id)
        print(
            f"lyra analyze: children go to the queue on {redacted(url)}; "
            f"run `lyra worker --database-url URL` on any machine to process them",
            file=stderr,
        )
    _start(executor)
    return DurableRun(folder, record, executor)


def _start(executor: DurableExecutor) -> None:
    """Start DBOS now, so that a failure is a usage error, not a run of failed proteins."""
    try:
        executor.start_blocking()
    except ConfigurationError:
        raise
    except Exception as exc:  # noqa: BLE001 - shown in one line, as every usage error
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise ConfigurationError(f"cannot start the durable engine: {text}") from None


def _runnable(args: argparse.Namespace) -> bool:
    """Whether a new run has IDs to analyse and faults that parse."""
    from lyra.proteins import parse_fault

    try:
        [parse_fault(spec) for spec in args.inject]
    except ValueError:
        return False
    return bool(args.ids or args.question)


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _load(folder: Path | None) -> RunRecord | None:
    if folder is None or not (folder / RUN_FILE).is_file():
        return None
    try:
        return RunRecord.model_validate_json((folder / RUN_FILE).read_text(encoding="utf-8"))
    except ValueError:
        raise ConfigurationError(f"{folder / RUN_FILE} is not a lyra run record") from None


def _resume_plain(folder: Path, args: argparse.Namespace) -> DurableRun:
    """``--resume`` of a folder without a run record: only a finished run can be shown."""
    output = folder / "output.json"
    if not folder.is_dir():
        raise ConfigurationError(f"--resume: there is no run directory at {folder}")
    if not output.is_file():
        raise ConfigurationError(
            f"{folder} holds no durable run to resume (no {RUN_FILE}); "
            f"start runs with --durable or --database-url to make them resumable"
        )
    args.run_dir = str(folder)
    finished = AnalysisOutput.model_validate_json(output.read_text(encoding="utf-8"))
    return DurableRun(folder, None, None, finished)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """The options that shape a run's result, as JSON data."""
    chosen = {k: v for k, v in vars(args).items() if k not in _NOT_IDENTITY and not callable(v)}
    loaded: dict[str, Any] = json.loads(json.dumps(chosen, default=str, sort_keys=True))
    return loaded


def _defaults() -> dict[str, Any]:
    from lyra.cli._main import build_parser

    return _settings(build_parser().parse_args(["analyze"]))


def _check_same(record: RunRecord, args: argparse.Namespace, folder: Path) -> None:
    """ConfigurationError unless the IDs and explicit options given match the record."""
    if args.ids and requested_ids(args.ids) != requested_ids(record.ids):
        raise ConfigurationError(
            f"{folder} belongs to another run (of {' '.join(record.ids)}); "
            f"resume it with: lyra analyze --resume {folder}"
        )
    given, defaults = _settings(args), _defaults()
    for key, value in given.items():
        if value != defaults.get(key) and value != record.settings.get(key, defaults.get(key)):
            recorded = record.settings.get(key, defaults.get(key))
            option = "--" + key.replace("_", "-")
            raise ConfigurationError(
                f"{folder} belongs to another run: its {option} is {recorded!r}, "
                f"not {value!r}; resume it with: lyra analyze --resume {folder}"
            )


def _check_backend(record: RunRecord, args: argparse.Namespace, folder: Path) -> None:
    if record.backend == "postgres" and not args.database_url:
        raise ConfigurationError(
            f"{folder} ran on PostgreSQL workers; resume it with "
            f"--resume {folder} --database-url URL"
        )
    if record.database and record.database != _database(args.database_url):
        raise ConfigurationError(
            f"{folder} ran on the database {record.database}, not {_database(args.database_url)}"
        )
    if record.backend == "embedded" and args.database_url:
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


def _apply(record: RunRecord, args: argparse.Namespace) -> None:
    """Give ``args`` the recorded IDs and options."""
    args.ids = list(record.ids)
    for key, value in record.settings.items():
        if hasattr(args, key):
            setattr(args, key, value)
