"""The OpenAI Agents SDK child: real SDK runs (``Runner.run`` with the SDK's OpenAI
models and the real ``openai`` client) against a local fake OpenAI API server."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import agents
import openai
import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    ModelResponse,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    function_tool,
    input_guardrail,
)
from agents.run_config import CallModelData, ModelInputData
from pydantic import BaseModel

from fakes.openai_api import (
    OpenAIAPI,
    Reply,
    call,
    error,
    malformed,
    message,
    rate_limited,
    refusal,
    server_error,
    slow,
    tool_calls,
    truncated,
)
from lyra import (
    Budget,
    ChildContext,
    Limits,
    RecoveryPolicy,
    Supervisor,
    adelegate_task,
    parse_report,
)
from lyra.children import Price
from lyra.children.openai_agents import STATE_KEY, OpenAIAgentsChild
from lyra.delegation._foreign import Kind, describe
from lyra.errors import ConfigurationError
from lyra.recovery import adelegate_with_retry, record_waits, recover
from lyra.supervisor import Task

pytestmark = pytest.mark.anyio

MODEL = "gpt-test"
NO_RETRY = RecoveryPolicy(max_retries=0)
APIS = pytest.mark.parametrize("api", ["chat", "responses"])


@pytest.fixture(autouse=True, scope="module")
def _sdk_tracing_off() -> None:
    """The SDK's own tracing (not OpenTelemetry) exports to OpenAI's backend: off here,
    and for the rest of the session (no test may export traces)."""
    agents.set_tracing_disabled(True)


@pytest.fixture
async def client_for() -> AsyncIterator[Callable[[OpenAIAPI], openai.AsyncOpenAI]]:
    """Real openai clients pointed at a fake server, SDK retries off, closed after."""
    clients: list[openai.AsyncOpenAI] = []

    def make(api: OpenAIAPI) -> openai.AsyncOpenAI:
        client = openai.AsyncOpenAI(base_url=api.base_url, api_key="test-key", max_retries=0)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


def model_for(client: openai.AsyncOpenAI, api: str = "chat") -> Any:
    kind = OpenAIChatCompletionsModel if api == "chat" else OpenAIResponsesModel
    return kind(model=MODEL, openai_client=client)


def agent_for(
    client: openai.AsyncOpenAI, *tools: Any, api: str = "chat", **options: Any
) -> Agent[Any]:
    options.setdefault("name", "worker")
    return Agent(
        instructions="Do the task.", model=model_for(client, api), tools=list(tools), **options
    )


@function_tool
def lookup(protein_id: str) -> str:
    """Look a protein up."""
    return f"{protein_id}: 393 residues"


async def delegate(child: OpenAIAgentsChild, *, timeout: float = 5.0, **limits: Any) -> Any:
    return await Supervisor(child, **limits).delegate("How long is P04637?", timeout=timeout)


def tool_outputs(request: dict[str, Any]) -> list[str]:
    """The tool results a model request carries, whichever API it went to."""
    if "messages" in request:
        return [m["content"] for m in request["messages"] if m["role"] == "tool"]
    return [i["output"] for i in request["input"] if i.get("type") == "function_call_output"]


# -- a run, its usage, its output --------------------------------------------------------


@APIS
async def test_tool_run_completes_with_usage_charged_per_response(
    client_for: Any, api: str
) -> None:
    """Each tool call is progress and each response's usage is charged once: two
    requests, two turns, the tokens of both."""
    script = [
        tool_calls(call("lookup", {"protein_id": "P04637"}), input_tokens=100, output_tokens=20),
        message("393 residues", input_tokens=150, output_tokens=10),
    ]
    with OpenAIAPI(script) as server:
        child = OpenAIAgentsChild(agent_for(client_for(server), lookup, api=api))
        result = await delegate(child)
    assert (result.status, result.output) == ("completed", "393 residues")
    assert tool_outputs(server.requests[1]) == ["P04637: 393 residues"]
    usage = result.usage
    assert (usage.input_tokens, usage.output_tokens, usage.turns) == (250, 30, 2)
    report = parse_report(result.report)
    assert (report.tokens_used, report.turns) == (280, 2)


async def test_structured_output_becomes_json(client_for: Any) -> None:
    """An agent with an output_type returns its final output serialised as JSON."""

    class Length(BaseModel):
        protein: str
        residues: int

    with OpenAIAPI([message('{"protein": "P04637", "residues": 393}')]) as server:
        agent = agent_for(client_for(server), output_type=Length)
        result = await delegate(OpenAIAgentsChild(agent))
    assert json.loads(result.output) == {"protein": "P04637", "residues": 393}


async def test_prices_give_the_cost_of_each_response(client_for: Any) -> None:
    """prices= prices the SDK's usage, cached input tokens at the cache-read rate."""
    reply = message("ok", input_tokens=1000, output_tokens=100, cached_tokens=400)
    with OpenAIAPI([reply]) as server:
        child = OpenAIAgentsChild(
            agent_for(client_for(server)), prices={MODEL: Price(1.0, 2.0, cache_read=0.5)}
        )
        result = await delegate(child)
    assert result.usage.cost_usd == pytest.approx((600 * 1.0 + 100 * 2.0 + 400 * 0.5) / 1e6)


# -- the five categories, from real SDK behaviour ----------------------------------------


@pytest.mark.parametrize(
    ("reply", "category", "retryable", "error_type"),
    [
        (rate_limited(7), "tool_error", True, "rate_limit"),
        (
            error(429, "quota", type="insufficient_quota", code="insufficient_quota"),
            "tool_error",
            False,
            "auth",
        ),
        (server_error(529), "tool_error", True, "rate_limit"),
        (server_error(500), "tool_error", True, "unknown"),
        (server_error(503), "tool_error", True, "unknown"),
        (error(400, "bad request"), "invalid_task", False, "data"),
        (error(401, "bad key", type="invalid_api_key"), "tool_error", False, "auth"),
        (error(404, "no such model"), "tool_error", False, "not_found"),
        (malformed(), "tool_error", True, "data"),
        (refusal(), "invalid_task", False, "data"),
        (truncated(), "partial", True, "data"),  # (cut at the output limit, before any text)
    ],
    ids=[
        "429",
        "quota",
        "529",
        "500",
        "503",
        "400",
        "401",
        "404",
        "malformed",
        "refusal",
        "length",
    ],
)
@APIS
async def test_model_outcomes_are_classified(
    client_for: Any, api: str, reply: Reply, category: str, retryable: bool, error_type: str
) -> None:
    """HTTP errors, a malformed body, a refusal and a truncated answer, through the
    real client and SDK, land in the right category."""
    with OpenAIAPI([reply]) as server:
        result = await delegate(OpenAIAgentsChild(agent_for(client_for(server), api=api)))
    failure = result.failure
    assert (failure.category, failure.suggested_retry, failure.error_type) == (
        category,
        retryable,
        error_type,
    ), failure.evidence


@APIS
async def test_an_answer_cut_off_in_its_text_is_partial_on_either_api(
    client_for: Any, api: str
) -> None:
    """An answer that wrote all the output tokens its max_tokens allowed was cut there,
    text or not: over Chat Completions the SDK keeps no finish_reason='length' for it,
    so the count is what tells (an answer that stopped below its limit is whole)."""
    settings = ModelSettings(max_tokens=5)
    with OpenAIAPI([truncated("The protein is 39", output_tokens=5)]) as server:
        agent = agent_for(client_for(server), api=api, model_settings=settings)
        cut = await delegate(OpenAIAgentsChild(agent))
    with OpenAIAPI([message("The protein is 393 residues long.", output_tokens=4)]) as server:
        agent = agent_for(client_for(server), api=api, model_settings=settings)
        whole = await delegate(OpenAIAgentsChild(agent))
    assert (cut.failure.category, cut.failure.suggested_retry) == ("partial", True)
    assert whole.output == "The protein is 393 residues long.", whole.report


async def test_retry_after_of_a_429_reaches_the_failure(client_for: Any) -> None:
    """The retry-after header of a real 429 is kept for the recovery loop's backoff."""
    with OpenAIAPI([rate_limited(7)]) as server:
        result = await delegate(OpenAIAgentsChild(agent_for(client_for(server))))
    assert result.failure.retry_after == 7.0


async def test_connection_refused_is_a_retryable_connection_error() -> None:
    """A model endpoint that refuses the connection is transient (rule 6)."""
    client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    async with client:
        result = await delegate(OpenAIAgentsChild(agent_for(client)))
    assert (result.failure.category, result.failure.error_type) == ("tool_error", "connection")
    assert result.failure.suggested_retry


async def test_a_guardrail_tripwire_is_an_invalid_task(client_for: Any) -> None:
    """An input guardrail's tripwire rejects the task: invalid_task, not retried."""

    @input_guardrail(run_in_parallel=False)
    def no_homework(ctx: Any, agent: Any, text: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info="homework", tripwire_triggered=True)

    with OpenAIAPI([]) as server:
        agent = agent_for(client_for(server), input_guardrails=[no_homework])
        result = await delegate(OpenAIAgentsChild(agent))
    assert (result.failure.category, result.failure.suggested_retry) == ("invalid_task", False)
    assert server.requests == []


@function_tool
def flaky(protein_id: str) -> str:
    """Look a protein up (upstream resets)."""
    raise ConnectionResetError("upstream reset")


@function_tool(failure_error_function=None)
def flaky_raising(protein_id: str) -> str:
    """Look a protein up (upstream resets; errors propagate)."""
    raise ConnectionResetError("upstream reset")


@pytest.mark.parametrize(
    ("tool", "tool_errors"),
    [(flaky, "raise"), (flaky_raising, "model")],
    ids=["tool_errors=raise", "failure_error_function=None"],
)
async def test_a_tool_exception_that_ends_the_run_is_classified_by_its_cause(
    client_for: Any, tool: Any, tool_errors: Any
) -> None:
    """A tool's exception that ends the run is the tool's own (not the SDK's
    UserError wrapper): tool_error, retryable, naming the tool."""
    script = [tool_calls(call(tool.name, {"protein_id": "P04637"})), message("never")]
    with OpenAIAPI(script) as server:
        agent = agent_for(client_for(server), tool)
        result = await delegate(OpenAIAgentsChild(agent, tool_errors=tool_errors))
    failure = result.failure
    assert (failure.category, failure.error_type, failure.suggested_retry) == (
        "tool_error",
        "connection",
        True,
    )
    assert f"in tool '{tool.name}'" in failure.evidence
    assert failure.message == "ConnectionResetError: upstream reset"
    assert len(server.requests) == 1


async def test_by_default_a_tool_exception_goes_to_the_model(client_for: Any) -> None:
    """As in the SDK, a failing tool's error is text for the model, which goes on; lyra
    counts the call but not as the last successful tool."""
    script = [
        tool_calls(call("lookup", {"protein_id": "P04637"})),
        tool_calls(call("flaky", {"protein_id": "P04637"})),
        tool_calls(call("flaky", {"protein_id": "P04637"})),
    ]
    with OpenAIAPI(script) as server:
        agent = agent_for(client_for(server), lookup, flaky)
        result = await delegate(OpenAIAgentsChild(agent, max_turns=3))
    assert "error occurred" in tool_outputs(server.requests[2])[-1]
    failure = result.failure  # then the turns run out
    assert failure.tool_usage == {"lookup": 1, "flaky": 2}
    assert failure.last_successful_tool == "lookup"


# -- limits inside the run -------------------------------------------------------------


async def test_max_turns_keeps_the_run_data_and_no_handler_makes_it_a_success(
    client_for: Any,
) -> None:
    """Past the SDK's max_turns (timeout/budget, as the contract suite shows), the run
    data the SDK's MaxTurnsExceeded carries (every tool result) is kept for a
    continuation; a max_turns error handler that would make it a success is refused."""
    script = [tool_calls(call("lookup", {"protein_id": f"P{i}"})) for i in range(2)]
    with OpenAIAPI(script) as server:
        agent = agent_for(client_for(server), lookup)
        supervisor = Supervisor(OpenAIAgentsChild(agent, max_turns=2), policy=NO_RETRY)
        (outcome,) = await supervisor.run([Task(prompt="How long is P04637?")])
        with pytest.raises(ConfigurationError, match="max_turns"):
            OpenAIAgentsChild(agent, error_handlers={"max_turns": lambda data: "fine"})
    assert "MaxTurnsExceeded" in outcome.result.failure.evidence
    assert len(server.requests) == 2
    history = outcome.state[STATE_KEY]["history"]
    outputs = [i["output"] for i in history if i.get("type") == "function_call_output"]
    assert outputs == ["P0: 393 residues", "P1: 393 residues"]


def _threads() -> set[threading.Thread]:
    """Live threads but the event loop's executor pool (its idle workers resolve
    host names) and the fake server's request handlers."""
    return {
        t
        for t in threading.enumerate()
        if not t.name.startswith("asyncio_") and "process_request_thread" not in t.name
    }


def _new_tasks(before: set[asyncio.Task[Any]]) -> list[str]:
    return [repr(t) for t in asyncio.all_tasks() - before if not t.done()]


async def test_a_model_that_does_not_answer_ends_at_the_idle_timeout_leaving_nothing(
    client_for: Any,
) -> None:
    """A model request the real client waits on for ever ends the attempt at the idle
    timeout, promptly; no task or thread of the run (nor of the client) is left."""
    with OpenAIAPI([slow(message("late"), 30)], strict=False) as server:
        child = OpenAIAgentsChild(agent_for(client_for(server)))
        threads = _threads()
        tasks = asyncio.all_tasks()
        started = time.perf_counter()
        result = await delegate(child, idle_timeout=0.5)
        elapsed = time.perf_counter() - started
        await asyncio.sleep(0)
        assert _new_tasks(tasks) == []
        assert _threads() <= threads
    assert (result.failure.category, result.failure.error_type) == ("timeout", "idle")
    assert elapsed < 3.0
    assert result.usage.turns == 1


# -- the model provider of the run ------------------------------------------------------


@pytest.fixture
def closed_providers(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The SDK's MultiProviders closed (the default provider of a RunConfig), in order;
    a provider whose ``hang`` is set then waits for ever, one whose ``fail`` is set raises."""
    from agents import MultiProvider

    closed: list[Any] = []

    async def aclose(self: Any) -> None:
        closed.append(self)
        if getattr(self, "hang", False):
            await asyncio.Event().wait()
        if getattr(self, "fail", False):
            raise OSError("the websocket is gone")

    monkeypatch.setattr(MultiProvider, "aclose", aclose)
    return closed


async def test_the_provider_of_the_run_config_lyra_makes_is_closed_as_the_run_ends(
    client_for: Any, closed_providers: list[Any]
) -> None:
    """With no RunConfig of the user's, the model provider of the one lyra makes is closed
    at the end of every run, as the SDK closes the one it makes (a success, a failure, a
    timeout); a user's RunConfig keeps its provider open: it is the user's."""
    replies = [message("done"), error(400, "bad"), slow(message("late"), 30), message("mine")]
    with OpenAIAPI(replies) as server:
        child = OpenAIAgentsChild(agent_for(client_for(server)))
        done, failed = await delegate(child), await delegate(child)
        late = await delegate(child, timeout=0.3)
        config = RunConfig()
        own = await delegate(OpenAIAgentsChild(child.agent, run_config=config))
    assert done.output == "done"
    assert failed.failure is not None
    assert late.failure.category == "timeout", late.report
    assert own.output == "mine", own.report
    assert len(set(map(id, closed_providers))) == len(closed_providers) == 3
    assert config.model_provider not in closed_providers


async def test_a_provider_that_fails_or_hangs_as_it_closes_is_no_failure_of_the_run(
    client_for: Any,
    closed_providers: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A provider's failing close is logged (as the SDK logs it), the run's output kept; a
    close that hangs after a timeout holds the attempt half a second at most."""
    from agents import MultiProvider

    monkeypatch.setattr(MultiProvider, "fail", True, raising=False)
    with OpenAIAPI([message("done"), slow(message("late"), 30)], strict=False) as server:
        child = OpenAIAgentsChild(agent_for(client_for(server)))
        done = await delegate(child)
        monkeypatch.setattr(MultiProvider, "hang", True, raising=False)
        started = time.perf_counter()
        late = await delegate(child, timeout=0.3)
        elapsed = time.perf_counter() - started
    assert done.output == "done", done.report
    assert "Failed to close model provider created for run" in caplog.text
    assert late.failure.category == "timeout"
    assert elapsed < 2.0
    assert len(closed_providers) == 2


# -- the context, the user's own hooks, context and filter ------------------------------


@dataclasses.dataclass
class Deps:
    """A user's own SDK context, holding lyra's ChildContext."""

    lyra: ChildContext
    greeting: str


@function_tool
def greet(wrapper: RunContextWrapper[Deps]) -> str:
    """Greet."""
    wrapper.context.lyra.step("greeted")
    return wrapper.context.greeting


class CountingHooks(RunHooks[Any]):
    """A user's own run hooks."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        self.seen.append("llm_end")

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self.seen.append(f"tool_end {tool.name}: {result}")


async def test_a_token_budget_over_a_model_without_usage_stops_at_its_first_answer() -> None:
    """A model that reports no usage cannot keep max_tokens: the run stops at its first
    response, saying so, where it was charged nothing and ran to the budget's guess."""
    from agents.models.interface import Model
    from agents.testing import function_call

    class Silent(Model):
        requests = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            Silent.requests += 1
            call = function_call("lookup", {"q": "p53"}, call_id=f"c{Silent.requests}")
            return ModelResponse(output=[call], usage=agents.Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    async def lookup(q: str) -> str:
        """Look it up."""
        return "found"

    agent = Agent(name="a", instructions="x", model=Silent(), tools=[lookup])
    child = OpenAIAgentsChild(agent, max_turns=None)
    result = await Supervisor(budget=Budget(max_tokens=1000)).delegate("x", child=child, timeout=5)
    assert result.failure is not None, result.report
    assert "reports no token usage" in result.failure.message
    assert "max_tokens cannot be kept" in result.failure.message
    assert Silent.requests == 1
    unlimited = await Supervisor(max_repeats=2).delegate("x", child=child, timeout=5)
    assert unlimited.failure.error_type == "loop"  # without a budget, no usage is no matter


async def test_the_users_context_hooks_and_filter_still_work(client_for: Any) -> None:
    """context_factory builds the user's context around lyra's, the user's RunHooks are
    called, and the user's call_model_input_filter still shapes the request."""

    def shout(data: CallModelData[Any]) -> ModelInputData:
        return ModelInputData(input=data.model_data.input, instructions="FILTERED")

    hooks = CountingHooks()
    with OpenAIAPI([tool_calls(call("greet")), message("done")]) as server:
        child = OpenAIAgentsChild(
            agent_for(client_for(server), greet),
            context_factory=lambda ctx: Deps(lyra=ctx, greeting="hello"),
            hooks=hooks,
            run_config=RunConfig(call_model_input_filter=shout),
        )
        result = await delegate(child)
        with pytest.raises(ConfigurationError, match="not both"):
            OpenAIAgentsChild(child.agent, context=1, context_factory=lambda ctx: 2)
    assert result.output == "done"
    assert hooks.seen == ["llm_end", "tool_end greet: hello", "llm_end"]
    assert server.requests[0]["messages"][0] == {"role": "system", "content": "FILTERED"}


async def test_a_users_filter_that_raises_sends_nothing_and_charges_no_turn(
    client_for: Any,
) -> None:
    """The user's call_model_input_filter raising ends the run before the request is
    sent: its turn is not counted (it was), and the error is the run's failure."""

    def broken(data: CallModelData[Any]) -> ModelInputData:
        raise ValueError("the filter is broken")

    with OpenAIAPI([message("done")]) as server:
        config = RunConfig(call_model_input_filter=broken)
        child = OpenAIAgentsChild(agent_for(client_for(server)), run_config=config)
        result = await delegate(child, budget=Budget(max_tokens=10_000))
    assert server.requests == []
    assert "the filter is broken" in result.failure.message, result.report
    assert not result.usage  # (nothing charged at all)


async def test_budget_and_turns_hold_inside_an_agent_used_as_a_tool(client_for: Any) -> None:
    """openai-agents-js #444: the SDK's max_turns does not reach an agent run as a tool,
    lyra's budget does: the nested agent's requests are charged ahead (the fourth is
    refused) and its tokens are charged."""
    with OpenAIAPI([tool_calls(call("researcher", {"input": "go"}))]) as server:
        client = client_for(server)
        inner = agent_for(client, lookup, name="researcher")
        server.add(*[tool_calls(call("lookup", {"protein_id": "P04637"}), input_tokens=50)] * 5)
        outer = agent_for(client, inner.as_tool("researcher", "Researches a protein."))
        child = OpenAIAgentsChild(outer, max_turns=2)
        result = await delegate(child, budget=Budget(max_turns=3))
    assert len(server.requests) == 3
    assert (result.failure.category, result.failure.error_type) == ("timeout", "budget")
    assert result.usage.input_tokens == 10 + 50 + 50
    assert result.failure.tool_usage == {"researcher": 1}


async def test_parallel_agent_tools_never_overshoot_a_turn_budget(client_for: Any) -> None:
    """pydantic-ai-harness #696 here: two agents run as tools at once draw turns from one
    account charged ahead; max_turns turns are charged and never more requests sent."""
    with OpenAIAPI(
        [tool_calls(call("researcher", {"input": "a"}), call("researcher", {"input": "b"}))]
    ) as server:
        client = client_for(server)
        server.add(*[tool_calls(call("lookup", {"protein_id": "P04637"}))] * 12)
        inner = agent_for(client, lookup, name="researcher")
        outer = agent_for(client, inner.as_tool("researcher", "Researches a protein."))
        result = await delegate(OpenAIAgentsChild(outer), budget=Budget(max_turns=5))
    # Five turns charged ahead; the last one's request may still be unsent when the
    # refusal of the sixth (by the other nested run) cancels the attempt.
    assert result.usage.turns == 5
    assert 4 <= len(server.requests) <= 5
    assert (result.failure.category, result.failure.error_type) == ("timeout", "budget")


async def writer_and_summariser(
    client_for: Any, script: list[Reply], *, summariser_limit: int
) -> Any:
    """An agent with two agents as tools whose errors end the run (a writer limited to
    3,000 output tokens, a summariser to ``summariser_limit``), on ``script``, under a
    token budget of 100,000."""
    with OpenAIAPI(script) as server:
        client = client_for(server)
        writer = agent_for(client, name="writer", model_settings=ModelSettings(max_tokens=3000))
        limit = ModelSettings(max_tokens=summariser_limit)
        summariser = agent_for(client, name="summariser", model_settings=limit)
        tools = [
            writer.as_tool("writer", "Writes.", failure_error_function=None),
            summariser.as_tool("summariser", "Summarises.", failure_error_function=None),
        ]
        child = OpenAIAgentsChild(agent_for(client, *tools))
        return await delegate(child, budget=Budget(max_tokens=100_000))


@APIS
async def test_answers_cut_off_by_the_sdk_are_charged_and_a_token_budget_holds(
    client_for: Any, api: str
) -> None:
    """An answer cut off at its output limit with no text (and, over the Responses API,
    any answer cut off) ends in the SDK's ModelBehaviorError before any hook sees its
    usage: lyra charges its estimate (the input as held, the output limit written), so
    the recovery loop's continuations stop at the token budget where they went on
    unmetered (3,640 tokens billed under max_tokens=2000, usage 0)."""
    settings = ModelSettings(max_tokens=400)
    cut = truncated(output_tokens=400) if api == "chat" else truncated("The pro", output_tokens=400)
    with OpenAIAPI([cut] * 8) as server, record_waits():
        agent = agent_for(client_for(server), api=api, model_settings=settings)
        outcome = await recover(
            "How long is P04637?",
            child=OpenAIAgentsChild(agent),
            policy=RecoveryPolicy(max_retries=7),
            limits=Limits(timeout=5, budget=Budget(max_tokens=2000)),
        )
    billed = len(server.requests) * (10 + 400)  # what the fake server said each one used
    assert 1 < len(server.requests) < 8
    assert billed <= 2000
    assert billed <= outcome.usage.tokens <= 2000
    assert outcome.result.failure.error_type == "budget", outcome.result.report


async def test_an_agent_run_as_a_tool_gives_back_what_its_requests_held(client_for: Any) -> None:
    """No hook of lyra's sees a nested agent's answers: what its requests held against the
    token budget is given back once the SDK's running total counts their answers. They
    stayed held until the attempt ended, so a second call of the agent waited for its
    own first reservation (3,000 + its input, under max_tokens=5000) until the deadline."""
    script = [
        tool_calls(call("researcher", {"input": "a"})),
        message("a: 393 residues"),
        tool_calls(call("researcher", {"input": "b"})),
        message("b: 393 residues"),
        message("both have 393 residues"),
    ]
    with OpenAIAPI(script) as server:
        client = client_for(server)
        settings = ModelSettings(max_tokens=3000)
        inner = agent_for(client, name="researcher", model_settings=settings)
        outer = agent_for(client, inner.as_tool("researcher", "Researches a protein."))
        result = await delegate(OpenAIAgentsChild(outer), budget=Budget(max_tokens=5000), timeout=3)
    assert result.output == "both have 393 residues", result.report
    assert len(server.requests) == 5


async def test_a_nested_answer_cut_off_is_charged_as_the_request_that_asked_for_it(
    client_for: Any,
) -> None:
    """A nested agent's answer cut off at its limit, raised through the agent tool
    (failure_error_function=None), is charged as that request's estimate (its output
    limit, 3,000), not as the last agent's to start asking (50)."""
    script = [
        tool_calls(call("writer", {"input": "x"})),
        message("short"),
        tool_calls(call("summariser", {"input": "y"})),
        message("short"),
        tool_calls(call("writer", {"input": "z"})),
        truncated(output_tokens=3000),
    ]
    result = await writer_and_summariser(client_for, script, summariser_limit=50)
    assert result.failure.category == "partial", result.report
    assert 3000 < result.usage.output_tokens < 3100  # (5 answers of 5 tokens, and the estimate)


async def test_an_agent_tool_inside_an_agent_tool_completes_under_a_token_budget(
    client_for: Any,
) -> None:
    """outer → b (as a tool) → c (as a tool): c's answer, which no hook sees, is counted
    by the SDK's running total, so b's next request finds what c's held given back (it
    waited for it until the deadline)."""
    script = [
        tool_calls(call("b", {"input": "x"})),
        tool_calls(call("c", {"input": "y"})),
        message("c done"),
        message("b done"),
        message("all done"),
    ]
    with OpenAIAPI(script) as server:
        client = client_for(server)
        settings = ModelSettings(max_tokens=3000)
        c = agent_for(client, name="c", model_settings=settings)
        b = agent_for(client, c.as_tool("c", "C."), name="b", model_settings=settings)
        outer = agent_for(client, b.as_tool("b", "B."))
        result = await delegate(OpenAIAgentsChild(outer), budget=Budget(max_tokens=5000), timeout=3)
    assert result.output == "all done", result.report


async def test_parallel_calls_of_one_agent_tool_never_hold_past_the_budget(
    client_for: Any,
) -> None:
    """Two calls of one agent at once, each request's worst case 3,000 and its input,
    under max_tokens=5000: the second is sent once the first is answered, 0.3 s on (the
    second call's request gave back what the first's held while it was in flight, and
    both went together)."""
    script = [
        tool_calls(call("r", {"input": "a"}), call("r", {"input": "b"})),
        slow(message("a"), 0.3),
        slow(message("b"), 0.3),
        message("both"),
    ]
    with OpenAIAPI(script) as server:
        client = client_for(server)
        r = agent_for(client, name="r", model_settings=ModelSettings(max_tokens=3000))
        outer = agent_for(client, r.as_tool("r", "R."))
        result = await delegate(OpenAIAgentsChild(outer), budget=Budget(max_tokens=5000))
    assert result.output == "both", result.report
    assert result.duration >= 0.6  # one after the other


async def test_a_cut_off_answer_beside_an_answered_one_is_charged_once(client_for: Any) -> None:
    """Two agents run as tools at once; one answers (its usage counted by the SDK), the
    other is cut off at 3,000: the cut one's estimate is charged, and the answered one's
    usage once (its 2,000 estimate was charged on top)."""
    script = [
        tool_calls(call("writer", {"input": "x"}), call("summariser", {"input": "y"})),
        slow(truncated(output_tokens=3000), 0.3),
        message("short"),
    ]
    result = await writer_and_summariser(client_for, script, summariser_limit=2000)
    assert result.failure.category == "partial", result.report
    assert 3000 < result.usage.output_tokens < 3100


# -- recovery ----------------------------------------------------------------------------


@APIS
async def test_a_continuation_resumes_the_conversation(client_for: Any, api: str) -> None:
    """After a failure that follows a tool call, the recovery loop's next attempt sends
    the first attempt's conversation back (the tool's result included) with the
    continuation, and completes without redoing the tool."""
    script = [
        tool_calls(call("lookup", {"protein_id": "P04637"})),
        server_error(500),
        message("P04637 has 393 residues"),
    ]
    with OpenAIAPI(script) as server, record_waits():
        child = OpenAIAgentsChild(agent_for(client_for(server), lookup, api=api))
        report = await adelegate_with_retry(
            "How long is P04637?", child=child, max_retries=2, base_timeout=5
        )
    parsed = parse_report(report)
    assert (parsed.status, parsed.attempt) == ("completed", 2)
    resumed = server.requests[2]
    assert tool_outputs(resumed) == ["P04637: 393 residues"]
    if api == "chat":
        first, last = resumed["messages"][1], resumed["messages"][-1]
    else:
        first, last = resumed["input"][0], resumed["input"][-1]
    assert first["content"] == "How long is P04637?"
    assert last["role"] == "user"
    assert "Ran lookup" in last["content"]


async def test_with_a_session_the_session_carries_the_conversation(client_for: Any) -> None:
    """With an SDK session the continuation sends only the new prompt: the session
    adds the first attempt's items, and lyra keeps no copy in ctx.state."""
    script = [
        tool_calls(call("lookup", {"protein_id": "P04637"})),
        server_error(500),
        message("ok"),
    ]
    with OpenAIAPI(script) as server, record_waits():
        child = OpenAIAgentsChild(
            agent_for(client_for(server), lookup), session=agents.SQLiteSession("continuation")
        )
        outcome = await recover(
            "How long is P04637?",
            child=child,
            policy=RecoveryPolicy(max_retries=2),
            limits=Limits(timeout=5),
        )
    assert outcome.result.output == "ok"
    resumed = server.requests[2]["messages"]
    assert [m["role"] for m in resumed] == ["system", "user", "assistant", "tool", "user"]
    assert "Ran lookup" in resumed[-1]["content"]
    assert STATE_KEY not in outcome.state


async def test_after_a_context_overflow_the_continuation_runs_without_the_session(
    client_for: Any,
) -> None:
    """The continuation after a context overflow starts without the transcript: with a
    session, the run goes without it (it holds what outgrew the window), sending only the
    continuation; the session is left as it was."""
    overflow = error(
        400,
        "This model's maximum context length is 128000 tokens.",
        code="context_length_exceeded",
    )
    script = [tool_calls(call("lookup", {"protein_id": "P04637"})), overflow, message("ok")]
    session = agents.SQLiteSession("overflowed")
    with OpenAIAPI(script) as server, record_waits():
        child = OpenAIAgentsChild(agent_for(client_for(server), lookup), session=session)
        outcome = await recover(
            "How long is P04637?",
            child=child,
            policy=RecoveryPolicy(max_retries=2),
            limits=Limits(timeout=5),
        )
    assert [a.strategy for a in outcome.attempts] == ["initial", "fresh_continuation"]
    assert outcome.result.output == "ok"
    fresh = server.requests[2]["messages"]
    assert [m["role"] for m in fresh] == ["system", "user"]
    assert "Ran lookup" in fresh[-1]["content"]
    kept = await session.get_items()
    assert [item.get("role") for item in kept][:1] == ["user"]
    assert all("Ran lookup" not in str(item.get("content")) for item in kept)


async def test_a_stopped_run_keeps_its_conversation_as_json(client_for: Any) -> None:
    """A run stopped by the budget leaves the conversation in ctx.state as JSON data
    (a durable run needs it), tool calls without results left out."""
    script = [tool_calls(call("lookup", {"protein_id": "P04637"}))] * 2
    with OpenAIAPI(script) as server:
        child = OpenAIAgentsChild(agent_for(client_for(server), lookup))
        supervisor = Supervisor(child, budget=Budget(max_turns=2), timeout=5)
        (outcome,) = await supervisor.run([Task(prompt="How long is P04637?")])
    history = outcome.state[STATE_KEY]["history"]
    assert json.loads(json.dumps(history)) == history
    kinds = [item.get("type", item.get("role")) for item in history]
    assert kinds == ["user", "function_call", "function_call_output"]


# -- traces ------------------------------------------------------------------------------


# -- the framework's exceptions, the extra -----------------------------------------------


def test_framework_limits_and_wrapped_tool_errors_are_described() -> None:
    """MaxTurnsExceeded is the framework's own limit; the SDK's UserError around a
    tool's exception is described by that exception; a timeout without a response
    is transient."""
    assert describe(agents.MaxTurnsExceeded("Max turns (2) exceeded")).kind is Kind.BUDGET
    wrapped = agents.UserError("Error running tool read: no access")
    wrapped.__cause__ = PermissionError("no access")
    assert describe(wrapped).kind is Kind.ENVIRONMENT
    assert describe(agents.UserError("bad config")).kind is Kind.PERMANENT
    import httpx2

    request = httpx2.Request("POST", "http://127.0.0.1/v1/responses")
    assert describe(openai.APITimeoutError(request=request)).error_type == "timeout"


def test_a_responses_api_answer_cut_off_at_its_output_limit_is_incomplete() -> None:
    """The SDK raises ModelBehaviorError for an incomplete response (its own text, built
    from the Response): cut off by max_output_tokens it is output cut short (partial),
    withheld by the content filter it is the task refused (invalid_task: it was sent
    again three times), any other incomplete response stays the model's misbehaviour
    (transient)."""
    from agents.models._response_terminal import response_terminal_failure_error
    from openai.types.responses import Response
    from openai.types.responses.response import IncompleteDetails

    def incomplete(reason: Any) -> Exception:
        details = IncompleteDetails(reason=reason)
        response = Response.model_construct(status="incomplete", incomplete_details=details)
        return response_terminal_failure_error("response.incomplete", response)

    assert describe(incomplete("max_output_tokens")).kind is Kind.INCOMPLETE
    # (withheld by the content filter: the task is refused, never sent again as it is)
    assert describe(incomplete("content_filter")).kind is Kind.MALFORMED_TASK
    assert describe(incomplete("max_messages")).kind is Kind.TRANSIENT


async def test_model_settings_and_adelegate_task_work_together(client_for: Any) -> None:
    """The agent's own model settings reach the request; adelegate_task returns the
    output with its metadata."""
    with OpenAIAPI([message("393")]) as server:
        agent = agent_for(client_for(server), model_settings=ModelSettings(temperature=0.25))
        report = await adelegate_task("How long?", child=OpenAIAgentsChild(agent), timeout=5)
    assert server.requests[0]["temperature"] == 0.25
    assert parse_report(report).status == "completed"
