"""One delegation tree over agents of different frameworks: a parent agent on one
framework whose tool delegates, through the context its framework hands the tool, to
a child agent on another, under one budget and one deadline."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from fakes.langchain_models import ScriptedModel, react_graph, reply
from lyra import Budget, ChildContext, Supervisor, parse_report
from lyra.children.langgraph import LangGraphChild, child_context
from lyra.children.pydantic_ai import PydanticAIChild

pytestmark = pytest.mark.anyio


def runaway_graph_child() -> LangGraphChild:
    """A LangGraph agent that calls its tool for ever (100 + 20 tokens a response)."""

    def lookup(protein: str) -> str:
        """Look a protein up."""
        return f"{protein}: 393 residues"

    def forever() -> Any:
        while True:
            yield reply("", ("lookup", {"protein": "P04637"}))

    return LangGraphChild(react_graph(ScriptedModel.of(forever()), [lookup]))


def pydantic_ai_parent(consulted: list[Any]) -> PydanticAIChild:
    """A pydantic-ai agent that asks a LangGraph expert (its tool), then answers with
    what came back; 100 + 10 tokens a response."""
    turns = iter(
        [
            ModelResponse(
                parts=[ToolCallPart("ask_expert", {"question": "How long is P04637?"})],
                usage=RequestUsage(input_tokens=100, output_tokens=10),
            ),
            ModelResponse(
                parts=[TextPart("answered without the expert")],
                usage=RequestUsage(input_tokens=100, output_tokens=10),
            ),
        ]
    )

    async def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return next(turns)

    agent: Agent[ChildContext, str] = Agent(FunctionModel(script), deps_type=ChildContext)

    @agent.tool
    async def ask_expert(ctx: RunContext[ChildContext], question: str) -> str:
        """Ask the expert agent (LangGraph) under this tree's limits."""
        result = await ctx.deps.delegate(
            question, child=runaway_graph_child(), budget=Budget(max_turns=3)
        )
        consulted.append(result)
        return result.output if result.ok else f"the expert failed: {result.report}"

    return PydanticAIChild(agent)


def langgraph_parent(consulted: list[Any]) -> LangGraphChild:
    """A LangGraph agent whose tool asks a pydantic-ai expert that runs away."""

    async def ask_expert(question: str, config: RunnableConfig) -> str:
        """Ask the expert agent (pydantic-ai) under this tree's limits."""
        ctx = child_context(config)

        async def forever(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            return ModelResponse(
                parts=[ToolCallPart("lookup", {"q": "P04637"})],
                usage=RequestUsage(input_tokens=100, output_tokens=20),
            )

        expert: Agent[ChildContext, str] = Agent(FunctionModel(forever), deps_type=ChildContext)
        expert.tool_plain(lambda q: f"found {q}", name="lookup")
        result = await ctx.delegate(
            question, child=PydanticAIChild(expert), budget=Budget(max_turns=3)
        )
        consulted.append(result)
        return result.output if result.ok else f"the expert failed: {result.report}"

    model = ScriptedModel.of(
        reply("", ("ask_expert", {"question": "How long is P04637?"}), tokens=(100, 10)),
        AIMessage("answered without the expert", usage_metadata={
            "input_tokens": 100, "output_tokens": 10, "total_tokens": 110
        }),
    )  # fmt: skip
    return LangGraphChild(react_graph(model, [ask_expert]))


@pytest.mark.parametrize(
    "parent",
    [pydantic_ai_parent, langgraph_parent],
    ids=["pydantic-ai → LangGraph", "LangGraph → pydantic-ai"],
)
async def test_a_tree_of_two_frameworks_keeps_one_budget_and_one_report(parent: Any) -> None:
    """The grandchild (another framework) runs under the parent's deadline and account:
    stopped by its own share of turns, its failure is a result the parent's agent reads,
    the parent's report lists it, and the tree's usage holds both frameworks' spend."""
    consulted: list[Any] = []
    supervisor = Supervisor(parent(consulted), budget=Budget(max_turns=10, max_tokens=5_000))
    result = await supervisor.delegate("Triage issue 42", timeout=10)

    assert result.ok, result.report
    [grandchild] = consulted
    assert grandchild.failure is not None
    assert (grandchild.failure.category, grandchild.failure.error_type) == ("timeout", "budget")
    assert grandchild.parent_session_id == result.session_id
    assert grandchild.usage is not None
    assert grandchild.usage.turns == 3  # its own share, charged ahead, never overshot
    report = parse_report(result.report)
    [failed] = report.failed_delegations
    assert (failed.session_id, failed.category, failed.error_type) == (
        grandchild.session_id,
        "timeout",
        "budget",
    )
    assert result.usage is not None
    assert result.usage.turns == 2 + 3  # the parent's two model calls and the grandchild's
    assert result.usage.tokens > grandchild.usage.tokens > 0
    assert supervisor.account is not None
    assert supervisor.account.usage == result.usage  # one account for the whole tree


# -- the wrong object, refused at once --------------------------------------------------


def test_an_agent_of_a_framework_given_as_a_child_names_its_wrapper() -> None:
    """A pydantic-ai Agent has an async run, but not a child's: refused before any run,
    naming the child that wraps it (it used to fail at run time with a TypeError)."""
    from lyra import delegate_task
    from lyra.errors import ConfigurationError

    agent = Agent(FunctionModel(lambda messages, info: ModelResponse([TextPart("hi")])))
    with pytest.raises(ConfigurationError, match=r"wrap it in lyra\.children\.pydantic_ai\."):
        delegate_task("Hello", child=agent, timeout=5)
    with pytest.raises(ConfigurationError, match="LangGraphChild"):
        delegate_task("Hello", child=react_graph(ScriptedModel.of(iter([])), []), timeout=5)


def test_a_users_own_child_in_a_package_named_like_a_framework_still_runs() -> None:
    """Only the frameworks' own agent classes are refused, not every class of a module
    whose package shares a framework's name (``agents`` is a common one)."""
    from lyra import delegate_task

    class Researcher:
        async def run(self, prompt: str, ctx: ChildContext) -> str:
            return f"researched {prompt}"

    Researcher.__module__ = "agents.research"
    assert parse_report(delegate_task("P04637", child=Researcher(), timeout=5)).output == (
        "researched P04637"
    )


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: PydanticAIChild("an agent"), r"wraps a pydantic_ai.Agent; got 'an agent'"),
        (
            lambda: PydanticAIChild(react_graph(ScriptedModel.of(iter([])), [])),
            r"got a langgraph\..*\(for that, use LangGraphChild\)",
        ),
        (
            lambda: LangGraphChild(Agent(FunctionModel(lambda m, i: ModelResponse([])))),
            r"wraps a compiled LangGraph graph; got a pydantic_ai\..*use PydanticAIChild",
        ),
        (
            lambda: openai_agents_child(Agent(FunctionModel(lambda m, i: ModelResponse([])))),
            r"wraps an agents.Agent; got a pydantic_ai\..*use PydanticAIChild",
        ),
        (lambda: LangGraphChild(uncompiled_graph()), r"call its \.compile\(\) first"),
        (
            lambda: PydanticAIChild(any_agent(), usage_limits=5),
            r"usage_limits= must be of type UsageLimits; got 5",
        ),
        (lambda: PydanticAIChild(any_agent(), make_deps=3), r"make_deps= must be callable"),
        (
            lambda: PydanticAIChild(any_agent(), prices={"acme": 1.0}),
            r"prices= maps model-name prefixes to lyra.children.Price; got 'acme': 1.0",
        ),
        (
            lambda: LangGraphChild(
                react_graph(ScriptedModel.of(iter([])), []), recursion_limit="9"
            ),
            r"recursion_limit= must be of type int; got '9'",
        ),
        (
            lambda: LangGraphChild(react_graph(ScriptedModel.of(iter([])), []), durabilty="sync"),
            r"unexpected options \['durabilty'\].*durability",
        ),
    ],
    ids=[
        "not-an-agent",
        "a-graph-to-pydantic-ai",
        "an-agent-to-langgraph",
        "an-agent-to-openai-agents",
        "uncompiled",
        "usage-limits",
        "make-deps",
        "prices",
        "recursion-limit",
        "typo",
    ],
)
def test_a_framework_child_refuses_what_it_cannot_run_when_it_is_built(
    build: Any, message: str
) -> None:
    """The wrong object or a misspelt option is a TypeError at construction, naming what
    was expected, not an AttributeError classified as a tool error on every run."""
    with pytest.raises(TypeError, match=message):
        build()


def test_a_framework_limit_below_one_is_refused_when_the_child_is_built() -> None:
    """A framework's own limit of 0 (or less) would fail every run as out of budget: a
    ValueError at construction instead."""
    import agents

    from lyra.children.openai_agents import OpenAIAgentsChild

    graph = react_graph(ScriptedModel.of(iter([])), [])
    with pytest.raises(ValueError, match=r"LangGraphChild's recursion_limit= must be at least 1"):
        LangGraphChild(graph, recursion_limit=0)
    for turns in (0, -1):
        with pytest.raises(ValueError, match=r"OpenAIAgentsChild's max_turns= must be at least"):
            OpenAIAgentsChild(agents.Agent(name="a"), max_turns=turns)
    assert OpenAIAgentsChild(agents.Agent(name="a"), max_turns=None)  # no SDK limit


def any_agent() -> Agent[None, str]:
    return Agent(FunctionModel(lambda messages, info: ModelResponse([TextPart("hi")])))


def openai_agents_child(agent: Any) -> Any:
    from lyra.children.openai_agents import OpenAIAgentsChild

    return OpenAIAgentsChild(agent)


def uncompiled_graph() -> Any:
    from typing import TypedDict

    from langgraph.graph import StateGraph

    class State(TypedDict):
        text: str

    graph = StateGraph(State)
    graph.add_node("echo", lambda state: state)
    graph.set_entry_point("echo")
    return graph


async def test_a_langgraph_run_that_lyra_stops_logs_no_callback_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """langchain-core logs every exception a callback handler raises; lyra's own stop
    (here the budget) is not an error to log: the report says it, stderr stays quiet."""
    caplog.set_level("WARNING")
    result = await Supervisor(runaway_graph_child(), budget=Budget(max_tokens=500)).delegate(
        "Look P04637 up", timeout=30
    )
    assert result.failure is not None
    assert (result.failure.category, result.failure.error_type) == ("timeout", "budget")
    assert [r.getMessage() for r in caplog.records if "LyraCallbacks" in r.getMessage()] == []
