"""Durable runs on DBOS: resume after SIGKILL without paying twice, workers sharing a
PostgreSQL queue and surviving a killed worker, the same output as the local path,
and clear errors."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import pytest

import lyra.durable
from lyra._extras import install_hint
from lyra.cli import main
from lyra.delegation import ChildContext, DelegationResult, Limits
from lyra.proteins import AnalysisOutput, analyze
from lyra.recovery import Attempt, RecoveryPolicy, Replay, attempt_plan, record_waits, recover

ADMIN_URLS = [
    os.environ.get("LYRA_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    "postgresql://root@127.0.0.1:5432/test",
]
BUNDLED = ["P04637", "Q8I3H7", "P00533", "P01308", "P05067"]
BUNDLED += ["P69905", "P38398", "P0DTC2", "A1YPR0", "A0A0C5B5G6"]
MIXED = ["P04637", "XXXXX", "Q8I3H7", "P00533", "P01308", "P05067", "bad id!"]
MIXED_FAULTS = ["P00533:structure_error", "P01308:tool_error", "P05067:hang@1"]


# -- helpers -------------------------------------------------------------------


def lyra_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "lyra", *args]


def env_with(log: Path) -> dict[str, str]:
    return {**os.environ, "LYRA_TEST_INVOCATION_LOG": str(log), "PYTHONUNBUFFERED": "1"}


def attempts(log: Path) -> list[tuple[str, int, int]]:
    """(protein, attempt, pid) for every attempt start the test hook recorded."""
    if not log.exists():
        return []
    complete = log.read_text().split("\n")[:-1]  # a line still being written is not one
    rows = [line.split("\t") for line in complete if line]
    return [(row[0], int(row[1]), int(row[2])) for row in rows if len(row) == 4]  # not pauses


def invocations(log: Path) -> list[tuple[str, int]]:
    """(protein, pid) for every child run (attempt) the test hook recorded."""
    return [(protein, pid) for protein, _, pid in attempts(log)]


def wait_for(predicate: Any, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def protein_ids(output: dict[str, Any]) -> list[str]:
    buckets = ("completed_analyses", "partial_analyses", "failed_analyses")
    return [e["protein_id"] for bucket in buckets for e in output[bucket]]


def slow(ids: list[str], seconds: float) -> list[str]:
    return [arg for p in ids for arg in ("--inject", f"{p}:slow:{seconds}")]


def shape(output: AnalysisOutput) -> dict[str, Any]:
    """What must not depend on the backend: buckets, categories, stages, attempts."""
    entries = [*output.completed_analyses, *output.partial_analyses, *output.failed_analyses]
    return {
        "summary": output.summary.model_dump(),
        "entries": sorted(
            (
                type(e).__name__,
                e.protein_id,
                getattr(e, "category", None),
                getattr(e, "failed_at_stage", None),
                tuple(getattr(e, "tasks_skipped", ())),
                e.attempts,
                tuple((t.task_type, t.status) for t in e.tasks),
            )
            for e in entries
        ),
        "quorum": output.quorum.model_dump() if output.quorum else None,
    }


@pytest.fixture
def database_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test, dropped afterwards."""
    psycopg = pytest.importorskip("psycopg")
    admin, admin_url, errors = None, "", []
    for admin_url in ADMIN_URLS:
        try:
            admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=3)
            break
        except psycopg.Error as exc:
            errors.append(str(exc).splitlines()[0])
    if admin is None:
        pytest.skip(f"PostgreSQL is not reachable on 127.0.0.1:5432 ({'; '.join(errors)})")
    name = f"lyra_test_{uuid.uuid4().hex[:12]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- the package surface ----------------------------------------------------------


def test_public_surface_is_sorted_and_does_not_import_dbos() -> None:
    """lyra.durable exports a sorted __all__ and importing it leaves DBOS unloaded."""
    assert lyra.durable.__all__ == [
        "DatabaseUnreachable",
        "DurableChildError",
        "DurableExecutor",
        "JobSpec",
        "NoWorkers",
        "RecordedTask",
        "WaitingQuestion",
    ]
    code = "import sys, lyra.durable, lyra.cli; print('dbos' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- (1) SIGKILL in the middle, then --resume -------------------------------------


@pytest.mark.slow
def test_sigkill_then_resume_never_reruns_a_finished_child(tmp_path: Path) -> None:
    """Killed mid-run, the resumed run runs only unfinished children; each protein once."""
    run_dir, log = tmp_path / "run", tmp_path / "invocations.log"
    args = ["analyze", *BUNDLED, "--durable", "--run-dir", str(run_dir), "--json"]
    first = subprocess.Popen(
        lyra_cmd(*args, "--concurrency", "3", *slow(BUNDLED, 0.1)),
        env=env_with(log),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    reports = run_dir / "reports"
    try:
        wait_for(
            lambda: reports.is_dir() and len(list(reports.iterdir())) >= 3,
            timeout=60,
            what="three finished proteins",
        )
        first.send_signal(signal.SIGKILL)
        finished = {p.stem for p in reports.iterdir() if p.suffix == ".txt"}
    finally:
        first.kill()
        first.wait()
    assert first.returncode == -signal.SIGKILL
    assert 3 <= len(finished) < len(BUNDLED), "the kill must land in the middle of the run"

    resumed = subprocess.run(
        lyra_cmd("analyze", "--resume", str(run_dir), "--json"),
        env=env_with(log),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode in (0, 1), resumed.stderr
    output = json.loads(resumed.stdout)
    assert sorted(protein_ids(output)) == sorted(BUNDLED)
    assert output["summary"]["total_requested"] == len(BUNDLED)
    runs = Counter(protein for protein, _ in invocations(log))
    assert set(runs) == set(BUNDLED)
    assert {p: runs[p] for p in finished} == dict.fromkeys(finished, 1)

    again = subprocess.run(
        lyra_cmd("analyze", "--resume", str(run_dir), "--json"),
        env=env_with(log),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(again.stdout) == output
    assert "already finished" in again.stderr
    assert Counter(protein for protein, _ in invocations(log)) == runs


@pytest.mark.slow
def test_sigkill_mid_attempt_never_reruns_a_finished_attempt(tmp_path: Path) -> None:
    """Killed during attempt 2, the resumed run replays attempt 1 from its record
    and continues from the stage it stopped at (no second fetch)."""
    run_dir, log = tmp_path / "run", tmp_path / "invocations.log"
    protein = "P04637"
    # Attempt 1: fetch (0.7 s), then analyze_structure hangs until the 1.2 s timeout.
    # Attempt 2 (timeout 2.4 s): the four stages left, 0.3 s each, killed while under
    # way. A fetch in attempt 2 would take 0.3 s (its stages are no longer slowed by
    # the @1 fault), so a fetch of 0.7 s or more in the output is attempt 1's.
    args = ["analyze", protein, "--durable", "--run-dir", str(run_dir), "--json"]
    args += ["--timeout", "1.2", "--retries", "1", *slow([protein], 0.3)]
    args += ["--inject", f"{protein}:slow:0.4@1", "--inject", f"{protein}:hang@1"]
    first = subprocess.Popen(
        lyra_cmd(*args),
        env=env_with(log),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: (protein, 2) in {(p, n) for p, n, _ in attempts(log)},
            timeout=60,
            what="attempt 2 to start",
        )
        first.send_signal(signal.SIGKILL)
    finally:
        first.kill()
        first.wait()
    assert first.returncode == -signal.SIGKILL
    assert not (run_dir / "reports").exists() or not list((run_dir / "reports").iterdir())

    resumed = subprocess.run(
        lyra_cmd("analyze", "--resume", str(run_dir), "--json"),
        env=env_with(log),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    output = json.loads(resumed.stdout)
    assert protein_ids(output) == [protein]
    (entry,) = output["completed_analyses"]
    assert entry["attempts"] == 2

    rows = attempts(log)
    assert Counter(n for _, n, _ in rows) == {1: 1, 2: 2}  # attempt 1 once; 2 killed, rerun
    assert [n for _, n, pid in rows if pid == first.pid] == [1, 2]
    assert [n for _, n, pid in rows if pid != first.pid] == [2]
    fetch = next(t for t in entry["tasks"] if t["task_type"] == "fetch_protein")
    assert fetch["duration_seconds"] >= 0.7  # restored from attempt 1's record, not re-run


@pytest.mark.anyio
async def test_a_replayable_loop_is_a_function_of_its_recorded_attempts() -> None:
    """Under Replay the waits come from the task ID and the budget from recorded
    durations, so a replay of the same results takes the same path."""

    async def refused(prompt: str, ctx: ChildContext) -> str:
        raise ConnectionError("connection refused")

    async def run(task_id: str, budget: float | None = None) -> tuple[list[float], int]:
        waits: list[float] = []

        async def run_attempt(attempt: Attempt) -> DelegationResult:
            result = await attempt_plan(
                refused, attempt, subject=None, context=None, task_id=task_id, limits=Limits()
            )
            return result.model_copy(update={"duration": 10.0})  # as recorded

        async def sleep(seconds: float) -> None:
            waits.append(seconds)

        policy = RecoveryPolicy(max_retries=3, total_budget=budget)
        outcome = await recover(
            "task", policy=policy, task_id=task_id, replay=Replay(run_attempt, sleep)
        )
        return waits, len(outcome.attempts)

    first, again, other = await run("t-1"), await run("t-1"), await run("t-2")
    assert first == again
    assert first[1] == 4
    assert first[0] != other[0]  # seeded per task, not one fixed sequence
    assert await run("t-1", budget=25.0) == (first[0][:2], 3)  # 10 s charged per attempt


# -- (2) a supervisor and two workers on PostgreSQL ----------------------------------


@pytest.mark.slow
def test_workers_share_children_and_survive_a_killed_worker(
    tmp_path: Path, database_url: str
) -> None:
    """Two workers share the queue; one is SIGKILLed mid-child; every protein ends once."""
    proteins = BUNDLED[:4]
    log = tmp_path / "invocations.log"
    stderr_files = [(tmp_path / f"worker{i}.err").open("w") for i in range(2)]
    workers = [
        subprocess.Popen(
            lyra_cmd("worker", "--database-url", database_url, "--concurrency", "1"),
            env=env_with(log),
            stdout=subprocess.DEVNULL,
            stderr=stderr_file,
        )
        for stderr_file in stderr_files
    ]
    try:
        for i in range(len(workers)):
            wait_for(
                lambda i=i: "taking children" in (tmp_path / f"worker{i}.err").read_text(),
                timeout=60,
                what=f"worker {i} to start",
            )
        supervisor = subprocess.Popen(
            lyra_cmd(
                "analyze",
                *proteins,
                "--database-url",
                database_url,
                "--run-dir",
                str(tmp_path / "run"),
                "--concurrency",
                "2",
                "--json",
                *slow(proteins, 0.15),
            ),
            env=env_with(log),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        victim = workers[0]
        wait_for(
            lambda: any(pid == victim.pid for _, pid in invocations(log)),
            timeout=60,
            what="the first worker to take a child",
        )
        time.sleep(0.2)  # mid-child: each child takes 5 x 0.15 s
        victim.send_signal(signal.SIGKILL)
        killed_child = [p for p, pid in invocations(log) if pid == victim.pid][-1]
        stdout, stderr = supervisor.communicate(timeout=120)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        for stderr_file in stderr_files:
            stderr_file.close()
    assert supervisor.returncode == 0, stderr
    assert workers[1].returncode == 0  # SIGTERM: a clean stop
    output = json.loads(stdout)
    assert sorted(protein_ids(output)) == sorted(proteins)
    assert output["summary"]["successful"] == len(proteins)

    rows = invocations(log)
    assert {pid for _, pid in rows} == {w.pid for w in workers}, "both workers took children"
    runs = Counter(protein for protein, _ in rows)
    assert runs[killed_child] == 2  # started on the killed worker, finished on the other
    assert all(runs[p] == 1 for p in proteins if p != killed_child)
    assert (killed_child, workers[1].pid) in rows

    lines = (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    completed = [e["subject"] for e in events if e["event"] == "delegation_completed"]
    assert sorted(completed) == sorted(proteins)  # the workers' events reach the run directory


# -- (3) the same output from every backend ---------------------------------------


@pytest.mark.anyio
async def test_embedded_durable_output_matches_the_local_one(tmp_path: Path) -> None:
    """Same input, same buckets, categories, stages and attempts, local or durable."""
    options: dict[str, Any] = {"faults": MIXED_FAULTS, "retries": 1, "timeout": 0.5}
    durable_dir = tmp_path / "durable"
    with record_waits():
        local = await analyze(MIXED, run_dir=tmp_path / "local", **options)
        async with lyra.durable.DurableExecutor.embedded(durable_dir, run_id="t") as ex:
            durable = await analyze(MIXED, run_dir=durable_dir, executor=ex, **options)
        async with lyra.durable.DurableExecutor.embedded(durable_dir, run_id="t") as ex:
            replayed = await analyze(MIXED, run_dir=durable_dir, executor=ex, **options)
    assert shape(durable) == shape(local)
    for bucket in ("completed_analyses", "partial_analyses", "failed_analyses"):
        assert getattr(replayed, bucket) == getattr(durable, bucket)  # recorded, not re-run
    local_files = sorted(p.name for p in (tmp_path / "local" / "reports").iterdir())
    assert sorted(p.name for p in (durable_dir / "reports").iterdir()) == local_files
    assert (durable_dir / "dbos.sqlite").is_file()


@pytest.mark.slow
def test_postgres_output_matches_the_local_one(tmp_path: Path, database_url: str) -> None:
    """The queue path classifies the mixed input exactly as the local path does."""
    worker = subprocess.Popen(
        lyra_cmd("worker", "--database-url", database_url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        args = ["analyze", *MIXED, "--retries", "1", "--timeout", "1", "--json"]
        args += [arg for f in MIXED_FAULTS for arg in ("--inject", f)]
        queued = subprocess.run(
            lyra_cmd(*args, "--database-url", database_url, "--run-dir", str(tmp_path / "q")),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    with record_waits():
        local = anyio.run(
            partial(analyze, MIXED, faults=MIXED_FAULTS, retries=1, timeout=1), backend="asyncio"
        )
    assert queued.returncode == 1, queued.stderr
    assert shape(AnalysisOutput.model_validate_json(queued.stdout)) == shape(local)


# -- (4) clear errors ---------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "P04637", "--database-url", "postgresql://127.0.0.1:1/lyra"],
        ["worker", "--database-url", "postgresql://127.0.0.1:1/lyra"],
        ["analyze", "P04637", "--database-url", "mysql://127.0.0.1/lyra"],
    ],
    ids=["analyze-unreachable", "worker-unreachable", "not-postgres"],
)
def test_database_errors_are_one_line_and_exit_2(args: list[str], tmp_path: Path) -> None:
    """An unreachable or wrong database is one line on stderr, exit 2, no traceback."""
    done = subprocess.run(lyra_cmd(*args), capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("lyra: ")
    assert "Traceback" not in done.stderr


def test_a_worker_started_before_its_run_makes_the_database(database_url: str) -> None:
    """Workers may start first (README): one given a database that does not exist yet
    creates it, as the run would (a worker that finds it made already does nothing)."""
    psycopg = pytest.importorskip("psycopg")
    from lyra.durable._database import ensure_database

    name = f"lyra_test_{uuid.uuid4().hex[:12]}"
    fresh = urlunsplit(urlsplit(database_url)._replace(path=f"/{name}"))
    try:
        ensure_database(fresh)
        ensure_database(fresh)  # (made already: nothing to do)
        with psycopg.connect(fresh, autocommit=True, connect_timeout=3) as db:
            assert db.execute("SELECT current_database()").fetchone() == (name,)
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_run_directory_of_another_run_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Other IDs, other options, a plain run or a resume of nothing: exit 2, saying why."""
    run = str(tmp_path / "run")
    assert main(["analyze", "P04637", "P69905", "--durable", "--run-dir", run]) == 0
    capsys.readouterr()
    cases = {
        "another run (of P04637 P69905);": ["analyze", "Q8I3H7", "--resume", run],
        "another run (of P04637 P69905, in that order);": [
            "analyze",
            "P69905",
            "P04637",
            "--resume",
            run,
        ],
        "its --timeout is 300, not 5;": ["analyze", "--resume", run, "--timeout", "5"],
        "its --inject is none, not P04637:hang;": [
            "analyze",
            "--resume",
            run,
            "--inject",
            "P04637:hang",
        ],
        "its --structure-only is off, not on;": ["analyze", "--resume", run, "--structure-only"],
        "holds a durable run": ["analyze", "P04637", "--run-dir", run],
        "ran embedded": ["analyze", "--resume", run, "--database-url", "postgresql://x/y"],
        "no run directory": ["analyze", "--resume", str(tmp_path / "nothing")],
    }
    for message, argv in cases.items():
        status = main(argv)
        err = capsys.readouterr().err
        assert (status, message in err) == (2, True), (argv, err)
    status = main(["analyze", "--resume", run, "--concurrency", "2", "--json"])
    out, err = capsys.readouterr()
    assert status == 0
    assert "already finished" in err
    assert json.loads(out)["summary"]["successful"] == 2
    copy = tmp_path / "copy"  # a finished run's output names its results where it is now
    shutil.copytree(run, copy)
    assert main(["analyze", "--resume", str(copy), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["results"] == str(copy / "results.jsonl")


def test_another_runs_ids_are_named_in_a_line_not_a_page() -> None:
    """A resume refused for another run's IDs names a few and counts the rest (a run of
    10,000 IDs made a 70 KB line)."""
    from lyra.cli._durable_runs import _some

    ids = [f"P{n:05d}" for n in range(10_000)]
    assert _some(ids) == " ".join(ids[:10]) + " and 9,990 more"
    assert _some(ids[:3]) == "P00000 P00001 P00002"


HOLD = """
import fcntl, sys, time
held = open(sys.argv[1], "a+")
fcntl.flock(held, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


@contextmanager
def _held_by_another_process(lock: Path) -> Iterator[None]:
    """``lock`` held by another process (as a running lyra holds it) while the block runs."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()


def test_a_plain_run_into_a_folder_another_run_works_in_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'Two plain (non-durable) runs into the same --run-dir are both accepted when
    started together': each saw an empty folder, and both wrote their results there. A
    plain run holds its folder too: the second is refused (exit 2) and writes nothing."""
    run = tmp_path / "run"
    run.mkdir()
    with _held_by_another_process(run / "lyra-run.lock"):
        assert main(["analyze", "P04637", "--run-dir", str(run)]) == 2
        assert "already holds a run" in capsys.readouterr().err
        assert sorted(path.name for path in run.iterdir()) == ["lyra-run.lock"]
    assert main(["analyze", "P04637", "--run-dir", str(run)]) == 0  # the other let go


def test_a_run_another_process_works_on_is_refused_before_any_child_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second resume of a durable run that another process still runs (its lock held,
    as here) is refused with exit 2, naming the folder, and starts no child: both would
    run every child not finished yet. Once the other lets go, the resume runs."""
    run = tmp_path / "run"
    log = tmp_path / "invocations.log"
    done = subprocess.run(
        lyra_cmd("analyze", "P04637", "Q8I3H7", "--durable", "--run-dir", str(run)),
        env=env_with(log),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (run / "output.json").unlink()  # (not finished, as far as a resume can tell)
    started = invocations(log)
    with _held_by_another_process(run / "lyra-run.lock"):
        assert main(["analyze", "--resume", str(run)]) == 2
        assert f"another lyra process is running {run} now" in capsys.readouterr().err
    assert invocations(log) == started
    assert main(["analyze", "--resume", str(run)]) == 0


def test_a_run_directory_on_a_file_system_without_locks_is_used_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the file system keeps no locks (some network mounts: ENOLCK), the run
    directory is used as it was before it had one, never refused or failed."""
    import errno

    from lyra import _claims

    def no_locks(*args: Any) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(_claims.fcntl, "flock", no_locks)
    held = _claims.claim(tmp_path, "lyra-run.lock", what="the run directory", busy="held")
    assert not held.closed
    held.close()


def test_a_new_durable_run_in_a_plain_runs_folder_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain run's folder is no place for a new durable one: the two runs' reports,
    results and logs would mix. Refused before anything is written there."""
    run = tmp_path / "run"
    assert main(["analyze", "P04637", "--run-dir", str(run)]) == 0
    before = sorted(path.name for path in run.iterdir())
    capsys.readouterr()
    assert main(["analyze", "P01308", "--durable", "--run-dir", str(run)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert sorted(path.name for path in run.iterdir()) == before


# -- (4) a user's own child: any delegation work, not only proteins --------------------

OWN_RUN = """
import json, sys, anyio
from lyra import ChildRef, Supervisor, Task
from lyra.durable import DurableExecutor

async def main() -> None:
    folder, done, result = sys.argv[1], sys.argv[2], sys.argv[3]
    tasks = [Task(prompt=f"job {i}", subject=f"job{i}", context={"done_file": done})
             for i in range(6)]
    async with DurableExecutor.embedded(folder, run_id="mine") as executor:
        supervisor = Supervisor(ChildRef(target="fakes.children:napper"), executor=executor)
        outcomes = await supervisor.run(tasks, max_concurrency=2)
    with open(result, "w") as out:
        json.dump([o.result.output for o in outcomes], out)

anyio.run(main)
"""


@pytest.mark.anyio
async def test_an_embedded_run_whose_child_cannot_be_built_raises_before_any_task(
    tmp_path: Path,
) -> None:
    """A ChildRef to a missing module is the caller's ConfigurationError, as in a local
    run, not each task's 'Internal error in lyra'."""
    from lyra import ChildRef, Supervisor, Task
    from lyra.durable import DurableExecutor
    from lyra.errors import ConfigurationError

    async with DurableExecutor.embedded(tmp_path / "run", run_id="r") as ex:
        supervisor = Supervisor(ChildRef(target="no_such_module:x"), executor=ex)
        with pytest.raises(ConfigurationError, match="no module named 'no_such_module'"):
            await supervisor.run([Task(prompt="a")])


def test_a_durable_job_of_a_plain_child_names_a_call_that_works() -> None:
    """A durable run of a plain function is refused naming the ChildRef to pass instead,
    written as a call that builds one (``ChildRef('module:attribute', options)`` raised
    a TypeError: it takes keywords only)."""
    import re

    from lyra import ChildRef
    from lyra.durable._spec import JobSpec
    from lyra.errors import ConfigurationError
    from lyra.supervisor import Job

    async def plain(prompt: str, ctx: ChildContext) -> str:
        return prompt

    with pytest.raises(ConfigurationError) as refused:
        JobSpec.of(Job(child=plain, policy=RecoveryPolicy()))
    [call] = re.findall(r"pass (ChildRef\(.*\)) as the child", str(refused.value))
    made = eval(call.replace("{...}", "{'n': 1}"), {"ChildRef": ChildRef})  # the hint, tried
    assert made == ChildRef(target="module:attribute", options={"n": 1})


@pytest.mark.anyio
@pytest.mark.parametrize("configured", [False, True], ids=["events off", "events on the log"])
async def test_an_embedded_run_writes_its_event_log_once_whether_events_are_on_or_not(
    tmp_path: Path, configured: bool
) -> None:
    """``event_log=`` alone receives every task's events; with events also configured to
    that file, each event is written once, not twice."""
    import lyra.events
    from lyra import ChildRef, Supervisor, Task
    from lyra.durable import DurableExecutor

    log = tmp_path / "events.jsonl"
    lyra.events.configure(log) if configured else lyra.events.configure()
    tasks = [Task(prompt=f"job {i}", subject=f"job{i}") for i in range(3)]
    async with DurableExecutor.embedded(tmp_path / "run", run_id="r", event_log=log) as ex:
        await Supervisor(ChildRef(target="fakes.children:spender"), executor=ex).run(tasks)
    lyra.events.configure()
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    finished = sorted(e["subject"] for e in logged if e["event"] == "delegation_completed")
    assert finished == ["job0", "job1", "job2"]
    ids = [e["event_id"] for e in logged if "event_id" in e]
    assert len(ids) == len(set(ids))


@pytest.mark.anyio
async def test_a_second_process_on_an_embedded_run_directory_is_refused(tmp_path: Path) -> None:
    """An embedded executor whose run directory another process runs is refused as it
    starts, with one clear line, before it runs any task: both would run every task."""
    from lyra.durable import DurableExecutor
    from lyra.errors import ConfigurationError

    run = tmp_path / "run"
    run.mkdir()
    with _held_by_another_process(run / "lyra-run.lock"):
        executor = DurableExecutor.embedded(run, run_id="mine")
        with pytest.raises(ConfigurationError, match="another process is running the durable"):
            await executor.start()
    async with DurableExecutor.embedded(run, run_id="mine"):  # once it has let go
        pass


@pytest.mark.anyio
async def test_a_run_given_other_tasks_is_refused_naming_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same run ID given other tasks would hand each the result recorded for its
    place (another task's): it is refused before anything runs, naming the first task
    that differs; the tasks as they were still get their recorded results."""
    from lyra import ChildRef, Supervisor, Task
    from lyra.durable import DurableExecutor
    from lyra.errors import ConfigurationError

    log = tmp_path / "invocations.log"
    monkeypatch.setenv("LYRA_TEST_INVOCATION_LOG", str(log))

    async def run(prompts: list[str]) -> list[Any]:
        tasks = [Task(prompt=prompt) for prompt in prompts]
        async with DurableExecutor.embedded(tmp_path / "run", run_id="q1") as executor:
            child = ChildRef(target="fakes.children:spender")
            outcomes = await Supervisor(child, executor=executor).run(tasks)
        return [outcome.result.output for outcome in outcomes]

    assert await run(["Do item-1", "Do item-2"]) == ["spent on: Do item-1", "spent on: Do item-2"]
    with pytest.raises(
        ConfigurationError, match=r"another task 0: 'Do item-7', where it recorded 'Do item-1'"
    ):
        await run(["Do item-7", "Do item-1"])
    assert await run(["Do item-1", "Do item-2", "Do item-3"]) == [
        "spent on: Do item-1",
        "spent on: Do item-2",
        "spent on: Do item-3",
    ]
    assert len(attempts(log)) == 3  # item-1 and item-2 once, then item-3


@pytest.mark.slow
def test_a_users_own_child_resumes_after_sigkill_without_rerunning_finished_tasks(
    tmp_path: Path,
) -> None:
    """A child named by ChildRef (not a protein) is checkpointed like any other: after a
    SIGKILL the same run finishes, and no finished task runs again."""
    script, done, log = tmp_path / "own.py", tmp_path / "done.txt", tmp_path / "invocations.log"
    script.write_text(OWN_RUN)
    env = {**env_with(log), "PYTHONPATH": str(Path(__file__).parent)}
    result = tmp_path / "result.json"
    argv = [sys.executable, str(script), str(tmp_path / "run"), str(done), str(result)]
    first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(
        lambda: done.exists() and len(done.read_text().split()) >= 2,
        timeout=60,
        what="two tasks to finish",
    )
    # A task notes itself done just before its checkpoint is saved: give those
    # noted so far time to be checkpointed, then kill (others may be mid-flight).
    finished_before = set(done.read_text().split())
    time.sleep(0.5)
    first.send_signal(signal.SIGKILL)
    first.wait()
    second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert json.loads(result.read_text()) == [f"napped: job {i}" for i in range(6)]
    starts = Counter(protein for protein, _ in invocations(log))
    assert all(starts[subject] == 1 for subject in finished_before)
    assert sorted(starts) == [f"job{i}" for i in range(6)]


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_users_own_child_runs_on_lyra_worker_under_its_task_budget(
    tmp_path: Path, database_url: str
) -> None:
    """lyra worker builds a user's child from its ChildRef; each task's own budget holds
    on the worker, and the outcomes come back whole."""
    from lyra import Budget, ChildRef, Supervisor, Task

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    errors = (tmp_path / "worker.err").open("w")
    worker = subprocess.Popen(  # noqa: ASYNC220 - started once, before the run
        lyra_cmd("worker", "--database-url", database_url),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=errors,
    )
    try:
        wait_for(
            lambda: "taking children" in (tmp_path / "worker.err").read_text(),
            timeout=60,
            what="the worker to start",
        )
        tasks = [
            Task(prompt="within budget", subject="rich"),
            Task(prompt="over budget", subject="poor", budget=Budget(max_tokens=500)),
        ]
        child = ChildRef(target="fakes.children:spender")
        async with lyra.durable.DurableExecutor.queue(database_url, run_id="own") as executor:
            rich, poor = await Supervisor(child, executor=executor).run(tasks)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
        errors.close()
    assert rich.result.output == "spent on: within budget"
    assert rich.usage.tokens == 1200
    assert poor.result.failure is not None
    assert poor.result.failure.error_type == "budget"
    assert poor.usage.tokens == 800


# -- (5) light installs -------------------------------------------------------------


def test_a_plain_install_requires_no_database_engine() -> None:
    """DBOS, SQLAlchemy and psycopg come only with the durable extra (and 'all')."""
    from importlib.metadata import requires

    from lyra._extras import DISTRIBUTION

    plain = [r for r in requires(DISTRIBUTION) or [] if "extra ==" not in r]
    assert not [r for r in plain if r.lower().startswith(("dbos", "sqlalchemy", "psycopg"))]
    durable = [r for r in requires(DISTRIBUTION) or [] if "extra == 'durable'" in r]
    assert any(r.startswith("dbos") for r in durable)


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "P04637", "--durable"],
        ["analyze", "P04637", "--database-url", "postgresql://u@127.0.0.1:1/x"],
        ["worker", "--database-url", "postgresql://u@127.0.0.1:1/x"],
        ["answer", "."],
    ],
)
def test_durable_commands_without_the_extra_name_it(args: list[str], tmp_path: Path) -> None:
    """Without DBOS installed, a durable command says which extra to install: exit 2."""
    code = (
        "import sys; sys.modules['dbos'] = None; from lyra.cli import main; "
        f"sys.exit(main({args!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert install_hint("durable") in done.stderr
    assert "Traceback" not in done.stderr
