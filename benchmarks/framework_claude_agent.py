"""A Claude Agent SDK agent bare vs inside lyra: what ``ClaudeAgentChild`` costs per run.

The agent: ``ClaudeAgentOptions`` with one in-process tool; the model is the
tests' local fake Messages API (``tests/fakes``, streaming, on 127.0.0.1),
scripted before every run with a tool call, then the answer (two model
requests, one tool call a run). Every run starts the SDK's bundled Claude Code
CLI, a process of its own. The sides (``_framework`` runs them, interleaved):

- **bare**: ``query(prompt=..., options=options)``, the SDK's one-shot run,
  read to its end (the run lyra's child makes, without lyra);
- **bare + hook**: the same with do-nothing hooks (answering ``{}``) on the
  CLI events lyra's child hooks (``UserPromptSubmit``, ``PostToolBatch``,
  ``SubagentStart``): the CLI waits on each, a control-protocol round trip;
- **lyra**: ``adelegate_task(prompt, child=ClaudeAgentChild(options), ...)``;
- **plain child**: ``adelegate_task`` around a child that awaits the bare run.
- **floor child**: the least a supervisor does around the same run (``_framework``).

Measured as the other frameworks, with what differs said: the CPU is this
process's only (the SDK, lyra, and the fake API's server threads, alike on
every side; not the CLI's, which is another process), one run a block; the
20 ms model is the fake API answering each request 20 ms late, and the wall
time of a run is mostly the CLI's start (0.4-1 s, swinging with the
machine's load by more than 1%), so that ratio is a rough read. Only in a
full run or by name (each run starts the CLI); skipped without the extra.

Targets: lyra's share (lyra − bare + hook) ≤ 150 µs CPU per run; with a model
taking 20 ms per request, lyra ≤ 1.01× bare in wall time.

    python benchmarks/framework_claude_agent.py [--quick | --smoke] [--json FILE]
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import ROOT, Row, Size, standalone
from _framework import Framework, Plan, Run, Sides, measure

sys.path.insert(0, str(ROOT / "tests"))  # the fake Messages API the tests use

from fakes.messages_api import MessagesAPI, message, slow, tool_use

ANSWER = "P04637 has 393 residues."
HOOKED = ("UserPromptSubmit", "PostToolBatch", "SubagentStart")  # lyra's child's hook events


def options(api_url: str, home: Path, hooks: Any = None) -> Any:
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
        hooks=hooks,
        env={
            "ANTHROPIC_BASE_URL": api_url,
            "ANTHROPIC_API_KEY": "benchmark",
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",  # as lyra runs it: the same on every side
        },
    )


def do_nothing_hooks() -> Any:
    """A hook answering ``{}`` (go on) on each event lyra's child hooks."""
    from claude_agent_sdk import HookMatcher

    async def nothing(data: Any, tool_use_id: str | None, context: Any) -> Any:
        return {}

    return {event: [HookMatcher(hooks=[nothing])] for event in HOOKED}


def query_run(agent: Any) -> Run:
    async def run(prompt: str) -> str:
        from claude_agent_sdk import ResultMessage, query

        output = ""
        async for reply in query(prompt=prompt, options=agent):
            if isinstance(reply, ResultMessage):
                output = reply.result or ""
        return output

    return run


def builder(api: MessagesAPI, home: Path) -> Any:
    """``build(latency)`` over the running fake API."""
    from lyra.children.claude_agent import ClaudeAgentChild

    def build(latency: float) -> Sides:
        def script() -> None:  # one run's model: a tool call, then the answer
            call = tool_use("mcp__bio__lookup", {"protein_id": "P04637"})
            replies = [message([call], "tool_use"), message(ANSWER)]
            api.add(*(slow(reply, latency) if latency else reply for reply in replies))

        agent = options(api.url, home)
        hooked = query_run(options(api.url, home, do_nothing_hooks()))
        return Sides(query_run(agent), hooked, ClaudeAgentChild(agent), fresh=script)

    return build


def run(size: Size) -> list[Row]:
    if importlib.util.find_spec("claude_agent_sdk") is None:
        print("framework_claude_agent: skipped (pip install -e '.[claude-agent-sdk]')")
        return []
    with tempfile.TemporaryDirectory() as folder, MessagesAPI(streaming=True) as api:
        framework = Framework(
            bench="framework_claude_agent",
            build=builder(api, Path(folder)),
            prompt="How long is P04637?",
            answer="393 residues",
            per_run="2 model requests, 1 tool call, a CLI process",
            requests=2,
            hook="do-nothing CLI hooks",
            plan=Plan(
                cpu_runs=(1, 1, 1),
                cpu_rounds=(10, 3, 1),
                wall_runs=(1, 1, 1),
                wall_rounds=(10, 3, 1),
                cold_runs=(10, 3, 1),
            ),
        )
        return measure(framework, size)


def main(argv: list[str] | None = None) -> None:
    standalone(run, __doc__, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
