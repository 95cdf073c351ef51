"""How agents fail in the field (DESIGN §3, §5, §12): loops, a tool-call budget,
unverified success, questions, context overflow, fallbacks, rate-limit storms,
and evidence that names the spender -- through lyra's public API, with plain
children and the Anthropic child against the local Messages API."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anthropic
import anyio
import anyio.lowlevel
import httpx2
import pytest
from structlog.testing import capture_logs

from fakes.messages_api import MessagesAPI, error, message, rate_limited, tool_use
from lyra import (
    Budget,
    ChildContext,
    Limits,
    RecoveryPolicy,
    Supervisor,
    Task,
    adelegate_task,
    adelegate_with_retry,
    parse_report,
)
from lyra.children import AnthropicChild, Tool
from lyra.delegation._tree import Tree
from lyra.errors import ConfigurationError, SubjectNotFound, TransientError
from lyra.recovery import record_waits, recover

pytestmark = pytest.mark.anyio


# -- loops ----------------------------------------------------------------------------------


def spinner(calls: list[int]) -> Any:
    """A child that polls the same tool with the same arguments for ever."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        while True:
            await ctx.tool("lspin", lambda job: calls.append(job) or "still running", 7)

    return child


async def test_a_repeated_identical_call_ends_the_attempt_as_a_loop() -> None:
    """The call past max_repeats never runs; the attempt is timeout / loop, retryable,
    and the report names the tool, its arguments (as JSON) and the count, and suggests
    a continuation that names it -- not more time, which buys more of the same."""
    calls: list[int] = []
    report = await adelegate_task("Wait for job 7", child=spinner(calls), max_repeats=3, timeout=5)
    parsed = parse_report(report)
    assert (parsed.category, parsed.error_type, parsed.retryable) == ("timeout", "loop", True)
    assert calls == [7, 7, 7]
    assert "lspin was called 4 times with the same arguments ([7])" in parsed.message
    assert parsed.blocked_on == "Repeating lspin([7]) ×4"
    assert parsed.suggested_actions[0].startswith("Continue with a prompt naming the repeated")
    assert not any("timeout=" in action for action in parsed.suggested_actions)


async def test_a_loops_arguments_are_shown_as_json() -> None:
    """Keyword arguments are an object, positional ones an array, both together the array
    with the object last (a Python repr was shown: ``lookup(((), [('q', 'p53')]))``)."""

    def polls(*args: object, **kwargs: object) -> Any:
        async def child(prompt: str, ctx: ChildContext) -> str:
            while True:
                await ctx.tool("lookup", lambda *a, **k: "x", *args, **kwargs)

        return child

    for (args, kwargs), shown in [
        (((), {"q": "p53"}), '{"q": "p53"}'),
        ((("p53",), {}), '["p53"]'),
        ((("p53",), {"limit": 3}), '["p53", {"limit": 3}]'),
        (((), {}), "[]"),
    ]:
        child = polls(*args, **kwargs)
        parsed = parse_report(await adelegate_task("x", child=child, max_repeats=2, timeout=5))
        assert parsed.blocked_on == f"Repeating lookup({shown}) ×3"


async def test_calls_with_other_arguments_are_progress_and_max_repeats_none_turns_it_off() -> None:
    """Different arguments are different calls; with max_repeats=None nothing is a loop."""

    async def pages(prompt: str, ctx: ChildContext) -> str:
        for page in range(20):
            await ctx.tool("fetch", lambda n: n, page)
        for _ in range(20):
            await ctx.tool("status", lambda: "ok")
        return "done"

    limited = parse_report(await adelegate_task("x", child=pages, max_repeats=5, timeout=5))
    assert (limited.error_type, limited.status) == ("loop", "failed")
    free = parse_report(await adelegate_task("x", child=pages, max_repeats=None, timeout=5))
    assert free.status == "completed"


async def test_an_argument_that_cannot_describe_itself_never_fails_the_call() -> None:
    """An argument whose ``str`` and ``repr`` raise (a lazy proxy not bound yet): the
    tool runs, and the same object again is still counted as the same call."""

    class Unbound:
        def __repr__(self) -> str:
            raise RuntimeError("not bound yet")

    handle, ran = Unbound(), []

    async def child(prompt: str, ctx: ChildContext) -> str:
        for _ in range(3):
            await ctx.tool("lookup", lambda h, key: ran.append(key) or "value", handle, "k1")
        return "done"

    assert parse_report(await adelegate_task("x", child=child, timeout=5)).status == "completed"
    assert ran == ["k1"] * 3
    looped = parse_report(await adelegate_task("x", child=child, max_repeats=2, timeout=5))
    assert (looped.error_type, len(ran)) == ("loop", 5)


async def test_framework_tool_calls_are_told_apart_by_every_argument() -> None:
    """Arguments a framework reports (a dict, or JSON text) are the same call only when
    they are the same JSON: NaN, infinity and None differ, and key order does not count;
    a loop's report shows the arguments as people write JSON."""
    seen: list[str] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        for value in (float("nan"), float("inf"), None, "null", 2**70):
            ctx.tool_started("fetch", {"x": value, "page": 1})
            ctx.tool_ended("fetch")
            seen.append(str(value))
        ctx.tool_started("fetch", '{"page": 1, "x": 2}')
        ctx.tool_started("fetch", {"x": 2, "page": 1})
        return "done"

    report = parse_report(await adelegate_task("x", child=child, max_repeats=1, timeout=5))
    assert len(seen) == 5
    assert report.error_type == "loop"
    assert 'same arguments ({"page": 1, "x": 2})' in (report.message or "")


async def test_recovery_continues_a_loop_naming_what_it_repeated() -> None:
    """The next attempt is a continuation that tells the child which call it repeated."""
    prompts: list[str] = []

    async def loops_once(prompt: str, ctx: ChildContext) -> str:
        prompts.append(prompt)
        if len(prompts) == 1:
            while True:
                await ctx.tool("lspin", lambda: "same")
        return "done differently"

    outcome = await recover(
        "Wait for it", child=loops_once, limits=Limits(timeout=5, max_repeats=2)
    )
    assert outcome.result.ok
    assert [a.strategy for a in outcome.attempts] == ["initial", "continuation"]
    assert "kept repeating the same call" in prompts[1]
    assert "lspin" in prompts[1]


async def test_the_anthropic_child_tells_the_model_before_the_loop_ends() -> None:
    """The last identical call allowed carries a note in its tool result; the next one
    ends the run as a loop (the model is never asked again)."""
    turn = message([tool_use("lookup", {"q": "p53"})], "tool_use")
    with MessagesAPI([turn, turn, turn], strict=False) as api:
        async with anthropic.AsyncAnthropic(base_url=api.url, api_key="k", max_retries=0) as client:
            child = AnthropicChild(tools=[Tool.from_function(lookup)], client=client)
            result = await Supervisor(child, max_repeats=2).delegate("Look p53 up", timeout=10)
    assert result.failure is not None
    assert result.failure.error_type == "loop"
    assert len(api.requests) == 3
    last_result = api.requests[2]["messages"][-1]["content"][0]["content"]
    assert "called 2 times with these same arguments" in last_result


def lookup(q: str) -> str:
    """Look a protein up."""
    return f"{q}: 393 residues"


# -- tool-call budget --------------------------------------------------------------------------


async def test_a_tool_call_past_the_budget_never_runs() -> None:
    """max_tool_calls is charged ahead: the call past it is refused before it runs."""
    ran: list[int] = []

    async def work(n: int) -> None:
        ran.append(n)

    async def busy(prompt: str, ctx: ChildContext) -> str:
        for n in range(10):
            await ctx.tool("work", work, n)
        return "done"

    result = await Supervisor(busy, budget=Budget(max_tool_calls=3)).delegate("x", timeout=5)
    assert ran == [0, 1, 2]
    assert result.failure is not None
    assert (result.failure.category, result.failure.error_type) == ("timeout", "budget")
    assert "max_tool_calls=3" in result.failure.message
    assert parse_report(result.report).tool_calls == 3


async def test_parallel_grandchildren_never_overshoot_a_shared_tool_call_budget() -> None:
    """Twenty grandchildren hammering tools at once spend at most the tree's budget."""
    ran: list[int] = []

    async def hit(n: int) -> None:
        ran.append(n)

    async def hammer(prompt: str, ctx: ChildContext) -> str:
        for n in range(50):
            await ctx.tool("hit", hit, n)
            await anyio.lowlevel.checkpoint()
        return "done"

    async def parent(prompt: str, ctx: ChildContext) -> str:
        async with anyio.create_task_group() as group:
            for _ in range(20):
                group.start_soon(lambda: ctx.delegate("hit", child=hammer))
        return "all"

    await Supervisor(parent, budget=Budget(max_tool_calls=37)).delegate("x", timeout=10)
    assert len(ran) == 37


# -- verification ----------------------------------------------------------------------------


async def test_a_rejected_success_is_partial_with_the_verifiers_reason() -> None:
    """verify= returning a reason turns a claimed success into partial / verification."""

    async def claims(prompt: str, ctx: ChildContext) -> str:
        ctx.step("Looked around")
        return "Done! (nothing written)"

    async def needs_a_file(output: str) -> str | None:
        return None if "brief.md" in output else "no brief was written"

    parsed = parse_report(await adelegate_task("Write a brief", child=claims, verify=needs_a_file))
    assert (parsed.status, parsed.category, parsed.error_type) == (
        "failed",
        "partial",
        "verification",
    )
    assert parsed.retryable is True
    assert "no brief was written" in parsed.message
    assert parsed.completed_steps == ("Looked around",)
    accepted = await adelegate_task("x", child=claims, verify=lambda output: True)
    assert parse_report(accepted).status == "completed"


async def test_recovery_continues_a_rejected_success_naming_the_reason() -> None:
    """The continuation tells the child why its output was rejected."""
    prompts: list[str] = []

    async def learns(prompt: str, ctx: ChildContext) -> str:
        prompts.append(prompt)
        return "brief.md written" if len(prompts) > 1 else "done"

    report = await adelegate_with_retry(
        "Write a brief",
        child=learns,
        verify=lambda out: "brief.md" in out or "no brief was written",
    )
    assert parse_report(report).status == "completed"
    assert "no brief was written" in prompts[1]


# -- questions ---------------------------------------------------------------------------------


async def asks_organism(prompt: str, ctx: ChildContext) -> str:
    organism = await ctx.ask("Which organism?")
    ctx.step(f"Used {organism}")
    return f"analysed in {organism}"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (lambda ctx: ctx.ask(None), "ctx.ask needs a question (a string), not None"),
        (lambda ctx: ctx.block("tool_error", " "), "ctx.block needs a reason"),
    ],
    ids=["ask-none", "block-blank"],
)
async def test_a_question_or_a_blocker_that_says_nothing_is_the_childs_bug(
    body: Any, message: str
) -> None:
    """ctx.ask(None) would ask the question "None", ctx.block with a blank reason would
    report a blocker that says nothing: each is an error that names the mistake."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        await body(ctx) if message.startswith("ctx.ask") else body(ctx)
        return "never"

    parsed = parse_report(await adelegate_task("x", child=child))
    assert parsed.status == "failed"
    assert message in parsed.message


@pytest.mark.parametrize("verdict", [0, ["x"]])
async def test_a_verify_that_returns_no_judgement_is_the_callers_bug(verdict: Any) -> None:
    """verify= accepts with None or True and rejects with False or a reason (a string):
    anything else is no judgement, named as the caller's bug, not a rejection "0"."""
    parsed = parse_report(
        await adelegate_task("x", child=lambda p, c: "out", verify=lambda out: verdict)
    )
    assert (parsed.category, parsed.error_type) == ("tool_error", "verification")
    assert "return None or True to accept, False or a reason" in parsed.message


async def test_an_answered_question_goes_on_in_the_same_attempt_and_is_not_idle() -> None:
    """The answerer's answer comes back from ctx.ask; its wait is not idle time (the
    idle timeout is shorter than the wait), the deadline still runs."""

    async def slow_human(question: str) -> str:
        await anyio.sleep(0.3)
        return "Homo sapiens"

    report = await adelegate_task(
        "Analyse p53", child=asks_organism, answer=slow_human, idle_timeout=0.1, timeout=5
    )
    parsed = parse_report(report)
    assert (parsed.status, parsed.output) == ("completed", "analysed in Homo sapiens")


async def test_a_grandchilds_wait_for_its_answer_is_not_its_parents_idle_time() -> None:
    """A parent waiting on a grandchild that waits for an answer waits too: neither
    idle timeout passes meanwhile (the parent's did, and the whole subtree ended idle)."""

    async def slow_human(question: str) -> str:
        await anyio.sleep(0.3)
        return "Homo sapiens"

    async def parent(prompt: str, ctx: ChildContext) -> str:
        result = await ctx.delegate("Analyse p53", child=asks_organism)
        return result.output or result.report

    report = await adelegate_task(
        "Analyse p53", child=parent, answer=slow_human, idle_timeout=0.1, timeout=5
    )
    parsed = parse_report(report)
    assert (parsed.status, parsed.output) == ("completed", "analysed in Homo sapiens")


async def test_waits_that_overlap_give_the_idle_clock_back_when_the_last_ends() -> None:
    """Two grandchildren's questions whose waits overlap (the first asked ends first),
    then the parent's own code stops: its idle timeout ends it soon after the last
    answer. (The second wait held what the first had set, the deadline, and gave that
    back: the idle clock was off for the rest of the attempt.)"""

    async def answer(question: str) -> str:
        await anyio.sleep(0.2 if question == "A?" else 0.25)
        return "yes"

    async def asker(prompt: str, ctx: ChildContext) -> str:
        if prompt == "B":
            await anyio.sleep(0.05)
        return await ctx.ask(f"{prompt}?")

    async def parent(prompt: str, ctx: ChildContext) -> str:
        async def ask(question: str) -> None:
            await ctx.delegate(question, child=asker)

        async with anyio.create_task_group() as group:
            group.start_soon(ask, "A")
            group.start_soon(ask, "B")
        await anyio.sleep(30)  # stuck in its own code: no progress
        return "never"

    started = time.monotonic()
    parsed = parse_report(
        await adelegate_task("go", child=parent, answer=answer, idle_timeout=0.5, timeout=10)
    )
    assert (parsed.category, parsed.error_type) == ("timeout", "idle")
    assert time.monotonic() - started < 5


async def test_an_unanswered_question_is_input_required_with_the_question_in_the_report() -> None:
    """Without an answerer (or with one that has no answer, or a blank one) the attempt
    ends as missing_context / input_required, the question in the report and its
    metadata."""

    async def blank(question: str) -> str:
        return " \n"

    for answer in (None, lambda question: None, lambda question: "", blank):
        parsed = parse_report(
            await adelegate_task("Analyse p53", child=asks_organism, answer=answer)
        )
        assert (parsed.category, parsed.error_type) == ("missing_context", "input_required")
        assert parsed.question == "Which organism?"
        assert "<question>Which organism?</question>" in await adelegate_task(
            "Analyse p53", child=asks_organism
        )


async def test_a_question_the_deadline_cut_off_is_still_logged() -> None:
    """'No question_asked event when the deadline ends the wait for an answer': the
    event came after the answer, so a question that cost a timeout was never counted."""
    from lyra import events

    async def asks(prompt: str, ctx: ChildContext) -> str:
        return await ctx.ask("Which organism?")

    async def slow(question: str) -> str:
        await anyio.sleep(5)
        return "human"

    with events.capturing() as emitted:
        parsed = parse_report(await adelegate_task("go", child=asks, timeout=0.3, answer=slow))
    assert (parsed.category, parsed.question) == ("timeout", "Which organism?")
    asked = [e for e in emitted if e["event"] == events.QUESTION_ASKED]
    assert [(e["question"], e["answered"]) for e in asked] == [("Which organism?", False)]


async def test_an_answerer_that_raises_leaves_the_question_open_and_is_named() -> None:
    """The caller's answer= raising is no failure of the child's: the question stays
    open (missing_context / input_required, the question in the report), and the
    evidence names the answerer's error."""

    async def broken(question: str) -> str:
        raise ConnectionError("the help desk is down")

    from lyra.delegation._internal import run_attempt

    result = await run_attempt(asks_organism, "Analyse p53", limits=Limits(5), answer=broken)
    failure = result.failure
    assert failure is not None
    assert (failure.category, failure.error_type) == ("missing_context", "input_required")
    assert failure.question == "Which organism?"
    assert "answerer raised ConnectionError: the help desk is down" in failure.evidence


async def test_a_deadline_that_ends_the_wait_for_an_answer_names_the_question() -> None:
    """An answer slower than the deadline: a timeout (rule 1) blocked on the question,
    which the report carries for whoever can answer it next time."""

    async def too_slow(question: str) -> str:
        await anyio.sleep(5)
        return "Homo sapiens"

    parsed = parse_report(
        await adelegate_task("Analyse p53", child=asks_organism, answer=too_slow, timeout=0.3)
    )
    assert (parsed.category, parsed.error_type) == ("timeout", "timeout")
    assert parsed.question == "Which organism?"
    assert parsed.blocked_on == "No answer before the deadline to: Which organism?"


async def test_a_verify_that_raises_is_the_callers_bug_and_is_not_retried() -> None:
    """verify= raising instead of judging is no failure of the child's: tool_error /
    verification, not retryable, naming verify=; a recovery loop does not pay for the
    child again to meet the same bug."""
    runs: list[str] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        runs.append(prompt)
        ctx.step("Wrote the summary")
        return "summary"

    def broken(output: str) -> bool:
        return 1 / 0 > 0

    report = await adelegate_with_retry(
        "Summarise p53", child=child, verify=broken, max_retries=3, base_timeout=5
    )
    parsed = parse_report(report)
    assert (parsed.category, parsed.error_type, parsed.retryable) == (
        "tool_error",
        "verification",
        False,
    )
    assert parsed.message.startswith("verify= raised ZeroDivisionError: division by zero")
    assert runs == ["Summarise p53"]


async def _cancelled_elsewhere(*_: object) -> Any:
    """A shared future someone else cancelled, awaited: a CancelledError nobody made of
    the awaiting task."""
    shared = asyncio.get_running_loop().create_future()
    shared.cancel()
    return await shared


async def test_a_thread_pools_future_someone_else_cancelled_is_a_foreign_cancellation() -> None:
    """concurrent.futures' own CancelledError (an Exception, not asyncio's) from a
    future someone else cancelled is the same failure as asyncio's: retryable, the
    next try may not meet it (it was rule 10, unrecognised, not retryable)."""
    import concurrent.futures

    async def child(prompt: str, ctx: ChildContext) -> str:
        future: concurrent.futures.Future[str] = concurrent.futures.Future()
        future.cancel()
        return future.result()

    parsed = parse_report(await adelegate_task("Fetch", child=child, timeout=5))
    assert (parsed.category, parsed.error_type, parsed.retryable) == (
        "tool_error",
        "unknown",
        True,
    )
    assert "cancelled from outside the delegation" in parsed.message


async def test_a_verify_meeting_a_cancellation_nobody_made_is_the_callers() -> None:
    """verify= awaiting a future someone else cancelled raises CancelledError: as any
    raise of verify=, tool_error / verification, and the child is not paid for again
    (it was taken for the child's foreign cancellation, retried, and run four times)."""
    runs: list[str] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        runs.append(prompt)
        return "expensive output"

    outcome = await recover(
        "Summarise", child=child, verify=_cancelled_elsewhere, policy=RecoveryPolicy(max_retries=3)
    )
    failure = outcome.result.failure
    assert failure is not None
    assert (failure.category, failure.error_type) == ("tool_error", "verification")
    assert runs == ["Summarise"]


def _provider_raises(failure: object) -> Any:
    return {}["db"]


def _provider_gives_a_list(failure: object) -> Any:
    return [("organism", "mouse")]


@pytest.mark.parametrize(
    ("provider", "error"),
    [
        (_provider_raises, "KeyError: 'db'"),
        (_cancelled_elsewhere, "CancelledError"),
        (_provider_gives_a_list, "TypeError: context_provider= returned list: return a mapping"),
    ],
    ids=["raises", "meets a cancellation nobody made", "gives no mapping"],
)
async def test_a_context_provider_that_fails_ends_the_loop_on_the_last_report(
    provider: Any, error: str
) -> None:
    """The caller's context_provider raising (a CancelledError nobody made of the loop
    included) or giving what is no context: the loop ends with the last attempt's report
    (under asyncio.TaskGroup too: the task was "cancelled", its report lost), and the
    event names the callback and its error."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        ctx.block("missing_context", "need the organism")

    with capture_logs() as logs:
        async with asyncio.TaskGroup() as group:
            task = group.create_task(
                recover(
                    "Analyse", child=child, context_provider=provider,
                    policy=RecoveryPolicy(max_retries=2),
                )
            )  # fmt: skip
    outcome = task.result()
    assert outcome.result.failure is not None
    assert outcome.result.failure.category == "missing_context"
    assert len(outcome.attempts) == 1
    [logged] = [e for e in logs if e["event"] == "recovery_callback_failed"]
    assert logged["callback"] == "context_provider"
    assert logged["error"].startswith(error)


async def test_a_decomposer_that_raises_ends_the_loop_and_a_real_cancel_still_passes() -> None:
    """A decomposer's error is the caller's too (the loop ends on the timeout's report);
    the caller's own cancellation, arriving while a callback runs, still propagates."""

    async def slow(prompt: str, ctx: ChildContext) -> str:
        await anyio.sleep(1)
        return "never"

    def broken(prompt: str) -> list[str]:
        raise RuntimeError("no splitter")

    policy = RecoveryPolicy(max_retries=2, decomposer=broken)
    with capture_logs() as logs:
        outcome = await recover(
            "1. a\n2. b", child=slow, limits=Limits(timeout=0.05), policy=policy
        )
    assert outcome.result.failure is not None
    assert outcome.result.failure.category == "timeout"
    assert [e["callback"] for e in logs if e["event"] == "recovery_callback_failed"] == [
        "decomposer"
    ]

    async def waits(failure: object) -> dict[str, str]:
        await anyio.sleep(5)
        return {}

    async def blocked(prompt: str, ctx: ChildContext) -> str:
        ctx.block("missing_context", "need the organism")

    with anyio.move_on_after(0.2) as scope:
        await recover("Analyse", child=blocked, context_provider=waits)
    assert scope.cancelled_caught


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_verify_slower_than_the_deadline_is_the_callers_and_not_retried(
    kind: str,
) -> None:
    """The child succeeded; the caller's verify= (a slow check, async or a plain
    function) did not finish before the deadline: tool_error / verification, not the
    child's timeout, and no retry pays for the child again. A plain function runs off
    the event loop, so the deadline holds: the attempt ends on time."""
    runs: list[str] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        runs.append(prompt)
        return "summary"

    async def slow_async(output: str) -> bool:
        await anyio.sleep(3)
        return True

    def slow_sync(output: str) -> bool:
        time.sleep(1.5)
        return True

    slow = slow_async if kind == "async" else slow_sync
    started = time.monotonic()
    report = await adelegate_with_retry(
        "Summarise p53", child=child, verify=slow, max_retries=3, base_timeout=0.3
    )
    took = time.monotonic() - started
    parsed = parse_report(report)
    assert (parsed.category, parsed.error_type, parsed.retryable) == (
        "tool_error",
        "verification",
        False,
    )
    assert "did not finish within the deadline" in parsed.message
    assert runs == ["Summarise p53"]
    assert took < 1.2
    assert parsed.overrun_s is None


async def test_a_child_that_used_most_of_the_deadline_keeps_its_timeout() -> None:
    """The child took most of the deadline, and verify= (quick enough with the time a
    child should leave it) was cut off: that is the child's timeout, as before, not the
    caller's verify= blamed."""

    async def slow_child(prompt: str, ctx: ChildContext) -> str:
        await anyio.sleep(0.5)
        return "summary"

    async def check(output: str) -> bool:
        await anyio.sleep(0.3)
        return True

    parsed = parse_report(
        await adelegate_task("Summarise p53", child=slow_child, verify=check, timeout=0.6)
    )
    assert (parsed.category, parsed.error_type) == ("timeout", "timeout")


async def test_a_parents_ctx_ask_as_answer_passes_a_question_up() -> None:
    """answer=ctx.ask (a child delegating on its own supervisor) sends the grandchild's
    question to whoever answers the child's: the human's answer comes back down."""

    async def parent(prompt: str, ctx: ChildContext) -> str:
        result = await Supervisor(asks_organism, answer=ctx.ask).delegate(prompt, timeout=5)
        return result.output or result.report

    parsed = parse_report(
        await adelegate_task("Analyse p53", child=parent, answer=lambda q: "Homo sapiens")
    )
    assert (parsed.status, parsed.output) == ("completed", "analysed in Homo sapiens")
    # With nobody above to answer, the parent's own stop passes through: its question
    # is open, and no "answerer raised" is made of it.
    parsed = parse_report(await adelegate_task("Analyse p53", child=parent))
    assert (parsed.category, parsed.question) == ("missing_context", "Which organism?")
    assert "answerer raised" not in (parsed.message or "")


async def test_a_later_attempt_with_the_answer_gets_it_at_once() -> None:
    """A recovery loop whose durable mailbox (here a stand-in) holds the answer retries
    with it; ctx.ask returns it without asking anyone."""
    from lyra.recovery import Attempt, Replay, attempt_plan

    asked: list[str] = []

    async def mailbox(question: str) -> str | None:
        asked.append(question)
        return "Mus musculus"

    async def run(attempt: Attempt) -> Any:
        return await attempt_plan(
            asks_organism, attempt, subject=None, context=None, task_id="t", limits=Limits(5)
        )

    async def no_sleep(seconds: float) -> None:
        return None

    outcome = await recover(
        "Analyse p53", child=asks_organism, replay=Replay(run, no_sleep, answers=mailbox)
    )
    assert outcome.result.output == "analysed in Mus musculus"
    assert [a.strategy for a in outcome.attempts] == ["initial", "answer"]
    assert asked == ["Which organism?"]


async def test_an_answered_question_of_a_split_task_runs_only_the_subtask_that_asked() -> None:
    """A split task whose second subtask asked: the mailbox's answer runs the subtasks
    again, the completed one kept (not run again), the one that asked answered at once."""
    from lyra.recovery import Attempt, Replay, attempt_plan

    ran: list[str] = []

    class Splits:
        def decompose(self, prompt: str) -> list[str]:
            return ["fetch P04637", "analyse it"]

        async def run(self, prompt: str, ctx: ChildContext) -> str:
            ran.append(prompt.splitlines()[0])
            if prompt.startswith("fetch"):
                return "fetched"
            if prompt.startswith("analyse"):
                return await asks_organism(prompt, ctx)
            await anyio.sleep_forever()  # (the whole task: no progress, so it is split)
            return "never"

    async def mailbox(question: str) -> str | None:
        return "Mus musculus"

    async def run(attempt: Attempt) -> Any:
        return await attempt_plan(
            Splits(), attempt, subject=None, context=None, task_id="t", limits=Limits(0.3)
        )

    async def no_sleep(seconds: float) -> None:
        return None

    outcome = await recover(
        "Analyse p53",
        child=Splits(),
        limits=Limits(0.3),
        replay=Replay(run, no_sleep, answers=mailbox),
    )
    assert [a.strategy for a in outcome.attempts] == ["initial", "decomposition", "answer"]
    assert ran == ["Analyse p53", "fetch P04637", "analyse it", "analyse it"]
    assert "## fetch P04637\n\nfetched" in (outcome.result.output or "")
    assert "analysed in Mus musculus" in (outcome.result.output or "")


@pytest.mark.parametrize("keyed", ["by the question", "as answer"])
async def test_a_context_providers_answer_to_the_question_waits_in_ctx_ask(keyed: str) -> None:
    """context_provider= answering the question of an input_required failure (keyed by
    the question, or as "answer"): the next attempt (enriched) gets the answer from
    ctx.ask at once, not only in its prompt."""
    from lyra import adelegate_with_retry

    prompts: list[str] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        prompts.append(prompt)
        return await asks_organism(prompt, ctx)

    report = await adelegate_with_retry(
        "Analyse p53",
        child=child,
        base_timeout=5,
        context_provider=lambda failure: {
            failure.question if keyed == "by the question" else "answer": "Homo sapiens"
        },
    )
    parsed = parse_report(report)
    assert (parsed.status, parsed.output) == ("completed", "analysed in Homo sapiens")
    assert len(prompts) == 2
    assert "Homo sapiens" in prompts[1]  # (the enriched prompt carries it as well)


async def test_a_grandchilds_question_goes_to_the_roots_answerer() -> None:
    """ctx.delegate's grandchild asks whoever answers its parent."""

    async def parent(prompt: str, ctx: ChildContext) -> str:
        result = await ctx.delegate("Analyse p53", child=asks_organism)
        return result.output or "no answer"

    report = await adelegate_task("x", child=parent, answer=lambda question: "Danio rerio")
    assert parse_report(report).output == "analysed in Danio rerio"


# -- limits visible ------------------------------------------------------------------------------


async def test_a_child_sees_the_time_and_budget_it_has_left() -> None:
    """ctx.time_left and ctx.budget_left say what remains, to plan with."""
    seen: list[tuple[float, Budget]] = []

    async def planner(prompt: str, ctx: ChildContext) -> str:
        ctx.charge(input_tokens=100, turns=1)
        seen.append((ctx.time_left, ctx.budget_left))
        return "planned"

    budget = Budget(max_tokens=1000, max_turns=5, max_tool_calls=4)
    await Supervisor(planner, budget=budget).delegate("x", timeout=10)
    [(time_left, left)] = seen
    assert 9 < time_left <= 10
    assert (left.max_tokens, left.max_turns, left.max_tool_calls) == (900, 4, 4)


# -- evidence ------------------------------------------------------------------------------------


async def test_an_idle_report_names_the_tool_that_was_running() -> None:
    """The idle timeout fired inside a tool: the report says which, and for how long."""

    async def stuck(prompt: str, ctx: ChildContext) -> str:
        await ctx.tool("fetch_artifact", anyio.sleep_forever)
        return "never"

    result = await Supervisor(stuck).delegate("x", timeout=5, idle_timeout=0.2)
    assert result.failure is not None
    assert result.failure.error_type == "idle"
    assert "fetch_artifact" in result.failure.message
    assert "fetch_artifact" in (result.failure.blocked_on or "")


async def test_the_retry_loop_reports_the_spend_of_every_attempt() -> None:
    """delegate_with_retry's report and the outcome carry all attempts' usage."""

    async def spends(prompt: str, ctx: ChildContext) -> str:
        ctx.charge(input_tokens=300, output_tokens=30, turns=1)
        raise ConnectionError("dropped")

    with record_waits():
        report = await adelegate_with_retry("x", child=spends, max_retries=2)
        outcome = await recover("x", child=spends, policy=RecoveryPolicy(max_retries=2))
    assert parse_report(report).tokens_used == 990
    assert outcome.usage.tokens == 990
    assert outcome.result.usage is not None
    assert outcome.result.usage.tokens == 990


async def test_a_trees_budget_failure_names_the_delegations_that_spent_it() -> None:
    """The parent's report names the grandchild that spent the budget, with its spend;
    the sibling cancelled with it is listed, its event saying why."""

    async def big_spender(prompt: str, ctx: ChildContext) -> str:
        for _ in range(10):
            await anyio.sleep(0.01)
            ctx.charge(input_tokens=1000, turns=1)
        return "never"

    async def waiter(prompt: str, ctx: ChildContext) -> str:
        ctx.charge(input_tokens=10)
        await anyio.sleep_forever()
        return "never"

    async def parent(prompt: str, ctx: ChildContext) -> str:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: ctx.delegate("spend", child=big_spender))
            group.start_soon(lambda: ctx.delegate("wait", child=waiter))
        return "done"

    with capture_logs() as logs:
        result = await Supervisor(parent, budget=Budget(max_tokens=3330)).delegate("x", timeout=5)
    assert result.failure is not None
    assert result.failure.error_type == "budget"
    assert "spent by" in result.failure.message
    assert "4000 tokens" in result.failure.message
    cancelled = {e["reason"] for e in logs if e["event"] == "delegation_cancelled"}
    assert cancelled == {"budget exhausted elsewhere"}
    assert len(result.failed_delegations) == 2


async def test_a_budget_failure_names_the_attempt_itself_beside_its_delegations() -> None:
    """The parent spent half the budget itself, and its charge went over: it is named
    first among the spenders, each delegation by its subject too; never only the
    grandchildren, which would put the blame on them."""

    async def helper(prompt: str, ctx: ChildContext) -> str:
        ctx.charge(input_tokens=1500, turns=1)
        return "helped"

    async def parent(prompt: str, ctx: ChildContext) -> str:
        for _ in range(4):
            ctx.charge(input_tokens=1000, turns=1)
            await ctx.delegate("help", child=helper, subject="P04637")
        return "done"

    report = await adelegate_task("go", child=parent, timeout=5, budget=Budget(max_tokens=5000))
    assert "spent by the attempt itself (3000 tokens, 3 turns), child-" in report
    assert report.count("[P04637] (1500 tokens, 1 turn)") == 2


async def test_a_shared_budget_failure_says_each_tasks_share_of_it() -> None:
    """Tasks drawing on one Supervisor budget all stop when it runs out; each report
    says how much of it that task spent, so the one that spent most can be told from
    the ones that merely ran beside it."""

    others_spent = anyio.Semaphore(0)

    async def spends(prompt: str, ctx: ChildContext) -> str:
        if prompt != "hog":
            ctx.charge(input_tokens=1000, turns=1)
            others_spent.release()
            await anyio.sleep_forever()
        for _ in range(2):
            await others_spent.acquire()
        for _ in range(2):
            ctx.charge(input_tokens=3000, turns=1)
        return "ok"

    tasks = [Task(prompt=p, subject=p) for p in ("hog", "a", "b")]
    outcomes = await Supervisor(spends, timeout=5, budget=Budget(max_tokens=5000)).run(tasks)
    shares = {
        o.result.subject: o.result.failure.message.split("this attempt's share: ")[1].split(";")[0]
        for o in outcomes
        if o.result.failure is not None
    }
    assert shares == {
        "hog": "6000 tokens, 2 turns",
        "a": "1000 tokens, 1 turn",
        "b": "1000 tokens, 1 turn",
    }


async def test_shared_budget_reports_add_up_to_what_the_budget_was_charged() -> None:
    """Siblings whose work was already under way when the budget ran out are charged for
    it too (the tokens were spent): each report says its share and what the budget was
    charged in all, so the shares add up to the total, never to the figure of the moment
    the limit was passed."""

    async def spender(prompt: str, ctx: ChildContext) -> str:
        for _ in range(10):
            ctx.charge(input_tokens=400)
            await anyio.sleep(0.01)
        return "done"

    tasks = [Task(prompt=f"t{i}", subject=f"t{i}") for i in range(4)]
    outcomes = await Supervisor(spender, timeout=5, budget=Budget(max_tokens=5000)).run(tasks)
    messages = [o.result.failure.message for o in outcomes if o.result.failure is not None]
    assert len(messages) == 4
    shares = [int(m.split("this attempt's share: ")[1].split(" tokens")[0]) for m in messages]
    in_all = [int(m.split("in all so far: ")[1].split(" tokens")[0]) for m in messages]
    assert max(in_all) == sum(shares) == sum(o.result.usage.tokens for o in outcomes)


# -- cancellations nobody made --------------------------------------------------------------------


async def awaits_a_cancelled_future(prompt: str, ctx: ChildContext) -> str:
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    future.cancel()
    return await future


async def test_a_cancelled_future_is_the_childs_failure_never_a_lost_result() -> None:
    """A CancelledError nobody raised against this delegation is a retryable failure,
    and every task of a run still gets its outcome."""
    report = await adelegate_task("x", child=awaits_a_cancelled_future)
    parsed = parse_report(report)
    assert (parsed.category, parsed.retryable) == ("tool_error", True)
    assert "cancelled from outside the delegation" in parsed.message

    async def fine(prompt: str, ctx: ChildContext) -> str:
        return "ok"

    tasks = [Task(prompt=p) for p in ("a", "b", "c", "d", "e")]
    for concurrency in (1, 5):
        outcomes = await Supervisor(awaits_a_cancelled_future).run(
            tasks, max_concurrency=concurrency
        )
        assert [o.result.failure.category for o in outcomes if o.result.failure] == [
            "tool_error"
        ] * 5
    mixed = Supervisor(fine)
    outcomes = await mixed.run(
        [Task(prompt="a"), Task(prompt="b"), Task(prompt="c")], max_concurrency=3
    )
    assert [o.result.ok for o in outcomes] == [True, True, True]


class SingleFlight:
    """One shared fetch for every waiter: the first starts it, all await it. Awaiting a
    task cancels it when the waiter is cancelled, so the first waiter's deadline
    cancels the fetch under everyone else."""

    def __init__(self) -> None:
        self.fetch: asyncio.Task[str] | None = None

    async def get(self) -> str:
        if self.fetch is None:
            self.fetch = asyncio.ensure_future(asyncio.sleep(3, result="fetched"))
        return await self.fetch


async def test_a_single_flight_cancelled_by_the_first_waiters_deadline_loses_nothing() -> None:
    """Supervisor.run([A(timeout=0.2), B, C]) sharing one fetch: A times out, B and C get
    their own failure (retryable), every task has an outcome; in a tree the parent
    lists B and C as failed, never completed with them missing."""
    shared = SingleFlight()

    async def waiter(prompt: str, ctx: ChildContext) -> str:
        return await ctx.tool("fetch", shared.get)

    tasks = [Task(prompt="A", timeout=0.2), Task(prompt="B", timeout=10), Task(prompt="C")]
    outcomes = await Supervisor(waiter).run(tasks, max_concurrency=3)
    categories = [o.result.failure.category if o.result.failure else "ok" for o in outcomes]
    assert categories == ["timeout", "tool_error", "tool_error"]
    assert all(o.result.failure.suggested_retry for o in outcomes[1:])  # type: ignore[union-attr]

    shared = SingleFlight()

    async def parent(prompt: str, ctx: ChildContext) -> str:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: ctx.delegate("A", child=waiter, timeout=0.2))
            await anyio.sleep(0.01)
            group.start_soon(lambda: ctx.delegate("B", child=waiter))
        return "both came back"

    result = await Supervisor(parent).delegate("x", timeout=10)
    assert result.ok
    kinds = sorted(str(f.category) for f in result.failed_delegations)
    assert kinds == ["timeout", "tool_error"]


async def test_the_retry_loop_never_raises_a_cancellation_nobody_made() -> None:
    """delegate_with_retry returns a report (and retries) instead of raising."""
    calls: list[int] = []

    async def once_unlucky(prompt: str, ctx: ChildContext) -> str:
        calls.append(1)
        if len(calls) == 1:
            return await awaits_a_cancelled_future(prompt, ctx)
        return "second time lucky"

    with record_waits():
        report = await adelegate_with_retry("x", child=once_unlucky, max_retries=1)
    assert parse_report(report).output == "second time lucky"


async def test_a_real_cancellation_of_the_caller_still_propagates() -> None:
    """Cancelling the caller cancels the delegation (nothing is swallowed)."""
    with anyio.move_on_after(0.1) as scope:
        await adelegate_task("x", child=lambda p, c: anyio.sleep_forever())  # type: ignore[arg-type,return-value]
    assert scope.cancelled_caught


async def test_generator_exit_raised_by_a_child_is_its_failure() -> None:
    """A GeneratorExit the child's own code raises does not escape the delegation."""

    async def closes(prompt: str, ctx: ChildContext) -> str:
        raise GeneratorExit

    parsed = parse_report(await adelegate_task("x", child=closes))
    assert parsed.status == "failed"
    assert "cancelled from outside" in parsed.message


@pytest.mark.parametrize("where", ["child", "tool"])
async def test_generator_exit_raised_in_a_worker_thread_is_its_childs_failure(where: str) -> None:
    """A GeneratorExit from a plain ``def`` child or a sync tool (both run in a worker
    thread) is that child's failure, as an async child's is: thrown out of the future
    the loop awaited, it closed the delegation instead, and in a pool cancelled its
    siblings' outcomes."""

    def closes() -> str:
        raise GeneratorExit("a generator closed under the code")

    async def with_tool(prompt: str, ctx: ChildContext) -> str:
        if prompt != "bad":
            await anyio.sleep(0.1)
            return f"fine {prompt}"
        return await ctx.tool("closes", closes)

    def plain(prompt: str, ctx: ChildContext) -> str:
        return closes() if prompt == "bad" else f"fine {prompt}"

    child = with_tool if where == "tool" else plain
    parsed = parse_report(await adelegate_task("bad", child=child))  # type: ignore[arg-type]
    assert (parsed.status, parsed.category) == ("failed", "tool_error")
    assert "GeneratorExit: cancelled from outside" in parsed.message
    outcomes = await Supervisor(child, timeout=5).run(  # type: ignore[arg-type]
        [Task(prompt="one"), Task(prompt="bad"), Task(prompt="two")]
    )
    assert [o.result.status for o in outcomes] == ["completed", "failed", "completed"]


async def test_a_task_group_of_the_childs_with_an_error_beside_its_closing_is_its_failure() -> None:
    """Tools run in a task group of the child's own: one fails, another raises a
    GeneratorExit (or meets a future someone else cancelled). The group is the child's
    failure, and a pool's other tasks keep their outcomes."""

    async def grouped(prompt: str, ctx: ChildContext) -> str:
        if prompt != "bad":
            return f"fine {prompt}"

        async def fails() -> None:
            raise ValueError("tool a broke")

        async def closes() -> None:
            raise GeneratorExit

        async with anyio.create_task_group() as group:
            group.start_soon(fails)
            group.start_soon(closes)
        return "never"

    parsed = parse_report(await adelegate_task("bad", child=grouped))
    assert (parsed.status, parsed.category) == ("failed", "tool_error")
    outcomes = await Supervisor(grouped, timeout=5).run(
        [Task(prompt="one"), Task(prompt="bad"), Task(prompt="two")]
    )
    assert [o.result.status for o in outcomes] == ["completed", "failed", "completed"]


async def test_a_group_holding_the_callers_cancellation_still_propagates() -> None:
    """An error beside a real cancellation of the caller in one group (a cleanup that
    broke as the child was cancelled): the group passes through, nothing swallowed."""

    async def breaks_as_it_is_cancelled(prompt: str, ctx: ChildContext) -> str:
        try:
            await anyio.sleep_forever()
        except asyncio.CancelledError as exc:
            raise BaseExceptionGroup("cleanup", [ValueError("cleanup broke"), exc]) from None
        return "never"

    task = asyncio.ensure_future(adelegate_task("x", child=breaks_as_it_is_cancelled))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(BaseExceptionGroup) as raised:
        await task
    assert raised.group_contains(asyncio.CancelledError)


# -- fallbacks -----------------------------------------------------------------------------------


_BILLING_400 = (
    "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
    "Billing to upgrade or purchase credits."
)


@pytest.mark.parametrize(
    "refusal",
    [
        (403, "permission_error", "credit balance too low"),
        (400, "invalid_request_error", _BILLING_400),
    ],
    ids=["403", "the API's own 400"],
)
async def test_a_fallback_child_answers_when_the_first_ones_provider_refuses(
    refusal: tuple[int, str, str],
) -> None:
    """A quota failure moves at once to the next child; the report names who answered
    and why the one before did not. So does the Messages API's billing refusal, a 400
    (it was an invalid task: no fallback ran)."""
    prompts: list[str] = []

    class Quota:
        name = "claude-primary"

        async def run(self, prompt: str, ctx: ChildContext) -> str:
            prompts.append("primary")
            raise anthropic_error(*refusal)

    class Backup:
        name = "claude-backup"

        async def run(self, prompt: str, ctx: ChildContext) -> str:
            prompts.append("backup")
            return "answered"

    report = await adelegate_with_retry("x", child=Quota(), fallbacks=[Backup()])
    parsed = parse_report(report)
    assert (parsed.status, parsed.output, parsed.child) == (
        "completed",
        "answered",
        "claude-backup",
    )
    assert prompts == ["primary", "backup"]
    assert parsed.fallbacks
    assert parsed.fallbacks[0].startswith("claude-primary: auth")


@pytest.mark.parametrize("cause", ["bug", "quota"])
async def test_a_bug_in_the_child_is_never_hidden_behind_a_fallback(cause: str) -> None:
    """A fallback is for the provider's failures: an exception nothing classifies (a
    bug, tool_error / unknown, not retryable) stops with its own report, where a
    quota failure moves on to the next child."""
    falls_back = cause == "quota"
    raised = (
        anthropic_error(403, "permission_error", "credit balance too low")
        if falls_back
        else ValueError("a bug in the child")
    )
    ran: list[str] = []

    async def primary(prompt: str, ctx: ChildContext) -> str:
        ran.append("primary")
        raise raised

    async def backup(prompt: str, ctx: ChildContext) -> str:
        ran.append("backup")
        return "answered"

    parsed = parse_report(await adelegate_with_retry("x", child=primary, fallbacks=[backup]))
    assert ran == (["primary", "backup"] if falls_back else ["primary"])
    assert parsed.status == ("completed" if falls_back else "failed")


def _runs_of(ran: list[str], name: str, failure: Exception) -> Any:
    """A child that records ``name`` in ``ran`` each time it runs, then raises ``failure``
    (``None``: answers)."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        ran.append(name)
        if failure is not None:
            raise failure
        return f"answered by {name}"

    return child


@pytest.mark.parametrize(
    ("failure", "policy"),
    [
        (TransientError("gateway timeout", status=504), RecoveryPolicy(max_retries=3)),
        (TransientError("quota", status=429, retry_after=3600), RecoveryPolicy(max_retries=3)),
        (
            TransientError("busy", status=429, retry_after=30),
            RecoveryPolicy(max_retries=3, total_budget=20),
        ),
        (TransientError("overloaded", status=529), RecoveryPolicy(max_retries=0)),
    ],
    ids=["504 after backoffs", "retry-after over max_wait", "wait over total_budget",
         "no retry left"],
)  # fmt: skip
async def test_provider_trouble_this_child_cannot_wait_out_moves_to_the_fallback(
    failure: Exception, policy: RecoveryPolicy
) -> None:
    """A provider's time-out (504) is provider trouble as its 503 is; and trouble the
    loop cannot wait out on this child -- a retry-after over max_wait, a wait longer
    than the loop has left, no retry left (a Supervisor's default policy) -- moves to
    the next child at once, where the loop ended on the first one's report."""
    ran: list[str] = []
    primary, backup = _runs_of(ran, "primary", failure), _runs_of(ran, "backup", None)
    with record_waits() as waits:
        outcome = await recover("x", child=primary, fallbacks=[backup], policy=policy)
    assert (outcome.result.ok, ran[-1]) == (True, "backup"), outcome.result.report
    assert all(wait <= min(policy.max_wait, policy.total_budget or 600) for wait in waits)


async def test_a_storm_turned_away_waits_no_longer_than_max_wait_and_counts_for_fallback() -> None:
    """Tasks a rate-limit storm turned away before any work are sent again after the
    retry-after, never one longer than max_wait (a retry-after of an hour was waited
    eight times over); each such wait counts toward fallback_after."""
    ran: list[str] = []

    async def limited(prompt: str, ctx: ChildContext) -> str:
        ran.append(prompt)
        raise TransientError("quota", status=429, retry_after=int(prompt))

    policy = RecoveryPolicy(max_retries=3, max_wait=600)
    with record_waits() as waits:
        outcomes = await Supervisor(limited, timeout=5, policy=policy).run(
            [Task(prompt="3600") for _ in range(3)], max_concurrency=3
        )
    assert [o.result.failure.error_type for o in outcomes if o.result.failure] == ["rate_limit"] * 3
    assert waits == []
    backup_ran: list[str] = []
    policy = RecoveryPolicy(max_retries=3, fallback_after=2)
    supervisor = Supervisor(
        limited, timeout=5, policy=policy, fallbacks=[_runs_of(backup_ran, "backup", None)]
    )
    with record_waits() as waits:
        outcomes = await supervisor.run([Task(prompt="3") for _ in range(3)], max_concurrency=3)
    assert all(o.result.ok for o in outcomes)
    for outcome in outcomes:  # two waits on the first child (a backoff or a redispatch each)
        assert [a.strategy for a in outcome.attempts][-1] == "fallback"
        assert sum(a.wait > 0 for a in outcome.attempts) == 2, outcome.attempts


async def test_a_storms_jitter_never_takes_a_wait_past_max_wait() -> None:
    """'A child raising retry_after=1e6 makes every sibling wait about 600 s before being
    re-sent (wait=600.08), slightly over max_wait=600': the jitter that spreads a storm's
    siblings stops at max_wait."""

    async def limited(prompt: str, ctx: ChildContext) -> str:
        await ctx.cooled("anthropic")  # (siblings: refused at once, the tree's cooldown left)
        if prompt == "0":
            raise TransientError("quota", status=429, retry_after=1e6)
        await anyio.sleep(0.05)
        await ctx.cooled("anthropic")
        return "answered"

    policy = RecoveryPolicy(max_retries=0, max_wait=600)
    with record_waits() as waits:
        await Supervisor(limited, timeout=5, policy=policy).run(
            [Task(prompt=str(n)) for n in range(3)], max_concurrency=3
        )
    assert waits
    assert max(waits) <= 600


@pytest.mark.parametrize("fallbacks", ["mod:attr", ["backup_typo"], 5, [None]])
async def test_fallbacks_that_are_no_children_are_refused_before_anything_runs(
    fallbacks: object,
) -> None:
    """A fallback that is no child (a typo, a bare "module:attr" string read one letter
    at a time) is refused at once, not after the first child failed and was paid for."""
    runs: list[str] = []

    async def flaky(prompt: str, ctx: ChildContext) -> str:
        runs.append(prompt)
        raise anthropic_error(403, "permission_error", "credit balance too low")

    with pytest.raises(ConfigurationError, match=r"fallbacks= is a list|is not a child agent"):
        await adelegate_with_retry("x", child=flaky, fallbacks=fallbacks)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        Supervisor(flaky, fallbacks=fallbacks)  # type: ignore[arg-type]
    assert runs == []


def anthropic_error(status: int, kind: str, text: str) -> Exception:
    """The anthropic SDK's own exception for an API error of ``status``."""
    import httpx

    response = httpx.Response(status, request=httpx.Request("POST", "http://127.0.0.1/v1"))
    body = {"type": "error", "error": {"type": kind, "message": text}}
    cls = {
        400: anthropic.BadRequestError,
        403: anthropic.PermissionDeniedError,
        404: anthropic.NotFoundError,
    }[status]
    return cls(text, response=response, body=body)


@pytest.mark.parametrize(
    ("failure", "falls_back"),
    [
        (anthropic_error(404, "not_found_error", "model: claude-9-opus"), True),
        (SubjectNotFound("P99999 is not in UniProt"), False),
    ],
    ids=["an unknown model", "a missing subject"],
)
async def test_an_unknown_model_moves_to_the_fallback_a_missing_subject_does_not(
    failure: Exception, falls_back: bool
) -> None:
    """'An unknown model (tool_error / not_found) is not retryable, and with fallbacks= no
    fallback is tried', where the README's table says "stop; with fallbacks=, the next
    child". A subject nobody has (invalid_task / not_found) is missing for any child."""
    ran: list[str] = []
    primary, backup = _runs_of(ran, "primary", failure), _runs_of(ran, "backup", None)
    parsed = parse_report(await adelegate_with_retry("x", child=primary, fallbacks=[backup]))
    assert ran == (["primary", "backup"] if falls_back else ["primary"])
    assert parsed.status == ("completed" if falls_back else "failed")
    if falls_back:
        assert parsed.fallbacks[0].endswith("not_found: NotFoundError: model: claude-9-opus")


async def _spends_then_repeats(prompt: str, ctx: ChildContext) -> str:
    ctx.charge(turns=2)  # the whole budget: nothing left to continue with
    for _ in range(5):
        await ctx.tool("job_status", lambda: "running")
    return "never"


async def _calls_tools(prompt: str, ctx: ChildContext) -> str:
    for number in range(5):
        await ctx.tool("lookup", lambda n: f"entry {n}", number)
    return "never"


async def _overflows(prompt: str, ctx: ChildContext) -> str:
    raise Exception("Error code: 400 - prompt is too long: 210000 tokens > 200000 maximum")


@pytest.mark.parametrize(
    ("child", "budget", "error_type", "first_action"),
    [
        (_spends_then_repeats, Budget(max_turns=2), "loop", "Raise the budget ("),
        (
            _calls_tools,
            Budget(max_tool_calls=2),
            "budget",
            "Raise the budget (max_tool_calls) or narrow",
        ),
        (_overflows, None, "context_overflow", "Split the task into smaller subtasks, or"),
    ],
    ids=["a loop with no budget left", "max_tool_calls", "context overflow"],
)
async def test_the_first_suggested_action_fits_the_cause(
    child: Any, budget: Budget | None, error_type: str, first_action: str
) -> None:
    """'A loop on a spent budget is not retryable, yet its first action says "Continue with
    a prompt naming the repeated call"; a budget that ran out on max_tool_calls says "Raise
    the budget (max_tokens, max_cost_usd or max_turns)"; a context overflow gets "Clarify
    task requirements"': each names what would help (DESIGN §3: from the cause)."""
    report = await adelegate_task("go", child=child, budget=budget, max_repeats=3, timeout=5)
    parsed = parse_report(report)
    assert (parsed.error_type, parsed.retryable) == (error_type, False)
    assert parsed.suggested_actions[0].startswith(first_action), parsed.suggested_actions


# -- context overflow ------------------------------------------------------------------------------


async def test_prompt_too_long_is_context_overflow_and_never_retried_as_it_is() -> None:
    """Anthropic's 400 "prompt is too long" is invalid_task / context_overflow; a task
    with completed steps continues without the transcript, a bare one stops."""
    too_long = error(
        400, "invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum"
    )
    with MessagesAPI([too_long]) as api:
        async with anthropic.AsyncAnthropic(base_url=api.url, api_key="k", max_retries=0) as client:
            outcome = await recover(
                "Summarise the whole log", child=AnthropicChild(client=client), limits=Limits(10)
            )
    failure = outcome.result.failure
    assert failure is not None
    assert (failure.category, failure.error_type, failure.suggested_retry) == (
        "invalid_task",
        "context_overflow",
        False,
    )
    assert len(outcome.attempts) == 1  # no steps, no split: never the same prompt again


@pytest.mark.parametrize(
    "message",
    [
        "prompt is too long: 215000 tokens > 200000 maximum",  # Anthropic
        "This model's maximum context length is 8192 tokens",  # OpenAI
        "The input token count (1200000) exceeds the maximum number of tokens allowed "
        "(1048576).",  # Gemini
        "The request exceeds the maximum number of tokens allowed (1048576).",  # (file upload)
    ],
    ids=["anthropic", "openai", "gemini", "gemini-upload"],
)
def test_each_providers_overflow_message_is_context_overflow(message: str) -> None:
    """Providers say a prompt is over the context window in their own words (the count
    in the middle of Gemini's): each is context_overflow, raised as the SDK raises it or
    as a framework passes its text on."""
    from google.genai import errors

    from lyra.delegation._foreign import describe

    body = {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": message}}
    for exc in (ValueError(message), errors.ClientError(400, body)):
        assert describe(exc).error_type == "context_overflow", exc


async def test_an_overflow_after_steps_continues_fresh() -> None:
    """After completed steps the retry is a fresh continuation (ctx.fresh is True)."""
    seen: list[tuple[bool, str]] = []

    async def grows(prompt: str, ctx: ChildContext) -> str:
        seen.append((ctx.fresh, prompt))
        if len(seen) == 1:
            ctx.step("Read part 1")
            raise anthropic_error(400, "invalid_request_error", "prompt is too long")
        return "summary"

    outcome = await recover("Summarise", child=grows, limits=Limits(5))
    assert outcome.result.ok
    assert [a.strategy for a in outcome.attempts] == ["initial", "fresh_continuation"]
    assert seen[1][0] is True
    assert "Read part 1" in seen[1][1]


# -- rate-limit storms -----------------------------------------------------------------------------


async def test_a_storm_waits_out_one_shared_cooldown() -> None:
    """Fifty siblings on one provider: after the 429s (retry-after 2) of the requests in
    flight, no request is sent inside the window; the supervisor lowers its
    concurrency; the refused siblings are sent again and none fails."""
    replies = [message("ok") for _ in range(10)] + [rate_limited(2)] * 5
    replies += [message("ok") for _ in range(40)]
    known: list[float] = []

    class Heard:
        def rate_limited(self, provider: str, seconds: float) -> None:
            known.append(time.monotonic())

        def request_succeeded(self, provider: str) -> None:
            pass

    sent: list[float] = []

    async def sending(request: httpx2.Request) -> None:
        sent.append(time.monotonic())

    with MessagesAPI(replies, strict=False) as api:
        hooks = {"request": [sending]}
        async with (
            httpx2.AsyncClient(event_hooks=hooks) as http,
            anthropic.AsyncAnthropic(
                base_url=api.url, api_key="k", max_retries=0, http_client=http
            ) as client,
        ):
            supervisor = Supervisor(AnthropicChild(client=client))
            supervisor.tree.listen(Heard())
            with capture_logs() as logs, record_waits():
                outcomes = await supervisor.run(
                    [Task(prompt=f"task {n}") for n in range(50)], max_concurrency=10
                )
    assert all(o.result.ok for o in outcomes)
    assert len(api.requests) == 55  # each of the 5 refused once, sent again
    # From when the cooldown was known until it passed, nothing was sent.
    assert [t for t in sent if known[0] < t < known[0] + 1.99] == []
    assert max(sent) >= known[0] + 1.99  # the refused were sent again
    assert any(e["event"] == "rate_limit_cooldown" for e in logs)
    lowered = [e for e in logs if e["event"] == "concurrency_changed"]
    assert lowered
    assert lowered[0]["concurrency"] < 10


async def test_a_storm_a_tool_meets_is_a_storm_of_that_tools_service() -> None:
    """A tool's 429 with a retry-after (a data API's, or a model called through
    ``ctx.tool``) met by siblings at once is a storm of the service behind that tool:
    the pool lowers its concurrency, and the siblings it turned away are sent again
    after the retry-after, not counted as retries (only a model provider's was: with no
    retries, every task failed)."""
    started = time.monotonic()
    calls: list[float] = []

    async def lookup(subject: str) -> str:
        calls.append(time.monotonic() - started)
        if len(calls) <= 8:  # the first call of each: in flight together, all refused
            await anyio.sleep(0.05)
            raise TransientError("429 Too Many Requests", retry_after=0.4, status=429)
        return f"{subject}: found"

    async def child(prompt: str, ctx: ChildContext) -> str:
        return await ctx.tool("lookup", lookup, prompt)

    with capture_logs() as logs:
        outcomes = await Supervisor(child, timeout=5).run(
            [Task(prompt=f"t{n}") for n in range(8)], max_concurrency=8
        )
    assert [o.result.output for o in outcomes] == [f"t{n}: found" for n in range(8)]
    assert [o.attempts[-1].strategy for o in outcomes] == ["redispatch"] * 8
    cooled = [e for e in logs if e["event"] == "rate_limit_cooldown"]
    assert {e["provider"] for e in cooled} == {"tool:lookup"}
    assert len(calls) == 16
    assert min(calls[8:]) >= 0.05 + 0.4 - 0.02  # sent again after the retry-after
    lowered = [e for e in logs if e["event"] == "concurrency_changed"]
    assert lowered[0]["concurrency"] < 8


async def test_retries_after_a_storm_run_no_more_at_once_than_the_lowered_concurrency() -> None:
    """The pool halves its concurrency on a rate limit, and the tasks' retries keep to it
    too: a task gives its place back while it backs off and waits for one before its
    next attempt (its place was held through its whole recovery loop: eight retries
    ran at once while the pool said one)."""
    running, calls, over = 0, {}, []

    with capture_logs() as logs:

        async def limited(prompt: str, ctx: ChildContext) -> str:
            nonlocal running
            calls[prompt] = calls.get(prompt, 0) + 1
            running += 1
            changes = [e for e in logs if e["event"] == "concurrency_changed"]
            allowed = changes[-1]["concurrency"] if changes else 8
            if running > allowed:
                over.append((prompt, calls[prompt], running, allowed))
            try:
                await anyio.sleep(0.05)
                if calls[prompt] <= 2:
                    raise TransientError("429 Too Many Requests", retry_after=0.2, status=429)
                return "ok"
            finally:
                running -= 1

        supervisor = Supervisor(limited, timeout=5, policy=RecoveryPolicy(max_retries=3))
        with record_waits():
            tasks = [Task(prompt=f"t{n}") for n in range(8)]
            outcomes = await supervisor.run(tasks, max_concurrency=8)
    assert all(o.result.ok for o in outcomes)
    assert min(e["concurrency"] for e in logs if e["event"] == "concurrency_changed") == 4
    assert over == []


async def test_a_burst_of_rate_limits_halves_the_concurrency_once() -> None:
    """Eight requests in flight together all meet the storm's 429: that is one storm, and
    the pool halves once, 8 to 4 (it halved on each, to 1, and ran the rest of the
    storm one child at a time)."""

    async def limited(prompt: str, ctx: ChildContext) -> str:
        await anyio.sleep(0.02)
        if ctx.attempt == 1:
            raise TransientError("429 Too Many Requests", retry_after=0.05, status=429)
        return "ok"

    with capture_logs() as logs, record_waits():
        outcomes = await Supervisor(limited, timeout=5).run(
            [Task(prompt=f"t{n}") for n in range(8)], max_concurrency=8
        )
    assert all(o.result.ok for o in outcomes)
    changes = [e for e in logs if e["event"] == "concurrency_changed"]
    assert [(e["previous"], e["concurrency"]) for e in changes][:1] == [(8, 4)]
    assert min(e["concurrency"] for e in changes) == 4


def test_a_storm_after_the_last_ones_window_halves_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The window of one storm is its cooldown (at least a second): a 429 after it is a
    new storm's and halves again; another provider's storm is its own at once."""
    from lyra.supervisor import _throttle

    now = [100.0]
    monkeypatch.setattr(_throttle.time, "monotonic", lambda: now[0])
    throttle = _throttle.Throttle(16)
    for _ in range(5):
        throttle.rate_limited("anthropic", 3.0)
    assert throttle.allowed == 8
    now[0] += 2.9
    throttle.rate_limited("anthropic", 0.0)
    assert throttle.allowed == 8  # still the first storm's cooldown
    throttle.rate_limited("openai", 0.0)
    assert throttle.allowed == 4
    now[0] += 0.2
    throttle.rate_limited("anthropic", 0.0)  # after the cooldown: a new storm
    assert throttle.allowed == 2
    now[0] += 0.5
    throttle.rate_limited("anthropic", 0.0)  # within a second of it: the same one
    assert throttle.allowed == 2
    throttle.rate_limited("anthropic", 4.0)  # a longer retry-after in it extends it
    now[0] += 3.0
    throttle.rate_limited("anthropic", 0.0)
    assert throttle.allowed == 2


@pytest.mark.parametrize("retry_after", [1.0, 3600.0])
async def test_a_cooldown_past_the_deadline_is_the_storms_refusal_not_a_timeout(
    retry_after: float,
) -> None:
    """Siblings whose deadline ends before the provider's cooldown do not wait it out to
    time out ("no progress: split the task", not retried, no fallback tried): each is
    refused at once as the storm's rate limit, sent again after the cooldown, or to the
    fallback child when the cooldown is longer than the policy waits."""
    refused = False

    async def primary(prompt: str, ctx: ChildContext) -> str:
        nonlocal refused
        await ctx.cooled("acme")
        if not refused:
            refused = True
            raise TransientError("429", retry_after=retry_after, status=429)
        return f"ok {prompt}"

    async def backup(prompt: str, ctx: ChildContext) -> str:
        return f"backup {prompt}"

    policy = RecoveryPolicy(max_retries=1, max_wait=60)
    supervisor = Supervisor(primary, timeout=0.5, policy=policy, fallbacks=[backup])
    started = time.monotonic()
    outcomes = await supervisor.run([Task(prompt=f"t{n}") for n in range(4)], max_concurrency=4)
    took = time.monotonic() - started
    if retry_after == 1.0:  # waited out once, outside any attempt's deadline
        assert [o.result.output for o in outcomes] == [f"ok t{n}" for n in range(4)]
        assert {o.attempts[-1].strategy for o in outcomes} == {"redispatch"}
        assert 1.0 <= took < 2.5
    else:  # longer than the policy waits: the fallback child, at once
        assert [o.result.output for o in outcomes] == [f"backup t{n}" for n in range(4)]
        assert took < 1.0


async def test_lyras_own_refusals_within_a_cooldown_tell_the_tree_nothing() -> None:
    """Requests lyra refused because the cooldown outlasted their deadline were never
    sent: they neither halve the pool's concurrency again nor start another cooldown
    (a second run inside the first one's cooldown halved 8 to 4 with no request
    sent, and each refusal logged a cooldown of its own)."""
    supervisor = Supervisor(lambda p, c: _cooled_ok(p, c), timeout=0.3)
    supervisor.tree.rate_limited("acme", 1.0, task="an earlier run's")
    with capture_logs() as logs:
        outcomes = await supervisor.run([Task(prompt=f"t{n}") for n in range(4)])
    assert [o.result.output for o in outcomes] == ["ok"] * 4
    assert {tuple(a.strategy for a in o.attempts) for o in outcomes} == {("initial", "redispatch")}
    said = {e["event"] for e in logs}
    assert "concurrency_changed" not in said
    assert "rate_limit_cooldown" not in said


async def _cooled_ok(prompt: str, ctx: ChildContext) -> str:
    await ctx.cooled("acme")
    return "ok"


async def test_a_provider_that_refuses_everything_is_an_outage_not_a_storm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A provider that answers nothing through eight refusals over half a minute (here
    0.2 s) is out, not storming: its refused tasks are no longer sent again for free
    (each took nine tries, one at a time: 20 tasks, 171 s at a 1 s retry-after); the
    policy holds, as for a lone task (here max_retries=0: they fail)."""
    from lyra.delegation import _tree

    monkeypatch.setattr(_tree, "OUTAGE_SECONDS", 0.2)
    sent: list[str] = []

    async def refused(prompt: str, ctx: ChildContext) -> str:
        await ctx.cooled("acme")
        sent.append(prompt)
        raise TransientError("429", retry_after=0.05, status=429)

    outcomes = await Supervisor(refused, timeout=5).run(
        [Task(prompt=f"t{n}") for n in range(6)], max_concurrency=6
    )
    assert {o.result.status for o in outcomes} == {"failed"}
    assert len(sent) <= 6 + 8 + 1  # each task once, and the storm's re-sends before it


def test_an_outage_takes_eight_refusals_over_half_a_minute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eight cooldowns in ten seconds are a storm still (a short outage clears as one);
    refusals without a retry-after count once a second; half a minute of them is an
    outage, and one answered request ends it."""
    from lyra.delegation import _tree

    now = [1000.0]
    monkeypatch.setattr(_tree.time, "monotonic", lambda: now[0])
    tree = Tree()
    for n in range(8):
        tree.rate_limited("acme", 1.0, task=f"t{n}")
        now[0] += 1.25
    tree.rate_limited("acme", 1.0, task="t8")
    assert tree.storm("acme", "t9")  # nine in ten seconds: a storm
    for _ in range(25):
        for _ in range(5):  # a burst without retry-after: one refusal
            tree.rate_limited("acme", 0.0, task="t8")
        now[0] += 1.0
    tree.rate_limited("acme", 1.0, task="t8")
    assert not tree.storm("acme", "t9")  # out: t8's cooldown is no storm's for t9
    tree.succeeded("acme")
    assert tree.storm("acme", "t9")  # a storm again


async def test_a_storm_without_a_retry_after_is_a_storm_still() -> None:
    """A provider's 429 (or 529) without ``retry-after``, met by siblings at once, is a
    storm: the pool halves its concurrency and the refused are sent again after a
    jittered backoff, not counted as retries (they all failed under max_retries=0)."""
    calls: dict[str, int] = {}

    async def limited(prompt: str, ctx: ChildContext) -> str:
        calls[prompt] = calls.get(prompt, 0) + 1
        await anyio.sleep(0.02)
        if calls[prompt] == 1:
            raise TransientError("529 Overloaded", status=529, error_type="rate_limit")
        return "ok"

    with capture_logs() as logs, record_waits() as waits:
        outcomes = await Supervisor(limited, timeout=5).run(
            [Task(prompt=f"t{n}") for n in range(8)], max_concurrency=8
        )
    assert all(o.result.ok for o in outcomes)
    assert {tuple(a.strategy for a in o.attempts) for o in outcomes} == {("initial", "redispatch")}
    assert len(set(waits)) == 8  # jittered: no two sent again on one beat
    assert all(1.0 <= wait <= 1.5 for wait in waits)  # the policy's first backoff
    changes = [e for e in logs if e["event"] == "concurrency_changed"]
    assert changes[0]["concurrency"] == 4
    assert not [e for e in logs if e["event"] == "rate_limit_cooldown"]  # none was asked for


def test_siblings_sent_again_after_a_retry_after_are_spread_past_it() -> None:
    """A storm's refused siblings wait the retry-after and up to the policy's jitter of a
    backoff more, each its own share: as the cooldown ends they are not all sent on one
    beat (a sub-second retry-after met a provider with one token left, and refused all
    but one again)."""
    import random

    from lyra.delegation import ChildFailure, ErrorType, FailureCategory
    from lyra.recovery._strategies import LoopState, Plan, redispatch

    failure = ChildFailure(
        category=FailureCategory.TOOL_ERROR,
        message="429",
        error_type=ErrorType.RATE_LIMIT,
        retry_after=0.2,
        storm=True,
        session_id="child-1",
        duration=0.1,
    )
    policy = RecoveryPolicy()
    rng = random.Random(7)
    waits = []
    for _ in range(20):
        plan = redispatch(
            failure,
            Plan(strategy="initial", prompt="x", timeout=5),
            LoopState(prompt="x"),
            policy,
            rng=rng,
        )
        assert plan is not None
        waits.append(plan.wait)
    assert all(0.2 <= wait <= 0.2 + policy.backoff_base * policy.jitter for wait in waits)
    assert max(waits) - min(waits) > 0.25


async def test_a_storms_task_back_while_its_siblings_back_off_is_no_lone_task() -> None:
    """A storm's task whose cooldown ended first meets the 429 again while its siblings
    still wait out theirs: they are in the pool, between attempts, so it is the storm's
    (sent again), never a lone task's failure under max_retries=0."""
    calls: dict[str, int] = {}

    async def limited(prompt: str, ctx: ChildContext) -> str:
        calls[prompt] = tries = calls.get(prompt, 0) + 1
        if prompt != "t0":
            await anyio.sleep(0.02)
        if tries <= 2:
            raise TransientError("429", retry_after=0.05 if prompt == "t0" else 0.3, status=429)
        return "ok"

    supervisor = Supervisor(limited, timeout=5, policy=RecoveryPolicy(max_retries=0))
    outcomes = await supervisor.run([Task(prompt=f"t{n}") for n in range(4)], max_concurrency=4)
    assert [o.result.ok for o in outcomes] == [True] * 4


async def test_a_wait_for_a_place_after_a_backoff_counts_against_total_budget() -> None:
    """A task back from a backoff may wait for a place in the pool too: its next attempt
    gets what the loop's total_budget has left after that, never the time it was
    fitted to before (the run ended late by the time it queued)."""
    calls: dict[str, int] = {}
    started = time.monotonic()

    async def child(prompt: str, ctx: ChildContext) -> str:
        calls[prompt] = tries = calls.get(prompt, 0) + 1
        if prompt.startswith("slow"):
            if tries == 1:
                raise TransientError("429", retry_after=0.05, status=429)
            await anyio.sleep(0.9)
            return "ok"
        if tries == 1:
            await anyio.sleep(0.01)
            raise ConnectionError("reset")
        await anyio.sleep(0.5)
        return "ok"

    policy = RecoveryPolicy(max_retries=2, total_budget=1.0, backoff_base=0.05, backoff_cap=0.1)
    tasks = [Task(prompt="slow1"), Task(prompt="slow2"), Task(prompt="fast")]
    await Supervisor(child, timeout=5, policy=policy).run(tasks, max_concurrency=3)
    assert time.monotonic() - started < 1.3  # (the budget and an event loop's lateness)


async def test_a_task_cancelled_as_it_waits_for_a_place_leaves_no_place_taken() -> None:
    """A pool's task cancelled while it waits for a place holds none afterwards: the
    next task gets one (it stayed counted, and every later task waited for ever)."""
    from lyra.supervisor._throttle import Throttle

    throttle = Throttle(1)
    release = anyio.Event()

    async def holder() -> None:
        async with throttle.slot():
            await release.wait()

    async with anyio.create_task_group() as group:
        group.start_soon(holder)
        await anyio.sleep(0.01)
        with anyio.move_on_after(0.05):
            async with throttle.slot():
                pass
        release.set()
    with anyio.fail_after(1):
        async with throttle.slot():
            assert (throttle.running, throttle.waiting) == (1, 0)


@pytest.mark.parametrize("keep", [True, False])
async def test_a_storm_met_at_once_is_a_storm_for_the_pools_first_child(keep: bool) -> None:
    """Every child is refused before it awaits anything (a client-side limiter, say):
    the pool's first child meets the 429 before its siblings have started, and it is a
    storm's all the same: sent again, never failed for it under max_retries=0 (the
    pool lazily pulling its tasks or keeping them)."""
    refused: list[str] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        if len(refused) < 4:
            refused.append(prompt)
            raise TransientError("429", retry_after=0.01, status=429, error_type="rate_limit")
        return f"ok {prompt}"

    supervisor = Supervisor(child, timeout=5, policy=RecoveryPolicy(max_retries=0))
    delivered: list[str] = []
    with record_waits():
        await supervisor.run(
            [Task(prompt=f"t{n}") for n in range(4)],
            max_concurrency=4,
            keep=keep,
            on_outcome=lambda o: delivered.append(o.result.output or o.result.report),
        )
    assert refused[0] == "t0"
    assert sorted(delivered) == ["ok t0", "ok t1", "ok t2", "ok t3"]


async def test_a_child_alone_in_a_pool_the_storm_halved_is_no_lone_child() -> None:
    """The storm halved a pool of two to one place: t0, sent again, meets the 429 once
    more while it runs alone, its own cooldown over, t2 waiting for a place (t1 ended
    on an error of its own). Its rate limit is the storm's (t2 will meet it too), never
    a lone task's failure under max_retries=0."""
    calls: dict[str, int] = {}
    t0_refused, t1_done = anyio.Event(), anyio.Event()

    async def child(prompt: str, ctx: ChildContext) -> str:
        calls[prompt] = tries = calls.get(prompt, 0) + 1
        if prompt == "t1":
            await t0_refused.wait()
            raise ValueError("t1's own bug")
        if prompt == "t0" and tries <= 2:
            if tries == 2:
                await t1_done.wait()  # t1 left its place, t2 waits for one: t0 runs alone
                await anyio.sleep(0.02)  # (the cooldown it asked for is over)
            t0_refused.set()
            raise TransientError("429", retry_after=0.001, status=429, error_type="rate_limit")
        return f"ok {prompt}"

    def delivered(task: Task, outcome: Any) -> None:
        outputs[task.prompt] = outcome.result.output or outcome.result.report
        if task.prompt == "t1":
            t1_done.set()

    outputs: dict[str, str] = {}
    supervisor = Supervisor(child, timeout=5, policy=RecoveryPolicy(max_retries=0))
    await supervisor.run(
        [Task(prompt=f"t{n}") for n in range(4)], max_concurrency=2, on_outcome=delivered
    )
    assert calls["t0"] == 3
    assert {name: output[:10] for name, output in outputs.items()} == {
        "t0": "ok t0",
        "t1": "Child agen",
        "t2": "ok t2",
        "t3": "ok t3",
    }


async def test_a_lone_tasks_rate_limit_is_no_storm_and_its_policy_holds() -> None:
    """One task under a supervisor meets a 429 (retry-after 3) that never clears: no
    sibling ran beside it, so it is no storm's and is not sent again behind the policy's
    back; with max_retries=0 it ends after its one attempt."""
    with MessagesAPI([rate_limited(3)] * 10, strict=False) as api:
        async with anthropic.AsyncAnthropic(base_url=api.url, api_key="k", max_retries=0) as client:
            supervisor = Supervisor(
                AnthropicChild(client=client), policy=RecoveryPolicy(max_retries=0)
            )
            with record_waits() as waits:
                [outcome] = await supervisor.run([Task(prompt="task")])
    assert [a.strategy for a in outcome.attempts] == ["initial"]
    assert len(api.requests) == 1
    assert waits == []
    failure = outcome.result.failure
    assert failure is not None
    assert (failure.error_type, failure.storm) == ("rate_limit", False)


@pytest.mark.parametrize("provider", [None, "acme"])
async def test_a_plain_childs_successes_raise_the_concurrency_again(provider: str | None) -> None:
    """A plain child (no framework telling of its requests) that met a rate limit: the
    pool halves its concurrency, and the children's successes give it back (it stayed
    at 1 for the rest of the run); the events name the child's service, not lyra. So
    with a child that names its provider (``ctx.cooled``), whose successes gave
    nothing back."""
    calls: dict[str, int] = {}

    async def child(prompt: str, ctx: ChildContext) -> str:
        calls[prompt] = calls.get(prompt, 0) + 1
        if provider is not None:
            await ctx.cooled(provider)
        await anyio.sleep(0.01)
        if calls[prompt] == 1 and prompt in ("task 0", "task 1", "task 2"):
            raise TransientError("429", retry_after=0.05, status=429, error_type="rate_limit")
        return "ok"

    supervisor = Supervisor(child, timeout=5, policy=RecoveryPolicy(max_retries=2))
    with capture_logs() as logs, record_waits():
        outcomes = await supervisor.run(
            [Task(prompt=f"task {n}") for n in range(60)], max_concurrency=8
        )
    assert all(o.result.ok for o in outcomes)
    changes = [e for e in logs if e["event"] == "concurrency_changed"]
    assert changes[0]["reason"] == "rate limited by " + (provider or "the child's service")
    assert changes[-1]["reason"] == "requests succeed again"
    assert changes[-1]["concurrency"] > 1


def test_a_streamed_runs_progress_ends_with_the_counts_of_every_protein() -> None:
    """Off a terminal, a streamed run prints its counts every few seconds and once more
    when the last protein finishes, however soon after the one before."""
    import io

    from lyra.cli._live import LiveView
    from lyra.proteins import FailedAnalysis

    stream = io.StringIO()
    view = LiveView(3, stream, streamed=True)
    failed = FailedAnalysis(
        protein_id="XXXXX",
        error="no",
        category="invalid_task",
        failed_at_stage="fetch_protein",
        tasks_skipped=[],
        attempts=1,
    )
    for _ in range(3):
        view.update(failed)
    lines = stream.getvalue().splitlines()
    assert lines == [
        "[3/3] 0 completed, 0 partial, 3 failed; failed or partial, by category: invalid_task 3"
    ]


def test_a_streamed_runs_breakdown_counts_partial_proteins_apart_from_the_failed() -> None:
    """A partial protein's category is in the breakdown, which is labelled "failed or
    partial" as stdout's is: it read "1 failed (invalid_task 1, missing_context 1)"."""
    import io

    from lyra.cli._live import LiveView
    from lyra.proteins import FailedAnalysis, PartialAnalysis

    stream = io.StringIO()
    view = LiveView(2, stream, streamed=True)
    common = {"error": "no", "failed_at_stage": "fetch_protein", "tasks_skipped": []}
    view.update(FailedAnalysis(protein_id="XXXXX", category="invalid_task", **common))
    view.update(
        PartialAnalysis(protein_id="P0DTC2", brief="b", category="missing_context", **common)
    )
    assert stream.getvalue().splitlines()[-1] == (
        "[2/2] 0 completed, 1 partial, 1 failed; failed or partial, by category: "
        "invalid_task 1, missing_context 1"
    )


async def test_the_progress_display_says_when_a_provider_lowered_the_concurrency() -> None:
    """While a rate limit holds a supervisor's pool below its max_concurrency, the
    progress display's counts say how many children run at once."""
    import io

    from lyra.cli._live import LiveView
    from lyra.delegation._internal import observed_pool
    from lyra.supervisor._throttle import Throttle

    view = LiveView(10, io.StringIO())
    throttle = Throttle(8)
    with observed_pool(throttle):
        assert "rate limited" not in view.counts()
        throttle.rate_limited("anthropic", 2.0)
        assert view.counts().endswith("; rate limited: 4 of 8 at once")
        for _ in range(40):
            throttle.request_succeeded("anthropic")
        assert "rate limited" not in view.counts()  # climbed back to its ceiling
