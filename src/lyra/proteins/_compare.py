"""Cross-protein comparison: whose *predicted structure* is best, and why.

Only the prediction is compared: no ranking of drug targets is made from
pLDDT. The criterion is the share of residues with pLDDT ≥ 70 (confident or
very high), among the proteins whose band fractions are known; a protein known
only by its whole-model mean is named but not ranked (one number over ordered
and disordered parts alike, from whichever model version and source had it, is
no measure of where the confidence is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict


class Comparison(BaseModel):
    """The comparison of several proteins, or why it was skipped."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    compared: list[str]
    best_predicted_structure: str | None = None
    basis: str | None = None
    """Why: the criterion and the figures that decided."""
    left_out: list[str] = []
    unranked: list[str] = []
    """Proteins known only by a whole-model mean pLDDT: named, not ranked."""
    skipped_reason: str | None = None

    def lines(self) -> list[str]:
        """The comparison as short sentences for the answer."""
        if self.skipped_reason:
            return [f"Comparison skipped: {self.skipped_reason}."]
        lines = []
        if self.best_predicted_structure:
            lines.append(
                f"Best predicted structure: {self.best_predicted_structure} ({self.basis}). "
                "This compares predictions, not drug targets."
            )
        if self.unranked:
            lines.append(
                f"Not ranked (only a whole-model mean pLDDT is known): {', '.join(self.unranked)}."
            )
        if self.left_out:
            lines.append(f"Not compared (analysis missing): {', '.join(self.left_out)}.")
        return lines


def compare(
    figures: Mapping[str, Mapping[str, Any]], requested: Sequence[str], *, allowed: bool
) -> Comparison | None:
    """Compare the proteins with figures; ``None`` when fewer than two were asked for."""
    if len(requested) < 2:
        return None
    left_out = [p for p in requested if p not in figures or figures[p].get("mean_plddt") is None]
    usable = [p for p in requested if p not in left_out]
    if not allowed:
        return Comparison(compared=[], left_out=left_out, skipped_reason="the quorum was not met")
    if len(usable) < 2:
        return Comparison(
            compared=usable,
            left_out=left_out,
            skipped_reason="fewer than two proteins have usable figures",
        )
    ranked = [p for p in usable if figures[p].get("well_folded_fraction") is not None]
    unranked = [p for p in usable if p not in ranked]
    if len(ranked) < 2:
        return Comparison(
            compared=ranked,
            left_out=left_out,
            unranked=unranked,
            skipped_reason="band fractions (the share of residues at pLDDT ≥ 70) are known "
            "for fewer than two of them, and a whole-model mean ranks no structure",
        )
    best = max(ranked, key=lambda p: figures[p]["well_folded_fraction"])
    shares = ", ".join(f"{p} {figures[p]['well_folded_fraction'] * 100:.1f}%" for p in ranked)
    why = f"largest share of residues with pLDDT ≥ 70: {shares}"
    return Comparison(
        compared=ranked,
        best_predicted_structure=best,
        basis=why,
        left_out=left_out,
        unranked=unranked,
    )
