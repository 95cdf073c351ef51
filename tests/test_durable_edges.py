"""Durable runs at their edges: a kill on either side of a checkpoint, lost or damaged
checkpoints and state files, a read-only run directory, a queue with no worker, the size
of each checkpoint, and Ctrl+C."""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

import lyra
import lyra.durable
import lyra.errors
import lyra.events
import lyra.logs
from lyra.cli import main
from lyra.cli._durable_runs import open_run
from lyra.cli._request import Placement
from lyra.durable._events import Ledger
from lyra.logs import collect_stats
from lyra.proteins import analyze
from test_durable import (
    attempts,
    database_url,  # noqa: F401 - a fixture
    env_with,
    lyra_cmd,
    protein_ids,
    slow,
    wait_for,
)

PROTEINS = ["P04637", "Q8I3H7", "P00533", "P01308", "P05067", "P69905"]


def logged(run_dir: Path) -> list[dict[str, Any]]:
    """Every event the run directory's log holds."""
    path = run_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def finishing(run_dir: Path) -> Counter[tuple[str, int]]:
    """How often each (subject, attempt) is logged as finished."""
    names = ("delegation_completed", "delegation_failed")
    return Counter((e["subject"], e["attempt"]) for e in logged(run_dir) if e["event"] in names)


def paused(log: Path) -> bool:
    return log.exists() and "\tpaused:" in log.read_text()


# -- never pay twice, never log twice -------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("point", "starts"),
    [("before_checkpoint", 2), ("after_checkpoint", 1)],
)
@pytest.mark.parametrize("retries", ["0", "1"], ids=["saved-with-the-output", "a-step"])
def test_a_kill_next_to_a_checkpoint_never_logs_an_attempt_twice(
    tmp_path: Path,
    point: str,
    starts: int,
    retries: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Killed just before an attempt's checkpoint is saved, the log does not yet show it
    finished (so the resume that runs it again pays only for unlogged work); killed just
    after, the resume replays it without running it and logs its events exactly once --
    whether the attempt is a step of its own or, being the last one allowed, saved with
    the task's output."""
    run_dir, log = tmp_path / "run", tmp_path / "invocations.log"
    args = ["analyze", "P04637", "--durable", "--run-dir", str(run_dir), "--retries", retries]
    first = subprocess.Popen(
        lyra_cmd(*args),
        env={**env_with(log), "LYRA_TEST_PAUSE": point},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: paused(log), timeout=60, what=f"the attempt to pause {point}")
        assert finishing(run_dir) == {}, "no finished attempt is logged before the kill"
        first.send_signal(signal.SIGKILL)
    finally:
        first.kill()
        first.wait()

    monkeypatch.setenv("LYRA_TEST_INVOCATION_LOG", str(log))
    assert main(["analyze", "--resume", str(run_dir), "--json"]) == 0, capsys.readouterr().err
    assert [p for p, _, _ in attempts(log)] == ["P04637"] * starts
    assert finishing(run_dir) == {("P04637", 1): 1}
    ids = [e["event_id"] for e in logged(run_dir) if "event_id" in e]
    assert len(ids) == len(set(ids)) >= 2, "each event of the task once, with its ID"


# -- lost or damaged checkpoints ----------------------------------------------------------


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A durable run SIGKILLed after two of its proteins finished (checkpoints in the WAL)."""
    base = tmp_path_factory.mktemp("killed")
    run_dir = base / "run"
    args = ["analyze", *PROTEINS, "--durable", "--run-dir", str(run_dir), "--concurrency", "2"]
    first = subprocess.Popen(
        lyra_cmd(*args, *slow(PROTEINS, 0.15)),
        env=env_with(base / "invocations.log"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    reports = run_dir / "reports"
    try:
        wait_for(
            lambda: reports.is_dir() and len(list(reports.glob("*.txt"))) >= 2,
            timeout=60,
            what="two finished proteins",
        )
        first.send_signal(signal.SIGKILL)
    finally:
        first.kill()
        first.wait()
    assert (run_dir / "dbos.sqlite-wal").exists()
    return run_dir


def _delete(run_dir: Path) -> None:
    for path in run_dir.glob("dbos.sqlite*"):
        path.unlink()


def _truncate(run_dir: Path) -> None:
    (run_dir / "dbos.sqlite-wal").unlink()
    with (run_dir / "dbos.sqlite").open("r+b") as db:
        db.truncate(db.seek(0, os.SEEK_END) // 2)


def _lose_wal(run_dir: Path) -> None:
    for suffix in ("-wal", "-shm"):
        (run_dir / f"dbos.sqlite{suffix}").unlink(missing_ok=True)


def _replace_with_a_folder(run_dir: Path) -> None:
    _delete(run_dir)
    (run_dir / "dbos.sqlite").mkdir()


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage", [_delete, _truncate, _lose_wal, _replace_with_a_folder], ids=lambda f: f.__name__
)
def test_a_resume_refuses_lost_checkpoints_unless_forced(
    killed_run: Path, tmp_path: Path, damage: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Deleted, truncated, without its WAL or a folder, the checkpoint database cannot vouch for
    the finished children: --resume says so in one line (exit 2); --force warns and runs
    every child again, and the run finishes."""
    run_dir = tmp_path / "run"
    shutil.copytree(killed_run, run_dir)
    damage(run_dir)
    assert main(["analyze", "--resume", str(run_dir)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("lyra: the checkpoints of")
    assert "--force" in err

    assert main(["analyze", "--resume", str(run_dir), "--force", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "WARNING" in err
    assert "every child runs again" in err
    assert sorted(protein_ids(json.loads(out))) == sorted(PROTEINS)
    assert (
        json.loads((run_dir / "run.json").read_text())["run_id"]
        != json.loads((killed_run / "run.json").read_text())["run_id"]
    )
    # the first run's log and results are set aside: the run's own count what output.json does
    assert "events.jsonl, results.jsonl (.before-force-" in err
    assert len([p for p in run_dir.iterdir() if p.name.startswith("events.jsonl.before-")]) == 1
    stats = collect_stats([run_dir])
    assert stats.tasks == len(PROTEINS)
    results = (run_dir / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["protein_id"] for line in results) == sorted(PROTEINS)


@pytest.mark.slow
def test_intact_checkpoints_resume_without_a_warning(
    killed_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same killed run, untouched, resumes quietly and finishes every protein."""
    run_dir = tmp_path / "run"
    shutil.copytree(killed_run, run_dir)
    assert main(["analyze", "--resume", str(run_dir), "--json"]) == 0
    out, err = capsys.readouterr()
    assert "WARNING" not in err
    assert "damaged" not in err
    assert sorted(protein_ids(json.loads(out))) == sorted(PROTEINS)


@pytest.fixture
def finished_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A finished durable run of one protein."""
    run_dir = tmp_path / "run"
    assert main(["analyze", "P04637", "--durable", "--run-dir", str(run_dir)]) == 0
    capsys.readouterr()
    return run_dir


def test_a_damaged_output_is_rebuilt_from_intact_checkpoints(
    finished_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A corrupt output.json of a durable run is named and rebuilt from the checkpoints."""
    (finished_run / "output.json").write_text('{"completed_analyses": [')
    assert main(["analyze", "--resume", str(finished_run), "--json"]) == 0
    out, err = capsys.readouterr()
    assert "output.json is damaged" in err
    assert "rebuilding" in err
    assert "Traceback" not in err
    assert json.loads(out)["summary"]["successful"] == 1
    assert json.loads((finished_run / "output.json").read_text()) == json.loads(out)


@pytest.mark.parametrize(
    ("file", "text", "message"),
    [
        ("run.json", "{", "is not a readable lyra run record"),
        ("run.json", '{"run_id": "x"}', "is not a readable lyra run record"),
        ("output.json", "[1, 2", "output.json is damaged"),
    ],
)
def test_a_damaged_state_file_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, text: str, message: str
) -> None:
    """A corrupt run record, or the output of a plain run, is exit 2 with one line."""
    run_dir = tmp_path / "run"
    assert main(["analyze", "P04637", "--run-dir", str(run_dir)]) == 0
    if file == "run.json":
        (run_dir / "output.json").unlink()
    (run_dir / file).write_text(text)
    capsys.readouterr()
    assert main(["analyze", "--resume", str(run_dir)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("lyra: ")
    assert message in err


@pytest.mark.parametrize("flag", ["--max-tokens", "--max-turns", "--max-cost"])
def test_a_run_wide_budget_with_a_durable_run_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    """A run-wide budget lives in one process, so --durable with one is refused in one
    line before anything runs (it failed every protein as an internal error)."""
    run_dir = tmp_path / "run"
    argv = ["analyze", "P04637", "--durable", flag, "5", "--run-dir", str(run_dir)]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("lyra: --max-tokens, --max-cost and --max-turns keep one budget")
    assert not run_dir.exists()


@pytest.mark.anyio
async def test_analyze_refuses_a_run_wide_budget_on_an_executor_of_other_processes(
    tmp_path: Path,
) -> None:
    """Through the Python API too: the durable executor's ConfigurationError reaches the
    caller (it is no step failure to degrade), and no protein is reported."""
    async with lyra.durable.DurableExecutor.embedded(tmp_path, run_id="budget") as executor:
        with pytest.raises(lyra.errors.ConfigurationError, match="run-wide budget"):
            await analyze(["P04637"], budget=lyra.Budget(max_turns=5), executor=executor)


@pytest.mark.parametrize("finished", [False, True], ids=["unfinished", "finished"])
def test_a_read_only_run_directory_is_one_clear_line(finished_run: Path, finished: bool) -> None:
    """Resuming a run whose directory sits on a read-only file system: exit 2, one line;
    a finished run's output is printed again, as from a writable one (it writes nothing)."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) to mount the run directory read-only")
    if not finished:
        (finished_run / "output.json").unlink()
    folder = str(finished_run)
    script = (
        f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && "
        f"exec {sys.executable} -m lyra analyze --resume {folder} --json"
    )
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount --bind {folder} {folder}"], capture_output=True
    )
    if probe.returncode != 0:
        pytest.skip("user and mount namespaces are not available here")
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=60
    )
    if finished:
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == json.loads((finished_run / "output.json").read_text())
        return
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"lyra: cannot write to the run directory {folder}: Read-only file system"
    ]


@pytest.mark.parametrize(("size", "filled"), [("8k", 0), ("96k", 80)], ids=["empty", "begun"])
def test_a_full_disk_at_the_durable_start_stops_cleanly_and_resumes(
    tmp_path: Path, size: str, filled: int
) -> None:
    """A checkpoint database that cannot be created (a full disk) stops the run with one
    line (the cause, how to finish), exit 4, not DBOS's tracebacks nor SQLAlchemy's
    links; with room again, --resume runs it: nothing was recorded that it could lose,
    whether the failed start left an empty database or one begun."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) to mount a tiny file system")
    disk, run = tmp_path / "disk", tmp_path / "disk" / "run"
    disk.mkdir()
    lyra_run = f"{sys.executable} -m lyra analyze"
    script = (
        f"mount -t tmpfs -o size={size} tmpfs {disk} && "
        f"dd if=/dev/zero of={disk}/fill bs=1k count={filled} 2>/dev/null; "
        f"{lyra_run} P04637 --durable --run-dir {run} 2>{tmp_path}/first.err; "
        f"echo $? >{tmp_path}/first.rc; "
        f"mount -o remount,size=8m {disk} && exec {lyra_run} --resume {run} --json"
    )
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("user and mount namespaces are not available here")
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=120
    )
    first = (tmp_path / "first.err").read_text()
    assert (tmp_path / "first.rc").read_text().strip() == "4", first
    [line] = first.strip().splitlines()
    assert line.startswith(
        f"lyra analyze: stopped: the checkpoints could not be written to {run}/dbos.sqlite: "
    )
    assert line.endswith(f"make room, then finish the run with: lyra analyze --resume {run}")
    assert "sqlalche.me" not in line
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["successful"] == 1


# -- the queue without a worker -----------------------------------------------------------


@pytest.mark.slow
def test_a_queue_with_no_worker_stops_with_exit_3_and_resumes_later(
    tmp_path: Path,
    database_url: str,  # noqa: F811 - the fixture
) -> None:
    """No worker takes the child in --worker-wait seconds: one line naming the cure,
    exit 3, nothing lost; started later, a worker finishes the same run on --resume."""
    run_dir = str(tmp_path / "run")
    args = ["analyze", "P04637", "--database-url", database_url, "--run-dir", run_dir]
    stalled = subprocess.run(
        lyra_cmd(*args, "--worker-wait", "1"), capture_output=True, text=True, timeout=60
    )
    assert stalled.returncode == 3, stalled.stderr
    said, cure = stalled.stderr.strip().splitlines()[-2:]
    assert said.startswith("lyra: no worker took a child in 1 s (1 waiting")
    assert "lyra worker --database-url" in said
    assert cure == (
        f"lyra: once workers run, finish the run with: lyra analyze --resume {run_dir} "
        "--database-url URL"
    )
    assert not (tmp_path / "run" / "output.json").exists()

    errors = (tmp_path / "worker.err").open("w")
    worker = subprocess.Popen(
        lyra_cmd("worker", "--database-url", database_url),
        stdout=subprocess.DEVNULL,
        stderr=errors,
    )
    try:
        resumed = subprocess.run(
            lyra_cmd("analyze", "--resume", run_dir, "--database-url", database_url, "--json"),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
        errors.close()
    assert resumed.returncode == 0, resumed.stderr
    assert protein_ids(json.loads(resumed.stdout)) == ["P04637"]


def test_worker_wait_is_documented_with_its_exit_code() -> None:
    """lyra analyze --help names --worker-wait and exit status 3."""
    done = subprocess.run(lyra_cmd("analyze", "--help"), capture_output=True, text=True)
    assert "--worker-wait" in done.stdout
    assert "3 no worker took a queued child" in done.stdout


# -- smaller promises -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_each_checkpoint_holds_only_its_own_tasks_faults(tmp_path: Path) -> None:
    """1,000 injected faults over 100 children: each workflow's input carries its own 10,
    so no checkpoint grows with the run's fault count."""
    ids = [f"ZZ{i:05d}" for i in range(100)]
    faults = [f"{p}:slow:0@{k}" for p in ids for k in range(1, 11)]
    run_dir = tmp_path / "run"
    async with lyra.durable.DurableExecutor.embedded(run_dir, run_id="faults") as executor:
        output = await analyze(ids, faults=faults, run_dir=run_dir, executor=executor)
    assert output.summary.total_requested == 100
    with sqlite3.connect(run_dir / "dbos.sqlite") as db:
        sizes = [size for (size,) in db.execute("SELECT length(inputs) FROM workflow_input")]
    db.close()
    assert len(sizes) == 100
    whole_run = len(json.dumps(faults))
    assert max(sizes) < 1_000 + len(json.dumps(faults[:10])) < whole_run / 10


def test_a_resume_keeps_the_recorded_concurrency_unless_given(finished_run: Path) -> None:
    """--resume runs with the recorded --concurrency; a given one wins."""
    record = json.loads((finished_run / "run.json").read_text())
    record["request"]["concurrency"] = 3
    (finished_run / "run.json").write_text(json.dumps(record))
    where = Placement(None, str(finished_run), False, None)
    for given, expected in (({}, 3), ({"concurrency": 5}, 5)):
        run = open_run(None, where, given)
        assert run is not None
        assert run.request is not None
        assert run.request.concurrency == expected
        run.close()


def test_a_slow_inf_fault_survives_a_durable_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """slow:inf reaches the durable child: the protein times out instead of completing."""
    args = ["analyze", "P04637", "--durable", "--run-dir", str(tmp_path / "run"), "--json"]
    assert main([*args, "--inject", "P04637:slow:inf", "--timeout", "0.3"]) == 1
    (failed,) = json.loads(capsys.readouterr().out)["failed_analyses"]
    assert failed["category"] == "timeout"


def test_what_dbos_logs_is_lyra_events_quiet_unless_configured(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """DBOS's log records become ``dbos_message`` events: unconfigured, nothing reaches
    stdout or stderr; configured, each record is an event at its level, except what lyra
    says itself (a child DBOS gave up on after its process kept dying)."""
    executor = lyra.durable.DurableExecutor.embedded(tmp_path / "run", run_id="quiet")
    executor.start_blocking()
    stream = io.StringIO()
    dbos_logger = logging.getLogger("dbos")
    try:
        dbos_logger.error("unconfigured: nowhere")
        lyra.events.configure(stream)
        gave_up = "DBOS Error 6: Workflow w has exceeded its maximum of 4 execution or recovery"
        dbos_logger.error(f"Error executing workflow w: {gave_up} attempts.")
        dbos_logger.warning("the queue thread restarted")
    finally:
        lyra.events.configure()
        executor.close()
    assert capfd.readouterr() == ("", "")
    said = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(e["event"], e["level"], e["message"]) for e in said] == [
        ("dbos_message", "warning", "the queue thread restarted")
    ]


SIGINT_RUN = """
import os, signal, sys, time
import dbos
from lyra.cli import main

real = dbos.DBOS.launch.__func__

def launch(cls, *args, **kwargs):
    if sys.argv[1] == "after":
        real(cls, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl+C while DBOS starts
    time.sleep(10)

dbos.DBOS.launch = classmethod(launch)
sys.exit(main(["analyze", "P04637", "--durable", "--run-dir", sys.argv[2]]))
"""


@pytest.mark.parametrize("moment", ["before", "after"])
def test_ctrl_c_while_the_durable_engine_starts_is_one_line(tmp_path: Path, moment: str) -> None:
    """Ctrl+C during DBOS's launch (before or after it opened the database): exit 130,
    the run named with the resume that finishes it (a default folder's name was never
    told), 'lyra: interrupted', no traceback and nothing from DBOS."""
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-c", SIGINT_RUN, moment, str(run)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 130
    assert done.stderr.splitlines() == [
        f"lyra: the run is in {run}; finish it with: lyra analyze --resume {run}",
        "lyra: interrupted",
    ]


@pytest.mark.slow
def test_ctrl_c_of_a_durable_run_is_quiet(tmp_path: Path) -> None:
    """SIGINT while many children run: two lyra lines (the second names the command
    that finishes the run), no DBOS warning per child."""
    ids = [f"ZZ{i:04d}" for i in range(20)]
    run_dir, log = tmp_path / "run", tmp_path / "invocations.log"
    args = ["analyze", *ids, "--durable", "--run-dir", str(run_dir), "--concurrency", "20"]
    proc = subprocess.Popen(
        lyra_cmd(*args, *slow(ids, 10)),
        env=env_with(log),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: len(attempts(log)) == len(ids), timeout=60, what="every child to start")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.splitlines() == [
        f"lyra: finished proteins are in {run_dir}; finish the run with: "
        f"lyra analyze --resume {run_dir}",
        "lyra: interrupted",
    ]


@pytest.fixture(autouse=True)
def _no_pause_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test hook leaks into the in-process runs."""
    monkeypatch.delenv("LYRA_TEST_PAUSE", raising=False)


# -- a proteome in small: many synthetic proteins, killed and resumed ------------------------

SYNTHETIC_RUN = """
import json, sys, anyio
from lyra import ChildRef, Supervisor, Task
from lyra.durable import DurableExecutor
from lyra.proteins import entry_for

async def main() -> None:
    folder, count, result = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ids = [f"S{i:07d}" for i in range(count)]
    tasks = [Task(prompt=f"Analyze {p}", subject=p, context={"plan": "full"}) for p in ids]
    child = ChildRef(target="lyra.proteins:protein_child", options={"source": "synthetic"})
    async with DurableExecutor.embedded(folder, run_id="synthetic") as executor:
        outcomes = await Supervisor(child, executor=executor).run(tasks, max_concurrency=16)
    entries = [entry_for(t.subject, o) for t, o in zip(tasks, outcomes)]
    with open(result, "w") as out:
        json.dump([[e.protein_id, type(e).__name__] for e in entries], out)

anyio.run(main)
"""


@pytest.mark.slow
def test_two_hundred_synthetic_proteins_killed_and_resumed_end_once_each(tmp_path: Path) -> None:
    """200 synthetic proteins through Supervisor.run on the embedded executor, SIGKILLed
    midway: the resumed run completes every protein exactly once, and only the attempts
    in flight at the kill run a second time."""
    count, log, result = 200, tmp_path / "invocations.log", tmp_path / "result.json"
    script = tmp_path / "synthetic.py"
    script.write_text(SYNTHETIC_RUN)
    argv = [sys.executable, str(script), str(tmp_path / "run"), str(count), str(result)]
    first = subprocess.Popen(argv, env=env_with(log), stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: len(attempts(log)) >= count // 2, timeout=60, what="half the proteins")
        first.send_signal(signal.SIGKILL)
    finally:
        first.kill()
        first.wait()
    assert not result.exists(), "the kill must land before the end"
    second = subprocess.run(argv, env=env_with(log), capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    entries = json.loads(result.read_text())
    assert [p for p, _ in entries] == [f"S{i:07d}" for i in range(count)]
    assert {kind for _, kind in entries} == {"CompletedAnalysis"}
    starts = Counter(p for p, _, _ in attempts(log))
    assert set(starts) == {p for p, _ in entries}
    assert sum(n - 1 for n in starts.values()) <= 16  # only those in flight ran again


@pytest.mark.slow
def test_ctrl_c_of_a_busy_worker_is_quiet(
    tmp_path: Path,
    database_url: str,  # noqa: F811 - the fixture
) -> None:
    """SIGINT to a worker running children: 'lyra: interrupted' and exit 130, no DBOS
    warning for each child it hands back."""
    log, errors = tmp_path / "invocations.log", tmp_path / "worker.err"
    ids = [f"ZZ{i:03d}" for i in range(4)]
    with errors.open("w") as err:
        worker = subprocess.Popen(
            lyra_cmd("worker", "--database-url", database_url),
            env=env_with(log),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        args = ["analyze", *ids, "--database-url", database_url, "--run-dir", str(tmp_path / "r")]
        supervisor = subprocess.Popen(
            lyra_cmd(*args, "--concurrency", "4", *slow(ids, 20)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for(lambda: len(attempts(log)) == len(ids), timeout=60, what="four children")
            worker.send_signal(signal.SIGINT)
            assert worker.wait(timeout=60) == 130
        finally:
            for proc in (worker, supervisor):
                proc.kill()
                proc.wait()
    lines = errors.read_text().splitlines()
    assert lines[-1] == "lyra: interrupted"
    assert all(line.startswith("lyra") for line in lines), lines


@pytest.mark.slow
def test_a_worker_says_at_once_that_its_events_cannot_be_written(
    tmp_path: Path,
    database_url: str,  # noqa: F811 - the fixture
) -> None:
    """lyra worker --events at a path that cannot be written names it on stderr as it
    starts taking children, not never."""
    errors = tmp_path / "worker.err"
    unwritable = tmp_path / "a-folder"
    unwritable.mkdir()
    with errors.open("w") as err:
        worker = subprocess.Popen(
            lyra_cmd("worker", "--database-url", database_url, "--events", str(unwritable)),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            wait_for(lambda: "taking children" in errors.read_text(), timeout=60, what="ready")
            worker.send_signal(signal.SIGINT)
            assert worker.wait(timeout=60) == 130
        finally:
            worker.kill()
            worker.wait()
    lines = errors.read_text().splitlines()
    assert lines[0] == f"lyra worker: could not write events to {unwritable}: Is a directory"
    assert lines.count(lines[0]) == 1


def test_held_events_are_kept_and_written_only_when_replayed(tmp_path: Path) -> None:
    """lyra.events.capturing(hold=True) keeps events without writing them; replay writes
    them as they were (how a durable attempt's events wait for its checkpoint)."""
    log = tmp_path / "events.jsonl"
    lyra.events.configure(log)
    try:
        with lyra.events.capturing(hold=True) as held:
            lyra.events.info("delegation_completed", subject="P04637")
        assert log.read_text() == ""
        lyra.events.replay(held, event_id="w#0")
    finally:
        lyra.events.configure()
    (written,) = logged(tmp_path)
    assert written == {**held[0], "event_id": "w#0"}


@pytest.mark.parametrize("again", ["same process", "a resume"])
def test_what_a_run_says_of_a_task_is_logged_once(tmp_path: Path, again: str) -> None:
    """A named event of a task (``<workflow>#crash-0``) reaches the run's log once,
    whether the same ledger or a resumed run's (read back from the log) writes it again;
    numbered events and events of no task are unaffected."""
    log = tmp_path / "events.jsonl"
    said = [{"event": "task_crash_loop", "level": "error", "event_id": "run/0/0-P04637#crash-0"}]
    numbered = [{"event": "delegation_started", "level": "info", "event_id": "run/0/1-Q8I3H7#0"}]
    plain = [{"event": "children_recovered", "level": "warning"}]
    ledger = Ledger.of_log(log)
    ledger.write([*said, *numbered, *plain])
    if again == "a resume":
        ledger = Ledger.of_log(log)
    ledger.write([*said, *numbered, *plain])
    assert [e["event"] for e in logged(tmp_path)] == [
        "task_crash_loop",
        "delegation_started",
        "children_recovered",
        "children_recovered",
    ]
    assert Ledger.of_log(log).tasks() == {"run/0/0-P04637", "run/0/1-Q8I3H7"}


# -- crash loops and full disks -------------------------------------------------------


def _start_and_kill(args: list[str], env: dict[str, str], log: Path) -> None:
    """Start ``lyra args``, and SIGKILL it once it has started one more attempt."""
    before = len(attempts(log))
    run = subprocess.Popen(
        lyra_cmd(*args), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: len(attempts(log)) > before, timeout=60, what="an attempt to start")
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()


@pytest.mark.slow
def test_a_child_that_keeps_killing_its_process_is_failed_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    """Killed LYRA_MAX_CRASHES times while one child runs, the next resume fails that
    child (tool_error, retryable, evidence naming the crashes) and finishes the others;
    `lyra logs stats` counts the tasks the output counts; every later --resume works on
    the intact database (one rebuilding a damaged output.json too), and none of them
    logs the crash loop again."""
    run_dir, log = tmp_path / "run", tmp_path / "invocations.log"
    env = {**env_with(log), "LYRA_MAX_CRASHES": "2"}
    first = ["analyze", "P04637", "Q8I3H7", "--durable", "--run-dir", str(run_dir)]
    first += ["--concurrency", "1", "--inject", "P04637:slow:30"]
    _start_and_kill(first, env, log)
    _start_and_kill(["analyze", "--resume", str(run_dir)], env, log)

    def resume() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            lyra_cmd("analyze", "--resume", str(run_dir), "--json"),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    resumed = resume()
    assert resumed.returncode == 1, resumed.stderr
    output = json.loads(resumed.stdout)
    assert [e["protein_id"] for e in output["completed_analyses"]] == ["Q8I3H7"]
    [crashed] = output["failed_analyses"]
    assert (crashed["protein_id"], crashed["category"], crashed["retryable"]) == (
        "P04637",
        "tool_error",
        True,
    )
    assert "ended 2 times before it finished" in crashed["error"]
    assert "ERROR" not in resumed.stderr  # DBOS's line for it: lyra's own outcome says it
    assert [(p, n) for p, n, _ in attempts(log)].count(("P04637", 1)) == 2  # never a third
    for damaged in (False, True):  # a damaged output.json is rebuilt: the crash found again
        if damaged:
            (run_dir / "output.json").write_text("{")
        again = resume()
        assert again.returncode == 1, again.stderr
        assert json.loads(again.stdout)["summary"] == output["summary"]
        assert ("damaged" in again.stderr) is damaged
    said = [e["event"] for e in logged(run_dir) if e.get("subject") == "P04637"]
    assert said == ["task_crash_loop", "delegation_failed"]
    stats = lyra.logs.collect_stats([run_dir])
    assert (stats.tasks, stats.tasks_failed, stats.tasks_by_category["tool_error"]) == (2, 1, 1)
    assert (stats.failed, stats.retryable, stats.duplicates) == (1, 1, 0)


def _start_and_stop(args: list[str], env: dict[str, str], log: Path, signum: int) -> None:
    """Start ``lyra args``, stop it with ``signum`` once it has started one more attempt,
    and wait for it to end as an interrupted command does."""
    before = len(attempts(log))
    run = subprocess.Popen(
        lyra_cmd(*args), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: len(attempts(log)) > before, timeout=60, what="an attempt to start")
        run.send_signal(signum)
        assert run.wait(timeout=60) == 130
    finally:
        run.kill()
        run.wait()


@pytest.mark.slow
def test_clean_stops_are_not_counted_as_crashes(tmp_path: Path) -> None:
    """A run stopped (Ctrl+C) while a child runs, more often than LYRA_MAX_CRASHES, then
    resumed, finishes that child: a clean stop took no process down. (SIGTERM takes the
    same way out of the command line: the worker's test below stops by it.)"""
    signum = signal.SIGINT
    run_dir, log = tmp_path / "run", tmp_path / "invocations.log"
    env = {**env_with(log), "LYRA_MAX_CRASHES": "1"}
    first = ["analyze", "P04637", "--durable", "--run-dir", str(run_dir), "--json"]
    _start_and_stop([*first, "--inject", "P04637:slow:1"], env, log, signum)
    _start_and_stop(["analyze", "--resume", str(run_dir)], env, log, signum)
    resumed = subprocess.run(
        lyra_cmd("analyze", "--resume", str(run_dir), "--json"),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["summary"]["successful"] == 1
    assert [(p, n) for p, n, _ in attempts(log)] == [("P04637", 1)] * 3


@pytest.mark.slow
def test_a_worker_stopped_by_sigterm_does_not_count_as_a_crash(
    tmp_path: Path,
    database_url: str,  # noqa: F811 - the fixture
) -> None:
    """Workers stopped by SIGTERM mid-child, more often than LYRA_MAX_CRASHES: the next
    worker finishes the child (another takes it each time), the run succeeds."""
    log = tmp_path / "invocations.log"
    env = {**env_with(log), "LYRA_MAX_CRASHES": "1"}
    args = ["analyze", "P04637", "--database-url", database_url, "--json"]
    args += ["--run-dir", str(tmp_path / "run"), "--inject", "P04637:slow:1"]
    supervisor = subprocess.Popen(
        lyra_cmd(*args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    worker_args = ["worker", "--database-url", database_url]
    try:
        for stopped in range(2):
            worker = subprocess.Popen(
                lyra_cmd(*worker_args),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                wait_for(
                    lambda n=stopped: len(attempts(log)) > n, timeout=60, what="a child to start"
                )
                worker.send_signal(signal.SIGTERM)
                assert worker.wait(timeout=60) == 0
            finally:
                worker.kill()
                worker.wait()
        last = subprocess.Popen(lyra_cmd(*worker_args), env=env, stderr=subprocess.DEVNULL)
        try:
            stdout, stderr = supervisor.communicate(timeout=120)
        finally:
            last.send_signal(signal.SIGTERM)
            last.wait(timeout=60)
    finally:
        supervisor.kill()
        supervisor.wait()
    assert supervisor.returncode == 0, stderr
    assert json.loads(stdout)["summary"]["successful"] == 1
    assert [(p, n) for p, n, _ in attempts(log)] == [("P04637", 1)] * 3


def _file_size_limit(limit: int) -> Any:
    """A preexec_fn: files this process writes may not grow past ``limit`` bytes (the
    write fails with EFBIG, as on a full disk)."""

    def apply() -> None:
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.slow
def test_a_durable_run_on_a_full_disk_stops_cleanly_and_resumes_once_there_is_room(
    tmp_path: Path,
) -> None:
    """When the checkpoint database can no longer grow, the run stops with one line (the
    file, what is kept, the room to make, how to resume), exit 4, no traceback and no
    child reported failed; with --json, stdout holds what finished and what did not (as
    an interrupted run's); with room again, --resume finishes every protein once
    without re-running a finished one."""
    run_dir, log = tmp_path / "run", tmp_path / "invocations.log"
    args = ["analyze", *PROTEINS, "--durable", "--run-dir", str(run_dir), "--concurrency", "2"]
    full = subprocess.run(
        lyra_cmd(*args, "--json"),
        env=env_with(log),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_file_size_limit(400_000),
    )
    assert full.returncode == 4, full.stderr
    assert "Traceback" not in full.stderr
    [stopped] = [line for line in full.stderr.splitlines() if "stopped" in line]
    assert stopped.startswith("lyra analyze: stopped: the checkpoints could not be written to ")
    assert str(run_dir / "dbos.sqlite") in stopped
    assert f"lyra analyze --resume {run_dir}" in stopped
    assert "failed (" not in full.stderr  # no child is blamed for the disk
    finished = [
        line.split()[1].rstrip(":") for line in full.stderr.splitlines() if ": completed" in line
    ]
    kept = json.loads(full.stdout)
    assert kept["interrupted"] is True
    assert sorted(protein_ids(kept)) == sorted(finished)
    assert sorted([*finished, *kept["unfinished"]]) == sorted(PROTEINS)
    assert kept["summary"]["unfinished"] == len(PROTEINS) - len(finished)
    assert not (run_dir / "output.json").exists()  # it would mark the run finished

    resumed = subprocess.run(
        lyra_cmd("analyze", "--resume", str(run_dir), "--json"),
        env=env_with(log),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(protein_ids(json.loads(resumed.stdout))) == sorted(PROTEINS)
    done = json.loads((run_dir / "output.json").read_text())["summary"]
    assert done["successful"] == len(PROTEINS)
    started = Counter(p for p, _, _ in attempts(log))
    assert finished  # some finished before the disk filled up...
    assert all(started[p] == 1 for p in finished)  # ...and none of them ran again


@pytest.mark.anyio
async def test_a_cancelled_future_in_a_durable_child_is_a_failure_and_the_run_resumes(
    tmp_path: Path,
) -> None:
    """A child that meets a cancellation nobody made of it ends as a failure recorded in
    its workflow: all three tasks get an outcome, and the same run id resumes at once
    with the same outcomes (nothing left pending, nothing run again)."""
    child = lyra.ChildRef(target="fakes.children:meets_a_cancelled_future")
    tasks = [lyra.Task(prompt=p, subject=p) for p in ("a", "bad", "c")]

    async def run() -> list[str]:
        async with lyra.durable.DurableExecutor.embedded(tmp_path, run_id="cancel") as ex:
            with anyio.fail_after(60):
                outcomes = await lyra.Supervisor(child, executor=ex).run(tasks)
        return [o.result.output or o.result.failure.category for o in outcomes]  # type: ignore[union-attr]

    assert await run() == ["done: a", "tool_error", "done: c"]
    assert await run() == ["done: a", "tool_error", "done: c"]


def test_lost_checkpoints_are_counted_once_a_child() -> None:
    """The refusal counts the children the log says ran and the database does not hold:
    a child that finished (logged, and reported) is one child, not two."""
    from lyra.durable._checkpoints import CheckpointsDamaged, check_recorded

    logged = {"run/0/0-P04637", "run/0/1-P69905", "run/0/2-Q8I3H7"}
    with pytest.raises(CheckpointsDamaged, match=r"no record of 3 child\(ren\) that ran \(of 0"):
        check_recorded({}, logged=logged, finished={"P04637", "P69905"})
    recorded = {"run/0/0-P04637": "SUCCESS"}
    with pytest.raises(CheckpointsDamaged, match=r"no record of 2 child\(ren\) that ran \(of 1"):
        check_recorded(recorded, logged=logged, finished={"P04637", "P69905"})
    check_recorded({w: "SUCCESS" for w in logged}, logged=logged, finished={"P04637"})


@pytest.mark.parametrize(
    ("done", "room"), [(1, "make room"), (20, "free about 8 MB for the 20 left")]
)
def test_the_room_a_full_disk_asks_for_comes_from_what_the_finished_took(
    tmp_path: Path, done: int, room: str
) -> None:
    """The room to make is what the run directory holds per protein finished, per protein
    left, from ten finished on; with fewer, the database's own tables outweigh theirs
    (one finished of 40 asked for 48 MB where the whole run takes about 1 MB): just
    "make room". The write-ahead log counts ('free about 1 MB for the 980 left', six
    times over: a full disk keeps the log from being folded back, and the main file
    was one page), and so do the results beside the database."""
    from types import SimpleNamespace

    from lyra.cli._analyze_command import _stopped
    from lyra.errors import RunStopped

    database = tmp_path / "dbos.sqlite"
    database.write_bytes(b"\0" * 4096)
    (tmp_path / "dbos.sqlite-wal").write_bytes(b"\0" * (6 * 2**20 - 4096))
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "P04637.txt").write_bytes(b"\0" * 2**20)
    (tmp_path / "results.jsonl").write_bytes(b"\0" * 2**20)
    stopped = RunStopped("the checkpoints could not be written", path=str(database))
    progress = SimpleNamespace(done=done, total=40)
    durable = SimpleNamespace(resume="lyra analyze --resume R", run_dir=tmp_path)
    line = _stopped(stopped, progress, durable)  # type: ignore[arg-type]
    assert line == (
        f"lyra analyze: stopped: the checkpoints could not be written; {done} of 40 proteins "
        f"finished and are kept; {room}, then finish the run with: lyra analyze --resume R"
    )


def test_a_crash_loop_of_one_says_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """LYRA_MAX_CRASHES=1: the process ended "once", not "1 times"."""
    pytest.importorskip("dbos")
    from lyra.durable import _engine
    from lyra.supervisor import Task

    monkeypatch.setattr(_engine, "MAX_CRASHES", 1)
    failure = _engine.crashed_outcome(Task(prompt="x"), "run/0/key-x").result.failure
    assert failure is not None
    assert "ended once before it finished" in failure.message
    assert "died once while" in failure.evidence


_EXITING_RUN = """
import sys, anyio
from lyra import ChildRef, Supervisor, Task
from lyra.durable import DurableExecutor

async def main() -> None:
    async with DurableExecutor.embedded(sys.argv[1], run_id="exits") as executor:
        await Supervisor(ChildRef(target="fakes.children:exits"), executor=executor).run(
            [Task(prompt="x", subject="t1")]
        )

anyio.run(main)
"""


def test_a_child_that_exits_its_process_is_counted_as_a_crash(tmp_path: Path) -> None:
    """A child's own sys.exit takes its process down: the start is counted (as DBOS
    counts a crash's), not taken off as a clean stop's is -- or a child that exits every
    time would never be failed as a crash loop."""
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent), "LYRA_MAX_CRASHES": "2"}
    done = subprocess.run(
        [sys.executable, "-c", _EXITING_RUN, str(run_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    with sqlite3.connect(run_dir / "dbos.sqlite") as db:
        counted = db.execute("SELECT status, recovery_attempts FROM workflow_status").fetchall()
    db.close()
    assert counted == [("PENDING", 1)]
