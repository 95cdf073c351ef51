"""LangGraphChild: real LangGraph graphs driven by langchain-core's fake chat model
(made async and scripted, tests/fakes/langchain_models.py), provider errors from the
real anthropic SDK against the local fake Messages API."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import anthropic
import anyio
import httpx2
import langchain_core
import langgraph
import pytest
from langchain_core.exceptions import ContextOverflowError, ModelError
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import NodeTimeoutError
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import TimeoutPolicy, interrupt
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from fakes.langchain_models import ASK_API, ScriptedModel, react_graph, reply
from fakes.messages_api import MessagesAPI, error, overloaded, rate_limited
from lyra import (
    Budget,
    Limits,
    RecoveryPolicy,
    Supervisor,
    tracing,
)
from lyra.children.langgraph import LangGraphChild, child_context
from lyra.delegation._foreign import Kind, describe
from lyra.errors import IncompleteOutput, TaskRejected
from lyra.recovery import record_waits, recover

pytestmark = pytest.mark.anyio


def one_node(name: str, node: Any, **options: Any) -> Any:
    """A graph of one node (``options``: ``add_node``'s, a ``TimeoutPolicy``), uncompiled."""
    graph = StateGraph(MessagesState)
    graph.add_node(name, node, **options)
    graph.add_edge(START, name)
    return graph


@pytest.fixture(autouse=True)
def no_real_sleeps() -> Iterator[list[float]]:
    """Recovery waits are recorded, not slept."""
    with record_waits() as waits:
        yield waits


@tool
async def lookup(protein: str) -> str:
    """Look a protein up."""
    return f"{protein}: 393 residues"


@tool
async def stuck(protein: str) -> str:
    """A lookup that never answers."""
    await asyncio.sleep(60)
    return "never"


def calls(*names: str) -> AIMessage:
    """A model turn calling each named tool once."""
    return reply("", *((name, {"protein": "P04637"}) for name in names))


def endless(*names: str) -> Iterator[AIMessage]:
    """A runaway model: it calls tools and never answers."""
    while True:
        yield calls(*names)


def agent(
    *turns: Any, tools: tuple[Any, ...] = (lookup,), api: MessagesAPI | None = None, **options: Any
) -> Any:
    """A LangGraphChild over the usual tool-calling graph, and its scripted model."""
    model = ScriptedModel.of(*turns, api=api)
    return LangGraphChild(react_graph(model, list(tools)), **options), model


# -- a run, its answer and its usage ------------------------------------------------------


async def test_each_response_is_priced_by_the_model_its_metadata_names() -> None:
    """The model a response's metadata names (LangChain's ``model_name``) is priced from
    lyra's table: the cost of both responses is charged."""
    child, _model = agent(calls("lookup"), reply("P04637 has 393 residues"))
    result = await Supervisor(child).delegate("How long is P04637?", timeout=5)
    assert result.output == "P04637 has 393 residues"
    assert result.usage is not None
    assert result.usage.cost_usd == pytest.approx((200 * 2.0 + 40 * 10.0) / 1e6)  # sonnet-5


class Verdict(BaseModel):
    protein: str
    length: int


class Measured(TypedDict, total=False):
    protein: str
    verdict: Verdict


async def test_structured_output_and_custom_input_and_output() -> None:
    """``input`` builds the graph's input, ``output`` reads the final state, and a
    structured result becomes JSON text."""

    async def node(state: Measured) -> dict[str, Any]:
        return {"verdict": Verdict(protein=state["protein"], length=393)}

    graph = StateGraph(Measured)
    graph.add_node("measure", node)
    graph.add_edge(START, "measure")
    child = LangGraphChild(
        graph.compile(),
        input=lambda prompt: {"protein": prompt.split()[-1]},
        output=lambda state: state["verdict"],
    )
    result = await Supervisor(child).delegate("Measure P04637", timeout=5)
    assert result.output == '{"protein":"P04637","length":393}'


# -- the five categories, from real framework behaviour ----------------------------------------


@pytest.mark.parametrize(
    ("turn", "error_type", "retryable", "retry_after"),
    [
        (rate_limited(7), "rate_limit", True, 7.0),
        (overloaded(), "rate_limit", True, None),
        (error(401, "authentication_error", "bad key"), "auth", False, None),
        (error(503, "api_error", "unavailable"), "unknown", True, None),
        (
            anthropic.APIConnectionError(
                request=httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")
            ),
            "connection",
            True,
            None,
        ),
    ],
    ids=["429", "529", "401", "503", "connection"],
)
async def test_provider_errors_reach_lyra_unwrapped_and_are_classified(
    turn: Any, error_type: str, retryable: bool, retry_after: float | None
) -> None:
    """The anthropic SDK's own errors, raised inside a graph's model node, keep their
    status, retry-after and category (tool_error)."""
    with MessagesAPI([turn] if not isinstance(turn, Exception) else []) as api:
        model = ScriptedModel.of(turn if isinstance(turn, Exception) else ASK_API, api=api)
        result = await Supervisor(LangGraphChild(react_graph(model, [lookup]))).delegate(
            "x", timeout=5
        )
    failure = result.failure
    assert failure is not None
    assert (failure.category, failure.error_type) == ("tool_error", error_type)
    assert (failure.suggested_retry, failure.retry_after) == (retryable, retry_after)


async def test_an_integrations_subclass_of_an_sdk_error_is_classified_as_the_sdks() -> None:
    """langchain-anthropic raises its own subclasses of the anthropic SDK's errors
    (``class AnthropicRateLimitError(anthropic.RateLimitError, ModelRateLimitError)``, in
    ``langchain_anthropic``): one such 429, raised in a node, is the SDK's rate limit,
    retryable, its retry-after kept (it was rule 10, never retried)."""

    class AnthropicRateLimitError(anthropic.RateLimitError):
        """As langchain-anthropic 1.7 defines it (its module, a subclass of the SDK's)."""

    AnthropicRateLimitError.__module__ = "langchain_anthropic.chat_models"
    response = httpx2.Response(
        429,
        headers={"retry-after": "3"},
        request=httpx2.Request("POST", "https://api.anthropic.com/v1/messages"),
    )

    def node(state: MessagesState) -> dict[str, Any]:
        raise AnthropicRateLimitError("429 rate limited", response=response, body={})

    graph = one_node("model", node).compile()
    result = await Supervisor(LangGraphChild(graph)).delegate("x", timeout=5)
    failure = result.failure
    assert failure is not None
    assert (failure.category, failure.error_type) == ("tool_error", "rate_limit")
    assert (failure.suggested_retry, failure.retry_after) == (True, 3.0)


# -- the limits hold inside the run -----------------------------------------------------------


async def test_a_token_budget_over_a_model_without_usage_stops_at_its_first_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A chat model that reports no usage_metadata cannot keep max_tokens: the run stops
    at its first response, saying so, instead of running unlimited until the deadline;
    langchain-core's "Error in LyraCallbacks..." warning of that refusal is left out
    (the report says it)."""
    from langchain_core.messages import AIMessage

    silent = AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "p53"}, "id": "c1"}])
    model = ScriptedModel.of(*[silent.model_copy() for _ in range(50)])
    graph = react_graph(model, [lookup])
    result = await Supervisor(budget=Budget(max_tokens=1000)).delegate(
        "x", child=LangGraphChild(graph), timeout=5
    )
    assert result.failure is not None
    assert "reports no token usage" in result.failure.message
    assert "max_tokens cannot be kept" in result.failure.message
    assert len(model.requests) == 1
    assert [r.getMessage() for r in caplog.records if r.name.startswith("langchain_core")] == []


@pytest.mark.parametrize(("counted", "charged"), [(1.5, 2), (-3, 0), (float("nan"), 0), ("7", 0)])
async def test_odd_token_counts_from_a_framework_are_made_whole(counted: Any, charged: int) -> None:
    """A float count is rounded up, a negative or non-number one counts as nothing: the
    run completes, charged what the framework's figure means (foreign data is never a
    reason for a run to fail)."""
    from langchain_core.messages import AIMessage

    odd = AIMessage("done")
    odd.usage_metadata = {"input_tokens": counted, "output_tokens": 1, "total_tokens": 1}  # type: ignore[typeddict-item]
    graph = react_graph(ScriptedModel.of(odd), [lookup])
    result = await Supervisor(LangGraphChild(graph)).delegate("x", timeout=5)
    assert result.ok, result.report
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (charged, 1)


async def test_an_unnamed_model_is_priced_by_the_empty_prefix() -> None:
    """A test model with no name is priced by ``prices={"": ...}``, the catch-all the
    docs name, so a cost budget can be tried offline."""
    from lyra.children import Price

    model = ScriptedModel.of(reply("done", model=""), model="")  # a model with no name
    graph = react_graph(model, [lookup])
    refused = await Supervisor(budget=Budget(max_cost_usd=1.0)).delegate(
        "x", child=LangGraphChild(graph), timeout=5
    )
    assert refused.failure is not None
    assert "no price is known for the model '(unnamed)'" in refused.failure.message
    priced = LangGraphChild(graph, prices={"": Price(1.0, 1.0)})
    result = await Supervisor(budget=Budget(max_cost_usd=1.0)).delegate(
        "x", child=priced, timeout=5
    )
    assert result.status == "completed"
    assert result.usage is not None
    assert result.usage.cost_usd == pytest.approx(120 / 1e6)


async def test_model_responses_keep_a_busy_agent_alive_past_its_idle_timeout() -> None:
    """Each response (and each tool call) is progress: six 0.1 s model calls outlive an
    idle timeout of 0.25 s."""
    turns = [x for _ in range(5) for x in (0.1, calls("lookup"))]
    child, _model = agent(*turns, 0.1, reply("done"))
    result = await Supervisor(child).delegate("x", timeout=10, idle_timeout=0.25)
    assert result.output == "done"


@pytest.mark.parametrize("heartbeats", [True, False])
async def test_a_node_heartbeat_is_progress_for_lyra_too(heartbeats: bool) -> None:
    """Under a node TimeoutPolicy, runtime.heartbeat() keeps lyra's idle timeout from
    firing; the same node without heartbeats is ended by it."""

    async def crunch(state: MessagesState, runtime: Runtime) -> dict[str, Any]:
        for _ in range(8):
            await asyncio.sleep(0.05)
            if heartbeats:
                runtime.heartbeat()
        return {"messages": [AIMessage("crunched")]}

    child = LangGraphChild(
        one_node("crunch", crunch, timeout=TimeoutPolicy(idle_timeout=0.4)).compile()
    )
    result = await Supervisor(child).delegate("x", timeout=5, idle_timeout=0.15)
    if heartbeats:
        assert result.output == "crunched"
    else:
        assert result.failure is not None
        assert result.failure.error_type == "idle"


@pytest.mark.parametrize(
    ("policy", "error_type"),
    [(TimeoutPolicy(idle_timeout=0.05), "idle"), (TimeoutPolicy(run_timeout=0.05), "timeout")],
    ids=["idle_timeout", "run_timeout"],
)
async def test_a_node_timeout_is_a_timeout_with_its_own_kind(
    policy: TimeoutPolicy, error_type: str
) -> None:
    """LangGraph's NodeTimeoutError is timeout/idle for a node's idle timeout and
    timeout/timeout for its run timeout, with the framework named as evidence."""

    async def hang(state: MessagesState) -> dict[str, Any]:
        await asyncio.sleep(5)
        return {}

    graph = one_node("hang", hang, timeout=policy).compile()
    result = await Supervisor(LangGraphChild(graph)).delegate("x", timeout=5)
    failure = result.failure
    assert failure is not None
    assert (failure.category, failure.error_type) == ("timeout", error_type)
    assert "langgraph.NodeTimeoutError" in failure.evidence


def _react_agent_out_of_steps() -> Any:
    from langgraph.prebuilt import create_react_agent
    from langgraph.warnings import LangGraphDeprecatedSinceV10

    model = ScriptedModel.of(endless("lookup"))
    with warnings.catch_warnings():  # deprecated in favour of langchain's create_agent
        warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
        return create_react_agent(model, [lookup])


async def test_the_prebuilt_agents_polite_out_of_steps_answer_is_never_a_success() -> None:
    """The prebuilt agent answers "Sorry, need more steps" where a graph raises
    GraphRecursionError (the contract suite's case): the same timeout/budget, with the
    framework's limit as evidence, retryable after progress."""
    child = LangGraphChild(_react_agent_out_of_steps(), recursion_limit=6)
    result = await Supervisor(child).delegate("x", timeout=5)
    failure = result.failure
    assert failure is not None
    assert (failure.category, failure.error_type) == ("timeout", "budget")
    assert "the framework's own limit was reached (langgraph.GraphRecursionError)" in (
        failure.evidence
    )
    assert failure.suggested_retry


async def test_a_blocker_declared_in_a_tool_holds_though_the_tool_node_catches_it() -> None:
    """ctx.block in a tool is the run's end even with handle_tool_errors=True: no model
    request follows, and the failure is the declared category."""

    @tool
    async def fetch(protein: str, config: RunnableConfig) -> str:
        """Fetch a protein."""
        child_context(config).block("missing_context", f"Which organism for {protein}?")

    model = ScriptedModel.of(calls("fetch"), reply("I carried on regardless"))
    child = LangGraphChild(react_graph(model, [fetch], handle_tool_errors=True))
    result = await Supervisor(child).delegate("x", timeout=5)
    assert result.failure is not None
    assert (result.failure.category, result.failure.blocked_on) == (
        "missing_context",
        "Which organism for P04637?",
    )
    assert len(model.requests) == 1


@pytest.mark.parametrize("limit", ["max_repeats", "max_tool_calls"])
async def test_a_sync_tools_call_past_a_limit_never_runs(limit: str) -> None:
    """A sync tool's callbacks reach lyra on langchain-core's sync path (in the tool's
    worker thread), which swallows what an async handler raises: lyra's refusal of the
    call (a loop, the tool-call budget) still stops it there, and the call past the
    limit never runs, during the run or after it."""
    ran: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email (a side effect)."""
        ran.append(to)
        return "sent"

    def emails() -> Iterator[AIMessage]:  # the same one again, or a new one each turn
        for n in range(99):
            yield reply("", ("send_email", {"to": "bob" if limit == "max_repeats" else f"u{n}"}))

    model = ScriptedModel.of(emails())
    child = LangGraphChild(react_graph(model, [send_email]))
    if limit == "max_repeats":
        result = await Supervisor(child, max_repeats=2).delegate("x", timeout=10)
    else:
        result = await Supervisor(child, budget=Budget(max_tool_calls=2)).delegate("x", timeout=10)
    await anyio.sleep(0.3)  # (a refused call that still ran would run late)
    assert result.failure is not None, result.report
    assert result.failure.error_type == ("loop" if limit == "max_repeats" else "budget")
    assert len(ran) == 2, ran


# -- the ChildContext in the graph -------------------------------------------------------------


async def test_usage_is_counted_once_through_subgraphs_and_chains() -> None:
    """A model called through a prompt | model chain inside a subgraph node is charged
    once per response."""
    model = ScriptedModel.of(reply("a", tokens=(10, 1)), reply("b", tokens=(20, 2)))
    chain = ChatPromptTemplate.from_messages([("placeholder", "{messages}")]) | model

    async def think(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await chain.ainvoke({"messages": state["messages"]}, config)]}

    inner = StateGraph(MessagesState)
    inner.add_node("think", think)
    inner.add_edge(START, "think")
    inner.add_edge("think", "think2")
    inner.add_node("think2", think)
    outer = StateGraph(MessagesState)
    outer.add_node("inner", inner.compile())
    outer.add_edge(START, "inner")
    result = await Supervisor(LangGraphChild(outer.compile())).delegate("x", timeout=5)
    assert result.output == "b"
    assert result.usage is not None
    assert (result.usage.tokens, result.usage.turns) == (33, 2)


async def test_a_langgraph_child_delegated_to_from_a_tool_is_charged_once() -> None:
    """A LangGraph grandchild run from the parent graph's tool inherits the parent's
    callbacks (langchain-core hands them down): its model calls and tool calls are
    charged by its own run alone, so the tree's turns and tool calls are the real ones."""
    inner = ScriptedModel.of(calls("lookup"), reply("393 residues", tokens=(100, 7)))

    @tool
    async def research(protein: str, config: RunnableConfig) -> str:
        """Research a protein."""
        found = await child_context(config).delegate(
            protein, child=LangGraphChild(react_graph(inner, [lookup]))
        )
        return found.output or "failed"

    outer = ScriptedModel.of(calls("research"), reply("done", tokens=(10, 3)))
    budget = Budget(max_turns=4, max_tool_calls=2)  # exactly what the tree uses
    result = await Supervisor(
        LangGraphChild(react_graph(outer, [research])), budget=budget
    ).delegate("How long is P04637?", timeout=5)
    assert result.output == "done", result.report
    assert result.usage is not None
    usage = result.usage
    assert (usage.input_tokens, usage.output_tokens) == (100 + 100 + 100 + 10, 20 + 7 + 20 + 3)
    assert (usage.turns, usage.tool_calls) == (4, 2)


# -- continuation -------------------------------------------------------------------------------


async def test_a_retry_without_a_checkpointer_gets_the_messages_back() -> None:
    """After a partial failure (a tool ran, then the connection dropped), the recovery
    loop's continuation attempt sends the model the first attempt's messages, before the
    continuation prompt, and completes without running the tool again."""
    connection = anthropic.APIConnectionError(
        request=httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")
    )
    child, model = agent(calls("lookup"), connection, reply("393 residues"))
    outcome = await recover("How long is P04637?", child=child, limits=Limits(timeout=5))
    assert [a.strategy for a in outcome.attempts] == ["initial", "continuation"]
    assert outcome.result.output == "393 residues"
    history = model.requests[2]
    assert [type(m).__name__ for m in history] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "HumanMessage",
    ]
    assert history[2].content == "P04637: 393 residues"
    assert "Ran lookup" in str(history[3].content)
    assert outcome.attempts[1].result.failure is None
    assert outcome.state["langgraph"]["messages"][0]["type"] == "human"  # JSON data


async def test_a_retry_with_a_checkpointer_resumes_the_thread() -> None:
    """With a checkpointer, the thread id is kept in ctx.state; after a 429 that followed
    a tool call (partial), the continuation resumes the thread where it stopped: the
    model sees the earlier messages and the tool does not run again."""
    ran: list[str] = []

    @tool
    async def counted(protein: str) -> str:
        """Look a protein up, counting."""
        ran.append(protein)
        return "393 residues"

    with MessagesAPI([rate_limited(1)]) as api:
        model = ScriptedModel.of(calls("counted"), ASK_API, reply("done"), api=api)
        graph = react_graph(model, [counted], checkpointer=InMemorySaver())
        outcome = await recover(
            "How long?",
            child=LangGraphChild(graph),
            policy=RecoveryPolicy(),
            limits=Limits(timeout=5),
        )
    assert [a.strategy for a in outcome.attempts] == ["initial", "continuation"]
    assert outcome.result.output == "done"
    assert ran == ["P04637"]
    assert [type(m).__name__ for m in model.requests[2]] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
    ]
    thread = outcome.state["langgraph"]["thread_id"]
    snapshot = await graph.aget_state({"configurable": {"thread_id": thread}})
    assert snapshot.values["messages"][-1].content == "done"


async def test_a_tool_call_left_unanswered_gets_an_error_answer_on_the_retry() -> None:
    """A run ended by the idle timeout inside a tool leaves its call unanswered; the
    retry's history answers it with an error, so a provider would accept it."""
    child, model = agent(calls("stuck"), reply("gave up on it"), tools=(stuck,))
    outcome = await recover("x", child=child, limits=Limits(timeout=5, idle_timeout=0.5))
    assert outcome.result.output == "gave up on it"
    history = model.requests[1]
    answer = history[2]
    assert isinstance(answer, ToolMessage)
    assert answer.status == "error"
    assert answer.tool_call_id == history[1].tool_calls[0]["id"]
    assert isinstance(history[-1], HumanMessage)


async def test_an_enriched_retry_joins_the_thread_and_answers_the_blocked_call() -> None:
    """After a tool blocked on missing context, the enriched retry is new input on the
    checkpointed thread, after an error answer for the call that blocked."""

    @tool
    async def fetch(protein: str, config: RunnableConfig) -> str:
        """Fetch a protein."""
        child_context(config).block("missing_context", "Which organism?")

    model = ScriptedModel.of(calls("fetch"), reply("human p53"))
    child = LangGraphChild(react_graph(model, [fetch], checkpointer=InMemorySaver()))
    outcome = await recover(
        "Describe P04637", child=child, context_provider=lambda failure: {"organism": "human"}
    )
    assert [a.strategy for a in outcome.attempts] == ["initial", "enrichment"]
    assert outcome.result.output == "human p53"
    history = model.requests[1]
    assert [type(m).__name__ for m in history] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "HumanMessage",
    ]
    assert history[2].status == "error"
    assert "- organism: human" in str(history[3].content)


async def test_an_interrupted_thread_is_answered_by_the_enriched_retry() -> None:
    """An interrupt ends the run as missing_context with the question as the blocker; the
    context provider's answer, in the enriched prompt, resumes the checkpointed thread."""

    async def ask(state: MessagesState) -> dict[str, Any]:
        answer = interrupt("Which isoform of P04637?")
        return {"messages": [AIMessage(f"Answered with: {answer}")]}

    child = LangGraphChild(one_node("ask", ask).compile(checkpointer=InMemorySaver()))
    outcome = await recover(
        "Describe P04637", child=child, context_provider=lambda failure: {"isoform": "1"}
    )
    first = outcome.attempts[0].result.failure
    assert first is not None
    assert "Which isoform of P04637?" in (first.blocked_on or "")
    assert [a.strategy for a in outcome.attempts] == ["initial", "enrichment"]
    assert outcome.result.output is not None
    assert "- isoform: 1" in outcome.result.output


@pytest.mark.parametrize(
    ("run", "compiled", "where"),
    [
        ({"interrupt_before": ["tools"]}, {}, "before node 'tools' (interrupt_before)"),
        ({"interrupt_after": ["agent"]}, {}, "after node 'agent' (interrupt_after)"),
        ({}, {"interrupt_before": ["tools"]}, "before node 'tools' (interrupt_before)"),
    ],
    ids=["run-before", "run-after", "compiled-before"],
)
async def test_a_static_interrupt_is_missing_context_naming_its_node(
    run: dict[str, Any], compiled: dict[str, Any], where: str
) -> None:
    """A graph stopped at a breakpoint (``interrupt_before``/``_after``, given to the run
    or compiled in) ends with no question and no answer: missing_context naming the node
    it waits at, never a success with empty output."""
    ran: list[str] = []

    @tool
    async def approve(protein: str) -> str:
        """Approve a protein."""
        ran.append(protein)
        return "approved"

    model = ScriptedModel.of(calls("approve"), reply("approved"))
    graph = react_graph(model, [approve], checkpointer=InMemorySaver(), **compiled)
    result = await Supervisor(LangGraphChild(graph, **run)).delegate("x", timeout=5)
    assert result.failure is not None, result.output
    assert result.failure.category == "missing_context"
    assert where in (result.failure.blocked_on or "")
    assert (ran, len(model.requests)) == ([], 1)


async def test_a_breakpoint_compiled_into_a_subgraph_is_missing_context_too() -> None:
    """A subgraph compiled with a breakpoint, as a node of the graph lyra runs: the run
    stops there (LangGraph's own update says so), and it is missing_context naming the
    node of the graph it waits in, not an empty success."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class Draft(TypedDict):
        messages: list[Any]

    def draft(state: Draft) -> Draft:
        return {"messages": [*state["messages"], "draft"]}

    def publish(state: Draft) -> Draft:
        return {"messages": [*state["messages"], "PUBLISHED"]}

    inner = StateGraph(Draft)
    inner.add_node("draft", draft)
    inner.add_node("publish", publish)
    inner.add_edge(START, "draft")
    inner.add_edge("draft", "publish")
    inner.add_edge("publish", END)
    outer = StateGraph(Draft)
    outer.add_node("review", inner.compile(interrupt_before=["publish"]))
    outer.add_edge(START, "review")
    outer.add_edge("review", END)
    graph = outer.compile(checkpointer=InMemorySaver())
    child = LangGraphChild(graph, output=lambda state: " / ".join(map(str, state["messages"])))
    result = await Supervisor(child).delegate("x", timeout=5)
    assert result.failure is not None, result.output
    assert result.failure.category == "missing_context", result.report
    assert "before node 'review'" in (result.failure.blocked_on or "")


# -- traces -------------------------------------------------------------------------------------


async def test_the_attempt_span_carries_the_runs_usage_once() -> None:
    """LangGraph and langchain-core have no OpenTelemetry instrumentation (their source
    never names it), so lyra's invoke_agent span describes the run: its tokens, each
    response counted once."""
    for package in (langgraph, langchain_core):
        for folder in package.__path__:
            sources = Path(folder).rglob("*.py")
            assert not [f for f in sources if "opentelemetry" in f.read_text(encoding="utf-8")]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(tracer_provider=provider)
    try:
        child, _model = agent(calls("lookup"), reply("done"))
        await Supervisor(child).delegate("x", timeout=5)
    finally:
        tracing.configure()
        provider.shutdown()
    (span,) = exporter.get_finished_spans()
    assert span.name == "invoke_agent LangGraphChild"
    assert span.attributes is not None
    assert (span.attributes["gen_ai.usage.input_tokens"], span.attributes["lyra.turns"]) == (
        200,
        2,
    )


# -- exceptions ---------------------------------------------------------------------------------


def test_wrapped_and_status_bearing_framework_errors_are_refined() -> None:
    """A ToolException raised from a ConnectionError is transient; a generic ModelError
    with a 429 status is a rate limit; a node's idle timeout is idle."""
    wrapped = ToolException("lookup failed")
    wrapped.__cause__ = ConnectionResetError("reset")  # raise ToolException(...) from exc
    assert (describe(wrapped).kind, describe(wrapped).error_type) == (Kind.TRANSIENT, "connection")
    status_error = ModelError("slow down")
    status_error.status_code = 429  # type: ignore[attr-defined]
    assert describe(status_error).error_type == "rate_limit"
    idle = NodeTimeoutError("n", 1.0, kind="idle", idle_timeout=0.5)
    assert (describe(idle).kind, describe(idle).error_type) == (Kind.BUDGET, "idle")
    overflow = ContextOverflowError("rejected")  # by its class, whatever its words
    assert (describe(overflow).kind, describe(overflow).error_type) == (
        Kind.CONTEXT_OVERFLOW,
        "context_overflow",
    )


def test_streamed_tokens_are_heartbeats() -> None:
    """on_llm_new_token is progress (a long streamed answer is not idle)."""
    from lyra.children._langgraph_hooks import LyraCallbacks
    from lyra.children._meter import Meter
    from lyra.children._pricing import PriceList

    beats: list[int] = []

    class Ctx:
        account = None

        def heartbeat(self) -> None:
            beats.append(1)

    hooks = LyraCallbacks(Meter(Ctx(), PriceList(), child="LangGraphChild"))  # type: ignore[arg-type]
    anyio.run(lambda: hooks.on_llm_new_token("tok", chunk=None, run_id=None))  # type: ignore[arg-type]
    assert beats == [1]


@pytest.mark.parametrize(
    ("metadata", "raised"),
    [
        ({"finish_reason": "content_filter"}, TaskRejected),
        ({"stop_reason": "refusal"}, TaskRejected),
        ({"finish_reason": "SAFETY"}, TaskRejected),
        ({"finish_reason": "length"}, IncompleteOutput),
        ({"stop_reason": "max_tokens"}, IncompleteOutput),
        ({"finish_reason": "stop"}, None),
    ],
)
def test_an_answer_the_provider_withheld_is_a_refusal_never_a_success(
    metadata: dict[str, str], raised: type[Exception] | None
) -> None:
    """The graph's last answer says in its response_metadata that the provider withheld
    it (a content filter, a refusal, a safety block): the task was refused (invalid_task),
    never a success with the filtered text; cut off at the output limit it is partial."""
    from langchain_core.messages import AIMessage

    from lyra.children.langgraph import _answer

    state = {"messages": [AIMessage("Sure, here is how", response_metadata=metadata)]}
    if raised is None:
        assert _answer(state) == "Sure, here is how"
        return
    with pytest.raises(raised):
        _answer(state)


async def test_a_cancellation_a_node_raised_is_a_foreign_one_as_on_every_framework() -> None:
    """A node that awaits a future someone else cancelled: LangGraph's NodeCancelledError
    is the cancellation nobody made of the run, the child's own failure (tool_error,
    retryable), as pydantic-ai's child gives it; it was rule 10's unrecognised error,
    never retried."""

    async def awaits_a_cancelled_future(state: MessagesState) -> dict[str, Any]:
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        await future
        return {}

    graph = one_node("fetch", awaits_a_cancelled_future).compile()
    result = await Supervisor(LangGraphChild(graph)).delegate("x", timeout=5)
    failure = result.failure
    assert failure is not None
    assert (failure.category, failure.retryable) == ("tool_error", True)
    assert "cancelled from outside the delegation" in failure.evidence
    assert "'fetch'" in failure.message
