"""The analysis stages of DESIGN §6, rule-based and deterministic.

``analyze_structure → reason → critique → synthesize`` (a structure-only plan
ends with :func:`structure_summary`). Every number in their output is read from
the summary or computed from it; where data are missing the text says
"unknown" instead of guessing. A stage that cannot work returns ``{"error": …}``
(a soft failure, PRD-001).

AlphaFold's pLDDT bands: very low < 50, low 50–<70, confident 70–<90,
very high >= 90.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from lyra.proteins._sources import finite_number
from lyra.proteins._text import render

__all__ = [
    "BANDS",
    "LOW_CONFIDENCE_PLDDT",
    "MIN_REGION_LENGTH",
    "analyze_structure",
    "band_of",
    "critique",
    "reason",
    "structure_summary",
    "synthesize",
]

BANDS: Final = ("very_low", "low", "confident", "very_high")
LOW_CONFIDENCE_PLDDT: Final = 70.0
MIN_REGION_LENGTH: Final = 5
_BAND_FLOOR: Final = {"very_low": 0.0, "low": 50.0, "confident": 70.0, "very_high": 90.0}
_BAND_CEILING: Final = {"very_low": 50.0, "low": 70.0, "confident": 90.0, "very_high": 100.0}
_BAND_LABEL: Final = {
    "very_high": "very high (≥ 90)",
    "confident": "confident (70–90)",
    "low": "low (50–70)",
    "very_low": "very low (below 50)",
}
_BRIEF_REGIONS: Final = 10  # regions listed in a brief; the rest are counted


# --------------------------------------------------------------------------- helpers


def band_of(plddt: float) -> str:
    """The AlphaFold band of one pLDDT value."""
    if plddt < 50:
        return "very_low"
    if plddt < 70:
        return "low"
    return "confident" if plddt < 90 else "very_high"


def _num(value: float) -> str:
    """A figure as data show it: ``41.29``, ``1863``, ``18.5``."""
    return f"{round(value, 2):g}"


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


def _usable(stage: object) -> Mapping[str, Any] | None:
    """A stage result that exists and is not a soft failure."""
    if isinstance(stage, Mapping) and "error" not in stage:
        return stage
    return None


def _protein_id(summary: Mapping[str, Any]) -> str:
    value = summary.get("uniprot_id")
    return value if isinstance(value, str) and value else "unknown protein"


def _length(summary: Mapping[str, Any]) -> int | None:
    value = summary.get("length")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _fractions(value: object) -> dict[str, float] | None:
    """The four band fractions if all are numbers, else None."""
    if not isinstance(value, Mapping):
        return None
    found = {band: finite_number(value.get(band)) for band in BANDS}
    if any(number is None for number in found.values()):
        return None
    return {band: float(number or 0.0) for band, number in found.items()}


def _per_residue(value: object) -> list[float] | None:
    """Per-residue pLDDT if it is a non-empty list of numbers, else None."""
    if not isinstance(value, list) or not value:
        return None
    numbers = [finite_number(item) for item in value]
    if any(number is None for number in numbers):
        return None
    return [float(number or 0.0) for number in numbers]


# --------------------------------------------------------------------------- structure


def _mean(values: Sequence[float]) -> float:
    """Mean to 2 decimals, summed exactly as the dataset builder does (plain ``sum``),
    so a mean computed here equals the bundled ``global_plddt`` even on a tie."""
    return round(sum(values) / len(values), 2)


def _regions(values: Sequence[float]) -> list[dict[str, Any]]:
    """Runs of >= 5 residues with pLDDT < 70: 1-based inclusive start/end and mean."""
    regions: list[dict[str, Any]] = []
    start: int | None = None
    for index, value in enumerate([*values, math.inf]):  # the sentinel closes a final run
        if value < LOW_CONFIDENCE_PLDDT:
            start = index if start is None else start
            continue
        if start is not None and index - start >= MIN_REGION_LENGTH:
            run = values[start:index]
            regions.append(
                {
                    "start": start + 1,
                    "end": index,
                    "length": index - start,
                    "mean_plddt": _mean(run),
                }
            )
        start = None
    return regions


def _residue_figures(values: Sequence[float]) -> dict[str, Any]:
    counts = dict.fromkeys(BANDS, 0)
    for value in values:
        counts[band_of(value)] += 1
    n = len(values)
    return {
        "residues": n,
        "mean_plddt": _mean(values),
        "min_plddt": min(values),
        "max_plddt": max(values),
        "fractions": {band: round(counts[band] / n, 3) for band in BANDS},
        "low_confidence_regions": _regions(values),
    }


def _reliability(mean: float | None) -> str:
    if mean is None:
        return "unknown"
    if mean >= 90:
        return "high"
    return "medium" if mean >= 70 else "low"


def analyze_structure(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Confidence figures of the AlphaFold model, or ``{"error": "No structure data for …"}``.

    With per-residue pLDDT: mean, min, max, band fractions and low-confidence
    regions (a list, possibly empty). Without it: the global pLDDT and the
    fractions if known; ``min``/``max``/``residues`` None and regions None
    (unknown -- not "none").
    """
    protein_id = _protein_id(summary)
    alphafold = summary.get("alphafold")
    if not isinstance(alphafold, Mapping):
        return {"error": f"No structure data for {protein_id}: no AlphaFold model"}
    values = _per_residue(alphafold.get("plddt"))
    if values is not None:
        figures = _residue_figures(values)
    else:
        figures = {
            "residues": None,
            "mean_plddt": finite_number(alphafold.get("global_plddt")),
            "min_plddt": None,
            "max_plddt": None,
            "fractions": _fractions(alphafold.get("fractions")),
            "low_confidence_regions": None,
        }
        if figures["mean_plddt"] is None and figures["fractions"] is None:
            return {"error": f"No structure data for {protein_id}: no pLDDT figures"}
    fractions = figures["fractions"]
    result: dict[str, Any] = {
        "uniprot_id": protein_id,
        "entry_id": alphafold.get("entry_id"),
        "model_version": alphafold.get("model_version"),
        "per_residue": values is not None,
        **figures,
        "well_folded_fraction": (
            round(fractions["confident"] + fractions["very_high"], 3) if fractions else None
        ),
        "low_confidence_fraction": (
            round(fractions["very_low"] + fractions["low"], 3) if fractions else None
        ),
        "reliability": _reliability(figures["mean_plddt"]),
    }
    result["summary"] = _structure_text(result)
    return result


def _structure_text(s: Mapping[str, Any]) -> str:
    """One paragraph describing the figures in ``s``."""
    version = f" (v{s['model_version']})" if s["model_version"] else ""
    model = f"AlphaFold model {s['entry_id']}{version}" if s["entry_id"] else "The AlphaFold model"
    parts: list[str] = []
    if s["mean_plddt"] is None:
        parts.append(f"{model} has no recorded mean pLDDT.")
    elif s["per_residue"]:
        parts.append(
            f"{model} covers {s['residues']} residues with mean pLDDT {_num(s['mean_plddt'])} "
            f"(range {_num(s['min_plddt'])}–{_num(s['max_plddt'])}), "
            f"so its overall reliability is {s['reliability']}."
        )
    else:
        parts.append(
            f"{model} has a mean pLDDT of {_num(s['mean_plddt'])} "
            f"(overall reliability {s['reliability']}); only whole-protein figures are available."
        )
    if s["fractions"]:
        shares = ", ".join(f"{_pct(s['fractions'][b])} {_BAND_LABEL[b]}" for b in reversed(BANDS))
        parts.append(f"Residues by confidence band: {shares}.")
    parts.append(_regions_sentence(s["low_confidence_regions"]))
    return " ".join(parts)


def _regions_sentence(regions: list[dict[str, Any]] | None) -> str:
    if regions is None:
        return "Low-confidence regions cannot be located without per-residue pLDDT."
    if not regions:
        return "No stretch of 5 or more residues has pLDDT below 70."
    longest = max(regions, key=lambda r: r["length"])
    covered = sum(r["length"] for r in regions)
    return (
        f"{len(regions)} low-confidence region(s) (pLDDT below 70, at least 5 residues) cover "
        f"{covered} residues; the longest is residues {longest['start']}–{longest['end']} "
        f"(mean pLDDT {_num(longest['mean_plddt'])})."
    )


# --------------------------------------------------------------------------- reasoning


def _assessment(mean: float | None, fractions: Mapping[str, float] | None) -> tuple[str, str]:
    """``(tractability, sentence)`` from the confidence figures alone."""
    if fractions is not None:
        well = fractions["confident"] + fractions["very_high"]
        disorder = fractions["very_low"]
        if well >= 0.7:
            return "favourable", (
                f"Structurally favourable: {_pct(well)} of residues have pLDDT ≥ 70, so a "
                "confident model covers most of the protein for structure-based design."
            )
        if disorder >= 0.5:
            return "challenging", (
                f"Structurally challenging: {_pct(disorder)} of residues have pLDDT below 50 "
                f"(likely disordered) and only {_pct(well)} have pLDDT ≥ 70, so structure-based "
                "design would be limited to the ordered parts."
            )
        return "mixed", (
            f"Mixed: {_pct(well)} of residues have pLDDT ≥ 70 and {_pct(disorder)} have "
            "pLDDT below 50; ordered domains may be targetable on their own."
        )
    if mean is not None:
        level = "favourable" if mean >= 90 else "mixed" if mean >= 70 else "challenging"
        return level, (
            f"Tentatively {level}: the mean pLDDT is {_num(mean)}, but the per-residue "
            "distribution is unknown, so ordered and disordered parts cannot be told apart."
        )
    return "unknown", "Assessment unknown: there are no AlphaFold confidence figures."


def _length_sentence(length: int | None) -> str:
    return f"Sequence length: {length} residues." if length else "Sequence length: unknown."


def reason(summary: Mapping[str, Any], structure: Mapping[str, Any] | None) -> dict[str, Any]:
    """A rule-based drug-target assessment and hypotheses, each citing its number.

    Returns ``drug_target_assessment`` (text), ``tractability``
    (favourable/mixed/challenging/unknown), ``hypotheses`` and ``evidence``
    (the figures used; None where unknown).
    """
    s = _usable(structure) or {}
    mean = finite_number(s.get("mean_plddt"))
    fractions = _fractions(s.get("fractions"))
    length = _length(summary)
    tractability, sentence = _assessment(mean, fractions)
    assessment = (
        f"{sentence} {_length_sentence(length)} This judges structural tractability only; "
        "binding sites and ligandability were not assessed."
    )
    return {
        "drug_target_assessment": assessment,
        "tractability": tractability,
        "hypotheses": _hypotheses(length, mean, fractions, s),
        "evidence": {
            "mean_plddt": mean,
            "well_folded_fraction": s.get("well_folded_fraction"),
            "disordered_fraction": fractions["very_low"] if fractions else None,
            "length": length,
        },
    }


def _hypotheses(
    length: int | None,
    mean: float | None,
    fractions: Mapping[str, float] | None,
    s: Mapping[str, Any],
) -> list[str]:
    found: list[str] = []
    if mean is not None:
        found.append(_mean_hypothesis(mean))
    if fractions is not None:
        if fractions["very_low"] >= 0.2:
            found.append(
                f"{_pct(fractions['very_low'])} of residues have pLDDT below 50, consistent with "
                "intrinsically disordered regions (which may fold only on binding a partner)."
            )
        if fractions["very_high"] >= 0.2:
            found.append(
                f"{_pct(fractions['very_high'])} of residues have pLDDT ≥ 90: at least one "
                "well-ordered domain is likely, a candidate for structure-based work."
            )
    found.extend(_region_hypotheses(s.get("low_confidence_regions"), s.get("residues")))
    if length is not None and length < 50:
        found.append(
            f"At {length} residues it is a short peptide: a small-molecule pocket is unlikely; "
            "peptide or biologic approaches fit better."
        )
    elif length is not None and length > 1000:
        found.append(
            f"At {length} residues it is large and likely multi-domain; domains would be "
            "assessed separately."
        )
    return found


def _mean_hypothesis(mean: float) -> str:
    m = _num(mean)
    if mean >= 90:
        return f"Mean pLDDT {m} (≥ 90): backbone and most side chains are likely modelled well."
    if mean >= 70:
        return (
            f"Mean pLDDT {m} (70–90): the fold is likely right overall; loops and termini less so."
        )
    if mean >= 50:
        return f"Mean pLDDT {m} (50–70): much of the model is uncertain; parts may be flexible."
    return f"Mean pLDDT {m} (below 50): most of the chain is probably disordered in isolation."


def _region_hypotheses(regions: object, residues: object) -> list[str]:
    if not isinstance(regions, list):
        return []
    if not regions:
        return [f"No stretch of 5 or more of the {residues} residues has pLDDT below 70."]
    longest = max(regions, key=lambda r: r["length"])
    where = "an N-terminal" if longest["start"] == 1 else "a"
    if longest["end"] == residues:
        where = "a C-terminal" if where == "a" else "a chain-spanning"
    return [
        f"The longest low-confidence stretch is residues {longest['start']}–{longest['end']} "
        f"({longest['length']} residues, mean pLDDT {_num(longest['mean_plddt'])}), "
        f"likely {where} flexible or disordered segment."
    ]


# --------------------------------------------------------------------------- critique

_LEVELS: Final = ("low", "medium", "high")


def _fraction_bounds(fractions: Mapping[str, float]) -> tuple[float, float]:
    """The lowest and highest mean pLDDT the band fractions allow."""
    low = math.fsum(fractions[b] * _BAND_FLOOR[b] for b in BANDS)
    high = math.fsum(fractions[b] * _BAND_CEILING[b] for b in BANDS)
    return low, high


def critique(
    summary: Mapping[str, Any],
    structure: Mapping[str, Any] | None,
    reasoning: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Caveats of the analysis and ``confidence_in_reasoning`` (high/medium/low)."""
    s = _usable(structure)
    if s is None:
        return {
            "caveats": ["No structure analysis was available, so no confidence figure was used."],
            "confidence_in_reasoning": "low",
            "basis": "no structure analysis",
        }
    caveats = ["pLDDT is AlphaFold's predicted confidence, not experimental evidence of structure."]
    caveats.extend(_data_caveats(summary, s))
    problems = _consistency_caveats(summary, s)
    caveats.extend(problems)
    if _usable(reasoning) is None:
        caveats.append("No reasoning stage result was available to check.")
    level, basis = _confidence(summary, s, downgrade=bool(problems))
    return {"caveats": caveats, "confidence_in_reasoning": level, "basis": basis}


def _data_caveats(summary: Mapping[str, Any], s: Mapping[str, Any]) -> list[str]:
    caveats: list[str] = []
    fractions = _fractions(s.get("fractions"))
    if not s.get("per_residue"):
        caveats.append(
            "No per-residue pLDDT: low-confidence regions cannot be located; the figures "
            "describe the whole protein only."
        )
        if fractions is not None and s.get("mean_plddt") is not None:
            version = s.get("model_version")
            caveats.append(
                "The mean pLDDT and the band fractions were not computed from the same "
                "per-residue data here, so they may come from different AlphaFold model versions"
                + (f" (recorded version: v{version})." if version else ".")
            )
    if not s.get("model_version"):
        caveats.append("The AlphaFold model version is not recorded.")
    if fractions is not None and fractions["very_low"] >= 0.3:
        caveats.append(
            f"{_pct(fractions['very_low'])} of residues have pLDDT below 50: pLDDT alone cannot "
            "tell true disorder from a poor prediction, and disordered parts may fold on binding."
        )
    if _length(summary) is None:
        caveats.append("The sequence length is unknown.")
    if any("secondary" in str(source) for source in summary.get("sources") or []):
        caveats.append(
            "Some values come from a lower-trust secondary source (figures quoted elsewhere)."
        )
    return caveats


def _consistency_caveats(summary: Mapping[str, Any], s: Mapping[str, Any]) -> list[str]:
    """Caveats for figures that contradict each other."""
    caveats: list[str] = []
    fractions = _fractions(s.get("fractions"))
    mean = finite_number(s.get("mean_plddt"))
    if fractions is not None:
        total = math.fsum(fractions.values())
        if abs(total - 1) > 0.01:
            caveats.append(f"The band fractions sum to {round(total, 3)}, not 1.")
        low, high = _fraction_bounds(fractions)
        if mean is not None and not low - 0.5 <= mean <= high + 0.5:
            caveats.append(
                f"The mean pLDDT {_num(mean)} is outside the range the band fractions allow "
                f"({_num(low)}–{_num(high)}): the figures may come from different models."
            )
    residues, length = s.get("residues"), _length(summary)
    if isinstance(residues, int) and length is not None and residues != length:
        caveats.append(f"The model covers {residues} residues but the sequence has {length}.")
    return caveats


def _confidence(
    summary: Mapping[str, Any], s: Mapping[str, Any], *, downgrade: bool
) -> tuple[str, str]:
    """``(level, basis)``: data richness, lowered once for each weakness."""
    if s.get("per_residue"):
        level, basis = 2, "per-residue pLDDT"
    elif s.get("fractions") is not None:
        level, basis = 1, "whole-protein pLDDT and band fractions"
    else:
        level, basis = 0, "a single whole-protein pLDDT"
    weaknesses = [
        ("inconsistent figures", downgrade),
        ("unknown length", _length(summary) is None),
        ("secondary sources", any("secondary" in str(x) for x in summary.get("sources") or [])),
    ]
    named = [name for name, present in weaknesses if present]
    level = max(0, level - len(named))
    return _LEVELS[level], basis + (f"; lowered for {', '.join(named)}" if named else "")


# --------------------------------------------------------------------------- synthesis


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _protein_view(protein_id: str, summary: Mapping[str, Any]) -> dict[str, Any]:
    gene = _text(summary.get("gene"))
    length = _length(summary)
    description = _text(summary.get("description"))
    function = _text(summary.get("function"))
    return {
        "id": protein_id,
        "name": description or "unnamed protein",
        "organism": _text(summary.get("organism")) or "unknown",
        "gene": gene if gene and gene.lower() != "unknown" else "unknown",
        "length": f"{length} residues" if length else "unknown",
        "source": _text(summary.get("source")) or "unknown",
        "function": function if function and function != description else None,
    }


def _structure_view(structure: Mapping[str, Any] | None) -> dict[str, Any] | None:
    s = _usable(structure)
    if s is None:
        return None
    mean, fractions = finite_number(s.get("mean_plddt")), _fractions(s.get("fractions"))
    regions = s.get("low_confidence_regions")
    version = s.get("model_version")
    return {
        "model": s.get("entry_id") or "unknown entry",
        "version": f"v{version}" if version else "unknown version",
        "mean": _num(mean) if mean is not None else "unknown",
        "range": (
            f"{_num(s['min_plddt'])}–{_num(s['max_plddt'])}"
            if s.get("min_plddt") is not None and s.get("max_plddt") is not None
            else None
        ),
        "reliability": s.get("reliability") or "unknown",
        "bands": [(_BAND_LABEL[b], _pct(fractions[b])) for b in reversed(BANDS)]
        if fractions
        else None,
        "regions": _region_lines(regions) if isinstance(regions, list) else None,
        "more_regions": max(0, len(regions) - _BRIEF_REGIONS) if isinstance(regions, list) else 0,
        "summary": s.get("summary") or "",
    }


def _region_lines(regions: Iterable[Mapping[str, Any]]) -> list[str]:
    return [
        f"residues {r['start']}–{r['end']} ({r['length']} residues, mean pLDDT "
        f"{_num(r['mean_plddt'])})"
        for r in list(regions)[:_BRIEF_REGIONS]
    ]


def synthesize(
    protein_id: str,
    summary: Mapping[str, Any],
    structure: Mapping[str, Any] | None = None,
    reasoning: Mapping[str, Any] | None = None,
    critique: Mapping[str, Any] | None = None,
    missing_stages: Sequence[str] = (),
) -> str:
    """The Markdown research brief; says plainly which analyses are missing, if any."""
    r, c = _usable(reasoning), _usable(critique)
    return render(
        "protein_brief.md.j2",
        protein=_protein_view(protein_id, summary),
        structure=_structure_view(structure),
        assessment=_text(r.get("drug_target_assessment")) if r else None,
        hypotheses=[str(h) for h in r.get("hypotheses") or []] if r else [],
        caveats=[str(x) for x in c.get("caveats") or []] if c else None,
        confidence=_text(c.get("confidence_in_reasoning")) if c else None,
        missing=list(missing_stages),
    )


def structure_summary(
    protein_id: str, summary: Mapping[str, Any], structure: Mapping[str, Any] | None
) -> str:
    """A short Markdown text for a structure-only plan."""
    return render(
        "protein_structure.md.j2",
        protein=_protein_view(protein_id, summary),
        structure=_structure_view(structure),
        problem=_text(structure.get("error")) if isinstance(structure, Mapping) else None,
    )
