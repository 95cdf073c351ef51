"""``analyze``: one child per protein, each under its own deadline and recovery loop.

A bad ID, a missing protein, a slow source or a broken stage costs only that
protein. Every requested protein appears exactly once in the output.

Written against lyra's public API only, as a user's own workload would be: each
protein is a :class:`lyra.Task` for a :class:`lyra.Supervisor`, and the
outcomes become the protein entries of DESIGN §6.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from lyra import Budget, ChildRef, Supervisor, Task, events
from lyra.delegation import (
    DelegationResult,
    FailureCategory,
    exception_text,
    safe_str,
    valid_text,
)
from lyra.errors import ConfigurationError
from lyra.proteins import _conclude as conclude
from lyra.proteins._compare import Comparison, compare
from lyra.proteins._faults import Fault, faults_by_protein
from lyra.proteins._figures import with_pictures
from lyra.proteins._ids import normalize_protein_id
from lyra.proteins._live import LiveSource
from lyra.proteins._offline import OfflineSource
from lyra.proteins._output import (
    AnalysisOutput,
    CompletedAnalysis,
    FailedAnalysis,
    PartialAnalysis,
    ProteinEntry,
    Summary,
    TaskLine,
)
from lyra.proteins._pipeline import Plan, ProteinChild, ProteinState, TaskResult, plan_for
from lyra.proteins._sources import ProteinSource
from lyra.proteins._tally import Tally
from lyra.recovery import RecoveryOutcome, RecoveryPolicy
from lyra.settings import settings
from lyra.supervisor import (
    AnswerWriter,
    Executor,
    Graceful,
    LocalExecutor,
    QuorumDecision,
    QuorumPolicy,
    RunDir,
    ServiceHealth,
    decide,
    final_answer,
    probe,
)


async def analyze(
    ids: Iterable[object],
    *,
    source: ProteinSource | None = None,
    timeout: float = 300.0,
    idle_timeout: float | None = None,
    budget: Budget | None = None,
    concurrency: int = 8,
    retries: int = 0,
    plan: Plan = "full",
    faults: Iterable[Fault | str] = (),
    run_dir: RunDir | Path | str | None = None,
    policy: RecoveryPolicy | None = None,
    executor: Executor | None = None,
    on_result: Callable[[ProteinEntry], None] | None = None,
    quorum: QuorumPolicy | None = None,
    answer_writer: AnswerWriter | None = None,
    question: str | None = None,
    stream: bool = False,
    pictures: bool = True,
) -> AnalysisOutput:
    """Analyse proteins, each in its own child; never raises for a protein's failure.

    ``timeout`` and ``idle_timeout`` bound each attempt; ``budget`` is shared by
    the whole run. ``retries`` recovery attempts follow a failure (``policy``
    overrides it); ``faults`` inject failures (``"P04637:hang@1"``);
    ``run_dir`` receives each report, brief and line of ``results.jsonl`` as
    soon as its protein finishes, and the output at the end. ``quorum``
    decides whether the results are enough to answer; the answer is written by
    ``answer_writer`` (a template by default) and always exists.

    With a ``run_dir``, ``pictures`` (the plots extra) draws each analysed
    protein's pLDDT track and PAE heatmap into its ``figures/``, linked from the
    brief (not for a streamed run).

    ``stream=True`` is for proteome-sized runs: ``ids`` are read lazily, the
    entries live only in the run directory (``run_dir`` is then required), and
    the output holds the counts, the quorum and the answer, not the entries.
    """
    plan_for("", plan)  # a clear error for an unknown plan before anything runs
    folder = RunDir(run_dir) if run_dir is not None and not isinstance(run_dir, RunDir) else run_dir
    if stream and folder is None:
        raise ConfigurationError("a streamed analysis needs a run directory for its entries")
    policy = policy or RecoveryPolicy(max_retries=retries)
    quorum = quorum or QuorumPolicy()
    listed = None if stream else requested_ids(ids)
    requested: Iterable[str] = unique_ids(ids) if listed is None else listed
    source = source or OfflineSource()
    durable = executor is not None and not isinstance(executor, LocalExecutor)
    supervisor = Supervisor(
        _child(source, durable=durable),
        timeout=timeout,
        idle_timeout=idle_timeout,
        budget=budget,
        policy=policy,
        executor=executor,
    )
    tally = Tally(folder, keep=not stream, hold=quorum.critical)
    by_protein = faults_by_protein(faults)

    async def finished(task: Task, outcome: RecoveryOutcome) -> None:
        entry = _entry(task.subject or "", outcome)
        if folder is not None and pictures and not stream:
            # Drawing takes a while: in a worker thread, so no other child waits on it.
            entry = await anyio.to_thread.run_sync(
                with_pictures, entry, outcome.state, source, folder.path / "figures"
            )
        tally.add(entry, outcome.report)
        if on_result is not None:
            on_result(entry)

    def tasks(targets: Iterable[str]) -> Iterator[Task]:
        for protein_id in targets:
            tally.start(protein_id)
            yield _task(protein_id, plan, by_protein.get(protein_id, ()))

    async def fan_out(targets: Iterable[str]) -> None:
        await supervisor.run(
            tasks(targets), max_concurrency=concurrency, on_outcome=finished, keep=False
        )

    graceful = Graceful()
    no_health: list[ServiceHealth] = []
    health = await graceful.step("health", lambda: _health(source), fallback=no_health)
    try:
        await graceful.step(
            "fan_out",
            lambda: fan_out(requested),
            fallback=None,
            critical=True,
            unavailable=["the analyses that had not finished"],
        )
    except BaseException:  # stopped from outside (Ctrl+C, SIGTERM): keep what finished
        if folder is not None and not durable:  # a durable run resumes from its checkpoints
            _save_interrupted(tally, folder, listed if listed is not None else requested)
        raise
    if any(error.failed_step == "fan_out" for error in graceful.errors):
        # The fan-out itself broke: whatever did not finish fails, and is still reported.
        for protein_id in [*tally.started, *requested]:
            if protein_id not in tally.outcomes:
                tally.add(_unfinished(protein_id, "the fan-out failed"), "")
    decision = await _quorum(tally, quorum, fan_out, listed)
    tally.finish()
    return await _conclude(
        tally,
        decision,
        folder,
        requested=listed,
        question=question,
        health=health,
        graceful=graceful,
        answer_writer=answer_writer,
        retried=policy.max_retries > 0,
    )


async def _conclude(
    tally: Tally,
    decision: QuorumDecision,
    folder: RunDir | None,
    *,
    requested: Sequence[str] | None,
    question: str | None,
    health: list[ServiceHealth],
    graceful: Graceful,
    answer_writer: AnswerWriter | None,
    retried: bool,
) -> AnalysisOutput:
    """The comparison, the answer and the output, from what the tally holds."""
    entries = tally.in_order(requested) if requested is not None else list(tally.entries.values())
    output = assemble(entries) if requested is not None else AnalysisOutput.empty()
    output = output.model_copy(
        update={
            "summary": tally.summary(),
            "by_category": dict(sorted((+tally.by_category).items())),
            "results": str(folder.results) if folder is not None else None,
            "streamed": requested is None,
        }
    )
    comparison = await graceful.step(
        "compare",
        lambda: _compare(entries, requested, allowed=decision.met),
        fallback=None,
        available=[e.protein_id for e in output.completed_analyses],
    )
    facts = conclude.facts(
        question
        or (
            f"Analyze {', '.join(requested)}"
            if requested is not None
            else f"Analyze {output.summary.total_requested} proteins"
        ),
        entries,
        summary=output.summary,
        decision=decision,
        comparison=comparison,
        health=health,
        errors=graceful.errors,
        retried=retried,
    )
    output = output.model_copy(
        update={
            "quorum": decision,
            "comparison": comparison,
            "health": health,
            "errors": graceful.errors,
            "answer": await final_answer(facts, answer_writer),
        }
    )
    if folder is not None:
        folder.save(folder.output, output.model_dump_json(indent=2))
    events.info("run_finished", **output.summary.model_dump())
    return output


UNFINISHED = "unfinished.txt"
"""The run directory's list of the proteins an interrupted run did not finish."""


def _save_interrupted(tally: Tally, folder: RunDir, requested: Iterable[str]) -> None:
    """An interrupted run's output (what finished, and the proteins that did not), the
    unfinished ones one a line in ``unfinished.txt`` (to run with ``--ids-file``), and
    its closing event, so that the run directory and the log end as the run did.

    ``requested`` is the list, or a streamed run's :class:`_Input`: the proteins handed
    to a child and not finished are saved first, then the rest of the input is read
    and saved with them (a second interrupt while it is read keeps the first save)."""
    tally.finish()
    if isinstance(requested, Sequence):
        finished = [tally.entries[p] for p in requested if p in tally.entries]
        left = [p for p in requested if p not in tally.outcomes]
        summary = _save_unfinished(tally, folder, left, finished)
    else:
        started = [p for p in tally.started if p not in tally.outcomes]
        _save_unfinished(tally, folder, started, None)
        unread = [p for p in requested if p not in tally.outcomes]
        summary = _save_unfinished(tally, folder, [*started, *unread], None)
    events.warning("run_interrupted", **summary.model_dump())


def _save_unfinished(
    tally: Tally, folder: RunDir, unfinished: list[str], finished: list[ProteinEntry] | None
) -> Summary:
    """``output.json`` and ``unfinished.txt`` of an interrupted run (``finished``:
    the entries of a listed run; ``None`` for a streamed one, whose are in results.jsonl)."""
    output = assemble(finished or []).model_copy(
        update={
            "summary": tally.summary(unfinished=len(unfinished)),
            "results": str(folder.results) if folder.results.exists() else None,
            "streamed": finished is None,
            "interrupted": True,
            "unfinished": unfinished,
        }
    )
    folder.save(folder.path / UNFINISHED, "".join(f"{p}\n" for p in unfinished))
    folder.save(folder.output, output.model_dump_json(indent=2))
    return output.summary


def _child(source: ProteinSource, *, durable: bool) -> ProteinChild | ChildRef:
    """The protein child: the object itself here; by name for a durable run, so
    that a resumed run or a worker builds the same one."""
    if not durable:
        return ProteinChild(source)
    if isinstance(source, LiveSource):
        urls = {"afdb_url": source.afdb_url, "uniprot_url": source.uniprot_url}
        return ChildRef(target="lyra.proteins:protein_child", options={"source": "live", **urls})
    if type(source) is OfflineSource:
        return ChildRef(target="lyra.proteins:protein_child", options={"source": "offline"})
    raise ConfigurationError(
        f"a durable run needs the offline or live source, not {type(source).__name__}"
    )


def _task(protein_id: str, plan: Plan, faults: Sequence[Fault]) -> Task:
    """One protein as a task; only its own injected faults travel with it."""
    context: dict[str, object] = {"plan": plan}
    if faults:
        context["faults"] = [fault.spec for fault in faults]
    return Task(prompt=f"Analyze {protein_id}", subject=protein_id, context=context)


async def _health(source: ProteinSource) -> list[ServiceHealth]:
    """Probe the data source (``ping()`` if it has one, else one known entry)
    and, when an API key is set, the model service (listing one model)."""
    ping = getattr(source, "ping", None) or partial(source.fetch, "P04637")
    checks = [await probe(f"{source.name} data source", ping)]
    if settings().model_configured:
        import anthropic  # noqa: F401 - imported before the clock starts: it is slow to load

        checks.append(await probe("model service", _list_one_model))
    else:
        checks.append(
            ServiceHealth(
                name="model service",
                status="not_configured",
                detail="no ANTHROPIC_API_KEY: template answers",
            )
        )
    return checks


def _list_one_model() -> object:
    import anthropic

    options = settings().anthropic_client_options()
    with anthropic.Anthropic(max_retries=0, timeout=2.0, **options) as client:
        return client.models.list(limit=1)


async def _quorum(
    tally: Tally,
    policy: QuorumPolicy,
    fan_out: Callable[[Iterable[str]], Awaitable[None]],
    requested: Sequence[str] | None,
) -> QuorumDecision:
    """Decide; while a critical protein failed and rounds remain, retry it first."""
    for round_ in range(policy.critical_retries + 1):
        decision = decide(
            tally.quorum_view(requested), policy, retries_left=round_ < policy.critical_retries
        )
        events.info(
            "quorum_decision",
            action=decision.action,
            met=decision.met,
            confidence=decision.confidence,
            reason=decision.reason,
            round=round_,
        )
        if decision.action != "retry_critical":
            return decision
        await fan_out(decision.retry)
    return decision


async def _compare(
    entries: Sequence[ProteinEntry], requested: Sequence[str] | None, *, allowed: bool
) -> Comparison | None:
    if requested is None:
        return None  # a streamed run: too many to compare in words (results.jsonl has all)
    figures = {e.protein_id: e.figures for e in entries if not isinstance(e, FailedAnalysis)}
    return compare(figures, requested, allowed=allowed)


def analyze_sync(ids: Iterable[object], **options: object) -> AnalysisOutput:
    """Blocking form of :func:`analyze` (the same options); call it where no event loop runs."""
    return anyio.run(partial(analyze, ids, **options))  # type: ignore[arg-type]


def assemble(entries: Sequence[ProteinEntry]) -> AnalysisOutput:
    """The final output from one entry per protein, in request order."""
    completed = [e for e in entries if isinstance(e, CompletedAnalysis)]
    partial_ = [e for e in entries if isinstance(e, PartialAnalysis)]
    failed = [e for e in entries if isinstance(e, FailedAnalysis)]
    return AnalysisOutput(
        completed_analyses=completed,
        partial_analyses=partial_,
        failed_analyses=failed,
        summary=Summary(
            total_requested=len(entries),
            successful=len(completed),
            partial=len(partial_),
            failed=len(failed),
        ),
    )


def requested_ids(ids: Iterable[object]) -> list[str]:
    """Requested IDs, normalised where valid, each once, in order."""
    return list(unique_ids(ids))


def unique_ids(ids: Iterable[object]) -> Iterator[str]:
    """:func:`requested_ids`, one at a time, read lazily (an ID file of any size)."""
    return _Input(ids)


class _Input:
    """The requested IDs, normalised, each once, read lazily. What is left can still
    be read after the fan-out stopped, whatever it stopped in: the iterator and the
    IDs seen live here, not in a generator an interrupt may have ended."""

    def __init__(self, ids: Iterable[object]) -> None:
        self._raw = iter([ids] if isinstance(ids, str) else ids)
        self._seen: set[str] = set()

    def __iter__(self) -> _Input:
        return self

    def __next__(self) -> str:
        while True:
            raw = next(self._raw)
            protein_id = normalize_protein_id(raw) or valid_text(safe_str(raw))
            if protein_id not in self._seen:
                self._seen.add(protein_id)
                return protein_id


def entry_for(protein_id: str, outcome: RecoveryOutcome) -> ProteinEntry:
    """Classify one protein's end state (kept by its child in ``ctx.state``) into its entry."""
    state = ProteinState.of(outcome.state, protein_id)
    result = outcome.result
    attempts = len(outcome.attempts)
    interrupted = result.failure.message if result.failure is not None else None
    tasks = state.task_results(interrupted=interrupted)
    lines = [TaskLine(**t.model_dump(exclude={"result", "protein_id"})) for t in tasks]
    if result.ok:
        return CompletedAnalysis(
            protein_id=state.protein_id,
            brief=result.output or "",
            attempts=attempts,
            figures=_figures(state),
            tasks=lines,
        )
    failed = _failure_fields(tasks, result, attempts, lines)
    brief = state.output if _synthesised(tasks) else None
    if brief is not None:
        return PartialAnalysis(brief=brief, figures=_figures(state), **failed)
    return FailedAnalysis(**failed)


def _figures(state: ProteinState) -> dict[str, Any]:
    """The few numbers a comparison and the answer need, from the stage results."""
    summary = state.reusable("fetch_protein") or {}
    structure = state.reusable("analyze_structure") or {}
    units = structure.get("units") or []
    largest = max(units, key=lambda u: u["residues"]) if units else None
    figures = {
        "name": summary.get("description"),
        "mean_plddt": structure.get("mean_plddt"),
        "well_folded_fraction": structure.get("well_folded_fraction"),
        "per_residue": structure.get("per_residue"),
        "units": len(units) if structure.get("units") is not None else None,
        "largest_unit": (
            {k: largest[k] for k in ("where", "residues", "mean_plddt", "band")}
            if largest
            else None
        ),
    }
    return {key: value for key, value in figures.items() if value is not None}


def _synthesised(tasks: list[TaskResult]) -> bool:
    return any(t.task_type == "synthesize" and t.status in ("success", "partial") for t in tasks)


def _failure_fields(
    tasks: list[TaskResult], result: DelegationResult, attempts: int, lines: list[TaskLine]
) -> dict[str, Any]:
    failure = result.failure
    assert failure is not None
    failures = [t for t in tasks if t.status == "failed"]
    first = failures[0] if failures else None
    return {
        "protein_id": tasks[0].protein_id,
        "failed_at_stage": first.task_type if first else tasks[0].task_type,
        "error": (first.error if first else None) or failure.message,
        "tasks_skipped": [t.task_type for t in tasks if t.status == "skipped"],
        "additional_failures": [
            {"stage": t.task_type, "error": t.error or ""} for t in failures[1:]
        ],
        "category": failure.category,
        "retryable": failure.suggested_retry,
        "attempts": attempts,
        "report": result.report,
        "suggested_actions": list(failure.suggested_actions),
        "tasks": lines,
    }


def _entry(protein_id: str, outcome: RecoveryOutcome) -> ProteinEntry:
    """The protein's entry; lyra's own bug while building it fails that protein only."""
    try:
        return entry_for(protein_id, outcome)
    except Exception as exc:  # noqa: BLE001 - isolation: one protein, never the run
        events.error("protein_internal_error", subject=protein_id, error=exception_text(exc))
        return _unfinished(protein_id, exception_text(exc))


def _unfinished(protein_id: str, why: str) -> FailedAnalysis:
    return FailedAnalysis(
        protein_id=protein_id,
        failed_at_stage="fetch_protein",
        error=f"Internal error in lyra: {why}",
        tasks_skipped=[],
        category=FailureCategory.TOOL_ERROR,
    )
