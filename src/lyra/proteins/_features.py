"""UniProt features and what the prediction says about each.

A feature is kept in one small shape whatever the entry's format (REST JSON or
a flat file): ``{"type", "start", "end", "description", "ligand"}`` with
UniProt's REST type names. :func:`read_features` reads REST JSON;
``scripts/build_protein_data.py`` turns flat-file features into the same shape.

:func:`map_features` gives each feature its mean pLDDT, its band (or *mixed*,
:data:`MIXED_SHARE`) and says whether the annotation and the prediction agree:
an annotated disordered region with very low pLDDT agrees; a domain,
DNA-binding region, zinc finger or transmembrane segment agrees when it is
ordered (pLDDT ≥ 70); a mixed one agrees only in part; a signal peptide,
transit peptide or propeptide is removed in the mature protein, so its
confidence does not bear on the mature structure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from lyra.proteins._confidence import BAND_NAMES, BANDS, band_of, mean, span

__all__ = [
    "EXPLAIN_OVERLAP",
    "FOLDED_TYPES",
    "MIXED",
    "MIXED_SHARE",
    "PROCESSED_TYPES",
    "SITE_TYPES",
    "band_counts",
    "carried_to_isoform",
    "crossing",
    "explaining",
    "holds_for",
    "label",
    "map_features",
    "placed_on_sequence",
    "predicted_by",
    "read_features",
]

FOLDED_TYPES: Final = frozenset(
    {
        "Domain",
        "Repeat",
        "Zinc finger",
        "DNA binding",
        "Transmembrane",
        "Intramembrane",
        "Coiled coil",
    }
)
PROCESSED_TYPES: Final = frozenset({"Signal", "Transit peptide", "Propeptide"})
MATURE_TYPES: Final = frozenset({"Chain", "Peptide"})
SITE_TYPES: Final = frozenset({"Binding site", "Metal binding", "Active site", "Glycosylation"})
OTHER_TYPES: Final = frozenset({"Region", "Motif", "Topological domain"})
KEPT_TYPES: Final = FOLDED_TYPES | PROCESSED_TYPES | MATURE_TYPES | SITE_TYPES | OTHER_TYPES
EXPLAINING_TYPES: Final = FOLDED_TYPES | PROCESSED_TYPES | OTHER_TYPES
"""Features that can say what a stretch of the model is (not chains, not single sites)."""
EXPLAIN_OVERLAP: Final = 0.5
"""A feature explains a stretch of the model when they share at least this fraction of
the stretch and of the feature (:func:`explaining`)."""
MIXED_SHARE: Final = 0.25
"""A feature with at least this share of its residues ordered (pLDDT ≥ 70) and at least
this share very low (< 50) is :data:`MIXED`: its mean lies between a folded part and a
disordered one (APP's soluble ectodomain: its E1 and E2 domains and the acidic region
between them), and the band of that mean would describe neither."""
MIXED: Final = "mixed"


SEQUENCE_MODEL_EVIDENCE: Final = frozenset({"ECO:0000255", "ECO:0000256"})
"""UniProt's evidence codes for a match to a sequence model (manual and automatic
assertion): a feature resting on these alone is a prediction from the sequence."""


def predicted_by(evidence: Iterable[tuple[str, str | None]]) -> str | None:
    """The tools or rules a feature was predicted with from the sequence (``MobiDB-lite``
    for ``SAM:MobiDB-lite``, ``PROSITE-ProRule:PRU01217``), when its evidence (``(code,
    source)`` pairs) is only that; ``"sequence analysis"`` when none is named; else None
    (an observation, a curator's inference, or no evidence given)."""
    found = list(evidence)
    if not found or any(code not in SEQUENCE_MODEL_EVIDENCE for code, _ in found):
        return None
    tools = [source.removeprefix("SAM:") for _, source in found if source]
    return ", ".join(dict.fromkeys(tools)) or "sequence analysis"


def _position(value: object) -> int | None:
    if isinstance(value, Mapping):
        value = value.get("value")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_features(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The kept features of a UniProt REST JSON entry, in its order."""
    found = []
    for raw in entry.get("features") or []:
        if not isinstance(raw, Mapping) or raw.get("type") not in KEPT_TYPES:
            continue
        location = raw.get("location") or {}
        start, end = _position(location.get("start")), _position(location.get("end"))
        if start is None or end is None or start > end:
            continue  # an unknown ("?") boundary cannot be mapped onto residues
        ligand = raw.get("ligand")
        feature = {
            "type": str(raw["type"]),
            "start": start,
            "end": end,
            "description": str(raw.get("description") or ""),
            "ligand": str(ligand.get("name")) if isinstance(ligand, Mapping) else None,
        }
        tools = predicted_by(_evidence(raw.get("evidences")))
        if tools is not None:
            feature["predicted_by"] = tools
        found.append(feature)
    return found


def _evidence(raw: object) -> list[tuple[str, str | None]]:
    """A REST JSON feature's evidence as ``(code, "SOURCE:id")`` pairs."""
    pairs = []
    for item in raw if isinstance(raw, list) else ():
        if isinstance(item, Mapping) and isinstance(item.get("evidenceCode"), str):
            source, id_ = item.get("source"), item.get("id")
            named = f"{source}:{id_}" if source and id_ else source or None
            pairs.append((item["evidenceCode"], str(named) if named else None))
    return pairs


def label(feature: Mapping[str, Any]) -> str:
    """``Transmembrane: Helical 702–722``; a binding site by its ligand (``Binding site:
    Cu(2+) 677``); a region or domain UniProt predicted from the sequence says so
    (``Region: Disordered (predicted from its sequence, MobiDB-lite) 194–284``, ``Domain:
    E1 (predicted from its sequence, PROSITE-ProRule:PRU01217) 28–189``)."""
    what = feature.get("description") or feature.get("ligand")
    if (
        what
        and feature.get("predicted_by")
        and (_is_disordered(feature) or feature["type"] in FOLDED_TYPES)
    ):
        what = f"{what} (predicted from its sequence, {feature['predicted_by']})"
    text = f": {what}" if what else ""
    return f"{feature['type']}{text} {span(int(feature['start']), int(feature['end']))}"


def crossing(
    features: Iterable[Mapping[str, Any]],
    start: int,
    end: int,
    explained: Iterable[Mapping[str, Any]],
) -> list[str]:
    """The features that lie within residues ``start``–``end`` or cross one of its ends
    besides those that ``explained`` it (:func:`explaining`) -- a site, a short motif,
    where a chain begins -- as labels, those of one type and description together
    (``Binding site: Cu(2+) 677, 681``). Features that span the whole stretch are not
    named: they say nothing of it in particular."""
    found: dict[str, list[str]] = {}
    skipped = {id(f) for f in explained}
    for feature in features:
        first, last = int(feature["start"]), int(feature["end"])
        if feature["type"] not in KEPT_TYPES or id(feature) in skipped:
            continue
        if last < start or first > end or (first <= start and last >= end):
            continue
        head = label(feature).rpartition(" ")[0]
        found.setdefault(head, []).append(span(first, last))
    return [f"{head} {', '.join(spans)}" for head, spans in found.items()]


def explaining(
    features: Iterable[Mapping[str, Any]], start: int, end: int
) -> list[Mapping[str, Any]]:
    """The features that say what residues ``start``–``end`` are: each overlaps the
    stretch by at least :data:`EXPLAIN_OVERLAP` of the stretch and of itself (a
    reciprocal overlap, so a long region never explains a short stretch inside it, nor
    a short motif a long one)."""
    found = []
    for feature in features:
        if feature["type"] not in EXPLAINING_TYPES:
            continue
        first, last = int(feature["start"]), int(feature["end"])
        shared = min(end, last) - max(start, first) + 1
        if shared >= EXPLAIN_OVERLAP * max(end - start + 1, last - first + 1):
            found.append(feature)
    return found


def band_counts(values: Sequence[float]) -> dict[str, int]:
    """Residues in each AlphaFold DB band, very high first."""
    counts: dict[str, int] = dict.fromkeys(reversed(BANDS), 0)
    for value in values:
        counts[band_of(value)] += 1
    return counts


def _is_disordered(feature: Mapping[str, Any]) -> bool:
    return feature["type"] == "Region" and str(feature["description"]).startswith("Disordered")


def _is_mixed(counts: Mapping[str, int]) -> bool:
    """Ordered and very low residues both make up :data:`MIXED_SHARE` of a feature or more."""
    total = sum(counts.values())
    ordered = counts["very_high"] + counts["confident"]
    return total > 0 and min(ordered, counts["very_low"]) >= MIXED_SHARE * total


def _verdict(feature: Mapping[str, Any], value: float, mixed: bool) -> str:
    """Where annotation and prediction agree or disagree, in words."""
    band = band_of(value)
    if feature["type"] in PROCESSED_TYPES:
        return "removed in the mature protein: its confidence does not bear on the mature fold"
    if mixed and (_is_disordered(feature) or feature["type"] in FOLDED_TYPES):
        return "partly agree: part of it is predicted ordered, part very low"
    if _is_disordered(feature):
        tools = feature.get("predicted_by")
        said = (
            f"predicted disordered from its sequence ({tools})" if tools else "annotated disordered"
        )
        if band == "very_low":
            both = " (two predictions, not an observation)" if tools else ""
            return f"agree: {said}, predicted very low{both}"
        if value >= 70:
            return (
                f"disagree: {said} but predicted ordered "
                "(it may fold only with a partner, or a prediction is wrong)"
            )
        return f"partly agree: {said}, predicted low"
    if feature["type"] in FOLDED_TYPES:
        if value >= 70:
            if feature.get("predicted_by"):  # a sequence model's match: no observation either
                return (
                    "agree: a structured element, predicted ordered "
                    "(two predictions, not an observation)"
                )
            return "agree: a structured element, predicted ordered"
        if band == "very_low":
            return (
                "disagree: annotated as a structured element but predicted very low "
                "(this part of the model is not usable; it may need a partner or membrane)"
            )
        return "partly agree: a structured element, predicted low"
    return ""


def map_features(
    features: Iterable[Mapping[str, Any]], plddt: Sequence[float]
) -> list[dict[str, Any]]:
    """Each feature within the model with its mean pLDDT, band (or :data:`MIXED`),
    residues in each band and verdict."""
    mapped = []
    for feature in features:
        start, end = int(feature["start"]), int(feature["end"])
        if end > len(plddt):
            continue  # annotated beyond the modelled sequence
        values = plddt[start - 1 : end]
        value = mean(values)
        counts = band_counts(values)
        mixed = _is_mixed(counts)
        mapped.append(
            {
                **feature,
                "length": end - start + 1,
                "mean_plddt": value,
                "band": MIXED if mixed else BAND_NAMES[band_of(value)],
                "by_band": counts,
                "verdict": _verdict(feature, value, mixed),
            }
        )
    return mapped


def placed_on_sequence(
    features: Iterable[Mapping[str, Any]],
    current: str,
    modelled: str,
    *,
    substitutions: bool = True,
    shortest: int = 1,
) -> tuple[list[dict[str, Any]], list[tuple[int, int, int]], list[int]]:
    """UniProt's features (numbered on its ``current`` sequence) placed on the ``modelled``
    one, an earlier version of it: the two aligned (difflib's matching blocks, the
    longest first; a block shorter than ``shortest`` is no match), a residue changed in
    place (a substitution, unless ``substitutions`` is False) keeps its number, and a
    feature is placed, renumbered, when every residue of it has a place and none was
    inserted or deleted within it. Also the stretches so placed, as ``(first, last,
    shift)`` in the model's numbering (``shift``: UniProt's number − the model's), and
    the model's residues that differ in place."""
    from difflib import SequenceMatcher

    to_model: dict[int, int] = {}
    changed: list[int] = []
    stretches: list[tuple[int, int, int]] = []
    matcher = SequenceMatcher(None, current, modelled, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        same = op == "equal" and i2 - i1 >= shortest
        if same or (substitutions and op == "replace" and i2 - i1 == j2 - j1):
            to_model.update(zip(range(i1 + 1, i2 + 1), range(j1 + 1, j2 + 1), strict=True))
            if op == "replace":
                changed += range(j1 + 1, j2 + 1)
            shift = i1 - j1
            if stretches and stretches[-1][1] == j1 and stretches[-1][2] == shift:
                stretches[-1] = (stretches[-1][0], j2, shift)
            else:
                stretches.append((j1 + 1, j2, shift))
    placed = []
    for feature in features:
        first, last = int(feature["start"]), int(feature["end"])
        start, end = to_model.get(first), to_model.get(last)
        if start is None or end is None or end - start != last - first:
            continue
        if all(r in to_model for r in range(first, last + 1)):
            placed.append({**feature, "start": start, "end": end})
    return placed, stretches, changed


SHORTEST_SHARED = 6
"""Residues two isoforms must share in a row to be taken as the same stretch: shorter
runs of the same residues turn up by chance between unrelated stretches (a run of six
about once in 64 million pairs of places), and a feature is not carried on one."""


def carried_to_isoform(
    features: Iterable[Mapping[str, Any]], canonical: str, isoform: str
) -> tuple[list[dict[str, Any]], list[tuple[int, int, int]]]:
    """The canonical sequence's features that hold for an isoform: those wholly within
    a stretch the two share residue for residue, renumbered for the isoform
    (:func:`placed_on_sequence` without substitutions: a replaced stretch is another
    exon). A shared stretch may lie anywhere (an isoform lacks exons at either end or
    between) and is one of at least :data:`SHORTEST_SHARED` residues; the longest are
    matched first, so a residue or two that happen to match where a stretch was spliced
    out are given to the stretch they belong to. Also those stretches, as ``(first,
    last, shift)`` in the isoform's numbering (``shift``: canonical number − isoform
    number). A feature that reaches into a part that differs is not carried: where it
    lies in the isoform, if anywhere, the data do not say."""
    carried, shared, _ = placed_on_sequence(
        features, canonical, isoform, substitutions=False, shortest=SHORTEST_SHARED
    )
    return carried, shared


_NAMED_ISOFORMS = re.compile(r"\bin (isoforms? [^;.()]+?|[A-Za-z0-9][\w-]* isoforms)(?=[;.()]|$)")
"""How a UniProt feature note gives it to named isoforms only: ``in L-APP isoforms`` (a
family of names), ``in isoform 2``, ``in isoform APP695 and isoform APP751``,
``in isoforms 2, 3 and 4`` (names); also ``in all isoforms``, ``in some isoforms``."""
_NAME_BREAKS = re.compile(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+")
_UNSAID = frozenset({"some", "several", "many", "most", "other", "certain"})


def holds_for(feature: Mapping[str, Any], isoform_name: str | None) -> bool | None:
    """Whether a feature UniProt gives to named isoforms only holds for the sequence
    UniProt names ``isoform_name`` (``L-APP752`` is an ``L-APP`` isoform, ``APP770`` not;
    ``APP751`` is one of "isoform APP695 and isoform APP751"); ``None`` when the feature
    names no isoform, says only "some isoforms", or the sequence's name is not known."""
    found = _NAMED_ISOFORMS.search(str(feature.get("description") or ""))
    if found is None or not isoform_name:
        return None
    said = found.group(1).strip()
    first, _, rest = said.partition(" ")
    if first not in ("isoform", "isoforms"):  # a family: "L-APP isoforms", "all isoforms"
        if first.lower() in _UNSAID:
            return None
        return True if first.lower() == "all" else isoform_name.startswith(first)
    names = {name.removeprefix("isoform ").strip() for name in _NAME_BREAKS.split(rest)}
    return isoform_name in names
