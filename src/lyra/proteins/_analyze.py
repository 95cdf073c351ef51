"""``analyze``: one child per protein, each under its own deadline and recovery loop.

A bad ID, a missing protein, a slow source or a broken stage costs only that
protein. Every requested protein appears exactly once in the output.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import Field

from lyra._sync import blocking
from lyra.delegation import DelegationResult, FailureCategory, exception_text
from lyra.errors import ConfigurationError
from lyra.proteins import _conclude as conclude
from lyra.proteins._compare import Comparison, compare
from lyra.proteins._faults import Fault, faults_by_protein
from lyra.proteins._ids import validate_protein_id
from lyra.proteins._output import (
    AnalysisOutput,
    CompletedAnalysis,
    FailedAnalysis,
    FrozenModel,
    PartialAnalysis,
    ProteinEntry,
    Summary,
    TaskLine,
)
from lyra.proteins._pipeline import Plan, ProteinChild, ProteinState, TaskResult, plan_for
from lyra.proteins._sources import LiveSource, OfflineSource, ProteinSource
from lyra.recovery import Plan as RecoveryPlan
from lyra.recovery import RecoveryOutcome, RecoveryPolicy, Replay, attempt_plan, recover
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

log = structlog.get_logger("lyra")


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
    quorum: QuorumPolicy | None = None,
    answer_writer: AnswerWriter | None = None,
    question: str | None = None,
) -> AnalysisOutput:
    """Analyse proteins, each in its own child; never raises for a protein's failure.

    ``retries`` recovery attempts follow a failure (``policy`` overrides it);
    ``faults`` inject failures (``"P04637:hang@1"``); ``run_dir`` receives each
    report and brief as soon as its protein finishes, and the output at the end.
    ``quorum`` decides whether the results are enough to answer; the answer is
    written by ``answer_writer`` (a template by default) and always exists.
    """
    requested = requested_ids(ids)
    plan_for("", plan)  # a clear error for an unknown plan before anything runs
    policy = policy or RecoveryPolicy(max_retries=retries)
    folder = RunDir(run_dir) if run_dir is not None and not isinstance(run_dir, RunDir) else run_dir
    source = source or OfflineSource()
    one = ProteinWork(
        source=source,
        timeout=timeout,
        policy=policy,
        plan=plan,
        faults=faults_by_protein(faults),
        run_dir=folder,
        on_result=on_result,
    )
    mapper = executor or LocalExecutor()

    async def fan_out(targets: list[str]) -> list[ProteinEntry]:
        return await mapper.map(one, targets, max_concurrency=concurrency, on_error=_internal_error)

    graceful = Graceful()
    no_health: list[ServiceHealth] = []
    lost: list[ProteinEntry] = [_unfinished(p, "the fan-out failed") for p in requested]
    health = await graceful.step("health", lambda: _health(source), fallback=no_health)
    entries = await graceful.step(
        "fan_out",
        lambda: fan_out(requested),
        fallback=lost,
        unavailable=["every protein's analysis"],
        critical=True,
    )
    entries, decision = await _quorum(entries, quorum or QuorumPolicy(), fan_out)
    output = assemble(entries)
    comparison = await graceful.step(
        "compare",
        lambda: _compare(entries, requested, allowed=decision.met),
        fallback=None,
        available=[e.protein_id for e in output.completed_analyses],
    )
    facts = conclude.facts(
        question or f"Analyze {', '.join(requested)}",
        entries,
        decision=decision,
        comparison=comparison,
        health=health,
        errors=graceful.errors,
        retried=policy.max_retries > 0,
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
    log.info("run_finished", **output.summary.model_dump())
    return output


async def _health(source: ProteinSource) -> list[ServiceHealth]:
    """Probe the data source (``ping()`` if it has one, else one known entry)
    and, when an API key is set, the model service (listing one model)."""
    ping = getattr(source, "ping", None) or partial(source.fetch, "P04637")
    checks = [await probe(f"{source.name} data source", ping)]
    if os.environ.get("ANTHROPIC_API_KEY"):
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

    with anthropic.Anthropic(max_retries=0, timeout=2.0) as client:
        return client.models.list(limit=1)


async def _quorum(
    entries: list[ProteinEntry],
    policy: QuorumPolicy,
    fan_out: Callable[[list[str]], Awaitable[list[ProteinEntry]]],
) -> tuple[list[ProteinEntry], QuorumDecision]:
    """Decide; while a critical protein failed and rounds remain, retry it first."""
    for round_ in range(policy.critical_retries + 1):
        decision = decide(
            [conclude.outcome_of(e) for e in entries],
            policy,
            retries_left=round_ < policy.critical_retries,
        )
        log.info(
            "quorum_decision",
            action=decision.action,
            met=decision.met,
            confidence=decision.confidence,
            reason=decision.reason,
            round=round_,
        )
        if decision.action != "retry_critical":
            return entries, decision
        again = {e.protein_id: e for e in await fan_out(decision.retry)}
        entries = [again.get(e.protein_id, e) for e in entries]
    return entries, decision


async def _compare(
    entries: Sequence[ProteinEntry], requested: Sequence[str], *, allowed: bool
) -> Comparison | None:
    figures = {e.protein_id: e.figures for e in entries if not isinstance(e, FailedAnalysis)}
    return compare(figures, requested, allowed=allowed)


analyze_sync = blocking(analyze, "analyze_sync", "Blocking form of :func:`analyze`.")


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
    if isinstance(ids, str):
        ids = [ids]
    seen: dict[str, None] = {}
    for raw in ids:
        ok, value = validate_protein_id(raw)
        seen.setdefault(value if ok else str(raw), None)
    return list(seen)


@dataclass(frozen=True)
class ProteinWork:
    """One protein's analysis as an executor runs it: ``await work(protein_id)``.

    A durable executor (:mod:`lyra.durable`) runs :meth:`child` in a worker,
    rebuilt there from :meth:`options`, and :meth:`finish` here: both paths
    classify, write the run directory and call ``on_result`` the same way.
    """

    source: ProteinSource
    timeout: float
    policy: RecoveryPolicy
    plan: Plan
    faults: Mapping[str, tuple[Fault, ...]]
    run_dir: RunDir | None = None
    on_result: Callable[[ProteinEntry], None] | None = None

    async def __call__(self, protein_id: str) -> ProteinEntry:
        entry, report = await self.child(protein_id)
        return self.finish(entry, report)

    async def child(
        self,
        protein_id: str,
        *,
        state: ProteinState | None = None,
        replay: Replay | None = None,
        task_id: str | None = None,
    ) -> tuple[ProteinEntry, str]:
        """The protein's child under its recovery loop: its entry and last report.

        A durable workflow passes ``replay`` (each attempt a checkpointed step
        that runs :meth:`attempt`), the ``state`` those steps keep up to date,
        and a ``task_id`` that is the same on every replay.
        """
        state = state if state is not None else self.new_state(protein_id)
        outcome = await recover(
            f"Analyze {protein_id}",
            child=self._child(protein_id, state),
            base_timeout=self.timeout,
            policy=self.policy,
            subject=protein_id,
            context={"plan": self.plan},
            task_id=task_id,
            replay=replay,
        )
        return entry_for(state, outcome), outcome.report

    def new_state(self, protein_id: str) -> ProteinState:
        """The protein's progress before its first attempt."""
        return ProteinState(protein_id, plan_for("", self.plan))

    async def attempt(
        self, protein_id: str, state: ProteinState, plan: RecoveryPlan, number: int, *, task_id: str
    ) -> DelegationResult:
        """One attempt of the protein's recovery loop, continuing from ``state``
        (which it updates): what a durable workflow's step runs."""
        return await attempt_plan(
            self._child(protein_id, state),
            plan,
            number,
            subject=protein_id,
            context={"plan": self.plan},
            task_id=task_id,
        )

    def _child(self, protein_id: str, state: ProteinState) -> ProteinChild:
        faults = self.faults.get(protein_id, ())
        return ProteinChild(self.source, faults=faults, states={protein_id: state})

    def finish(self, entry: ProteinEntry, report: str) -> ProteinEntry:
        """Write the protein's report and brief to the run directory; call ``on_result``."""
        if self.run_dir is not None:
            self.run_dir.save(self.run_dir.report(entry.protein_id), report)
            if isinstance(entry, CompletedAnalysis | PartialAnalysis):
                self.run_dir.save(self.run_dir.brief(entry.protein_id), entry.brief)
        if self.on_result is not None:
            self.on_result(entry)
        return entry

    def options(self) -> AnalysisOptions:
        """These settings as data; ConfigurationError when they cannot leave this
        process (a custom source, Python fixers)."""
        if self.policy.fixers:
            raise ConfigurationError("a durable run cannot send Python fixers to its workers")
        if self.policy.decomposer is not None:
            raise ConfigurationError("a durable run cannot send a Python decomposer to its workers")
        if isinstance(self.source, LiveSource):
            urls = {"afdb_url": self.source.afdb_url, "uniprot_url": self.source.uniprot_url}
            return AnalysisOptions(source="live", **urls, **self._settings())
        if type(self.source) is OfflineSource:
            return AnalysisOptions(source="offline", **self._settings())
        raise ConfigurationError(
            f"a durable run needs the offline or live source, not {type(self.source).__name__}"
        )

    def _settings(self) -> dict[str, Any]:
        faults = tuple(f for group in self.faults.values() for f in group)
        return {"timeout": self.timeout, "policy": self.policy, "plan": self.plan, "faults": faults}


class AnalysisOptions(FrozenModel):
    """A protein analysis's settings as plain data (JSON), so that another
    process -- a durable worker -- rebuilds the same :class:`ProteinWork`."""

    source: Literal["offline", "live"] = "offline"
    afdb_url: str | None = None
    uniprot_url: str | None = None
    timeout: float = 300.0
    policy: RecoveryPolicy = Field(default_factory=lambda: RecoveryPolicy(max_retries=0))
    plan: Plan = "full"
    faults: tuple[Fault, ...] = ()

    def work(self) -> ProteinWork:
        """The work these options describe (no run directory, no hook)."""
        source: ProteinSource = OfflineSource()
        if self.source == "live":
            urls: dict[str, Any] = {"afdb_url": self.afdb_url, "uniprot_url": self.uniprot_url}
            source = LiveSource(**{key: url for key, url in urls.items() if url})
        return ProteinWork(
            source=source,
            timeout=self.timeout,
            policy=self.policy,
            plan=self.plan,
            faults=faults_by_protein(self.faults),
        )


def entry_for(state: ProteinState, outcome: RecoveryOutcome) -> ProteinEntry:
    """Classify one protein's end state into its output entry."""
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
    reasoning = state.reusable("reason") or {}
    figures = {
        "name": summary.get("description"),
        "mean_plddt": structure.get("mean_plddt"),
        "well_folded_fraction": structure.get("well_folded_fraction"),
        "reliability": structure.get("reliability"),
        "tractability": reasoning.get("tractability"),
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


def _internal_error(protein_id: str, exc: Exception) -> FailedAnalysis:
    """lyra's own bug while handling one protein: that protein fails, no other."""
    log.error("protein_internal_error", subject=protein_id, error=exception_text(exc))
    return _unfinished(protein_id, exception_text(exc))


def _unfinished(protein_id: str, why: str) -> FailedAnalysis:
    return FailedAnalysis(
        protein_id=protein_id,
        failed_at_stage="fetch_protein",
        error=f"Internal error in lyra: {why}",
        tasks_skipped=[],
        category=FailureCategory.TOOL_ERROR,
    )
