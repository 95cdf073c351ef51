"""Every script in examples/ runs offline as it is and exits 0."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))

# What each script's stdout must say about its final report.
EXPECTED = {
    "timeout_doubling.py": ["status=completed attempt=2", "strategy=timeout_doubling"],
    "continuation.py": ["status=completed attempt=2", "Already completed (do not redo):"],
    "enrichment.py": [
        "status=failed category=missing_context attempt=1",
        "status=completed attempt=2",
        "- auth file: src/myapp/auth.py",
    ],
    "decomposition.py": ["status=completed attempt=2", "timeout=0.30s  Tag the release commit"],
    "backoff_rate_limit.py": ["status=completed attempt=4", "retry-after 0.2s"],
    "budget_loop.py": [
        "attempt 2 [continuation]: 6,000 tokens, completed",
        "max_tokens=12000 exceeded: 15000 tokens used",
    ],
    "own_framework.py": [
        "answer: completed: 'Duplicate of #7', 930 tokens, $0.00105",
        "budget: timeout/budget: Child stopped: budget exhausted (max_turns=3 reached",
        "(turns: 3)",
        "max steps: timeout/budget: agent stopped after max_steps=10",
        "stuck tool: timeout/idle:",
        "while the tool 'lookup' ran",
    ],
    "nested_delegation.py": [
        "<failed_delegation>",
        "timeout/idle",
        "timeout/budget",
        "researcher",
    ],
    "langgraph_agent.py": [
        "runaway: timeout/budget, 1050 tokens used",
        "stuck tool: timeout/idle",
        "continuation: status=completed attempt=2",
        "HumanMessage, AIMessage, ToolMessage, HumanMessage",
    ],
    "pydantic_ai_agent.py": [
        "attempt 2 [continuation]: completed",
        "logs read: ['nightly']",
        "timeout/budget: rule 1: budget exhausted: max_tokens=3000 reached",
        "timeout/idle",
    ],
    "openai_agents_agent.py": [
        "status=completed attempt=2",
        "'function_call', 'function_call_output', 'user'",
        "timeout/budget",
    ],
    "claude_agent_agent.py": [
        "attempt 1 [initial]: partial",
        "attempt 2 [continuation]: completed",
        "attempt 2 saw attempt 1's tool result: True",
        "timeout/budget: rule 1: budget exhausted: max_tokens=3000 exceeded",
        "timeout/idle: rule 1: no progress for 1.5 s (idle timeout)",
    ],
    "google_adk_agent.py": [
        "runaway: timeout/budget, 1050 tokens used",
        "stuck tool: timeout/idle",
        "continuation: status=completed attempt=2",
        "user text, function_call, function_response, user text",
        "lookups made: 1",
    ],
    "mcp_progress.py": [
        "lyra serves MCP at http://127.0.0.1:",
        "progress",
        "status=completed: Summary of 3 files",
    ],
    "mcp_detached.py": [
        "after the restart:",
        "'cancelled'",
        "status=completed after the restart: Findings on 'the slow archive'",
    ],
    "mcp_http.py": [
        "without the token: 401",
        "with the token, Host: evil.example: 421",
        "--host 0.0.0.0 without a token: refused: refusing to serve on 0.0.0.0",
        "status=completed",
    ],
    "a2a_agents.py": [
        "TASK_STATE_WORKING Read section 1 of P04637",
        "question completed, 1,600 tokens",
        "asked of the triager: ['Which UniProt accession?']",
        "typo     invalid_task/data",
        "runaway  timeout/budget",
        "stopped on the server: ['P04637']",
    ],
    "log_and_retry.py": [
        "status=completed after 3 attempt(s)",
        "status=failed category=invalid_task after 1 attempt(s)",
        "for a human: Install missing dependencies: pip install matplotlib",
        "5 failures logged",
    ],
}

# Examples of an extra the quick start does not install: skipped, saying so, without it.
NEEDS = {"claude_agent_agent.py": ("claude_agent_sdk", "pip install -e '.[test,claude-agent-sdk]'")}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[int, str, str]]]:
    """Start every example at once (they mostly wait) and collect (status, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "LYRA_"))}
    log = tmp_path_factory.mktemp("examples") / "failures.jsonl"
    extra = {"log_and_retry.py": [str(log)]}
    procs = {
        path.name: subprocess.Popen(
            [sys.executable, str(path), *extra.get(path.name, [])],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        for path in EXAMPLES
    }
    results = {}
    deadline = time.monotonic() + 120  # for all of them: a hang fails, a loaded machine does not
    try:
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            results[name] = (proc.returncode, out, err)
        yield results
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def test_every_strategy_has_an_example() -> None:
    """The recovery examples exist, each with a module docstring and a README line."""
    names = {path.name for path in EXAMPLES}
    assert set(EXPECTED) <= names
    readme = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    for path in EXAMPLES:
        assert path.read_text(encoding="utf-8").startswith('"""'), path.name
        assert f"`{path.name}" in readme, path.name


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_example_runs_and_checks_itself(path: Path, runs: dict[str, tuple[int, str, str]]) -> None:
    """The example exits 0, reports OK, and prints its final report's status and attempt."""
    module, install = NEEDS.get(path.name, ("lyra", ""))
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{path.name} needs {module}: {install}")
    status, out, err = runs[path.name]
    assert status == 0, f"{path.name} exited {status}\n{out}\n{err}"
    assert "OK:" in out
    for text in EXPECTED.get(path.name, ["status=completed"]):
        assert text in out, f"{text!r} not in the output of {path.name}:\n{out}"
    assert "Traceback" not in err
