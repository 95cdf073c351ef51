"""A Claude Agent SDK agent inside lyra against the same agent bare, on the same fake model.

The agent is a ``ClaudeAgentOptions`` with one in-process tool; the model is
the local fake Messages API of the tests (``tests/fakes``, streaming, on
127.0.0.1), scripted with a tool call and an answer for every run. Each run
starts the SDK's bundled Claude Code CLI, which is most of its time.

- **bare**: ``query(prompt=…, options=options)``, the SDK's one-shot run, read
  to its end (the run lyra's child makes, without lyra);
- **lyra**: ``adelegate_task(prompt, child=ClaudeAgentChild(options), timeout=…,
  idle_timeout=…, budget=…)`` with lyra's events appended to a file as the
  command line configures them: lyra's hooks (turns ahead, tool progress), the
  stream events it reads for usage, the budget and the deadlines.

Runs are interleaved (bare, lyra, bare, …) so that load from other processes
hits both alike; the ratio is of the medians, min and max shown.
Target (DESIGN §9): ≤ 1.02×. A run's wall time is mostly the CLI's start
(0.4-1 s, and it swings with the machine's load), so the CPU time this
process spends per run (the SDK, lyra; not the CLI) is printed beside it: the
part of lyra's cost that load does not blur.

    python benchmarks/framework_claude_agent.py [--quick | --smoke] [--json FILE]
"""

from __future__ import annotations

import importlib.util
import resource
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from _common import ROOT, Row, Size, events_to, median, standalone

sys.path.insert(0, str(ROOT / "tests"))  # the fake Messages API the tests use

from fakes.messages_api import MessagesAPI, message, tool_use
from lyra import Budget, adelegate_task

ROUNDS, QUICK_ROUNDS, SMOKE_ROUNDS = 20, 5, 1
TARGET = 1.02
PROMPT = "How long is P04637?"


def options(api_url: str, home: Path) -> Any:
    """The agent: a model, one in-process tool, the fake API, a throwaway home."""
    from claude_agent_sdk import ClaudeAgentOptions, create_sdk_mcp_server, tool

    @tool("lookup", "Look a protein up", {"protein_id": str})
    async def lookup(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": f"{args['protein_id']}: 393 residues"}]}

    return ClaudeAgentOptions(
        model="claude-sonnet-4-6",
        cwd=home,
        mcp_servers={"bio": create_sdk_mcp_server("bio", tools=[lookup])},
        allowed_tools=["mcp__bio__lookup"],
        env={
            "ANTHROPIC_BASE_URL": api_url,
            "ANTHROPIC_API_KEY": "benchmark",
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",  # as lyra runs it: the same on both sides
        },
    )


def script(api: MessagesAPI) -> None:
    """One run's model: a tool call, then the answer."""
    call = tool_use("mcp__bio__lookup", {"protein_id": "P04637"})
    api.add(message([call], "tool_use"), message("P04637 has 393 residues."))


async def bare(agent: Any) -> str:
    from claude_agent_sdk import ResultMessage, query

    output = ""
    async for reply in query(prompt=PROMPT, options=agent):
        if isinstance(reply, ResultMessage):
            output = reply.result or ""
    return output


async def lyra(agent: Any) -> str:
    from lyra.children.claude_agent import ClaudeAgentChild

    return await adelegate_task(
        PROMPT,
        child=ClaudeAgentChild(agent),
        timeout=120,
        idle_timeout=60,
        budget=Budget(max_tokens=1_000_000, max_turns=50),
    )


def cpu() -> float:
    """CPU seconds this process used so far (user and system; not the CLI's)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(rounds: int, folder: Path) -> dict[str, list[float]]:
    """Wall times per side, and CPU times (``cpu bare``, ``cpu lyra``)."""
    times: dict[str, list[float]] = {"bare": [], "lyra": [], "cpu bare": [], "cpu lyra": []}
    sides: dict[str, Callable[[Any], Awaitable[str]]] = {"bare": bare, "lyra": lyra}
    with MessagesAPI(streaming=True) as api, events_to(folder / "events.jsonl"):
        agent = options(api.url, folder)
        script(api)
        await bare(agent)  # warm-up: the CLI binary into the page cache, the SDK imported
        for _ in range(rounds):
            for name, side in sides.items():
                script(api)
                started, used = time.perf_counter(), cpu()
                output = await side(agent)
                times[name].append(time.perf_counter() - started)
                times[f"cpu {name}"].append(cpu() - used)
                if "393 residues" not in output:
                    raise RuntimeError(f"{name} run did not complete: {output[:300]}")
    return times


def run(size: Size) -> list[Row]:
    if importlib.util.find_spec("claude_agent_sdk") is None:
        print("framework_claude_agent: skipped (pip install -e '.[claude-agent-sdk]')")
        return []
    rounds = size.pick(ROUNDS, QUICK_ROUNDS, SMOKE_ROUNDS)
    with tempfile.TemporaryDirectory() as folder:
        times = anyio.run(measure, rounds, Path(folder))
    for name, values in times.items():
        print(
            f"{name:>8}: median {median(values) * 1000:7.1f} ms  "
            f"min {min(values) * 1000:7.1f}  max {max(values) * 1000:7.1f}  ({rounds} runs)"
        )
    ratio = median(times["lyra"]) / median(times["bare"])
    extra_cpu = (median(times["cpu lyra"]) - median(times["cpu bare"])) * 1000
    print(f"lyra's own CPU per run (medians' difference): {extra_cpu:.1f} ms")
    print(f"lyra / bare (medians): {ratio:.3f}×  target ≤ {TARGET}×")
    return [
        Row("framework_claude_agent", "bare run (median)", median(times["bare"]) * 1000, "ms"),
        Row("framework_claude_agent", "lyra run (median)", median(times["lyra"]) * 1000, "ms"),
        Row("framework_claude_agent", "lyra's CPU per run, this process", extra_cpu, "ms"),
        Row(
            "framework_claude_agent",
            "ClaudeAgentChild vs the same agent bare",
            ratio,
            "×",
            target=f"≤ {TARGET}×",
            met=ratio <= TARGET,
            note=f"{rounds} interleaved rounds, a CLI process each",
        ),
    ]


def main() -> None:
    standalone(run, __doc__)


if __name__ == "__main__":
    main()
