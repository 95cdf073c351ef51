"""``A2AChild``: a remote A2A agent as a lyra child, over HTTP on 127.0.0.1. Against an
agent built with the SDK alone (each task state to its category), against ``lyra a2a``
(a lyra report's category carried over), and under lyra's deadline, idle timeout and
budget, each of which sends the remote a cancel."""

from __future__ import annotations

import ast
import asyncio
import importlib
import importlib.util
import inspect
import pkgutil
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import a2a
import anyio
import httpx
import pytest
from a2a.client import A2AClientError, A2AClientTimeoutError, AgentCardResolutionError
from a2a.helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Role, TaskState

from fakes.a2a_agents import (
    Scripted,
    agent_app,
    artifact,
    ends,
    hang,
    pause,
    serving,
    working,
)
from fakes.children import crashes, forbidden, gone, invalid, spender, stalls
from lyra import Budget, ChildContext, Limits, Supervisor, Usage
from lyra._extras import install_hint
from lyra.a2a import _delegations, build_app
from lyra.children._a2a_wire import usage_of
from lyra.children.a2a import A2AChild
from lyra.delegation._foreign import Kind, describe
from lyra.delegation._foreign._a2a import A2A_ERRORS, TASK_STATES

pytestmark = pytest.mark.anyio

TESTS = Path(__file__).resolve().parent


async def delegate(url: str, *, budget: Budget | None = None, **limits: Any) -> Any:
    """One delegation to the agent at ``url`` through an A2AChild."""
    limits.setdefault("timeout", 5)
    return await Supervisor(A2AChild(url), budget=budget).delegate("Summarise TP53", **limits)


# -- an agent of the SDK alone: each task state to the taxonomy ------------------------


@pytest.mark.parametrize(
    ("turn", "expected", "said", "cancelled"),
    [
        ([working("Step"), ends("FAILED", "no disk")], ("partial", "unknown", True), "no disk", 0),
        ([ends("FAILED", "no disk")], ("tool_error", "unknown", False), "no disk", 0),
        ([ends("REJECTED", "not mine")], ("invalid_task", "data", False), "not mine", 0),
        ([ends("AUTH_REQUIRED", "sign in")], ("tool_error", "auth", False), "sign in", 1),
        ([ends("CANCELED")], ("tool_error", "unknown", True), "ended canceled", 0),
        ([ends("INPUT_REQUIRED", "Which?")], ("missing_context", "input_required", False),
         "Which?", 1),
    ],
    ids=["failed after a step", "failed", "rejected", "auth-required", "canceled", "asks"],
)  # fmt: skip
async def test_each_remote_state_maps_to_the_taxonomy(
    turn: list[Any], expected: tuple[str, str, bool], said: str, cancelled: int
) -> None:
    """failed is tool_error (partial after a step), rejected invalid_task, auth-required
    tool_error/auth, canceled (by someone else) a retryable tool_error, input-required
    with nobody to answer missing_context/input_required; the remote's words are in the
    report, and a task left waiting there is cancelled."""
    agent = Scripted(turn)
    async with serving(agent_app(agent)) as url:
        result = await delegate(url)
    failure = result.failure
    assert (failure.category, failure.error_type, failure.retryable) == expected
    assert said in failure.message
    assert agent.received == ["Summarise TP53"]
    assert len(agent.cancelled) == cancelled


async def test_the_remotes_question_is_answered_by_the_delegations_answer() -> None:
    """A remote in input-required asks this attempt's question: ``answer=`` answers it,
    the answer goes to the same remote task as its next message, and the task
    completes in one attempt, nothing cancelled."""
    asked: list[str] = []
    agent = Scripted(
        [working("Read TP53"), ends("INPUT_REQUIRED", "Which organism?")],
        [working("Read the human entry"), artifact("TP53, human: 393 residues"), ends("COMPLETED")],
    )
    async with serving(agent_app(agent)) as url:
        answer = lambda question: asked.append(question) or "Homo sapiens"  # noqa: E731
        result = await Supervisor(A2AChild(url), answer=answer).delegate(
            "Summarise TP53", timeout=5
        )
    assert (result.ok, result.output) == (True, "TP53, human: 393 residues"), result.report
    assert asked == ["Which organism?"]
    assert agent.received == ["Summarise TP53", "Homo sapiens"]
    assert (result.attempt, agent.cancelled) == (1, [])


@pytest.mark.parametrize("streaming", [True, False], ids=["streams", "does not stream"])
async def test_a_remote_that_answers_at_once_after_the_answer_completes(streaming: bool) -> None:
    """'A streaming remote that completes after an answer is reported as "asked again"':
    its first event after the answer was an artifact, which changes no status, so the
    task still read as paused on the question it had just been answered."""
    agent = Scripted(
        [ends("INPUT_REQUIRED", "Which organism?")],
        [artifact("TP53, human: 393 residues"), ends("COMPLETED")],
    )
    async with serving(agent_app(agent, streaming=streaming)) as url:
        result = await Supervisor(A2AChild(url), answer=lambda question: "Homo sapiens").delegate(
            "Summarise TP53", timeout=5
        )
    assert (result.ok, result.output) == (True, "TP53, human: 393 residues"), result.report
    assert agent.received == ["Summarise TP53", "Homo sapiens"]


async def test_a_question_asked_again_after_its_answer_ends_the_attempt() -> None:
    """A remote that asks again the question it was just answered gets no second answer
    (the same one would loop as fast as it can ask): the attempt ends missing_context,
    naming the question and the answer it did not take, and the remote task is
    cancelled."""
    asked: list[str] = []
    again = [ends("INPUT_REQUIRED", "Which colour?")]
    agent = Scripted(again, again, again)
    async with serving(agent_app(agent)) as url:
        answer = lambda question: asked.append(question) or "blue"  # noqa: E731
        result = await Supervisor(A2AChild(url), answer=answer).delegate("Paint it", timeout=5)
        with anyio.fail_after(2):
            await agent.cancel_seen.wait()
    failure = result.failure
    assert failure.category == "missing_context", failure.evidence
    assert "asked again after it was answered: Which colour?" in failure.message
    assert "blue" in failure.message
    assert (asked, agent.received) == (["Which colour?"], ["Paint it", "blue"])
    assert result.duration < 1


async def test_a_completed_task_gives_its_artifacts_text() -> None:
    """The artifacts' parts (chunks appended, data as JSON, whole numbers whole) are the
    output."""
    turn = [
        working("Fetched TP53"),
        working(),
        artifact("TP53 is a tumour suppressor."),
        artifact("Length 393.", append=True, data={"length": 393}),
        ends("COMPLETED"),
    ]
    async with serving(agent_app(Scripted(turn))) as url:
        result = await delegate(url)
    assert result.ok, result.report
    assert result.output == 'TP53 is a tumour suppressor.\nLength 393.\n{"length": 393}'


@pytest.mark.parametrize(
    ("turn", "category"),
    [([artifact("done"), ends("COMPLETED")], None), ([ends("REJECTED", "no")], "invalid_task")],
    ids=["completed", "rejected"],
)
async def test_an_agent_that_does_not_stream_is_answered_at_the_end(
    turn: list[Any], category: str | None
) -> None:
    """A card without streaming: the task comes back once, at its end, and maps the same."""
    async with serving(agent_app(Scripted(turn), streaming=False)) as url:
        result = await delegate(url)
    assert (result.output, result.failure and result.failure.category) == (
        ("done", None) if category is None else (None, category)
    )


class FinishesLater(AgentExecutor):
    """Leaves its task working when the request returns, and completes it later."""

    def __init__(self) -> None:
        self.background: set[asyncio.Task[None]] = set()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        await event_queue.enqueue_event(new_task_from_user_message(context.message))
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        await working("Started")(updater)

        async def finish() -> None:
            await anyio.sleep(0.3)
            await artifact("done later")(updater)
            await updater.complete()

        task = asyncio.create_task(finish())
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()


async def test_an_agent_that_does_not_stream_is_read_until_its_task_ends() -> None:
    """A card without streaming whose task is still working when the request returns:
    the task is read again (tasks/get, the SDK cannot resubscribe) until it ends, and
    its output is the delegation's."""
    async with serving(agent_app(FinishesLater(), streaming=False)) as url:
        result = await delegate(url)
    assert (result.ok, result.output) == (True, "done later"), result.report


async def test_a_remote_that_does_not_stream_shows_its_progress_while_it_works() -> None:
    """'A non-streaming remote is not polled: its progress is invisible and the idle
    timeout kills it while it works': the send waited for the task's end, so a remote
    working for longer than the idle timeout, with a step every 0.15 s, was idle."""
    steps = [action for n in range(6) for action in (working(f"Step {n}"), pause(0.15))]
    agent = Scripted([*steps, artifact("done"), ends("COMPLETED")])
    async with serving(agent_app(agent, streaming=False)) as url:
        result = await delegate(url, idle_timeout=0.5)
    assert (result.ok, result.output) == (True, "done"), result.report


class Replier(AgentExecutor):
    """An agent that answers with a message, no task."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        reply = new_text_message(f"hello, {context.get_user_input()}", role=Role.ROLE_AGENT)
        await event_queue.enqueue_event(reply)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise AssertionError("nothing to cancel")


async def test_an_agent_that_answers_with_a_message_completes() -> None:
    """A message instead of a task is the whole answer."""
    async with serving(agent_app(Replier())) as url:
        result = await delegate(url)
    assert (result.ok, result.output) == (True, "hello, Summarise TP53")


async def test_a_stream_that_breaks_is_followed_again_to_the_end() -> None:
    """The connection drops after the first event while the agent works on: the child
    reads the task (tasks/get), follows it again (resubscribe), and gets the output and
    the steps it missed."""
    turn = [working("First"), pause(0.3), working("Second"), artifact("done"), ends("FAILED")]
    agent = Scripted(turn)
    async with serving(agent_app(agent, cut=True)) as url:
        result = await delegate(url)
    assert result.failure.category == "partial"  # failed after steps: both were seen
    assert result.failure.completed_steps == ("Second",)  # "First" was sent while cut
    assert agent.cancelled == []


# -- lyra's limits across the network --------------------------------------------------


def usage(tokens: int, turns: int) -> dict[str, int]:
    return {"input_tokens": tokens * 3 // 4, "output_tokens": tokens // 4, "turns": turns}


@pytest.mark.parametrize(
    ("turn", "limits", "error_type"),
    [
        ([working("Started"), hang()], {"timeout": 0.5}, "timeout"),
        ([hang()], {"idle_timeout": 0.3}, "idle"),
        (
            [working("a", usage(400, 1)), working("b", usage(800, 2)), working("c", usage(1200, 3)),
             hang()],
            {"budget": Budget(max_tokens=1000)},
            "budget",
        ),
    ],
    ids=["deadline", "idle", "budget"],
)  # fmt: skip
async def test_a_stopped_delegation_cancels_the_remote_task(
    turn: list[Any], limits: dict[str, Any], error_type: str
) -> None:
    """The deadline, the idle timeout (a remote gone quiet) and the budget (the remote's
    reported usage, charged as it grows) each end the attempt on time and send the
    remote tasks/cancel."""
    agent = Scripted(turn)
    async with serving(agent_app(agent, usage=True)) as url:
        result = await delegate(url, **limits)
        with anyio.fail_after(2):
            await agent.cancel_seen.wait()
    assert (result.failure.category, result.failure.error_type) == ("timeout", error_type)
    assert result.duration < limits.get("timeout", 5) + 0.4
    assert len(agent.cancelled) == 1
    if error_type == "budget":
        assert (result.usage.tokens, result.usage.turns) == (1200, 3)


async def test_a_step_whose_update_takes_the_budget_over_is_still_listed() -> None:
    """A remote's step arrives with the usage it cost: when that usage takes the budget
    over, the step was still done there, and the budget's report lists it (a loaded
    remote may send its first update with the usage of several steps)."""
    agent = Scripted([working("Dripped", usage(1200, 3)), hang()])
    async with serving(agent_app(agent, usage=True)) as url:
        result = await delegate(url, budget=Budget(max_tokens=1000))
    assert (result.failure.category, result.failure.error_type) == ("timeout", "budget")
    assert result.failure.completed_steps == ("Dripped",)


async def test_heartbeats_from_the_remote_hold_off_the_idle_timeout() -> None:
    """Working updates without a message are heartbeats: a remote that sends them
    outlives an idle timeout shorter than its whole run."""
    beats = [action for _ in range(4) for action in (working(), pause(0.12))]
    agent = Scripted([*beats, artifact("done"), ends("COMPLETED")])
    async with serving(agent_app(agent)) as url:
        result = await delegate(url, idle_timeout=0.3)
    assert (result.ok, result.output) == (True, "done"), result.report


async def test_a_cancelled_caller_cancels_the_remote_task() -> None:
    """Cancelling the delegation's caller propagates, and the remote task is cancelled."""
    agent = Scripted([working("Started"), hang()])
    async with serving(agent_app(agent)) as url:
        with anyio.move_on_after(0.5) as scope:
            await delegate(url)
        with anyio.fail_after(2):
            await agent.cancel_seen.wait()
    assert scope.cancelled_caught


async def test_a_budget_the_remote_cannot_report_on_is_refused_before_it_runs() -> None:
    """Under a token budget, a remote whose card declares no usage reporting gets no
    message: the attempt fails at once, saying why. A tool-call budget counts this
    tree's tool calls (the remote's are its own): it does not refuse the remote."""
    agent = Scripted([artifact("done"), ends("COMPLETED")])
    async with serving(agent_app(agent)) as url:
        refused = await delegate(url, budget=Budget(max_tokens=1000))
        served = await delegate(url, budget=Budget(max_tool_calls=5))
    assert refused.failure.category == "tool_error"
    assert "reports no usage" in refused.failure.message
    assert (served.ok, served.output) == (True, "done")
    assert agent.received == ["Summarise TP53"]


# -- lyra on both sides: a lyra report's category carries over ----------------------------


async def blocks(prompt: str, ctx: ChildContext) -> str:
    ctx.block("missing_context", "Which organism?")


async def asks(prompt: str, ctx: ChildContext) -> str:
    return await ctx.ask("Which organism?")


@pytest.mark.parametrize(
    ("remote", "category", "error_type", "retryable"),
    [
        (stalls, "timeout", "idle", True),
        (crashes, "partial", "unknown", True),
        (invalid, "invalid_task", "data", False),
        (gone, "invalid_task", "not_found", False),
        (forbidden, "tool_error", "auth", False),
        (blocks, "missing_context", "input_required", False),
        (asks, "missing_context", "input_required", False),
    ],
)
async def test_a_lyra_servers_failure_keeps_its_category(
    remote: Any, category: str, error_type: str, retryable: bool
) -> None:
    """A failure of a child served by lyra a2a comes back through A2AChild in the same
    category (its idle timeout is a timeout here); its question, blocked on or asked,
    is this attempt's, and with nobody here to answer it, missing_context /
    input_required."""
    make = lambda url: build_app(remote, limits=Limits(idle_timeout=0.2), url=url)  # noqa: E731
    async with serving(make) as url:
        result = await delegate(url)
    failure = result.failure
    assert (failure.category, failure.error_type, failure.retryable) == (
        category,
        error_type,
        retryable,
    ), failure.evidence


async def sleeps(prompt: str, ctx: ChildContext) -> str:
    await anyio.sleep(5)
    return "woke"


async def test_a_lyra_servers_keepalives_are_no_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """lyra a2a says a quiet task still runs (a keep-alive, for a client's read timeout):
    a child doing nothing there is still ended by this side's idle timeout."""
    monkeypatch.setattr(_delegations, "KEEPALIVE", 0.1)
    make = lambda url: build_app(sleeps, url=url)  # noqa: E731
    async with serving(make) as url:
        result = await delegate(url, idle_timeout=0.5)
    failure = result.failure
    assert (failure.category, failure.error_type) == ("timeout", "idle"), failure.evidence
    assert result.duration < 1.5


def _remote_report(category: str) -> dict[str, Any]:
    """The fields of a lyra failure report, as a data part carries them."""
    report = {"status": "failed", "category": category, "error_type": "timeout"}
    return {**report, "retryable": True, "message": "it says so"}


@pytest.mark.parametrize(("lyra_card", "category"), [(False, "tool_error"), (True, "timeout")])
async def test_only_a_server_of_lyras_extension_sets_the_category(
    lyra_card: bool, category: str
) -> None:
    """A failed task's data part in the shape of a lyra report carries its category
    over only from a server that declares lyra's extension: from any other agent it is
    that agent's data, and the failure is classified by the task's state."""
    agent = Scripted([ends("FAILED", "no luck", data=_remote_report("timeout"))])
    async with serving(agent_app(agent, usage=lyra_card)) as url:
        result = await delegate(url)
    assert result.failure.category == category, result.failure.evidence


async def denied(prompt: str, ctx: ChildContext) -> str:
    raise PermissionError(13, "Permission denied", "/data/cache")


async def test_a_lyra_servers_environment_error_is_rule_7_here() -> None:
    """A served child's missing permission (rule 7 there) is rule 7 here too."""
    make = lambda url: build_app(denied, url=url)  # noqa: E731
    async with serving(make) as url:
        result = await delegate(url)
    failure = result.failure
    assert (failure.category, failure.error_type) == ("tool_error", "environment")
    assert "rule 7" in failure.evidence, failure.evidence


async def test_a_lyra_servers_usage_is_charged_to_the_tree() -> None:
    """The served child's usage, reported in its status updates, is this tree's: its
    steps are this attempt's steps, and a budget holds it."""
    make = lambda url: build_app(spender, url=url)  # noqa: E731
    async with serving(make) as url:
        result = await delegate(url, budget=Budget(max_tokens=5000, max_turns=10))
    assert (result.ok, result.output) == (True, "spent on: Summarise TP53")
    assert (result.usage.tokens, result.usage.turns, result.usage.cost_usd) == (1200, 3, 0.03)


@pytest.mark.parametrize(
    ("metadata", "usage"),
    [
        ({"usage": {"input_tokens": 300.0, "output_tokens": 2.5, "cost_usd": 0.01, "turns": 1}},
         Usage(input_tokens=300, output_tokens=3, cost_usd=0.01, turns=1)),
        ({"usage": {"input_tokens": -5, "output_tokens": "9", "cost_usd": float("nan")}}, Usage()),
        ({"usage": {"cost_usd": True, "turns": float("inf")}}, Usage()),
        ({"usage": [300]}, None),
        ({}, None),
    ],
    ids=["floats", "negative, text, NaN", "bool, inf", "not a mapping", "none"],
)  # fmt: skip
def test_reported_usage_is_foreign_data_made_whole(
    metadata: dict[str, Any], usage: Usage | None
) -> None:
    """A remote's usage figures are counted as every child's foreign counts are: a float
    rounded up, what is no count ≥ 0 nothing; no usage mapping at all is no report."""
    assert usage_of(metadata) == usage


# -- the SDK's exceptions ------------------------------------------------------------------


def _sdk_exception_classes() -> set[str]:
    """Every exception class the installed a2a-sdk defines: imported where its module
    imports, read from the source where it needs an optional dependency (gRPC, Alembic)."""
    found: set[str] = set()
    for info in pkgutil.walk_packages(a2a.__path__, "a2a."):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                module = importlib.import_module(info.name)
        except ImportError:
            spec = importlib.util.find_spec(info.name)
            assert spec is not None
            assert spec.origin is not None
            tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
            found |= {
                node.name
                for node in ast.walk(tree)
                if isinstance(node, ast.ClassDef)
                and any(
                    getattr(base, "id", getattr(base, "attr", "")).endswith(("Error", "Exception"))
                    for base in node.bases
                )
            }
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__.startswith("a2a."):
                found.add(cls.__name__)
    return found


def test_every_sdk_exception_class_and_task_state_is_mapped() -> None:
    """Each exception class of the installed a2a-sdk has an explicit mapping, and each
    task state is either mapped or one the child handles itself (completed, a question)."""
    classes = _sdk_exception_classes()
    assert {"A2AClientError", "TaskNotFoundError", "AgentCardResolutionError"} <= classes
    assert sorted(classes - A2A_ERRORS.keys()) == []
    handled = {"TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED"}
    assert set(TaskState.keys()) == TASK_STATES.keys() | handled


def _raised_from(exc: BaseException, cause: BaseException) -> BaseException:
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    ("exc", "kind", "error_type"),
    [
        (_raised_from(A2AClientError("HTTP Error 401"), httpx.HTTPStatusError(
            "401", request=httpx.Request("POST", "http://x"),
            response=httpx.Response(401))), Kind.PERMANENT, "auth"),
        (_raised_from(A2AClientError("Network"), httpx.ConnectError("refused")),
         Kind.TRANSIENT, "connection"),
        (A2AClientTimeoutError("Client Request timed out"), Kind.TRANSIENT, "timeout"),
        (AgentCardResolutionError("no card", status_code=404), Kind.PERMANENT, "not_found"),
        (AgentCardResolutionError("busy", status_code=503), Kind.TRANSIENT, "unknown"),
        (A2AClientError("ended", data={"task_state": "TASK_STATE_FAILED", "report": {
            "category": "timeout", "error_type": "budget"}}), Kind.BUDGET, "budget"),
        (A2AClientError("ended", data={"task_state": "TASK_STATE_FAILED", "report": {
            "category": ["hostile"], "error_type": {}}}), Kind.UNKNOWN, "unknown"),
    ],
    ids=["401", "refused", "client timeout", "no card", "card 503", "lyra report", "hostile"],
)  # fmt: skip
def test_sdk_errors_are_refined_by_what_they_carry(
    exc: BaseException, kind: Kind, error_type: str
) -> None:
    """A client error is what it wraps (a 401 is permanent, a refused connection
    transient); a card's HTTP status decides; a remote task's report decides, and a
    hostile one falls back to the state's mapping."""
    cause = describe(exc)
    assert (cause.kind, cause.error_type) == (kind, error_type)


async def test_a_refused_connection_and_a_missing_token_are_classified() -> None:
    """Nothing listening is a retryable tool_error (connection); a lyra server that asks
    for a token, sent none, is tool_error/auth, not retryable."""
    refused = await delegate("http://127.0.0.1:9")
    make = lambda url: build_app(spender, url=url, token="s3cret")  # noqa: E731
    async with serving(make) as url:
        anonymous = await delegate(url)
        with_token = await Supervisor(
            A2AChild(url, headers={"Authorization": "Bearer s3cret"})
        ).delegate("Go", timeout=5)
    assert (refused.failure.category, refused.failure.error_type) == ("tool_error", "connection")
    assert refused.failure.retryable
    assert (anonymous.failure.category, anonymous.failure.error_type) == ("tool_error", "auth")
    assert not anonymous.failure.retryable
    assert with_token.ok


# -- building the child ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        (("127.0.0.1:9999",), {}, "A2AChild needs the agent's http\\(s\\) URL"),
        (("http://127.0.0.1:9999",), {"headers": [("a", "b")]}, "headers= must be"),
        (("http://127.0.0.1:9999",), {"headers": {"Authorization": b"secret"}}, "Authorization"),
    ],
)
def test_a_child_that_cannot_work_is_refused_when_built(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: str
) -> None:
    """A URL without its scheme, or headers that are not names to text, are refused at
    construction, never echoing a header's value."""
    with pytest.raises((TypeError, ValueError), match=error) as raised:
        A2AChild(*args, **kwargs)
    assert "secret" not in str(raised.value)


def test_the_module_does_not_import_the_sdk_and_a_missing_extra_is_named() -> None:
    """Importing lyra.children.a2a loads no A2A SDK; building a child without the extra
    is a ConfigurationError naming it."""
    script = (
        "import sys\n"
        "import lyra.children.a2a as m\n"
        "assert 'a2a' not in sys.modules, 'imported the SDK'\n"
        "sys.modules['a2a'] = None\n"
        "try:\n"
        "    m.A2AChild('http://127.0.0.1:9999')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.startswith("ConfigurationError")
    assert install_hint("a2a") in out


# -- a lyra tree whose grandchild is lyra a2a in another process ---------------------------


@pytest.fixture(scope="module")
def lyra_a2a_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``lyra a2a --child fakes.children:drips --port 0`` in a process of its own: its
    URL (the port the system picked, as its first line says), and the file its events
    go to."""
    events = tmp_path_factory.mktemp("a2a") / "events.jsonl"
    server = subprocess.Popen(
        [sys.executable, "-m", "lyra", "a2a", "--child", "fakes.children:drips",
         "--port", "0", "--events", str(events)],
        env={"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"},
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        said = server.stderr.readline()  # "lyra a2a: serving at URL (agent card: …)"
        assert said.startswith("lyra a2a: serving at http://127.0.0.1:"), said
        url = said.split()[4]
        assert not url.endswith(":0/"), said
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{url}.well-known/agent-card.json").raise_for_status()
                break
            except httpx.TransportError:
                assert server.poll() is None, server.communicate()[1]
                assert time.monotonic() < deadline, "lyra a2a did not start"
                time.sleep(0.05)
        yield url, events
    finally:
        server.terminate()
        _, err = server.communicate(timeout=10)
    assert (server.returncode, err.splitlines()[-1]) == (130, "lyra: interrupted"), err
    assert "Traceback" not in err


@pytest.mark.slow
async def test_a_tree_whose_grandchild_is_a_lyra_a2a_server_in_another_process(
    lyra_a2a_process: tuple[str, Path],
) -> None:
    """A parent delegates (ctx.delegate) to an A2AChild whose agent is lyra a2a in
    another process: the grandchild's output, steps and usage come back into one tree
    under one budget; the question its child asks there is answered by this tree's
    answer=; a grandchild that outgrows its share is stopped here and its task
    cancelled there (the server logs its child cancelled)."""
    url, events = lyra_a2a_process
    asked: list[Any] = []
    questions: list[str] = []

    async def parent(prompt: str, ctx: ChildContext) -> str:
        remote = A2AChild(url)
        done = await ctx.delegate(prompt, child=remote, budget=Budget(max_turns=5))
        answered = await ctx.delegate("Pick the organism", child=remote)
        stopped = await ctx.delegate("Work forever", child=remote, budget=Budget(max_tokens=1000))
        asked.extend([done, answered, stopped])
        return f"remote said: {done.output}"

    answer = lambda question: questions.append(question) or "Homo sapiens"  # noqa: E731
    result = await Supervisor(parent, budget=Budget(max_tokens=10_000), answer=answer).delegate(
        "Summarise TP53", timeout=20
    )
    assert (result.ok, result.output) == (True, "remote said: spent on: Summarise TP53")
    done, answered, stopped = asked
    assert (answered.output, questions) == ("Pick the organism: Homo sapiens", ["Which organism?"])
    assert done.parent_session_id == stopped.parent_session_id == result.session_id
    assert (done.usage.tokens, done.usage.turns) == (1200, 3)
    failure = stopped.failure
    assert (failure.category, failure.error_type) == ("timeout", "budget")
    assert failure.completed_steps[0].startswith("Dripped")  # (×2 or ×3: as updates come)
    assert result.usage.tokens == done.usage.tokens + stopped.usage.tokens
    for _ in range(300):  # the server writes its events a moment later (a loaded host: seconds)
        if '"delegation_cancelled"' in events.read_text(encoding="utf-8"):
            break
        await anyio.sleep(0.05)
    else:
        raise AssertionError("the server's child was not cancelled")


@pytest.mark.slow
def test_a_run_imports_nothing_the_child_did_not_load_when_built(
    lyra_a2a_process: tuple[str, Path],
) -> None:
    """Built, the child has loaded the SDK, the HTTP transport and what parsing the
    remote's events needs: its first delegation, in a fresh process, imports nothing."""
    script = (
        "import sys, anyio\n"
        "from lyra import Supervisor\n"
        "from lyra.children.a2a import A2AChild\n"
        f"child = A2AChild({lyra_a2a_process[0]!r})\n"
        "async def main():\n"
        "    before = set(sys.modules)\n"
        "    result = await Supervisor(child).delegate('Summarise', timeout=10)\n"
        "    print(result.ok, sorted(set(sys.modules) - before))\n"
        "anyio.run(main)\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.stdout == "True []\n", done.stderr


def test_a_report_names_the_remote_by_its_address_without_its_secrets() -> None:
    """<child> and <fallback> name an A2AChild by its address; credentials, a query
    (a token in the URL) and a fragment never reach a report."""
    child = A2AChild("https://user:s3cret@agents.example:8443/a2a/?token=abc#x")
    assert child.name == "A2AChild(https://agents.example:8443/a2a/)"
    for unescaped in (
        "https://bob:pa/ss@agents.example/a2a",
        "https://bob:pa#ss@agents.example/a2a",
    ):
        assert A2AChild(unescaped).name == "A2AChild(https://agents.example/a2a)"
