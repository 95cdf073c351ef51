"""PydanticAIChild: real pydantic-ai agents under lyra's limits, with the framework's own
FunctionModel as the model, and its AnthropicModel on the real anthropic SDK against the
local fake Messages API for provider errors."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import anthropic
import anyio
import anyio.lowlevel
import anyio.to_thread
import pydantic
import pydantic_ai
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, ModelRetry, RunContext, UsageLimits
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelContextWindowExceededError,
    ModelHTTPError,
    RunTimedOut,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.usage import RequestUsage

from fakes.messages_api import MessagesAPI, Reply, error, message, overloaded, rate_limited, text
from lyra import (
    Budget,
    ChildContext,
    ChildRef,
    Limits,
    RecoveryPolicy,
    Supervisor,
    Task,
    adelegate_with_retry,
    parse_report,
    tracing,
)
from lyra.children import AnthropicChild, Price
from lyra.children.pydantic_ai import HISTORY, PydanticAIChild
from lyra.delegation._foreign import Kind, describe
from lyra.recovery import record_waits, recover

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def no_real_sleeps() -> Iterator[list[float]]:
    """Recovery waits are recorded, not slept."""
    with record_waits() as waits:
        yield waits


# -- a scripted model: pydantic-ai's FunctionModel serving responses in order ---------------


def call(tool: str, *, tokens: int = 110, **args: Any) -> ModelResponse:
    """A response asking for one tool call (``tokens``: 10 of them output)."""
    return ModelResponse(
        parts=[ToolCallPart(tool, args)],
        usage=RequestUsage(input_tokens=tokens - 10, output_tokens=10),
    )


def answer(content: str, *, tokens: int = 220, finish_reason: Any = None) -> ModelResponse:
    """A final text response."""
    return ModelResponse(
        parts=[TextPart(content)],
        usage=RequestUsage(input_tokens=tokens - 20, output_tokens=20),
        finish_reason=finish_reason,
    )


@dataclass
class Slow:
    """A response served after ``seconds``."""

    seconds: float
    response: ModelResponse


class Script:
    """The model's side of the conversation: scripted responses served in order (an
    exception is raised), then ``then`` for ever; every request's messages and settings
    are recorded."""

    def __init__(self, *turns: ModelResponse | Slow | Exception, then: Any = None) -> None:
        self.turns, self.then = list(turns), then
        self.requests: list[list[ModelMessage]] = []
        self.settings: list[dict[str, Any]] = []

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        self.settings.append(dict(info.model_settings or {}))
        index = len(self.requests) - 1
        turn = self.turns[index] if index < len(self.turns) else self.then
        if turn is None:
            raise AssertionError(f"request #{index + 1} is beyond the script")
        if isinstance(turn, Slow):
            await anyio.sleep(turn.seconds)
            return turn.response
        if isinstance(turn, Exception):
            raise turn
        return turn  # type: ignore[no-any-return]


def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def scripted_agent(script: Script, **options: Any) -> Agent[ChildContext, Any]:
    """An agent on the script, its deps the ChildContext, with the ``lookup`` tool."""
    agent: Agent[ChildContext, Any] = Agent(
        FunctionModel(script, model_name="scripted"), deps_type=ChildContext, **options
    )
    agent.tool_plain(lookup)
    return agent


def returned(messages: Sequence[ModelMessage]) -> list[Any]:
    """What the tool calls returned, in the order of a conversation."""
    return [
        part.content
        for message in messages
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def prompts(request: Sequence[ModelMessage]) -> list[str]:
    """The user prompts a model request carried."""
    return [
        str(part.content)
        for message in request
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


async def delegate(child: Any, *, timeout: float = 5.0, **options: Any) -> Any:
    budget = options.pop("budget", None)
    return await Supervisor(child, budget=budget).delegate(
        "Triage issue 42", timeout=timeout, **options
    )


# -- the run ---------------------------------------------------------------------------------


async def test_structured_output_becomes_json_text() -> None:
    """An agent with an output type returns its model as JSON text."""

    class Verdict(pydantic.BaseModel):
        duplicate_of: int
        reason: str

    script = Script(
        ModelResponse(parts=[ToolCallPart("final_result", {"duplicate_of": 7, "reason": "same"})])
    )
    child = PydanticAIChild(scripted_agent(script), output_type=Verdict)
    result = await delegate(child)
    assert json.loads(result.output) == {"duplicate_of": 7, "reason": "same"}


@pytest.mark.parametrize("flag", ["ask_tool", "show_limits"])
def test_a_flag_that_is_no_bool_is_refused_when_the_child_is_built(flag: str) -> None:
    """A flag of the wrong kind (``"no"``, truthy) turned the feature on: every framework
    child refuses it as it is built, naming it."""
    with pytest.raises(TypeError, match=rf"{flag}= must be True or False; got 'no'"):
        PydanticAIChild(Agent("test"), **{flag: "no"})


async def test_the_run_options_reach_agent_run() -> None:
    """model_settings, instructions and deps given to the child reach the run as given."""
    script = Script(answer("ok"))
    agent: Agent[dict[str, str], str] = Agent(FunctionModel(script), deps_type=dict)
    seen: list[Any] = []

    @agent.instructions
    def from_deps(ctx: RunContext[dict[str, str]]) -> str:
        seen.append(ctx.deps)
        return "Be brief."

    child = PydanticAIChild(
        agent, deps={"team": "infra"}, model_settings={"temperature": 0.1}, instructions="No jokes."
    )
    result = await delegate(child)
    assert result.ok
    assert seen == [{"team": "infra"}]
    assert script.settings[0]["temperature"] == 0.1
    request = script.requests[0][0]
    assert isinstance(request, ModelRequest)
    assert "Be brief." in (request.instructions or "")
    assert "No jokes." in (request.instructions or "")


def test_deps_and_make_deps_exclude_each_other() -> None:
    """The deps are given as they are or built per attempt, not both."""
    with pytest.raises(ValueError, match="not both"):
        PydanticAIChild(Agent("test"), deps=1, make_deps=lambda ctx: 2)


# -- how pydantic-ai's own endings are classified ----------------------------------------------


def exhausting_agent(script: Script) -> Agent[ChildContext, Any]:
    agent = scripted_agent(script, retries=1)

    @agent.tool_plain
    def flaky() -> str:
        """Always asks the model to try again."""
        raise ModelRetry("try again")

    return agent


def failing_agent(script: Script) -> Agent[ChildContext, Any]:
    agent = scripted_agent(script)

    @agent.tool_plain
    def fetch(url: str) -> str:
        """Fetch a page."""
        raise ConnectionResetError("connection reset by peer")

    return agent


ENDINGS: dict[str, tuple[Any, tuple[str, str, bool]]] = {
    "tool_error": (  # a tool whose retries ran out
        lambda: exhausting_agent(Script(call("flaky"), call("flaky"))),
        ("tool_error", "unknown", True),
    ),
    "invalid_task": (  # the model refused: a result to pydantic-ai
        lambda: scripted_agent(Script(answer("I can't help", finish_reason="content_filter"))),
        ("invalid_task", "data", False),
    ),
    "partial": (  # a tool's connection lost after a completed step
        lambda: failing_agent(Script(call("lookup", q="a"), call("fetch", url="x"))),
        ("partial", "connection", True),
    ),
}


@pytest.mark.parametrize("case", ENDINGS, ids=list(ENDINGS))
async def test_pydantic_ais_own_endings_are_classified(case: str) -> None:
    """A tool's exhausted ModelRetry budget, a content_filter finish and a tool's lost
    connection after progress (the contract suite has the model-side cases)."""
    build, expected = ENDINGS[case]
    failure = (await delegate(PydanticAIChild(build()))).failure
    assert (failure.category, failure.error_type, failure.suggested_retry) == expected


async def test_a_refusal_is_told_by_its_message_not_the_response_body() -> None:
    """pydantic-ai's errors append the response's whole JSON body to their text: the
    report tells a refusal by its message (the body was 3,300 characters a refusal)."""
    script = Script(answer("I can't help", finish_reason="content_filter"))
    failure = (await delegate(PydanticAIChild(scripted_agent(script)))).failure
    assert failure.message == (
        "ContentFilterError: The model refused the request (finish_reason content_filter)"
    )
    assert "body" not in failure.evidence


async def test_output_cut_off_at_max_tokens_is_partial() -> None:
    """Text output ending at the token limit, a result to pydantic-ai, is partial here."""
    script = Script(answer("The root cause is", finish_reason="length"))
    result = await delegate(PydanticAIChild(scripted_agent(script)))
    assert (result.failure.category, result.failure.suggested_retry) == ("partial", True)
    assert "max_tokens" in result.failure.message


async def test_tool_calls_waiting_for_approval_are_missing_context() -> None:
    """An agent that ends waiting for a human to approve a tool call is blocked on it."""
    script = Script(call("delete_branch", name="main"))
    agent = scripted_agent(script, output_type=[str, pydantic_ai.DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def delete_branch(name: str) -> str:
        """Delete a branch."""
        return "deleted"

    result = await delegate(PydanticAIChild(agent))
    assert result.failure.category == "missing_context"
    assert "delete_branch" in result.failure.blocked_on


async def test_a_run_the_agent_cancels_itself_is_partial_and_keeps_its_work() -> None:
    """A tool that cancels its own run (RunContext.cancel) ends it unfinished: partial,
    with the conversation so far kept for a continuation."""
    agent = scripted_agent(Script(call("lookup", q="a"), call("give_up"), answer("never")))

    @agent.tool
    async def give_up(ctx: RunContext[ChildContext]) -> str:
        """Stop the run."""
        ctx.cancel()
        await anyio.lowlevel.checkpoint()
        return "unreachable"

    outcome = await recover(
        "x",
        child=PydanticAIChild(agent),
        policy=RecoveryPolicy(max_retries=0),
        limits=Limits(timeout=5),
    )
    failure = outcome.result.failure
    assert (failure.category, failure.suggested_retry) == ("partial", True)
    assert "RunCancelled" in failure.evidence
    kept = pydantic_ai.ModelMessagesTypeAdapter.validate_python(outcome.state[HISTORY])
    assert returned(kept)[0] == "found a"


async def test_a_block_the_tool_swallows_still_ends_the_run() -> None:
    """ctx.block inside a tool holds even when the tool catches it: no further request."""
    script = Script(call("careful"), answer("all fine"))
    agent = scripted_agent(script)

    @agent.tool
    def careful(ctx: RunContext[ChildContext]) -> str:
        """Check the issue."""
        try:
            ctx.deps.block("invalid_task", "Issue 42 asks for two contradicting things")
        except Exception:  # noqa: BLE001 - what a careless tool does
            return "fine"

    result = await delegate(PydanticAIChild(agent))
    assert result.failure.category == "invalid_task"
    assert len(script.requests) == 1


async def test_the_failing_tool_is_named_in_the_evidence() -> None:
    """An exception a tool raised reaches the classification unchanged, with the tool named."""
    result = await delegate(PydanticAIChild(failing_agent(Script(call("fetch", url="x")))))
    failure = result.failure
    assert (failure.category, failure.tool_usage) == ("tool_error", {"fetch": 1})
    assert "in tool 'fetch'" in failure.evidence


# -- provider errors: pydantic-ai's AnthropicModel on the real SDK, against the fake server ----


@pytest.fixture
async def anthropic_agent() -> AsyncIterator[Any]:
    """Agents on AnthropicModel with real SDK clients pointed at a fake server."""
    clients: list[anthropic.AsyncAnthropic] = []

    def make(api_url: str) -> Agent[ChildContext, str]:
        client = anthropic.AsyncAnthropic(base_url=api_url, api_key="test", max_retries=0)
        clients.append(client)
        model = AnthropicModel(
            "claude-sonnet-4-6", provider=AnthropicProvider(anthropic_client=client)
        )
        # A max_tokens below the SDK's non-streaming ceiling: the fake does not stream.
        return Agent(model, deps_type=ChildContext, model_settings={"max_tokens": 1024})

    yield make
    for client in clients:
        await client.close()


@pytest.mark.parametrize(
    ("reply", "category", "retryable", "error_type"),
    [
        (rate_limited(7), "tool_error", True, "rate_limit"),
        (overloaded(), "tool_error", True, "rate_limit"),
        (error(401, "authentication_error", "bad key"), "tool_error", False, "auth"),
        (error(500, "api_error", "boom"), "tool_error", True, "unknown"),
        (error(503, "api_error", "unavailable"), "tool_error", True, "unknown"),
        (error(400, "invalid_request_error", "bad"), "invalid_task", False, "data"),
        (error(404, "not_found_error", "model: nope"), "tool_error", False, "not_found"),
        (message([text("no")], stop_reason="refusal"), "invalid_task", False, "data"),
        (message([text("cut")], stop_reason="max_tokens"), "partial", True, "data"),
    ],
    ids=["429", "529", "401", "500", "503", "400", "404", "refusal", "max_tokens"],
)
async def test_provider_outcomes_are_classified(
    anthropic_agent: Any, reply: Reply, category: str, retryable: bool, error_type: str
) -> None:
    """Real HTTP errors and stop reasons through pydantic-ai's AnthropicModel land in the
    categories lyra's own Anthropic child gives them."""
    with MessagesAPI([reply]) as api:
        result = await delegate(PydanticAIChild(anthropic_agent(api.url)))
    failure = result.failure
    assert (failure.category, failure.suggested_retry, failure.error_type) == (
        category,
        retryable,
        error_type,
    )


async def test_a_429_keeps_its_retry_after(anthropic_agent: Any) -> None:
    """The retry-after of a real 429 reaches the failure and its suggestion."""
    with MessagesAPI([rate_limited(7)]) as api:
        result = await delegate(PydanticAIChild(anthropic_agent(api.url)))
    assert result.failure.retry_after == 7.0
    assert "7s" in result.failure.suggested_actions[0]


async def test_a_refused_connection_is_a_transient_tool_error(anthropic_agent: Any) -> None:
    """No server listening: the SDK's connection error, wrapped by pydantic-ai, is retryable."""
    result = await delegate(PydanticAIChild(anthropic_agent("http://127.0.0.1:9")))
    assert (result.failure.category, result.failure.error_type) == ("tool_error", "connection")
    assert result.failure.suggested_retry


async def test_cost_comes_from_the_framework_or_lyras_price_table(anthropic_agent: Any) -> None:
    """A model genai-prices knows is charged pydantic-ai's cost; one it does not, lyra's
    price table (prices=); tokens include the cache's."""
    usage = {"input_tokens": 1000, "output_tokens": 100, "cache_read_input_tokens": 500}
    with MessagesAPI([message("done", usage=usage)]) as api:
        priced = await delegate(PydanticAIChild(anthropic_agent(api.url)))
    assert (priced.usage.input_tokens, priced.usage.output_tokens) == (1500, 100)
    assert priced.usage.cost_usd == pytest.approx((1000 * 3 + 100 * 15 + 500 * 0.3) / 1e6)

    script = Script(answer("ok", tokens=1_000_020))
    child = PydanticAIChild(scripted_agent(script), prices={"scripted": Price(0.5, 1.0)})
    table = await delegate(child)
    assert table.usage.cost_usd == pytest.approx(0.5 + 20 / 1e6)


# -- limits inside the run ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "budget", "capped"),
    [
        ({"max_tokens": 4096}, 5000, [False, True]),
        ({}, 3000, [True, True]),
        ({}, 100_000, [False, False]),  # lyra never raises it past what any model allows
    ],
    ids=["own-max_tokens", "none-little-left", "none-plenty-left"],
)
async def test_a_token_budget_caps_max_tokens(
    settings: dict[str, int], budget: int, capped: list[bool]
) -> None:
    """A request's max_tokens and its input (estimated) are at most what the token
    budget has left; with room, the request's own max_tokens (or none) stands."""
    from lyra.children._meter import REQUEST_OVERHEAD

    script = Script(call("lookup", q="a", tokens=2500), answer("ok"))
    child = PydanticAIChild(scripted_agent(script), model_settings=settings)  # type: ignore[arg-type]
    await delegate(child, budget=Budget(max_tokens=budget))
    sent = [s.get("max_tokens") for s in script.settings]
    assert [value != settings.get("max_tokens") for value in sent] == capped
    for value, left in zip(sent, (budget, budget - 2500), strict=True):
        assert value is None or value <= left - REQUEST_OVERHEAD


async def test_a_token_budget_measures_any_text_a_tool_returns() -> None:
    """Under a token budget each request's input is measured before it is sent: text
    that is not ASCII counts by its UTF-8 bytes, and a lone surrogate (bytes a tool
    decoded leniently) counts too, where encoding it would raise inside the hook."""
    from lyra.children._meter import text_bytes

    assert [text_bytes(t) for t in ("abc", "é" * 10, "\ud800", "")] == [3, 20, 3, 0]

    def odd(q: str) -> str:
        """Look something up."""
        return "r\u00e9sum\u00e9 \udcff"

    script = Script(call("odd", q="a"), answer("ok"))
    agent: Agent[ChildContext, Any] = Agent(
        FunctionModel(script, model_name="scripted"), deps_type=ChildContext
    )
    agent.tool_plain(odd)
    result = await delegate(PydanticAIChild(agent), budget=Budget(max_tokens=10_000))
    assert result.status == "completed", result.report


async def test_running_out_of_tool_calls_is_never_a_success() -> None:
    """pydantic-ai's tool_calls_limit (beside its request_limit, in the contract suite)
    ends the run as timeout / budget, with evidence."""
    script = Script(then=call("lookup", q="again"))
    limits = UsageLimits(tool_calls_limit=1)
    result = await delegate(PydanticAIChild(scripted_agent(script), usage_limits=limits))
    failure = result.failure
    assert (failure.category, failure.error_type) == ("timeout", "budget")
    assert "framework's own limit" in failure.evidence
    assert "tool_calls_limit of 1" in failure.message
    assert failure.suggested_retry  # a continuation starts a fresh run, and work was done


@pytest.mark.parametrize("where", ["tool", "instructions"])
async def test_stuck_sync_code_does_not_hold_the_deadline(where: str) -> None:
    """Sync code of the agent's (a tool, an instructions function) blocked in its worker
    thread is abandoned at the deadline -- pydantic-ai would wait for the thread outside a
    tool's task -- and the thread's work ends when the code returns."""
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()

    def stuck() -> str:
        entered.set()
        release.wait(10)
        finished.set()
        return "released"

    agent = scripted_agent(Script(call("stuck"), answer("done")))
    if where == "tool":
        agent.tool_plain(stuck)
    else:
        agent.instructions(stuck)
    started = time.perf_counter()
    try:  # (a deadline long enough for a loaded machine's run to reach the code)
        result = await delegate(PydanticAIChild(agent), timeout=1.0)
        assert time.perf_counter() - started < 3.0
        assert result.failure.category == "timeout"
        assert entered.is_set()
        assert not finished.is_set()
    finally:
        release.set()
    assert await anyio.to_thread.run_sync(finished.wait, 2)


async def test_stream_events_are_heartbeats() -> None:
    """A streamed response slower than the idle timeout in total, but never silent for
    that long, is not idle: each event from the event stream handler is progress."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for word in ["The ", "issue ", "is ", "a ", "duplicate ", "of ", "#7."]:
            await anyio.sleep(0.05)
            yield word

    seen: list[Any] = []

    async def handler(ctx: RunContext[Any], events: Any) -> None:
        async for event in events:
            seen.append(event)

    agent: Agent[ChildContext, str] = Agent(FunctionModel(stream_function=stream))
    child = PydanticAIChild(agent, event_stream_handler=handler)
    result = await delegate(child, idle_timeout=0.2)
    assert result.output == "The issue is a duplicate of #7."
    assert seen


# -- the context in the tools: nested delegation --------------------------------------------------


@dataclass
class Deps:
    """A user's own deps, holding the lyra context beside its own things."""

    team: str
    lyra: ChildContext


def test_an_agent_with_deps_of_its_own_type_is_refused_without_them() -> None:
    """deps_type=Deps with neither deps= nor make_deps= is a TypeError at construction
    (naming both ways), not an AttributeError in a tool after a paid model call."""
    agent: Agent[Deps, str] = Agent(FunctionModel(Script(answer("ok"))), deps_type=Deps)
    with pytest.raises(TypeError, match=r"deps_type is Deps.*deps=Deps\(\.\.\.\).*make_deps="):
        PydanticAIChild(agent)
    PydanticAIChild(agent, make_deps=lambda ctx: Deps(team="infra", lyra=ctx))
    PydanticAIChild(Agent(FunctionModel(Script(answer("ok"))), deps_type=ChildContext))


async def test_make_deps_hold_the_context_and_a_grandchild_shares_the_budget() -> None:
    """Deps built per attempt hold the context; a grandchild on another framework (lyra's
    Anthropic child on the fake Messages API) draws on the same budget."""
    script = Script(call("research", topic="flaky test"), answer("done"))
    agent: Agent[Deps, str] = Agent(FunctionModel(script), deps_type=Deps)
    usage = {"input_tokens": 300, "output_tokens": 50}

    with MessagesAPI([message("It is a known race.", usage=usage)]) as api:
        client = anthropic.AsyncAnthropic(base_url=api.url, api_key="test", max_retries=0)

        @agent.tool
        async def research(ctx: RunContext[Deps], topic: str) -> str:
            """Research a topic."""
            expert = AnthropicChild(client=client, model="claude-sonnet-4-6")
            found = await ctx.deps.lyra.delegate(f"{ctx.deps.team}: {topic}", child=expert)
            return found.report

        child = PydanticAIChild(agent, make_deps=lambda ctx: Deps(team="infra", lyra=ctx))
        result = await delegate(child, budget=Budget(max_tokens=10_000))
        await client.close()
    assert result.ok
    assert api.requests[0]["messages"][0]["content"] == "infra: flaky test"
    assert result.usage.tokens == 350 + 110 + 220  # the grandchild's and the agent's own
    assert result.usage.turns == 3


async def test_parallel_grandchildren_never_overshoot_a_limit_charged_ahead() -> None:
    """pydantic-ai-harness #696: one response asks for 16 tool calls at once, each tool
    delegating to a grandchild agent that charges its turn ahead; under max_turns=9 the
    turns charged stop at 9: the charge that would be the 10th is refused, and the
    account running out ends the whole tree at once."""
    fan_out = ModelResponse(parts=[ToolCallPart("investigate", {"n": n}) for n in range(16)])
    parent_script = Script(fan_out, answer("summary"))
    grandchild_script = Script(then=Slow(0.01, answer("one finding", tokens=20)))
    grandchild = PydanticAIChild(scripted_agent(grandchild_script))
    agent = scripted_agent(parent_script)

    @agent.tool
    async def investigate(ctx: RunContext[ChildContext], n: int) -> str:
        """Investigate one lead."""
        found = await ctx.deps.delegate(f"lead {n}", child=grandchild, timeout=2)
        return found.output or "nothing"

    supervisor = Supervisor(PydanticAIChild(agent), budget=Budget(max_turns=9))
    result = await supervisor.delegate("Investigate every lead", timeout=5)
    assert supervisor.account is not None
    assert supervisor.account.turns == 9  # 1 for the parent's request, 8 for grandchildren
    assert len(grandchild_script.requests) == 8
    assert result.failure.error_type == "budget"
    assert "max_turns=9 reached: 9 turns used, 1 more refused" in result.failure.evidence
    assert result.usage.turns == 9


# -- recovery ------------------------------------------------------------------------------------


async def test_the_continuation_resumes_the_first_attempts_conversation() -> None:
    """After a connection lost mid-run, the recovery loop's next attempt hands pydantic-ai
    the first attempt's messages: its model request carries the tool results already
    fetched and the continuation prompt, and the run completes."""
    script = Script(
        call("lookup", q="logs"),
        ConnectionResetError("connection reset by peer"),
        answer("Fixed by #7"),
    )
    outcome = await recover(
        "Triage issue 42",
        child=PydanticAIChild(scripted_agent(script)),
        policy=RecoveryPolicy(max_retries=2),
        limits=Limits(timeout=5),
    )
    assert [a.strategy for a in outcome.attempts] == ["initial", "continuation"]
    assert outcome.result.output == "Fixed by #7"
    resumed = script.requests[2]
    assert returned(resumed) == ["found logs"]  # fetched by attempt 1, not fetched again
    said = prompts(resumed)
    assert said[0] == "Triage issue 42"
    assert "Already completed (do not redo):" in said[-1]
    assert "Ran lookup" in said[-1]
    assert HISTORY not in outcome.state  # a success clears it


async def test_the_frameworks_own_limit_is_continued_with_adelegate_with_retry() -> None:
    """A run that used up pydantic-ai's request_limit mid-task is retried as a
    continuation (adelegate_with_retry) that resumes the conversation and completes."""
    script = Script(
        call("lookup", q="a"), call("lookup", q="b"), call("lookup", q="c"), answer("Done")
    )
    child = PydanticAIChild(scripted_agent(script), usage_limits=UsageLimits(request_limit=2))
    report = await adelegate_with_retry("Triage issue 42", child=child, base_timeout=5)
    parsed = parse_report(report)
    assert (parsed.status, parsed.attempt) == ("completed", 2)
    assert report.startswith("Done")
    resumed = script.requests[2]
    assert returned(resumed) == ["found a", "found b"]
    assert len(prompts(resumed)) == 2


async def test_a_budget_stop_keeps_the_history_as_json_data() -> None:
    """A run the tree's budget stopped leaves its conversation in ctx.state as JSON data
    that pydantic-ai reads back: what the next attempt of the task would resume."""
    script = Script(then=call("lookup", q="again", tokens=600))
    outcome = await recover(
        "Triage issue 42",
        child=PydanticAIChild(scripted_agent(script)),
        limits=Limits(timeout=5, budget=Budget(max_tokens=1000)),
    )
    assert outcome.result.failure.error_type == "budget"
    kept = outcome.state[HISTORY]
    assert json.loads(json.dumps(kept)) == kept
    messages = pydantic_ai.ModelMessagesTypeAdapter.validate_python(kept)
    assert [type(m).__name__ for m in messages[:3]] == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
    ]
    assert prompts(messages) == ["Triage issue 42"]


# -- traces ---------------------------------------------------------------------------------------


@pytest.fixture
def spans() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    """An SDK provider with an in-memory exporter, given to lyra (and by the test to
    pydantic-ai)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(tracer_provider=provider)
    yield exporter, provider
    tracing.configure()
    provider.shutdown()


async def test_the_frameworks_spans_nest_under_lyras_attempt_span(
    spans: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """pydantic-ai's agent, model and tool spans are children of lyra's invoke_agent span;
    lyra makes no model or tool span of its own for this child, so each call is one span
    and the tokens on the model spans are exactly what lyra charged."""
    exporter, provider = spans
    script = Script(call("lookup", q="a"), answer("ok"))
    instrumented = Instrumentation(
        settings=pydantic_ai.InstrumentationSettings(tracer_provider=provider)
    )
    child = PydanticAIChild(scripted_agent(script, name="triage"), capabilities=[instrumented])
    result = await delegate(child)
    finished = exporter.get_finished_spans()
    by_name = {span.name: span for span in finished}
    attempt, run = by_name["invoke_agent PydanticAIChild"], by_name["invoke_agent triage"]
    assert attempt.parent is None
    assert run.parent is not None
    assert attempt.context is not None
    assert run.parent.span_id == attempt.context.span_id
    chats = [span for span in finished if span.name.startswith("chat ")]
    tools = [span for span in finished if span.name.startswith("execute_tool ")]
    assert (len(chats), len(tools)) == (2, 1)
    assert run.context is not None
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in chats)
    assert {s.instrumentation_scope.name for s in chats + tools} == {"pydantic-ai"}
    assert sum(tokens(span) for span in chats) == result.usage.tokens == tokens(attempt)


def tokens(span: Any) -> int:
    """Input plus output tokens a span records."""
    attributes = dict(span.attributes)
    return int(attributes["gen_ai.usage.input_tokens"] + attributes["gen_ai.usage.output_tokens"])


# -- the extra, and every exception class mapped ---------------------------------------------------


def _with_cause(exc: BaseException, cause: BaseException) -> BaseException:
    exc.__cause__ = cause
    return exc


def _connection_error() -> BaseException:
    import httpx2

    return anthropic.APIConnectionError(request=httpx2.Request("POST", "http://127.0.0.1/"))


@pytest.mark.parametrize(
    ("exc", "kind", "error_type", "source"),
    [
        (ModelHTTPError(503, "m"), Kind.TRANSIENT, "unknown", "HTTP 503"),
        (ModelHTTPError(403, "m"), Kind.PERMANENT, "auth", "HTTP 403"),
        (
            _with_cause(ModelAPIError("m", "lost"), _connection_error()),
            Kind.TRANSIENT,
            "connection",
            "anthropic.APIConnectionError",
        ),
        (ModelAPIError("m", "odd"), Kind.UNKNOWN, "unknown", "pydantic_ai.ModelAPIError"),
        (
            UnexpectedModelBehavior("Tool 'lookup' exceeded max retries count of 1"),
            Kind.TRANSIENT,
            "unknown",
            "a tool's retries ran out",
        ),
        (UnexpectedModelBehavior("Received empty model response"), Kind.TRANSIENT, "data", ""),
        (RunTimedOut("the run's timeout passed"), Kind.BUDGET, "timeout", "RunTimedOut"),
        (  # by its class, whatever the provider's words (was invalid_task / data: no recovery)
            ModelContextWindowExceededError("m", "request exceeds the model's window"),
            Kind.CONTEXT_OVERFLOW,
            "context_overflow",
            "ModelContextWindowExceededError",
        ),
    ],
    ids=[
        "http-503",
        "http-403",
        "api-error-by-cause",
        "api-error-bare",
        "tool-retries",
        "output",
        "run-timeout",
        "context-window",
    ],
)
def test_wrapping_errors_are_refined(
    exc: BaseException, kind: Kind, error_type: str, source: str
) -> None:
    """A bare HTTP error is read by its status, a bare API error by the provider error it
    wraps, an exhausted tool by the framework's words."""
    cause = describe(exc)
    assert (cause.kind, cause.error_type) == (kind, error_type)
    assert source in cause.source


def test_a_bare_http_error_keeps_its_retry_after() -> None:
    """The framework's own reading of retry-after reaches the cause."""
    exc = ModelHTTPError(429, "m", headers={"Retry-After": "12"})
    assert describe(exc).retry_after == 12.0


def flaky_factory() -> PydanticAIChild:
    """An importable child whose model connection drops once, after a tool call."""
    script = Script(
        call("lookup", q="logs"), ConnectionResetError("connection reset"), then=answer("Fixed")
    )
    return PydanticAIChild(scripted_agent(script))


@pytest.mark.slow
async def test_a_durable_run_continues_from_the_checkpointed_history(tmp_path: Any) -> None:
    """On the durable executor (DBOS, embedded) the child is built from its ChildRef, and
    the continuation resumes from the message history checkpointed as JSON data."""
    import lyra.durable

    child = ChildRef(target="test_child_pydantic_ai:flaky_factory", options={})
    policy = RecoveryPolicy(max_retries=2)
    async with lyra.durable.DurableExecutor.embedded(tmp_path, run_id="pai") as executor:
        [outcome] = await Supervisor(child, executor=executor, policy=policy).run(
            [Task(prompt="Triage issue 42")]
        )
    assert [a.strategy for a in outcome.attempts] == ["initial", "continuation"]
    assert outcome.result.output == "Fixed"
    resolved = child.resolve()
    assert isinstance(resolved, PydanticAIChild)
    script = resolved.agent.model.function  # type: ignore[union-attr]
    resumed = script.requests[2]
    assert returned(resumed) == ["found logs"]


# -- a cleanup that never ends ----------------------------------------------------------------


@pytest.mark.parametrize("limit", ["timeout", "idle_timeout"])
async def test_a_tool_whose_cleanup_hangs_never_holds_the_deadline(limit: str) -> None:
    """pydantic-ai waits for its tool tasks to end after a cancellation; a tool whose
    ``finally`` awaits for ever (a close against a dead server) is left to it: the
    attempt ends at its deadline (within lyra's cleanup grace), a timeout."""
    released = anyio.Event()
    agent = scripted_agent(Script(call("hangs"), then=answer("never")))

    @agent.tool_plain
    async def hangs() -> str:
        """Hang, then hang in cleanup."""
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await released.wait()  # never set while the attempt runs
        return "never"

    limits = {"timeout": 0.3} if limit == "timeout" else {"timeout": 30, "idle_timeout": 0.3}
    started = time.perf_counter()
    result = await delegate(PydanticAIChild(agent), **limits)
    elapsed = time.perf_counter() - started
    released.set()
    assert result.failure is not None
    assert result.failure.category == "timeout"
    assert elapsed < 0.3 + 0.5 + 0.5, elapsed  # (the deadline, the grace, slack)
