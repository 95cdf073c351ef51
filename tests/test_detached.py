"""Detached delegations (lyra.detached): started now, read and collected later by id,
cancelled, forgotten a stated time after they finish; in process here (the durable
store is tested through ``lyra mcp --durable`` in tests/test_mcp_detached.py)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

import lyra.detached
from lyra import Budget, ChildContext, DelegationResult
from lyra.detached import DelegationRequest, Delegations, UnknownDelegation

pytestmark = pytest.mark.anyio


class Clock:
    """Seconds since the epoch, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def worker(prompt: str, ctx: ChildContext) -> str:
    """Two steps of 500 tokens each, then sleeps the seconds the prompt names (not at
    all for ``quick``)."""
    for step in (1, 2):
        ctx.charge(input_tokens=400, output_tokens=100, turns=1)
        ctx.step(f"step {step}")
    if prompt != "quick":
        await anyio.sleep(float(prompt))
    return f"done: {prompt}"


@asynccontextmanager
async def store(clock: Clock | None = None, **options: object) -> AsyncIterator[Delegations]:
    """An in-process store of ``worker`` delegations, entered."""
    async with Delegations(worker, clock=clock or Clock(), **options) as entered:  # type: ignore[arg-type]
        yield entered


async def test_a_delegation_starts_at_once_and_is_collected_later() -> None:
    """start returns a working delegation's id while its child works; its status shows
    the steps, spend and time left while it works; result waits for the report, which
    is what delegate_task would have returned."""
    async with store() as delegations:
        started = await delegations.start(DelegationRequest(prompt="0.3", timeout=10))
        assert (started.state, started.report) == ("working", None)
        await anyio.sleep(0.1)
        working = delegations.status(started.delegation_id)
        finished = await delegations.result(started.delegation_id, wait=5)
    assert working.state == "working"
    assert working.steps == ("step 1", "step 2")
    assert (working.tokens_used, working.turns) == (1000, 2)
    assert working.time_left is not None
    assert 9 < working.time_left < 10
    assert finished.state == "completed"
    assert finished.report is not None
    assert finished.report.output == "done: 0.3"
    assert finished.steps == ("step 1", "step 2")
    assert finished.expires_at == finished.updated_at + lyra.detached.KEEP_FOR


async def test_result_stops_waiting_at_its_wait_and_says_where_it_is() -> None:
    """A result asked with a short wait comes back working, without a report."""
    async with store() as delegations:
        started = await delegations.start(DelegationRequest(prompt="30", timeout=60))
        with anyio.fail_after(5):
            status = await delegations.result(started.delegation_id, wait=0.05)
        assert (status.state, status.report) == ("working", None)
        await delegations.cancel(started.delegation_id)


@pytest.mark.parametrize(
    ("request_", "category", "error_type"),
    [
        (DelegationRequest(prompt="30", timeout=0.2), "timeout", "timeout"),
        (DelegationRequest(prompt="quick", budget=Budget(max_tokens=600)), "timeout", "budget"),
    ],
    ids=["deadline", "budget"],
)
async def test_a_childs_failure_is_a_failed_delegation_with_its_report(
    request_: DelegationRequest, category: str, error_type: str
) -> None:
    """The delegation's limits hold in the background; a failure is state "failed"
    with the classified report."""
    async with store() as delegations:
        started = await delegations.start(request_)
        status = await delegations.result(started.delegation_id, wait=5)
    assert status.state == "failed"
    assert status.report is not None
    assert (status.report.category, status.report.error_type) == (category, error_type)


async def test_cancel_stops_the_child_and_leaves_no_report() -> None:
    """A cancelled delegation's child is stopped at once (it never finishes) and the
    delegation says "cancelled", without a report but with the steps it completed;
    cancelling a finished one changes nothing."""
    async with store() as delegations:
        running = await delegations.start(DelegationRequest(prompt="30", timeout=60))
        done = await delegations.start(DelegationRequest(prompt="quick"))
        await delegations.result(done.delegation_id, wait=5)
        await anyio.sleep(0.05)
        with anyio.fail_after(5):
            cancelled = await delegations.cancel(running.delegation_id)
            after = await delegations.result(running.delegation_id, wait=1)
        again = await delegations.cancel(done.delegation_id)
    assert (cancelled.state, cancelled.report) == ("cancelled", None)
    assert (after.state, after.steps) == ("cancelled", ("step 1", "step 2"))
    assert cancelled.steps == after.steps
    assert again.state == "completed"


async def curious(prompt: str, ctx: ChildContext) -> str:
    """Asks one question, then answers with it."""
    return f"told: {await ctx.ask(prompt)}"


@pytest.mark.parametrize("ending", ["answer", "cancel", "deadline"])
async def test_a_childs_question_waits_for_an_answer(ending: str) -> None:
    """A question parks the delegation in input_required (result stops waiting); an
    answer lets the child go on; a cancel or the child's deadline ends the wait (the
    deadline as a timeout: the wait is not idle time, the deadline still runs)."""
    async with Delegations(curious) as delegations:
        started = await delegations.start(DelegationRequest(prompt="Which organism?", timeout=0.3))
        with anyio.fail_after(5):
            asked = await delegations.result(started.delegation_id, wait=5)
        if ending == "answer":
            with pytest.raises(ValueError, match="the answer is empty"):
                delegations.answer(started.delegation_id, "")  # the question still waits
            delegations.answer(started.delegation_id, "human")
        elif ending == "cancel":
            await delegations.cancel(started.delegation_id)
        for _ in range(500):  # until it ended (a question already waiting is not waited for)
            ended = await delegations.result(started.delegation_id, wait=5)
            if ended.finished:
                break
            await anyio.sleep(0.01)
        with pytest.raises(lyra.detached.NoQuestion, match="waits for no answer"):
            delegations.answer(started.delegation_id, "late")
    assert (asked.state, asked.question) == ("input_required", "Which organism?")
    assert ended.question is None
    if ending == "answer":
        assert ended.state == "completed"
        assert ended.report is not None
        assert ended.report.output == "told: human"
    elif ending == "cancel":
        assert (ended.state, ended.report) == ("cancelled", None)
    else:
        assert ended.state == "failed"
        assert ended.report is not None
        assert ended.report.category == "timeout"


async def test_finished_delegations_are_forgotten_after_keep_for() -> None:
    """list shows every delegation, newest first; a finished one is forgotten
    ``keep_for`` seconds after it finished (an unknown id is a clear error), a
    working one never is."""
    clock = Clock()
    async with store(clock, keep_for=60) as delegations:
        first = await delegations.start(DelegationRequest(prompt="quick"))
        clock.now += 1
        second = await delegations.start(DelegationRequest(prompt="30", timeout=600))
        await delegations.result(first.delegation_id, wait=5)
        listed = [status.delegation_id for status in delegations.list()]
        clock.now += 61
        left = [status.delegation_id for status in delegations.list()]
        with pytest.raises(UnknownDelegation, match="finished more than 60 s ago"):
            delegations.status(first.delegation_id)
        await delegations.cancel(second.delegation_id)
    assert listed == [second.delegation_id, first.delegation_id]
    assert left == [second.delegation_id]


async def test_lyras_own_error_fails_that_delegation_alone() -> None:
    """A runner that breaks (lyra's own bug) fails its delegation with a report that
    says so; the store and the other delegations go on."""

    class Flaky(lyra.detached.InProcess):
        async def run(
            self,
            delegation_id: str,
            request: DelegationRequest,
            recorded: Callable[[], None],
            ask: lyra.detached.Asker,
        ) -> DelegationResult:
            if request.prompt == "break":
                raise RuntimeError("the runner broke")
            return await super().run(delegation_id, request, recorded, ask)

    async with Delegations(runner=Flaky(worker)) as delegations:
        broken = await delegations.start(DelegationRequest(prompt="break"))
        fine = await delegations.start(DelegationRequest(prompt="quick"))
        broke = await delegations.result(broken.delegation_id, wait=5)
        went = await delegations.result(fine.delegation_id, wait=5)
    assert broke.state == "failed"
    assert broke.report is not None
    assert "the runner broke" in (broke.report.message or "")
    assert went.state == "completed"


async def test_a_stray_cancel_of_one_delegations_task_fails_it_alone() -> None:
    """A child arms a watchdog on the task it runs in (``task.cancel()`` later): that
    delegation fails as cancelled by code outside lyra, and the others and the caller
    go on (the store's task group was cancelled, every delegation with it, and the
    caller, never cancelled, got a CancelledError)."""
    import asyncio

    async def child(prompt: str, ctx: ChildContext) -> str:
        if prompt == "watchdog":
            task = asyncio.current_task()
            assert task is not None
            asyncio.get_running_loop().call_later(0.05, task.cancel)
        await anyio.sleep(0.2)
        return f"done: {prompt}"

    async with Delegations(child) as delegations:
        ids = [
            (await delegations.start(DelegationRequest(prompt=prompt, timeout=5))).delegation_id
            for prompt in ("a", "watchdog", "b")
        ]
        ended = [await delegations.result(key, wait=5) for key in ids]
    assert [e.state for e in ended] == ["completed", "failed", "completed"]
    assert ended[1].report is not None
    assert (ended[1].report.message or "").startswith("Cancelled by code outside lyra")


async def test_a_store_needs_a_child_or_a_runner_and_to_be_entered() -> None:
    """Misuse is a clear error: neither or both of child and runner, a store not
    entered, a keep_for that is not positive."""
    with pytest.raises(TypeError, match="a child or a runner"):
        Delegations()
    with pytest.raises(ValueError, match="keep_for"):
        Delegations(worker, keep_for=0)
    with pytest.raises(RuntimeError, match="enter the store first"):
        await Delegations(worker).start(DelegationRequest(prompt="quick"))


# -- a cancel that meets the child's end ------------------------------------------------


async def test_a_cancel_that_arrives_as_the_child_finishes_keeps_its_result() -> None:
    """A child already on its way to return when the cancel comes (its wait over, not yet
    resumed) finishes: the cancel answers "completed" with the report, as its status does
    after; a child still waiting is cancelled, without a report. (The cancel used to say
    "cancelled" and throw the finished child's report away.)"""
    go: dict[str, anyio.Event] = {}

    async def waits(prompt: str, ctx: ChildContext) -> str:
        await go.setdefault(prompt, anyio.Event()).wait()
        return f"done: {prompt}"

    async with Delegations(waits) as delegations:
        finishing = await delegations.start(DelegationRequest(prompt="finishing"))
        waiting = await delegations.start(DelegationRequest(prompt="waiting"))
        await anyio.sleep(0.05)  # both wait on their events
        go["finishing"].set()  # its wait is over; it resumes at the loop's next turn
        with anyio.fail_after(5):
            late = await delegations.cancel(finishing.delegation_id)
            cut = await delegations.cancel(waiting.delegation_id)
        after = delegations.status(finishing.delegation_id)
    assert late.state == after.state == "completed"
    assert late.report is not None
    assert late.report.output == "done: finishing"
    assert (cut.state, cut.report) == ("cancelled", None)


@pytest.mark.slow
async def test_a_durable_cancel_tells_what_a_restart_finds(tmp_path: Path) -> None:
    """With a durable runner, a cancel racing the child's end answers what the database
    records: after a restart, every delegation is as its cancel said (one said
    "cancelled" came back "completed" after a restart)."""
    from lyra import ChildRef
    from lyra.detached import DurableRunner

    child = ChildRef(target="fakes.children:plodder")
    answers = {}
    async with Delegations(runner=DurableRunner.embedded(tmp_path, child)) as delegations:
        for n in range(12):
            prompt = f"1x{n % 4 / 1000}"
            started = await delegations.start(DelegationRequest(prompt=prompt, timeout=30))
            await anyio.sleep(n % 3 / 1000)
            with anyio.fail_after(10):
                answers[started.delegation_id] = await delegations.cancel(started.delegation_id)
    async with Delegations(runner=DurableRunner.embedded(tmp_path, child)) as delegations:
        with anyio.fail_after(10):
            again = {key: await delegations.result(key, wait=5) for key in answers}
    for key, answer in answers.items():
        assert answer.state in ("completed", "cancelled")
        assert (answer.report is not None) == (answer.state == "completed")
        assert again[key].state == answer.state


async def test_a_durable_cancel_that_lands_after_the_childs_end_cancels_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child's task was listed unfinished, then finished before the cancel reached
    the database (which leaves a finished task as it is): the cancel says it cancelled
    nothing, so the delegation keeps its outcome (it answered "cancelled" while a
    restart found "completed")."""
    from dbos import DBOS

    from lyra import ChildRef
    from lyra.detached import DurableRunner
    from lyra.durable import DurableExecutor

    async def listed_before_it_finished(self: DurableExecutor, call: str) -> list[str]:
        found = await DBOS.list_workflows_async(
            workflow_id_prefix=f"{self.run_id}/", load_input=False, load_output=False
        )
        return [status.workflow_id for status in found]

    runner = DurableRunner.embedded(tmp_path, ChildRef(target="fakes.children:plodder"))
    async with Delegations(runner=runner) as delegations:
        started = await delegations.start(DelegationRequest(prompt="1x0", timeout=30))
        finished = await delegations.result(started.delegation_id, wait=10)
        monkeypatch.setattr(DurableExecutor, "_unfinished", listed_before_it_finished)
        assert await runner.cancel(started.delegation_id) is False
    assert finished.state == "completed"


async def test_a_restart_lists_durable_delegations_newest_first_as_they_started(
    tmp_path: Path,
) -> None:
    """Delegations started within one second are listed after a restart in the order
    they started, with the times they started: the database records whole seconds,
    which lost that order."""
    from lyra import ChildRef
    from lyra.detached import DurableRunner

    child = ChildRef(target="fakes.children:plodder")
    async with Delegations(runner=DurableRunner.embedded(tmp_path, child)) as delegations:
        for _ in range(4):
            await delegations.start(DelegationRequest(prompt="1x0", timeout=30))
        before = [(d.delegation_id, d.created_at) for d in delegations.list()]
    async with Delegations(runner=DurableRunner.embedded(tmp_path, child)) as delegations:
        after = [(d.delegation_id, d.created_at) for d in delegations.list()]
    assert [key for key, _ in after] == [key for key, _ in before]
    assert all(abs(a - b) < 0.5 for (_, a), (_, b) in zip(after, before, strict=True))


async def test_a_restarted_store_says_a_recorded_delegation_finished_before_it_serves() -> None:
    """A delegation an earlier process finished is listed finished, with its report, as
    soon as the store is entered: the runner's reading of its recorded result (slow on a
    loaded machine) is awaited first. (A restarted durable server listed one "working".)"""

    class Recording(lyra.detached.InProcess):
        async def start(self) -> list[lyra.detached.Recorded]:
            now, request = time.time(), DelegationRequest(prompt="quick")
            return [lyra.detached.Recorded("d-done", request, now - 2, now - 1, cancelled=False)]

        async def run(
            self,
            delegation_id: str,
            request: DelegationRequest,
            recorded: Callable[[], None],
            ask: lyra.detached.Asker,
        ) -> DelegationResult:
            await anyio.sleep(0.2)  # reading the database
            return await super().run(delegation_id, request, recorded, ask)

    async with Delegations(runner=Recording(worker)) as delegations:
        [listed] = delegations.list()
    assert (listed.delegation_id, listed.state) == ("d-done", "completed")
    assert listed.report is not None
    assert listed.report.output == "done: quick"


async def test_a_question_left_waiting_is_answerable_as_soon_as_a_durable_store_restarts(
    tmp_path: Path,
) -> None:
    """A question a durable delegation's child left waiting is there the moment the store
    restarts, its ended attempt's time left 0 as before, and an answer given at once is
    the one its resumed run gets (the store said "working" and refused that answer until
    the run had asked again)."""
    from lyra import ChildRef
    from lyra.detached import DurableRunner

    child = ChildRef(target="fakes.children:plodder")
    async with Delegations(runner=DurableRunner.embedded(tmp_path, child)) as delegations:
        started = await delegations.start(DelegationRequest(prompt="ask", timeout=30))
        asked = await delegations.result(started.delegation_id, wait=10)
    key = started.delegation_id
    async with Delegations(runner=DurableRunner.embedded(tmp_path, child)) as delegations:
        waiting = delegations.status(key)
        delegations.answer(key, "yeast")
        final = await delegations.result(key, wait=20)
    assert (asked.state, asked.question) == ("input_required", "Which organism?")
    assert (waiting.state, waiting.question) == (asked.state, asked.question)
    assert asked.time_left == waiting.time_left == 0  # the asking attempt ended (was None)
    assert final.state == "completed"
    assert final.report is not None
    assert (final.report.output or "").startswith("studied yeast")


def test_a_request_takes_its_timeouts_as_numbers_only() -> None:
    """A detached delegation's timeouts are numbers of seconds, as ``delegate_task``'s
    and a Task's are: a bool or a string is refused, where it was read as 1.0 or 5.0."""
    import pydantic

    for wrong in ({"timeout": True}, {"timeout": "5"}, {"idle_timeout": "2"}):
        with pytest.raises(pydantic.ValidationError, match="valid number"):
            DelegationRequest(prompt="p", **wrong)
    assert DelegationRequest(prompt="p", timeout=5).timeout == 5.0
    as_json = '{"prompt": "p", "idle_timeout": 2}'
    assert DelegationRequest.model_validate_json(as_json).idle_timeout == 2.0
