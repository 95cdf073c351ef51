"""The ``reason`` stage: what the model supports, part by part.

One line per structural unit (its use from its band, and whether PAE confirms
it as one rigid unit), per confident stretch too short to be a unit, and per
low or very low segment that is long or that UniProt's features explain. No
ranking of targets from pLDDT: pLDDT says how confident the model is, not
whether a protein is a good target.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from lyra.proteins._confidence import BAND_NAMES, band_of, figure, span
from lyra.proteins._features import EXPLAIN_OVERLAP
from lyra.proteins._pae import RIGID_PAE, unit_verdict
from lyra.proteins._sources import fetch_hint
from lyra.proteins._units import MIN_UNIT_LENGTH

__all__ = ["reason"]

_USE: Final = {
    "very_high": "backbone and most side chains modelled to high accuracy: fit for "
    "structure-based work such as docking or interface design within it",
    "confident": "backbone likely right, side chains less so: fit for work on the fold and "
    "positions of residues; check side chains before docking",
    "low": "low confidence overall: no structure-based work",
    "very_low": "very low confidence overall: no structure-based work",
}
_GRADE: Final = {
    "very_high": "docking-grade within it",
    "confident": "fold-level",
    "low": "not for structure-based work",
    "very_low": "not for structure-based work",
}
_BELOW: Final = {
    "very_low": "likely disordered in isolation, ordered only with a partner, or poorly "
    "predicted; no structure-based work there",
    "low": "low confidence: at most a rough backbone; no structure-based work there",
}
_TARGETED: Final = re.compile(r",\s*(chloroplastic|mitochondrial)\b", re.IGNORECASE)
"""UniProt's way of naming a nuclear-encoded protein imported into an organelle
(``Ferredoxin-1, chloroplastic``; ``Citrate synthase, mitochondrial``): most such
proteins are made with an N-terminal transit peptide cleaved on import. A name that
only mentions the organelle (``Mitochondrial-derived peptide MOTS-c``, encoded in
the mitochondrial genome) says nothing of import."""


def _usable(stage: object) -> Mapping[str, Any] | None:
    if isinstance(stage, Mapping) and "error" not in stage:
        return stage
    return None


def _head(seg: Mapping[str, Any]) -> str:
    return (
        f"Residues {span(seg['start'], seg['end'])} ({seg['length']} residues, mean pLDDT "
        f"{figure(seg['mean_plddt'])}, {seg['band']})"
    )


def _partly(part: Mapping[str, Any]) -> tuple[int, int] | None:
    """(very high residues, all residues) of a part whose mean is in the very high band
    while some of its residues are not; ``None`` otherwise. Docking needs pLDDT ≥ 90
    residue by residue: a very high mean promises it for none in particular."""
    counts = part.get("by_band")
    if counts is None or band_of(part["mean_plddt"]) != "very_high":
        return None
    total = sum(counts.values())
    return None if counts["very_high"] == total else (counts["very_high"], total)


def _use(unit: Mapping[str, Any]) -> str:
    """What a unit that is one piece is fit for, from its band and its residues'."""
    partly = _partly(unit)
    if partly is None:
        return _USE[band_of(unit["mean_plddt"])]
    high, total = partly
    return (
        f"fit for work on the fold; for docking or interface design only at its {high} very "
        f"high residues ({total - high} of {total} are below 90: check them first)"
    )


def _grade(seg: Mapping[str, Any]) -> str:
    """A segment's grade, from its band and its residues'."""
    partly = _partly(seg)
    if partly is None:
        return _GRADE[band_of(seg["mean_plddt"])]
    high, total = partly
    below = total - high
    return (
        f"fold-level, docking-grade only at its {high} very high residues "
        f"({below} of {total} below 90)"
    )


def _unit_line(unit: Mapping[str, Any], segments: Mapping[int, Mapping[str, Any]]) -> str:
    """A unit's use: from its band when it is one piece (one segment, or PAE confirms
    it rigid); segment by segment when its arrangement is not confirmed."""
    head = (
        f"Unit {unit['number']} (residues {unit['where']}, {unit['residues']} residues, "
        f"mean pLDDT {figure(unit['mean_plddt'])}, {unit['band']})"
    )
    check = unit.get("pae")
    if check is not None and check["rigid"]:
        return f"{head}: {_use(unit)}; {unit_verdict(check)}."
    if len(unit["ranges"]) == 1:
        if check is None:
            return f"{head}: {_use(unit)}; not checked against PAE (no PAE)."
        return (
            f"{head}: {unit['band']} by its mean, but {unit_verdict(check)}: "
            "use it locally, not as a rigid body."
        )
    within = {p["where"]: p["within_pae"] for p in (check or {}).get("segments") or []}
    parts = "; ".join(_segment_use(segments[s], within.get(span(s, e))) for s, e in unit["ranges"])
    return (
        f"{head}: {unit_verdict(check, len(unit['ranges']))}. Work within each segment as its "
        f"band allows ({parts}), not on their relative placement."
    )


def _segment_use(seg: Mapping[str, Any], within: float | None) -> str:
    """One segment of a unit whose arrangement is not confirmed: its use from its band,
    and, with PAE, only where the segment is itself one rigid piece (``within``: the mean
    PAE within it)."""
    head = f"{span(seg['start'], seg['end'])} {seg['band']} ({figure(seg['mean_plddt'])}"
    grade = _grade(seg)
    if within is None:
        return f"{head}): {grade}"
    if within < RIGID_PAE:
        return f"{head}; mean PAE {figure(within)} Å within it): {grade}"
    return (
        f"{head}; mean PAE {figure(within)} Å within it, not one rigid piece by PAE): locally only"
    )


def _features_note(seg: Mapping[str, Any]) -> str | None:
    """What UniProt's features say a stretch is (``None``: no features are known; the
    brief says once that they are missing)."""
    features = seg.get("features")
    if features is None:
        return None
    if not features:
        within = seg.get("crossing")
        # (not "covers": a long region spanning the stretch does, and says nothing of it)
        return (
            "no UniProt feature other than a chain or a site shares at least "
            f"{EXPLAIN_OVERLAP:.0%} of its residues and of its own"
        ) + (f" (within it or across its ends: {'; '.join(within)})" if within else "")
    notes = []
    for text in features:
        if text.startswith(("Signal", "Transit peptide", "Propeptide")):
            notes.append(f"{text} (removed in the mature protein)")
        elif text.startswith("Region: Disordered") and "predicted from" not in text:
            notes.append(f"{text} (annotated disordered)")
        else:
            notes.append(text)
    return "UniProt: " + "; ".join(notes)


def _pae_note(seg: Mapping[str, Any]) -> str | None:
    """Where PAE places a stretch relative to each unit."""
    found = [
        f"to unit {p['unit']} {figure(p['mean_pae'])} Å ({figure(p['aligned_on_second'])} Å "
        f"aligned on the unit, {figure(p['aligned_on_first'])} Å aligned on the stretch): "
        f"{p['placement']}"
        for p in seg.get("pae") or []
    ]
    return "PAE " + "; ".join(found) if found else None


def _short_line(seg: Mapping[str, Any], summary: Mapping[str, Any], alone: bool) -> str:
    """A confident stretch under the length of a unit."""
    text = f"{_head(seg)}: a confident stretch too short to be a unit (under {MIN_UNIT_LENGTH})"
    features = seg.get("features") or []
    if any(f.startswith(("Transmembrane", "Intramembrane")) for f in features):
        use = "the membrane helix is predicted confidently; no membrane is modelled" + (
            ""
            if seg.get("pae")
            else ", and its placement against the rest of the protein is not checked (no PAE)"
        )
    elif alone:
        use = (
            f"the whole chain is {summary.get('length')} residues modelled alone: a locally "
            "confident stretch, not a fold to work on; bound to a partner or a membrane "
            "its conformation may differ"
        )
    else:
        use = "locally confident (its backbone, residue by residue); no fold of its own"
    parts = [text, use, _features_note(seg), _pae_note(seg)]
    return "; ".join(p for p in parts if p) + "."


def _below_line(seg: Mapping[str, Any], summary: Mapping[str, Any]) -> str:
    """A low or very low segment, interpreted where the data allow."""
    parts = [f"{_head(seg)}: {_BELOW[seg['kind']]}", _features_note(seg), _pae_note(seg)]
    name = str(summary.get("description") or "")
    targeted = _TARGETED.search(name)
    if seg["start"] == 1 and not seg.get("features") and targeted:
        parts.append(
            f"UniProt names the protein {targeted.group(1).lower()}, imported into the "
            "organelle: most such proteins are made with an N-terminal transit peptide, "
            "cleaved on import, which this stretch may be (UniProt's features would say; "
            f"{fetch_hint(summary, 'UniProt')})"
        )
    return "; ".join(p for p in parts if p) + "."


def _unlocated(s: Mapping[str, Any]) -> str:
    """What whole-model figures alone can say: how much is in each band, not where."""
    fractions = s.get("fractions")
    if fractions:
        shares = ", ".join(
            f"{fractions[band] * 100:.1f}% {BAND_NAMES[band]}"
            for band in ("very_high", "confident", "low", "very_low")
            if fractions[band]
        )
        return (
            "Without per-residue pLDDT the usable parts cannot be located: the band "
            f"fractions say how many residues are in each band ({shares}), not where."
        )
    mean = figure(s["mean_plddt"]) if s.get("mean_plddt") is not None else "unknown"
    return (
        "Without per-residue pLDDT the usable parts cannot be located: the whole-model "
        f"mean pLDDT {mean} may mix ordered and disordered residues."
    )


def reason(summary: Mapping[str, Any], structure: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the model supports, part by part; no ranking of targets from pLDDT.

    Returns ``drug_target_assessment`` (text: what pLDDT can and cannot say for
    structure-based work), ``hypotheses`` (one line per unit or stretch, each
    citing its figures) and ``evidence`` (the figures used; None where unknown).
    """
    s = _usable(structure) or {}
    lines: list[str] = []
    units = s.get("units") or []
    segments: Sequence[Mapping[str, Any]] = s.get("segments") or []
    by_start = {seg["start"]: seg for seg in segments}
    lines += [_unit_line(unit, by_start) for unit in units]
    for seg in segments:
        if seg.get("unit") is not None:
            continue
        if seg["kind"] == "ordered":
            lines.append(_short_line(seg, summary, alone=not units))
        elif seg["length"] >= MIN_UNIT_LENGTH or seg.get("features"):
            lines.append(_below_line(seg, summary))
    if s and not s.get("per_residue"):
        lines.append(_unlocated(s))
    assessment = (
        "pLDDT describes how confident the model is, not whether the protein is a good drug "
        "target: no pocket, ligandability, selectivity or biology was assessed, and no "
        "ranking of targets is made from it. Structure-based work can use only the parts "
        "predicted confidently (listed below)."
        if s
        else "Assessment unavailable: no structure analysis."
    )
    return {
        "drug_target_assessment": assessment,
        "hypotheses": lines,
        "evidence": {
            "mean_plddt": s.get("mean_plddt"),
            "fraction_at_plddt_70_or_more": s.get("fraction_at_plddt_70_or_more"),
            "units": len(units) if s.get("units") is not None else None,
            "length": summary.get("length"),
        },
    }
