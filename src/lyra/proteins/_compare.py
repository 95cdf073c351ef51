"""Cross-protein comparison: whose *predicted structure* is best, and why.

Only the prediction is compared: no ranking of drug targets is made from
pLDDT. The criterion is the share of residues with pLDDT ≥ 70 (confident or
very high) where the band fractions are known, else the whole-model mean
pLDDT; the line says which one decided.
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
    if all(figures[p].get("well_folded_fraction") is not None for p in usable):
        best = max(usable, key=lambda p: figures[p]["well_folded_fraction"])
        shares = ", ".join(f"{p} {figures[p]['well_folded_fraction'] * 100:.1f}%" for p in usable)
        why = f"largest share of residues with pLDDT ≥ 70: {shares}"
    else:
        best = max(usable, key=lambda p: figures[p]["mean_plddt"])
        means = ", ".join(f"{p} {figures[p]['mean_plddt']}" for p in usable)
        why = f"highest whole-model mean pLDDT, as band fractions are not known for all: {means}"
    return Comparison(compared=usable, best_predicted_structure=best, basis=why, left_out=left_out)
