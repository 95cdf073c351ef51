"""The field failures through each framework's own run (DESIGN §3, §13), beyond the
contract suite's rows (loops and tool-call budgets are there, for every framework):
the note on the last identical call, an agent asking its question through a tool
and seeing its limits when asked to, cancellations nobody made, and a token
hammer -- with each framework's own test model (pydantic-ai's FunctionModel, the
OpenAI Agents SDK on the local OpenAI API, langchain-core's fake chat model)."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from fakes.langchain_models import ScriptedModel, react_graph, reply
from fakes.openai_api import OpenAIAPI, call, message, tool_calls
from lyra import Budget, ChildContext, Supervisor, parse_report
from lyra.children._framework import contained
from lyra.children.langgraph import LangGraphChild, ask_tool
from lyra.children.openai_agents import OpenAIAgentsChild
from lyra.children.pydantic_ai import PydanticAIChild
from lyra.errors import ForeignCancellation
from test_child_openai_agents import _sdk_tracing_off, agent_for, client_for
from test_child_pydantic_ai import Script, answer, scripted_agent
from test_child_pydantic_ai import call as pai_call

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures(_sdk_tracing_off.__name__)]
__all__ = ["client_for"]  # the fixture, found by pytest here too


def langgraph_lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


# -- pydantic-ai ----------------------------------------------------------------------------


async def test_pydantic_ai_a_loop_is_noted_then_stopped() -> None:
    """The model calling one tool with the same arguments: the last call allowed carries
    lyra's note back to the model, the next ends the run as timeout / loop."""
    script = Script(then=pai_call("lookup", q="p53"))
    result = await Supervisor(PydanticAIChild(scripted_agent(script)), max_repeats=3).delegate(
        "x", timeout=5
    )
    assert result.failure is not None
    assert (result.failure.category, result.failure.error_type) == ("timeout", "loop")
    assert len(script.requests) == 4  # the fourth call was never run
    told = [
        part
        for part in script.requests[3][-1].parts
        if isinstance(script.requests[3][-1], ModelRequest)
    ]
    assert any("called 3 times with these same arguments" in str(part.content) for part in told)


async def test_pydantic_ai_asks_through_its_tool_and_sees_its_limits() -> None:
    """ask_tool=True: the model's ask_question reaches answer=; show_limits=True: every
    request's instructions say what is left."""
    script = Script(pai_call("ask_question", question="Which organism?"), answer("human p53"))
    agent: Agent[ChildContext, Any] = Agent(FunctionModel(script, model_name="scripted"))
    child = PydanticAIChild(agent, ask_tool=True, show_limits=True)
    supervisor = Supervisor(child, budget=Budget(max_turns=5), answer=lambda q: "Homo sapiens")
    result = await supervisor.delegate("x", timeout=60)
    assert result.output == "human p53"
    returned = [part for part in script.requests[1][-1].parts if isinstance(part, ToolReturnPart)]
    assert returned[0].content == "Homo sapiens"
    first = script.requests[0][0]
    assert isinstance(first, ModelRequest)
    assert "Limits of this task:" in (first.instructions or "")
    assert "5 model turns" in (first.instructions or "")


# -- the OpenAI Agents SDK ----------------------------------------------------------------------


async def test_openai_agents_asks_through_its_tool_and_sees_its_limits(client_for: Any) -> None:
    """ask_tool=True adds ask_question (answered through answer=); show_limits=True puts
    the time and budget left in every request's instructions."""
    asked = tool_calls(call("ask_question", {"question": "Which organism?"}))
    with OpenAIAPI([asked, message("human p53")]) as api:
        child = OpenAIAgentsChild(agent_for(client_for(api)), ask_tool=True, show_limits=True)
        supervisor = Supervisor(child, answer=lambda q: "Homo sapiens")
        result = await supervisor.delegate("x", timeout=60)
    assert result.output == "human p53"
    system = api.requests[0]["messages"][0]
    assert system["role"] == "system"
    assert "Do the task." in system["content"]
    assert "Limits of this task:" in system["content"]
    tool_result = [m for m in api.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_result[0]["content"] == "Homo sapiens"


# -- LangGraph -------------------------------------------------------------------------------------


async def test_langgraph_asks_with_the_ask_tool_and_sees_its_limits() -> None:
    """ask_tool() in the graph's tools asks through ctx.ask; show_limits=True opens the
    input with the limits as a system message."""
    model = ScriptedModel.of(
        reply("", ("ask_question", {"question": "Which organism?"})), reply("human p53")
    )
    graph = react_graph(model, [ask_tool()])
    child = LangGraphChild(graph, show_limits=True)
    result = await Supervisor(child, answer=lambda q: "Homo sapiens").delegate("x", timeout=60)
    assert parse_report(result.report).output == "human p53"
    first = model.requests[0]
    assert first[0].type == "system"
    assert "Limits of this task:" in str(first[0].content)
    assert json.dumps("Homo sapiens") in json.dumps([str(m.content) for m in model.requests[1]])


# -- cancellations nobody made, inside a framework's run -----------------------------------------


@pytest.mark.parametrize("where", ["model", "tool"])
async def test_pydantic_ai_a_cancelled_error_nobody_made_is_a_failure(where: str) -> None:
    """A CancelledError from the model or a tool (a future someone else cancelled) ends
    the run as the child's own retryable failure, never as a lost result."""

    async def model(messages: list[Any], info: Any) -> Any:
        if where == "model":
            raise asyncio.CancelledError
        return pai_call("boom") if len(messages) == 1 else answer("never")

    agent: Agent[ChildContext, Any] = Agent(FunctionModel(model, model_name="scripted"))

    @agent.tool_plain
    async def boom() -> str:
        """Await a shared fetch."""
        raise asyncio.CancelledError

    result = await Supervisor(PydanticAIChild(agent)).delegate("x", timeout=5)
    assert result.failure is not None
    assert result.failure.suggested_retry
    assert "cancelled from outside the delegation" in result.failure.message


def _agent_with_tool(tool: Any) -> Agent[ChildContext, Any]:
    """A pydantic-ai agent whose model calls ``tool`` once, then answers."""

    async def model(messages: list[Any], info: Any) -> Any:
        return pai_call(tool.__name__) if len(messages) == 1 else answer("done")

    agent: Agent[ChildContext, Any] = Agent(FunctionModel(model, model_name="scripted"))
    agent.tool_plain(tool)
    return agent


async def test_a_run_stopped_twice_still_ends_before_its_delegation() -> None:
    """The deadline stops the run, then the caller cancels too while a tool's shielded
    cleanup still runs: the delegation ends only once the run has (nothing left running
    behind it, nothing charged after it)."""
    cleaned: list[str] = []

    async def fetch() -> str:
        """Fetch something slow."""
        try:
            await anyio.sleep(10)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.2)  # closing a session
                cleaned.append("cleanup done")
        return "never"

    supervisor = Supervisor(PydanticAIChild(_agent_with_tool(fetch)))
    task = asyncio.ensure_future(supervisor.delegate("x", timeout=0.05))
    await asyncio.sleep(0.1)  # the deadline fired; the tool cleans up
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == ["cleanup done"]


async def test_a_generator_exit_raised_as_the_run_stops_is_the_runs_failure() -> None:
    """A framework's run that raises GeneratorExit as lyra's deadline stops it: it comes
    back as the run's own failure (ForeignCancellation), never as a GeneratorExit
    that would pass through the delegation."""

    async def run() -> str:
        try:
            await anyio.sleep(10)
        except asyncio.CancelledError:
            raise GeneratorExit("a cleanup raised it") from None
        return "never"

    with pytest.raises(ForeignCancellation), anyio.move_on_after(0.05):
        await contained(run())


async def test_openai_agents_a_model_raising_cancelled_error_is_a_failure() -> None:
    """An OpenAI Agents model whose call meets a cancelled future: the child's failure."""
    from agents import Agent as SDKAgent
    from agents.models.interface import Model

    class Cancelled(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            raise asyncio.CancelledError

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    agent = SDKAgent(name="worker", instructions="Do the task.", model=Cancelled())
    result = await Supervisor(OpenAIAgentsChild(agent)).delegate("x", timeout=5)
    assert result.failure is not None
    assert "cancelled from outside the delegation" in result.failure.message


async def test_openai_agents_a_tool_raising_generator_exit_is_a_failure(client_for: Any) -> None:
    """A tool raising GeneratorExit inside the SDK's run (which Python would re-raise in
    every coroutine awaiting it): the child's failure, the event loop untouched."""
    from agents import function_tool

    @function_tool
    async def shared_fetch() -> str:
        """Await a shared fetch."""
        raise GeneratorExit

    with OpenAIAPI([tool_calls(call("shared_fetch", {}))], strict=False) as api:
        agent = agent_for(client_for(api), shared_fetch)
        child = OpenAIAgentsChild(agent, tool_errors="raise")
        result = await Supervisor(child).delegate("x", timeout=5)
    assert result.failure is not None
    assert "cancelled from outside the delegation" in result.failure.message


# -- tokens reserved ahead: a hammer ---------------------------------------------------------------


def honest_model(output: int = 300) -> FunctionModel:
    """A model whose usage is what a real one reports: input about one token per four
    bytes of the text it was sent, output at most the request's max_tokens."""

    async def answer_once(messages: list[Any], info: Any) -> Any:
        from pydantic_ai.messages import ModelResponse, TextPart
        from pydantic_ai.usage import RequestUsage

        await asyncio.sleep(random.random() * 0.01)
        text = [str(getattr(part, "content", "")) for m in messages for part in m.parts]
        sent = sum(len(t.encode()) for t in text) // 4
        limit = (info.model_settings or {}).get("max_tokens") or output
        return ModelResponse(
            parts=[TextPart("done")],
            usage=RequestUsage(input_tokens=sent, output_tokens=min(output, limit)),
        )

    return FunctionModel(answer_once, model_name="scripted")


class DeclaresItsLimit(ScriptedModel):
    """A chat model that declares its output limit (as ChatAnthropic's max_tokens does),
    which lyra holds in full: a callback cannot lower it."""

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"max_tokens": 300}


def langgraph_grandchild() -> LangGraphChild:
    turns = itertools.repeat(reply("done", tokens=(2, 300)))  # the input, "part n": 2 tokens
    return LangGraphChild(react_graph(DeclaresItsLimit.of(turns), [langgraph_lookup]))


def adk_grandchild() -> Any:
    """An ADK agent whose model writes 300 tokens, or fewer when the request caps it."""
    from google.adk.agents import LlmAgent

    from fakes.adk_models import ScriptedLlm, reply
    from lyra.children.google_adk import GoogleADKChild

    class Honest(ScriptedLlm):
        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            cap = llm_request.config.max_output_tokens or 300
            yield reply("done", tokens=(2, min(300, cap)))

    agent = LlmAgent(name="part", model=Honest.of(), instruction="Do it.")
    return GoogleADKChild(agent)


@pytest.mark.parametrize("framework", ["pydantic-ai", "langgraph", "google-adk"])
async def test_parallel_grandchildren_never_take_a_tree_past_max_tokens(framework: str) -> None:
    """Eight grandchildren asking at once, on budgets from tight to loose, over many
    trials: every request's worst case is held before it is sent, so the tree's
    charged tokens never pass max_tokens (they did by up to 2x the largest response
    when tokens were only charged as responses arrived)."""
    rng = random.Random(7)
    build = {
        "pydantic-ai": lambda: PydanticAIChild(Agent(honest_model())),
        "google-adk": adk_grandchild,
        "langgraph": langgraph_grandchild,
    }[framework]
    grandchildren = [build() for _ in range(8)]  # built once, asked in every trial

    async def parent(prompt: str, ctx: ChildContext) -> str:
        async with anyio.create_task_group() as group:
            for n, child in enumerate(grandchildren):
                group.start_soon(lambda n=n, child=child: ctx.delegate(f"part {n}", child=child))
        return "all asked"

    over = []
    for _ in range(15):
        limit = rng.randint(500, 12_000)
        result = await Supervisor(parent, budget=Budget(max_tokens=limit)).delegate("x", timeout=10)
        spent = result.usage.tokens if result.usage else 0
        if spent > limit:
            over.append((limit, spent))
    assert over == []


# -- nothing imported inside a deadline ----------------------------------------------------------

FIRST_RUN = """
import json, os, sys, anyio
os.environ["ANTHROPIC_API_KEY"] = os.environ["OPENAI_API_KEY"] = "k"
os.environ["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"
from lyra import Supervisor
if sys.argv[1] == "pydantic-ai":
    from pydantic_ai import Agent
    from lyra.children.pydantic_ai import PydanticAIChild
    child = PydanticAIChild(Agent(), model="openai:gpt-4o")
else:
    import agents
    agents.set_tracing_disabled(True)
    from lyra.children.openai_agents import OpenAIAgentsChild
    child = OpenAIAgentsChild(agents.Agent(name="w", model="gpt-4o"))
before = set(sys.modules)
async def main():
    await Supervisor(child).delegate("x", timeout=10)
    print(json.dumps(sorted(set(sys.modules) - before)))
anyio.run(main)
"""


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["pydantic-ai", "openai-agents"])
def test_a_first_run_imports_nothing_of_the_framework_or_its_provider(framework: str) -> None:
    """A child whose model is named by a string builds (and imports) the provider's SDK
    and HTTP stack when the child is built, so a cold process's first delegation
    imports none of it inside its deadline (it did: 71 modules of the OpenAI client's
    HTTP stack, about a second in a cold process)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", FIRST_RUN, framework],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    imported = json.loads(done.stdout)
    heavy = ("pydantic_ai", "agents", "openai", "anthropic", "httpx", "httpcore", "h11", "lyra")
    assert [name for name in imported if name.startswith(heavy)] == []
