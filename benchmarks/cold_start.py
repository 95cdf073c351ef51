"""Cold start: wall time of ``lyra analyze P04637`` from a shell.

Runs ``.venv/bin/lyra analyze P04637 --run-dir <tmp>`` (offline, the default
source) as a subprocess several times, interleaved with ``python -c pass``
(the interpreter's own floor) and ``python -c "import lyra"``, and compares
medians. Then ``python -X importtime`` on the modules ``lyra analyze`` loads
before it runs shows where import time goes: self time summed per top-level
package, and lyra's own modules by cumulative time, so that heavy imports can be
made lazy.

Target (DESIGN §9): ≤ 0.5 s.

    python benchmarks/cold_start.py [--quick | --smoke]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from _common import Row, Size, median, standalone

RUNS, QUICK_RUNS, SMOKE_RUNS = 5, 1, 1
TARGET = 0.5
IMPORTS = "import lyra.cli._main, lyra.cli._analyze_command"  # what `lyra analyze` loads


def lyra_script() -> str:
    beside = Path(sys.executable).parent / "lyra"
    if beside.exists():
        return str(beside)
    found = shutil.which("lyra")
    if found is None:
        raise SystemExit("the lyra command is not installed (pip install -e .)")
    return found


def wall(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):  # 1: some protein failed, still a full run
        raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr[-2000:]}")
    return elapsed


def import_costs(
    env: dict[str, str], repeats: int
) -> tuple[float, list[tuple[str, float]], list[tuple[str, float]]]:
    """Medians over ``repeats`` runs of ``python -X importtime -c IMPORTS``: total ms,
    self ms summed per top-level package, lyra's modules by cumulative ms."""
    totals: list[float] = []
    by_package: dict[str, list[float]] = defaultdict(list)
    lyra_modules: dict[str, list[float]] = defaultdict(list)
    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", IMPORTS],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        packages: dict[str, float] = defaultdict(float)
        total = 0.0
        for line in done.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            own, cumulative, name = line.removeprefix("import time:").split("|")
            module = name.strip()
            if not name.startswith("  "):  # a top-level import: its time includes the nested
                total += int(cumulative) / 1000
            packages[module.split(".")[0]] += int(own) / 1000
            if module.startswith("lyra"):
                lyra_modules[module].append(int(cumulative) / 1000)
        totals.append(total)
        for package, ms in packages.items():
            by_package[package].append(ms)
    top_packages = sorted(((p, median(v)) for p, v in by_package.items()), key=lambda kv: -kv[1])
    top_lyra = sorted(((m, median(v)) for m, v in lyra_modules.items()), key=lambda kv: -kv[1])
    return median(totals), top_packages, top_lyra


def run(size: Size) -> list[Row]:
    runs = size.pick(RUNS, QUICK_RUNS, SMOKE_RUNS)
    env = {**os.environ, "LYRA_CHILD": "protein", "NO_COLOR": "1"}
    env.pop("ANTHROPIC_API_KEY", None)
    lyra = lyra_script()
    times: dict[str, list[float]] = {"python -c pass": [], "import lyra": [], "lyra analyze": []}
    with tempfile.TemporaryDirectory() as folder:
        warm_up = size.pick(1, 0, 0)  # a first round warms the disk cache and is dropped
        for i in range(runs + warm_up):
            measured = {
                "python -c pass": wall([sys.executable, "-c", "pass"], env),
                "import lyra": wall([sys.executable, "-c", "import lyra"], env),
                "lyra analyze": wall(
                    [lyra, "analyze", "P04637", "--run-dir", str(Path(folder) / f"run{i}")], env
                ),
            }
            if i >= warm_up:
                for name, seconds in measured.items():
                    times[name].append(seconds)
    medians = {name: median(values) for name, values in times.items()}
    for name, seconds in medians.items():
        runs_text = ", ".join(f"{s:.2f}" for s in times[name])
        print(f"{name:15} median {seconds:.3f} s  (runs: {runs_text})")
    total, packages, lyra_modules = import_costs(env, size.pick(3, 1, 1))
    print(
        f"python -X importtime -c '{IMPORTS}' (median): {total:.0f} ms in all; "
        "self time by package (ms): " + ", ".join(f"{p} {ms:.0f}" for p, ms in packages[:10])
    )
    print(
        "lyra modules by cumulative import time (ms): "
        + ", ".join(f"{m} {ms:.0f}" for m, ms in lyra_modules[:8])
    )
    analyze = medians["lyra analyze"]
    print(
        f"ratio lyra analyze / target = {analyze:.2f} s / {TARGET} s = {analyze / TARGET:.2f}× "
        f"({analyze / medians['python -c pass']:.1f}× a bare interpreter)"
    )
    return [
        Row("cold start", "python -c pass", medians["python -c pass"], "s"),
        Row("cold start", "python -c 'import lyra'", medians["import lyra"], "s"),
        Row(
            "cold start",
            "imports of lyra analyze (importtime)",
            total / 1000,
            "s",
            note="top: " + ", ".join(f"{p} {ms:.0f} ms" for p, ms in packages[:3]),
        ),
        Row("cold start", "lyra analyze P04637", analyze, "s", f"≤ {TARGET} s", analyze <= TARGET),
    ]


if __name__ == "__main__":
    standalone(run, __doc__)
