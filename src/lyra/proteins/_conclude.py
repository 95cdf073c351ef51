"""From entries to a conclusion: quorum outcomes, figures, the answer's facts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lyra.proteins._compare import Comparison
from lyra.proteins._confidence import figure
from lyra.proteins._next import next_steps as grouped_steps
from lyra.proteins._output import CompletedAnalysis, PartialAnalysis, ProteinEntry, Summary
from lyra.proteins._sources import named_source, version_text
from lyra.supervisor import AnswerFacts, ChildOutcome, ErrorContext, QuorumDecision, ServiceHealth


def outcome_of(entry: ProteinEntry) -> ChildOutcome:
    """The quorum view of one protein's entry."""
    if isinstance(entry, CompletedAnalysis):
        return ChildOutcome(subject=entry.protein_id, outcome="completed")
    if isinstance(entry, PartialAnalysis):
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
    entries: Sequence[ProteinEntry],
    *,
    summary: Summary | None = None,
    decision: QuorumDecision | None,
    comparison: Comparison | None,
    health: Sequence[ServiceHealth],
    errors: Sequence[ErrorContext],
    retried: bool,
    unreachable: ServiceHealth | None = None,
) -> AnswerFacts:
    """What the final answer may say (``retried``: the run already retried failures).

    ``summary`` gives the counts when ``entries`` are only a sample (a streamed run):
    ``more`` then says how many more of each there are.
    """
    found: list[str] = []
    partial: list[str] = []
    failed: list[str] = []
    next_steps = grouped_steps(entries, unreachable)
    for entry in entries:
        if isinstance(entry, CompletedAnalysis):
            found.append(_found_line(entry))
            continue
        if isinstance(entry, PartialAnalysis):
            partial.append(f"{_found_line(entry)}; {entry.failed_at_stage} failed: {entry.error}")
        else:
            failed.append(
                f"{entry.shown_id}: {entry.category or 'error'} at "
                f"{entry.failed_at_stage}: {entry.error}"
            )
    retryable = [e for e in entries if not isinstance(e, CompletedAnalysis) and e.retryable]
    if unreachable is not None:  # no retry reaches a network that cannot be reached
        retryable = [e for e in retryable if e.error_type != "connection"]
    if not retried and retryable:
        next_steps.append("Run again with --retries 2 to recover the retryable failures")
    more: dict[str, int] = {}
    if summary is not None:
        for key, lines, total in (
            ("found", found, summary.successful),
            ("partial", partial, summary.partial),
            ("failed", failed, summary.failed),
        ):
            if total > len(lines):
                more[key] = total - len(lines)
    unlisted = more.get("partial", 0) + more.get("failed", 0)
    if unlisted:  # (a streamed run: the lines above name the sample only)
        next_steps.append(
            f"The lines above name only the proteins listed; {unlisted} more not completed "
            "are in results.jsonl, each with its error and suggested actions"
        )
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
        more=more,
    )


def _found_line(entry: CompletedAnalysis | PartialAnalysis) -> str:
    """A protein in one line: its model, where its confidence is, the whole-model mean
    (with its source when no per-residue data stand behind it), and how a failed attempt
    was recovered."""
    f = entry.figures
    model = f.get("model") or {}
    named = ", ".join(
        x
        for x in (
            f.get("name"),
            f"{model['entry_id']} {version_text(model['version'], model.get('version_basis'))}"
            if model.get("entry_id") and model.get("version")
            else None,
        )
        if x
    )
    parts = [entry.protein_id + (f" ({named})" if named else "")]
    largest = f.get("largest_unit")
    if largest:
        parts.append(
            f"{f['units']} structural unit(s), the largest residues {largest['where']} "
            f"(mean pLDDT {figure(largest['mean_plddt'])}, {largest['band']}; {largest['pae']})"
        )
    elif f.get("per_residue") and f.get("units") == 0:
        parts.append("no ordered unit of 20 or more residues")
    if f.get("mean_plddt") is not None:
        parts.append(f"whole-model mean pLDDT {figure(f['mean_plddt'])}{_whole_model_note(f)}")
    line = ", ".join(parts)
    return f"{line}; {entry.recovery}" if entry.recovery else line


def _whole_model_note(f: dict[str, Any]) -> str:
    """Where a whole-model mean comes from, when no per-residue data stand behind it."""
    if f.get("per_residue"):
        return ""
    source = (f.get("model") or {}).get("source")
    named = f"{named_source(source)}; " if source else ""
    return f" ({named}no per-residue data)"
