"""A durable proteome: 20,000 synthetic proteins, killed mid-run and resumed.

Each protein is a :class:`lyra.Task` for the protein child built by name
(``ChildRef("lyra.proteins:protein_child", {"source": "synthetic", "seed": 7})``),
run through :meth:`lyra.Supervisor.run` with a :class:`lyra.durable.DurableExecutor`,
in chunks of 1,000 tasks (one ``run`` call each, so the supervisor never holds more
than a chunk of outcomes). Two placements:

- **embedded** -- SQLite in the run directory, children in the supervisor's process;
- **queue** -- PostgreSQL (127.0.0.1:5432, a fresh database dropped after) with two
  ``lyra worker`` processes (skipped, saying so, when PostgreSQL is not reachable).

Each run is SIGKILLed once about 40 % of the proteins have finished, then started
again with the same run ID; it finishes without re-running what finished. Reported:
proteins per second and makespan (first start to the resumed run's end, the kill
included), the peak RSS of each supervisor process, and how many attempts ran twice
(those in flight at the kill, never more than the concurrency).

    python benchmarks/proteome_durable.py [--quick | --smoke]   # 2,000 proteins; 100
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import nullcontext
from pathlib import Path

import anyio
from _common import Row, Size, standalone
from durable import postgres, workers

PROTEINS, QUICK_PROTEINS, SMOKE_PROTEINS = 20_000, 2_000, 100
CHUNK = 1_000
CONCURRENCY = 32
KILL_AT = 0.4
SEED = 7


def accessions(n: int) -> list[str]:
    """Distinct well-formed IDs (the synthetic source answers for any)."""
    return [f"S{i:07d}" for i in range(n)]


async def supervise(placement: str, where: str, n: int, progress: Path) -> dict[str, float]:
    """One supervisor process: every chunk of the run, counting outcomes into ``progress``."""
    from lyra import ChildRef, RecoveryPolicy, Supervisor, Task
    from lyra.durable import DurableExecutor
    from lyra.recovery import RecoveryOutcome

    ids = accessions(n)
    child = ChildRef(
        target="lyra.proteins:protein_child", options={"source": "synthetic", "seed": SEED}
    )
    executor = (
        DurableExecutor.embedded(where, run_id="proteome")
        if placement == "embedded"
        else DurableExecutor.queue(where, run_id="proteome")
    )
    statuses: Counter[str] = Counter()
    every = max(1, min(100, n // 20))  # progress notes: the kill lands mid-chunk

    def count(task: Task, outcome: RecoveryOutcome) -> None:
        statuses[outcome.result.status] += 1
        if statuses.total() % every == 0:  # children in flight when it is read
            progress.write_text(str(statuses.total()))

    started = time.perf_counter()
    async with executor:
        # The protein child never asks: no answer wait, as lyra analyze runs it.
        policy = RecoveryPolicy(max_retries=0, answer_wait=0)
        supervisor = Supervisor(child, timeout=60, executor=executor, policy=policy)
        for start in range(0, n, CHUNK):
            tasks = [
                Task(prompt=f"Analyze {p}", subject=p, context={"plan": "full"})
                for p in ids[start : start + CHUNK]
            ]
            await supervisor.run(tasks, max_concurrency=CONCURRENCY, on_outcome=count)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": time.perf_counter() - started, "rss_mb": peak, **statuses}


def one_run(placement: str, where: str, n: int, folder: Path) -> dict[str, float]:
    """Start, SIGKILL at KILL_AT of the proteins, resume; the measurements."""
    progress, log = folder / f"{placement}.progress", folder / f"{placement}.invocations"
    command = [sys.executable, __file__, "--supervise", placement, where, str(n), str(progress)]
    env = {**os.environ, "LYRA_TEST_INVOCATION_LOG": str(log)}
    started = time.perf_counter()
    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    while not (progress.exists() and int(progress.read_text() or 0) >= KILL_AT * n):
        if first.poll() is not None:
            raise RuntimeError(f"the {placement} run ended before the kill")
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    first_peak = _peak_rss_of_children()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    makespan = time.perf_counter() - started
    stats = json.loads(done.stdout.strip().splitlines()[-1])
    starts = Counter(line.split("\t")[0] for line in log.read_text().splitlines())
    return {
        "makespan": makespan,
        "per_second": n / makespan,
        "rss_mb": max(stats["rss_mb"], first_peak),
        "finished": stats.get("completed", 0) + stats.get("failed", 0),
        "ran_twice": sum(count - 1 for count in starts.values() if count > 1),
        "resume_seconds": stats["seconds"],
    }


def _peak_rss_of_children() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def run(size: Size) -> list[Row]:
    n = size.pick(PROTEINS, QUICK_PROTEINS, SMOKE_PROTEINS)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        results["embedded"] = one_run("embedded", str(base / "run"), n, base)
        # A smoke run leaves the queue out: the same run, and durable.py's smoke starts workers.
        with postgres() if size is not Size.SMOKE else nullcontext() as url:
            if url is not None:
                # The workers note every attempt they start in the queue run's log.
                os.environ["LYRA_TEST_INVOCATION_LOG"] = str(base / "queue.invocations")
                try:
                    with workers(url, 2, base):
                        results["queue"] = one_run("queue", url, n, base)
                finally:
                    del os.environ["LYRA_TEST_INVOCATION_LOG"]
    rows = []
    print(f"{n} synthetic proteins, concurrency {CONCURRENCY}, chunks of {CHUNK}, "
          f"SIGKILL at {KILL_AT:.0%} then resume")  # fmt: skip
    for name, r in results.items():
        print(
            f"{name:9s} makespan {r['makespan']:.1f} s ({r['per_second']:.0f} proteins/s), "
            f"resume {r['resume_seconds']:.1f} s, peak RSS {r['rss_mb']:.0f} MB, "
            f"{r['finished']:.0f} of {n} finished, {r['ran_twice']:.0f} attempts ran twice"
        )
        where = "2 PostgreSQL workers" if name == "queue" else "embedded"
        rows += [
            Row("proteome_durable", f"{where}: proteins per second", r["per_second"], "/s"),
            Row("proteome_durable", f"{where}: makespan (kill + resume)", r["makespan"], "s"),
            Row("proteome_durable", f"{where}: supervisor peak RSS", r["rss_mb"], "MB"),
            Row(
                "proteome_durable",
                f"{where}: every protein once",
                r["finished"],
                "",
                f"= {n}",
                r["finished"] == n and r["ran_twice"] <= CONCURRENCY,
                note=f"{r['ran_twice']:.0f} in flight at the kill ran again",
            ),
        ]
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] == ["--supervise"]:
        placement, where, count, progress_file = sys.argv[2:6]
        stats = anyio.run(supervise, placement, where, int(count), Path(progress_file))
        print(json.dumps(stats))
    else:
        standalone(run, __doc__)
