"""The ``analyze_structure`` stage: confidence where it lives, and what is missing.

From the summary a source returned: the model's segments, structural units and
PAE between units (its confidence profile), the UniProt features mapped onto
per-residue pLDDT, and the whole-model figures as one line among others. Where
a datum is missing the result names it and how to get it. Without any
AlphaFold DB model the stage is a soft failure that says so (``missing_model``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lyra.proteins._confidence import BANDS, band_of, mean
from lyra.proteins._features import map_features
from lyra.proteins._sources import finite_number

__all__ = ["analyze_structure", "fractions_of", "per_residue"]

LIVE_HINT = "run with --source live to fetch it from AlphaFold DB"


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
    }


def _missing(alphafold: Mapping[str, Any], summary: Mapping[str, Any]) -> list[str]:
    """What the analysis could not use, and how to get it."""
    missing: list[str] = []
    profile = alphafold.get("profile") or {}
    if per_residue(alphafold.get("plddt")) is None:
        missing.append(
            "per-residue pLDDT (segments, units and features cannot be located without it; "
            f"{LIVE_HINT})"
        )
    else:
        if profile.get("units") is None:
            missing.append(f"the model's coordinates (structural units need them; {LIVE_HINT})")
        if profile.get("unit_pae") is None:
            missing.append(f"the PAE file (confidence between units needs it; {LIVE_HINT})")
    if summary.get("uniprot") is None and not summary.get("isoform_of"):
        missing.append(
            "a UniProt entry with features (domains, regions, sites); run with --source live "
            "to fetch it from UniProt"
        )
    return missing


def _no_figures(
    protein_id: str, alphafold: Mapping[str, Any], summary: Mapping[str, Any]
) -> dict[str, Any]:
    """The soft failure for a model without a single figure: one the data at hand
    lack (its entry is known offline: fetch it live), or none at all."""
    entry_id = alphafold.get("entry_id") if summary.get("source") != "live" else None
    if entry_id:
        return {
            "error": f"No structure data for {protein_id}: AlphaFold DB models it "
            f"({entry_id}), but this data holds none of its figures; {LIVE_HINT}",
            "model_elsewhere": True,
        }
    return {
        "error": f"No structure data for {protein_id}: no AlphaFold DB model figures "
        "(no pLDDT at all)",
        "missing_model": True,
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
        figures = {
            "residues": None,
            "mean_plddt": finite_number(alphafold.get("global_plddt")),
            "min_plddt": None,
            "max_plddt": None,
            "fractions": fractions_of(alphafold.get("fractions")),
        }
        if figures["mean_plddt"] is None and figures["fractions"] is None:
            return _no_figures(protein_id, alphafold, summary)
    fractions = figures["fractions"]
    profile = alphafold.get("profile") if values is not None else None
    profile = profile if isinstance(profile, Mapping) else {}
    uniprot = summary.get("uniprot")
    features = None
    if values is not None and isinstance(uniprot, Mapping):
        features = map_features(uniprot.get("features") or [], values)
    return {
        "uniprot_id": protein_id,
        "entry_id": alphafold.get("entry_id"),
        "model_version": alphafold.get("model_version"),
        "model_date": alphafold.get("model_date"),
        "model_file": alphafold.get("model_file"),
        "pae_file": alphafold.get("pae_file"),
        "per_residue": values is not None,
        **figures,
        "well_folded_fraction": (
            round(fractions["confident"] + fractions["very_high"], 3) if fractions else None
        ),
        "segments": profile.get("segments"),
        "fraying": profile.get("fraying"),
        "units": profile.get("units"),
        "unit_pae": profile.get("unit_pae"),
        "features": features,
        "missing": _missing(alphafold, summary),
    }
