"""A Claude Agent SDK agent under lyra: a recovery, a budget and an idle timeout.

Needs the extra: ``pip install -e '.[claude-agent-sdk]'`` in the checkout (the SDK's
wheel bundles the Claude Code CLI). Runs offline, with no key: a tiny fake of
the Messages API in this file, on 127.0.0.1, stands in for the model (the CLI
streams, so the fake sends server-sent events), and the CLI gets a throwaway
HOME and configuration directory.

The agent is a plain ``ClaudeAgentOptions`` with one in-process tool
(``lookup``); ``ClaudeAgentChild(options)`` runs it under lyra:

1. **recovery**: the agent looks P04637 up, then the API is overloaded (529).
   Work was done, so the attempt is ``partial``; ``recover`` sends a
   continuation, the child resumes the CLI's session, and the model, seeing
   its earlier tool result, answers;
2. **budget**: an agent that would look things up forever is stopped at the
   response that crosses ``Budget(max_tokens=3_000)``: ``timeout`` / ``budget``;
3. **idle timeout**: a tool that never returns is ended after ``idle_timeout``
   seconds without progress, and the CLI process with it: ``timeout`` / ``idle``.

The script prints what happened and exits 0 when all three behaved.

Run: ``python examples/claude_agent_agent.py [-v]`` (``-v`` shows lyra's events).
"""

from __future__ import annotations

import argparse
import http.server
import importlib.util
import json
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from lyra import Budget, Limits, Supervisor, events
from lyra.recovery import RecoveryPolicy, record_waits, recover

MODEL = "claude-sonnet-4-6"


# -- a fake Messages API: each request gets the next scripted reply --------------------


def answer(text: str, tokens: int = 500) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "stop": "end_turn", "tokens": tokens}


def call(tool: str, args: dict[str, Any], tokens: int = 500) -> dict[str, Any]:
    block = {"type": "tool_use", "id": f"toolu_{abs(hash((tool, str(args))))}", "name": tool}
    return {"content": [{**block, "input": args}], "stop": "tool_use", "tokens": tokens}


OVERLOADED = {"status": 529, "error": "overloaded_error"}


def events_of(reply: dict[str, Any], model: str) -> bytes:
    """A reply as the API streams it."""
    usage = {"input_tokens": reply["tokens"], "output_tokens": 20}
    frames: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                **{"id": f"msg_{threading.get_ident()}{id(reply)}", "type": "message"},
                **{"role": "assistant", "model": model, "content": [], "stop_reason": None},
                "usage": {**usage, "output_tokens": 1},
            },
        }
    ]
    for index, block in enumerate(reply["content"]):
        if block["type"] == "text":
            start = {**block, "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        frames += [
            {"type": "content_block_start", "index": index, "content_block": start},
            {"type": "content_block_delta", "index": index, "delta": delta},
            {"type": "content_block_stop", "index": index},
        ]
    frames += [
        {"type": "message_delta", "delta": {"stop_reason": reply["stop"]}, "usage": usage},
        {"type": "message_stop"},
    ]
    return b"".join(f"event: {f['type']}\ndata: {json.dumps(f)}\n\n".encode() for f in frames)


class FakeAPI(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script: list[dict[str, Any]]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script, self.requests = list(script), []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeAPI

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.server.requests.append(body)
        reply = self.server.script.pop(0) if self.server.script else answer("(no more replies)")
        if "status" in reply:
            payload = json.dumps(
                {"type": "error", "error": {"type": reply["error"], "message": "!"}}
            )
            self._send(reply["status"], "application/json", payload.encode())
        else:
            self._send(200, "text/event-stream", events_of(reply, body["model"]))

    def _send(self, status: int, kind: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def fake_api(script: list[dict[str, Any]]) -> Iterator[FakeAPI]:
    server = FakeAPI(script)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


# -- the agent ----------------------------------------------------------------------------


def make_agent(api: FakeAPI, home: Path) -> Any:
    """A Claude agent with one in-process tool, on the fake API, wrapped for lyra."""
    from claude_agent_sdk import ClaudeAgentOptions, create_sdk_mcp_server, tool

    from lyra.children.claude_agent import ClaudeAgentChild

    @tool("lookup", "Look a protein up", {"protein_id": str})
    async def lookup(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": f"{args['protein_id']}: 393 residues"}]}

    @tool("wait_for_lab", "Wait for the wet lab", {})
    async def wait_for_lab(args: dict[str, Any]) -> dict[str, Any]:
        await anyio.sleep_forever()
        return {"content": []}

    home.mkdir(parents=True, exist_ok=True)
    options = ClaudeAgentOptions(
        model=MODEL,
        cwd=home,
        mcp_servers={"bio": create_sdk_mcp_server("bio", tools=[lookup, wait_for_lab])},
        allowed_tools=["mcp__bio__lookup", "mcp__bio__wait_for_lab"],
        env={
            "ANTHROPIC_BASE_URL": api.url,
            "ANTHROPIC_API_KEY": "offline-example",
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
        },
    )
    return ClaudeAgentChild(options)


def lookups(n: int) -> list[dict[str, Any]]:
    return [call("mcp__bio__lookup", {"protein_id": f"Q{i}"}, tokens=990) for i in range(n)]


async def main(folder: Path) -> bool:
    ok = True
    print("1. recovery")
    script = [call("mcp__bio__lookup", {"protein_id": "P04637"}), OVERLOADED]
    script.append(answer("P04637 has 393 residues."))
    with fake_api(script) as api, record_waits():
        outcome = await recover(
            "How long is P04637?",
            child=make_agent(api, folder / "recovery"),
            policy=RecoveryPolicy(max_retries=1),
            limits=Limits(timeout=60, idle_timeout=20),
        )
    for record in outcome.attempts:
        result = record.result
        what = "completed" if result.failure is None else result.failure.category
        print(f"  attempt {record.number} [{record.strategy}]: {what}")
    resumed = json.dumps(api.requests[-1]["messages"])
    print(f"  attempt 2 saw attempt 1's tool result: {'P04637: 393 residues' in resumed}")
    print(f"  output: {outcome.result.output}")
    ok &= outcome.result.output == "P04637 has 393 residues." and "393 residues" in resumed

    print("2. budget")
    with fake_api(lookups(8)) as api:
        supervisor = Supervisor(make_agent(api, folder / "budget"), budget=Budget(max_tokens=3_000))
        result = await supervisor.delegate("Look every protein up", timeout=60)
    failure = result.failure
    spent = result.usage.tokens if result.usage else 0
    print(f"  {failure.category}/{failure.error_type}: {failure.evidence}" if failure else "  ?!")
    print(f"  model requests: {len(api.requests)}, tokens charged: {spent:,}")
    ok &= failure is not None and failure.error_type == "budget" and spent <= 3_000 + 1_010

    print("3. idle timeout")
    with fake_api([call("mcp__bio__wait_for_lab", {})]) as api:
        result = await Supervisor(make_agent(api, folder / "idle")).delegate(
            "Wait for the lab", timeout=60, idle_timeout=1.5
        )
    failure = result.failure
    print(f"  {failure.category}/{failure.error_type}: {failure.evidence}" if failure else "  ?!")
    ok &= failure is not None and failure.error_type == "idle"
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", action="store_true", help="print lyra's events on stderr")
    verbose = parser.parse_args().v
    if verbose:
        events.configure(sys.stderr)
    if importlib.util.find_spec("claude_agent_sdk") is None:
        print("skipped: pip install -e '.[claude-agent-sdk]' to run this example")
        sys.exit(0)
    with tempfile.TemporaryDirectory() as folder:
        passed = anyio.run(main, Path(folder))
    print("OK: recovered, stopped by the budget, ended when idle" if passed else "FAILED")
    sys.exit(0 if passed else 1)
