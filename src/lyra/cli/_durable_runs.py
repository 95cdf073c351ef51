"""A durable run's identity (``run.json`` in its run directory) and ``--resume``.

``run.json`` holds the run's ID (it names the run's workflows), where its
children run (``embedded`` or ``postgres``) and the typed request
(:class:`~lyra.cli._request.AnalyzeRequest`) that shapes the result.
``lyra analyze --resume DIR`` runs that request again; options given on the
command line must agree with it, or the directory belongs to another run (a
usage error, exit 2). ``--concurrency`` may differ (it does not change the
result), and the recorded one holds unless it is given.

Before a resume trusts the checkpoints, they are checked against the run's
own evidence of finished work (its event log and reports): when they are
missing or damaged, the resume refuses (exit 2) unless ``--force``, which
sets the damaged database aside and runs everything again under a new run ID.
Every state file is read with a clear error; a damaged ``output.json`` of a
durable run is rebuilt from the checkpoints.
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from lyra._claims import Claim
from lyra.cli._request import Placement, as_given, differences
from lyra.cli._run_record import (
    RUN_FILE,
    RunRecord,
    another_run,
    first_line,
    load_record,
    resume_command,
)
from lyra.durable import DurableExecutor
from lyra.durable._internal import (
    SQLITE_FILE,
    CheckpointsDamaged,
    Ledger,
    check_reachable,
    check_recorded,
    check_sqlite,
    hold_run_dir,
    postgres_url,
    redacted,
    require_durable,
)
from lyra.errors import ConfigurationError, RunStopped
from lyra.proteins import UNFINISHED, AnalysisOutput, AnalyzeRequest, requested_ids
from lyra.supervisor import RunDir, file_stem, write_atomic


@dataclass
class DurableRun:
    """A durable ``lyra analyze`` about to run (or already finished)."""

    run_dir: Path
    request: AnalyzeRequest | None
    executor: DurableExecutor | None
    finished: AnalysisOutput | None = None
    postgres: bool = False
    hold: Claim | None = None
    """This process's claim on the run directory (see ``hold_run_dir``), let go by
    :meth:`close`; the embedded executor's own claim shares it."""

    @property
    def resume(self) -> str:
        """The command that finishes this run after an interruption."""
        return resume_command(self.run_dir, postgres=self.postgres)

    def close(self) -> None:
        """Stop DBOS in this process, and let the run directory go."""
        try:
            if self.executor is not None:
                self.executor.close()
        finally:
            if self.hold is not None:
                self.hold.close()


def open_run(
    request: AnalyzeRequest | None,
    where: Placement,
    given: dict[str, Any],
    stderr: TextIO | None = None,
) -> DurableRun | None:
    """The durable run asked for, or None for a plain in-process run.

    ``request`` is None on ``--resume`` (the record's is used, with a given
    ``--concurrency``). Raises ConfigurationError (exit 2) for a directory of
    another run, a missing run, a backend mismatch, an unreachable database,
    a run directory that cannot be written, or checkpoints that are missing
    or damaged (unless ``where.force``).
    """
    stderr = stderr or sys.stderr
    resume, run_dir = _path(where.resume), _path(where.run_dir)
    if resume is not None and run_dir is not None and resume.resolve() != run_dir.resolve():
        raise ConfigurationError("--resume and --run-dir name different folders")
    folder = resume or run_dir
    existing = load_record(folder)
    if not (where.durable or where.database_url or resume is not None):
        if existing is not None and folder is not None:  # a record is read from a folder
            raise ConfigurationError(
                f"{folder} holds a durable run; resume it with: {resume_command(folder)}"
            )
        return None
    if resume is not None and existing is None:
        return _resume_plain(resume)
    require_durable()
    if request is not None and request.budget is not None:
        raise ConfigurationError(
            "--max-tokens, --max-cost and --max-turns keep one budget for the whole run in "
            "one process; a durable run (--durable, --database-url) cannot hold it across "
            "its processes: leave them out, or run without --durable"
        )
    if existing is not None and folder is not None:
        _check_same(existing, request, given, folder)
        _check_backend(existing, where.database_url, folder)
        finished = _finished(folder, stderr)
        if finished is not None:  # printed again: nothing written, so nothing held
            return DurableRun(folder, _resumed(existing, given), None, finished)
        _check_writable(folder)
    else:
        assert request is not None  # a new run always has one
        if folder is not None and folder.is_dir() and RunDir(folder).holds_a_run():
            raise another_run(folder)
        folder = folder or RunDir.new().path
    hold = _claim(folder)  # (a new run's before its record: two started at once race)
    try:
        run = _started(folder, existing, request, given, where, stderr)
    except RunStopped as stopped:  # a full disk as the engine started: nothing ran
        hold.close()
        finish = _resume(folder, where)
        raise RunStopped(
            f"{stopped}; make room, then finish the run with: {finish}", path=stopped.path
        ) from None
    except KeyboardInterrupt:  # (Ctrl+C as the engine starts: the run is named, if it is one)
        hold.close()
        if load_record(folder) is not None:
            print(
                f"lyra: the run is in {folder}; finish it with: {_resume(folder, where)}",
                file=stderr,
            )
        raise
    except BaseException:
        hold.close()
        raise
    run.hold = hold
    return run


def _resume(folder: Path, where: Placement) -> str:
    return resume_command(folder, postgres=bool(where.database_url))


def _started(
    folder: Path,
    existing: RunRecord | None,
    request: AnalyzeRequest | None,
    given: dict[str, Any],
    where: Placement,
    stderr: TextIO,
) -> DurableRun:
    """The run in ``folder``, which this process holds: a resumed one's executor
    started; a new one's record written, and its executor started."""
    if existing is not None:
        request, record = _resumed(existing, given), existing
    else:
        assert request is not None
        if load_record(folder) is not None or RunDir(folder).holds_a_run():
            raise another_run(folder)  # one started there as this one started
        record = RunRecord(
            run_id=_new_run_id(),
            backend="postgres" if where.database_url else "embedded",
            request=request,
            database=_database(where.database_url),
        )
        _write_record(folder, record)
    executor = _opened(folder, record, where, resumed=existing is not None, stderr=stderr)
    return DurableRun(folder, request, executor, postgres=record.backend == "postgres")


def _resumed(record: RunRecord, given: dict[str, Any]) -> AnalyzeRequest:
    """The recorded request, with a ``--concurrency`` given to the resume."""
    concurrency = given.get("concurrency", record.request.concurrency)
    return record.request.model_copy(update={"concurrency": concurrency})


def _claim(folder: Path) -> Claim:
    """This process's claim on the run directory while it runs, taken before a new
    run's record is written (two runs started at once race for it); its message names
    the command that finishes the run."""
    busy = (
        f"another lyra process is running {folder} now; let it finish (or stop it), "
        f"then, if it did not finish: {resume_command(folder)}"
    )
    return hold_run_dir(folder, busy)


def _opened(
    folder: Path, record: RunRecord, where: Placement, *, resumed: bool, stderr: TextIO
) -> DurableExecutor:
    """The run's executor, started; checkpoints found damaged start over with
    ``--force``, else are refused."""
    try:
        return _open(folder, record, where, resumed=resumed, stderr=stderr)
    except CheckpointsDamaged as exc:
        if not where.force:
            raise ConfigurationError(
                f"the checkpoints of {folder} are missing or damaged: {exc}; resuming would "
                f"run finished children again (--force to do that: {resume_command(folder)} "
                "--force)"
            ) from None
        record = _start_over(folder, record, exc, stderr)
        return _open(folder, record, where, resumed=False, stderr=stderr)


def _open(
    folder: Path, record: RunRecord, where: Placement, *, resumed: bool, stderr: TextIO
) -> DurableExecutor:
    """The run's executor, started; a resumed run's checkpoints checked first."""
    events = RunDir(folder).events
    evidence = _evidence(folder, record) if resumed else None
    executor: DurableExecutor
    if record.backend == "embedded":
        if evidence is not None:
            check_sqlite(folder / SQLITE_FILE, expected=bool(evidence[0] or evidence[1]))
        executor = DurableExecutor.embedded(folder, run_id=record.run_id, event_log=events)
    else:
        url = postgres_url(where.database_url or "")
        check_reachable(url)
        executor = DurableExecutor.queue(
            url, run_id=record.run_id, event_log=events, worker_wait=where.worker_wait
        )
        print(
            f"lyra analyze: children go to the queue on {redacted(url)}; "
            f"run `lyra worker --database-url URL` on any machine to process them",
            file=stderr,
        )
    _start(executor)
    if evidence is not None:
        try:
            check_recorded(executor.recorded(), logged=evidence[0], finished=evidence[1])
        except BaseException:
            executor.close()
            raise
    return executor


def _evidence(folder: Path, record: RunRecord) -> tuple[set[str], set[str]]:
    """What the run directory says this run did: workflows with events in the log,
    and the file stems of proteins with a report written since the run record
    (each one finished; a report from before a --force belongs to the old run)."""
    run_dir = RunDir(folder)
    tasks = Ledger.of_log(run_dir.events).tasks()
    logged = {task for task in tasks if task.startswith(f"{record.run_id}/")}
    since = (folder / RUN_FILE).stat().st_mtime
    reports = {p: run_dir.report(p) for p in requested_ids(record.request.ids)}
    finished = {p for p, path in reports.items() if path.exists() and path.stat().st_mtime >= since}
    return logged, {file_stem(p) for p in finished}


def _start_over(folder: Path, record: RunRecord, why: Exception, stderr: TextIO) -> RunRecord:
    """--force: set the damaged checkpoints aside, and the log and results of the run
    they held (the children run again: ``lyra logs stats`` would count them twice), and
    give the run a new ID."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    damaged = _set_aside(
        folder, [f"{SQLITE_FILE}{s}" for s in ("", "-wal", "-shm")], "damaged", stamp
    )
    files = RunDir(folder)
    before = _set_aside(folder, [files.events.name, files.results.name], "before-force", stamp)
    aside = "".join(
        f"; set aside: {', '.join(names)} (.{label}-{stamp})"
        for names, label in ((damaged, "damaged"), (before, "before-force"))
        if names
    )
    print(
        f"lyra analyze: WARNING: the checkpoints of {folder} are missing or damaged ({why}); "
        f"--force: every child runs again{aside}",
        file=stderr,
    )
    fresh = record.model_copy(update={"run_id": _new_run_id()})
    _write_record(folder, fresh)
    return fresh


def _set_aside(folder: Path, names: list[str], why: str, stamp: str) -> list[str]:
    """Rename each of ``names`` in ``folder`` that exists to ``NAME.WHY-STAMP``; the
    names moved."""
    moved = []
    for name in names:
        path = folder / name
        if path.exists():
            path.rename(path.with_name(f"{name}.{why}-{stamp}"))
            moved.append(name)
    return moved


def _new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def _write_record(folder: Path, record: RunRecord) -> None:
    try:
        RunDir(folder)
        write_atomic(folder / RUN_FILE, record.model_dump_json(indent=2))
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write to the run directory {folder}: {exc.strerror or exc}"
        ) from None


def _check_writable(folder: Path) -> None:
    """ConfigurationError when the run directory cannot be written (a read-only disk)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write to the run directory {folder}: {exc.strerror or exc}"
        ) from None


def _finished(folder: Path, stderr: TextIO) -> AnalysisOutput | None:
    """The run's final output when it finished; a damaged one is rebuilt (None)."""
    output = folder / "output.json"
    if not output.exists():
        return None
    try:
        done = _read_output(output)
    except ConfigurationError as exc:
        print(f"lyra analyze: {exc}; rebuilding it from the checkpoints", file=stderr)
        return None
    if done.results is None:
        return done
    # Named as it was written, from the directory the run started in: here, it is this
    # folder's (named as this command names the folder, a copy of the run dir included).
    return done.model_copy(update={"results": str(RunDir(folder).results)})


def _read_output(path: Path) -> AnalysisOutput:
    try:
        return AnalysisOutput.model_validate_json(path.read_bytes())
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or first_line(exc)
        raise ConfigurationError(f"{path} is damaged ({reason})") from None


def _start(executor: DurableExecutor) -> None:
    """Start DBOS now, so that a failure is a usage error, not a run of failed proteins."""
    try:
        executor.start_blocking()
    except (ConfigurationError, RunStopped):
        raise
    except KeyboardInterrupt:
        _quiet_stop(executor)
        raise
    except Exception as exc:  # noqa: BLE001 - shown in one line, as every usage error
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise ConfigurationError(f"cannot start the durable engine: {text}") from None


def _quiet_stop(executor: DurableExecutor) -> None:
    """Ctrl+C while DBOS starts: stop it without its own messages."""
    from lyra.durable._internal import quiet_dbos

    quiet_dbos()
    with suppress(Exception):  # stopping half-started DBOS may fail; we exit anyway
        executor.close()


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _resume_plain(folder: Path) -> DurableRun:
    """``--resume`` of a folder without a run record: refused, saying what to do."""
    output = folder / "output.json"
    if not folder.is_dir():
        raise ConfigurationError(f"--resume: there is no run directory at {folder}")
    if not output.is_file():
        raise ConfigurationError(
            f"{folder} holds no durable run to resume (no {RUN_FILE}); "
            f"start runs with --durable or --database-url to make them resumable"
        )
    done = _read_output(output)
    if done.interrupted:
        listed = folder / UNFINISHED
        raise ConfigurationError(
            f"{folder} holds a run that was interrupted before {len(done.unfinished)} of its "
            f"proteins finished; a run started without --durable cannot be resumed: run "
            f"them with: lyra analyze --ids-file {listed}"
        )
    raise ConfigurationError(
        f"{folder} holds a run started without --durable, which cannot be resumed; it "
        f"finished, and its results are in {output}"
    )


_NAMED = 10
"""The most IDs of another run an error names (a run of 10,000 made a 70 KB line)."""


def _some(ids: Sequence[str]) -> str:
    """``ids`` as an error names them: the first few, and how many more."""
    more = len(ids) - _NAMED
    return " ".join(ids[:_NAMED]) + (f" and {more:,} more" if more > 0 else "")


def _check_same(
    record: RunRecord, request: AnalyzeRequest | None, given: dict[str, Any], folder: Path
) -> None:
    """ConfigurationError unless the IDs and options given match the record."""
    recorded = record.request
    ids = request.ids if request is not None else given.get("ids")
    if ids and requested_ids(ids) != requested_ids(recorded.ids):
        # (the order is the run's too: its output lists the proteins as they were asked)
        same = sorted(requested_ids(ids)) == sorted(requested_ids(recorded.ids))
        raise ConfigurationError(
            f"{folder} belongs to another run (of {_some(recorded.ids)}"
            f"{', in that order' if same else ''}); resume it with: {resume_command(folder)}"
        )
    for option, was, now in differences(recorded, given):
        raise ConfigurationError(
            f"{folder} belongs to another run: its {option} is {as_given(option, was)}, "
            f"not {as_given(option, now)}; "
            f"resume it with: {resume_command(folder)}"
        )


def _check_backend(record: RunRecord, database_url: str | None, folder: Path) -> None:
    if record.backend == "postgres" and not database_url:
        raise ConfigurationError(
            f"{folder} ran on PostgreSQL workers; resume it with: "
            f"{resume_command(folder, postgres=True)}"
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
