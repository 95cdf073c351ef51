"""The Claude Agent SDK child: the real SDK and its bundled Claude Code CLI, pointed at
the local fake Messages API (streaming, on 127.0.0.1), under lyra's limits: what is
particular to it (the contract every framework child keeps is
tests/test_framework_contract.py).

Every CLI run gets a fresh HOME and CLAUDE_CONFIG_DIR (no user settings, no
session leaks), the CLI's non-essential traffic, telemetry, updater and error
reporting off, and a proxy on a closed local port for anything that is not
127.0.0.1: the conftest's network guard covers this process, not the CLI's.
"""

from __future__ import annotations

import asyncio
import gzip
import importlib.util
import json
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from fakes._server import LocalServer, RequestHandler, Response
from fakes.frameworks import child_processes, cli_env
from fakes.messages_api import (
    MessagesAPI,
    Reply,
    message,
    slow,
    stalled,
    tool_use,
)
from lyra import (
    Budget,
    ChildRef,
    Limits,
    Supervisor,
    Task,
    parse_report,
    tracing,
)
from lyra.delegation._foreign import Kind, describe
from lyra.delegation._foreign._claude_agent import (
    RESULT_SUBTYPES,
    TERMINAL_REASONS,
)
from lyra.delegation._internal import run_attempt
from lyra.recovery import record_waits

INSTALL = "pip install -e '.[test,claude-agent-sdk]'"
needs_sdk = pytest.mark.skipif(
    importlib.util.find_spec("claude_agent_sdk") is None,
    reason=f"the Claude Agent SDK (and its CLI) is not installed: {INSTALL}",
)
MODEL = "claude-sonnet-4-6"  # lyra's price table: $3 / $15 per million tokens
LOOKUP = "mcp__bio__lookup"


def price(input_tokens: int, output_tokens: int) -> float:
    return (input_tokens * 3 + output_tokens * 15) / 1_000_000


# -- the agent under test -------------------------------------------------------------


def bio_server() -> Any:
    """An in-process MCP server with a lookup."""
    from claude_agent_sdk import create_sdk_mcp_server, tool

    @tool("lookup", "Look a protein up", {"protein_id": str})
    async def lookup(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": f"{args['protein_id']}: 393 residues"}]}

    return create_sdk_mcp_server("bio", tools=[lookup])


def agent(api_url: str, home: str, **options: Any) -> Any:
    """The child under test (importable, so a ChildRef names it): a Claude agent with
    the bio tools allowed, on the fake API."""
    from claude_agent_sdk import ClaudeAgentOptions

    from lyra.children.claude_agent import ClaudeAgentChild

    env = {**cli_env(api_url, home), **options.pop("env", {})}
    return ClaudeAgentChild(
        ClaudeAgentOptions(
            model=options.pop("model", MODEL),
            cwd=home,
            env=env,
            mcp_servers={"bio": bio_server()},
            allowed_tools=[LOOKUP],
            **options,
        )
    )


@pytest.fixture
def home(tmp_path: Path) -> str:
    return str(tmp_path)


@pytest.fixture
def no_real_sleeps() -> Iterator[list[float]]:
    """Recovery waits are recorded, not slept."""
    with record_waits() as waits:
        yield waits


def lookup_turn(protein: str = "P04637", **usage: int) -> Reply:
    return message([tool_use(LOOKUP, {"protein_id": protein})], "tool_use", usage=usage or None)


def user_texts(request: Mapping[str, Any]) -> list[str]:
    """The texts and tool results of every message a request sent, in order."""
    found: list[str] = []
    for turn in request["messages"]:
        content = turn["content"]
        for block in [content] if isinstance(content, str) else content:
            if isinstance(block, str):
                found.append(block)
            elif block.get("type") == "text":
                found.append(block["text"])
            elif block.get("type") == "tool_result":
                found.append(json.dumps(block.get("content")))
            elif block.get("type") == "tool_use":
                found.append(json.dumps(block["input"]))
    return found


# -- what is left behind ----------------------------------------------------------------


def live_threads() -> set[threading.Thread]:
    """Threads but anyio's idle pool workers (kept for reuse, by design)."""
    return {t for t in threading.enumerate() if t.name != "AnyIO worker thread"}


def live_tasks() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if not t.done()}


# -- a run that completes ---------------------------------------------------------------


@needs_sdk
@pytest.mark.anyio
async def test_structured_output_cache_reads_and_the_session_of_a_run_from_a_child_ref(
    home: str,
) -> None:
    """A child built from a ChildRef with the options' output_format: a tool call and
    structured output later, the output is the JSON, cache reads are in the tokens and
    priced at their rate, and the CLI session is kept in the task's state."""
    answer = {"protein_id": "P04637", "length": 393}
    script = [
        lookup_turn(input_tokens=1000, output_tokens=40, cache_read_input_tokens=200),
        message([tool_use("StructuredOutput", answer)], "tool_use", usage={"input_tokens": 1300}),
    ]
    with MessagesAPI(script, streaming=True) as api:
        ref = ChildRef(
            target="test_child_claude_agent:agent",
            options={
                "api_url": api.url,
                "home": home,
                "output_format": {"type": "json_schema", "schema": {"type": "object"}},
            },
        )
        [outcome] = await Supervisor(ref, timeout=30).run([Task(prompt="How long is P04637?")])
    result = outcome.result
    assert result.ok, result.report
    assert json.loads(result.output or "") == answer
    assert len(api.requests) == 2
    assert result.usage is not None
    usage = result.usage
    assert (usage.input_tokens, usage.output_tokens, usage.turns) == (2500, 45, 2)
    assert usage.cost_usd == pytest.approx(price(2300, 45) + 200 * 0.3 / 1_000_000)
    report = parse_report(result.report)
    assert report.tokens_used == 2545
    assert "P04637: 393 residues" in json.dumps(api.requests[1]["messages"][-1])
    assert outcome.state["claude_agent"]["session_id"]


def _asked_of_the_helper(body: dict[str, Any]) -> bool:
    """A request of the subagent: its conversation opens with the prompt it was given."""
    first = body["messages"][0]["content"]
    text = first if isinstance(first, str) else " ".join(b.get("text", "") for b in first)
    return "Look P04637 up" in text and "How long is P04637?" not in text


@needs_sdk
@pytest.mark.anyio
async def test_a_background_subagent_s_later_turn_belongs_to_the_run(home: str) -> None:
    """The agent starts a background subagent and ends its turn; the CLI wakes it when
    the subagent is done, and the child's output is that later turn's answer, every
    response (the subagent's too) charged once as a turn."""
    launch = {"description": "look", "prompt": "Look P04637 up", "subagent_type": "general-purpose"}
    script = [
        message([tool_use("Agent", launch)], "tool_use"),
        message("Started a helper; waiting."),
        message("P04637 has 393 residues."),
    ]
    # The subagent's request races the main agent's: it has a script of its own, and
    # answers late, so that the main agent has ended its turn when the subagent is done
    # (on a loaded machine the subagent could otherwise finish first).
    helper = [slow(message("The helper found 393 residues."), 1.0)]
    with MessagesAPI(script, streaming=True, routes=[(_asked_of_the_helper, helper)]) as api:
        child = agent(api.url, home)
        child.options.allowed_tools.append("Agent")
        result = await Supervisor(child).delegate("How long is P04637?", timeout=30)
    assert result.output == "P04637 has 393 residues.", result.report
    assert sum(map(_asked_of_the_helper, api.requests)) == 1
    assert api.remaining == 0
    assert result.usage is not None
    assert (result.usage.turns, result.usage.input_tokens) == (4, 40)


# -- what real framework behaviour becomes ----------------------------------------------


@needs_sdk
@pytest.mark.anyio
async def test_a_refusal_the_cli_would_ask_again_is_an_invalid_task(home: str) -> None:
    """The CLI asks again at once after a refusal; lyra stops it there: invalid_task,
    not retried, the refusal as evidence."""
    script = [message("I won't.", "refusal"), message("Still no.")]
    with MessagesAPI(script, streaming=True) as api:
        result = await Supervisor(agent(api.url, home), timeout=30).delegate("Look P04637 up")
    failure = result.failure
    assert failure is not None, result.report
    assert (failure.category, failure.suggested_retry, failure.error_type) == (
        "invalid_task",
        False,
        "data",
    )
    assert "TaskRejected" in failure.evidence


# -- limits inside the run ----------------------------------------------------------------


@needs_sdk
@pytest.mark.anyio
async def test_a_cost_budget_on_a_model_the_cli_picks_is_refused_at_its_first_response(
    home: str,
) -> None:
    """Options that name no model (the contract suite has the named case, refused before
    anything is sent): the CLI names it in its first response, and a cost budget over a
    model lyra cannot price stops there, never kept as $0."""
    turn = [tool_use(LOOKUP, {"protein_id": "P04637"})]
    script = [message(turn, "tool_use", model="acme-1"), message("done", model="acme-1")]
    with MessagesAPI(script, streaming=True, strict=False) as api:
        child = agent(api.url, home, model=None)
        result = await Supervisor(child, budget=Budget(max_cost_usd=1.0)).delegate(
            "Look P04637 up", timeout=30
        )
    assert result.failure is not None
    assert "no price is known for the model 'acme-1'" in result.failure.message
    assert "prices={...} to ClaudeAgentChild" in result.failure.message
    assert len(api.requests) == 1


@needs_sdk
@pytest.mark.anyio
async def test_the_agent_asks_through_lyras_tool_and_a_loop_ends_the_run(home: str) -> None:
    """ask_tool=True: the CLI's call of mcp__lyra__ask_question reaches answer= and the
    answer goes back as the tool's result; then the same lookup again and again past
    max_repeats ends the run as timeout / loop, the CLI process gone."""
    from lyra.children.claude_agent import ClaudeAgentChild

    asked = message(
        [tool_use("mcp__lyra__ask_question", {"question": "Which organism?"})], "tool_use"
    )
    script = [asked] + [lookup_turn("P04637") for _ in range(4)]
    processes = child_processes()
    with MessagesAPI(script, streaming=True, strict=False) as api:
        child = agent(api.url, home)
        child = ClaudeAgentChild(child.options, ask_tool=True)
        supervisor = Supervisor(child, max_repeats=2, answer=lambda q: "Homo sapiens")
        result = await supervisor.delegate("Look P04637 up", timeout=30)
    assert child_processes() <= processes
    assert result.failure is not None
    assert (result.failure.category, result.failure.error_type) == ("timeout", "loop")
    assert "Homo sapiens" in " ".join(user_texts(api.requests[1]))
    assert len(api.requests) == 4


@needs_sdk
@pytest.mark.anyio
async def test_a_cli_stopped_while_it_waits_for_a_hook_sends_no_more_requests(home: str) -> None:
    """The deadline passes while the CLI waits for a (slow) PostToolBatch hook of the
    user's: lyra interrupts the turn before it signals the CLI, which otherwise takes
    the hook's lost answer for a yes and sends one more model request."""
    from claude_agent_sdk import HookMatcher

    hook_waiting = anyio.Event()

    async def slow_review(data: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        hook_waiting.set()
        await anyio.sleep(30)
        return {}

    slow = {"PostToolBatch": [HookMatcher(hooks=[slow_review])]}
    with MessagesAPI([lookup_turn(), message("done")], streaming=True, strict=False) as api:
        result = await Supervisor(agent(api.url, home, hooks=slow)).delegate("Look", timeout=4)
        await anyio.sleep(0.5)  # time enough for a request the CLI should not send
    assert hook_waiting.is_set()
    assert result.failure is not None
    assert (result.failure.category, result.failure.error_type) == ("timeout", "timeout")
    assert len(api.requests) == 1


@needs_sdk
@pytest.mark.anyio
async def test_a_model_that_stops_streaming_ends_at_the_deadline_quietly(
    home: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A model that stops streaming mid-answer is ended by the deadline: promptly,
    quietly (the SDK logs no crash), and with no CLI process, task or thread of the run
    left behind."""
    processes, tasks, threads = child_processes(), live_tasks(), live_threads()
    script = [stalled(message("a long answer"), after_events=3)]
    with MessagesAPI(script, streaming=True, strict=False) as api:
        started = time.monotonic()
        result = await Supervisor(agent(api.url, home)).delegate("Wait for it", timeout=1.5)
        ended = time.monotonic() - started
    failure = result.failure
    assert failure is not None
    assert (failure.category, failure.error_type) == ("timeout", "timeout")
    assert ended < 1.5 + 2.0  # the deadline, a CLI start and a second to spare
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
    assert child_processes() <= processes
    await anyio.sleep(0.05)  # one more tick for the SDK's cancelled tasks to finish
    assert live_tasks() <= tasks
    assert live_threads() <= threads


# -- recovery ------------------------------------------------------------------------------


@needs_sdk
@pytest.mark.anyio
async def test_a_session_that_cannot_be_resumed_starts_afresh(home: str) -> None:
    """A later attempt whose stored session is unknown to this CLI (another machine, a
    cleaned config dir) runs a fresh session instead of failing."""
    stale = str(uuid.uuid4())
    state = {"claude_agent": {"session_id": stale}}
    with MessagesAPI([message("fresh answer")], streaming=True) as api:
        result = await run_attempt(
            agent(api.url, home), "Continue the task", limits=Limits(30), attempt=2, state=state
        )
    assert result.output == "fresh answer"
    assert state["claude_agent"]["session_id"] not in (stale, None)
    assert user_texts(api.requests[0])[-1] == "Continue the task"


# -- traces ---------------------------------------------------------------------------------


class Collector(LocalServer[Response]):
    """A local OTLP/HTTP collector that keeps the spans posted to it (JSON protocol)."""

    thread_name = "fake-otlp-collector"
    label = "fake OTLP collector"
    methods = frozenset({"POST"})

    def __init__(self) -> None:
        super().__init__(strict=False)
        self.spans: list[dict[str, Any]] = []

    def dispatch(self, request: RequestHandler) -> Response:
        body = request.rfile.read(int(request.headers.get("content-length") or 0))
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        if request.path.startswith("/v1/traces"):
            for resource in json.loads(body).get("resourceSpans", []):
                for scope in resource.get("scopeSpans", []):
                    with self._lock:
                        self.spans.extend(scope.get("spans", []))
        return Response(status=200, body=b"{}")


@needs_sdk
@pytest.mark.anyio
async def test_the_cli_spans_are_children_of_the_invoke_agent_span(home: str) -> None:
    """With telemetry on, the CLI's interaction span has lyra's invoke_agent span as its
    parent (the SDK passes TRACEPARENT), and lyra makes no model-call span of its own."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(tracer_provider=provider)
    try:
        with Collector() as collector, MessagesAPI([message("done")], streaming=True) as api:
            telemetry = {
                "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
                "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1",
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_METRICS_EXPORTER": "none",
                "OTEL_LOGS_EXPORTER": "none",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
                "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
            }
            result = await Supervisor(agent(api.url, home, env=telemetry)).delegate(
                "Hi", timeout=30
            )
    finally:
        tracing.configure()
        provider.shutdown()
    assert result.ok, result.report
    [attempt] = exporter.get_finished_spans()
    assert attempt.name == "invoke_agent ClaudeAgentChild"
    assert attempt.context is not None
    interaction = next(s for s in collector.spans if s["name"] == "claude_code.interaction")
    assert interaction["traceId"] == f"{attempt.context.trace_id:032x}"
    assert interaction["parentSpanId"] == f"{attempt.context.span_id:016x}"
    assert any(s["name"] == "claude_code.llm_request" for s in collector.spans)


# -- the foreign table ----------------------------------------------------------------------


def sdk_error(name: str, **fields: Any) -> BaseException:
    """An exception of a class named as the SDK's, with the fields it carries (no SDK)."""
    cls = type(name, (Exception,), {"__module__": "claude_agent_sdk._errors"})
    exc = cls(f"{name}!")
    for key, value in fields.items():
        setattr(exc, key, value)
    return exc


@pytest.mark.parametrize(
    ("fields", "kind", "error_type", "retry"),
    [
        (
            {"api_error_status": 429, "terminal_reason": "api_error"},
            Kind.TRANSIENT,
            "rate_limit",
            None,
        ),
        ({"api_error_status": 529}, Kind.TRANSIENT, "rate_limit", None),
        ({"api_error_status": 500}, Kind.TRANSIENT, "unknown", None),
        ({"api_error_status": 401}, Kind.PERMANENT, "auth", None),
        ({"api_error_status": 404}, Kind.PERMANENT, "not_found", None),
        (
            {"api_error_status": 413, "terminal_reason": "image_error"},
            Kind.MALFORMED_TASK,
            "data",
            None,
        ),
        (
            {"subtype": "error_max_turns", "terminal_reason": "max_turns"},
            Kind.BUDGET,
            "budget",
            None,
        ),
        ({"subtype": "error_max_budget_usd"}, Kind.BUDGET, "budget", None),
        (
            {"subtype": "success", "terminal_reason": "hook_stopped"},
            Kind.MALFORMED_TASK,
            "data",
            None,
        ),
        (
            {"subtype": "success", "terminal_reason": "prompt_too_long"},
            Kind.CONTEXT_OVERFLOW,
            "context_overflow",
            None,
        ),
        (
            {"subtype": "success", "terminal_reason": "api_error"},
            Kind.TRANSIENT,
            "connection",
            None,
        ),
        ({"subtype": "error_during_execution"}, Kind.UNKNOWN, "unknown", None),
        ({"subtype": "a_new_subtype"}, Kind.UNKNOWN, "unknown", None),
    ],
)
def test_a_result_error_is_refined_by_its_result(
    fields: dict[str, Any], kind: Kind, error_type: str, retry: float | None
) -> None:
    """A ResultError is read by its API status first, then its subtype, then its terminal
    reason (no SDK needed: classes are known by name)."""
    cause = describe(sdk_error("ResultError", **fields))
    assert (cause.kind, cause.error_type, cause.retry_after) == (kind, error_type, retry)


def test_every_result_subtype_and_terminal_reason_has_a_meaning() -> None:
    """The tables name the CLI's failing subtypes and terminal reasons, the turn and
    budget limits among them as the framework's own limits."""
    assert {"error_max_turns", "error_max_budget_usd"} <= RESULT_SUBTYPES.keys()
    assert all(
        RESULT_SUBTYPES[s][0] is Kind.BUDGET for s in ("error_max_turns", "error_max_budget_usd")
    )
    assert TERMINAL_REASONS["max_turns"][0] is Kind.BUDGET
    assert "completed" not in TERMINAL_REASONS


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("CLINotFoundError", Kind.ENVIRONMENT),
        ("CLIConnectionError", Kind.ENVIRONMENT),
        ("ProcessError", Kind.UNKNOWN),
        ("CLIJSONDecodeError", Kind.UNKNOWN),
    ],
)
def test_the_sdk_errors_map_by_class_name(name: str, kind: Kind) -> None:
    """The SDK's other exceptions are translated by class name, without the SDK."""
    assert describe(sdk_error(name)).kind is kind


# -- installing -----------------------------------------------------------------------------


def test_current_context_outside_a_run_says_so() -> None:
    """A tool called outside a ClaudeAgentChild run gets a clear error, not None."""
    from lyra.children.claude_agent import current_context

    with pytest.raises(RuntimeError, match="only available inside a ClaudeAgentChild run"):
        current_context()
