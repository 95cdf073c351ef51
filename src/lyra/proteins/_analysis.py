"""The analysis stages of DESIGN §6, rule-based and deterministic.

``analyze_structure → reason → critique → synthesize`` (a structure-only plan
ends with :func:`structure_summary`). Every number in their output is read from
the data or computed from it, and names its source; where data are missing the
text says so and how to get them. A stage that cannot work returns
``{"error": …}`` (a soft failure, PRD-001).

Confidence lives in segments (:mod:`lyra.proteins._confidence`), structural
units and the PAE between them (:mod:`lyra.proteins._units`), and the UniProt
features mapped onto them (:mod:`lyra.proteins._features`); the whole-model
mean pLDDT is one line among others, never "the protein's reliability".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from lyra.proteins._caveats import basis, critique
from lyra.proteins._confidence import BAND_NAMES, BANDS, band_of, span
from lyra.proteins._features import PROCESSED_TYPES, SITE_TYPES
from lyra.proteins._structure import analyze_structure
from lyra.proteins._text import render

__all__ = [
    "BANDS",
    "analyze_structure",
    "band_of",
    "critique",
    "num",
    "reason",
    "structure_summary",
    "synthesize",
]

_BAND_RANGE: Final = {
    "very_high": "very high (≥ 90)",
    "confident": "confident (70–90)",
    "low": "low (50–70)",
    "very_low": "very low (below 50)",
}
_USE: Final = {
    "very_high": "backbone and most side chains modelled to high accuracy: fit for "
    "structure-based work such as docking or interface design within it",
    "confident": "backbone likely right, side chains less so: fit for work on the fold and "
    "positions of residues; check side chains before docking",
}


def num(value: float) -> str:
    """A figure as data show it: ``41.29``, ``1863``, ``18.5``."""
    return f"{round(value, 2):g}"


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


def _usable(stage: object) -> Mapping[str, Any] | None:
    """A stage result that exists and is not a soft failure."""
    if isinstance(stage, Mapping) and "error" not in stage:
        return stage
    return None


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _model_name(s: Mapping[str, Any]) -> str:
    """``AlphaFold DB model AF-P05067-F1 v6 (2025-08-01)``."""
    version = f" v{s['model_version']}" if s.get("model_version") else " (version not recorded)"
    date = f", created {s['model_date']}" if s.get("model_date") else ""
    return f"AlphaFold DB model {s.get('entry_id') or '(entry id unknown)'}{version}{date}"


# --------------------------------------------------------------------------- reasoning


def reason(summary: Mapping[str, Any], structure: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the model supports, part by part; no ranking of targets from pLDDT.

    Returns ``drug_target_assessment`` (text: what pLDDT can and cannot say for
    structure-based work), ``hypotheses`` (one line per unit or stretch, each
    citing its figures) and ``evidence`` (the figures used; None where unknown).
    """
    s = _usable(structure) or {}
    lines: list[str] = []
    units = s.get("units") or []
    for unit in units:
        use = _USE.get(band_of(unit["mean_plddt"]))
        if use:
            lines.append(
                f"Unit {unit['number']} (residues {unit['where']}, {unit['residues']} residues, "
                f"mean pLDDT {num(unit['mean_plddt'])}, {unit['band']}): {use}."
            )
    if not units and s.get("segments"):
        for seg in s["segments"]:
            use = _USE.get(band_of(seg["mean_plddt"]))
            if seg["kind"] == "ordered" and use:
                lines.append(
                    f"Residues {seg['start']}–{seg['end']} (mean pLDDT "
                    f"{num(seg['mean_plddt'])}, {seg['band']}): {use}."
                )
    for seg in s.get("segments") or []:
        if seg["kind"] == "very_low" and seg["length"] >= 20:
            lines.append(
                f"Residues {seg['start']}–{seg['end']} ({seg['length']} residues, mean pLDDT "
                f"{num(seg['mean_plddt'])}, very low): likely disordered in isolation or "
                "ordered only with a partner; no structure-based work there."
            )
    if s and not s.get("per_residue"):
        lines.append(
            "Without per-residue pLDDT the usable parts cannot be located: the whole-model "
            f"mean pLDDT {num(s['mean_plddt']) if s.get('mean_plddt') is not None else 'unknown'} "
            "mixes ordered and disordered residues."
        )
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
            "well_folded_fraction": s.get("well_folded_fraction"),
            "units": len(units) if s.get("units") is not None else None,
            "length": summary.get("length"),
        },
    }


# --------------------------------------------------------------------------- synthesis


def _protein_view(protein_id: str, summary: Mapping[str, Any]) -> dict[str, Any]:
    gene = _text(summary.get("gene"))
    length = summary.get("length")
    description = _text(summary.get("description"))
    function = _text(summary.get("function"))
    return {
        "id": protein_id,
        "name": description or "unnamed protein",
        "organism": _text(summary.get("organism")) or "unknown",
        "gene": gene if gene and gene.lower() != "unknown" else "unknown",
        "length": f"{length} residues" if isinstance(length, int) and length > 0 else "unknown",
        "source": _text(summary.get("source")) or "unknown",
        "function": function if function and function != description else None,
        "afdb_url": f"https://alphafold.ebi.ac.uk/entry/{protein_id}",
        "uniprot_url": f"https://www.uniprot.org/uniprotkb/{protein_id}/entry",
    }


def _uniprot_name(uniprot: Mapping[str, Any]) -> str:
    """``UniProtKB … (Rel. 48, last annotated 2005-09-13: old annotation)``."""
    parts = [p for p in (uniprot.get("release"), uniprot.get("entry_version")) if p]
    version = ", ".join(f"entry version {p}" if isinstance(p, int) else str(p) for p in parts)
    date = uniprot.get("date")
    when = f"last annotated {date}" if date else "annotation date not recorded"
    old = date is not None and str(date) < "2020"
    return (
        f"{uniprot.get('source')} ({version + ', ' if version else ''}{when}"
        f"{': old annotation, today’s entry may differ' if old else ''})"
    )


def _site_lines(features: Sequence[Mapping[str, Any]]) -> list[str]:
    """Binding and metal sites grouped by ligand, with the pLDDT at each."""
    by_ligand: dict[str, list[Mapping[str, Any]]] = {}
    for feature in features:
        if feature["type"] in SITE_TYPES:
            key = feature.get("ligand") or feature.get("description") or feature["type"]
            by_ligand.setdefault(str(key), []).append(feature)
    lines = []
    for ligand, sites in by_ligand.items():
        where = ", ".join(span(f["start"], f["end"]) for f in sites)
        values = ", ".join(num(f["mean_plddt"]) for f in sites)
        lines.append(f"{ligand}: residues {where}; pLDDT {values}")
    return lines


def _structure_view(
    structure: Mapping[str, Any] | None, summary: Mapping[str, Any]
) -> dict[str, Any] | None:
    s = _usable(structure)
    if s is None:
        return None
    fractions = s.get("fractions")
    features = s.get("features")
    uniprot = summary.get("uniprot")
    mature = [f for f in features or [] if f["type"] in ("Chain", "Peptide")]
    return {
        "model": _model_name(s),
        "model_file": s.get("model_file"),
        "pae_file": s.get("pae_file"),
        "per_residue": s.get("per_residue"),
        "segments": s.get("segments"),
        "fraying": s.get("fraying") or [],
        "units": s.get("units"),
        "unit_pae": s.get("unit_pae"),
        "features": [
            f for f in features or [] if f["type"] not in SITE_TYPES | {"Chain", "Peptide"}
        ],
        "mature": mature,
        "processed": [f for f in features or [] if f["type"] in PROCESSED_TYPES],
        "sites": _site_lines(features or []),
        "uniprot": _uniprot_name(uniprot) if isinstance(uniprot, Mapping) else None,
        "mean": num(s["mean_plddt"]) if s.get("mean_plddt") is not None else "unknown",
        "range": (
            f"{num(s['min_plddt'])}–{num(s['max_plddt'])}"
            if s.get("min_plddt") is not None
            else None
        ),
        "bands": [(_BAND_RANGE[b], _pct(fractions[b])) for b in reversed(BANDS)]
        if fractions
        else None,
        "missing": s.get("missing") or [],
        "num": num,
        "span": span,
    }


def synthesize(
    protein_id: str,
    summary: Mapping[str, Any],
    structure: Mapping[str, Any] | None = None,
    reasoning: Mapping[str, Any] | None = None,
    critique: Mapping[str, Any] | None = None,
    missing_stages: Sequence[str] = (),
) -> str:
    """The Markdown research brief; leads with confidence along the chain."""
    r, c = _usable(reasoning), _usable(critique)
    return render(
        "protein_brief.md.j2",
        protein=_protein_view(protein_id, summary),
        structure=_structure_view(structure, summary),
        problem=_text(structure.get("error")) if isinstance(structure, Mapping) else None,
        assessment=_text(r.get("drug_target_assessment")) if r else None,
        hypotheses=[str(h) for h in r.get("hypotheses") or []] if r else [],
        caveats=[str(x) for x in c.get("caveats") or []] if c else None,
        basis=[str(x) for x in c.get("basis") or []] if c else basis(summary, structure),
        missing=list(missing_stages),
        names=BAND_NAMES,
    )


def structure_summary(
    protein_id: str, summary: Mapping[str, Any], structure: Mapping[str, Any] | None
) -> str:
    """A short Markdown text for a structure-only plan."""
    return render(
        "protein_structure.md.j2",
        protein=_protein_view(protein_id, summary),
        structure=_structure_view(structure, summary),
        problem=_text(structure.get("error")) if isinstance(structure, Mapping) else None,
    )
