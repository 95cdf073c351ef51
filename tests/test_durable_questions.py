"""A child's question in a durable run (``ctx.ask`` with nobody to answer in the
attempt): it waits in the database, the run says so with the ``lyra answer`` command
that answers it, ``lyra answer`` lists and answers it, and the answer reaches the
task's next attempt -- even when the process that ran the task was killed while the
question waited, with no finished attempt paid twice."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from lyra import ChildRef, RecoveryPolicy, Supervisor, Task
from lyra.cli import main
from lyra.durable import DurableExecutor
from test_durable import (
    attempts,
    database_url,  # noqa: F401 - a fixture
    env_with,
    lyra_cmd,
    wait_for,
)

TESTS = Path(__file__).parent
TASKS = [Task(prompt="ask", subject="asks"), Task(prompt="1x0.01", subject="plods")]
"""For the plodder: one task asks which organism, one finishes at once."""


def logged(log: Path, event: str) -> list[dict[str, Any]]:
    """The events of that name in a JSON-lines log."""
    if not log.exists():
        return []
    lines = log.read_text().splitlines()
    return [record for line in lines if (record := json.loads(line))["event"] == event]


def answer_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``lyra answer …`` in this process: its status, stdout and stderr."""
    status = main(["answer", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def the_command(waiting: dict[str, Any], answer: str) -> list[str]:
    """The arguments of the ``lyra answer`` command the run printed, with the answer."""
    words = shlex.split(waiting["answer_with"])
    assert (words[:2], words[-1]) == (["lyra", "answer"], "ANSWER")
    return [*words[2:-1], answer]


# -- the recovery loop: an answered question is no retry --------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("questions", [1, 7], ids=["one question", "a question each time"])
async def test_an_answered_question_is_not_a_retry(questions: int) -> None:
    """With no retries allowed, a question answered where it waits still runs the task
    again with its answer; a child that asks anew each time gets at most
    MAX_ANSWERED answers, then ends on its unanswered question."""
    from lyra.delegation import ChildContext, Limits
    from lyra.recovery import Attempt, Replay, attempt_plan, recover
    from lyra.recovery._strategies import MAX_ANSWERED

    async def curious(prompt: str, ctx: ChildContext) -> str:
        answers = [await ctx.ask(f"Question {n}?") for n in range(1, questions + 1)]
        return " ".join(answers)

    async def run(attempt: Attempt) -> Any:
        return await attempt_plan(
            curious, attempt, subject=None, context=None, task_id="t", limits=Limits(5)
        )

    async def mailbox(question: str) -> str:
        return question.removesuffix("?").lower()

    async def no_sleep(seconds: float) -> None:
        return None

    outcome = await recover(
        "x", policy=RecoveryPolicy(max_retries=0), replay=Replay(run, no_sleep, mailbox)
    )
    answered = min(questions, MAX_ANSWERED)
    assert [a.strategy for a in outcome.attempts] == ["initial"] + ["answer"] * answered
    if questions <= MAX_ANSWERED:
        assert outcome.result.output == "question 1"
    else:
        assert outcome.result.failure is not None
        assert outcome.result.failure.question == f"Question {MAX_ANSWERED + 1}?"


@pytest.mark.parametrize(
    ("name", "named"),
    [
        ("lyra-detached/d-7f3a/0-0", True),  # its workflow ID
        ("d-7f3a", True),  # lyra mcp's delegation id: the call
        ("p53", True),  # its subject
        ("0-0", False),
        ("lyra-detached", False),
    ],
)
def test_a_waiting_task_is_named_by_workflow_id_call_or_subject(name: str, named: bool) -> None:
    """lyra answer's TASK matches the workflow ID, the call (an MCP delegation id) or
    the subject, nothing else."""
    from lyra.durable import WaitingQuestion

    asked = WaitingQuestion("lyra-detached/d-7f3a/0-0", "p53", "Which?", None, answered=False)
    assert (asked.run_id, asked.call) == ("lyra-detached", "d-7f3a")
    assert asked.named(name) is named


@pytest.mark.parametrize(
    ("workflow_id", "subject", "shown"),
    [
        ("lyra-detached/d-7f3a/0-0", None, "d-7f3a"),  # lyra mcp --durable: the delegation id
        ("run1/0/3-p53", "p53", "p53"),
        ("run1/0/3-x", None, "run1/0/3-x"),
    ],
)
def test_lyra_answer_names_a_task_as_its_user_knows_it(
    workflow_id: str, subject: str | None, shown: str
) -> None:
    """A task is shown by its subject; a delegation of lyra mcp --durable, which has none,
    by its delegation id (not lyra-detached/d-7f3a/0-0); else by its workflow ID."""
    from lyra.cli._answer_command import _name
    from lyra.durable import WaitingQuestion

    assert _name(WaitingQuestion(workflow_id, subject, "Which?", None, answered=False)) == shown


# -- in one process: the questions listed, the usage errors, the answers ---------------


@pytest.mark.anyio
async def test_a_waiting_question_is_said_listed_and_answered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under the default policy (no retries) both tasks' questions wait; the run's log
    says so with the exact command; ``lyra answer`` lists them, refuses what it cannot
    answer, and answers one, the API the other; each task's next attempt gets its
    answer from ctx.ask, and nothing waits any more."""
    folder, log = tmp_path / "run", tmp_path / "events.jsonl"
    asks = [Task(prompt="ask", subject="p53"), Task(prompt="ask", subject="p21")]
    child = ChildRef(target="fakes.children:plodder")
    cli = lambda *argv: anyio.to_thread.run_sync(answer_cli, list(argv), capsys)  # noqa: E731
    outcomes: list[Any] = []

    async def run() -> None:
        outcomes.extend(await Supervisor(child, executor=executor).run(asks))

    async with (
        DurableExecutor.embedded(folder, run_id="r", event_log=log) as executor,
        anyio.create_task_group() as group,
    ):
        group.start_soon(run)
        with anyio.fail_after(30):
            while len(logged(log, "question_waiting")) < 2:  # noqa: ASYNC110 - a file to watch
                await anyio.sleep(0.05)
        listed = await cli(str(folder), "--json")
        table = await cli(str(folder))
        unknown = await cli(str(folder), "p63", "human")
        no_answer = await cli(str(folder), "p53")
        answered = await cli(str(folder), "p53", "yeast")
        [other] = [q for q in await executor.questions() if q.subject == "p21"]
        await executor.answer(other, "mouse")
    waiting = {record["subject"]: record for record in logged(log, "question_waiting")}
    assert waiting["p53"]["answer_with"] == f"lyra answer {folder} p53 'ANSWER'"
    assert waiting["p53"]["question"] == "Which organism?"
    assert listed[0] == 0
    assert sorted((q["task"], q["question"], q["answered"]) for q in json.loads(listed[1])) == [
        ("p21", "Which organism?", False),
        ("p53", "Which organism?", False),
    ]
    assert table[0] == 0
    heading, *rows = table[1].splitlines()
    assert heading.split() == ["TASK", "WAITS", "UNTIL", "QUESTION"]
    assert sorted(row.split()[0] for row in rows) == ["p21", "p53"]
    assert all(row.endswith("  Which organism?") for row in rows)
    assert f'lyra answer {folder} TASK "ANSWER"' in table[2]
    assert (unknown[0], "has no task 'p63'" in unknown[2]) == (2, True)
    assert "these wait for one: p" in unknown[2]
    assert all(name in unknown[2].partition("these wait")[2] for name in ("p53", "p21"))
    assert (no_answer[0], "give the answer too" in no_answer[2]) == (2, True)
    assert answered[:2] == (0, "answered p53\n")
    by_subject = {task.subject: outcome for task, outcome in zip(asks, outcomes, strict=True)}
    assert by_subject["p53"].result.output == "studied yeast"
    assert by_subject["p21"].result.output == "studied mouse"
    assert [a.strategy for a in by_subject["p53"].attempts] == ["initial", "answer"]
    assert by_subject["p53"].attempts[0].result.failure.error_type == "input_required"
    assert await anyio.to_thread.run_sync(main, ["answer", str(folder)]) == 1  # none waits
    late = await cli(str(folder), "p53", "rat")
    assert (late[0], "p53 waits for no answer" in late[2]) == (2, True)


def test_a_run_directory_without_a_durable_run_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No such folder, a folder with no database, no run named at all: exit 2, saying why."""
    for argv, said in (
        ([str(tmp_path / "nowhere")], "there is no run directory"),
        ([str(tmp_path)], "holds no durable run"),
        ([], "name the run"),
    ):
        status, _, err = answer_cli(argv, capsys)
        assert (status, said in err) == (2, True), err


@pytest.mark.anyio
async def test_without_an_answer_wait_the_question_ends_the_task(tmp_path: Path) -> None:
    """answer_wait=0: the task ends missing_context / input_required at once, the
    question in its report; nothing waits in the database."""
    child = ChildRef(target="fakes.children:plodder")
    policy = RecoveryPolicy(max_retries=2, answer_wait=0)
    with anyio.fail_after(30):
        async with DurableExecutor.embedded(tmp_path, run_id="r0") as executor:
            [outcome] = await Supervisor(child, executor=executor, policy=policy).run(
                [Task(prompt="ask", subject="asks")]
            )
            left = await executor.questions()
    failure = outcome.result.failure
    assert failure is not None
    assert (failure.category, failure.error_type) == ("missing_context", "input_required")
    assert failure.question == "Which organism?"
    assert (len(outcome.attempts), left) == (1, [])


# -- the process killed while the question waits ---------------------------------------

RUN = """
import json, sys, anyio
from lyra import ChildRef, Supervisor, Task
from lyra.durable import DurableExecutor

async def main() -> None:
    where, log, result = sys.argv[1], sys.argv[2], sys.argv[3]
    tasks = [Task(prompt="ask", subject="asks"), Task(prompt="1x0.01", subject="plods")]
    if where.startswith("postgresql"):
        executor = DurableExecutor.queue(where, run_id="qrun", event_log=log)
    else:
        executor = DurableExecutor.embedded(where, run_id="erun", event_log=log)
    async with executor:
        supervisor = Supervisor(ChildRef(target="fakes.children:plodder"), executor=executor)
        outcomes = await supervisor.run(tasks, max_concurrency=2)
    with open(result, "w") as out:
        json.dump([[o.result.output, [a.strategy for a in o.attempts]] for o in outcomes], out)

anyio.run(main)
"""


def started(log: Path) -> Counter[tuple[str, int]]:
    """How often each (task, attempt) started."""
    return Counter((task, attempt) for task, attempt, _ in attempts(log))


@pytest.mark.slow
def test_a_question_survives_a_killed_run_and_its_answer_resumes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Embedded: SIGKILL while the question waits; the command the run printed answers
    it (kept in the database, no process of the run alive); the resumed run's task
    takes the answer at once; no finished attempt or task runs again."""
    script, folder = tmp_path / "run.py", tmp_path / "run"
    events, result, invoked = tmp_path / "events.jsonl", tmp_path / "result.json", tmp_path / "inv"
    script.write_text(RUN)
    env = {**env_with(invoked), "PYTHONPATH": str(TESTS)}
    argv = [sys.executable, str(script), str(folder), str(events), str(result)]
    first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(
            lambda: (
                logged(events, "question_waiting")
                and any(e["subject"] == "plods" for e in logged(events, "delegation_completed"))
            ),
            timeout=60,
            what="the question to wait and the other task to finish",
        )
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    [waiting] = logged(events, "question_waiting")
    status, out, _ = answer_cli(the_command(waiting, "yeast"), capsys)
    assert (status, out) == (0, "answered asks\n")
    status, out, err = answer_cli([str(folder), "--json"], capsys)  # answered, not yet taken
    assert (status, "1 answered, waiting for their run" in err) == (1, True)
    assert [(q["task"], q["answered"]) for q in json.loads(out)] == [("asks", True)]

    second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert json.loads(result.read_text()) == [
        ["studied yeast", ["initial", "answer"]],
        ["plodded 1 steps", ["initial"]],
    ]
    assert started(invoked) == {("asks", 1): 1, ("asks", 2): 1, ("plods", 1): 1}
    [(_, _, pid)] = [row for row in attempts(invoked) if row[:2] == ("asks", 2)]
    assert pid != first.pid  # the answered attempt ran in the resumed run


def test_a_database_no_run_has_used_is_a_usage_error(
    database_url: str,  # noqa: F811 - the fixture
    capsys: pytest.CaptureFixture[str],
) -> None:
    """lyra answer --database-url of a database without lyra's runs (a wrong URL) says
    so in one line, exit 2, where it printed a traceback of a missing table."""
    status, out, err = answer_cli(["--database-url", database_url, "--run-id", "qrun"], capsys)
    assert (status, out) == (2, "")
    assert "holds no durable run" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_a_question_survives_a_killed_worker_and_another_worker_resumes_it(
    tmp_path: Path,
    database_url: str,  # noqa: F811 - the fixture
    capsys: pytest.CaptureFixture[str],
) -> None:
    """PostgreSQL queue: SIGKILL the worker whose task's question waits; the question
    still waits (listed); the command the supervisor printed answers it; the other
    worker takes the task back, and its next attempt gets the answer at once; no
    finished attempt runs again."""
    script = tmp_path / "run.py"
    events, result, invoked = tmp_path / "events.jsonl", tmp_path / "result.json", tmp_path / "inv"
    script.write_text(RUN)
    env = {**env_with(invoked), "PYTHONPATH": str(TESTS)}
    with (tmp_path / "workers.err").open("w") as stderr:  # each process holds its own copy
        workers = [
            subprocess.Popen(
                lyra_cmd("worker", "--database-url", database_url),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
            for _ in range(2)
        ]
    supervisor = subprocess.Popen(  # it waits for the workers, however slow they start
        [sys.executable, str(script), database_url, str(events), str(result)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: logged(events, "question_waiting"), timeout=60, what="the question")
        [holder] = [w for w in workers if (("asks", 1, w.pid)) in attempts(invoked)]
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        listing = ["--database-url", database_url, "--run-id", "qrun", "--json"]
        status, out, _ = answer_cli(listing, capsys)
        assert status == 0
        status, _, err = answer_cli(["--database-url", database_url, "--run-id", "nope"], capsys)
        assert (status, "no run nope in --run-id nope" in err) == (2, True), err
        assert [(q["task"], q["answered"]) for q in json.loads(out)] == [("asks", False)]
        [waiting] = logged(events, "question_waiting")
        assert waiting["answer_with"] == (
            f"lyra answer --database-url {database_url} --run-id qrun asks 'ANSWER'"
        )
        status, out, _ = answer_cli(the_command(waiting, "yeast"), capsys)
        assert (status, out) == (0, "answered asks\n")
        _, errors = supervisor.communicate(timeout=120)
    finally:
        for process in (*workers, supervisor):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)
    assert supervisor.returncode == 0, errors
    assert json.loads(result.read_text()) == [
        ["studied yeast", ["initial", "answer"]],
        ["plodded 1 steps", ["initial"]],
    ]
    assert started(invoked) == {("asks", 1): 1, ("asks", 2): 1, ("plods", 1): 1}
    [other] = [w for w in workers if w is not holder]
    assert ("asks", 2, other.pid) in attempts(invoked)
