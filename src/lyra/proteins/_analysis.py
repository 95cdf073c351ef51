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

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from lyra.proteins._caveats import annotation_caveats, basis, critique, data_caveats
from lyra.proteins._confidence import (
    BAND_NAMES,
    BANDS,
    FRAYING_MAX,
    MERGE_GAP,
    MIN_SEGMENT_LENGTH,
    band_of,
    figure,
    num,
    span,
)
from lyra.proteins._features import (
    EXPLAIN_OVERLAP,
    KEPT_TYPES,
    MIXED,
    MIXED_SHARE,
    PROCESSED_TYPES,
    SITE_TYPES,
    holds_for,
)
from lyra.proteins._pae import PAE_PLACED, PAE_UNPLACED, RIGID_PAE, unit_verdict
from lyra.proteins._profile import DOMAIN_TYPES
from lyra.proteins._reasoning import reason
from lyra.proteins._sources import (
    fetch_hint,
    function_source,
    lower_trust,
    named_source,
    protein_name,
    version_text,
)
from lyra.proteins._structure import analyze_structure, per_residue
from lyra.proteins._text import render
from lyra.proteins._units import CONTACT_DISTANCE, MIN_CONTACTS, MIN_SEPARATION, MIN_UNIT_LENGTH

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
_ABSENT: Final = "not in this data"
_OLD_AFTER_YEARS: Final = 2
"""An annotation older than this many years is labelled old: today's entry may differ."""
_RULE: Final = (
    f"lyra's rule: a unit found from contacts is one rigid unit when the mean PAE within it, "
    f"and between each pair of its segments, is below {num(RIGID_PAE)} Å. The threshold is "
    "the PAE cutoff of pae_to_domains (T. Croll, github.com/tristanic/pae_to_domains; also "
    "in protti's predict_alphafold_domain and in ISOLDE), whose graph links two residues "
    f"only where their PAE is below {num(RIGID_PAE)} Å before it is clustered into "
    "pseudo-rigid domains; it links single residue pairs and clusters the graph, where lyra "
    "tests means over whole blocks. A mean within a unit or a segment leaves out each "
    "residue's PAE to itself (the diagonal: a residue aligned on itself, near 0 Å, says "
    "nothing of placement). Between two parts, a low mean PAE says their relative placement "
    "is confident and a high one that the model does not determine it, as AlphaFold's papers "
    "read PAE (Jumper et al. 2021; Tunyasuvunakool et al. 2021); the cutoffs are lyra's: "
    f"below {num(PAE_PLACED)} Å confident, above {num(PAE_UNPLACED)} Å not determined, "
    "uncertain between."
)

_WHOLE_ANGSTROMS: Final = (
    " This PAE file gives each value in whole ångströms (as AlphaFold DB's v4 files do): a "
    "mean's second decimal is arithmetic, not precision."
)


def _rule(s: Mapping[str, Any]) -> str:
    """The PAE rule, and what the file's precision allows where it rounds to whole Å."""
    return _RULE + (_WHOLE_ANGSTROMS if s.get("pae_whole_angstroms") else "")


_SEGMENTS_RULE: Final = (
    "How segments are cut: ordered stretches (pLDDT ≥ 70) and the low or very low "
    f"stretches between them; an ordered stretch broken by at most {MERGE_GAP} residues "
    f"below 70 stays one segment; a run of fewer than {MIN_SEGMENT_LENGTH} residues is no "
    "segment of its own (it joins a neighbouring one); a low or very low segment of at "
    f"most {FRAYING_MAX} residues at either end of the chain is terminal fraying, set apart."
)

_UNITS_RULE: Final = (
    f"How units are found: ordered segments of at least {MIN_UNIT_LENGTH} residues are one "
    f"unit when the model packs them together, with at least {MIN_CONTACTS} residue pairs "
    f"(at least {MIN_SEPARATION} apart in the sequence) whose CB atoms (CA for glycine) lie "
    f"within {num(CONTACT_DISTANCE)} Å. Contacts say the segments touch in the model, not "
    "that it is confident of how: a unit joined by few contacts is weak evidence without PAE."
)

_OVERLAP_RULE: Final = (
    f"A segment's UniProt features are those that share at least {EXPLAIN_OVERLAP:.0%} of "
    "the segment's residues and of their own: a long region is not listed against a short "
    "stretch inside it, nor a short motif against a long segment (the table of UniProt "
    "features, the chains and the sites give every feature read)."
)
_MIXED_RULE: Final = (
    f"A feature is mixed when at least {MIXED_SHARE:.0%} of its residues are ordered (pLDDT "
    f"≥ 70) and at least {MIXED_SHARE:.0%} very low (below 50): its mean lies between a folded "
    "part and a disordered one, and no band describes it (see its residues by band)."
)


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
    """``AlphaFold DB model AF-P05067-F1 v6, created 2025-08-01``."""
    version = version_text(s.get("model_version"), s.get("model_version_basis"))
    version = f" {version}" if version else f", version {_ABSENT}"
    date = f", created {s['model_date']}" if s.get("model_date") else ""
    return f"AlphaFold DB model {s.get('entry_id') or f'(entry id {_ABSENT})'}{version}{date}"


# --------------------------------------------------------------------------- synthesis


def _protein_view(protein_id: str, summary: Mapping[str, Any]) -> dict[str, Any]:
    """The header of a brief. A datum the data lack is "not in this data", never
    "unknown" (ZBTB7C is A1YPR0's gene; only the bundled file does not give it)."""
    gene = _text(summary.get("gene"))
    length = summary.get("length")
    name = protein_name(summary)
    function = _text(summary.get("function"))
    organism = _text(summary.get("organism"))
    quoted = _quoted(summary)
    return {
        "id": protein_id,
        "title": f"{name} ({protein_id})" if name else f"{protein_id} (name {_ABSENT})",
        "name": quoted("description", name) if name else f"name {_ABSENT}",
        "organism": quoted("organism", organism) if organism else _ABSENT,
        "gene": quoted("gene", gene) if gene and gene.lower() != "unknown" else _ABSENT,
        "length": f"{length} residues" if isinstance(length, int) and length > 0 else _ABSENT,
        "source": _text(summary.get("source")) or _ABSENT,
        "function": function if function and function != name else None,
        "function_source": function_source(summary),
        "afdb_url": f"https://alphafold.ebi.ac.uk/entry/{protein_id}",
        "uniprot_url": f"https://www.uniprot.org/uniprotkb/{protein_id}/entry",
    }


def _quoted(summary: Mapping[str, Any]) -> Callable[[str, str], str]:
    """How a header field is shown: its value, and when only the lower-trust file of
    figures quoted elsewhere gives it (``quoted_fields``), that file, named."""
    fields = summary.get("quoted_fields")
    fields = fields if isinstance(fields, list | tuple) else ()  # (a custom source's: any)
    secondary = next((x for x in summary.get("sources") or () if lower_trust(str(x))), None)

    def shown(field: str, value: str) -> str:
        if field not in fields or secondary is None:
            return value
        return f"{value} (only in {secondary}: a lower-trust secondary source)"

    return shown


def _uniprot_name(uniprot: Mapping[str, Any]) -> str:
    """``UniProtKB … (Rel. 48, last annotated 2005-09-13: old annotation)``."""
    parts = [p for p in (uniprot.get("release"), uniprot.get("entry_version")) if p]
    version = ", ".join(f"entry version {p}" if isinstance(p, int) else str(p) for p in parts)
    date = uniprot.get("date")
    when = f"last annotated {date}" if date else "annotation date not recorded"
    old = date is not None and int(str(date)[:4]) < datetime.now(UTC).year - _OLD_AFTER_YEARS
    return (
        f"{uniprot.get('source')} ({version + ', ' if version else ''}{when}"
        f"{': old annotation, today’s entry may differ' if old else ''})"
    )


def _site_lines(
    features: Sequence[Mapping[str, Any]], isoform_name: str | None, missing: str
) -> list[str]:
    """Binding, metal and active sites and glycosylation sites, grouped by ligand (or
    description), with the pLDDT at each where it is held; a site UniProt gives to
    named isoforms this sequence (``isoform_name``) is not one of is left out (the
    caveats say it apart)."""
    by_ligand: dict[str, list[Mapping[str, Any]]] = {}
    for feature in features:
        if feature["type"] in SITE_TYPES and holds_for(feature, isoform_name) is not False:
            key = feature.get("ligand") or feature.get("description") or feature["type"]
            by_ligand.setdefault(str(key).rstrip("."), []).append(feature)
    lines = []
    for ligand, sites in by_ligand.items():
        one = len(sites) == 1 and sites[0]["start"] == sites[0]["end"]
        if all("mean_plddt" in f for f in sites):
            where = ", ".join(_site(f) for f in sites)
        else:
            where = ", ".join(span(f["start"], f["end"]) for f in sites) + f" (pLDDT {missing})"
        lines.append(f"{ligand} at {'residue' if one else 'residues'} {where}")
    return lines


def _site(feature: Mapping[str, Any]) -> str:
    """``147 (pLDDT 85.81)``; a site over several residues gives their mean."""
    start, end = feature["start"], feature["end"]
    what = "pLDDT" if start == end else "mean pLDDT"
    return f"{span(start, end)} ({what} {figure(feature['mean_plddt'])})"


def _by_band(counts: Mapping[str, int] | None) -> str:
    """``very high 40 · confident 100 · low 10 · very low 12`` (residues; ``—``: not
    known, in a run checkpointed before they were counted)."""
    if counts is None:
        return "—"
    return " · ".join(f"{BAND_NAMES[band]} {n}" for band, n in counts.items())


def _published(s: Mapping[str, Any], mean: str) -> str | None:
    """The model file's own global pLDDT, where it differs from the residues' mean."""
    published = s.get("file_global_plddt")
    if not published or figure(published["value"]) == mean:
        return None
    if published["over"] == "atoms":
        how = "the mean over its atoms, as AlphaFold DB gives v4 models' global pLDDT"
    else:
        how = "its mean over residues as the file states it"
    value = figure(published["value"])
    return f"The model file's own global pLDDT, {value}, is {how}: the same model."


def _other_mean(s: Mapping[str, Any], other: Mapping[str, Any]) -> str:
    """Another figure the data give for the protein's mean, and what it is."""
    value, source = figure(other["global_plddt"]), named_source(other["source"])
    if other.get("version") != s.get("model_version"):
        version = f"v{other['version']}" if other.get("version") else "of unrecorded version"
        how = (  # (a project's summary of the model file: no AlphaFold DB figure)
            f", computed by another project from the {version} model, not a figure "
            "AlphaFold DB gives"
            if other.get("computed_by_project")
            else ""
        )
        return (
            f"Another model in the data: {version}, mean pLDDT {value}{how} ({source}); not "
            "the one described here."
        )
    close = abs(other["global_plddt"] - s["mean_plddt"]) < 0.015
    # (Why a last digit differs -- rounding, truncation, unrounded inputs -- the data
    # do not say, so the brief does not guess.)
    return f"The same model's mean in {source}: {value}" + (
        ", the same figure but for its last digit." if close else "."
    )


def _mean_lines(s: Mapping[str, Any]) -> list[str]:
    """The whole-model mean: over what it is taken, where it comes from, and the other
    figures the data give for this protein (never mixed in)."""
    if s.get("mean_plddt") is None:
        return ["Whole-model mean pLDDT: unknown."]
    mean = figure(s["mean_plddt"])
    alike = "one number over ordered and disordered parts alike"
    if s.get("per_residue"):
        lines = [
            f"Whole-model mean pLDDT: {mean}, the mean over residues ({alike}; the segments "
            f"above say where the confidence is); range {figure(s['min_plddt'])}–"
            f"{figure(s['max_plddt'])}."
        ]
    else:
        source = s.get("figures_source")
        where = f"; from {named_source(source)}" if source else ""
        lines = [
            f"Whole-model mean pLDDT: {mean} ({alike}; per-residue data would say where the "
            f"confidence is){where}."
        ]
    published = _published(s, mean)
    lines += [published] if published else []
    others = [o for o in s.get("other_means") or [] if figure(o["global_plddt"]) != mean]
    return lines + [_other_mean(s, other) for other in others]


def _regions(features: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The features that span a stretch (not chains, not single sites)."""
    return [f for f in features if f["type"] not in SITE_TYPES | {"Chain", "Peptide"}]


def _annotation_view(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """UniProt's features of a protein whose structure analysis is unavailable, each
    with "pLDDT not held" (or "not read", where the data hold it and the analysis that
    reads it did not run)."""
    uniprot = summary.get("uniprot")
    if not isinstance(uniprot, Mapping) or not uniprot.get("features"):
        return None
    unread = per_residue((summary.get("alphafold") or {}).get("plddt")) is not None
    missing, why = _UNREAD if unread else _NOT_HELD
    return {
        "feature_plddt": missing,
        "feature_plddt_note": why,
        "uniprot": _uniprot_name(uniprot),
        "annotated": _regions(uniprot["features"]),
        "sites": _site_lines(uniprot["features"], summary.get("isoform_name"), missing),
        "kinds_read": _KINDS_READ,
        "span": span,
    }


_NOT_HELD: Final = ("not held", "Without per-residue pLDDT no feature's confidence is known.")
"""A feature's pLDDT where the data have none, and the table's sentence saying so."""
_UNREAD: Final = (
    "not read",
    "The data hold the model's per-residue pLDDT, but the structure analysis that reads it "
    "did not finish, so no feature's confidence is given here.",
)
"""The same where the data hold it and the structure analysis did not read it."""

_KINDS_READ: Final = ", ".join(sorted(KEPT_TYPES))
"""The kinds of UniProt feature the brief reads (its table says which)."""

_OUTSIDE_RULE = (
    f"Listed: the stretches in no unit that are low or very low and {MIN_UNIT_LENGTH} "
    "residues or longer, and the confident ones too short to be a unit (shorter low "
    "stretches are left out)."
)


def _structure_view(
    structure: Mapping[str, Any] | None, summary: Mapping[str, Any]
) -> dict[str, Any] | None:
    s = _usable(structure)
    if s is None:
        return None
    fractions = s.get("fractions")
    features = s.get("features")
    uniprot = summary.get("uniprot")
    units = s.get("units") or []
    source = s.get("figures_source")
    segments = s.get("segments") or []
    return {
        "model": _model_name(s),
        "whole_model_source": None if s.get("per_residue") or not source else named_source(source),
        "model_file": s.get("model_file"),
        "pae_file": s.get("pae_file"),
        "per_residue": s.get("per_residue"),
        "segments": [{**seg, "by_band": _by_band(seg.get("by_band"))} for seg in segments],
        "with_features": any(seg.get("features") is not None for seg in segments),
        "overlap_rule": _OVERLAP_RULE,
        "outside_pae": [p for seg in segments for p in seg.get("pae") or []],
        "outside_rule": _OUTSIDE_RULE,
        "fraying": s.get("fraying") or [],
        "units": [
            {
                **u,
                "by_band": _by_band(u.get("by_band")),
                "verdict": unit_verdict(u.get("pae"), len(u["ranges"])),
            }
            for u in units
        ],
        "rule": _rule(s) if any(u.get("pae") for u in units) else None,
        "units_rule": _UNITS_RULE,
        "segments_rule": _SEGMENTS_RULE,
        "feature_plddt": _NOT_HELD[0],  # (its features', where it has no per-residue pLDDT)
        "feature_plddt_note": _NOT_HELD[1],
        "joins": [
            f"unit {u['number']}: {first} with {second}, {n} residue pairs in contact"
            for u in units
            for first, second, n in u.get("joins") or []
        ],
        "unit_pairs": [
            {"unit": u["number"], **pair}
            for u in units
            for pair in (u.get("pae") or {}).get("segment_pairs") or []
        ],
        "unit_pae": s.get("unit_pae"),
        "features": [
            {**f, "by_band": _by_band(f["by_band"])}
            for f in features or []
            if f["type"] not in SITE_TYPES | {"Chain", "Peptide"}
        ],
        "domain_pae": s.get("domain_pae"),
        "domains_without_pae": s.get("domain_pae") is None
        and sum(1 for f in features or [] if f["type"] in DOMAIN_TYPES) > 1,
        "live_hint": fetch_hint(summary, "AlphaFold DB"),
        "annotated": _regions(s.get("annotated") or []),
        "mature": [
            {**f, "by_band": _by_band(f["by_band"])}
            for f in features or []
            if f["type"] in ("Chain", "Peptide")
        ],
        "mixed_rule": _MIXED_RULE if any(f["band"] == MIXED for f in features or []) else None,
        "processed": [f for f in features or [] if f["type"] in PROCESSED_TYPES],
        "sites": _site_lines(
            features or s.get("annotated") or [], summary.get("isoform_name"), _NOT_HELD[0]
        ),
        "uniprot": _uniprot_name(uniprot) if isinstance(uniprot, Mapping) else None,
        "kinds_read": _KINDS_READ,
        "means": _mean_lines(s),
        "bands": [(_BAND_RANGE[b], _pct(fractions[b])) for b in reversed(BANDS)]
        if fractions
        else None,
        "missing": s.get("missing") or [],
        "num": figure,
        "span": span,
    }


def synthesize(
    protein_id: str,
    summary: Mapping[str, Any],
    structure: Mapping[str, Any] | None = None,
    reasoning: Mapping[str, Any] | None = None,
    critique: Mapping[str, Any] | None = None,
    missing_stages: Sequence[str] = (),
    problem: str | None = None,
) -> str:
    """The Markdown research brief; leads with confidence along the chain (``problem``:
    why the structure analysis is missing, when it failed)."""
    r, c = _usable(reasoning), _usable(critique)
    return render(
        "protein_brief.md.j2",
        protein=_protein_view(protein_id, summary),
        structure=_structure_view(structure, summary),
        problem=_text(problem)
        or (_text(structure.get("error")) if isinstance(structure, Mapping) else None),
        annotation=_annotation_view(summary) if _usable(structure) is None else None,
        assessment=_text(r.get("drug_target_assessment")) if r else None,
        hypotheses=[str(h) for h in r.get("hypotheses") or []] if r else [],
        caveats=[str(x) for x in c.get("caveats") or []] if c else None,
        entry_caveats=None if c else annotation_caveats(summary),
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
        annotation=_annotation_view(summary) if _usable(structure) is None else None,
        caveats=data_caveats(summary, structure),
        basis=basis(summary, structure),
    )
