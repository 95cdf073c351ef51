"""Cross-protein comparison: like with like, each figure with its model and source.

Only predictions are compared, and nothing is ranked: no protein is "best"
from a whole-model mean or a share of residues, figures over ordered and
disordered parts alike. Proteins are set side by side unit by unit (each
unit's range, mean pLDDT, band and PAE check) and domain by domain where
UniProt's domains are mapped, each with its model's entry, version and file, and
the domains with the UniProt file their boundaries come from (an isoform's mapped
from the canonical sequence).
A protein without an ordered unit, or known only by whole-model figures, is
named with what the data hold, not compared. Figures from a lower-trust
secondary source, and models of different AlphaFold DB versions, say so in
the line that uses them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from lyra.proteins._confidence import figure
from lyra.proteins._sources import named_source, version_text


class ComparedProtein(BaseModel):
    """One protein's side of the comparison: its model and what can be compared."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    protein_id: str
    model: str
    """``AF-P05067-F1 v6``: the AlphaFold DB entry and model version."""
    version: int | None = None
    version_labelled: bool = False
    """The version is only a collector's label for the figures, not stated by a source."""
    source: str
    """The file (or URL) the figures come from, a lower-trust one labelled."""
    units: list[str] = []
    domains: list[str] = []
    domains_source: str | None = None
    """The UniProt file the domain boundaries come from (an isoform's: mapped from the
    canonical sequence)."""
    not_compared: str | None = None
    """Why this protein has nothing to compare (no ordered unit, whole-model figures only)."""

    def line(self) -> str:
        """The protein's figures in one line, named by model and source."""
        where = f"{self.protein_id} ({self.model}; {self.source})"
        if self.not_compared:
            return f"{where}: {self.not_compared}"
        parts = [f"unit {u}" for u in self.units]
        if self.domains:
            source = self.domains_source or "source not recorded"
            parts.append(f"UniProt domains ({source}) " + ", ".join(self.domains))
        return f"{where}: " + "; ".join(parts)


class Comparison(BaseModel):
    """The comparison of several proteins, or why it was skipped."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    compared: list[str]
    proteins: list[ComparedProtein] = []
    versions: str | None = None
    """Set when the models compared are of different AlphaFold DB versions."""
    left_out: list[str] = []
    skipped_reason: str | None = None

    def lines(self) -> list[str]:
        """The comparison as short sentences for the answer."""
        if self.skipped_reason:
            return [f"Comparison skipped: {self.skipped_reason}."]
        lines = [
            "Unit by unit and domain by domain, each figure with its model and source "
            "(predictions, not drug targets; no protein is ranked on a whole-model mean or "
            "share):"
        ]
        lines += [p.line() for p in self.proteins]
        if self.versions:
            lines.append(self.versions)
        if self.left_out:
            lines.append(f"Not compared (analysis missing): {', '.join(self.left_out)}.")
        return lines


def _unit_text(unit: Mapping[str, Any]) -> str:
    return (
        f"{unit['number']} {unit['where']} ({unit['residues']} residues, mean pLDDT "
        f"{figure(unit['mean_plddt'])}, {unit['band']}; {unit['pae']})"
    )


def _compared(protein_id: str, figures: Mapping[str, Any]) -> ComparedProtein:
    model = figures.get("model") or {}
    version = version_text(model.get("version"), model.get("version_basis"))
    version = f" {version}" if version else ", version not in this data"
    source = model.get("source")
    side = {
        "protein_id": protein_id,
        "model": f"{model.get('entry_id') or 'entry id not in this data'}{version}",
        "version": model.get("version"),
        "version_labelled": bool(model.get("version_basis")),
        "source": named_source(source) if source else "source not recorded",
    }
    units = figures.get("unit_list") or []
    if not figures.get("per_residue"):
        share = figures.get("fraction_at_plddt_70_or_more")
        shares = f"; {share * 100:.1f}% of residues at pLDDT ≥ 70" if share is not None else ""
        return ComparedProtein(
            **side,
            not_compared=f"whole-model figures only (mean pLDDT {figure(figures['mean_plddt'])}"
            f"{shares}): no unit to compare",
        )
    if not units:
        stretch = figures.get("longest_confident")
        longest = (
            f"; its longest confident stretch is {stretch['where']} ({stretch['length']} "
            f"residues, mean pLDDT {figure(stretch['mean_plddt'])})"
            if stretch
            else ""
        )
        return ComparedProtein(**side, not_compared=f"no ordered unit{longest}: not compared")
    return ComparedProtein(
        **side,
        units=[_unit_text(u) for u in units],
        domains=[
            f"{d['label']} {figure(d['mean_plddt'])} ({d['band']})"
            for d in figures.get("domains") or []
        ],
        domains_source=figures.get("domains_source"),
    )


def _versions(proteins: Sequence[ComparedProtein]) -> str | None:
    """The sentence for models of different AlphaFold DB versions, if they differ."""
    by_version: dict[str, list[str]] = {}
    for protein in sorted(
        proteins, key=lambda p: (not p.version, p.version or 0, p.version_labelled)
    ):
        by_version.setdefault(_version_group(protein), []).append(protein.protein_id)
    numbers = {p.version for p in proteins}
    if len(numbers) < 2:
        return None
    groups = "; ".join(f"{v}: {', '.join(sorted(ids))}" for v, ids in by_version.items())
    known = len(numbers - {None})
    said = "of different AlphaFold DB versions" if known > 1 else "not all of a known version"
    return (
        f"The models are {said} ({groups}): each figure is its own model's, and a later "
        "release may differ."
    )


_UNKNOWN = "version not in this data"


def _version_group(protein: ComparedProtein) -> str:
    """``v6``; a version only a collector's label gives keeps the briefs' hedge."""
    if not protein.version:
        return _UNKNOWN
    if protein.version_labelled:
        return f"labelled v{protein.version} by its collector (not stated by its source)"
    return f"v{protein.version}"


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
    proteins = [_compared(p, figures[p]) for p in usable]
    return Comparison(
        compared=usable, proteins=proteins, versions=_versions(proteins), left_out=left_out
    )
