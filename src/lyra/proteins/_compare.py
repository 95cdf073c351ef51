"""Cross-protein comparison: whose structure is more reliable, which target is
more promising. Only proteins whose analyses are usable are compared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

_TRACTABILITY = {"favourable": 3, "mixed": 2, "challenging": 1, "unknown": 0}


class Comparison(BaseModel):
    """The comparison of several proteins, or why it was skipped."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    compared: list[str]
    most_reliable_structure: str | None = None
    most_promising_target: str | None = None
    ranking: list[dict[str, Any]] = []
    left_out: list[str] = []
    skipped_reason: str | None = None

    def lines(self) -> list[str]:
        """The comparison as short sentences for the answer."""
        if self.skipped_reason:
            return [f"Comparison skipped: {self.skipped_reason}."]
        lines = []
        if self.most_reliable_structure:
            lines.append(
                f"Most reliable structure: {self.most_reliable_structure} "
                f"(highest mean pLDDT among {', '.join(self.compared)})."
            )
        if self.most_promising_target:
            lines.append(f"Most promising drug target by structure: {self.most_promising_target}.")
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
    ranking = sorted(
        ({"protein_id": p, **dict(figures[p])} for p in usable),
        key=lambda row: (
            _TRACTABILITY.get(str(row.get("tractability")), 0),
            row.get("well_folded_fraction") or 0.0,
            row["mean_plddt"],
        ),
        reverse=True,
    )
    reliable = max(usable, key=lambda p: figures[p]["mean_plddt"])
    assessed = any(figures[p].get("tractability") for p in usable)  # not in structure-only plans
    return Comparison(
        compared=usable,
        most_reliable_structure=reliable,
        most_promising_target=ranking[0]["protein_id"] if assessed else None,
        ranking=ranking,
        left_out=left_out,
    )
