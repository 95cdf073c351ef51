"""A durable run SIGKILLed 20 times at random moments, then resumed to the end.

2,000 synthetic proteins (``--quick``: 400, ``--smoke``: 50) run as one embedded durable run (SQLite
in the run directory), concurrency 16, through :meth:`lyra.Supervisor.run`. The
supervisor process is SIGKILLed 20 times (``--quick``: 8, ``--smoke``: 1), each time after a random
0.3-2.5 s (seeded), and started again with the same run ID; the last start runs to
the end. Checked, from the outcomes and the test hook's log of every attempt start:

- every protein has exactly one outcome in the finished run;
- an attempt started more than once was in flight when a kill came: no kill left
  more than the concurrency's worth of attempts to run again (an attempt whose
  checkpoint was saved is replayed from it, never run);
- the checkpoint database's size per protein (it must grow linearly, however many
  times the run was killed).

    python benchmarks/durable_kills.py [--quick | --smoke]
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import anyio
from _common import Row, Size, standalone

PROTEINS, QUICK_PROTEINS, SMOKE_PROTEINS = 2_000, 400, 50
KILLS, QUICK_KILLS, SMOKE_KILLS = 20, 8, 1
CONCURRENCY = 16
SEED = 20


async def supervise(folder: str, n: int) -> dict[str, int]:
    """One supervisor process: the whole run (resumed where a killed one stopped)."""
    from lyra import ChildRef, RecoveryPolicy, Supervisor, Task
    from lyra.durable import DurableExecutor

    child = ChildRef(
        target="lyra.proteins:protein_child", options={"source": "synthetic", "seed": 7}
    )
    tasks = [Task(prompt=f"Analyze S{i:07d}", subject=f"S{i:07d}") for i in range(n)]
    async with DurableExecutor.embedded(folder, run_id="kills") as executor:
        policy = RecoveryPolicy(max_retries=0, answer_wait=0)  # the protein child never asks
        outcomes = await Supervisor(child, timeout=60, executor=executor, policy=policy).run(
            tasks, max_concurrency=CONCURRENCY
        )
    subjects = Counter(o.result.subject for o in outcomes)
    return {"outcomes": len(outcomes), "distinct": len(subjects), "completed": sum(
        o.result.ok for o in outcomes
    )}  # fmt: skip


def run(size: Size) -> list[Row]:
    n = size.pick(PROTEINS, QUICK_PROTEINS, SMOKE_PROTEINS)
    kills = size.pick(KILLS, QUICK_KILLS, SMOKE_KILLS)
    pick = random.Random(SEED)
    with tempfile.TemporaryDirectory() as tmp:
        folder, log = Path(tmp) / "run", Path(tmp) / "invocations.log"
        command = [sys.executable, __file__, "--supervise", str(folder), str(n)]
        env = {**os.environ, "LYRA_TEST_INVOCATION_LOG": str(log)}
        killed: list[int] = []
        started = time.perf_counter()
        for _ in range(kills):
            proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
            time.sleep(pick.uniform(0.3, 2.5))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            killed.append(proc.pid)
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        makespan = time.perf_counter() - started
        final = json.loads(done.stdout.strip().splitlines()[-1])
        rerun = _reruns_per_kill(log, set(killed))
        database = sum(f.stat().st_size for f in folder.glob("dbos.sqlite*"))
    worst = max(rerun.values(), default=0)
    once = final["outcomes"] == final["distinct"] == n
    print(
        f"{n} synthetic proteins, {kills} SIGKILLs at random moments, then resumed: "
        f"{final['outcomes']} outcomes for {final['distinct']} proteins, "
        f"{final['completed']} completed, makespan {makespan:.1f} s"
    )
    print(
        f"attempts run again: {sum(rerun.values())} in all, at most {worst} for one kill "
        f"(concurrency {CONCURRENCY}); checkpoints {database / n / 1024:.1f} KB per protein"
    )
    return [
        Row("durable_kills", f"{kills} SIGKILLs: every protein once", final["distinct"], "",
            f"= {n}", once),
        Row("durable_kills", "attempts run again after one kill (most)", worst, "",
            f"≤ {CONCURRENCY}", worst <= CONCURRENCY, note="only those in flight at the kill"),
        Row("durable_kills", "checkpoint database per protein", database / n / 1024, "KB"),
        Row("durable_kills", "makespan (kills + resume)", makespan, "s"),
    ]  # fmt: skip


def _reruns_per_kill(log: Path, killed: set[int]) -> dict[int, int]:
    """For each killed process, how many attempts it started that were started again
    later: the attempts it left in flight (any other would be a finished attempt run
    twice, or an attempt started again by a process that was not killed)."""
    starts: defaultdict[tuple[str, str], list[int]] = defaultdict(list)
    for line in log.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) == 4:  # a start (not a pause note)
            starts[(fields[0], fields[1])].append(int(fields[2]))
    rerun: Counter[int] = Counter()
    for pids in starts.values():
        for pid in pids[:-1]:
            if pid not in killed:
                raise AssertionError(f"an attempt ran twice though process {pid} lived")
            rerun[pid] += 1
    return dict(rerun)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--supervise"]:
        print(json.dumps(anyio.run(supervise, sys.argv[2], int(sys.argv[3]))))
    else:
        standalone(run, __doc__)
