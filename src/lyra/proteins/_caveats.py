"""The ``critique`` stage: caveats drawn from the data, and what the brief rests on.

Every brief says the model has no ligands, metals or cofactors (true of every
AlphaFold DB model: a haem pocket or a zinc site is modelled empty). The other
caveats come from the data: the oligomeric state (UniProt's SUBUNIT comment),
the cofactors and metals it binds (COFACTOR, binding and metal sites),
membrane topology (transmembrane features), processing (signal peptide,
transit peptide, propeptides, chains), isoforms, the model's version and date,
the annotation's date, and what is missing. ``basis`` replaces any
"confidence in this reasoning": it names the data the brief rests on.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from lyra.proteins._confidence import figure, span
from lyra.proteins._features import holds_for
from lyra.proteins._sources import fetch_hint, lower_trust, named_source

__all__ = ["annotation_caveats", "basis", "critique"]

_FLOOR: Final = {"very_low": 0.0, "low": 50.0, "confident": 70.0, "very_high": 90.0}
_CEILING: Final = {"very_low": 50.0, "low": 70.0, "confident": 90.0, "very_high": 100.0}
_PROCESSED_NAMES: Final = {
    "Signal": "signal peptide",
    "Transit peptide": "transit peptide",
    "Propeptide": "propeptide",
}
"""UniProt's processed segments, named as a sentence names them."""
_NO_LIGANDS: Final = (
    "The model has no ligands, metals or cofactors (AlphaFold DB models the chain alone), "
    "so a site that binds one is predicted without it"
)
_SUBUNIT_CHARS: Final = 300
"""A SUBUNIT comment longer than this is abridged to whole sentences (the entry has the rest)."""
_SENTENCE_END: Final = re.compile(r"(?<=\.)\s+(?=[A-Z\[])")
_OLIGOMER: Final = re.compile(
    r"(?i)\w*(?:(?:mono|di|tri|tetra|penta|hexa|hepta|octa|oligo|multi|homo|hetero)-?mer|"
    r"(?:di|tri|tetra|oligo|multi)meri[sz])"
)
"""A sentence that states an oligomeric state (monomer, homodimer, heterotrimer,
oligomerizes, …)."""
_AS_OLIGOMER: Final = re.compile(rf"(?i)\bas an? {_OLIGOMER.pattern.removeprefix('(?i)')}")
"""What a protein binds or acts as (``as a homotetramer``)."""
_PRODUCT: Final = re.compile(r"^\[[^\]]*\]:\s*")
"""A comment's product prefix (``[Spike glycoprotein]: ``)."""


def _abridged(text: str) -> str:
    """``text`` in whole sentences within :data:`_SUBUNIT_CHARS` characters: those that
    state the oligomeric state first (what the caveat is for: APP's "Homodimerizes"
    comes after a dozen sentences of partners), then the others from the first while
    they fit, shown in the entry's order with "…" where sentences were left out."""
    if len(text) <= _SUBUNIT_CHARS:
        return text
    sentences = _SENTENCE_END.split(text)
    ranked = sorted(range(len(sentences)), key=lambda i: (not _states_oligomer(sentences[i]), i))
    kept: set[int] = set()
    size = 0
    for i in ranked:
        if size + len(sentences[i]) > _SUBUNIT_CHARS:
            if not _states_oligomer(sentences[i]):
                break  # (the others only from the start: no scattered fragments)
            continue
        kept.add(i)
        size += len(sentences[i]) + 1
    if not kept:
        return f"{text[:_SUBUNIT_CHARS]}… (abridged; the entry has the rest)"
    parts = [sentences[i] if i in kept else "…" for i in range(len(sentences))]
    shown = " ".join(p for n, p in enumerate(parts) if p != "…" or n == 0 or parts[n - 1] != "…")
    return f"{shown} (abridged; the entry has the rest)"


def _states_oligomer(sentence: str) -> bool:
    """True when the sentence states the oligomeric state, as its first words ("Homotrimer;
    …", "[Spike glycoprotein]: Homotrimer", "Homodimerizes"), or as what the protein
    binds or acts as ("Binds DNA as a homotetramer"); not a mention in passing ("… spike
    trimers at the surface")."""
    first_words = _PRODUCT.sub("", sentence, count=1)
    return bool(_OLIGOMER.match(first_words) or _AS_OLIGOMER.search(sentence))


def _usable(stage: object) -> Mapping[str, Any] | None:
    if isinstance(stage, Mapping) and "error" not in stage:
        return stage
    return None


def _ranges(features: list[Mapping[str, Any]]) -> str:
    return ", ".join(f"{f['start']}–{f['end']}" for f in features)


def annotation_caveats(summary: Mapping[str, Any]) -> list[str]:
    """What the UniProt entry alone says to beware of (partners, ligands, membranes,
    processing, mature products): a brief gives these even when the critique is missing."""
    uniprot = summary.get("uniprot")
    if not isinstance(uniprot, Mapping):
        hint = fetch_hint(summary, "UniProt")
        return [
            "AlphaFold DB models one chain: partners and oligomers are absent from the model, "
            "and the oligomeric state is not in this data (UniProt's SUBUNIT comment would "
            f"say; {hint}).",
            f"{_NO_LIGANDS}; which ones this protein binds is not in this data (UniProt's "
            f"COFACTOR comment and binding sites would say; {hint}).",
        ]
    caveats = _model_sequence_caveat(summary)
    features = list(uniprot.get("features") or [])
    subunit = uniprot.get("subunit")
    # (the entry's last annotation date: a comment may be older than its entry's version)
    dated = f" (entry of {uniprot['date']})" if uniprot.get("date") else ""
    caveats.append(
        "AlphaFold DB models one chain: partners and oligomers are absent from the model. "
        + (
            f"UniProt SUBUNIT{dated}: {_abridged(subunit)}"
            if subunit
            else "UniProt gives no SUBUNIT."
        )
    )
    sites: dict[str, list[str]] = {}
    for f in features:
        if f.get("ligand"):
            where = span(f["start"], f["end"])
            sites.setdefault(str(f["ligand"]), []).append(where)
    cofactors = [str(c).rstrip(".") for c in uniprot.get("cofactors") or []]
    if sites or cofactors:
        named = [f"UniProt COFACTOR{dated}: {' '.join(cofactors)}"] if cofactors else []
        named += [f"{ligand} at residues {', '.join(at)}" for ligand, at in sites.items()]
        caveats.append(f"{_NO_LIGANDS}. {'; '.join(named)}.")
    else:
        caveats.append(f"{_NO_LIGANDS}; the UniProt entry names no cofactor or ligand site.")
    glycans = [f for f in features if _glycan(f)]
    elsewhere = [f for f in features if _glycan(f, in_named_isoforms=True)]
    if glycans or elsewhere:
        caveats.append(_glycans_caveat(summary, glycans, elsewhere))
    held = _model_held(summary)
    membrane = [f for f in features if f["type"] in ("Transmembrane", "Intramembrane")]
    if membrane:
        caveats.append(_membrane_caveat(membrane, held))
    processed = [f for f in features if f["type"] in _PROCESSED_NAMES]
    if processed:
        caveats.append(_processing_caveat(processed, held))
    chains = [f for f in features if f["type"] in ("Chain", "Peptide")]
    if len(chains) > 1:
        caveats.append(_chains_caveat(summary, chains, held))
    return caveats


_NONE_HELD: Final = "this data holds none"
"""Said where a caveat is about a model the data do not hold (P0DTC2's): what one would
be, never what it is."""


def _model_held(summary: Mapping[str, Any]) -> bool:
    """Whether the data hold the model or AlphaFold DB's own record of it (its file,
    per-residue pLDDT, or the prediction record: not figures quoted elsewhere), so a
    caveat may say what the model is, not only what one would be."""
    alphafold = summary.get("alphafold")
    if not isinstance(alphafold, Mapping):
        return False
    record = alphafold.get("figures_source")
    own = bool(record) and not lower_trust(record)
    return bool(alphafold.get("model_file") or alphafold.get("plddt") or own)


def _membrane_caveat(membrane: list[Mapping[str, Any]], held: bool) -> str:
    if held:
        return (
            f"AlphaFold DB models membrane segments ({_ranges(membrane)}) without a membrane: "
            "their placement relative to the rest of the protein is not constrained by a "
            "bilayer."
        )
    return (
        f"UniProt's membrane segments ({_ranges(membrane)}): an AlphaFold DB model "
        f"({_NONE_HELD}) would place them without a membrane, unconstrained by a bilayer."
    )


def _processing_caveat(processed: list[Mapping[str, Any]], held: bool) -> str:
    kinds = ", ".join(
        f"{_PROCESSED_NAMES[f['type']]} {span(f['start'], f['end'])}" for f in processed
    )
    one = len(processed) == 1
    removed = f"{kinds} {'is' if one else 'are'} removed in the mature protein"
    its = "its" if one else "their"
    if held:
        return (
            f"Processing: AlphaFold DB's model is of the full precursor; {removed}, so "
            f"{its} confidence does not describe it."
        )
    return (
        f"Processing: {removed}; a model of the full precursor ({_NONE_HELD}) would "
        f"include {'it' if one else 'them'}, and {its} confidence there would not describe "
        "the mature protein."
    )


def _glycan(feature: Mapping[str, Any], *, in_named_isoforms: bool = False) -> bool:
    """A glycosylation site of this sequence: not a glycation (a sugar stuck on by
    chemistry, no glycan); with ``in_named_isoforms``, one UniProt gives to named
    isoforms only (its note: ``in L-APP isoforms``), else one it gives to all."""
    if feature["type"] != "Glycosylation":
        return False
    note = str(feature.get("description") or "").lower()
    return "glycation" not in note and ("isoform" in note) == in_named_isoforms


def _glycans_caveat(
    summary: Mapping[str, Any],
    glycans: list[Mapping[str, Any]],
    elsewhere: list[Mapping[str, Any]],
) -> str:
    """No glycans in the model: the sites UniProt gives to every isoform, counted, and
    those it gives to named isoforms only, said apart (which isoforms a name covers is
    not in the bundled data, so whether they hold for this sequence is left open)."""
    text = "AlphaFold DB models no glycans."
    if glycans:
        partial = sum("partial" in str(f.get("description")) for f in glycans)
        sites = ", ".join(span(f["start"], f["end"]) for f in glycans)
        text += (
            f" UniProt's {len(glycans)} glycosylation site(s) ({sites}"
            + (f"; {partial} of them occupied only in part" if partial else "")
            + ") are modelled bare, so the sugars that cover the surface there (and may "
            "hide it from a binder) are absent from the model."
        )
    if elsewhere:
        named = "; ".join(f"{span(f['start'], f['end'])}: {_isoform_note(f)}" for f in elsewhere)
        name = summary.get("isoform_name")
        holds = {holds_for(f, name) for f in elsewhere}
        if holds == {True}:
            whose = f"this isoform ({name}) is one of them, as UniProt names its isoforms"
        elif holds == {False}:
            whose = f"not sites of this sequence ({name}), as UniProt names its isoforms"
        elif summary.get("isoform_of"):
            whose = "whether this isoform is one of them, the bundled data does not say"
        else:
            whose = "not sites of this canonical sequence, as UniProt has them"
        more = "more " if glycans else ""
        text += (
            f" UniProt gives {len(elsewhere)} {more}site(s) to named isoforms only "
            f"({named}): {whose}."
        )
    return text


def _isoform_note(feature: Mapping[str, Any]) -> str:
    """The part of a site's note that names its isoforms (``in L-APP isoforms``)."""
    parts = str(feature.get("description") or "").split(";")
    return next((p.strip() for p in parts if "isoform" in p.lower()), parts[-1].strip())


def _chains_caveat(summary: Mapping[str, Any], chains: list[Mapping[str, Any]], held: bool) -> str:
    """Several chains or peptides: cut from the one precursor AlphaFold DB models. Some
    may overlap (alternative cleavages, or the whole mature chain beside its pieces),
    and some stay associated once cut: neither is in the model."""
    ordered = sorted(chains, key=lambda f: (int(f["start"]), int(f["end"])))
    overlapping = any(
        int(later["start"]) <= int(earlier["end"])
        for n, earlier in enumerate(ordered)
        for later in ordered[n + 1 :]
    )
    uniprot = summary.get("uniprot") or {}
    carried = (uniprot.get("shared_with_canonical") or uniprot.get("model_sequence")) is not None
    listed = (
        f"Of UniProt's chains or peptides, {len(chains)} lie wholly in the residues mapped here"
        if carried
        else f"UniProt lists {len(chains)} chains or peptides"
    )
    return (
        f"{listed} ({_ranges(chains)})"
        + (
            ", some overlapping (a chain and the pieces it is cut into, or alternative cuts)"
            if overlapping
            else ""
        )
        + (
            ". They are cut from one precursor, which is what AlphaFold DB models; how each "
            "product folds once cut, and whether the products stay associated, the model does "
            "not say."
            if held
            else f". They are cut from one precursor; how each product folds once cut, and "
            f"whether the products stay associated, a model of the precursor ({_NONE_HELD}) "
            "would not say."
        )
    )


def _consistency_caveats(summary: Mapping[str, Any], s: Mapping[str, Any]) -> list[str]:
    """Caveats for figures that contradict each other."""
    caveats: list[str] = []
    fractions = s.get("fractions")
    mean = s.get("mean_plddt")
    if isinstance(fractions, Mapping):
        total = math.fsum(fractions.values())
        if abs(total - 1) > 0.01:
            caveats.append(f"The band fractions sum to {round(total, 3)}, not 1.")
        low = math.fsum(fractions[b] * _FLOOR[b] for b in _FLOOR)
        high = math.fsum(fractions[b] * _CEILING[b] for b in _CEILING)
        if isinstance(mean, int | float) and not low - 0.5 <= mean <= high + 0.5:
            caveats.append(
                f"The mean pLDDT {figure(mean)} is outside the range the band fractions "
                f"allow ({round(low, 2):g}–{round(high, 2):g}): the figures may come from "
                "different models."
            )
    residues, length = s.get("residues"), summary.get("length")
    uniprot = summary.get("uniprot")
    explained = isinstance(uniprot, Mapping) and "model_sequence" in uniprot  # (said below)
    if (
        isinstance(residues, int)
        and isinstance(length, int)
        and residues != length
        and not explained
    ):
        caveats.append(f"The model covers {residues} residues but the sequence has {length}.")
    return caveats


def _secondary_caveat(summary: Mapping[str, Any], s: Mapping[str, Any]) -> list[str]:
    """Where values from the lower-trust file of figures quoted elsewhere are used (a
    mean of another model names its source in its own line)."""
    source = s.get("figures_source")
    if not s.get("per_residue") and source and "secondary" in source:
        return [f"The whole-model figures come from {named_source(source)}."]
    named = any("secondary" in o["source"] for o in s.get("other_means") or [])
    if not named and any("secondary" in str(x) for x in summary.get("sources") or []):
        return ["Some values (names, the entry id) come from a lower-trust secondary source."]
    return []


def _isoform_caveat(summary: Mapping[str, Any], canonical: str) -> str:
    """Whose features an isoform's brief maps, and where they hold."""
    head = (
        f"This is isoform {summary.get('uniprot_id')} of {canonical}: its own sequence and "
        f"AlphaFold DB model, residue numbers its own. UniProt places its features on the "
        f"canonical sequence of {canonical}"
    )
    uniprot = summary.get("uniprot")
    shared = uniprot.get("shared_with_canonical") if isinstance(uniprot, Mapping) else None
    if not shared:
        return f"{head}, so none are mapped here."
    return (
        f"{head}; those wholly within what this isoform shares with it residue for residue "
        f"({_stretches(shared, 'there')}) are mapped here, the rest are not (their place in "
        "this isoform, if any, is not in this data). Its comments (subunit, cofactors) are "
        "the entry's, for all its isoforms unless they name one."
    )


def _stretches(shared: list[tuple[int, int, int]], there: str) -> str:
    """Shared stretches in this brief's numbering, each with its numbers ``there`` where
    they differ."""
    return ", ".join(
        span(first, last) + ("" if not moved else f" ({span(first + moved, last + moved)} {there})")
        for first, last, moved in shared
    )


def _model_sequence_caveat(summary: Mapping[str, Any]) -> list[str]:
    """Where UniProt's sequence changed after the model was built: whose numbers the
    brief uses, and which features it could place."""
    uniprot = summary.get("uniprot")
    if not isinstance(uniprot, Mapping) or not isinstance(uniprot.get("model_sequence"), Mapping):
        return []
    modelled = uniprot["model_sequence"]
    head = (
        f"UniProt's sequence of {summary.get('uniprot_id')} ({summary.get('length')} residues) "
        f"is not the one AlphaFold DB modelled ({modelled['length']} residues): UniProt has "
        "changed it since the model was built, and residue numbers here are the model's."
    )
    placed, total = len(uniprot.get("features") or ()), modelled["features"]
    if not modelled["shared"]:
        return [f"{head} The two share no stretch, so none of UniProt's features is placed."]
    changed = modelled.get("changed") or []
    aligned = (
        f" Aligned, the two share {_stretches(modelled['shared'], 'in UniProt')}"
        + (
            f"; {len(changed)} residue(s) changed in place ({', '.join(map(str, changed[:10]))}"
            f"{', …' if len(changed) > 10 else ''}) keep their features"
            if changed
            else ""
        )
        + "."
    )
    if placed == total:
        return [f"{head}{aligned} All {total} of UniProt's features are placed on the model."]
    return [
        f"{head}{aligned} Of UniProt's {total} features, the {placed} within those stretches "
        "are placed on the model; the rest cross an insertion or a deletion (where they lie "
        "on the modelled sequence, the data do not say)."
    ]


def critique(
    summary: Mapping[str, Any],
    structure: Mapping[str, Any] | None,
    reasoning: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Caveats of the analysis (from the data) and ``basis`` (what it rests on)."""
    caveats = data_caveats(summary, structure)
    if _usable(structure) is not None and _usable(reasoning) is None:
        caveats.append("No reasoning stage result was available to check.")
    return {"caveats": caveats, "basis": basis(summary, _usable(structure) or structure)}


def data_caveats(summary: Mapping[str, Any], structure: Mapping[str, Any] | None) -> list[str]:
    """What the data say to beware of (the model, the entry, the figures): the caveats
    of a brief, and of a structure-only summary (which has no reasoning to check)."""
    s = _usable(structure)
    if s is None:
        return ["No structure analysis was available, so no confidence figure was used."]
    caveats = ["pLDDT is AlphaFold's predicted confidence, not experimental evidence of structure."]
    if s.get("per_residue") and s.get("units") and s.get("unit_pae") is None:
        caveats.append(
            "Without PAE no unit is checked as one rigid unit, and the relative placement "
            "of units and segments is unknown: treat each segment as separately reliable, "
            "not their arrangement."
        )
    caveats.extend(_consistency_caveats(summary, s))
    caveats.extend(annotation_caveats(summary))
    isoforms = summary.get("isoforms")
    if isoforms:
        caveats.append(
            f"This is the canonical isoform's model; AlphaFold DB also models {len(isoforms)} "
            f"other isoform(s) ({', '.join(isoforms)}), whose confidence may differ "
            f"(analyse one by its accession, as {isoforms[0]})."
        )
    elif summary.get("displayed_isoform") and not summary.get("isoform_of"):
        caveats.append(
            f"UniProt lists isoforms of {summary.get('uniprot_id')}; this brief is of the "
            f"canonical one ({summary['displayed_isoform']}), whose sequence AlphaFold DB "
            "modelled and on which UniProt places its features. The other isoforms are not "
            "in this data."
        )
    canonical = summary.get("isoform_of")
    if canonical:
        caveats.append(_isoform_caveat(summary, canonical))
    version, date = s.get("model_version"), s.get("model_date")
    named_by = (summary.get("alphafold") or {}).get("model_version_basis")
    if version:
        caveats.append(
            f"Model version v{version}"
            + (f" (not stated by its source: only {named_by})" if named_by else "")
            + (f", created {date}" if date else ", creation date not recorded")
            + ": a later AlphaFold DB release may differ."
        )
    else:
        caveats.append("The AlphaFold model version is not recorded.")
    caveats.extend(_secondary_caveat(summary, s))
    return caveats


def basis(summary: Mapping[str, Any], structure: Mapping[str, Any] | None) -> list[str]:
    """The data this brief rests on, each named (file or URL, version, date)."""
    s = _usable(structure) or {}
    found = []
    if s.get("per_residue"):
        found.append(f"per-residue pLDDT: {s.get('model_file') or 'model file not named'}")
    elif s:
        found.append("whole-model pLDDT figures only (no per-residue data)")
    if s.get("units") is not None:
        found.append("structural units: the model's own coordinates (CB contacts)")
    if s.get("pae_file"):
        found.append(f"PAE: {s['pae_file']}")
    uniprot = summary.get("uniprot")
    if isinstance(uniprot, Mapping):
        version = uniprot.get("release") or (
            f"entry version {uniprot['entry_version']}" if uniprot.get("entry_version") else None
        )
        when = ", ".join(
            str(x)
            for x in (version, f"last annotated {uniprot['date']}" if uniprot.get("date") else None)
            if x
        )
        found.append(f"UniProt features: {uniprot.get('source')}" + (f" ({when})" if when else ""))
    sources = summary.get("sources") or []
    if sources:
        origins = summary.get("provenance") or {}
        named = [_origin(str(x), origins.get(x)) for x in sources]
        found.append("all sources: " + ", ".join(named))
    return found


def _origin(name: str, record: Mapping[str, Any] | None) -> str:
    """A source file with where it comes from: its repository, path and commit, or
    the file it was made from (a URL, or a file of unknown origin, as it is)."""
    if not record:
        return name
    if record.get("repository"):
        how = "" if record.get("how") == "verbatim" else f"{record['how']}, "
        where = f"{record['repository']} {record['path']} @{str(record['commit'])[:12]}"
        return f"{name} ({how}{where})"
    if record.get("from"):
        return f"{name} ({record['how']} from {record['from']})"
    known = "assembled here" if record.get("how") == "assembled" else "repository not identified"
    note = record.get("note")
    return f"{name} ({known}: {note})" if note else f"{name} ({known})"
