"""The protein workload through its public interfaces: PRD-001's eight cases,
every injected fault, and isolation between proteins."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from lyra import Limits, parse_report
from lyra.proteins import (
    AnalysisOutput,
    OfflineSource,
    analyze,
    analyze_sync,
)
from lyra.proteins import _pipeline as pipeline
from lyra.recovery import record_waits
from raw_proteins import RAW

pytestmark = pytest.mark.anyio

DOWNSTREAM = ["analyze_structure", "reason", "critique", "synthesize"]


@pytest.fixture(autouse=True)
def no_real_sleeps() -> Iterator[list[float]]:
    """Backoff waits are recorded, not slept."""
    with record_waits() as waits:
        yield waits


def counts(output: AnalysisOutput) -> tuple[int, int, int]:
    s = output.summary
    assert s.successful + s.partial + s.failed == s.total_requested
    return s.successful, s.partial, s.failed


def entry(output: AnalysisOutput, protein_id: str) -> Any:
    entries = [
        e
        for e in (*output.completed_analyses, *output.partial_analyses, *output.failed_analyses)
        if e.protein_id == protein_id
    ]
    assert len(entries) == 1, f"{protein_id} appears {len(entries)} times"
    return entries[0]


# -- PRD-001, test cases 1-8 -------------------------------------------------------


def test_prd1_single_valid_protein() -> None:
    """Test 1: one valid protein gives one completed analysis and nothing else."""
    output = analyze_sync(["Q8I3H7"], timeout=10)
    assert counts(output) == (1, 0, 0)
    assert "Q8I3H7" in output.completed_analyses[0].brief


def test_prd1_mixed_valid_and_invalid() -> None:
    """Test 2: an invalid ID fails at fetch with every later stage skipped; the others complete."""
    output = analyze_sync(["P04637", "TOTALLY_FAKE_ID", "Q8I3H7"], timeout=10)
    assert counts(output) == (2, 0, 1)
    failed = entry(output, "TOTALLY_FAKE_ID")
    assert failed.failed_at_stage == "fetch_protein"
    assert failed.tasks_skipped == DOWNSTREAM
    assert (failed.category, failed.retryable) == ("invalid_task", False)
    assert parse_report(failed.report).category == "invalid_task"


def test_prd1_all_invalid_returns_cleanly() -> None:
    """Test 3: all-invalid input returns a clean output and a readable message."""
    output = analyze_sync(["FAKE1", "FAKE2"], timeout=10)
    assert counts(output) == (0, 0, 2)
    text = output.text()
    assert "No reliable answer: 0 of 2 succeeded; at least 1 needed." in text
    assert "• FAKE1: invalid_task at fetch_protein" in text
    assert "0 of 2 completed, 0 partial, 2 failed." in text


class TimesOutFor:
    """A source whose HTTP call times out for one protein (as requests/httpx would)."""

    name = "flaky"

    def __init__(self, slow_id: str) -> None:
        self.slow_id = slow_id
        self.offline = OfflineSource()

    def fetch(self, protein_id: str) -> object:
        if protein_id == self.slow_id:
            raise httpx.ReadTimeout("AlphaFold took 60+ seconds")
        return self.offline.fetch(protein_id)


def test_prd1_api_timeout_costs_only_that_protein() -> None:
    """Test 4: a service timeout for one protein fails it; the others complete normally."""
    output = analyze_sync(["P04637", "Q8I3H7"], source=TimesOutFor("Q8I3H7"), timeout=10)
    assert counts(output) == (1, 0, 1)
    failed = entry(output, "Q8I3H7")
    assert (failed.failed_at_stage, failed.category, failed.retryable) == (
        "fetch_protein",
        "tool_error",
        True,
    )
    assert parse_report(failed.report).error_type == "timeout"


def test_prd1_mid_pipeline_failure_gives_partial_synthesis() -> None:
    """Test 6: a structure failure skips reason and critique; synthesis runs, marked partial."""
    output = analyze_sync(["P04637", "Q8I3H7"], faults=["Q8I3H7:structure_error"], timeout=10)
    assert counts(output) == (1, 1, 0)
    partial = entry(output, "Q8I3H7")
    statuses = {t.task_type: t.status for t in partial.tasks}
    assert statuses == {
        "fetch_protein": "success",
        "analyze_structure": "failed",
        "reason": "skipped",
        "critique": "skipped",
        "synthesize": "partial",
    }
    assert partial.tasks_skipped == ["reason", "critique"]
    assert "missing" in partial.brief.lower()
    assert (partial.category, partial.retryable) == ("partial", True)


@pytest.mark.parametrize(
    ("ids", "faults", "category"),
    [
        (["P05067", "P00221"], ["P00221:structure_error"], "partial"),
        (["P0DTC2"], [], "missing_context"),  # no model held: the stage fails softly
    ],
)
def test_a_structure_only_plan_whose_structure_fails_ends_partial_as_the_full_plan(
    ids: list[str], faults: list[str], category: str
) -> None:
    """With a structure-only plan, a failed structure stage ends the protein partial (its
    summary names the problem), as in the full plan: it was listed as failed, with
    category "partial" and a summary of partial 0."""
    output = analyze_sync(ids, faults=faults, plan="structure", timeout=10)
    assert (output.summary.partial, output.summary.failed) == (1, 0)
    assert output.failed_analyses == []
    [partial] = output.partial_analyses
    assert (partial.protein_id, partial.category) == (ids[-1], category)
    assert partial.failed_at_stage == "analyze_structure"
    assert partial.brief.startswith("# ")
    assert partial.error in partial.brief


def test_prd1_soft_failure_404_is_detected() -> None:
    """Test 7: a not-found answer (an error dict, not an exception) fails the fetch task."""
    output = analyze_sync(["XXXXX"], timeout=10)
    failed = entry(output, "XXXXX")
    fetch = failed.tasks[0]
    assert (fetch.task_type, fetch.status) == ("fetch_protein", "failed")
    assert "not found" in (fetch.error or "")
    assert [t.status for t in failed.tasks[1:]] == ["skipped"] * 4
    assert (failed.category, parse_report(failed.report).error_type) == (
        "invalid_task",
        "not_found",
    )


def test_prd1_structure_only_plan_counts_as_successful() -> None:
    """Test 8: a structure-only plan creates only fetch and structure tasks, and succeeds."""
    output = analyze_sync(["Q8I3H7"], plan="structure", timeout=10)
    assert counts(output) == (1, 0, 0)
    done = output.completed_analyses[0]
    assert [t.task_type for t in done.tasks] == ["fetch_protein", "analyze_structure"]
    assert "No analyses completed" not in done.brief
    assert "85.57" in done.brief


def test_skipped_stages_are_never_executed(monkeypatch: pytest.MonkeyPatch) -> None:
    """AC4/AC7: skipped stages do not run (a spy sees no call) and take 0.0 s."""
    calls: list[str] = []
    for name in ("analyze_structure", "reason", "critique", "synthesize"):
        real = getattr(pipeline, name)
        monkeypatch.setattr(pipeline, name, _spy(name, real, calls))
    output = analyze_sync(["XXXXX"], timeout=10)
    assert calls == []
    assert all(t.duration_seconds == 0.0 for t in output.failed_analyses[0].tasks[1:])


def _spy(name: str, real: Any, calls: list[str]) -> Any:
    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return real(*args, **kwargs)

    return spy


def test_executed_stages_are_timed() -> None:
    """AC7: every executed task records a positive duration."""
    output = analyze_sync(["P04637"], timeout=10)
    assert all(t.duration_seconds > 0 for t in output.completed_analyses[0].tasks)


def test_task_ids_follow_the_documented_pattern() -> None:
    """task_id is '{protein}_{task_type}_{index}'."""
    tasks = analyze_sync(["P04637"], timeout=10).completed_analyses[0].tasks
    assert [t.task_id for t in tasks] == [
        f"P04637_{stage}_{i}" for i, stage in enumerate(["fetch_protein", *DOWNSTREAM])
    ]


@pytest.mark.parametrize(
    "ids",
    [["P04637", "P04637"], ["p04637", " P04637 "], ["P04637", "", None, "'; DROP TABLE x;--"]],
)
def test_every_requested_protein_appears_exactly_once(ids: list[Any]) -> None:
    """Duplicates collapse to one entry; empty, None and injection strings each fail once."""
    output = analyze_sync(ids, timeout=10)
    assert output.summary.total_requested == len(
        {str(i).strip().upper() if i else str(i) for i in ids}
    )
    assert entry(output, "P04637").protein_id == "P04637"


# -- injected faults ------------------------------------------------------------------

FAULTS = [
    (
        "P04637:hang",
        0.3,
        "failed",
        "timeout",
        "analyze_structure",
        ["reason", "critique", "synthesize"],
    ),
    ("P04637:slow:0.2", 0.5, "failed", "timeout", None, None),
    ("P04637:tool_error", 5, "failed", "tool_error", "fetch_protein", DOWNSTREAM),
    (
        "P04637:structure_error",
        5,
        "partial",
        "partial",
        "analyze_structure",
        ["reason", "critique"],
    ),
    ("P04637:rate_limit:7", 5, "failed", "tool_error", "fetch_protein", DOWNSTREAM),
    ("P04637:malformed", 5, "failed", "tool_error", "fetch_protein", DOWNSTREAM),
    ("P04637:not_found", 5, "failed", "invalid_task", "fetch_protein", DOWNSTREAM),
]


@pytest.mark.parametrize(
    ("fault", "timeout", "outcome", "category", "stage", "skipped"),
    FAULTS,
    ids=[f[0].split(":", 1)[1] for f in FAULTS],
)
async def test_injected_fault_has_its_documented_outcome(
    fault: str,
    timeout: float,
    outcome: str,
    category: str,
    stage: str | None,
    skipped: list[str] | None,
) -> None:
    """Each fault fails (or partially fails) only its protein, in the documented way."""
    output = await analyze(["P04637", "Q8I3H7"], faults=[fault], timeout=timeout)
    assert entry(output, "Q8I3H7") in output.completed_analyses
    hit = entry(output, "P04637")
    bucket = output.partial_analyses if outcome == "partial" else output.failed_analyses
    assert hit in bucket
    assert hit.category == category
    if stage is not None:
        assert (hit.failed_at_stage, hit.tasks_skipped) == (stage, skipped)


async def test_rate_limit_fault_carries_its_retry_after() -> None:
    """A rate_limit:SECONDS fault reaches the report as a wait of at least that long."""
    output = await analyze(["P04637"], faults=["P04637:rate_limit:7"], timeout=5)
    report = parse_report(output.failed_analyses[0].report)
    assert report.error_type == "rate_limit"
    assert report.suggested_actions[0] == "Retry after at least 7s (the service asked for it)"


async def test_rate_limit_recovers_after_waiting(no_real_sleeps: list[float]) -> None:
    """With a retry, a one-time 429 recovers after waiting at least its retry-after."""
    output = await analyze(["P04637"], faults=["P04637:rate_limit:7@1"], retries=1, timeout=5)
    assert output.completed_analyses[0].attempts == 2
    assert no_real_sleeps
    assert no_real_sleeps[0] >= 7


async def test_malformed_answer_names_the_missing_field() -> None:
    """A source answer without a description fails with an error that says so."""
    output = await analyze(["P04637"], faults=["P04637:malformed"], timeout=5)
    assert "description" in output.failed_analyses[0].error


async def test_hang_once_is_recovered_with_a_doubled_timeout() -> None:
    """hang@1 with one retry: attempt 2 runs with twice the timeout, reusing the fetch."""
    output = await analyze(["P04637"], faults=["P04637:hang@1"], timeout=0.3, retries=1)
    done = output.completed_analyses[0]
    assert done.attempts == 2


async def test_partial_protein_is_continued_without_fetching_again() -> None:
    """structure_error@1 with a retry continues from the failed stage; fetch is reused."""
    fetches: list[str] = []

    class CountingSource(OfflineSource):
        def ping(self) -> bool:
            return True

        def fetch(self, protein_id: str) -> Any:
            fetches.append(protein_id)
            return super().fetch(protein_id)

    output = await analyze(
        ["P04637"],
        source=CountingSource(),
        faults=["P04637:structure_error@1"],
        retries=1,
        timeout=5,
    )
    assert output.completed_analyses[0].attempts == 2
    assert fetches == ["P04637"]


async def test_a_crash_in_lyra_for_one_protein_spares_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An internal error while handling one protein fails that protein only."""
    from lyra.proteins import _analyze

    real = _analyze.entry_for

    def broken(protein_id: str, outcome: Any) -> Any:
        if protein_id == "Q8I3H7":
            raise RuntimeError("bug in lyra")
        return real(protein_id, outcome)

    monkeypatch.setattr(_analyze, "entry_for", broken)
    output = await analyze(["P04637", "Q8I3H7"], timeout=5)
    assert counts(output) == (1, 0, 1)
    assert "Internal error" in entry(output, "Q8I3H7").error


def test_unknown_plan_is_a_clear_error() -> None:
    """A plan other than 'full' or 'structure' is refused before anything runs."""
    with pytest.raises(ValueError, match="'full' or 'structure'"):
        analyze_sync(["P04637"], plan="everything")  # type: ignore[arg-type]


async def test_a_long_lived_child_does_not_reuse_another_tasks_results() -> None:
    """Two separate delegations of the same protein to one child both really run."""
    from lyra import Supervisor
    from lyra.proteins import ProteinChild

    fetches: list[str] = []

    class CountingSource(OfflineSource):
        def fetch(self, protein_id: str) -> Any:
            fetches.append(protein_id)
            return super().fetch(protein_id)

    supervisor = Supervisor(ProteinChild(CountingSource()))
    for _ in range(2):
        assert (await supervisor.delegate("Analyze P04637", timeout=5)).ok
    assert fetches == ["P04637", "P04637"]


@pytest.mark.parametrize("bad", ["../../etc/passwd", "P04637; rm -rf /", "ÄÖÜ"])
def test_bad_characters_are_named_before_length(bad: str) -> None:
    """An ID with path or shell characters is refused for its characters."""
    from lyra.proteins import validate_protein_id

    ok, message = validate_protein_id(bad)
    assert not ok
    assert message is not None
    assert "only letters A-Z and digits 0-9 allowed" in message


async def test_model_plans_a_question_without_accessions() -> None:
    """With a model, 'the human p53 protein' becomes P04637; invalid IDs are dropped."""
    import anthropic

    from fakes.messages_api import MessagesAPI, message, tool_use
    from lyra.proteins import plan_question

    answer = tool_use(
        "submit_plan", {"uniprot_ids": ["P04637", "not an id!"], "requires_full_pipeline": False}
    )
    with MessagesAPI([message([answer], stop_reason="tool_use")]) as api:
        async with anthropic.AsyncAnthropic(base_url=api.url, api_key="k", max_retries=0) as client:
            plan = await plan_question(
                "Is the human p53 structure reliable?", client=client, use_model=True
            )
    assert (plan.ids, plan.plan, plan.planned_by) == (["P04637"], "structure", "model")


async def test_planner_falls_back_to_rules_when_the_model_fails() -> None:
    """A failing model call leaves the plan to the rules."""
    import anthropic

    from fakes.messages_api import MessagesAPI, error
    from lyra.proteins import plan_question

    with MessagesAPI([error(500, "api_error", "down")]) as api:
        async with anthropic.AsyncAnthropic(base_url=api.url, api_key="k", max_retries=0) as client:
            plan = await plan_question("Compare P04637 and Q8I3H7", client=client, use_model=True)
    assert (plan.ids, plan.plan, plan.planned_by) == (["P04637", "Q8I3H7"], "full", "rules")


def test_an_empty_id_is_an_invalid_task_not_missing_context() -> None:
    """An empty protein ID fails as invalid input, with advice about the task, not files."""
    output = analyze_sync([""], timeout=5)
    failed = output.failed_analyses[0]
    assert (failed.category, failed.failed_at_stage) == ("invalid_task", "fetch_protein")
    assert "non-empty string" in failed.error


def test_a_durable_run_refuses_a_python_decomposer() -> None:
    """A decomposer (Python code) cannot travel to durable workers: a clear error."""
    from lyra import ChildRef
    from lyra.durable import JobSpec
    from lyra.errors import ConfigurationError
    from lyra.recovery import RecoveryPolicy, decompose
    from lyra.supervisor import Job

    job = Job(
        child=ChildRef(target="lyra.proteins:protein_child"),
        policy=RecoveryPolicy(decomposer=decompose),
    )
    with pytest.raises(ConfigurationError, match="decomposer"):
        JobSpec.of(job)


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("Compare P04637 with Q8I3H7 and P04637", ["Analyze P04637", "Analyze Q8I3H7"]),
        ("Analyze P04637", ["Analyze P04637"]),
        ("no accession here", []),
    ],
)
def test_the_protein_child_splits_tasks_by_accession(prompt: str, expected: list[str]) -> None:
    """The workload's own decomposition rule, which recovery uses for its child."""
    from lyra.proteins import ProteinChild
    from lyra.recovery import default_decomposer

    assert ProteinChild.decompose(prompt) == expected
    assert default_decomposer(ProteinChild())(prompt) == expected


async def test_a_prompt_naming_several_proteins_is_refused_not_half_done() -> None:
    """One protein per child: a prompt naming two (and no subject) is an invalid task
    that names both and how to run them, not an analysis of the first alone; the same
    prompt with a subject analyses that one."""
    from lyra import adelegate_task
    from lyra.proteins import ProteinChild

    prompt = "Analyze P04637 and P01308"
    refused = parse_report(await adelegate_task(prompt, child=ProteinChild()))
    assert (refused.status, refused.category) == ("failed", "invalid_task")
    assert "P04637, P01308" in refused.message
    assert "lyra analyze P04637 P01308" in refused.message
    chosen = parse_report(await adelegate_task(prompt, child=ProteinChild(), subject="P01308"))
    assert chosen.status == "completed"
    assert "Insulin" in (chosen.output or "")


async def test_a_stuck_multi_protein_task_is_split_per_protein() -> None:
    """A task about two proteins that times out with no progress is retried as one
    subtask per protein, by the protein child's own rule."""
    from lyra.proteins import ProteinChild
    from lyra.recovery import RecoveryPolicy, recover

    class StuckOnWholeTasks(ProteinChild):
        async def run(self, prompt: str, ctx: Any) -> str:
            if "part" not in prompt:
                await anyio.sleep_forever()
            return await super().run(prompt, ctx)

    outcome = await recover(
        "Compare P04637 with Q8I3H7",
        child=StuckOnWholeTasks(),
        policy=RecoveryPolicy(max_retries=1),
        limits=Limits(timeout=0.4),
    )
    assert [a.strategy for a in outcome.attempts] == ["initial", "decomposition"]
    assert outcome.result.ok
    assert "## Analyze P04637" in (outcome.result.output or "")


# -- isoforms and how accessions are written -------------------------------------------


def test_an_argument_may_hold_several_ids_joined_by_commas_or_spaces() -> None:
    """``"P04637 P69905"`` quoted as one argument is two proteins (it was one invalid ID),
    as ``"P04637,P69905"`` is; words that are not all IDs stay one request, and a blank
    request stays one, each to be reported as given."""
    from lyra.proteins import requested_ids

    assert requested_ids(["P04637 P69905", "p05067,\tP00533 ,", "P04637"]) == [
        "P04637",
        "P69905",
        "P05067",
        "P00533",
    ]
    assert len(requested_ids([" "])) == 1
    assert requested_ids(["'; DROP TABLE x;--", "bad id!"]) == ["'; DROP TABLE x;--", "bad id!"]


def test_the_answer_escapes_untrusted_text_once() -> None:
    """An identifier holding ``&`` or ``<`` is escaped once in the answer's lists, as in its
    Next line (the lists' macro was escaped again as it was placed: ``&amp;amp;``)."""
    answer = analyze_sync(["A&B", "<b>x</b>"], timeout=10).answer
    assert "  • A&amp;B: invalid_task" in answer
    assert "  • &lt;b&gt;x&lt;/b&gt;: invalid_task" in answer
    assert "&amp;amp;" not in answer
    assert "&amp;lt;" not in answer


def test_an_isoform_is_analysed_as_its_own_sequence_and_model() -> None:
    """P05067-2 (bundled in P05067's entry) is analysed on its own 305 residues and
    model, beside the canonical P05067; its brief says whose isoform it is (the
    canonical features it carries are tested in test_protein_second_pass.py)."""
    output = analyze_sync(["P05067-2", "p05067"], timeout=10)
    assert counts(output) == (2, 0, 0)
    isoform, canonical = entry(output, "P05067-2"), entry(output, "P05067")
    assert isoform.figures["mean_plddt"] == 74.75 != canonical.figures["mean_plddt"]
    assert "| Length | 305 residues |" in isoform.brief
    assert "isoform P05067-2 of P05067" in isoform.brief
    assert "a UniProt entry with features" not in isoform.brief
    assert "analyse one by its accession, as P05067-2" in canonical.brief


@pytest.mark.parametrize(
    ("question", "ids"),
    [
        ("Is the structure of P05067-2 reliable?", ["P05067-2"]),  # not swapped for P05067
        ("compare p05067 with q5vsl9, structure only", ["P05067", "Q5VSL9"]),
        ("models AF-P38398-F1 and sp|P69905|HBA_HUMAN", ["P38398", "P69905"]),
        ("the isoform's model AF-P05067-2-F1", ["P05067-2"]),
        ("P04637.2 and P05067-2x", ["P04637.2", "P05067"]),  # a version: refused as an ID is
        ("Analyse P04637.2.", ["P04637.2"]),  # at a sentence's end too
        ("P69905 and P05067-2x", ["P69905", "P05067"]),  # in the question's order
        ("compare p05067-2 with P05067 and hba_human", ["P05067-2", "P05067", "HBA_HUMAN"]),
        ("is MAX_LEN of P04637 known? EGFR_HUMAN?", ["P04637", "EGFR_HUMAN"]),
    ],
)
def test_a_question_names_accessions_as_written_in_either_case(
    question: str, ids: list[str]
) -> None:
    """Accessions in a question are found whatever their case, an isoform's suffix
    kept, a version's too (to be refused as it is as an argument, not analysed as
    another ID unsaid); the entry names the bundled data know are found in order with
    them; the parts of AlphaFold DB or FASTA IDs are not IDs."""
    from lyra.proteins import plan_by_rules

    assert plan_by_rules(question).ids == ids


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ("AF-P05067-F1", "an AlphaFold DB entry ID: give its UniProt accession, P05067"),
        ("AF-P05067-2-F1", "an AlphaFold DB entry ID: give its UniProt accession, P05067-2"),
        ("P04637.2", "a sequence version: give the accession alone, P04637"),
        ("sp|P69905|HBA_HUMAN", "did you mean P69905?"),
        ("p05067-02", "did you mean P05067-2?"),  # (isoforms have no leading zeros)
        ("P05067\u20132", "did you mean P05067-2?"),  # an en dash, copied from a paper
        ("P05067\u22123", "did you mean P05067-3?"),  # a minus sign
        ("P05067--2", "did you mean P05067-2?"),  # a dash typed twice (it said P05067)
        ("P05067;P04637", "give each accession apart: P05067 P04637"),
        ("P05067;P04637.1", "give each accession apart: P05067 P04637"),
        ("P05067-1234", "did you mean P05067?"),  # (no isoform has four digits)
    ],
)
def test_an_id_written_another_way_says_which_accession_to_give(given: str, hint: str) -> None:
    from lyra.proteins import validate_protein_id

    ok, message = validate_protein_id(given)
    assert not ok
    assert message is not None
    assert message.endswith(hint)


def test_an_isoform_the_data_do_not_hold_names_what_they_do() -> None:
    """The offline source itself analyses no isoform as another: P04637-1 (which the
    analysis resolves to P04637 with a note, its flat file displaying it) fails here
    naming the canonical accession; P05067-3 names the models AlphaFold DB has."""
    from lyra.proteins import OfflineSource

    one = OfflineSource().fetch("p04637-1")
    assert "error" in one
    assert (
        "it holds P04637 (the canonical sequence, often isoform 1: analyse it as P04637)"
        in (one["error"])
    )
    three = OfflineSource().fetch("P05067-3")
    assert "error" in three
    assert three["error"].startswith(  # the bundled AlphaFold DB record lists every model
        "Protein P05067-3 not found in AlphaFold DB's record of P05067 in the bundled data: "
        "AlphaFold DB has no model of it, only of P05067 (the canonical sequence) and its "
        "isoforms P05067-2, P05067-4,"
    )
    assert "--source live" not in three["error"]
    assert "is none of them" not in three["error"]  # P05067-3 is a UniProt isoform (L-APP677)
    # P05067-12 is none of the isoforms the flat file names (IsoId=P05067-1 to -11)
    flat = (RAW / "uniprot_P05067_flatfile_2025.txt").read_text(encoding="ascii")
    assert "Named isoforms=11;" in flat
    assert "IsoId=P05067-11;" in flat
    assert "IsoId=P05067-12" not in flat
    twelve = OfflineSource().fetch("P05067-12")
    assert twelve["error"].endswith(
        "; the bundled UniProt entry of P05067 names 11 isoforms (P05067-1 to P05067-11), "
        "and P05067-12 is none of them"
    )


def test_the_isoform_an_entry_displays_is_its_accession_and_one_it_lacks_has_no_model() -> None:
    """P05067-1 is the isoform APP's flat file displays (its canonical sequence): it is
    analysed as P05067, with a note; P05067-3, which AlphaFold DB's record does not
    model, is sent to the PDB's page of the entry, not to a live run."""
    from lyra.proteins import analyze_sync
    from lyra.proteins._next import next_steps

    flat = (RAW / "uniprot_P05067_flatfile_2025.txt").read_text(encoding="ascii")
    assert "IsoId=P05067-1; Sequence=Displayed;" in flat
    output = analyze_sync(["P05067-1", "P05067-3"], structure_only=True, timeout=10)
    assert [a.protein_id for a in output.completed_analyses] == ["P05067"]
    assert output.notes == [
        "P05067-1 is the isoform UniProt's entry P05067 displays (its canonical sequence) "
        "in the bundled data: analysed as P05067"
    ]
    assert next_steps(output.failed_analyses) == [
        "No AlphaFold DB model: look for experimental structures in the PDB: P05067-3 "
        "(https://www.ebi.ac.uk/pdbe/pdbe-kb/proteins/P05067)"
    ]


def test_a_canonical_brief_of_an_entry_with_isoforms_says_whose_model_it_is() -> None:
    """P04637's flat file lists isoforms and displays P04637-1; no other isoform's model
    is bundled, so the brief says it is of the canonical one and the others are not in
    this data (where APP's names the isoforms AlphaFold DB models)."""
    from lyra.proteins import analyze_sync

    flat = (RAW / "uniprot_P04637_flatfile_2005_bioruby.txt").read_text(encoding="ascii")
    assert "IsoId=P04637-1; Sequence=Displayed;" in flat
    [p53] = analyze_sync(["P04637"], timeout=10).completed_analyses
    assert (
        "UniProt lists isoforms of P04637; this brief is of the canonical one (P04637-1)"
        in p53.brief
    )


def test_a_model_version_no_source_states_is_said_to_be_the_collectors_label() -> None:
    """P00533's facts block gives no latestVersion (its "v6" is the name the collector
    gave the block): the brief says so where it names the model, and the JSON gives the
    version's basis; P04637's block states its version: nothing said."""
    from lyra.proteins import analyze_sync

    facts = json.loads((RAW / "facts_secondary_sources.json").read_text(encoding="utf-8"))
    assert "latestVersion" not in facts["P00533"]["afdb_v6"]
    assert facts["P04637"]["afdb_v6"]["latestVersion"] == 6
    output = analyze_sync(["P00533", "P04637"], timeout=10)
    egfr, p53 = entry(output, "P00533"), entry(output, "P04637")
    assert (
        "Model version v6 (not stated by its source: only the collector's name for its block "
        "in facts_secondary_sources.json, afdb_v6)" in egfr.brief
    )
    assert "not stated by its source" not in p53.brief
    # ...and wherever it names the model, it says whose label the version is
    assert "Source: AlphaFold DB model AF-P00533-F1 labelled v6 by its collector" in egfr.brief
    assert "labelled v" not in p53.brief
    assert egfr.figures["model"]["version_basis"].startswith("the collector's name")
    assert p53.figures["model"]["version_basis"] is None


def test_a_structure_only_summary_keeps_the_caveats_of_the_data() -> None:
    """A structure-only plan has no reasoning to critique, but what the data say to
    beware of (pLDDT is no experiment, the model version, isoforms) stays in its text."""
    from lyra.proteins import analyze_sync

    [app] = analyze_sync(["P05067"], structure_only=True, timeout=10).completed_analyses
    caveats = app.brief.split("## Caveats", 1)[1]
    assert "pLDDT is AlphaFold's predicted confidence, not experimental evidence" in caveats
    assert "This is the canonical isoform's model" in caveats
    assert "No reasoning stage result" not in caveats
