"""The supervisor across many children: quorum, graceful failure, the answer that
always exists, health, cancellation, and a chaos run of 1,000 proteins."""

from __future__ import annotations

import asyncio
import random
import resource
from pathlib import Path
from typing import Any

import anyio
import pytest

from fakes.messages_api import MessagesAPI, error, message
from lyra import Budget, Limits
from lyra.errors import TransientError
from lyra.proteins import AnalysisOutput, OfflineSource, analyze
from lyra.proteins._synthetic import SyntheticSource
from lyra.recovery import record_waits
from lyra.supervisor import (
    LAST_RESORT,
    AnswerFacts,
    ChildOutcome,
    ModelAnswerWriter,
    QuorumPolicy,
    TemplateAnswerWriter,
    decide,
    final_answer,
)

pytestmark = pytest.mark.anyio


def outcome(subject: str, kind: str, completeness: float = 1.0, retryable: bool = False) -> Any:
    return ChildOutcome(
        subject=subject, outcome=kind, completeness=completeness, retryable=retryable
    )  # type: ignore[arg-type]


# -- quorum ---------------------------------------------------------------------------

QUORUM_CASES = [
    (
        "all-succeed",
        [outcome("A", "completed"), outcome("B", "completed")],
        QuorumPolicy(),
        False,
        "proceed",
        True,
        1.0,
    ),
    (
        "one-missing",
        [outcome("A", "completed"), outcome("B", "failed")],
        QuorumPolicy(),
        False,
        "proceed_degraded",
        True,
        0.5,
    ),
    (
        "complete-enough-partial",
        [outcome("A", "completed"), outcome("B", "partial", 0.7)],
        QuorumPolicy(),
        False,
        "proceed_degraded",
        True,
        0.9,
    ),
    (
        "too-incomplete-partial",
        [outcome("A", "completed"), outcome("B", "partial", 0.3)],
        QuorumPolicy(),
        False,
        "proceed_degraded",
        True,
        0.5,
    ),
    (
        "nine-of-thirty",
        [outcome(f"P{n}", "completed" if n < 9 else "failed") for n in range(30)],
        QuorumPolicy(),
        False,
        "proceed_degraded",
        True,
        0.3,
    ),
    (
        "below-min-success",
        [outcome("A", "completed"), outcome("B", "failed")],
        QuorumPolicy(min_success=2),
        False,
        "abort",
        False,
        0.0,
    ),
    (
        "critical-failed-retryable",
        [outcome("A", "completed"), outcome("B", "failed", retryable=True)],
        QuorumPolicy(critical=frozenset({"B"})),
        True,
        "retry_critical",
        False,
        0.0,
    ),
    (
        "critical-failed-no-retry-left",
        [outcome("A", "completed"), outcome("B", "failed", retryable=True)],
        QuorumPolicy(critical=frozenset({"B"})),
        False,
        "abort",
        False,
        0.0,
    ),
    (
        "critical-failed-not-retryable",
        [outcome("A", "completed"), outcome("B", "failed")],
        QuorumPolicy(critical=frozenset({"B"})),
        True,
        "abort",
        False,
        0.0,
    ),
]


@pytest.mark.parametrize(
    ("children", "policy", "retries_left", "action", "met", "confidence"),
    [case[1:] for case in QUORUM_CASES],
    ids=[case[0] for case in QUORUM_CASES],
)
def test_quorum_outcomes(
    children: list[Any],
    policy: QuorumPolicy,
    retries_left: bool,
    action: str,
    met: bool,
    confidence: float,
) -> None:
    """Each quorum outcome: the action, whether it is met, and the confidence."""
    decision = decide(children, policy, retries_left=retries_left)
    assert (decision.action, decision.met, decision.confidence) == (action, met, confidence)
    assert decision.reason


@pytest.mark.parametrize(
    ("children", "reason"),
    [
        (["completed", "failed"], "1 of 2 usable, 0 of them partial; 1 not usable (1 failed)"),
        (["completed", "partial 0.7"], "2 of 2 usable, 1 of them partial"),
        (
            ["completed", "failed", "partial 0.3"],
            "1 of 3 usable, 0 of them partial; 2 not usable (1 failed, 1 partial below 50% "
            "complete)",
        ),
    ],
)
def test_the_degraded_reason_tells_failures_from_thin_partials(
    children: list[str], reason: str
) -> None:
    """A partial result too incomplete to count is said to be one, not counted among the
    partial ones nor called a failure (the summary said "0 of them partial" beside "1
    partial" in the final line)."""
    outcomes = [
        outcome(f"P{n}", kind.split()[0], *[float(x) for x in kind.split()[1:]])
        for n, kind in enumerate(children)
    ]
    decision = decide(outcomes, QuorumPolicy(partial_threshold=0.5))
    assert decision.reason == reason


async def test_quorum_lands_in_the_output() -> None:
    """analyze puts the decision, its action and reason in the final output."""
    output = await analyze(["P04637", "XXXXX"], timeout=5, quorum=QuorumPolicy(min_success=2))
    assert output.quorum is not None
    assert (output.quorum.action, output.quorum.met) == ("abort", False)
    assert output.answer is not None
    assert output.answer.startswith("No reliable answer: 1 of 2 succeeded")


class FlakyOnce(OfflineSource):
    """A source whose first fetch of one protein hits a transient outage."""

    def __init__(self, flaky: str) -> None:
        self.flaky, self.calls = flaky, 0

    def ping(self) -> bool:
        return True

    def fetch(self, protein_id: str) -> Any:
        if protein_id == self.flaky:
            self.calls += 1
            if self.calls == 1:
                raise TransientError("503 Service Unavailable", status=503)
        return super().fetch(protein_id)


async def test_failed_critical_child_is_retried_first() -> None:
    """A critical protein that failed retryably is run again before deciding; it recovers."""
    source = FlakyOnce("P04637")
    output = await analyze(
        ["P04637", "Q8I3H7"],
        source=source,
        timeout=5,
        quorum=QuorumPolicy(critical=frozenset({"P04637"})),
    )
    assert source.calls == 2
    assert output.summary.successful == 2
    assert output.quorum is not None
    assert output.quorum.action == "proceed"


async def test_comparison_sets_units_side_by_side_and_names_the_missing() -> None:
    """Proteins are set side by side unit by unit, each with its model and source; one
    known only by whole-model figures is named with them, not compared; nothing is
    'best'; a failed one is left out and named; v4 beside v6 is said."""
    output = await analyze(["P04637", "Q8I3H7", "P38398", "XXXXX"], timeout=5)
    comparison = output.comparison
    assert comparison is not None
    assert comparison.compared == ["P04637", "Q8I3H7", "P38398"]
    assert comparison.left_out == ["XXXXX"]
    lines = comparison.lines()
    assert "best" not in " ".join(lines).lower()
    assert lines[1] == (
        "P04637 (AF-P04637-F1 v6; facts_secondary_sources.json: a lower-trust secondary "
        "source, figures quoted elsewhere): whole-model figures only (mean pLDDT 75.06; "
        "59.8% of residues at pLDDT ≥ 70): no unit to compare"
    )
    assert lines[3].startswith(
        "P38398 (AF-P38398-F1 v4; AF-P38398-F1-model_v4.pdb): unit 1 7–101 (95 residues, "
        "mean pLDDT 85.90, confident; not checked (no PAE)); unit 2 1392–1419, 1649–1859 (239 "
        "residues, mean pLDDT 91.28, very high;"
    )
    assert lines[4] == (
        "The models are of different AlphaFold DB versions (v4: P38398; v6: P04637; version "
        "not in this data: Q8I3H7): each figure is its own model's, and a later release may "
        "differ."
    )


async def test_a_comparison_with_one_known_version_claims_no_difference() -> None:
    """v6 beside a model whose version the data do not hold: that the versions differ is
    not known, so it is not said (it was: "of different AlphaFold DB versions"); P69905's
    v6 is only its collector's label, and the line keeps the briefs' hedge (it said "v6")."""
    output = await analyze(["P69905", "Q8I3H7"], timeout=5)
    assert output.comparison is not None
    said = output.comparison.lines()[-1]
    assert said.startswith(
        "The models are not all of a known version (labelled v6 by its collector (not stated "
        "by its source): P69905; version not in this data: Q8I3H7)"
    )


async def test_the_versions_line_keeps_a_labelled_version_apart() -> None:
    """Versions stated by a source and versions only a collector labelled are grouped
    apart, as the briefs word them (the line said "v6: P00533, P04637, P69905")."""
    output = await analyze(["P38398", "P00533", "P04637", "P69905"], timeout=5)
    assert output.comparison is not None
    assert output.comparison.versions == (
        "The models are of different AlphaFold DB versions (v4: P38398; v6: P04637; labelled "
        "v6 by its collector (not stated by its source): P00533, P69905): each figure is its "
        "own model's, and a later release may differ."
    )


async def test_no_protein_without_an_ordered_unit_is_compared() -> None:
    """'A 16-residue peptide with no ordered unit is crowned over BRCA1': MOTS-c is named
    with its longest confident stretch and not compared; BRCA1 keeps its units."""
    output = await analyze(["A0A0C5B5G6", "P38398"], timeout=5)
    assert output.comparison is not None
    [peptide, brca1] = output.comparison.proteins
    assert peptide.not_compared == (
        "no ordered unit; its longest confident stretch is 6–15 (10 residues, mean pLDDT "
        "75.38): not compared"
    )
    assert peptide.units == []
    assert len(brca1.units) == 2
    assert "best" not in output.text().lower()


async def test_a_comparison_names_where_its_domain_boundaries_come_from() -> None:
    """Domain figures name the UniProt file their boundaries come from, and an isoform's
    that they were mapped from the canonical sequence (the line named the model alone)."""
    output = await analyze(["P05067-2", "P05067"], timeout=5)
    assert output.comparison is not None
    isoform, canonical = output.comparison.lines()[1:3]
    assert isoform.endswith(
        "UniProt domains (uniprot_P05067_flatfile_2025.txt, mapped from the canonical "
        "P05067) E1 28–189 95.63 (very high)"
    )
    assert "UniProt domains (uniprot_P05067_flatfile_2025.txt) E1 28–189 88.18" in canonical


async def test_comparison_is_skipped_when_the_quorum_fails() -> None:
    """No comparison is made from results the quorum rejected."""
    output = await analyze(
        ["P04637", "Q8I3H7", "XXXXX"], timeout=5, quorum=QuorumPolicy(min_success=3)
    )
    assert output.comparison is not None
    assert output.comparison.skipped_reason == "the quorum was not met"


# -- the answer that always exists ------------------------------------------------------


class Broken:
    async def write(self, facts: AnswerFacts) -> str:
        raise ConnectionError("model unreachable")


async def test_a_broken_writer_falls_back_to_the_template() -> None:
    """When the configured writer raises, the template writes the answer."""
    output = await analyze(["P04637"], timeout=5, answer_writer=Broken())
    assert output.answer is not None
    first, second = output.answer.splitlines()[:2]
    assert first == "(Written from a template; Broken failed: ConnectionError: model unreachable.)"
    assert second == "Found (1):"


async def test_last_resort_when_every_writer_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """If the template fails too, the fixed message for the error type is the answer."""

    async def broken_template(self: Any, facts: AnswerFacts) -> str:
        raise RuntimeError("template missing")

    monkeypatch.setattr(TemplateAnswerWriter, "write", broken_template)
    output = await analyze(["P04637"], timeout=5, answer_writer=Broken())
    assert output.answer == LAST_RESORT["unknown"]


@pytest.mark.parametrize("error_type", ["timeout", "connection", "rate_limit", "auth"])
async def test_last_resort_message_follows_the_error_type(
    error_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last-resort message is chosen by the type of the run's first error."""
    from lyra.supervisor import ErrorContext

    async def broken_template(self: Any, facts: AnswerFacts) -> str:
        raise RuntimeError("template missing")

    monkeypatch.setattr(TemplateAnswerWriter, "write", broken_template)
    context = ErrorContext(
        failed_step="fan_out",
        error_type=error_type,
        message="m",
        user_hint="h",
        available_data=[],
        unavailable_data=[],
        can_retry=False,
        retry_suggestion=None,
    )
    answer = await final_answer(AnswerFacts(question="q", errors=[context]), Broken())
    assert answer == LAST_RESORT[error_type]  # type: ignore[index]


async def test_model_writes_the_answer_when_configured() -> None:
    """With a model writer, the answer is the model's text, from the facts it was sent."""
    import anthropic

    with MessagesAPI([message("P04637 looks reliable enough (75.05).")]) as api:
        async with anthropic.AsyncAnthropic(base_url=api.url, api_key="k", max_retries=0) as client:
            writer = ModelAnswerWriter(client=client)
            output = await analyze(["P04637"], timeout=5, answer_writer=writer)
    assert output.answer == "P04637 looks reliable enough (75.05)."
    sent = api.requests[0]["messages"][0]["content"]
    assert "Cellular tumor antigen p53" in sent


async def test_model_failure_falls_back_to_the_template() -> None:
    """A model error (500) while writing the answer falls back to the template."""
    import anthropic

    with MessagesAPI([error(500, "api_error", "boom")]) as api:
        async with anthropic.AsyncAnthropic(base_url=api.url, api_key="k", max_retries=0) as client:
            output = await analyze(
                ["P04637"], timeout=5, answer_writer=ModelAnswerWriter(client=client)
            )
    assert output.answer is not None
    first, second = output.answer.splitlines()[:2]
    assert first.startswith("(Written from a template; ModelAnswerWriter failed: ")
    assert second == "Found (1):"


async def test_a_failed_fan_out_still_gives_every_protein_and_an_answer() -> None:
    """When the executor itself breaks, every protein is reported failed and the answer
    names the failed step, without raising."""

    class BrokenExecutor:
        async def run(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("executor lost its workers")

    output = await analyze(["P04637", "Q8I3H7"], timeout=5, executor=BrokenExecutor())
    assert output.summary.failed == 2
    assert output.errors[0].failed_step == "fan_out"
    assert output.errors[0].critical
    assert output.answer is not None
    assert "fan_out: RuntimeError: executor lost its workers" in output.answer


class DownSource(OfflineSource):
    """A source whose health check fails although fetching works."""

    name = "mirror"

    def ping(self) -> bool:
        raise ConnectionRefusedError("mirror.example unreachable")


async def test_degraded_service_is_named_up_front() -> None:
    """A dependency that fails its health probe is the answer's first line."""
    output = await analyze(["P04637"], source=DownSource(), timeout=5)
    assert output.health[0].status == "down"
    assert output.answer is not None
    assert output.answer.splitlines()[0].startswith("⚠ mirror data source is down")


# -- cancellation and chaos -------------------------------------------------------------


def other_tasks(before: set[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    """Tasks still alive that were not there before (the test's own excepted)."""
    return [t for t in asyncio.all_tasks() - before if t is not asyncio.current_task()]


async def test_cancelling_a_run_leaves_only_whole_files(tmp_path: Path) -> None:
    """Cancelling a run mid-way stops every child; the run directory has no half files."""
    before = asyncio.all_tasks()
    with anyio.move_on_after(0.5):
        await analyze(
            ["P04637", "Q8I3H7", "P69905", "P38398"],
            timeout=30,
            run_dir=tmp_path,
            faults=["Q8I3H7:hang", "P69905:hang", "P38398:hang"],
            concurrency=4,
        )
    assert [p.name for p in (tmp_path / "reports").iterdir()] == ["P04637.txt"]
    assert not list(tmp_path.rglob("*.tmp"))
    assert other_tasks(before) == []


FAULT_KINDS = [
    "hang",
    "slow:0.01",
    "tool_error",
    "structure_error",
    "rate_limit:3",
    "malformed",
    "not_found",
    "hang@1",
    "tool_error@1",
    "structure_error@1",
]


@pytest.mark.slow
async def test_chaos_1000_proteins() -> None:
    """1,000 synthetic proteins with random faults at concurrency 50: each appears once,
    the summary adds up, nothing escapes, no task is left, memory stays bounded."""
    rng = random.Random(19)
    ids = [f"Q{n:05d}" for n in range(1000)]
    faults = [f"{pid}:{rng.choice(FAULT_KINDS)}" for pid in ids if rng.random() < 0.4]
    before = asyncio.all_tasks()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with record_waits():
        output = await analyze(
            ids,
            source=SyntheticSource(seed=7),
            timeout=0.3,
            retries=1,
            concurrency=50,
            faults=faults,
        )
    growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - peak_before
    assert isinstance(output, AnalysisOutput)
    seen = [
        e.protein_id
        for e in (*output.completed_analyses, *output.partial_analyses, *output.failed_analyses)
    ]
    assert sorted(seen) == ids
    s = output.summary
    assert (s.total_requested, s.successful + s.partial + s.failed) == (1000, 1000)
    assert s.failed > 0
    assert s.partial > 0
    assert s.successful > 500
    assert other_tasks(before) == []
    assert growth < 300 * 2**20, f"peak RSS grew by {growth / 2**20:.0f} MiB"


async def test_model_service_is_probed_when_a_key_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """With an API key, an unreachable model service is probed, found down and named first."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")  # base URL: a refused local port
    output = await analyze(["P04637"], timeout=5, answer_writer=TemplateAnswerWriter())
    model = next(h for h in output.health if h.name == "model service")
    assert model.status == "down"
    assert output.answer is not None
    assert output.answer.startswith("⚠ model service is down")


async def test_a_hanging_writer_is_cut_off_and_the_template_answers() -> None:
    """A writer slower than the answer timeout gives way to the template."""

    class Hangs:
        async def write(self, facts: AnswerFacts) -> str:
            await anyio.sleep_forever()
            return "never"

    answer = await final_answer(
        AnswerFacts(question="q", found=["P04637: ok"]), Hangs(), timeout=0.1
    )
    first, second = answer.splitlines()[:2]
    assert "TimeoutError" in first
    assert second == "Found (1):"


async def test_comparison_names_no_drug_target() -> None:
    """'A 13-protein run crowns P69905 on figures from the lower-trust secondary file':
    no protein is crowned, and P69905's figures say where they come from."""
    output = await analyze(["P04637", "P38398", "P69905"], timeout=5, plan="structure")
    assert output.comparison is not None
    dumped = output.comparison.model_dump()
    assert "most_promising_target" not in dumped
    assert "best_predicted_structure" not in dumped
    [globin] = [p for p in output.comparison.proteins if p.protein_id == "P69905"]
    assert globin.source.startswith("facts_secondary_sources.json: a lower-trust secondary")


# -- on_outcome ---------------------------------------------------------------------


async def _echo(prompt: str, ctx: Any) -> str:
    return f"done: {prompt}"


def _tasks(n: int) -> list[Any]:
    from lyra import Task

    return [Task(prompt=f"task {i}", subject=f"t{i}") for i in range(n)]


async def test_a_one_argument_callback_gets_every_outcome() -> None:
    """on_outcome(outcome) is called once per task with that task's outcome."""
    from lyra import Supervisor

    seen: list[str] = []
    await Supervisor(_echo).run(_tasks(3), on_outcome=lambda o: seen.append(o.result.output))
    assert sorted(seen) == ["done: task 0", "done: task 1", "done: task 2"]


async def test_an_async_callback_is_awaited_before_run_returns() -> None:
    """An async on_outcome(task, outcome) has finished for every task when run returns."""
    from lyra import Supervisor

    finished: list[str] = []

    async def slow_callback(task: Any, outcome: Any) -> None:
        await anyio.sleep(0.05)
        finished.append(task.subject)

    await Supervisor(_echo).run(_tasks(3), on_outcome=slow_callback, keep=False)
    assert sorted(finished) == ["t0", "t1", "t2"]


@pytest.mark.parametrize("bad", ["raises", "not a task"])
@pytest.mark.parametrize("with_callback", [True, False], ids=["with callback", "without"])
async def test_a_stream_that_breaks_lets_the_running_tasks_finish_then_raises(
    bad: str, with_callback: bool
) -> None:
    """keep=False over a generator that raises, or yields something not a Task: the
    tasks taken before it finish and reach on_outcome, then its error is raised as it
    is (not wrapped in a group)."""
    from lyra import Supervisor, Task

    async def slow(prompt: str, ctx: Any) -> str:
        await anyio.sleep(0.1)
        return prompt

    def stream() -> Any:
        yield from (Task(prompt=f"t{i}") for i in range(3))
        if bad == "raises":
            raise ValueError("the source broke")
        yield {"prompt": "not a task"}

    seen: list[str] = []
    expected = (ValueError, "the source broke") if bad == "raises" else (TypeError, "lyra.Task")
    with pytest.raises(expected[0], match=expected[1]):
        await Supervisor(slow).run(
            stream(),
            keep=False,
            on_outcome=(lambda o: seen.append(o.result.output)) if with_callback else None,
        )
    assert sorted(seen) == (["t0", "t1", "t2"] if with_callback else [])


@pytest.mark.parametrize(
    "callback",
    [lambda: None, lambda a, b, c: None, "not callable"],
    ids=["no argument", "three arguments", "not callable"],
)
async def test_a_callback_of_the_wrong_shape_is_refused_before_any_task_runs(
    callback: Any,
) -> None:
    """A callback that can take neither (outcome) nor (task, outcome) is a TypeError at
    once, and no child runs."""
    from lyra import Supervisor

    ran: list[str] = []

    async def child(prompt: str, ctx: Any) -> str:
        ran.append(prompt)
        return "x"

    with pytest.raises(TypeError, match="on_outcome"):
        await Supervisor(child).run(_tasks(2), on_outcome=callback)
    assert ran == []


async def test_an_async_callback_that_raises_is_logged_and_loses_no_outcome() -> None:
    """An async callback's exception becomes one on_outcome_failed event per task; every
    outcome is still returned."""
    from structlog.testing import capture_logs

    from lyra import Supervisor

    async def broken(outcome: Any) -> None:
        raise RuntimeError("callback bug")

    with capture_logs() as logs:
        outcomes = await Supervisor(_echo).run(_tasks(2), on_outcome=broken)
    assert [o.result.ok for o in outcomes] == [True, True]
    failed = [e for e in logs if e["event"] == "on_outcome_failed"]
    assert sorted(e["subject"] for e in failed) == ["t0", "t1"]
    assert all("callback bug" in e["error"] for e in failed)


@pytest.mark.parametrize("shape", ["sync", "async"])
async def test_a_callback_meeting_a_cancellation_nobody_made_loses_no_outcome(shape: str) -> None:
    """A callback that meets a future someone else cancelled is its own bug, logged as
    any other: every task keeps one outcome, delivered once, and the run returns. (A
    sync one's was passed on, so the task had three outcomes and the caller a
    CancelledError; an async one's cancelled the task group the pool ran in.)"""
    from structlog.testing import capture_logs

    from lyra import Supervisor, Task

    delivered: list[str] = []

    def cancelled_elsewhere() -> None:
        shared = asyncio.get_running_loop().create_future()
        shared.cancel()
        shared.result()

    def sync(task: Any, outcome: Any) -> None:
        delivered.append(task.subject)
        if task.subject == "t0":
            cancelled_elsewhere()

    async def slow_echo(prompt: str, ctx: Any) -> str:
        await asyncio.sleep(0.05 * int(prompt.removeprefix("task ")))
        return prompt

    async def later(task: Any, outcome: Any) -> None:
        if task.subject == "t0":
            cancelled_elsewhere()
        await asyncio.sleep(0.02)
        delivered.append(task.subject)

    tasks = [Task(prompt=f"task {n}", subject=f"t{n}") for n in range(4)]
    callback = sync if shape == "sync" else later
    with capture_logs() as logs:
        outcomes = await Supervisor(slow_echo, timeout=5).run(
            tasks, max_concurrency=2, on_outcome=callback
        )
    assert [o.result.output for o in outcomes] == [f"task {n}" for n in range(4)]
    expected = ["t0", "t1", "t2", "t3"] if shape == "sync" else ["t1", "t2", "t3"]
    assert sorted(delivered) == expected
    failed = [e["subject"] for e in logs if e["event"] == "on_outcome_failed"]
    assert failed == ["t0"]


async def test_a_task_whose_handling_breaks_is_failed_in_the_log_as_in_the_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """lyra's own error while handling one task fails that task only, and the log says
    so as for any failure (``task_internal_error``, then its ``delegation_failed``), so
    that ``lyra logs stats`` counts the tasks the output counts."""
    from structlog.testing import capture_logs

    from lyra import Supervisor
    from lyra.supervisor import Job

    real = Job.run

    async def broken(self: Job, task: Any, **kwargs: Any) -> Any:
        if task.subject == "t1":
            raise RuntimeError("bug in lyra")
        return await real(self, task, **kwargs)

    monkeypatch.setattr(Job, "run", broken)
    with capture_logs() as logs:
        outcomes = await Supervisor(_echo).run(_tasks(3))
    assert [o.result.ok for o in outcomes] == [True, False, True]
    about_t1 = [(e["event"], e.get("category")) for e in logs if e.get("subject") == "t1"]
    assert about_t1 == [("task_internal_error", None), ("delegation_failed", "tool_error")]
    ended = [e["subject"] for e in logs if e["event"].startswith("delegation_")]
    assert sorted(s for s in ended if s) == ["t0", "t0", "t1", "t2", "t2"]  # started+ended


def test_a_supervisors_limits_change_only_where_a_call_says_so() -> None:
    """A call's limits are the supervisor's with what the call changes, checked as any
    limits are; a call that changes nothing shares the supervisor's own."""
    limits = Limits(timeout=60, idle_timeout=5, budget=Budget(max_turns=3), max_repeats=4)
    assert limits.but() is limits
    assert limits.but(timeout=60.0, idle_timeout=None) is limits
    changed = limits.but(timeout=30, budget=Budget(max_turns=1))
    assert changed == Limits(
        timeout=30.0, idle_timeout=5, budget=Budget(max_turns=1), max_repeats=4
    )
    assert isinstance(changed.timeout, float)
    assert limits.but(max_repeats=2).max_repeats == 2
    # a value equal to the one held is no change, whatever its type (True == 1)
    assert limits.but(timeout=60, max_repeats=2.0 * 2) is limits
    assert limits.but(timeout=30, idle_timeout=5.0).idle_timeout == 5
    with pytest.raises(ValueError, match="timeout must be a positive"):
        limits.but(timeout=-1)
    with pytest.raises(TypeError, match="idle_timeout must be a number"):
        limits.but(idle_timeout="5")  # type: ignore[arg-type]


@pytest.mark.parametrize("keep", [True, False])
async def test_a_stray_cancel_of_a_pool_worker_loses_no_outcome(keep: bool) -> None:
    """A child leaves a watchdog that later cancels "its" task -- the pool's worker, by
    then running another child. Nobody cancelled the run: the child it hits fails as
    one a stranger cancelled (retryable), and every task still gets its outcome (the
    pool stopped, and returned None for the tasks it never ran)."""
    from lyra import Supervisor, Task

    async def child(prompt: str, ctx: Any) -> str:
        if prompt == "0":  # a stale watchdog, left behind by a child that finished
            asyncio.get_running_loop().call_later(0.05, asyncio.current_task().cancel)  # type: ignore[union-attr]
        await asyncio.sleep(0.02)
        return f"ok {prompt}"

    seen: list[str] = []
    outcomes = await Supervisor(child, timeout=5).run(
        [Task(prompt=str(i), subject=str(i)) for i in range(10)],
        max_concurrency=2,
        keep=keep,
        on_outcome=lambda outcome: seen.append(outcome.result.subject or ""),
    )
    assert sorted(seen, key=int) == [str(i) for i in range(10)]
    if keep:
        assert all(outcome is not None for outcome in outcomes)
        failed = [o.result.failure for o in outcomes if not o.result.ok]
        assert len(failed) == 1
        assert (failed[0].category, failed[0].retryable) == ("tool_error", True)


async def test_a_stray_cancel_a_child_caught_costs_its_pool_no_result() -> None:
    """A stale watchdog cancels the pool's worker while the child it runs then catches
    the cancellation and returns: nobody cancelled the run, so that child's result
    stands (a caller's own cancellation the child caught is passed on instead)."""
    from lyra import Supervisor, Task

    async def child(prompt: str, ctx: Any) -> str:
        if prompt == "0":  # a stale watchdog, left behind by a child that finished
            asyncio.get_running_loop().call_later(0.05, asyncio.current_task().cancel)  # type: ignore[union-attr]
            return "ok 0"
        try:
            await asyncio.sleep(0.1)
        except asyncio.CancelledError:
            return f"ok {prompt}, though cancelled"
        return f"ok {prompt}"

    outcomes = await Supervisor(child, timeout=5).run(
        [Task(prompt=str(i)) for i in range(2)], max_concurrency=1
    )
    assert [o.result.output for o in outcomes] == ["ok 0", "ok 1, though cancelled"]


def test_a_cancellation_met_between_attempts_is_no_internal_error() -> None:
    """A stray cancellation that reaches a task outside its child's attempt (waiting for
    its place, or between attempts) fails that task as cancelled from outside, to run
    again: not as lyra's internal error."""
    from lyra import Task
    from lyra.supervisor._executor import lost_outcome

    failure = lost_outcome(Task(prompt="x"), asyncio.CancelledError()).result.failure
    assert failure is not None
    assert failure.message.startswith("Cancelled by code outside lyra")
    assert failure.retryable
    internal = lost_outcome(Task(prompt="x"), KeyError("k")).result.failure
    assert internal is not None
    assert internal.message.startswith("Internal error in lyra")
    assert not internal.retryable


async def test_a_pool_that_stopped_without_a_cancellation_still_gives_every_item() -> None:
    """Were a stray cancellation to end the pool's task group quietly (as anyio does with
    a worker's cancellation that no scope made), the items it never ran still get an
    outcome each: the map never hands back a hole."""
    from lyra.supervisor import _executor

    async def work(item: int) -> str:
        if item == 1:
            asyncio.current_task().cancel()  # type: ignore[union-attr]
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        return f"ran {item}"

    lost: list[int] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_executor, "_stray", lambda exc: False)  # (the stray cancel not caught)
        results = await _executor.LocalExecutor().map(
            work, list(range(6)), max_concurrency=2, on_error=lambda item, exc: f"lost {item}"
        )
        await _executor.LocalExecutor().each(
            work, range(6), max_concurrency=2, on_error=lambda item, exc: lost.append(item)
        )
    assert len(results) == 6
    assert all(result in (f"ran {i}", f"lost {i}") for i, result in enumerate(results))
    assert "lost 1" in results
    assert lost[-1:] == [5]  # the items never pulled: each one an outcome


async def test_a_childs_own_asyncio_timeout_in_a_pool_still_fires() -> None:
    """A child bounding a grandchild with its own asyncio.timeout (or a task group of its
    own cancelling its body) cancels the worker's task as a stray watchdog does: the
    pool leaves it to the child, whose timeout raises TimeoutError as asyncio promises,
    under Supervisor.run as under Supervisor.delegate."""
    from lyra import Supervisor, Task

    started: list[str] = []

    async def slow(prompt: str, ctx: Any) -> str:
        started.append(prompt)
        await asyncio.sleep(3)
        return "late"

    async def parent(prompt: str, ctx: Any) -> str:
        try:
            async with asyncio.timeout(0.1):
                await ctx.delegate("dig", child=slow)
        except TimeoutError:
            return "bounded"
        return "the timeout never fired"

    [outcome] = await Supervisor(parent, timeout=10).run([Task(prompt="x")])
    assert outcome.result.output == "bounded", outcome.result.report

    async def grouped(prompt: str, ctx: Any) -> str:
        async def fails() -> None:
            raise ValueError("a sibling failed")

        async def body() -> None:
            async with asyncio.TaskGroup() as group:
                group.create_task(fails())
                await ctx.delegate("first", child=slow)
                await ctx.delegate("second", child=slow)

        with pytest.raises(ExceptionGroup):
            await body()
        return "stopped"

    started.clear()
    [outcome] = await Supervisor(grouped, timeout=10).run([Task(prompt="x")])
    assert outcome.result.output == "stopped", outcome.result.report
    assert started == ["first"]


def test_a_task_takes_its_timeouts_as_numbers_only() -> None:
    """A task's timeout is a number of seconds, as ``delegate_task``'s is: a bool or a
    string is refused, where it was read as 1.0 or 5.0; an int, or JSON's, is a number."""
    import pydantic

    from lyra import Task

    for wrong in ({"timeout": True}, {"timeout": "5"}, {"idle_timeout": "2"}):
        with pytest.raises(pydantic.ValidationError, match="valid number"):
            Task(prompt="p", **wrong)
    assert Task(prompt="p", timeout=5).timeout == 5.0
    assert Task.model_validate_json('{"prompt": "p", "idle_timeout": 2}').idle_timeout == 2.0
