"""Run every benchmark, each in its own process, and print one table of the results.

    python -m benchmarks [--quick | --smoke] [--only NAME[,NAME…]] [--markdown]

Each benchmark prints its own lines (its ratio last) as it runs; the table at
the end gathers the ratios measured side by side in this run. Exits non-zero
only when a benchmark crashes; a missed target is reported, never raised.
``--smoke`` (CI) runs every benchmark at tiny sizes, two at a time, to show
that each still runs: one line each, no figures, no target judged.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the helpers, imported as every benchmark script does
from _common import Row, Size, fmt_value, verdict  # noqa: E402


@dataclass(frozen=True)
class Benchmark:
    script: str
    in_quick: bool = True  # False: --quick skips it unless named with --only


BENCHMARKS: dict[str, Benchmark] = {
    "overhead": Benchmark("overhead.py"),
    "makespan": Benchmark("makespan.py"),
    "timeouts": Benchmark("timeouts.py"),
    "parsing": Benchmark("parsing.py"),
    "memory": Benchmark("memory.py"),
    # 100,000 synthetic proteins through the full pipeline: several minutes.
    "proteome": Benchmark("proteome.py"),
    "recovery_efficiency": Benchmark("recovery_efficiency.py"),
    "cold_start": Benchmark("cold_start.py"),
    "tracing": Benchmark("tracing.py"),
    "logs_throughput": Benchmark("logs_throughput.py"),
    # A framework's agent on a fake model, bare vs inside lyra (one per framework child).
    "framework_pydantic_ai": Benchmark("framework_pydantic_ai.py"),
    "framework_openai_agents": Benchmark("framework_openai_agents.py"),
    "framework_langgraph": Benchmark("framework_langgraph.py"),
    "framework_google_adk": Benchmark("framework_google_adk.py"),
    # The real Claude Code CLI against a local fake API: ≈ 1 minute (skipped without the extra).
    "framework_claude_agent": Benchmark("framework_claude_agent.py", in_quick=False),
    # DBOS-backed executors (embedded SQLite, PostgreSQL queue): ≈ 45 s, ≈ 20 s quick.
    "durable": Benchmark("durable.py", in_quick=False),
    "proteome_durable": Benchmark("proteome_durable.py", in_quick=False),
    # 20 SIGKILLs at random moments, then resume: ≈ 1 minute.
    "durable_kills": Benchmark("durable_kills.py", in_quick=False),
}


def run_one(name: str, bench: Benchmark, size: Size, echo: bool = True) -> tuple[list[Row], bool]:
    """Run one benchmark script, echo its lines (or keep them, to show on a crash),
    return its rows and whether it crashed."""
    with tempfile.TemporaryDirectory() as folder:
        result_file = Path(folder) / "rows.json"
        command = [sys.executable, str(HERE / bench.script), "--json", str(result_file)]
        command += size.pick([], ["--quick"], ["--smoke"])
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        lines: list[str] = []
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=None if echo else subprocess.STDOUT,
            text=True, env=env,
        ) as process:  # fmt: skip
            assert process.stdout is not None
            for line in process.stdout:
                if echo:
                    print(f"  {line}", end="", flush=True)
                lines.append(line.rstrip("\n"))
        if process.returncode != 0:
            if not echo:
                print("\n".join(f"  {line}" for line in lines[-40:]), flush=True)
            return [Row(name, "CRASHED", float("nan"), "", note=f"exit {process.returncode}")], True
        return [Row(**row) for row in json.loads(result_file.read_text(encoding="utf-8"))], False


def smoke(names: list[str], jobs: int) -> bool:
    """Run each benchmark at its smoke size, ``jobs`` at a time; True when one crashed."""

    def one(name: str) -> bool:
        started = time.perf_counter()
        rows, crashed = run_one(name, BENCHMARKS[name], Size.SMOKE, echo=False)
        state = "CRASHED" if crashed else f"ran, {len(rows)} rows"
        print(f"{name}: {state} ({time.perf_counter() - started:.1f} s)", flush=True)
        return crashed

    slowest_first = sorted(names, key=lambda name: BENCHMARKS[name].in_quick)
    with ThreadPoolExecutor(jobs) as pool:  # each runs in a process of its own
        return any(list(pool.map(one, slowest_first)))


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        model = next(
            (line.split(":", 1)[1].strip() for line in out.splitlines() if "Model name" in line),
            model,
        )
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {model}, Python {platform.python_version()}"


def table(rows: list[Row], markdown: bool) -> str:
    header = ("benchmark", "metric", "measured", "target", "verdict", "note")
    body = [
        (r.benchmark, r.metric, fmt_value(r.value, r.unit), r.target, verdict(r.met), r.note)
        for r in rows
    ]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    fmt = "  ".join(f"{{:{'>' if i == 2 else '<'}{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*cells).rstrip() for cells in body]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n")[0]
    )
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument(
        "--quick",
        action="store_true",
        help="reduced sizes: a rough read, 35-60 s on 2 cores by the host",
    )
    sizes.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, every benchmark, two at a time: each still runs (CI; no figures)",
    )
    parser.add_argument(
        "--only",
        metavar="NAME",
        action="append",
        default=[],
        help=f"run only these (repeat or comma-separate): {', '.join(BENCHMARKS)}",
    )
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args(argv)
    names = [n.strip() for item in args.only for n in item.split(",") if n.strip()] or list(
        BENCHMARKS
    )
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(
            f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}"
        )
    started = time.perf_counter()
    if args.smoke:
        crashed = smoke(names, jobs=2)
        print(f"smoke run of {len(names)} benchmarks: {time.perf_counter() - started:.0f} s")
        return 1 if crashed else 0
    size = Size.QUICK if args.quick else Size.FULL
    rows: list[Row] = []
    crashed = False
    for name in names:
        if args.quick and not args.only and not BENCHMARKS[name].in_quick:
            print(f"== {name} == skipped by --quick (run it with --only {name})", flush=True)
            continue
        print(f"== {name} ==", flush=True)
        bench_started = time.perf_counter()
        got, failed = run_one(name, BENCHMARKS[name], size)
        rows += got
        crashed |= failed
        print(f"  ({time.perf_counter() - bench_started:.1f} s)", flush=True)
    elapsed = time.perf_counter() - started
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    mode = size.value
    print()
    print(f"lyra benchmarks, {mode} run, {when}, {machine()}, {elapsed:.0f} s in all")
    print(table(rows, args.markdown))
    missed = [f"{r.benchmark}: {r.metric}" for r in rows if r.met is False]
    print(f"targets missed: {', '.join(missed) if missed else 'none'}")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
