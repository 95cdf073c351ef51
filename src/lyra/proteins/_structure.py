"""The ``analyze_structure`` stage: confidence where it lives, and what is missing.

From the summary a source returned: the model's segments, structural units and
what PAE says of them (its confidence profile), the UniProt features mapped
onto per-residue pLDDT, every stretch outside the units (a short confident
helix, a low or very low segment) with the features that explain it, and the
whole-model figures as one line among others. ``fraction_at_plddt_70_or_more``
is the share of residues at pLDDT ≥ 70 (confident or very high). Where a datum
is missing the result names it and how to get it. Without any AlphaFold DB
model the stage is a soft failure that says so (``missing_model``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lyra.proteins._confidence import BANDS, band_of, mean
from lyra.proteins._features import crossing, explaining, label, map_features
from lyra.proteins._sources import fetch_hint, finite_number, named_source

LIVE_HINT = fetch_hint({}, "AlphaFold DB")  # "run with --source live to fetch it …"

__all__ = ["analyze_structure", "fractions_of", "per_residue"]


def per_residue(value: object) -> list[float] | None:
    """Per-residue pLDDT if it is a non-empty list of numbers, else None."""
    if not isinstance(value, list) or not value:
        return None
    numbers = [finite_number(item) for item in value]
    if any(number is None for number in numbers):
        return None
    return [float(number or 0.0) for number in numbers]


def fractions_of(value: object) -> dict[str, float] | None:
    """The four band fractions if all are numbers, else None."""
    if not isinstance(value, Mapping):
        return None
    found = {band: finite_number(value.get(band)) for band in BANDS}
    if any(number is None for number in found.values()):
        return None
    return {band: float(number or 0.0) for band, number in found.items()}


def _protein_id(summary: Mapping[str, Any]) -> str:
    value = summary.get("uniprot_id")
    return value if isinstance(value, str) and value else "unknown protein"


def _figures(values: Sequence[float]) -> dict[str, Any]:
    counts = dict.fromkeys(BANDS, 0)
    for value in values:
        counts[band_of(value)] += 1
    return {
        "residues": len(values),
        "mean_plddt": mean(values),
        "min_plddt": min(values),
        "max_plddt": max(values),
        "fractions": {band: round(counts[band] / len(values), 3) for band in BANDS},
        # counted, not the sum of two rounded fractions (0.288 + 0.266 for 427 of 770)
        "fraction_at_plddt_70_or_more": round(
            (counts["confident"] + counts["very_high"]) / len(values), 3
        ),
    }


def _missing(alphafold: Mapping[str, Any], summary: Mapping[str, Any]) -> list[str]:
    """What the analysis could not use, and how to get it."""
    missing: list[str] = []
    profile = alphafold.get("profile") or {}
    hint = fetch_hint(summary, "AlphaFold DB")
    if per_residue(alphafold.get("plddt")) is None:
        missing.append(
            f"per-residue pLDDT (segments, units and features cannot be located without it; {hint})"
        )
    else:
        if profile.get("units") is None:
            missing.append(f"the model's coordinates (structural units need them; {hint})")
        if profile.get("unit_pae") is None:
            missing.append(f"the PAE file (checking the units and placing them needs it; {hint})")
    if summary.get("uniprot") is None and not summary.get("isoform_of"):
        missing.append(
            "a UniProt entry with features (domains, regions, sites); "
            + fetch_hint(summary, "UniProt")
        )
    return missing


def _no_figures(
    protein_id: str, alphafold: Mapping[str, Any], summary: Mapping[str, Any]
) -> dict[str, Any]:
    """The soft failure for a model without a single figure: one the data at hand
    lack (its entry is known offline: fetch it live), or none at all."""
    entry_id = alphafold.get("entry_id") if summary.get("source") != "live" else None
    if entry_id:
        source = alphafold.get("entry_id_source")
        said = f", according to {named_source(source)}" if source and "secondary" in source else ""
        return {
            "error": f"No structure data for {protein_id}: AlphaFold DB models it "
            f"({entry_id}{said}), but this data holds none of its figures; {LIVE_HINT}",
            "model_elsewhere": True,
        }
    return {
        "error": f"No structure data for {protein_id}: no AlphaFold DB model figures "
        "(no pLDDT at all)",
        "missing_model": True,
    }


def _segments(
    profile: Mapping[str, Any], features: Sequence[Mapping[str, Any]] | None
) -> list[dict[str, Any]] | None:
    """The segments, each with the unit it belongs to (``None``: outside the units --
    a confident stretch too short to be one, a low or very low segment), what UniProt's
    features say of it (:func:`_features_of`) and, outside the units, its PAE to each
    unit (empty where the PAE is not known)."""
    segments = profile.get("segments")
    if segments is None:
        return None
    owner = {
        r: u["number"] for u in profile.get("units") or [] for s, e in u["ranges"] for r in (s, e)
    }
    pae = profile.get("segment_pae") or []
    return [
        {
            **seg,
            "unit": owner.get(seg["start"]),
            **_features_of(seg, features),
            "pae": [p for p in pae if (p["start"], p["end"]) == (seg["start"], seg["end"])],
        }
        for seg in segments
    ]


def _features_of(
    seg: Mapping[str, Any], features: Sequence[Mapping[str, Any]] | None
) -> dict[str, list[str] | None]:
    """The labels of the features that explain a segment (``features``), and of those
    within it or across its ends (``crossing``); both ``None`` when no features are
    known."""
    if features is None:
        return {"features": None, "crossing": None}
    start, end = seg["start"], seg["end"]
    explained = explaining(features, start, end)
    return {
        "features": [label(f) for f in explained],
        "crossing": crossing(features, start, end, explained),
    }


def analyze_structure(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Confidence figures of the AlphaFold model, or a soft failure naming what is missing."""
    protein_id = _protein_id(summary)
    alphafold = summary.get("alphafold")
    if not isinstance(alphafold, Mapping):
        return {
            "error": f"No structure data for {protein_id}: AlphaFold DB has no model for it",
            "missing_model": True,
        }
    values = per_residue(alphafold.get("plddt"))
    if values is not None:
        figures = _figures(values)
    else:
        fractions = fractions_of(alphafold.get("fractions"))
        figures = {
            "residues": None,
            "mean_plddt": finite_number(alphafold.get("global_plddt")),
            "min_plddt": None,
            "max_plddt": None,
            "fractions": fractions,
            "fraction_at_plddt_70_or_more": (  # from the published, rounded fractions alone
                round(fractions["confident"] + fractions["very_high"], 3) if fractions else None
            ),
        }
        if figures["mean_plddt"] is None and figures["fractions"] is None:
            return _no_figures(protein_id, alphafold, summary)
    profile = alphafold.get("profile") if values is not None else None
    profile = profile if isinstance(profile, Mapping) else {}
    uniprot = summary.get("uniprot")
    annotated = list(uniprot.get("features") or []) if isinstance(uniprot, Mapping) else None
    features = map_features(annotated, values) if values is not None and annotated else None
    return {
        "uniprot_id": protein_id,
        "entry_id": alphafold.get("entry_id"),
        "model_version": alphafold.get("model_version"),
        "model_version_basis": alphafold.get("model_version_basis"),
        "model_date": alphafold.get("model_date"),
        "model_file": alphafold.get("model_file"),
        "pae_file": alphafold.get("pae_file"),
        "figures_source": alphafold.get("figures_source"),
        "file_global_plddt": alphafold.get("file_global_plddt"),
        "other_means": alphafold.get("other_means") or [],
        "per_residue": values is not None,
        **figures,
        "segments": _segments(profile, annotated),
        "fraying": profile.get("fraying"),
        "units": profile.get("units"),
        "unit_pae": profile.get("unit_pae"),
        "domain_pae": profile.get("domain_pae"),
        "pae_whole_angstroms": profile.get("pae_whole_angstroms"),
        "features": features,
        "annotated": annotated if values is None else None,
        "missing": _missing(alphafold, summary),
    }
