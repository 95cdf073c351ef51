"""The final output of a protein analysis run (DESIGN §6), as pydantic models."""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from lyra.delegation import FailureCategory, json_safe
from lyra.proteins._compare import Comparison
from lyra.proteins._text import render
from lyra.supervisor import ErrorContext, QuorumDecision, ServiceHealth


class FrozenModel(BaseModel):
    """A frozen pydantic model whose JSON text no report parser can misread."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    def model_dump_json(self, *args: Any, **kwargs: Any) -> str:
        """The JSON text with ``<``, ``>`` and ``&`` written as ``\\u`` escapes: the
        same data for a JSON parser, and no tag a data source's text could forge."""
        return json_safe(super().model_dump_json(*args, **kwargs))


class TaskLine(FrozenModel):
    """One stage of one protein, without its (large) result."""

    task_id: str
    task_type: str
    status: str
    error: str | None = None
    duration_seconds: float = 0.0


class _Named:
    """What the run's text calls a protein: its ID, a blank one ``(blank)``."""

    protein_id: str

    @property
    def shown_id(self) -> str:
        return self.protein_id if self.protein_id.strip() else "(blank)"


class CompletedAnalysis(_Named, FrozenModel):
    """A protein whose every planned stage succeeded."""

    protein_id: str
    brief: str
    attempts: int = 1
    recovery: str | None = None
    """How the attempts went when there were several (``attempt 1 (timeout 2 s): timeout;
    attempt 2 (continuation, timeout doubled to 4 s): completed``)."""
    figures: dict[str, Any] = Field(default_factory=dict)
    tasks: list[TaskLine] = Field(default_factory=list)


class _Failed(_Named, FrozenModel):
    protein_id: str
    failed_at_stage: str
    error: str
    tasks_skipped: list[str]
    additional_failures: list[dict[str, str]] = Field(default_factory=list)
    category: FailureCategory | None = None
    error_type: str | None = None
    """The finer cause under the category (``connection``, ``not_found``, …)."""
    retryable: bool = False
    attempts: int = 1
    recovery: str | None = None
    """How the attempts went when there were several."""
    report: str = ""
    suggested_actions: list[str] = Field(default_factory=list)
    """What to try next, from the report (text for a human; never executed)."""
    tasks: list[TaskLine] = Field(default_factory=list)


class PartialAnalysis(_Failed):
    """A protein with a brief written from incomplete analyses."""

    brief: str
    figures: dict[str, Any] = Field(default_factory=dict)


class FailedAnalysis(_Failed):
    """A protein with no brief: the root cause and what was skipped."""


class Summary(FrozenModel):
    """Counts that always add up to ``total_requested``: PRD-001's four keys, and
    ``unfinished`` for an interrupted run only."""

    total_requested: int
    successful: int
    partial: int
    failed: int
    unfinished: int | None = None
    """Proteins an interrupted run did not finish; ``None`` (and no key in the JSON)
    for a run that ended."""

    @model_serializer(mode="wrap")
    def _four_keys_unless_interrupted(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if self.unfinished is None and isinstance(data, dict):
            data.pop("unfinished", None)
        return data


class AnalysisOutput(FrozenModel):
    """The final output of a protein analysis run (DESIGN §6)."""

    completed_analyses: list[CompletedAnalysis]
    partial_analyses: list[PartialAnalysis]
    failed_analyses: list[FailedAnalysis]
    summary: Summary
    quorum: QuorumDecision | None = None
    comparison: Comparison | None = None
    health: list[ServiceHealth] = Field(default_factory=list)
    errors: list[ErrorContext] = Field(default_factory=list)
    answer: str | None = None
    notes: list[str] = Field(default_factory=list)
    """One line per ID that was resolved to another (``P53_HUMAN`` to ``P04637``)."""
    by_category: dict[str, int] = Field(default_factory=dict)
    """Failed and partial proteins by failure category."""
    results: str | None = None
    """The run directory's ``results.jsonl``: one line per protein, as each finished."""
    streamed: bool = False
    """True for a proteome-sized run: the entries are in :attr:`results` only."""
    interrupted: bool = False
    """True when the run was stopped (Ctrl+C, SIGTERM) before every protein finished:
    the entries are those that finished; :attr:`unfinished` names the rest."""
    unfinished: list[str] = Field(default_factory=list)
    """Proteins an interrupted run did not finish, in request order (also one a line
    in the run directory's ``unfinished.txt``, for ``--ids-file``)."""

    @classmethod
    def empty(cls) -> AnalysisOutput:
        """An output with no entries yet (a streamed run fills in the rest)."""
        zero = Summary(total_requested=0, successful=0, partial=0, failed=0)
        return cls(completed_analyses=[], partial_analyses=[], failed_analyses=[], summary=zero)

    @property
    def all_completed(self) -> bool:
        """True when every requested protein completed."""
        return self.summary.successful == self.summary.total_requested

    def text(self) -> str:
        """The human-readable result: briefs, then what failed, why and what to try
        (for a streamed run: the counts and the answer, not one line per protein)."""
        if self.streamed:
            return render("analysis_compact.txt.j2", output=self)
        failed = [
            {**entry.model_dump(), "next_step": next(iter(entry.suggested_actions), None)}
            for entry in self.failed_analyses
        ]
        return render(
            "analysis.txt.j2",
            answer=self.answer,
            completed=self.completed_analyses,
            partial=self.partial_analyses,
            failed=failed,
            summary=self.summary,
            notes=self.notes,
        )


ProteinEntry = CompletedAnalysis | PartialAnalysis | FailedAnalysis
