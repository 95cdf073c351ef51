"""The contract every framework child keeps, run against each row of the framework
table (tests/fakes/frameworks.py), each on its framework's own test model: the
five categories from what the framework does, the tree's budget and idle timeout
inside the run, the framework's own limit never a success, a grandchild in the
same tree, nothing left behind, and every exception class of the framework
mapped. What is particular to one framework is in its tests/test_child_*.py."""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import ExitStack
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fakes.frameworks import (
    BLOCKER,
    FRAMEWORKS,
    Answer,
    Call,
    Fail,
    Framework,
    Script,
    Slow,
    child_processes,
)
from lyra import (
    Budget,
    ChildContext,
    ChildRef,
    Limits,
    Supervisor,
    Task,
    parse_report,
)
from lyra._extras import install_hint, installed
from lyra.errors import ConfigurationError
from lyra.recovery import RecoveryPolicy, record_waits, recover
from test_tracing import spans

pytestmark = pytest.mark.anyio
__all__ = ["spans"]  # the fixture, found by pytest here too


def _row(row: Framework) -> Any:
    reason = f"{row.name} is not installed: pip install -e '.[test,{row.extra}]'"
    return pytest.param(
        row, id=row.name, marks=pytest.mark.skipif(not installed(row.module), reason=reason)
    )


EACH = pytest.mark.parametrize("framework", [_row(row) for row in FRAMEWORKS])
"""Every framework child; one whose extra is not installed skips, saying so."""


async def delegate(child: Any, *, budget: Budget | None = None, **limits: Any) -> Any:
    """One delegation of "Triage issue 42" to ``child`` (``max_repeats`` is the
    supervisor's; the rest are the delegation's)."""
    repeats = {"max_repeats": limits.pop("max_repeats")} if "max_repeats" in limits else {}
    limits.setdefault("timeout", 30)
    supervisor = Supervisor(child, budget=budget, **repeats)
    return await supervisor.delegate("Triage issue 42", **limits)


# -- nothing is left behind by any run of the contract ------------------------------------


def _threads() -> set[threading.Thread]:
    """Live threads but pools kept for reuse by design (anyio's idle workers, the event
    loop's default executor, Google ADK's tool pool of the loop: each ends with its loop)."""
    return {
        t
        for t in threading.enumerate()
        if t.name != "AnyIO worker thread"
        and not t.name.startswith(("asyncio_", "adk_tool_executor_"))
    }


def _tasks() -> set[asyncio.Task[Any]]:
    """Unfinished tasks but anyio's test runner's (one per fixture or test it runs)."""
    return {
        t
        for t in asyncio.all_tasks()
        if not t.done() and "_call_in_runner_task" not in getattr(t.get_coro(), "__qualname__", "")
    }


@pytest.fixture(autouse=True)
async def nothing_left_behind() -> AsyncIterator[None]:
    """Every test here ends with no task, thread or process of the runs it made still
    alive (a cancelled framework gets one short tick to finish unwinding)."""
    before = _tasks(), _threads(), child_processes()

    def left() -> tuple[list[str], set[threading.Thread], set[int]]:
        tasks, threads, processes = before
        return (
            [repr(t) for t in _tasks() - tasks],
            _threads() - threads,
            child_processes() - processes,
        )

    yield
    if any(left()):
        await anyio.sleep(0.05)
    assert left() == ([], set(), set())


# -- a run that completes -------------------------------------------------------------------


@EACH
async def test_a_tool_using_agent_completes_each_response_charged_once(
    framework: Framework, spans: InMemorySpanExporter
) -> None:
    """The agent's answer is the output; each response's tokens and each turn are charged
    once, from the framework's own usage figures, into the result, the report and the
    attempt's span; each tool call is a completed step whose result reaches the model."""
    script = Script(Call("lookup", {"q": "a"}), Call("lookup", {"q": "b"}), Answer("Dup of #7"))
    with framework.agent(script) as agent:
        result = await delegate(agent.child)
    assert (result.status, result.output) == ("completed", "Dup of #7"), result.report
    usage = result.usage
    assert (usage.input_tokens, usage.output_tokens, usage.turns) == (400, 40, 3)
    report = parse_report(result.report)
    assert (report.tokens_used, report.turns) == (440, 3)
    assert agent.sent()[2] == ["found a", "found b"]
    [attempt] = [s for s in spans.get_finished_spans() if s.name.startswith("invoke_agent ")]
    assert attempt.attributes is not None
    assert attempt.attributes["gen_ai.usage.input_tokens"] == 400
    assert attempt.attributes["gen_ai.usage.output_tokens"] == 40


@EACH
async def test_a_child_ref_builds_the_agent_for_supervisor_run(framework: Framework) -> None:
    """A ChildRef to an importable factory builds the child (as a durable run or a worker
    does), and Supervisor.run drives it through its recovery loop."""
    with framework.agent(Script(Answer("triaged"))) as agent:
        options = {"framework": framework.name, "answer": "triaged", **agent.ref}
        ref = ChildRef(target="fakes.frameworks:rebuild", options=options)
        (outcome,) = await Supervisor(ref, timeout=30).run([Task(prompt="Triage issue 42")])
    assert outcome.result.output == "triaged", outcome.result.report


# -- the five categories, from what the framework does ---------------------------------------


CATEGORIES: dict[str, tuple[Script, tuple[str, str, bool]]] = {
    # a slow model after a tool ran: past the deadline, with progress
    "timeout": (
        Script(Call("lookup", {"q": "a"}), Slow(30, Answer("late"))),
        ("timeout", "timeout", True),
    ),
    # a tool declares itself blocked: the run ends before the model is asked again
    "missing_context": (
        Script(Call("ask_which"), Answer("guessing anyway")),
        ("missing_context", "data", False),
    ),
    # the model API is rate limited
    "tool_error": (Script(Fail(429)), ("tool_error", "rate_limit", True)),
    # the model API refuses the request as malformed
    "invalid_task": (Script(Fail(400)), ("invalid_task", "data", False)),
    # the model API fails after a tool ran
    "partial": (Script(Call("lookup", {"q": "a"}), Fail(500)), ("partial", "unknown", True)),
}


@EACH
@pytest.mark.parametrize("case", CATEGORIES)
async def test_each_category_comes_from_what_the_framework_does(
    framework: Framework, case: str
) -> None:
    """A slow model, a tool's ctx.block, a 429, a 400 and a 500 after a tool ran end as
    timeout, missing_context, tool_error, invalid_task and partial."""
    script, expected = CATEGORIES[case]
    timeout = 2 * framework.patience if case == "timeout" else 30
    with framework.agent(script) as agent:
        result = await delegate(agent.child, timeout=timeout)
    failure = result.failure
    assert failure is not None, result.report
    assert (failure.category, failure.error_type, failure.suggested_retry) == expected, (
        failure.evidence
    )
    if case == "missing_context":
        assert failure.blocked_on == BLOCKER
        assert failure.completed_steps == ()  # the blocked call is no completed step
        assert agent.requests == 1


@EACH
async def test_an_answer_cut_off_at_the_output_limit_is_partial_never_a_success(
    framework: Framework,
) -> None:
    """The model stopped at its output limit (each framework's own way of saying so:
    finish_reason length, stop_reason max_tokens, MAX_TOKENS, an incomplete message):
    the text is cut off, so the run is partial and retryable, never a success."""
    with framework.agent(Script(Call("lookup", {"q": "a"}), Answer("The dupl", cut=True))) as agent:
        result = await delegate(agent.child)
    failure = result.failure
    assert failure is not None, result.report
    assert (failure.category, failure.suggested_retry) == ("partial", True), failure.evidence


@EACH
async def test_a_fallback_report_names_each_child_by_what_it_wraps(framework: Framework) -> None:
    """A provider's refusal (401) moves to the fallback, and <child> and <fallback> name
    each child by its class and what it wraps (its agent, model, graph or address):
    two children of one framework in a chain are told apart (both read
    "PydanticAIChild", whatever their models)."""
    with (
        framework.agent(Script(Fail(401)), model="primary-model") as primary,
        framework.agent(Script(Answer("Fixed by #7"))) as backup,
    ):
        outcome = await recover(
            "Triage issue 42",
            child=primary.child,
            fallbacks=[backup.child],
            limits=Limits(timeout=30),
        )
    parsed = parse_report(outcome.report)
    assert (parsed.status, parsed.child) == ("completed", backup.child.name), outcome.report
    assert parsed.fallbacks[0].startswith(f"{primary.child.name}: auth"), parsed.fallbacks
    assert re.fullmatch(rf"{type(primary.child).__name__}\(.+\)", primary.child.name)
    if framework.name != "langgraph":  # (a graph is named by its own name= alone)
        assert "primary-model" in primary.child.name
        assert "primary-model" not in backup.child.name


# -- the tree's limits hold inside the run ---------------------------------------------------


@EACH
async def test_a_runaway_agent_is_stopped_by_a_token_budget_within_one_response(
    framework: Framework,
) -> None:
    """An agent that never stops calling tools ends at the response that takes the tree
    over max_tokens: spend at most one response over, no request after it, the spend in
    the report."""
    script = Script(then=Call("lookup", {"q": "again"}, tokens=(590, 10)))
    with framework.agent(script) as agent:
        result = await delegate(agent.child, budget=Budget(max_tokens=2000))
        assert agent.requests == 4
    failure = result.failure
    assert failure is not None
    assert (failure.category, failure.error_type) == ("timeout", "budget")
    assert 2000 < result.usage.tokens <= 2000 + 600
    assert parse_report(result.report).tokens_used == result.usage.tokens


@EACH
async def test_a_spent_turn_budget_refuses_the_next_model_request(framework: Framework) -> None:
    """Turns are charged ahead: with max_turns=2 the third request is never made, nor
    counted."""
    with framework.agent(Script(then=Call("lookup", {"q": "again"}))) as agent:
        result = await delegate(agent.child, budget=Budget(max_turns=2))
        assert agent.requests == 2
    assert result.usage.turns == 2
    assert "max_turns=2 reached: 2 turns used, 1 more refused" in result.failure.evidence


@EACH
async def test_a_cost_budget_needs_a_price_for_the_model(framework: Framework) -> None:
    """A cost budget over a model lyra cannot price is refused before anything is sent
    (and paid), never kept as $0, saying which model and what to pass."""
    script = Script(Call("lookup", {"q": "a"}), Answer("ok"))
    with framework.agent(script, model="acme-1") as agent:
        result = await delegate(agent.child, budget=Budget(max_cost_usd=1.0))
        assert agent.requests == 0
    assert result.failure is not None, result.report
    assert "no price is known for the model 'acme-1'" in result.failure.message
    assert "pass prices={...} to" in result.failure.message
    # lyra's own refusal, said as one: not retried, never "unrecognised"
    assert (result.failure.category, result.failure.suggested_retry) == ("tool_error", False)
    assert "lyra.ConfigurationError: a limit or option lyra cannot keep" in (
        result.failure.evidence
    )


@EACH
async def test_the_same_tool_call_past_max_repeats_is_a_loop(framework: Framework) -> None:
    """An agent that makes the same tool call again and again is not making progress: past
    max_repeats the run ends as timeout / loop, naming the call."""
    with framework.agent(Script(then=Call("lookup", {"q": "same"}))) as agent:
        result = await delegate(agent.child, max_repeats=2)
        assert agent.requests <= 4
    failure = result.failure
    assert failure is not None, result.report
    assert (failure.category, failure.error_type) == ("timeout", "loop"), failure.evidence
    assert failure.blocked_on == f'Repeating {framework.tool("lookup")}({{"q": "same"}}) ×3'
    assert failure.tool_usage == {framework.tool("lookup"): 2}  # the third never ran


@EACH
async def test_a_tool_call_budget_refuses_the_call_past_it(framework: Framework) -> None:
    """Tool calls are charged ahead on the tree's max_tool_calls: the call past it never
    runs, and the run ends as timeout / budget."""
    script = Script(then=Call("lookup", {"q": "again"}))
    with framework.agent(script) as agent:
        result = await delegate(agent.child, budget=Budget(max_tool_calls=2))
    failure = result.failure
    assert failure is not None, result.report
    assert (failure.category, failure.error_type) == ("timeout", "budget"), failure.evidence
    assert "max_tool_calls=2" in failure.evidence
    assert agent.sent()[-1] == ["found again"] * 2  # two calls ran; the third never did


@EACH
async def test_a_stuck_tool_is_ended_by_the_idle_timeout(framework: Framework) -> None:
    """Tools that never return (three at once) end the run as timeout/idle when nothing
    moves for idle_timeout, promptly and well before the deadline, naming the tool."""
    script = Script(Call("lookup", {"q": "a"}), Call("hang", times=3))
    idle = framework.patience
    with framework.agent(script) as agent:
        started = time.perf_counter()
        result = await delegate(agent.child, timeout=30, idle_timeout=idle)
        elapsed = time.perf_counter() - started
    failure = result.failure
    assert failure is not None
    assert (failure.category, failure.error_type) == ("timeout", "idle"), failure.evidence
    assert failure.tool_usage == {framework.tool("lookup"): 1, framework.tool("hang"): 3}
    assert f"while the tool '{framework.tool('hang')}' ran" in failure.message  # named
    assert elapsed < 2 * idle + framework.patience + 1.0


@EACH
async def test_a_caller_that_cancels_mid_tool_leaves_nothing_behind(framework: Framework) -> None:
    """A run cancelled from outside while its tools hang propagates the cancellation at
    once (and the autouse check finds nothing of it left)."""
    with framework.agent(Script(Call("hang", times=3))) as agent:
        async with anyio.create_task_group() as group:
            group.start_soon(delegate, agent.child)
            assert await anyio.to_thread.run_sync(agent.stuck.wait, 10 + framework.patience)
            group.cancel_scope.cancel()
    assert group.cancel_scope.cancelled_caught


@EACH
async def test_running_out_of_the_frameworks_own_turns_is_never_a_success(
    framework: Framework,
) -> None:
    """The framework's own turn limit ends the run as timeout/budget, with the framework
    named as evidence, retryable after progress."""
    with framework.agent(Script(then=Call("lookup", {"q": "again"})), max_turns=2) as agent:
        result = await delegate(agent.child)
    failure = result.failure
    assert failure is not None, result.report
    assert (failure.category, failure.error_type, failure.suggested_retry) == (
        "timeout",
        "budget",
        True,
    )
    assert "the framework's own limit was reached" in failure.evidence
    assert framework.own_limit in failure.evidence


@EACH
async def test_a_continuation_resumes_the_first_attempts_conversation(
    framework: Framework,
) -> None:
    """After the model API failed following a tool call (partial), the recovery loop's
    continuation hands the framework the first attempt's conversation: its first
    request carries the tool result already fetched, and the task completes."""
    script = Script(Call("lookup", {"q": "logs"}), Fail(500), Answer("Fixed by #7"))
    with framework.agent(script) as agent, record_waits():
        outcome = await recover(
            "Triage issue 42",
            child=agent.child,
            policy=RecoveryPolicy(max_retries=1),
            limits=Limits(timeout=30),
        )
        sent = agent.sent()
    first = outcome.attempts[0].result.failure
    assert first is not None
    assert (first.category, first.tool_usage) == ("partial", {framework.tool("lookup"): 1})
    assert first.completed_steps == (f"Ran {framework.tool('lookup')}",)
    assert [a.strategy for a in outcome.attempts] == ["initial", "continuation"]
    assert outcome.result.output == "Fixed by #7", outcome.result.report
    assert sent[2] == ["found logs"]  # fetched by attempt 1, not fetched again


# -- the tree: grandchildren ------------------------------------------------------------------


async def unreachable_tracker(prompt: str, ctx: ChildContext) -> str:
    """A plain lyra child that spends 300 tokens, then cannot do its part."""
    ctx.charge(input_tokens=300)
    ctx.block("missing_context", "No access to the issue tracker")


@EACH
async def test_a_tool_delegates_a_grandchild_whose_failure_is_a_result(
    framework: Framework,
) -> None:
    """A tool reaches the attempt's ChildContext the framework's own way and delegates: the
    grandchild's failure is a result the agent reads, its spend is the tree's, and the
    parent's report lists it."""
    script = Script(Call("consult", {"question": "Who owns it?"}), Answer("Owner unknown"))
    with framework.agent(script, grandchild=unreachable_tracker) as agent:
        result = await delegate(agent.child, budget=Budget(max_tokens=10_000))
    assert result.output == "Owner unknown", result.report
    assert agent.sent()[1] == ["the helper failed: missing_context"]
    assert result.usage.input_tokens == 100 + 300 + 200
    (failed,) = parse_report(result.report).failed_delegations
    assert (failed.category, failed.error_type) == ("missing_context", "data")


@EACH
async def test_parallel_grandchildren_never_overshoot_a_turn_budget(framework: Framework) -> None:
    """Two runaway agents of the framework delegated at once draw on one account of three
    turns: turns are charged ahead, so no more than three requests are ever made; each
    agent ends at the turn it is refused (a request in flight is answered first), and
    the parent, which spent no turn, gets their failures as results to decide on."""
    with ExitStack() as stack:
        agents = [
            stack.enter_context(framework.agent(Script(then=Call("lookup", {"q": "x"}))))
            for _ in range(2)
        ]

        async def parent(prompt: str, ctx: ChildContext) -> str:
            async with anyio.create_task_group() as group:
                for agent in agents:
                    group.start_soon(lambda child: ctx.delegate(prompt, child=child), agent.child)
            return "surveyed"

        result = await delegate(parent, budget=Budget(max_turns=3))
        assert sum(agent.requests for agent in agents) == 3
    assert result.usage.turns == 3
    assert (result.status, result.output) == ("completed", "surveyed")
    failed = parse_report(result.report).failed_delegations
    assert [(f.category, f.error_type) for f in failed] == [("timeout", "budget")] * 2


# -- the extra, and every exception of the framework mapped ---------------------------------


@pytest.fixture(scope="module")
def imported_by_children() -> set[str]:
    """The frameworks in sys.modules after importing every framework child's module, in
    a fresh interpreter (one for all rows)."""
    modules = [row.module for row in FRAMEWORKS]
    code = (
        "import sys, json\n"
        + "".join(f"import {row.child_module}\n" for row in FRAMEWORKS)
        + f"print(json.dumps([m for m in {modules!r} if m in sys.modules]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


@EACH
async def test_the_framework_is_imported_when_a_child_is_built_not_before(
    framework: Framework, imported_by_children: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importing the child's module imports no framework; building a child without the
    framework installed is a ConfigurationError naming the extra to install."""
    assert framework.module not in imported_by_children
    module = importlib.import_module(framework.child_module)
    child = next(getattr(module, name) for name in module.__all__ if name.endswith("Child"))
    loaded = [m for m in sys.modules if f"{m}.".startswith(f"{framework.module}.")]
    for name in {framework.module, *loaded}:  # as if it were not installed (loaded or not)
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ConfigurationError, match=re.escape(install_hint(framework.extra))):
        child(object())


@EACH
async def test_every_public_exception_class_of_the_framework_is_mapped(
    framework: Framework,
) -> None:
    """Each public exception class the installed framework (and the client SDK it raises
    through) defines, in any importable module, has an explicit mapping."""
    found, mapped = framework.exceptions()
    assert framework.walk_finds <= found  # the walk reaches the framework's modules
    assert sorted(found - mapped) == []
