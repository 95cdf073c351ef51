"""GoogleADKChild: what is particular to Google ADK (the contract every framework child
keeps is tests/test_framework_contract.py), on ADK's own runner with a scripted model
of its model interface (tests/fakes/adk_models.py)."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import time
from typing import Any

import anyio
import pydantic
import pytest
from google.adk.agents import LlmAgent, LoopAgent, ParallelAgent, SequentialAgent
from google.adk.agents.run_config import RunConfig, StreamingMode, ToolThreadPoolConfig
from google.adk.apps import App
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools import LongRunningFunctionTool
from google.adk.workflow import START, Workflow
from google.genai import types

from fakes.adk_models import ScriptedLlm, http_error, reply, tool_results
from lyra import Budget, Supervisor, parse_report
from lyra.children.google_adk import GoogleADKChild, current_context
from lyra.delegation._foreign import Kind, describe

pytestmark = pytest.mark.anyio


def lookup(protein: str) -> str:
    """Look a protein up."""
    return f"{protein}: 393 residues"


def llm_agent(name: str, *turns: Any, **options: Any) -> tuple[LlmAgent, ScriptedLlm]:
    """An LlmAgent with the lookup tool on a scripted model."""
    model = ScriptedLlm.of(*turns)
    options.setdefault("tools", [lookup])
    return LlmAgent(name=name, model=model, instruction="Do the task.", **options), model


def calls(*names: str) -> Any:
    return reply("", *((name, {"protein": "P04637"}) for name in names))


async def delegate(child: Any, **limits: Any) -> Any:
    budget = limits.pop("budget", None)
    limits.setdefault("timeout", 5)
    return await Supervisor(child, budget=budget).delegate("How long is P04637?", **limits)


# -- workflow agents --------------------------------------------------------------------


async def test_a_sequential_workflow_answers_with_its_last_agents_answer() -> None:
    """A SequentialAgent runs its agents in order on one session: the result is the last
    agent's answer, every agent's model turns and tool calls are charged and counted."""
    finder, finder_model = llm_agent("finder", calls("lookup"), reply("393 residues"))
    writer, writer_model = llm_agent("writer", reply("P04637 has 393 residues."), tools=[])
    with pytest.warns(DeprecationWarning, match="in favor of Workflow"):
        pipeline = SequentialAgent(name="pipeline", sub_agents=[finder, writer])
    child = GoogleADKChild(pipeline)
    result = await delegate(child)
    assert result.output == "P04637 has 393 residues.", result.report
    assert (result.usage.turns, result.usage.input_tokens) == (3, 300)
    assert tool_results(finder_model.requests[1]) == ["P04637: 393 residues"]
    assert len(writer_model.requests) == 1
    assert parse_report(result.report).turns == 3


async def test_an_agent_that_answered_is_work_done_when_a_later_one_fails() -> None:
    """A workflow's agent that gave its answer did work: a later agent's failure is
    partial (a continuation replays the session past it), not the first failure of a
    run that did nothing (tool_error, not retried)."""

    def broken(protein: str) -> str:
        """Look a protein up."""
        raise RuntimeError("the index is corrupt")

    finder, _ = llm_agent("finder", reply("393 residues"), tools=[])
    writer, _ = llm_agent("writer", reply("", ("broken", {"protein": "P04637"})), tools=[broken])
    with pytest.warns(DeprecationWarning, match="in favor of Workflow"):
        pipeline = SequentialAgent(name="pipeline", sub_agents=[finder, writer])
    result = await delegate(GoogleADKChild(pipeline))
    failure = result.failure
    assert failure is not None
    assert (failure.category, failure.retryable) == ("partial", True), result.report
    assert failure.completed_steps == ("Agent finder answered",)


async def test_a_graph_workflow_of_agents_runs_under_the_same_limits() -> None:
    """ADK 2's Workflow (a graph of nodes) goes in as it is: its agents' turns and
    tokens are charged, and the last agent's answer is the result."""
    finder, _ = llm_agent("finder", calls("lookup"), reply("393 residues"))
    writer, _ = llm_agent("writer", reply("P04637 has 393 residues."), tools=[])
    flow = Workflow(name="flow", edges=[(START, finder), (finder, writer)])
    result = await delegate(GoogleADKChild(flow), budget=Budget(max_tokens=10_000))
    assert result.output == "P04637 has 393 residues.", result.report
    assert result.usage.turns == 3


async def test_a_turn_budget_holds_across_parallel_agents() -> None:
    """Two agents of a ParallelAgent that never stop draw on one account: turns are
    charged ahead in lyra's plugin, so no more than max_turns requests are made."""

    def runaway() -> Any:
        while True:
            yield calls("lookup")

    left, left_model = llm_agent("left", runaway())
    right, right_model = llm_agent("right", runaway())
    with pytest.warns(DeprecationWarning, match="in favor of Workflow"):
        both = ParallelAgent(name="both", sub_agents=[left, right])
    child = GoogleADKChild(both)
    result = await delegate(child, budget=Budget(max_turns=5))
    assert len(left_model.requests) + len(right_model.requests) <= 5
    assert result.usage.turns == 5
    assert (result.failure.category, result.failure.error_type) == ("timeout", "budget")


@pytest.mark.parametrize("slow", ["left", "right"])
async def test_a_parallel_agents_result_is_the_branch_that_finished_last(slow: str) -> None:
    """As documented: a ParallelAgent's result is the answer of whichever branch finished
    last (timing, not the order of its sub_agents), not a join of the branches."""
    left, _ = llm_agent("left", *([0.1] if slow == "left" else []), reply("left's"), tools=[])
    right, _ = llm_agent("right", *([0.1] if slow == "right" else []), reply("right's"), tools=[])
    with pytest.warns(DeprecationWarning, match="in favor of Workflow"):
        both = ParallelAgent(name="both", sub_agents=[left, right])
    result = await delegate(GoogleADKChild(both))
    assert result.output == f"{slow}'s", result.report


async def test_a_loop_agents_own_limit_counts_every_model_call() -> None:
    """A LoopAgent without an end keeps asking; ADK's max_llm_calls (RunConfig) stops it,
    timeout/budget, never a success; the request ADK refuses is not charged a turn."""

    def runaway() -> Any:
        while True:
            yield reply("again")

    agent, model = llm_agent("step", runaway(), tools=[])
    with pytest.warns(DeprecationWarning, match="in favor of Workflow"):
        loop = LoopAgent(name="loop", sub_agents=[agent])
    child = GoogleADKChild(loop, run_config=RunConfig(max_llm_calls=3))
    result = await delegate(child)
    assert (result.failure.category, result.failure.error_type) == ("timeout", "budget")
    assert "LlmCallsLimitExceededError" in result.failure.evidence
    assert len(model.requests) == result.usage.turns == 3  # the refused one is not charged


async def test_a_loop_ended_by_exit_loop_answers_with_its_last_answer() -> None:
    """'A LoopAgent stopped by ADK's exit_loop tool "succeeds" with an empty answer':
    the tool's response, final for ADK (it skips summarization), took the place of the
    worker's answer the docs promise, the last one before the loop stopped."""
    from google.adk.tools import exit_loop

    worker, _ = llm_agent("worker", reply("draft v1"), reply("draft v2"), tools=[])
    judge, _ = llm_agent("judge", reply("needs work"), reply("", ("exit_loop", {})))
    judge.tools = [exit_loop]
    with pytest.warns(DeprecationWarning, match="in favor of Workflow"):
        loop = LoopAgent(name="refine", sub_agents=[worker, judge], max_iterations=5)
    result = await delegate(GoogleADKChild(loop))
    assert (result.ok, result.output) == (True, "draft v2"), result.report


@pytest.mark.parametrize("workflow", [LoopAgent, SequentialAgent])
async def test_a_workflow_stopped_by_the_budget_leaves_no_exception_unread(
    workflow: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A workflow agent whose next model request lyra refuses ends its run's task with
    ADK's wrapper of the refusal as the attempt is cancelled: timeout/budget, and the
    task's exception is read (asyncio logs "Task exception was never retrieved")."""

    def runaway() -> Any:
        while True:
            yield reply("again")

    steps = [llm_agent(f"step{i}", runaway(), tools=[])[0] for i in range(3)]
    with pytest.warns(DeprecationWarning, match="in favor of Workflow"):
        agent = workflow(name="flow", sub_agents=steps)
    result = await delegate(GoogleADKChild(agent), budget=Budget(max_turns=2))
    assert (result.failure.category, result.failure.error_type) == ("timeout", "budget")
    gc.collect()
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


# -- the result ---------------------------------------------------------------------------


class Length(pydantic.BaseModel):
    protein: str
    residues: int


async def test_output_key_reads_the_result_from_the_session_state() -> None:
    """With output_key, the result is what the agent kept in the session state (its
    output_schema answer, as JSON text)."""
    agent, _model = llm_agent(
        "measure",
        reply('{"protein": "P04637", "residues": 393}'),
        tools=[],
        output_schema=Length,
        output_key="length",
    )
    result = await delegate(GoogleADKChild(agent, output_key="length"))
    assert pydantic.TypeAdapter(Length).validate_json(result.output) == Length(
        protein="P04637", residues=393
    )


async def test_an_answer_its_output_schema_rejects_is_partial_verification() -> None:
    """'ADK's own output_schema check is classified as bad input': pydantic's error, which
    ADK raises as it saves the answer, read as the task's input failing validation
    (invalid_task, never retried). The framework rejected a claimed success: partial /
    verification, retryable, as the README's table has it."""
    agent, _model = llm_agent(
        "measure", reply('{"protein": "P04637"}'), tools=[], output_schema=Length, output_key="n"
    )
    result = await delegate(GoogleADKChild(agent))
    failure = result.failure
    assert (failure.category, failure.error_type) == ("partial", "verification"), failure.evidence
    assert failure.suggested_retry
    assert "output_schema" in failure.evidence


@pytest.mark.parametrize(
    ("finish", "category"),
    [(types.FinishReason.MAX_TOKENS, "partial"), (types.FinishReason.SAFETY, "invalid_task")],
    ids=["max_tokens", "safety"],
)
async def test_a_final_answer_cut_off_or_refused_is_no_success(
    finish: types.FinishReason, category: str
) -> None:
    """ADK makes an answer stopped at MAX_TOKENS or by SAFETY a final response like any
    other: lyra fails it, as partial and invalid_task."""
    agent, _model = llm_agent("writer", reply("The root cause is", finish_reason=finish))
    result = await delegate(GoogleADKChild(agent))
    assert result.failure is not None, result.report
    assert result.failure.category == category
    assert finish.name in result.failure.message


async def test_streamed_chunks_are_heartbeats() -> None:
    """A streamed answer slower than the idle timeout in total, but never silent for that
    long, is not idle: each chunk ADK passes through the plugin is progress."""
    words = ["The ", "issue ", "is ", "a ", "duplicate."]
    chunks: list[Any] = []
    for word in words:
        chunks += [0.05, reply(word, tokens=None, partial=True)]
    chunks.append(reply("".join(words)))
    agent, _model = llm_agent("writer", chunks, tools=[])
    child = GoogleADKChild(agent, run_config=RunConfig(streaming_mode=StreamingMode.SSE))
    result = await delegate(child, idle_timeout=0.15)
    assert result.output == "The issue is a duplicate.", result.report


async def test_a_stop_of_lyras_is_not_logged_by_adk_as_a_crash(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """ADK logs every exception a plugin raises, with its traceback: the budget lyra's
    plugin stops the run with is no crash, nor its refusal of a cost budget over a model
    it cannot price, and both are left out (the report says them)."""

    def runaway() -> Any:
        while True:
            yield calls("lookup")

    agent, _model = llm_agent("worker", runaway())
    result = await delegate(GoogleADKChild(agent), budget=Budget(max_tokens=500))
    assert result.failure.error_type == "budget"
    agent, _model = llm_agent("worker", runaway())
    refused = await delegate(GoogleADKChild(agent), budget=Budget(max_cost_usd=1.0))
    assert "no price is known" in refused.failure.message
    assert [r.getMessage() for r in caplog.records if r.name.startswith("google_adk")] == []


@pytest.mark.parametrize(
    ("result", "turns"),
    [({"status": "pending", "ticket": "T-1"}, (calls("approve"), reply("Waiting."))), (None, ())],
    ids=["pending-then-an-answer", "no-result"],
)
async def test_a_long_running_tool_called_in_the_run_is_missing_context(
    result: Any, turns: tuple[Any, ...]
) -> None:
    """A long-running tool's final result comes from the caller after the run, whether
    it first returns a "pending" status the model then talks about, or nothing (ADK ends
    the run at the call): missing_context naming the tool, never a success."""

    def approve(protein: str) -> Any:
        """Ask a curator to approve the protein."""
        return result

    script = turns or (calls("approve"),)
    agent, _model = llm_agent("curate", *script, tools=[LongRunningFunctionTool(func=approve)])
    outcome = await delegate(GoogleADKChild(agent))
    assert outcome.failure is not None, outcome.output
    assert outcome.failure.category == "missing_context"
    assert "long-running tool calls: approve" in (outcome.failure.blocked_on or "")


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "category", "error_type", "retry_after"),
    [
        (http_error(429, retry_after="7s"), "tool_error", "rate_limit", 7.0),
        (http_error(401), "tool_error", "auth", None),
        (http_error(503), "tool_error", "unknown", None),
    ],
    ids=["429", "401", "503"],
)
async def test_model_api_errors_keep_their_status_and_retry_delay(
    error: Exception, category: str, error_type: str, retry_after: float | None
) -> None:
    """google-genai's ClientError / ServerError reach lyra unwrapped and are read by
    their HTTP status; a 429's RetryInfo delay becomes the retry-after."""
    agent, _model = llm_agent("worker", error)
    failure = (await delegate(GoogleADKChild(agent))).failure
    assert (failure.category, failure.error_type) == (category, error_type)
    assert failure.retry_after == retry_after


class Flaky(BasePlugin):
    """A user's plugin whose own dependency fails."""

    async def before_model_callback(self, **kwargs: Any) -> None:
        raise ConnectionResetError("the audit log is unreachable")


async def test_an_exception_in_a_users_plugin_is_classified_by_itself() -> None:
    """ADK wraps a plugin's exception in RuntimeError("Error in plugin ..."): the child
    raises what it wraps, so a lost connection is a retryable connection error."""
    agent, model = llm_agent("worker", reply("never"))
    result = await delegate(GoogleADKChild(agent, plugins=[Flaky("audit")]))
    assert (result.failure.category, result.failure.error_type) == ("tool_error", "connection")
    assert result.failure.suggested_retry
    assert model.requests == []


async def test_a_failing_tool_is_named_in_the_evidence() -> None:
    """A tool's exception ends the run unchanged (ADK re-raises it), the tool named."""

    def fetch(url: str) -> str:
        """Fetch a page."""
        raise PermissionError("no access to the tracker")

    agent, _model = llm_agent("worker", reply("", ("fetch", {"url": "x"})), tools=[fetch])
    failure = (await delegate(GoogleADKChild(agent))).failure
    assert (failure.category, failure.tool_usage) == ("tool_error", {"fetch": 1})
    assert "in tool 'fetch'" in failure.evidence


async def test_a_future_cancelled_inside_a_tool_is_the_childs_failure_naming_the_tool() -> None:
    """A tool awaiting a future someone else cancelled: ADK's runner swallows the
    CancelledError out of an LlmAgent's root node and ends the run without an answer;
    lyra reports it as what it is, a cancellation from outside the delegation, naming the
    tool (it was "the agent ended without an answer", partial, with no step done)."""

    async def waits() -> str:
        """Wait for the other service."""
        import asyncio

        future = asyncio.get_running_loop().create_future()
        future.cancel()
        return str(await future)

    agent, _model = llm_agent("worker", reply("", ("waits", {})), reply("done"), tools=[waits])
    failure = (await delegate(GoogleADKChild(agent))).failure
    assert (failure.category, failure.error_type) == ("tool_error", "unknown")
    assert failure.suggested_retry
    assert "cancelled from outside the delegation" in failure.evidence
    assert "the tool 'waits'" in failure.message


async def test_a_block_the_tool_swallows_still_ends_the_run() -> None:
    """ctx.block in a tool holds even when the tool catches it: no further model request."""

    def careful() -> str:
        """Check the issue."""
        try:
            current_context().block("invalid_task", "Issue 42 asks for two contradicting things")
        except Exception:  # noqa: BLE001 - what a careless tool does
            return "fine"

    agent, model = llm_agent("worker", reply("", ("careful", {})), reply("all fine"))
    agent.tools = [careful]
    result = await delegate(GoogleADKChild(agent))
    assert result.failure.category == "invalid_task"
    assert len(model.requests) == 1


async def test_a_sync_tool_stuck_in_blocking_code_stops_no_deadline() -> None:
    """ADK calls a sync tool on the event loop unless its tool thread pool is on, and a
    tool stuck in blocking code there stops every deadline: the child turns the pool on.
    The loop goes on (a ticker beside it keeps ticking), the idle timeout ends the run
    on time naming the tool, and a pool the user configured is kept as it is."""
    release = threading.Event()

    def fetch(url: str) -> str:
        """Fetch a page."""
        current_context().step("Fetch started")  # the run's context reaches the thread
        release.wait(10)
        return "late"

    agent, _model = llm_agent("worker", reply("", ("fetch", {"url": "x"})), tools=[fetch])
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.05)
            ticks += 1

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(ticker)
            started = time.perf_counter()
            result = await delegate(GoogleADKChild(agent), timeout=10, idle_timeout=0.5)
            elapsed = time.perf_counter() - started
            group.cancel_scope.cancel()
    finally:
        release.set()  # the abandoned thread ends
    failure = result.failure
    assert failure is not None, result.report
    assert (failure.category, failure.error_type) == ("timeout", "idle"), failure.evidence
    assert "fetch" in failure.message
    assert failure.completed_steps == ("Fetch started",)
    assert elapsed < 5
    assert ticks >= elapsed / 0.05 / 3  # the loop went on
    own = RunConfig(tool_thread_pool_config=ToolThreadPoolConfig(max_workers=9))
    assert GoogleADKChild(agent, run_config=own)._run_config is own
    limited = GoogleADKChild(agent, run_config=RunConfig(max_llm_calls=3))._run_config
    assert (limited.max_llm_calls, limited.tool_thread_pool_config) == (3, ToolThreadPoolConfig())


@pytest.mark.parametrize(
    ("exc", "kind", "error_type"),
    [
        (http_error(429), Kind.TRANSIENT, "rate_limit"),
        (http_error(400), Kind.MALFORMED_TASK, "data"),
        (http_error(500), Kind.TRANSIENT, "unknown"),
    ],
    ids=["429", "400", "500"],
)
def test_genai_errors_are_read_by_status(exc: BaseException, kind: Kind, error_type: str) -> None:
    """google.genai's errors map by the HTTP status they carry, not their class alone."""
    cause = describe(exc)
    assert (cause.kind, cause.error_type) == (kind, error_type)


# -- building the child ----------------------------------------------------------------------


def test_the_agent_is_checked_when_the_child_is_built() -> None:
    """Not an ADK agent, or an option ADK would refuse with pydantic's ValidationError: lyra's
    TypeError (ValueError for a bad app name) naming the option, at once; an App goes in
    with its plugins kept."""
    with pytest.raises(TypeError, match="GoogleADKChild wraps a Google ADK agent"):
        GoogleADKChild("an agent")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="run_config= must be of type RunConfig"):
        GoogleADKChild(llm_agent("a", reply("x"))[0], run_config={"max_llm_calls": 3})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"plugins= must be a sequence of BasePlugin; got 'x'"):
        GoogleADKChild(llm_agent("a", reply("x"))[0], plugins=["x"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"app_name= is not one ADK accepts: Invalid app name"):
        GoogleADKChild(llm_agent("a", reply("x"))[0], app_name="my app")
    # (each failed every run as the task's invalid_task, or turned the feature on)
    with pytest.raises(TypeError, match=r"user_id= must be a non-empty str; got None"):
        GoogleADKChild(llm_agent("a", reply("x"))[0], user_id=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ask_tool= must be True or False; got 'no'"):
        GoogleADKChild(llm_agent("a", reply("x"))[0], ask_tool="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"show_limits= must be True or False; got 'no'"):
        GoogleADKChild(llm_agent("a", reply("x"))[0], show_limits="no")  # type: ignore[arg-type]
    agent, _model = llm_agent("a", reply("x"))
    app = App(name="triage", root_agent=agent, plugins=[Flaky("audit")])
    child = GoogleADKChild(app)
    plugins = [plugin.name for plugin in child._run.runner.plugin_manager.plugins]
    assert plugins == ["lyra", "audit"]


def test_current_context_outside_a_run_says_so() -> None:
    """A tool called outside a GoogleADKChild run gets a clear error, not None."""
    with pytest.raises(RuntimeError, match="only available inside a GoogleADKChild run"):
        current_context()


@pytest.mark.slow
def test_building_the_child_warms_adk_so_a_run_imports_nothing() -> None:
    """ADK imports most of its run machinery on the first run (about 0.5 s); building the
    child runs a throwaway agent once, so the first delegation imports nothing of ADK's
    inside its deadline."""
    code = (
        "import sys, anyio\n"
        "sys.path.insert(0, 'tests')\n"
        "from google.adk.agents import LlmAgent\n"
        "from fakes.adk_models import ScriptedLlm, reply\n"
        "from lyra import adelegate_task\n"
        "from lyra.children.google_adk import GoogleADKChild\n"
        "def lookup(q: str) -> str:\n"
        "    '''Look up.'''\n"
        "    return q\n"
        "model = ScriptedLlm.of(reply('', ('lookup', {'q': 'a'})), reply('done'))\n"
        "child = GoogleADKChild(LlmAgent(name='a', model=model, tools=[lookup]))\n"
        "before = set(sys.modules)\n"
        "anyio.run(lambda: adelegate_task('x', child=child, timeout=5))\n"
        "print(sorted(m for m in set(sys.modules) - before if m.startswith('google')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]", done.stderr


async def test_the_framework_child_table_knows_adks_agents() -> None:
    """An ADK agent given as a plain child is refused, naming the child that wraps it."""
    from lyra import adelegate_task
    from lyra.errors import ConfigurationError

    agent, _model = llm_agent("a", reply("x"))
    with pytest.raises(ConfigurationError, match="GoogleADKChild"):
        await adelegate_task("Hello", child=agent, timeout=5)
    await anyio.lowlevel.checkpoint()


async def test_the_agent_asks_through_lyras_tool_and_sees_its_limits() -> None:
    """ask_tool=True: the model's ask_question call is answered through answer=;
    show_limits=True: each request's instructions say what the task has left."""
    from lyra import Budget

    asked = reply("", ("ask_question", {"question": "Which organism?"}))
    agent, model = llm_agent("asker", asked, reply("human p53"), tools=[])
    child = GoogleADKChild(agent, ask_tool=True, show_limits=True)
    supervisor = Supervisor(child, budget=Budget(max_turns=4), answer=lambda q: "Homo sapiens")
    result = await supervisor.delegate("Analyse p53", timeout=30)
    assert result.output == "human p53", result.report
    assert tool_results(model.requests[1]) == ["Homo sapiens"]
    instructions = str(model.requests[0].config.system_instruction)
    assert "Limits of this task:" in instructions
    assert "3 model turns" in instructions  # (this request's turn is charged ahead)
