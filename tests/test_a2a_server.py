"""``lyra a2a`` through the official A2A SDK's client over HTTP on 127.0.0.1: each lyra
outcome arrives as its task state, questions are answered, cancel stops the child, and
the server guards itself (Host, bearer token, safe binds)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.helpers import (
    get_data_parts,
    get_text_parts,
    new_data_part,
    new_message,
    new_text_message,
)
from a2a.types import (
    CancelTaskRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from anyio.abc import TaskGroup
from google.protobuf.json_format import MessageToDict

from fakes.a2a_agents import serving
from fakes.children import crashes, forbidden, invalid, stalls
from lyra import ChildContext, Limits, parse_report
from lyra._extras import install_hint
from lyra.a2a import build_app, serve, served_url
from lyra.a2a._delegations import _new_steps, _Seen
from lyra.errors import ConfigurationError, TransientError

pytestmark = pytest.mark.anyio

TESTS = Path(__file__).resolve().parent


@asynccontextmanager
async def lyra_a2a(
    child: Any, limits: Limits | None = None, **options: Any
) -> AsyncIterator[Client]:
    """``child`` served by ``build_app`` on a free port, and an SDK client of it."""
    async with (
        serving(lambda url: build_app(child, limits=limits, url=url, **options)) as url,
        await create_client(url) as client,
    ):
        yield client


async def send(client: Client, text: str, **ids: str) -> list[StreamResponse]:
    """Every event of one streamed message (``ids``: the task's, to continue it)."""
    message = new_text_message(text, role=Role.ROLE_USER, **ids)
    return [event async for event in client.send_message(SendMessageRequest(message=message))]


def states(events: list[StreamResponse]) -> list[tuple[str, str]]:
    """(state, message text) of each status update."""
    return [
        (TaskState.Name(e.status_update.status.state).removeprefix("TASK_STATE_"),
         "\n".join(get_text_parts(e.status_update.status.message.parts)))
        for e in events
        if e.WhichOneof("payload") == "status_update"
    ]  # fmt: skip


def last_status(events: list[StreamResponse]) -> Any:
    return [e for e in events if e.WhichOneof("payload") == "status_update"][-1].status_update


def ids_of(events: list[StreamResponse]) -> dict[str, str]:
    task = events[0].task
    return {"task_id": task.id, "context_id": task.context_id}


async def streaming(client: Client, group: TaskGroup, events: list[StreamResponse]) -> None:
    """Stream the message "Go" into ``events`` (in ``group``); return once the child's
    step "Started" has arrived."""
    started = anyio.Event()

    async def stream() -> None:
        message = new_text_message("Go", role=Role.ROLE_USER)
        async for event in client.send_message(SendMessageRequest(message=message)):
            events.append(event)
            if ("WORKING", "Started") in states([event]):
                started.set()

    group.start_soon(stream)
    with anyio.fail_after(5):
        await started.wait()


async def stepper(prompt: str, ctx: ChildContext) -> str:
    """Two steps, 400 tokens each, then the prompt back."""
    for step in ("Fetched P04637", "Read its pLDDT"):
        ctx.charge(input_tokens=300, output_tokens=100, turns=1)
        ctx.step(step)
    return f"done: {prompt}"


async def test_steps_are_working_updates_and_the_output_an_artifact() -> None:
    """Each step is a working update with the step as its message; the output is the
    artifact; completed carries the report's fields as a data part; every update
    carries the usage so far."""
    async with lyra_a2a(stepper) as client:
        events = await send(client, "Summarise P04637")
    assert events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert states(events) == [
        ("WORKING", ""),
        ("WORKING", "Fetched P04637"),
        ("WORKING", "Read its pLDDT"),
        ("COMPLETED", ""),
    ]
    [artifact] = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert get_text_parts(artifact.parts) == ["done: Summarise P04637"]
    final = last_status(events)
    [fields] = get_data_parts(final.status.message.parts)
    assert (fields["status"], fields["tokens_used"], fields["turns"]) == ("completed", 800, 2)
    assert MessageToDict(final.metadata)["usage"] == {
        "input_tokens": 600, "output_tokens": 200, "cost_usd": 0.0, "turns": 2
    }  # fmt: skip
    # Both steps, read as the attempt ended, carry the usage so far (the last one, none).
    steps = [e.status_update for e in events if e.HasField("status_update")][1:3]
    assert [MessageToDict(s.metadata)["usage"]["input_tokens"] for s in steps] == [600, 600]


async def test_a_quiet_child_keeps_its_stream_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that says nothing for longer than the keep-alive (a slow model call)
    still sends `working` updates, so a client's read timeout never ends the stream."""
    from lyra.a2a import _delegations

    monkeypatch.setattr(_delegations, "KEEPALIVE", 0.2)

    async def quiet(prompt: str, ctx: ChildContext) -> str:
        await anyio.sleep(0.7)
        return "spoke at last"

    async with lyra_a2a(quiet) as client:
        events = await send(client, "Go")
    said = states(events)
    assert said[-1] == ("COMPLETED", "")
    assert said[:-1].count(("WORKING", "")) >= 3  # the start, then a keep-alive a 0.2 s


@pytest.mark.parametrize(
    ("looks", "said"),
    [
        ([["A"], ["A", "B"], ["A", "B", "C"]], ["A", "B", "C"]),
        ([["A"], ["A (×2)"], ["A (×2)", "B (×3)"]], ["A", "A", "B"]),
        ([["A", "B (×2)", "C"]], ["A", "B", "C"]),
        ([["A"], ["A"]], ["A"]),
    ],
    ids=["one a look", "repeats", "all at once", "nothing new"],
)
def test_each_look_says_the_steps_written_since_the_last(
    looks: list[list[str]], said: list[str]
) -> None:
    """What a look at an attempt's steps says: each step written since the last look,
    once, as the child wrote it (lyra's "(×N)" count removed, so the parent counts the
    repeat itself), and nothing already said."""
    seen, out = _Seen(), []
    for steps in looks:
        out += _new_steps(steps, seen)
        seen.entries, seen.last = len(steps), steps[-1]
    assert out == said


@pytest.mark.parametrize(
    ("child", "state", "category", "error_type"),
    [
        (stalls, "FAILED", "timeout", "idle"),
        (crashes, "FAILED", "partial", "unknown"),
        (invalid, "REJECTED", "invalid_task", "data"),
        (forbidden, "AUTH_REQUIRED", "tool_error", "auth"),
    ],
    ids=["idle", "partial", "invalid_task", "auth"],
)
async def test_a_failure_ends_the_task_with_its_report(
    child: Any, state: str, category: str, error_type: str
) -> None:
    """A failure ends the task in its state (failed, rejected for invalid_task,
    auth-required for a 401/403) with the report text and, as a data part, the fields
    parse_report reads from that text."""
    async with lyra_a2a(child, Limits(idle_timeout=0.2)) as client:
        events = await send(client, "Analyze P0")
    final = last_status(events)
    assert TaskState.Name(final.status.state) == f"TASK_STATE_{state}"
    [report] = get_text_parts(final.status.message.parts)
    [fields] = get_data_parts(final.status.message.parts)
    assert report.startswith("Child agent failed:")
    assert (fields["category"], fields["error_type"]) == (category, error_type)
    assert parse_report(report).model_dump(mode="json") == {
        **fields, "attempt": 1, "duration": pytest.approx(fields["duration"])
    }  # fmt: skip


class Asker:
    """Asks which organism (``ctx.ask``) and waits; remembers its prompts and whether its
    wait was cancelled."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.stopped = anyio.Event()

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        self.prompts.append(prompt)
        ctx.step("Read TP53")
        try:
            organism = await ctx.ask("Which organism?")
        except anyio.get_cancelled_exc_class():
            self.stopped.set()
            raise
        ctx.step(f"Chose {organism}")
        return f"TP53 of {organism}"


async def test_a_childs_question_waits_and_the_next_message_is_its_answer() -> None:
    """ctx.ask is input-required with the question while the child waits; the client's
    next message on the task is what ctx.ask returns, and the same attempt goes on:
    its next steps and its output arrive on that message's stream."""
    child = Asker()
    async with lyra_a2a(child) as client:
        asked = await send(client, "Summarise TP53")
        answered = await send(client, "Homo sapiens", **ids_of(asked))
    assert states(asked)[-2:] == [("WORKING", "Read TP53"), ("INPUT_REQUIRED", "Which organism?")]
    assert states(answered) == [
        ("WORKING", ""),
        ("WORKING", "Chose Homo sapiens"),
        ("COMPLETED", ""),
    ]
    [artifact] = [e.artifact_update.artifact for e in answered if e.HasField("artifact_update")]
    assert get_text_parts(artifact.parts) == ["TP53 of Homo sapiens"]
    [fields] = get_data_parts(last_status(answered).status.message.parts)
    assert (fields["status"], fields["attempt"]) == ("completed", 1)
    assert child.prompts == ["Summarise TP53"]
    assert not child.stopped.is_set()


async def test_a_question_whose_wait_ran_out_is_answered_by_running_the_task_again() -> None:
    """The deadline ends the child's wait; the client's answer then runs the task again,
    the prompt enriched with the question and its answer, and ctx.ask of the same
    question returns that answer at once."""
    child = Asker()
    async with lyra_a2a(child, Limits(timeout=0.5)) as client:  # (the question said well before)
        asked = await send(client, "Summarise TP53")
        with anyio.fail_after(2):
            await child.stopped.wait()
        answered = await send(client, "Homo sapiens", **ids_of(asked))
    assert states(asked)[-1] == ("INPUT_REQUIRED", "Which organism?")
    assert states(answered)[-1] == ("COMPLETED", "")
    first, second = child.prompts
    assert first == "Summarise TP53"
    assert second.startswith("Summarise TP53\n")
    assert "answer: Homo sapiens" in second


def refused(events: list[StreamResponse]) -> bool:
    """True when the last status says an answer was refused (its metadata)."""
    return "answer_refused" in MessageToDict(last_status(events).metadata)


async def test_a_blank_message_is_no_answer_and_the_question_waits_on() -> None:
    """A blank message, or one of data parts only, to a task whose child waits on its
    question is not its answer (as lyra answer and MCP's answer_delegation refuse a
    blank one): the task says the same question again, input-required, its metadata
    saying the answer was refused, the child still waiting in the same attempt, and
    the next real answer is what ctx.ask returns."""
    child = Asker()
    async with lyra_a2a(child) as client:
        asked = await send(client, "Summarise TP53")
        blank = await send(client, "  \n", **ids_of(asked))
        data = new_message([new_data_part({"organism": "Homo sapiens"})], role=Role.ROLE_USER,
                           **ids_of(asked))  # fmt: skip
        only_data = [e async for e in client.send_message(SendMessageRequest(message=data))]
        answered = await send(client, "Homo sapiens", **ids_of(asked))
    assert not refused(asked)
    for refusal in (blank, only_data):
        assert states(refusal) == [("INPUT_REQUIRED", "Which organism?")]
        assert refused(refusal)
    assert not child.stopped.is_set()
    assert states(answered)[-2:] == [("WORKING", "Chose Homo sapiens"), ("COMPLETED", "")]
    assert child.prompts == ["Summarise TP53"]


class Asks:
    """Blocks on a question until the prompt holds an answer; counts its runs."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        self.prompts.append(prompt)
        if "Homo sapiens" not in prompt:
            ctx.block("missing_context", "Which organism?")
        return "answered for Homo sapiens"


async def test_a_blocker_on_missing_context_is_answered_by_running_the_task_again() -> None:
    """missing_context (ctx.block) ends the exchange in input-required with the question
    (and the report's fields); the client's next message on the task answers it, and
    the task runs again with the prompt enriched by the answer and completes."""
    child = Asks()
    async with lyra_a2a(child) as client:
        asked = await send(client, "Summarise TP53")
        answered = await send(client, "Homo sapiens", **ids_of(asked))
    assert states(asked)[-1] == ("INPUT_REQUIRED", "Which organism?")
    [fields] = get_data_parts(last_status(asked).status.message.parts)
    assert (fields["category"], fields["blocked_on"]) == ("missing_context", "Which organism?")
    assert states(answered)[-1] == ("COMPLETED", "")
    first, second = child.prompts
    assert first == "Summarise TP53"
    assert second.startswith("Summarise TP53\n")
    assert "Which organism?" in second
    assert "answer: Homo sapiens" in second


async def test_a_blank_message_after_a_missing_context_blocker_runs_nothing() -> None:
    """The task that ended on missing_context does not run again on a blank message:
    the question is said again, and the next real answer runs it."""
    child = Asks()
    async with lyra_a2a(child) as client:
        asked = await send(client, "Summarise TP53")
        blank = await send(client, "", **ids_of(asked))
        answered = await send(client, "Homo sapiens", **ids_of(asked))
    assert states(blank) == [("INPUT_REQUIRED", "Which organism?")]
    assert refused(blank)
    assert states(answered)[-1] == ("COMPLETED", "")
    assert len(child.prompts) == 2


class DeniedOnce:
    """A 401 the first time, then the output."""

    def __init__(self) -> None:
        self.runs = 0

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        self.runs += 1
        if self.runs == 1:
            raise TransientError("token expired", status=401)
        return f"second try: {prompt}"


async def test_after_auth_required_the_next_message_runs_the_task_again() -> None:
    """auth-required waits; the next message (the credentials fixed) runs the same
    prompt again."""
    async with lyra_a2a(DeniedOnce()) as client:
        denied = await send(client, "Summarise TP53")
        again = await send(client, "retry", **ids_of(denied))
    assert states(denied)[-1][0] == "AUTH_REQUIRED"
    [artifact] = [e.artifact_update.artifact for e in again if e.HasField("artifact_update")]
    assert get_text_parts(artifact.parts) == ["second try: Summarise TP53"]


async def test_a_message_to_a_task_that_waits_for_none_is_refused_and_runs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A second message while the task works is refused as it comes (not held until the
    task's request ends, as the SDK would), never a second run: the child runs once, the
    task completes once with one artifact; the refusal is no error with a traceback in
    the server's log."""
    prompts: list[str] = []
    release = anyio.Event()

    async def working(prompt: str, ctx: ChildContext) -> str:
        prompts.append(prompt)
        ctx.step("Started")
        await release.wait()
        return f"done: {prompt}"

    first: list[StreamResponse] = []
    async with lyra_a2a(working) as client, anyio.create_task_group() as group:
        await streaming(client, group, first)
        with anyio.fail_after(5), pytest.raises(Exception, match="only while it waits"):
            await send(client, "Again", **ids_of(first))  # (the task still works)
        release.set()
    assert prompts == ["Go"]
    assert states(first)[-1][0] == "COMPLETED"
    [artifact] = [e.artifact_update.artifact for e in first if e.HasField("artifact_update")]
    assert get_text_parts(artifact.parts) == ["done: Go"]
    ours = "a message continues a task only while"
    assert not [r for r in caplog.records if r.exc_info and ours in str(r.exc_info[1])]


async def test_a_message_to_a_task_that_ended_is_refused_and_leaves_nothing_running() -> None:
    """'lyra a2a prints "Task was destroyed but it is pending" on Ctrl-C' after a message
    to a task that had ended: the SDK refused it only after it had set up the task's
    event queues, whose dispatchers ran on after the server stopped. It is refused
    before, as lyra refuses one to a task still working."""

    def dispatching() -> list[asyncio.Task[Any]]:
        return [t for t in asyncio.all_tasks() if "_dispatch_loop" in repr(t.get_coro())]

    async with lyra_a2a(stepper) as client:
        ended = await send(client, "Go")
        assert states(ended)[-1][0] == "COMPLETED"
        with anyio.fail_after(5), pytest.raises(Exception, match="is over: a message continues"):
            await send(client, "Again", **ids_of(ended))
    assert dispatching() == []


async def test_a_message_sent_while_the_task_worked_is_no_answer_to_a_later_question() -> None:
    """A message sent while the task works is refused as it comes: the question the
    child asks later waits for the answer its own message gets, in the same attempt."""
    release = anyio.Event()

    async def asks_later(prompt: str, ctx: ChildContext) -> str:
        ctx.step("Started")
        await release.wait()
        organism = await ctx.ask("Which organism?")
        return f"TP53 of {organism}"

    first: list[StreamResponse] = []
    async with lyra_a2a(asks_later) as client, anyio.create_task_group() as group:
        await streaming(client, group, first)
        with anyio.fail_after(5), pytest.raises(Exception, match="only while it waits"):
            await send(client, "mouse", **ids_of(first))
        release.set()
        with anyio.fail_after(5):
            while states(first)[-1] != ("INPUT_REQUIRED", "Which organism?"):  # noqa: ASYNC110
                await anyio.sleep(0.01)
        answered = await send(client, "human", **ids_of(first))
    [artifact] = [e.artifact_update.artifact for e in answered if e.HasField("artifact_update")]
    assert get_text_parts(artifact.parts) == ["TP53 of human"]


async def test_cancel_stops_the_child_before_the_task_is_canceled() -> None:
    """tasks/cancel stops the running child (its cleanup has run when cancel returns),
    the task is canceled, and the client's stream says so; a child waiting for an
    answer is stopped the same way."""
    stopped = anyio.Event()

    async def forever(prompt: str, ctx: ChildContext) -> str:
        ctx.step("Started")
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return "never"

    streamed: list[StreamResponse] = []
    async with lyra_a2a(forever) as client, anyio.create_task_group() as group:
        await streaming(client, group, streamed)
        task = await client.cancel_task(CancelTaskRequest(id=streamed[0].task.id))
        assert stopped.is_set()
    assert task.status.state == TaskState.TASK_STATE_CANCELED
    assert states(streamed)[-1][0] == "CANCELED"

    asker = Asker()
    async with lyra_a2a(asker) as client:
        asked = await send(client, "Summarise TP53")
        task = await client.cancel_task(CancelTaskRequest(id=asked[0].task.id))
        assert asker.stopped.is_set()
    assert states(asked)[-1][0] == "INPUT_REQUIRED"
    assert task.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_token_guards_everything_but_the_card_and_a_wrong_host_is_refused() -> None:
    """With a token, the agent card is open and declares bearer auth; the JSON-RPC
    endpoint answers 401 without the token and serves with it. A request naming
    another host (DNS rebinding), or a Host header naming none, gets 421."""
    app = lambda url: build_app(stepper, url=url, token="s3cret")  # noqa: E731
    async with serving(app) as url, httpx.AsyncClient() as http:
        card = (await http.get(f"{url}.well-known/agent-card.json")).json()
        anonymous = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "x"})
        rebound = await http.get(
            f"{url}.well-known/agent-card.json", headers={"Host": "evil.example"}
        )
        malformed = [  # (a Host that names no host at all: refused the same, never a 500)
            (await http.get(f"{url}.well-known/agent-card.json", headers={"Host": h})).status_code
            for h in ("[", "[::1")
        ]
        async with httpx.AsyncClient(headers={"Authorization": "Bearer s3cret"}) as authorized:
            config = ClientConfig(httpx_client=authorized)
            async with await create_client(url, config) as client:
                events = await send(client, "Go")
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    assert rebound.status_code == 421
    assert malformed == [421, 421]
    assert states(events)[-1][0] == "COMPLETED"


async def test_a_message_with_empty_text_is_a_rejected_task_not_an_internal_error() -> None:
    """An empty prompt is the client's mistake: a task rejected as invalid_task (as a
    blank prompt is over MCP), where the SDK's own helper raised an internal error."""
    message = {"role": "ROLE_USER", "parts": [{"text": ""}], "messageId": "m1"}
    request = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    async with serving(lambda url: build_app(stepper, url=url)) as url, httpx.AsyncClient() as http:
        answer = (await http.post(url, json=request, headers={"A2A-Version": "1.0"})).json()
    assert "error" not in answer, answer
    status = answer["result"]["task"]["status"]
    assert status["state"] == "TASK_STATE_REJECTED"
    assert "<failure_category>invalid_task</failure_category>" in json.dumps(status)


@pytest.mark.parametrize(
    ("host", "url", "token", "expected"),
    [
        ("127.0.0.1", None, None, "http://127.0.0.1:9999/"),
        ("::1", None, None, "http://[::1]:9999/"),
        ("192.0.2.7", None, "t", "http://192.0.2.7:9999/"),
        ("0.0.0.0", "https://agents.example/lyra/", "t", "https://agents.example/lyra/"),
        ("192.0.2.7", None, None, "needs a bearer token: set LYRA_A2A_TOKEN"),
        ("0.0.0.0", None, "t", "needs --url"),
    ],
)
def test_a_bind_beyond_loopback_needs_a_token_and_every_address_a_url(
    host: str, url: str | None, token: str | None, expected: str
) -> None:
    """Loopback serves as it is; another address needs a token; every address (0.0.0.0)
    needs the URL clients use, which the card states."""
    if expected.startswith("http"):
        assert served_url(host, 9999, url=url, token=token) == expected
    else:
        with pytest.raises(ConfigurationError, match=expected):
            served_url(host, 9999, url=url, token=token)


REFUSALS = {
    "no child": ((), "", "lyra: no child given and none configured"),
    "no token": (
        ("--child", "fakes.children:spender", "--host", "0.0.0.0"),
        "",
        "lyra: serving on 0.0.0.0 (not loopback) needs a bearer token: set LYRA_A2A_TOKEN",
    ),
    "no extra": (
        ("--child", "fakes.children:spender"),
        "import sys; sys.modules['a2a'] = None",
        "lyra: the A2A server needs the a2a extra (the A2A SDK is not installed): "
        + install_hint("a2a"),
    ),
    "port in use": (
        ("--child", "fakes.children:spender", "--port", "PORT"),
        "",
        "lyra: cannot listen on 127.0.0.1:PORT: Address already in use",
    ),
}
"""``lyra a2a`` arguments (PORT: a port in use), code run before it, its one line."""


@pytest.fixture(scope="module")
def refusals() -> dict[str, tuple[subprocess.CompletedProcess[str], str]]:
    """Each of :data:`REFUSALS` run at once (they mostly import), with the port in use."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        procs = {}
        for name, (args, code, _) in REFUSALS.items():
            argv = [port if arg == "PORT" else arg for arg in args]
            script = (
                f"{code}\nfrom lyra.cli import main\nraise SystemExit(main(['a2a', *{argv!r}]))"
            )
            procs[name] = subprocess.Popen(
                [sys.executable, "-c", script],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"},
            )
        done = {}
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=60)
            done[name] = (subprocess.CompletedProcess(proc.args, proc.returncode, out, err), port)
    return done


@pytest.mark.slow
@pytest.mark.parametrize("case", REFUSALS)
def test_a_server_that_cannot_serve_says_why_and_exits_2(
    refusals: dict[str, tuple[subprocess.CompletedProcess[str], str]], case: str
) -> None:
    """No child, a non-loopback bind without a token, no A2A SDK, or a port in use: one
    line on stderr, exit 2, nothing on stdout."""
    done, port = refusals[case]
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(REFUSALS[case][2].replace("PORT", port)), done.stderr
    assert len(done.stderr.splitlines()) == 1


async def test_a_cancelled_serve_shuts_down_and_stops_the_running_children() -> None:
    """serve() cancelled shuts the server down as Ctrl+C does: a running child is stopped
    (its cleanup runs), and nothing is left running. (On port 0: the card states the
    port the system picked, which the client reaches it at.)"""
    stopped, started = anyio.Event(), anyio.Event()

    async def forever(prompt: str, ctx: ChildContext) -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return "never"

    urls: list[str] = []
    listening = anyio.Event()
    async with anyio.create_task_group() as group:
        on_listening = lambda url: (urls.append(url), listening.set())  # noqa: E731
        group.start_soon(partial(serve, forever, port=0, on_listening=on_listening))
        await listening.wait()
        assert (urlsplit(urls[0]).port or 0) > 0, urls
        client = await create_client(urls[0])
        group.start_soon(send, client, "Go")
        with anyio.fail_after(5):
            await started.wait()
        group.cancel_scope.cancel()
    assert stopped.is_set()
    await client.close()


async def test_a_stopping_server_ends_each_running_task_with_its_last_status() -> None:
    """Stopped (Ctrl+C, SIGTERM, serve() cancelled) while a task runs: the child is
    stopped and the task ends ``failed``, saying the server stops, on the client's own
    stream before it closes (the stream was cut off without a final status)."""
    urls: list[str] = []
    listening = anyio.Event()
    events: list[StreamResponse] = []
    with anyio.fail_after(20):
        async with (  # the server's group ends first: the client's stream outlives it
            anyio.create_task_group() as clients,
            anyio.create_task_group() as server,
        ):
            on_listening = lambda url: (urls.append(url), listening.set())  # noqa: E731
            server.start_soon(partial(serve, stalls, port=0, on_listening=on_listening))
            await listening.wait()
            client = await create_client(urls[0])
            await streaming(client, clients, events)
            server.cancel_scope.cancel()
    await client.close()
    state, text = states(events)[-1]
    assert state == "FAILED"
    assert text.startswith("lyra a2a is stopping: the child was stopped before it finished")
