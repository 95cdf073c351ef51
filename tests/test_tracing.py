"""OpenTelemetry traces (DESIGN §12): the span tree of a delegation, read back with
the SDK's in-memory exporter, and nothing at all without a tracer provider."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anthropic
import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from fakes.messages_api import DEFAULT_MODEL, MessagesAPI, message, rate_limited, text, tool_use
from lyra import ChildContext, Limits, RecoveryPolicy, Supervisor, tracing
from lyra._extras import install_hint
from lyra.children import AnthropicChild
from lyra.errors import ConfigurationError, TransientError
from lyra.recovery import record_waits, recover

pytestmark = pytest.mark.anyio


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Spans of this test only: an SDK provider with an in-memory exporter, given to lyra."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(tracer_provider=provider)
    yield exporter
    tracing.configure()
    provider.shutdown()


def by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    """The finished spans by name (each name once in these tests)."""
    finished = exporter.get_finished_spans()
    named = {span.name: span for span in finished}
    assert len(named) == len(finished), [span.name for span in finished]
    return named


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def lookup(protein: str) -> str:
    """A sync tool."""
    return f"{protein}: 393 residues"


async def gatherer(prompt: str, ctx: ChildContext) -> str:
    """Fetches what it can; its helper, missing context, fails."""
    await ctx.tool("lookup", lookup, "P04637")
    ctx.charge(input_tokens=120, output_tokens=30)
    helper = await ctx.delegate("Which isoform?", child=isoform_finder)
    return f"done without {helper.failure.category if helper.failure else 'nothing'}"


async def isoform_finder(prompt: str, ctx: ChildContext) -> str:
    ctx.charge(input_tokens=7, output_tokens=3)
    ctx.block("missing_context", "The prompt names no isoform")


async def test_a_nested_delegation_is_a_span_tree_with_the_failing_grandchild_marked(
    spans: InMemorySpanExporter,
) -> None:
    """The attempt, its tool call and its failing grandchild are spans nested as the
    tree is, attributed per the GenAI conventions, the grandchild with error.type."""
    result = await Supervisor(gatherer).delegate("Gather P04637", timeout=5, subject="P04637")
    assert result.ok
    named = by_name(spans)
    parent = named["invoke_agent gatherer"]
    tool = named["execute_tool lookup"]
    grandchild = named["invoke_agent isoform_finder"]
    assert parent_of(parent) is None
    assert parent_of(tool) == parent_of(grandchild) == span_id(parent)
    assert {span.context.trace_id for span in named.values() if span.context} == {
        parent.context.trace_id  # type: ignore[union-attr]
    }
    assert parent.kind is tool.kind is SpanKind.INTERNAL
    assert dict(parent.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "gatherer",
        "lyra.session_id": result.session_id,
        "lyra.attempt": 1,
        "lyra.timeout": 5.0,
        "lyra.subject": "P04637",
        "gen_ai.usage.input_tokens": 127,  # the grandchild's use counts too
        "gen_ai.usage.output_tokens": 33,
        "lyra.cost_usd": 0.0,
        "lyra.turns": 0,
    }
    assert parent.status.status_code is StatusCode.UNSET
    assert dict(tool.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.type": "function",
    }
    failed = result.failed_delegations[0]
    attributes = dict(grandchild.attributes or {})
    assert attributes["lyra.session_id"] == failed.session_id
    assert attributes["error.type"] == "missing_context"
    assert attributes["lyra.retryable"] is False
    assert attributes["lyra.error_type"] == failed.error_type == "data"
    assert attributes["gen_ai.usage.input_tokens"] == 7
    assert grandchild.status.status_code is StatusCode.ERROR
    assert grandchild.status.description == "The prompt names no isoform"


async def flaky_tool() -> None:
    raise ConnectionError("connection reset by peer")


async def uses_a_flaky_tool(prompt: str, ctx: ChildContext) -> str:
    return str(await ctx.tool("fetch", flaky_tool))


async def sleeps(prompt: str, ctx: ChildContext) -> str:
    ctx.step("Started")
    await anyio.sleep(5)
    return "late"


@pytest.mark.parametrize(
    ("child", "category", "retryable", "error_type"),
    [(uses_a_flaky_tool, "tool_error", True, "connection"), (sleeps, "timeout", True, "timeout")],
    ids=["tool_error", "timeout"],
)
async def test_a_failed_attempt_carries_its_category(
    spans: InMemorySpanExporter, child: Any, category: str, retryable: bool, error_type: str
) -> None:
    """A failed attempt's span has error.type = the category, lyra.retryable,
    lyra.error_type and status ERROR with the failure's message."""
    result = await Supervisor(child).delegate("Try", timeout=0.2)
    assert result.failure is not None
    span = by_name(spans)[f"invoke_agent {child.__name__}"]
    attributes = dict(span.attributes or {})
    assert (attributes["error.type"], attributes["lyra.retryable"]) == (category, retryable)
    assert attributes["lyra.error_type"] == error_type
    assert attributes["lyra.evidence"] == result.failure.evidence
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == result.failure.message


async def test_a_failing_tool_is_a_failed_tool_span(spans: InMemorySpanExporter) -> None:
    """The exception a tool raised is the tool span's error.type, by its class name."""
    await Supervisor(uses_a_flaky_tool).delegate("Fetch", timeout=5)
    tool = by_name(spans)["execute_tool fetch"]
    assert (tool.attributes or {})["error.type"] == "ConnectionError"
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.status.description == "connection reset by peer"


class Summariser:
    """A child object."""

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        return "summary"


def blocking_child(prompt: str, ctx: ChildContext) -> str:
    """A sync child (lyra runs it in a worker thread)."""
    return "done"


@pytest.mark.parametrize(
    ("child", "name"),
    [(Summariser(), "Summariser"), (blocking_child, "blocking_child"), (gatherer, "gatherer")],
    ids=["object", "sync function", "async function"],
)
async def test_the_agent_name_is_the_childs_class_or_function(
    spans: InMemorySpanExporter, child: Any, name: str
) -> None:
    """gen_ai.agent.name and the span name say which child ran."""
    await Supervisor(child).delegate("Go", timeout=5)
    span = spans.get_finished_spans()[-1]
    assert span.name == f"invoke_agent {name}"
    assert (span.attributes or {})["gen_ai.agent.name"] == name


async def test_recovery_attempts_sit_under_one_loop_span_each_linked_to_the_last(
    spans: InMemorySpanExporter,
) -> None:
    """A recovery loop is an invoke_workflow span; its attempts are its children,
    numbered, each linked to the attempt before it."""
    calls = 0

    async def wobbly(prompt: str, ctx: ChildContext) -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise TransientError("HTTP 503", status=503)
        return "steady"

    with record_waits():
        outcome = await recover(
            "Go",
            child=wobbly,
            policy=RecoveryPolicy(max_retries=3),
            subject="X1",
            limits=Limits(timeout=5),
        )
    assert outcome.recovered
    finished = spans.get_finished_spans()
    loop = next(span for span in finished if span.name == "invoke_workflow recover")
    attempts = [span for span in finished if span.name == "invoke_agent wobbly"]
    assert [(span.attributes or {})["lyra.attempt"] for span in attempts] == [1, 2, 3]
    assert {parent_of(span) for span in attempts} == {span_id(loop)}
    assert [[link.context.span_id for link in span.links] for span in attempts] == [
        [],
        [span_id(attempts[0])],
        [span_id(attempts[1])],
    ]
    assert [(span.attributes or {}).get("error.type") for span in attempts] == [
        "tool_error",
        "tool_error",
        None,
    ]
    assert {(span.attributes or {})["lyra.task_id"] for span in attempts} == {outcome.task_id}
    assert dict(loop.attributes or {}) == {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": "recover",
        "lyra.subject": "X1",
        "lyra.task_id": outcome.task_id,
        "lyra.attempts": 3,
        "lyra.recovered": True,
    }
    assert loop.status.status_code is StatusCode.UNSET


async def test_a_loop_that_gives_up_is_a_failed_workflow_span(spans: InMemorySpanExporter) -> None:
    """The loop span of a loop that ends in failure has the last category as error.type."""
    policy = RecoveryPolicy(max_retries=0)
    outcome = await recover("Go", child=uses_a_flaky_tool, policy=policy, limits=Limits(timeout=5))
    loop = by_name(spans)["invoke_workflow recover"]
    assert outcome.result.failure is not None
    assert (loop.attributes or {})["error.type"] == "tool_error"
    assert loop.status.status_code is StatusCode.ERROR


async def test_a_cancelled_attempt_still_ends_its_span(spans: InMemorySpanExporter) -> None:
    """An attempt cancelled from above ends its span, marked by the cancellation."""
    with anyio.move_on_after(0.1):
        await Supervisor(sleeps).delegate("Wait", timeout=5)
    span = by_name(spans)["invoke_agent sleeps"]
    assert (span.attributes or {})["error.type"] == "asyncio.exceptions.CancelledError"
    assert span.status.status_code is StatusCode.ERROR


def get_plddt(protein_id: str) -> str:
    """Mean pLDDT of a protein's AlphaFold model."""
    return f"{protein_id}: 75.05"


@pytest.fixture
async def client_for() -> AsyncIterator[Any]:
    """Real SDK clients pointed at a fake server, closed after the test."""
    clients: list[anthropic.AsyncAnthropic] = []

    def make(api: MessagesAPI) -> anthropic.AsyncAnthropic:
        client = anthropic.AsyncAnthropic(base_url=api.url, api_key="test-key", max_retries=0)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


async def test_model_and_tool_calls_of_the_anthropic_child_are_child_spans(
    spans: InMemorySpanExporter, client_for: Any
) -> None:
    """Each Messages API call is a `chat <model>` client span with the provider, the
    model and the usage; each tool_use an execute_tool span; both under the attempt."""
    script = [
        message(
            [tool_use("get_plddt", {"protein_id": "P04637"})],
            stop_reason="tool_use",
            usage={"input_tokens": 100, "cache_read_input_tokens": 50, "output_tokens": 20},
        ),
        message([text("Medium."), tool_use("finish", {"result": "75"})], stop_reason="tool_use"),
    ]
    with MessagesAPI(script) as api:
        port = int(api.url.rsplit(":", 1)[1])
        child = AnthropicChild(tools=[get_plddt], client=client_for(api), model="claude-sonnet-5-5")
        result = await Supervisor(child).delegate("How reliable is P04637?", timeout=5)
    assert result.ok
    finished = spans.get_finished_spans()
    agent = next(span for span in finished if span.name == "invoke_agent AnthropicChild")
    chats = [span for span in finished if span.name == "chat claude-sonnet-5-5"]
    tool = next(span for span in finished if span.name == "execute_tool get_plddt")
    assert len(chats) == 2
    assert {parent_of(span) for span in [*chats, tool]} == {span_id(agent)}
    assert chats[0].end_time <= tool.start_time <= tool.end_time <= chats[1].start_time  # type: ignore[operator]
    first = dict(chats[0].attributes or {})
    assert chats[0].kind is SpanKind.CLIENT
    assert {key: first[key] for key in first if not key.startswith("gen_ai.response.id")} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.system": "anthropic",
        "gen_ai.request.model": "claude-sonnet-5-5",
        "server.address": "127.0.0.1",
        "server.port": port,
        "gen_ai.response.model": DEFAULT_MODEL,  # what the server says answered
        "gen_ai.response.finish_reasons": ("tool_use",),
        "gen_ai.usage.input_tokens": 150,
        "gen_ai.usage.output_tokens": 20,
        "gen_ai.usage.cache_read.input_tokens": 50,
    }
    assert (agent.attributes or {})["gen_ai.usage.input_tokens"] == 150 + 10


async def test_a_client_that_traces_its_own_calls_gets_no_second_chat_span(
    spans: InMemorySpanExporter,
) -> None:
    """Where the SDK makes a span per call (to the provider lyra uses), lyra adds none:
    each model call, and its usage, is counted once, under the attempt."""
    provider = tracing._provider
    with MessagesAPI([message([tool_use("finish", {"result": "done"})])]) as api:
        client = anthropic.AsyncAnthropic(
            base_url=api.url,
            api_key="test-key",
            max_retries=0,
            open_telemetry={"tracer_provider": provider},
        )
        async with client:
            result = await Supervisor(AnthropicChild(client=client)).delegate("Go", timeout=5)
    assert result.ok
    finished = spans.get_finished_spans()
    chats = [s for s in finished if (s.attributes or {}).get("gen_ai.operation.name") == "chat"]
    assert [s.name for s in chats] == ["anthropic.messages.create"]  # the SDK's, alone
    agent = next(s for s in finished if s.name == "invoke_agent AnthropicChild")
    assert parent_of(chats[0]) == span_id(agent)


async def test_a_failed_model_call_is_a_failed_chat_span(
    spans: InMemorySpanExporter, client_for: Any
) -> None:
    """An API error marks the chat span with the SDK's exception class; the attempt
    span carries the failure category."""
    with MessagesAPI([rate_limited(7)]) as api:
        child = AnthropicChild(client=client_for(api), model="claude-sonnet-5-5")
        await Supervisor(child).delegate("Go", timeout=5)
    named = by_name(spans)
    chat = named["chat claude-sonnet-5-5"]
    assert (chat.attributes or {})["error.type"] == "anthropic.RateLimitError"
    assert chat.status.status_code is StatusCode.ERROR
    assert (named["invoke_agent AnthropicChild"].attributes or {})["error.type"] == "tool_error"


async def test_without_a_tracer_provider_the_hooks_step_aside() -> None:
    """With lyra on the global provider, which nobody set, tracing is off and each
    hook hands back the hooked function's own coroutine: no span, no wrapper."""
    tracing.configure()
    assert not tracing.enabled()

    async def work(*args: Any) -> tuple[None, str]:
        return None, "ok"

    for hook in (tracing.attempt, tracing.model_call("x", tokens=len)):
        coroutine = hook(work)(Summariser(), "p", None)
        assert coroutine.cr_code is work.__code__
        assert await coroutine == (None, "ok")
    assert tracing.tool("lookup", lookup) is lookup
    assert (await Supervisor(gatherer).delegate("Gather", timeout=5)).ok


def test_work_begun_while_tracing_still_runs_when_tracing_is_turned_off(
    spans: InMemorySpanExporter,
) -> None:
    """A tool wrapped while tracing was on runs as it is once configure() turned
    tracing off: no span, no error."""
    wrapped = tracing.tool("lookup", lookup)
    assert wrapped is not lookup
    tracing.configure()
    assert wrapped("P04637") == "P04637: 393 residues"
    assert spans.get_finished_spans() == ()


def test_configuring_without_the_api_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the OpenTelemetry API, configure() says which extra to install."""
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)
    with pytest.raises(ConfigurationError, match=re.escape(install_hint("otel"))):
        tracing.configure(tracer_provider=TracerProvider())
    assert not tracing.enabled()


TESTS = Path(__file__).resolve().parent


def run_python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (the tests' fakes importable); its stdout."""
    env = {"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_lyra_follows_a_global_provider_set_after_it_was_imported() -> None:
    """The README's way: the application sets the global tracer provider (after
    importing lyra) and lyra's spans reach its exporter."""
    code = """
import lyra
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

async def echo(prompt, ctx):
    return prompt

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
lyra.delegate_task("before", child=echo)
trace.set_tracer_provider(provider)
lyra.delegate_task("after", child=echo)
print([span.name for span in exporter.get_finished_spans()])
"""
    assert run_python(code).strip() == "['invoke_agent echo']"


@pytest.mark.slow
def test_the_core_imports_neither_opentelemetry_nor_mcp() -> None:
    """Delegating, recovering and running tools import no OpenTelemetry or MCP module."""
    code = """
import sys
import lyra
from fakes.children import spender

async def tooled(prompt, ctx):
    return await ctx.tool("len", len, prompt) and "ok"

lyra.delegate_task("x", child=spender)
lyra.delegate_with_retry("x", child=tooled)
print(sorted(name for name in sys.modules if name.startswith(("opentelemetry", "mcp"))))
"""
    assert run_python(code).strip() == "[]"


class _BrokenProcessor:
    """A span processor that raises where it is told to (as a buggy exporter's does)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.where == "on_start":
            raise RuntimeError("processor broke on start")

    def on_end(self, span: Any) -> None:
        if self.where == "on_end":
            raise RuntimeError("processor broke on end")

    def _on_ending(self, span: Any) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@pytest.mark.parametrize("where", ["on_start", "on_end"])
async def test_a_span_processor_that_raises_never_costs_a_report(where: str) -> None:
    """A processor raising in on_start or on_end leaves delegations and recovery loops
    intact (their reports come back) and becomes one tracing_failed warning."""
    from structlog.testing import capture_logs

    provider = TracerProvider()
    provider.add_span_processor(_BrokenProcessor(where))  # type: ignore[arg-type]
    tracing.configure(tracer_provider=provider)
    tracing._reported.clear()
    try:
        with capture_logs() as logs, record_waits():
            plain = await Supervisor(gatherer).delegate("Analyze P04637", timeout=5)
            looped = await recover("Analyze P04637", child=gatherer, limits=Limits(timeout=5))
    finally:
        tracing.configure()
    assert plain.ok
    assert plain.report.startswith("done without missing_context")
    assert looped.result.ok
    failures = [e for e in logs if e["event"] == "tracing_failed"]
    expected = {"on_start": "start_span", "on_end": "end"}[where]
    assert [e["where"] for e in failures] == [expected]  # once, however many spans failed
    assert f"processor broke {where.replace('_', ' ')}" in failures[0]["error"]
