"""``analyze``: one child per protein, each under its own deadline and recovery loop.

A bad ID, a missing protein, a slow source or a broken stage costs only that
protein. Every requested protein appears exactly once in the output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from lyra._api import run_blocking
from lyra.delegation import DelegationResult, FailureCategory
from lyra.delegation._classify import exception_text
from lyra.proteins._faults import Fault, faults_by_protein
from lyra.proteins._ids import validate_protein_id
from lyra.proteins._pipeline import Plan, ProteinChild, ProteinState, TaskResult, plan_for
from lyra.proteins._sources import OfflineSource, ProteinSource
from lyra.recovery import RecoveryOutcome, RecoveryPolicy, recover
from lyra.supervisor import Executor, LocalExecutor, RunDir, write_atomic

log = structlog.get_logger("lyra")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class TaskLine(_Model):
    """One stage of one protein, without its (large) result."""

    task_id: str
    task_type: str
    status: str
    error: str | None = None
    duration_seconds: float = 0.0


class CompletedAnalysis(_Model):
    """A protein whose every planned stage succeeded."""

    protein_id: str
    brief: str
    attempts: int = 1
    tasks: list[TaskLine] = Field(default_factory=list)


class _Failed(_Model):
    protein_id: str
    failed_at_stage: str
    error: str
    tasks_skipped: list[str]
    additional_failures: list[dict[str, str]] = Field(default_factory=list)
    category: FailureCategory | None = None
    retryable: bool = False
    attempts: int = 1
    report: str = ""
    tasks: list[TaskLine] = Field(default_factory=list)


class PartialAnalysis(_Failed):
    """A protein with a brief written from incomplete analyses."""

    brief: str


class FailedAnalysis(_Failed):
    """A protein with no brief: the root cause and what was skipped."""


class Summary(_Model):
    """Counts that always add up to ``total_requested``."""

    total_requested: int
    successful: int
    partial: int
    failed: int


class AnalysisOutput(_Model):
    """The final output of a protein analysis run (DESIGN §6)."""

    completed_analyses: list[CompletedAnalysis]
    partial_analyses: list[PartialAnalysis]
    failed_analyses: list[FailedAnalysis]
    summary: Summary

    @property
    def all_completed(self) -> bool:
        """True when every requested protein completed."""
        return self.summary.successful == self.summary.total_requested


ProteinEntry = CompletedAnalysis | PartialAnalysis | FailedAnalysis


async def analyze(
    ids: Iterable[object],
    *,
    source: ProteinSource | None = None,
    timeout: float = 300.0,
    concurrency: int = 8,
    retries: int = 0,
    plan: Plan = "full",
    faults: Iterable[Fault | str] = (),
    run_dir: RunDir | Path | str | None = None,
    policy: RecoveryPolicy | None = None,
    executor: Executor | None = None,
    on_result: Callable[[ProteinEntry], None] | None = None,
) -> AnalysisOutput:
    """Analyse proteins, each in its own child; never raises for a protein's failure.

    ``retries`` recovery attempts follow a failure (``policy`` overrides it);
    ``faults`` inject failures (``"P04637:hang@1"``); ``run_dir`` receives each
    report and brief as soon as its protein finishes, and the output at the end.
    """
    requested = _unique(ids)
    plan_for("", plan)  # a clear error for an unknown plan before anything runs
    folder = RunDir(run_dir) if run_dir is not None and not isinstance(run_dir, RunDir) else run_dir
    one = partial(
        _analyze_one,
        source=source or OfflineSource(),
        timeout=timeout,
        policy=policy or RecoveryPolicy(max_retries=retries),
        plan=plan,
        faults=faults_by_protein(faults),
        run_dir=folder,
        on_result=on_result,
    )
    entries = await (executor or LocalExecutor()).map(
        one, requested, max_concurrency=concurrency, on_error=_internal_error
    )
    output = assemble(entries)
    if folder is not None:
        write_atomic(folder.output, output.model_dump_json(indent=2))
    log.info("run_finished", **output.summary.model_dump())
    return output


def analyze_sync(ids: Iterable[object], **options: Any) -> AnalysisOutput:
    """Blocking form of :func:`analyze`."""
    return run_blocking("analyze", partial(analyze, ids, **options))


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


def _unique(ids: Iterable[object]) -> list[str]:
    """Requested IDs, normalised where valid, each once, in order."""
    if isinstance(ids, str):
        ids = [ids]
    seen: dict[str, None] = {}
    for raw in ids:
        ok, value = validate_protein_id(raw)
        seen.setdefault(value if ok else str(raw), None)
    return list(seen)


async def _analyze_one(
    protein_id: str,
    *,
    source: ProteinSource,
    timeout: float,
    policy: RecoveryPolicy,
    plan: Plan,
    faults: Mapping[str, tuple[Fault, ...]],
    run_dir: RunDir | None,
    on_result: Callable[[ProteinEntry], None] | None,
) -> ProteinEntry:
    state = ProteinState(protein_id, plan_for("", plan))
    child = ProteinChild(source, faults=faults.get(protein_id, ()), states={protein_id: state})
    outcome = await recover(
        f"Analyze {protein_id}",
        child=child,
        base_timeout=timeout,
        policy=policy,
        subject=protein_id,
        context={"plan": plan},
    )
    entry = entry_for(state, outcome)
    if run_dir is not None:
        write_atomic(run_dir.report(protein_id), outcome.report)
        if isinstance(entry, CompletedAnalysis | PartialAnalysis):
            write_atomic(run_dir.brief(protein_id), entry.brief)
    if on_result is not None:
        on_result(entry)
    return entry


def entry_for(state: ProteinState, outcome: RecoveryOutcome) -> ProteinEntry:
    """Classify one protein's end state into its output entry."""
    result = outcome.result
    attempts = len(outcome.attempts)
    interrupted = result.failure.message if result.failure is not None else None
    tasks = state.task_results(interrupted=interrupted)
    lines = [TaskLine(**t.model_dump(exclude={"result", "protein_id"})) for t in tasks]
    if result.ok:
        return CompletedAnalysis(
            protein_id=state.protein_id, brief=result.output or "", attempts=attempts, tasks=lines
        )
    failed = _failure_fields(tasks, result, attempts, lines)
    brief = state.output if _synthesised(tasks) else None
    if brief is not None:
        return PartialAnalysis(brief=brief, **failed)
    return FailedAnalysis(**failed)


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
        "tasks": lines,
    }


def _internal_error(protein_id: str, exc: Exception) -> FailedAnalysis:
    """lyra's own bug while handling one protein: that protein fails, no other."""
    log.error("protein_internal_error", subject=protein_id, error=exception_text(exc))
    return FailedAnalysis(
        protein_id=protein_id,
        failed_at_stage="fetch_protein",
        error=f"Internal error in lyra: {exception_text(exc)}",
        tasks_skipped=[],
        category=FailureCategory.TOOL_ERROR,
    )
