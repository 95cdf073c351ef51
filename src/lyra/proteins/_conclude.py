"""From entries to a conclusion: quorum outcomes, figures, the answer's facts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lyra.delegation import extract_suggested_actions
from lyra.proteins._compare import Comparison
from lyra.supervisor import AnswerFacts, ChildOutcome, ErrorContext, QuorumDecision, ServiceHealth


def outcome_of(entry: Any) -> ChildOutcome:
    """The quorum view of one protein's entry."""
    kind = type(entry).__name__
    if kind == "CompletedAnalysis":
        return ChildOutcome(subject=entry.protein_id, outcome="completed")
    if kind == "PartialAnalysis":
        return ChildOutcome(
            subject=entry.protein_id,
            outcome="partial",
            completeness=completeness(entry.tasks),
            retryable=entry.retryable,
        )
    return ChildOutcome(
        subject=entry.protein_id, outcome="failed", completeness=0.0, retryable=entry.retryable
    )


def completeness(tasks: Sequence[Any]) -> float:
    """Share of planned stages that succeeded (a partial synthesis counts half)."""
    if not tasks:
        return 0.0
    score = sum(
        1.0 if t.status == "success" else 0.5 if t.status == "partial" else 0.0 for t in tasks
    )
    return round(score / len(tasks), 3)


def facts(
    question: str,
    entries: Sequence[Any],
    *,
    decision: QuorumDecision | None,
    comparison: Comparison | None,
    health: Sequence[ServiceHealth],
    errors: Sequence[ErrorContext],
) -> AnswerFacts:
    """What the final answer may say."""
    found, partial, failed, next_steps = [], [], [], []
    for entry in entries:
        kind = type(entry).__name__
        if kind == "CompletedAnalysis":
            found.append(_found_line(entry))
        elif kind == "PartialAnalysis":
            partial.append(f"{_found_line(entry)}; {entry.failed_at_stage} failed: {entry.error}")
        else:
            failed.append(
                f"{entry.protein_id}: {entry.category or 'error'} at "
                f"{entry.failed_at_stage}: {entry.error}"
            )
        if kind != "CompletedAnalysis":
            next_steps += extract_suggested_actions(entry.report)[:1]
    if any(getattr(e, "retryable", False) for e in entries):
        next_steps.append("Run again with --retries 2 to recover the retryable failures")
    return AnswerFacts(
        question=question,
        found=found,
        partial=partial,
        failed=failed,
        comparison=comparison.lines() if comparison else [],
        quorum=decision,
        health=list(health),
        errors=list(errors),
        next_steps=list(dict.fromkeys(next_steps)),
    )


def _found_line(entry: Any) -> str:
    f = entry.figures
    parts = [f"{entry.protein_id}" + (f" ({f['name']})" if f.get("name") else "")]
    if f.get("mean_plddt") is not None:
        parts.append(
            f"mean pLDDT {f['mean_plddt']} ({f.get('reliability', 'unknown')} reliability)"
        )
    if f.get("tractability"):
        parts.append(f"tractability {f['tractability']}")
    return ", ".join(parts)
