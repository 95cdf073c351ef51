"""Durable paths: what checkpointing every child in DBOS costs, against the in-process default.

Three placements of the same ``analyze`` run, in this order:

- **local** -- the default: ``LocalExecutor``, nothing recorded;
- **embedded** -- ``DurableExecutor.embedded``: each protein a DBOS workflow whose
  child run is a checkpointed step, in ``<run_dir>/dbos.sqlite`` (WAL, fsync per commit);
- **queue** -- ``DurableExecutor.queue`` on PostgreSQL (127.0.0.1:5432, a fresh
  database, dropped after) with two ``lyra worker`` processes taking the children
  (skipped, saying so, when PostgreSQL is not reachable).

Two workloads, events written to a file as the CLI does:

- *cheap children* (N unknown IDs, each fails at fetch in about a millisecond and
  renders a failure report): the difference per child against local is the
  durable machinery's own overhead per child (local and embedded interleaved,
  the best of three runs each);
- *slow children* (M unknown IDs whose fetch is slowed by an injected 250 ms, so a
  250 ms child) at concurrency 8: the makespan against the ideal
  ``ceil(M / 8) × 0.25 s``.

Also: replaying a finished embedded run (every child's result read back, none
run), DBOS launch time, the cold start of ``lyra analyze P04637`` with
``--durable`` against without (the reason the durable path is opt-in), and
**DBOS's own floor**: a trivial workflow with one trivial step (what every
child costs at least: the workflow's start and end and the step's check and
record, four transactions, each a hop to a thread) on the same SQLite
settings, wall and CPU per workflow, and the same workflow without a step.

    python benchmarks/durable.py [--quick | --smoke]
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from _common import Row, Size, events_to, median, standalone
from dbos import DBOS, SetWorkflowID

from lyra.durable import DurableExecutor, _engine
from lyra.proteins import analyze
from lyra.supervisor import LocalExecutor

CHEAP, QUICK_CHEAP, SMOKE_CHEAP = 300, 60, 10
SLOW, QUICK_SLOW, SMOKE_SLOW = 48, 16, 8
CHILD_SECONDS = 0.25
CONCURRENCY = 8
COLD_RUNS, QUICK_COLD_RUNS, SMOKE_COLD_RUNS = 3, 1, 1
FLOOR, QUICK_FLOOR, SMOKE_FLOOR = 1000, 200, 10
REPEATS, QUICK_REPEATS, SMOKE_REPEATS = 3, 3, 1
"""Cheap-children runs per placement (the best counts: the machine's noise only adds)."""
EMBEDDED_TARGET_MS, QUEUE_TARGET_MS = 3.0, 5.0
ADMIN_URL = os.environ.get("LYRA_BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")


def cheap_ids(n: int) -> list[str]:
    return [f"ZZ{i:06d}" for i in range(n)]


def slow_ids(n: int) -> list[str]:
    return [f"ZY{i:06d}" for i in range(n)]  # a slowed fetch, then "not found"


async def timed(fn: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await fn()
    return time.perf_counter() - started, result


async def run_local(ids: list[str], faults: list[str], folder: Path) -> float:
    seconds, _ = await timed(
        lambda: analyze(ids, concurrency=CONCURRENCY, faults=faults, timeout=60, run_dir=folder)
    )
    return seconds


async def run_durable(
    make: Callable[[], DurableExecutor], ids: list[str], faults: list[str], folder: Path
) -> tuple[float, float, float]:
    """(launch, makespan, replay makespan) of one durable run and its replay."""
    executor = make()
    launch, _ = await timed(executor.start)
    try:
        seconds, _ = await timed(
            lambda: analyze(
                ids,
                concurrency=CONCURRENCY,
                faults=faults,
                timeout=60,
                run_dir=folder,
                executor=executor,
            )
        )
    finally:
        await executor.aclose()
    replay = make()  # the same run ID: every child's result is recorded
    await replay.start()
    try:
        again, _ = await timed(
            lambda: analyze(
                ids, concurrency=CONCURRENCY, faults=faults, timeout=60, run_dir=folder,
                executor=replay,
            )
        )  # fmt: skip
    finally:
        await replay.aclose()
    return launch, seconds, again


@DBOS.step(name="bench.floor_step")
async def floor_step(x: int) -> int:
    return x


@DBOS.workflow(name="bench.floor_with_step")
async def floor_with_step(x: int) -> int:
    return await floor_step(x)


@DBOS.workflow(name="bench.floor_alone")
async def floor_alone(x: int) -> int:
    return x


async def dbos_floor(n: int, folder: Path) -> dict[str, tuple[float, float]]:
    """(wall ms, CPU ms) per trivial workflow, with one step and without, concurrency 8."""
    url = f"sqlite:///{folder / 'floor.sqlite'}"
    await anyio.to_thread.run_sync(lambda: _engine.launch(url, engine=_engine.sqlite_engine(url)))
    measured: dict[str, tuple[float, float]] = {}
    try:
        for name, workflow in (("with a step", floor_with_step), ("alone", floor_alone)):

            async def one(i: int, workflow: Any = workflow, name: str = name) -> int:
                with SetWorkflowID(f"{name}-{i}"):
                    handle = await DBOS.start_workflow_async(workflow, i)
                result: int = await handle.get_result()
                return result

            cpu, started = time.process_time(), time.perf_counter()
            await LocalExecutor().map(one, list(range(n)), max_concurrency=CONCURRENCY,
                                      on_error=lambda i, e: -1)  # fmt: skip
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            measured[name] = (wall / n * 1000, cpu / n * 1000)
    finally:
        await anyio.to_thread.run_sync(_engine.destroy)
    return measured


@contextmanager
def postgres() -> Iterator[str | None]:
    """A fresh database URL, or None when PostgreSQL is not reachable."""
    import psycopg

    try:
        admin = psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        print(f"queue: skipped, PostgreSQL not reachable ({str(exc).splitlines()[0]})")
        yield None
        return
    name = f"lyra_bench_{uuid.uuid4().hex[:10]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def workers(url: str, count: int, folder: Path) -> Iterator[None]:
    lyra = [sys.executable, "-m", "lyra", "worker", "--database-url", url]
    logs = [(folder / f"worker{i}.err").open("w") for i in range(count)]
    procs = [subprocess.Popen(lyra, stdout=subprocess.DEVNULL, stderr=log) for log in logs]
    try:
        deadline = time.monotonic() + 60
        while not all(
            "taking children" in (folder / f"worker{i}.err").read_text() for i in range(count)
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("the workers did not start within 60 s")
            time.sleep(0.05)
        yield
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=30)
        for log in logs:
            log.close()


def cold_start(runs: int, folder: Path) -> dict[str, float]:
    lyra = [sys.executable, "-m", "lyra", "analyze", "P04637"]
    walls: dict[str, list[float]] = {"plain": [], "durable": []}
    for i in range(runs):
        for name, extra in (("plain", []), ("durable", ["--durable"])):
            started = time.perf_counter()
            subprocess.run(
                [*lyra, *extra, "--run-dir", str(folder / f"cold-{name}-{i}")],
                capture_output=True,
                check=True,
            )
            walls[name].append(time.perf_counter() - started)
    return {name: median(values) for name, values in walls.items()}


def run(size: Size) -> list[Row]:
    n_cheap = size.pick(CHEAP, QUICK_CHEAP, SMOKE_CHEAP)
    n_slow = size.pick(SLOW, QUICK_SLOW, SMOKE_SLOW)
    repeats = size.pick(REPEATS, QUICK_REPEATS, SMOKE_REPEATS)
    slow = slow_ids(n_slow)
    slow_faults = [f"{p}:slow:{CHILD_SECONDS}" for p in slow]
    ideal = math.ceil(n_slow / CONCURRENCY) * CHILD_SECONDS
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        results: dict[str, dict[str, float]] = {}

        async def measure() -> None:
            with events_to(base / "events.jsonl"):

                def embedded(name: str) -> Callable[[], DurableExecutor]:
                    return lambda: DurableExecutor.embedded(base / name, run_id=name)

                # Cheap children: local and embedded interleaved, the best of `repeats` each.
                local_runs, embedded_runs = [], []
                for r in range(repeats):
                    local_runs.append(await run_local(cheap_ids(n_cheap), [], base / f"lc{r}"))
                    embedded_runs.append(
                        await run_durable(
                            embedded(f"ec{r}"), cheap_ids(n_cheap), [], base / f"ec{r}"
                        )
                    )
                launch, cheap, replay = min(embedded_runs, key=lambda run: run[1])
                local_slow = await run_local(slow, slow_faults, base / "ls")
                results["local"] = {"cheap": min(local_runs), "slow": local_slow}
                _, slow_run, _ = await run_durable(embedded("es"), slow, slow_faults, base / "es")
                results["embedded"] = {
                    "cheap": cheap,
                    "slow": slow_run,
                    "launch": launch,
                    "replay": replay,
                }

        anyio.run(measure)
        floor = anyio.run(dbos_floor, size.pick(FLOOR, QUICK_FLOOR, SMOKE_FLOOR), base)
        with postgres() as url:
            if url is not None:
                with workers(url, 2, base):

                    async def measure_queue() -> None:
                        with events_to(base / "events-q.jsonl"):

                            def queue(name: str) -> Callable[[], DurableExecutor]:
                                return lambda: DurableExecutor.queue(url, run_id=name)

                            queued = [
                                await run_durable(
                                    queue(f"qc{r}"), cheap_ids(n_cheap), [], base / f"qc{r}"
                                )
                                for r in range(repeats)
                            ]
                            launch, cheap, _ = min(queued, key=lambda run: run[1])
                            _, slow_run, _ = await run_durable(
                                queue("qs"), slow, slow_faults, base / "qs"
                            )
                            results["queue"] = {"cheap": cheap, "slow": slow_run, "launch": launch}

                    anyio.run(measure_queue)
        cold = cold_start(size.pick(COLD_RUNS, QUICK_COLD_RUNS, SMOKE_COLD_RUNS), base)

    local = results["local"]
    print(f"children: {n_cheap} cheap; {n_slow} slow ({CHILD_SECONDS * 1000:.0f} ms each)")
    print(f"concurrency {CONCURRENCY}; ideal slow makespan {ideal:.2f} s")
    for name, r in results.items():
        per_child = (r["cheap"] - local["cheap"]) / n_cheap * 1000
        extra = "" if name == "local" else f"  (+{per_child:.2f} ms a child over local)"
        print(
            f"{name:9s} cheap {r['cheap']:.3f} s = {r['cheap'] / n_cheap * 1000:.2f} ms a child"
            f"{extra}; slow makespan {r['slow']:.3f} s"
        )
        if name == "local":
            rows.append(
                Row("durable", "local: ms a cheap child", r["cheap"] / n_cheap * 1000, "ms")
            )
            rows.append(Row("durable", "local: slow makespan", r["slow"], "s"))
            continue
        target = EMBEDDED_TARGET_MS if name == "embedded" else QUEUE_TARGET_MS
        rows.append(
            Row(
                "durable",
                f"{name}: overhead a child",
                per_child,
                "ms",
                f"≤ {target:g} ms",
                per_child <= target,
            )
        )
        rows.append(Row("durable", f"{name}: slow makespan", r["slow"], "s"))
        rows.append(Row("durable", f"{name}: DBOS launch", r["launch"], "s"))
    embedded = results["embedded"]
    print(
        f"embedded replay of a finished run: {embedded['replay']:.3f} s "
        f"({embedded['replay'] / n_cheap * 1000:.2f} ms a child, nothing re-run); "
        f"launch {embedded['launch']:.2f} s (includes importing dbos)"
    )
    rows.append(
        Row("durable", "embedded: replay a child", embedded["replay"] / n_cheap * 1000, "ms")
    )
    for name, (wall, cpu) in floor.items():
        print(f"DBOS floor, a trivial workflow {name}: {wall:.2f} ms wall, {cpu:.2f} ms CPU")
        rows.append(
            Row("durable", f"DBOS floor: workflow {name}", wall, "ms", note=f"CPU {cpu:.2f} ms")
        )
    print(
        f"cold start lyra analyze P04637: {cold['plain']:.2f} s; --durable {cold['durable']:.2f} s"
    )
    rows.append(Row("durable", "cold start --durable", cold["durable"], "s", note="opt-in"))
    # Ratios last.
    for name, r in results.items():
        if name == "local":
            continue
        ratio_cheap = r["cheap"] / local["cheap"]
        ratio_slow = r["slow"] / local["slow"]
        print(
            f"ratio {name}/local: cheap children {ratio_cheap:.2f}×, slow makespan "
            f"{ratio_slow:.2f}× ({r['slow'] / ideal:.2f}× the ideal; local "
            f"{local['slow'] / ideal:.2f}×)"
        )
        rows.append(Row("durable", f"{name}/local, cheap children", ratio_cheap, "×"))
        rows.append(Row("durable", f"{name}/local, slow makespan", ratio_slow, "×"))
    print(f"ratio cold start --durable/plain: {cold['durable'] / cold['plain']:.2f}×")
    rows.append(Row("durable", "cold start --durable/plain", cold["durable"] / cold["plain"], "×"))
    return rows


if __name__ == "__main__":
    standalone(run, __doc__)
