"""Recovery strategies through delegate_with_retry, with real child behaviour."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from lyra import (
    Budget,
    ChildContext,
    ChildFailure,
    Limits,
    RecoveryPolicy,
    adelegate_with_retry,
    delegate_with_retry,
    parse_report,
)
from lyra.errors import TaskRejected, TransientError
from lyra.recovery import decompose, record_waits, recover

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def no_real_sleeps() -> Iterator[list[float]]:
    """Every recovery test runs with the testing switch: waits are recorded, not slept."""
    with record_waits() as waits:
        yield waits


class Script:
    """A child whose behaviour per attempt is scripted; it records every prompt."""

    def __init__(self, *behaviours: Any) -> None:
        self.behaviours = list(behaviours)
        self.prompts: list[str] = []
        self.timeouts: list[float] = []

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        self.prompts.append(prompt)
        self.timeouts.append(ctx.timeout)
        behaviour = self.behaviours[min(len(self.prompts), len(self.behaviours)) - 1]
        return await behaviour(prompt, ctx)


async def succeed(prompt: str, ctx: ChildContext) -> str:
    return f"done: {prompt.splitlines()[0]}"


async def hang_after_fetch(prompt: str, ctx: ChildContext) -> str:
    await ctx.tool("fetch", lambda: "data")
    await anyio.sleep_forever()
    return "never"


async def step_then_hang(prompt: str, ctx: ChildContext) -> str:
    ctx.step("Fetched the entry")
    await anyio.sleep_forever()
    return "never"


async def hang_at_once(prompt: str, ctx: ChildContext) -> str:
    await anyio.sleep_forever()
    return "never"


async def rate_limited(prompt: str, ctx: ChildContext) -> str:
    raise TransientError("429 Too Many Requests", retry_after=7.0, status=429)


async def step_then_break(prompt: str, ctx: ChildContext) -> str:
    ctx.step("Wrote src/auth.py")
    ctx.file_modified("src/auth.py")
    raise ImportError("cannot import 'bcrypt'")


async def lacks_context(prompt: str, ctx: ChildContext) -> str:
    if "project_root" not in prompt:
        ctx.block("missing_context", "Which project? No root given")
    return "found it"


async def contradictory(prompt: str, ctx: ChildContext) -> str:
    ctx.block("invalid_task", "Cannot both keep and delete the module")


async def test_timeout_with_progress_doubles_the_timeout() -> None:
    """A timeout after a tool run is retried with the same prompt and twice the time."""
    child = Script(hang_after_fetch, succeed)
    with capture_logs() as events:
        report = await adelegate_with_retry("Analyze P04637", child=child, base_timeout=0.1)
    parsed = parse_report(report)
    assert (parsed.status, parsed.attempt) == ("completed", 2)
    assert child.timeouts == [0.1, 0.2]
    assert child.prompts == ["Analyze P04637", "Analyze P04637"]
    recovery = [e for e in events if e["event"] == "recovery_attempt"]
    assert [(e["strategy"], e["attempt"], e["timeout"]) for e in recovery] == [
        ("timeout_doubling", 2, 0.2)
    ]


async def test_timeout_after_completed_steps_continues() -> None:
    """A timeout after completed steps retries with a continuation prompt and doubled time."""
    child = Script(step_then_hang, succeed)
    await adelegate_with_retry("Summarise the entry", child=child, base_timeout=0.1)
    assert child.timeouts == [0.1, 0.2]
    assert "✓ Fetched the entry" in child.prompts[1]
    assert "Summarise the entry" in child.prompts[1]


async def test_timeout_cap_limits_doubling() -> None:
    """The doubled timeout never exceeds the policy's cap."""
    child = Script(hang_after_fetch, hang_after_fetch, succeed)
    policy = RecoveryPolicy(max_retries=2, timeout_cap=0.15)
    await adelegate_with_retry("task", child=child, base_timeout=0.1, policy=policy)
    assert child.timeouts == [0.1, 0.15, 0.15]


async def test_timeout_without_progress_decomposes() -> None:
    """A no-progress timeout splits a listed task into subtasks, each with a share of time."""
    child = Script(hang_at_once, succeed, succeed)
    prompt = "Do three things:\n1. fetch P04637\n2. fetch Q8I3H7"
    report = await adelegate_with_retry(prompt, child=child, base_timeout=0.2)
    parsed = parse_report(report)
    assert parsed.status == "completed"
    assert parsed.attempt == 2
    assert child.timeouts == [0.2, 0.1, 0.1]
    assert child.prompts[1].startswith("fetch P04637")
    assert "## fetch P04637" in (parsed.output or "")
    assert "## fetch Q8I3H7" in (parsed.output or "")


async def test_a_subtask_listed_twice_is_one() -> None:
    """'A repeated subtask is reported twice': it ran once, yet the output had its
    section twice, its step was listed twice, and the time was shared by three."""
    child = Script(hang_at_once, succeed, succeed)
    prompt = "Do these:\n- fetch P04637\n- fetch P04637\n- fetch Q8I3H7"
    parsed = parse_report(await adelegate_with_retry(prompt, child=child, base_timeout=0.2))
    assert parsed.status == "completed"
    assert child.timeouts == [0.2, 0.1, 0.1]
    assert (parsed.output or "").count("## fetch P04637") == 1


async def test_decomposition_aggregates_a_partial_failure() -> None:
    """When some subtasks fail, the aggregate is a partial failure naming what completed."""
    child = Script(hang_at_once, succeed, contradictory)
    outcome = await recover(
        "- Analyze P04637\n- Analyze P69905",
        child=child,
        policy=RecoveryPolicy(max_retries=1),
        limits=Limits(timeout=0.2),
    )
    failure = outcome.result.failure
    assert failure is not None
    assert failure.category == "partial"
    assert failure.completed_steps == ("Subtask done: Analyze P04637",)


async def test_a_completed_subtask_is_kept_and_never_run_again() -> None:
    """A split task whose second subtask fails: the partial result keeps the first's
    output, the continuation runs only the second, and the final output gives both, in
    order; the first ran once."""
    child = Script(hang_at_once, succeed, contradictory, succeed)
    outcome = await recover(
        "- Analyze P04637\n- Analyze P69905",
        child=child,
        policy=RecoveryPolicy(max_retries=2),
        limits=Limits(timeout=0.2),
    )
    partial = outcome.attempts[1].result
    assert partial.failure is not None
    assert partial.failure.category == "partial"
    assert (partial.output or "").startswith("## Analyze P04637\n\n")
    assert [a.strategy for a in outcome.attempts] == ["initial", "decomposition", "continuation"]
    assert [p.splitlines()[0] for p in child.prompts[1:]] == [
        "Analyze P04637",
        "Analyze P69905",
        "Analyze P69905",
    ]
    output = outcome.result.output or ""
    assert outcome.result.ok
    assert output.index("## Analyze P04637") < output.index("## Analyze P69905")


async def test_a_subtask_run_again_is_its_next_attempt_with_the_state_it_left() -> None:
    """A subtask a continuation runs again is that subtask's second attempt (its
    ctx.attempt and its events say 2, not 1 twice) and finds the ctx.state its first
    attempt left."""
    seen: list[tuple[str, int, dict[str, Any]]] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        first = prompt.splitlines()[0]
        if first.startswith("- "):  # the whole task: no progress, so it is split
            await anyio.sleep(5)
        seen.append((first, ctx.attempt, dict(ctx.state)))
        ctx.state["tries"] = ctx.state.get("tries", 0) + 1
        if first == "Analyze P69905" and ctx.state["tries"] == 1:
            raise ConnectionError("reset")
        return f"done: {first}"

    with capture_logs() as logged:
        outcome = await recover(
            "- Analyze P04637\n- Analyze P69905",
            child=child,
            policy=RecoveryPolicy(max_retries=2),
            limits=Limits(timeout=0.2),
        )
    assert outcome.result.ok, outcome.result.report
    assert seen == [
        ("Analyze P04637", 1, {}),
        ("Analyze P69905", 1, {}),
        ("Analyze P69905", 2, {"tries": 1}),
    ]
    started = [e for e in logged if e["event"] == "delegation_started"]
    subtask = [e["attempt"] for e in started if e["task_id"].endswith(".2")]
    assert subtask == [1, 2]


async def test_a_loop_that_stops_with_its_budget_spent_says_its_task_is_not_retryable() -> None:
    """An attempt spends the loop's last turn, then fails retryably: no retry runs (a
    retry would find nothing left), and the report says so -- it said ``Retryable:
    Yes``, and nothing said why the loop had stopped."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        ctx.take_turn()
        ctx.take_turn()
        ctx.step("did 2 of 3 steps")
        raise ConnectionError("dropped")

    outcome = await recover(
        "Do 3 steps",
        child=child,
        limits=Limits(timeout=10, budget=Budget(max_turns=2, max_tokens=10_000)),
        policy=RecoveryPolicy(max_retries=3),
    )
    assert len(outcome.attempts) == 1
    failure = outcome.result.failure
    assert failure is not None
    assert (failure.category, failure.error_type, failure.retryable) == (
        "partial",
        "connection",
        False,
    )
    assert "not retried: the budget of its attempts is spent (max_turns used up)" in (
        failure.evidence
    )
    report = parse_report(outcome.result.report)
    assert report.retryable is False
    assert "Raise the budget: its attempts spent it (max_turns used up)" in outcome.result.report


async def test_a_decomposed_attempt_that_spends_the_loops_budget_is_not_retryable() -> None:
    """A subtask that runs the recovery loop's own budget out leaves nothing to pay a
    rerun with: the aggregate stays timeout / budget, not retryable, its evidence
    naming the budget -- it said partial, retryable, "run the failed subtasks again"."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        if "This is part" not in prompt:  # the whole task: no progress, so it is split
            await anyio.sleep(5)
        ctx.charge(input_tokens=300 if prompt.startswith("Summarise section A") else 900)
        return "summary"

    task = "Do these:\n1. Summarise section A\n2. Summarise section B\n3. Summarise section C"
    with record_waits():
        outcome = await recover(
            task,
            child=child,
            limits=Limits(timeout=0.3, budget=Budget(max_tokens=1000)),
            policy=RecoveryPolicy(max_retries=3),
        )
    failure = outcome.result.failure
    assert failure is not None
    assert (failure.category, failure.error_type, failure.retryable) == (
        "timeout",
        "budget",
        False,
    )
    assert "max_tokens=1000 exceeded" in failure.evidence
    assert failure.evidence.startswith("decomposition: 1 of 3 subtasks completed")
    assert [a.strategy for a in outcome.attempts] == ["initial", "decomposition"]


@pytest.mark.parametrize(
    ("kind", "named"),
    [("loop", "job_status"), ("verify", "no .md file named"), ("overflow", "context window")],
)
async def test_a_failed_subtask_is_continued_from_its_own_failure(kind: str, named: str) -> None:
    """A subtask that failed is run again as a continuation of its own failure -- the call
    it repeated, the verifier's reason, a fresh start after its prompt outgrew the
    context window -- never its first prompt again unchanged."""
    sent: list[tuple[str, bool]] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        if "This is part" not in prompt:  # the whole task: no progress, so it is split
            await anyio.sleep(5)
        if "Summarise section A" in prompt.splitlines()[0]:
            return "A summary (A.md)"
        sent.append((prompt, ctx.fresh))
        if kind == "loop":
            while True:
                await ctx.tool("job_status", lambda job: "running", job="job-42")
        if kind == "overflow":
            raise TaskRejected("Error code: 400 - prompt is too long: 210000 tokens > 200000")
        return "done!"  # (no file named: verify= rejects it)

    task = "Do these:\n1. Summarise section A\n2. Summarise section B"
    with record_waits():
        await recover(
            task,
            child=child,
            limits=Limits(timeout=0.3, max_repeats=3),
            verify=lambda output: None if ".md" in output else "no .md file named",
            policy=RecoveryPolicy(max_retries=2),
        )
    (first, fresh_first), (second, fresh_second) = sent[:2]
    assert named not in first
    assert named in second
    assert (fresh_first, fresh_second) == (False, kind == "overflow")


async def test_a_subtask_over_the_context_window_twice_is_never_sent_the_same_prompt() -> None:
    """A subtask that overflows, then overflows its own fresh continuation with nothing
    new done, ends the loop on its overflow (invalid_task / context_overflow): no prompt
    is ever sent twice."""
    sent: list[str] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        if "This is part" not in prompt:
            await anyio.sleep(5)
        if "Summarise section A" in prompt.splitlines()[0]:
            return "A summary"
        sent.append(prompt)
        raise TaskRejected("Error code: 400 - prompt is too long: 210000 tokens > 200000")

    task = "Do these:\n1. Summarise section A\n2. Summarise section B"
    with record_waits():
        outcome = await recover(
            task, child=child, limits=Limits(timeout=0.3), policy=RecoveryPolicy(max_retries=4)
        )
    failure = outcome.result.failure
    assert failure is not None
    assert (failure.category, failure.error_type) == ("invalid_task", "context_overflow")
    assert len(sent) == len(set(sent)) == 2


async def test_subtasks_that_all_overflowed_go_on_fresh() -> None:
    """Every subtask over the context window after a step, none completed: each goes on
    fresh from its own steps (the loop ended on the first overflow, its continuation
    never run)."""
    runs: list[tuple[str, bool]] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        if "This is part" not in prompt:
            await anyio.sleep(5)
        section = "A" if "This is part 1 of 2" in prompt else "B"
        runs.append((section, ctx.fresh))
        if not ctx.fresh:
            ctx.step(f"Read section {section}")
            raise TaskRejected("Error code: 400 - prompt is too long: 210000 tokens > 200000")
        return f"{section} summary"

    task = "Do these:\n1. Summarise section A\n2. Summarise section B"
    with record_waits():
        outcome = await recover(
            task, child=child, limits=Limits(timeout=0.3), policy=RecoveryPolicy(max_retries=3)
        )
    assert outcome.result.ok, outcome.result.report
    assert runs == [("A", False), ("B", False), ("A", True), ("B", True)]
    assert [a.strategy for a in outcome.attempts] == [
        "initial",
        "decomposition",
        "fresh_continuation",
    ]
    runs.clear()
    with record_waits():  # no retry left for it: the report says what recovery would do
        stopped = await recover(
            task, child=child, limits=Limits(timeout=0.3), policy=RecoveryPolicy(max_retries=1)
        )
    failure = stopped.result.failure
    assert failure is not None
    assert (failure.category, failure.error_type, failure.retryable) == (
        "invalid_task",
        "context_overflow",
        False,  # not as it is: the same prompt would outgrow the window again
    )
    assert "afresh from its own completed steps" in failure.suggested_actions[0]


async def test_a_subtasks_question_goes_to_the_context_provider() -> None:
    """A subtask's question nobody answered is the task's missing context: the context
    provider is asked, and its answer waits in the subtask's ctx.ask when the subtasks
    run again (the same subtask prompt was sent again, unanswered, until max_retries)."""
    asked: list[str] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        if "This is part" not in prompt:
            await anyio.sleep(5)
        if "fetch" in prompt.splitlines()[0]:
            return "fetched"
        return f"analysed in {await ctx.ask('Which organism?')}"

    def provider(failure: ChildFailure) -> dict[str, str]:
        asked.append(failure.question or "")
        return {"Which organism?": "Mus musculus"}

    with record_waits():
        outcome = await recover(
            "- fetch P04637\n- analyse it",
            child=child,
            limits=Limits(timeout=0.3),
            context_provider=provider,
            policy=RecoveryPolicy(max_retries=3),
        )
    assert outcome.result.ok, outcome.result.report
    assert asked == ["Which organism?"]
    assert "analysed in Mus musculus" in (outcome.result.output or "")
    assert [a.strategy for a in outcome.attempts] == ["initial", "decomposition", "enrichment"]


def test_undecomposable_timeout_without_progress_stops() -> None:
    """A no-progress timeout on a task that does not split is tried once."""
    child = Script(hang_at_once)
    report = delegate_with_retry("one indivisible thing", child=child, base_timeout=0.05)
    assert parse_report(report).category == "timeout"
    assert len(child.prompts) == 1


async def test_missing_context_is_enriched_once_by_the_provider() -> None:
    """A missing_context failure asks the provider once and retries with its context."""
    calls: list[ChildFailure] = []

    def provider(failure: ChildFailure) -> dict[str, str]:
        calls.append(failure)
        return {"project_root": "/srv/app"}

    child = Script(lacks_context)
    report = await adelegate_with_retry(
        "Fix the auth file", child=child, base_timeout=1, context_provider=provider
    )
    assert parse_report(report).status == "completed"
    assert len(calls) == 1
    assert calls[0].blocked_on == "Which project? No root given"
    assert "- project_root: /srv/app" in child.prompts[1]


async def test_missing_context_without_a_provider_stops() -> None:
    """Without a context provider, a missing_context failure is final."""
    child = Script(lacks_context)
    report = await adelegate_with_retry("Fix the auth file", child=child, base_timeout=1)
    assert parse_report(report).category == "missing_context"
    assert len(child.prompts) == 1


async def test_enrichment_happens_only_once() -> None:
    """A provider whose context does not help is not asked again."""
    child = Script(lacks_context)
    calls = []

    def provider(failure: ChildFailure) -> dict[str, str]:
        calls.append(1)
        return {"hint": "nothing useful"}

    await adelegate_with_retry("Fix it", child=child, base_timeout=1, context_provider=provider)
    assert (len(calls), len(child.prompts)) == (1, 2)


async def test_rate_limits_back_off_at_least_retry_after(no_real_sleeps: list[float]) -> None:
    """Retryable tool errors wait with exponential backoff, never less than retry-after."""
    child = Script(rate_limited, rate_limited, succeed)
    policy = RecoveryPolicy(max_retries=3, backoff_base=10, jitter=0)
    report = await adelegate_with_retry("task", child=child, base_timeout=1, policy=policy)
    assert parse_report(report).attempt == 3
    assert no_real_sleeps == [10.0, 20.0]


async def test_retry_after_wins_over_a_shorter_backoff(no_real_sleeps: list[float]) -> None:
    """A short backoff is raised to the service's retry-after."""
    child = Script(rate_limited, succeed)
    policy = RecoveryPolicy(backoff_base=0.5, jitter=0.5)
    await adelegate_with_retry("task", child=child, base_timeout=1, policy=policy)
    assert no_real_sleeps == [7.0]


async def test_allow_listed_fixer_runs_and_skips_the_backoff(no_real_sleeps: list[float]) -> None:
    """A user-supplied fixer sees the failure; when it fixes, only retry-after is waited."""
    seen: list[str] = []

    async def missing_module(prompt: str, ctx: ChildContext) -> str:
        raise ModuleNotFoundError("No module named 'bcrypt'")

    def fixer(failure: ChildFailure) -> bool:
        seen.append(failure.message)
        return True

    child = Script(missing_module, succeed)
    policy = RecoveryPolicy(backoff_base=30, fixers=(fixer,))
    report = await adelegate_with_retry("task", child=child, base_timeout=1, policy=policy)
    assert parse_report(report).status == "completed"
    assert seen == ["ModuleNotFoundError: No module named 'bcrypt'"]
    assert no_real_sleeps == []


async def test_partial_failure_continues_with_what_was_done() -> None:
    """A partial failure retries with a continuation prompt: done steps, blocker, remainder."""
    child = Script(step_then_break, succeed)
    report = await adelegate_with_retry("Implement auth", child=child, base_timeout=1)
    assert parse_report(report).status == "completed"
    continuation = child.prompts[1]
    assert "✓ Wrote src/auth.py" in continuation
    assert "Blocker encountered: ImportError: cannot import 'bcrypt'" in continuation
    assert "Files already modified: src/auth.py" in continuation


async def test_a_continuation_lists_the_work_of_every_attempt_before_it() -> None:
    """The third attempt is told what the first did as well as the second: the second,
    told not to redo the first's work, did not list it again."""

    async def writes_a_section(prompt: str, ctx: ChildContext) -> str:
        ctx.step(f"Wrote section {ctx.attempt}")
        ctx.file_modified(f"sec{ctx.attempt}.md")
        if ctx.attempt < 3:
            raise ConnectionError("dropped")
        return "all written"

    child = Script(writes_a_section)
    policy = RecoveryPolicy(max_retries=3, jitter=0)
    report = await adelegate_with_retry("Write 3 sections", child=child, policy=policy)
    assert parse_report(report).status == "completed"
    third = child.prompts[2]
    assert "✓ Wrote section 1\n✓ Wrote section 2" in third
    assert "Files already modified: sec1.md, sec2.md" in third


async def test_a_continuation_keeps_an_attempts_own_repeated_steps_and_stays_bounded() -> None:
    """Steps an attempt did twice, apart, are both listed (they are two pieces of work);
    and the work of many long attempts is folded as one report's steps are."""

    async def batches(prompt: str, ctx: ChildContext) -> str:
        for step in ("Processed batch", "Saved checkpoint") * 2:
            ctx.step(step)
        for n in range(150):
            ctx.step(f"Attempt {ctx.attempt}, item {n}")
        raise ConnectionError("dropped")

    child = Script(batches, batches, succeed)
    policy = RecoveryPolicy(max_retries=3, jitter=0)
    await adelegate_with_retry("Process the batches", child=child, policy=policy)
    second, third = child.prompts[1], child.prompts[2]
    assert second.count("✓ Processed batch\n") == 2
    assert second.count("✓ Saved checkpoint\n") == 2
    listed = [line for line in third.splitlines() if line.startswith("✓ ")]
    assert len(listed) == 200
    assert "✓ … 109 more steps" in listed  # (2 × 154 done: 50 first, 149 latest, 109 between)
    assert listed[-1] == "✓ Attempt 2, item 149"


async def test_a_continuation_that_overflows_again_with_nothing_new_is_not_sent_again() -> None:
    """After a context overflow the task continues once without the transcript; when
    that attempt overflows too and completes nothing, the loop stops: the next prompt
    would be the very same one (never the same prompt twice)."""

    async def overflows(prompt: str, ctx: ChildContext) -> str:
        if ctx.attempt == 1:
            ctx.step("Fetched x")
        raise Exception("Error code: 400 - prompt is too long: 210000 tokens > 200000 maximum")

    child = Script(overflows)
    outcome = await recover("go", child=child, policy=RecoveryPolicy(max_retries=3))
    assert [a.strategy for a in outcome.attempts] == ["initial", "fresh_continuation"]
    assert outcome.result.failure is not None
    assert outcome.result.failure.error_type == "context_overflow"


async def dropped_before_a_step(prompt: str, ctx: ChildContext) -> str:
    raise ConnectionError("connection reset by peer")


async def step_then_dropped(prompt: str, ctx: ChildContext) -> str:
    ctx.step("Fetched 200 pages")
    raise ConnectionError("connection reset by peer")


async def step_then_overflow(prompt: str, ctx: ChildContext) -> str:
    ctx.step("Fetched 200 pages")
    raise Exception("Error code: 400 - prompt is too long: 210000 tokens > 200000 maximum")


@pytest.mark.parametrize(
    ("first", "strategy"),
    [(step_then_dropped, "continuation"), (step_then_overflow, "fresh_continuation")],
)
async def test_a_backoff_after_a_continuation_keeps_the_work_done(
    first: Any, strategy: str
) -> None:
    """'A continuation that fails transiently before any step of its own is retried with
    the original prompt: the list of what earlier attempts completed is dropped' (after a
    context overflow, with no transcript either: the work is done again). The backoff
    sends the continuation's prompt again, and a fresh one stays fresh."""
    child = Script(first, dropped_before_a_step, succeed)
    freshness: list[bool] = []

    async def run(prompt: str, ctx: ChildContext) -> str:
        freshness.append(ctx.fresh)
        return await child.run(prompt, ctx)

    policy = RecoveryPolicy(max_retries=3, jitter=0)
    outcome = await recover("Summarise P04637", child=run, policy=policy)
    assert [a.strategy for a in outcome.attempts] == ["initial", strategy, "backoff"]
    assert outcome.result.failure is None
    assert "✓ Fetched 200 pages" in child.prompts[1]
    assert child.prompts[2] == child.prompts[1]
    assert freshness[2] == freshness[1] == (strategy == "fresh_continuation")


async def rate_limited_after_a_step(prompt: str, ctx: ChildContext) -> str:
    ctx.step(f"Fetched page {ctx.attempt}")
    raise TransientError("429 Too Many Requests", retry_after=7.0, status=429)


async def test_a_rate_limit_after_a_step_backs_off_before_continuing(
    no_real_sleeps: list[float],
) -> None:
    """A rate limit after a completed step is partial (the work done is kept), and the
    continuation still waits as a rate limit asks: backoff, never under retry-after."""
    child = Script(rate_limited_after_a_step, rate_limited_after_a_step, succeed)
    policy = RecoveryPolicy(max_retries=3, backoff_base=10, jitter=0)
    outcome = await recover("task", child=child, policy=policy)
    assert [(a.strategy, a.wait) for a in outcome.attempts] == [
        ("initial", 0.0),
        ("continuation", 10.0),
        ("continuation", 20.0),
    ]
    assert outcome.attempts[0].result.failure.category == "partial"
    assert no_real_sleeps == [10.0, 20.0]
    assert "✓ Fetched page 1" in child.prompts[2]


async def test_a_provider_failing_after_a_step_moves_on_to_the_fallback() -> None:
    """A provider's rate limit that outlasts the backoffs moves to the next child, after
    a step as before one; the fallback continues from the work done."""
    backup = Script(succeed)
    outcome = await recover(
        "task",
        child=Script(rate_limited_after_a_step),
        fallbacks=[backup],
        policy=RecoveryPolicy(max_retries=5, fallback_after=2, jitter=0),
    )
    assert [a.strategy for a in outcome.attempts] == [
        "initial",
        "continuation",
        "continuation",
        "fallback",
    ]
    assert outcome.result.ok
    assert "✓ Fetched page 1\n✓ Fetched page 2\n✓ Fetched page 3" in backup.prompts[0]


@pytest.mark.parametrize(
    "missing",
    [ModuleNotFoundError("No module named 'bcrypt'"), PermissionError(13, "Permission denied")],
)
async def test_what_the_machine_lacks_is_backed_off_on_the_same_child_never_a_fallback(
    missing: Exception,
) -> None:
    """A missing module or a refused file is the machine's (``environment``, rule 7), not
    the model provider's: it is backed off (for a fixer, or someone, to mend), and never
    passed to a fallback child, which runs on the same machine."""

    async def lacks(prompt: str, ctx: ChildContext) -> str:
        raise missing

    backup = Script(succeed)
    outcome = await recover(
        "task",
        child=Script(lacks, lacks, succeed),
        fallbacks=[backup],
        policy=RecoveryPolicy(max_retries=3, fallback_after=1, jitter=0),
    )
    assert [a.strategy for a in outcome.attempts] == ["initial", "backoff", "backoff"]
    assert outcome.attempts[0].result.failure.error_type == "environment"
    assert outcome.result.ok
    assert backup.prompts == []


@pytest.mark.parametrize("behaviour", [contradictory, lacks_context])
async def test_non_retryable_failures_are_tried_exactly_once(behaviour: Any) -> None:
    """invalid_task (and missing_context without a provider) never get a second attempt."""
    child = Script(behaviour)
    with capture_logs() as events:
        await adelegate_with_retry("task", child=child, base_timeout=1, max_retries=5)
    assert len(child.prompts) == 1
    assert not [e for e in events if e["event"] == "recovery_attempt"]


@pytest.mark.parametrize("max_retries", [0, 1, 3])
async def test_never_more_than_one_plus_max_retries_attempts(max_retries: int) -> None:
    """An always-failing retryable child is attempted exactly 1 + max_retries times."""
    child = Script(rate_limited)
    report = await adelegate_with_retry(
        "task", child=child, base_timeout=1, max_retries=max_retries
    )
    assert len(child.prompts) == 1 + max_retries
    assert parse_report(report).attempt == 1 + max_retries


async def test_time_budget_bounds_the_whole_loop() -> None:
    """Attempts and waits together never run past the policy's total budget."""
    child = Script(hang_after_fetch)
    policy = RecoveryPolicy(max_retries=10, total_budget=0.5)
    started = time.monotonic()
    outcome = await recover("task", child=child, policy=policy, limits=Limits(timeout=0.2))
    elapsed = time.monotonic() - started
    assert elapsed < 0.5 + 0.5  # scheduling slack on a loaded machine
    assert [round(a.timeout, 1) for a in outcome.attempts] == [0.2, 0.3]


async def test_a_last_attempt_the_time_budget_cut_short_is_no_verdict_on_the_task() -> None:
    """A flaky service's retries run the loop's time budget down until the last attempt
    has a fraction of its timeout and times out before doing anything: the outcome is
    the connection failure before it (retryable), not "timeout, no progress: split the
    task", which the child never earned."""

    async def flaky(prompt: str, ctx: ChildContext) -> str:
        await anyio.sleep(0.6)
        raise ConnectionError("connection reset by peer")

    # (the third attempt has 0.4 s less the loop's overhead: it times out, whatever that is)
    policy = RecoveryPolicy(max_retries=10, total_budget=2.2, backoff_base=0.2, jitter=0)
    outcome = await recover("task", child=flaky, policy=policy, limits=Limits(timeout=1))
    last = outcome.attempts[-1]
    assert last.timeout < 0.45  # cut short by the budget (2.2 - 0.6 - 0.2 - 0.6 - 0.4)
    assert last.result.failure is not None
    assert last.result.failure.category == "timeout"
    failure = outcome.result.failure
    assert failure is not None
    assert (failure.category, failure.error_type, failure.suggested_retry) == (
        "tool_error",
        "connection",
        True,
    )
    assert outcome.result == outcome.attempts[-2].result.model_copy(
        update={"usage": outcome.result.usage}
    )


async def test_a_last_attempt_given_more_time_than_the_one_before_keeps_its_verdict() -> None:
    """A doubled timeout the budget cut (0.6 s to about 0.45) is still more than the
    attempt before had: a child that then does nothing earns its "no progress" verdict."""
    attempts = 0

    async def stalls(prompt: str, ctx: ChildContext) -> str:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            await ctx.tool("fetch", lambda: "ok")
        await anyio.sleep(10)
        return "never"

    policy = RecoveryPolicy(max_retries=3, total_budget=0.75, jitter=0)
    outcome = await recover("task", child=stalls, policy=policy, limits=Limits(timeout=0.3))
    assert [a.strategy for a in outcome.attempts] == ["initial", "timeout_doubling"]
    assert 0.3 < outcome.attempts[-1].timeout < 0.6
    assert outcome.result.attempt == 2
    failure = outcome.result.failure
    assert failure is not None
    assert (failure.category, failure.suggested_retry) == ("timeout", False)


async def test_skipped_waits_count_against_the_budget() -> None:
    """In testing mode, waits are not slept but still spend the time budget."""
    child = Script(rate_limited)
    policy = RecoveryPolicy(max_retries=10, total_budget=60, backoff_base=25, jitter=0)
    outcome = await recover("task", child=child, policy=policy, limits=Limits(timeout=1))
    assert [a.wait for a in outcome.attempts] == [0.0, 25.0]


async def test_recovery_never_runs_commands_from_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """A report suggesting 'pip install' leads to no subprocess or shell call at all."""
    ran: list[Any] = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: ran.append(a))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: ran.append(a))
    monkeypatch.setattr(os, "system", lambda *a: ran.append(a))

    async def missing(prompt: str, ctx: ChildContext) -> str:
        raise ModuleNotFoundError("No module named 'evil; rm -rf /'")

    report = await adelegate_with_retry("task", child=Script(missing), base_timeout=1)
    assert parse_report(report).category == "tool_error"
    assert ran == []


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("Steps:\n1. fetch\n2. analyse\n3. write", ["fetch", "analyse", "write"]),
        ("- one\n* two\n• three", ["one", "two", "three"]),
        ("Compare P04637 with Q8I3H7 and P04637", []),  # no list: a workload's own rule
        ("just one thing", []),
        ("1. only one item", []),
    ],
)
def test_rule_based_decomposer(prompt: str, expected: list[str]) -> None:
    """Numbered and bulleted lists split; anything else does not (the core knows no IDs)."""
    assert decompose(prompt) == expected


@pytest.mark.parametrize("retry_after", ["inf", "nan", "1e9"])
async def test_absurd_retry_after_never_hangs_the_loop(
    retry_after: str, no_real_sleeps: list[float]
) -> None:
    """An infinite, NaN or enormous retry-after stops the loop instead of waiting forever."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        raise TransientError("429", retry_after=float(retry_after), status=429)

    outcome = await recover(
        "task",
        child=Script(child),
        policy=RecoveryPolicy(max_retries=3, backoff_base=1, jitter=0),
        limits=Limits(timeout=1),
    )
    assert all(wait <= 600 for wait in no_real_sleeps)
    assert len(outcome.attempts) == (1 if retry_after == "1e9" else 4)


def test_recorded_waits_survive_the_block() -> None:
    """The list record_waits yields still holds the waits after the block ends."""
    child = Script(rate_limited, succeed)
    with record_waits() as waits:
        delegate_with_retry(
            "task", child=child, base_timeout=1, policy=RecoveryPolicy(backoff_base=1, jitter=0)
        )
    assert waits == [7.0]


async def test_decomposition_events_name_subtasks_and_the_outcome() -> None:
    """Subtasks log under their own task ids; the parent gets decomposition_finished."""
    child = Script(hang_at_once, succeed, succeed)
    with capture_logs() as events:
        outcome = await recover(
            "1. fetch P04637\n2. fetch Q8I3H7",
            child=child,
            task_id="task-x",
            limits=Limits(timeout=0.2),
        )
    sub = [e for e in events if e.get("parent_task_id") == "task-x"]
    assert {e["task_id"] for e in sub} == {"task-x.1", "task-x.2"}
    finished = [e for e in events if e["event"] == "decomposition_finished"]
    assert [(e["task_id"], e["attempt"], e["status"], e["completed"]) for e in finished] == [
        ("task-x", 2, "completed", 2)
    ]
    assert outcome.result.ok


async def test_model_decomposer_splits_an_unlisted_task() -> None:
    """With a model, a prose task that timed out without progress is split by the model."""
    import anthropic

    from fakes.messages_api import MessagesAPI, message, tool_use
    from lyra.recovery import ModelDecomposer

    split = tool_use("submit_subtasks", {"subtasks": ["fetch the entry", "summarise it"]})
    with MessagesAPI([message([split], stop_reason="tool_use")]) as api:
        async with anthropic.AsyncAnthropic(base_url=api.url, api_key="k", max_retries=0) as client:
            policy = RecoveryPolicy(decomposer=ModelDecomposer(client=client))
            child = Script(hang_at_once, succeed, succeed)
            outcome = await recover(
                "Look into p53 and tell me about it",
                child=child,
                policy=policy,
                limits=Limits(timeout=0.2),
            )
    assert outcome.attempts[-1].strategy == "decomposition"
    assert child.prompts[1].startswith("fetch the entry")
    assert api.requests[0]["tool_choice"] == {"type": "tool", "name": "submit_subtasks"}


async def test_model_decomposer_falls_back_to_the_rules() -> None:
    """When the model call fails, the rule-based split still applies."""
    import anthropic

    from fakes.messages_api import MessagesAPI, error
    from lyra.recovery import ModelDecomposer

    with MessagesAPI([error(529, "overloaded_error", "busy")]) as api:
        async with anthropic.AsyncAnthropic(base_url=api.url, api_key="k", max_retries=0) as client:
            subtasks = await ModelDecomposer(client=client)("1. fetch\n2. summarise")
    assert subtasks == ["fetch", "summarise"]


async def test_max_retries_overrides_the_policys() -> None:
    """Given both, the max_retries argument wins over the policy's own."""
    child = Script(rate_limited)
    await adelegate_with_retry(
        "task",
        child=child,
        base_timeout=1,
        max_retries=1,
        policy=RecoveryPolicy(max_retries=5, backoff_base=0),
    )
    assert len(child.prompts) == 2


def test_an_invalid_max_retries_is_refused() -> None:
    """A negative max_retries is a validation error, not a silent loop of one."""
    import pydantic

    with pytest.raises(pydantic.ValidationError):
        delegate_with_retry("task", child=Script(succeed), max_retries=-1, policy=RecoveryPolicy())


def test_a_policy_is_strict_with_numbers_and_takes_any_sequence_of_fixers() -> None:
    """max_retries="2" or True is refused (not read as a number); fixers may be a list."""
    from pydantic import ValidationError

    def fixer(failure: Any) -> bool:
        return True

    assert RecoveryPolicy(fixers=[fixer]).fixers == (fixer,)
    for wrong in ({"max_retries": "2"}, {"max_retries": True}, {"timeout_cap": "60"}):
        with pytest.raises(ValidationError):
            RecoveryPolicy(**wrong)
