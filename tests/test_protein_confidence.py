"""Confidence where it lives: segments, units, PAE between units and UniProt features,
checked against an independent reading of the raw model files through gemmi."""

from __future__ import annotations

import json
import re
from itertools import pairwise
from pathlib import Path
from typing import Any

import gemmi
import pytest

from lyra.proteins._analysis import analyze_structure, critique, reason, synthesize
from lyra.proteins._confidence import FRAYING_MAX, MERGE_GAP, MIN_SEGMENT_LENGTH, segment
from lyra.proteins._features import map_features
from lyra.proteins._units import CONTACT_DISTANCE, MIN_CONTACTS, MIN_UNIT_LENGTH
from lyra.proteins._validate import process_protein
from raw_proteins import by_band, mean_of, raw_plddt

APP = "AF-P05067-F1-model_v6.pdb"

REPO = Path(__file__).resolve().parents[1]
RAW = REPO / "data" / "proteins"
DATA = REPO / "src" / "lyra" / "proteins" / "data" / "proteins.json"
ENTRIES: dict[str, dict[str, Any]] = json.loads(DATA.read_text(encoding="utf-8"))["entries"]
WITH_MODEL = sorted(
    acc for acc, e in ENTRIES.items() if e["alphafold"] and e["alphafold"]["plddt"] is not None
)


def _brief(acc: str) -> str:
    summary = process_protein(acc)
    structure = analyze_structure(summary)
    reasoning = reason(summary, structure)
    return synthesize(acc, summary, structure, reasoning, critique(summary, structure, reasoning))


def _gemmi_plddt(acc: str) -> list[float]:
    """Per-residue pLDDT read from the raw model file with gemmi (CA B-factor)."""
    return raw_plddt(ENTRIES[acc]["alphafold"]["model_file"])


def _independent_segments(values: list[float]) -> list[tuple[int, int, str, float]]:
    """The documented rules, written again from the docstring (not lyra's code)."""
    n = len(values)
    ordered = [v >= 70 for v in values]
    spans: list[list[int]] = []
    i = 0
    while i < n:
        if ordered[i]:
            j = i
            while j + 1 < n and ordered[j + 1]:
                j += 1
            if spans and i - spans[-1][1] - 1 <= MERGE_GAP:
                spans[-1][1] = j
            else:
                spans.append([i, j])
            i = j + 1
        else:
            i += 1
    spans = [s for s in spans if s[1] - s[0] + 1 >= MIN_SEGMENT_LENGTH]
    marks = ["x"] * n
    for s, e in spans:
        marks[s : e + 1] = ["o"] * (e - s + 1)
    # Everything else: low and very low pieces, each named by its own mean.
    out: list[tuple[int, int, str, float]] = []
    k = 0
    while k < n:
        j = k
        while j + 1 < n and marks[j + 1] == marks[k]:
            j += 1
        if marks[k] == "o":
            out.append((k + 1, j + 1, "ordered", float(mean_of(values[k : j + 1]))))
        else:
            out.extend(_stretch(values, k, j))
        k = j + 1
    return out


def _stretch(values: list[float], start: int, end: int) -> list[tuple[int, int, str, float]]:
    pieces: list[list[Any]] = []
    for index in range(start, end + 1):
        kind = "very_low" if values[index] < 50 else "low"
        if pieces and pieces[-1][2] == kind:
            pieces[-1][1] = index
        else:
            pieces.append([index, index, kind])
    # Absorb short pieces into the one before (the first into the one after).
    merged: list[list[Any]] = []
    for piece in pieces:
        short = piece[1] - piece[0] + 1 < MIN_SEGMENT_LENGTH
        if merged and (short or merged[-1][2] == piece[2]):
            merged[-1][1] = piece[1]
        else:
            merged.append(piece)
    if len(merged) > 1 and merged[0][1] - merged[0][0] + 1 < MIN_SEGMENT_LENGTH:
        merged[1][0] = merged[0][0]
        merged.pop(0)
    out: list[tuple[int, int, str, float]] = []
    for s, e, _ in merged:
        mean = float(mean_of(values[s : e + 1]))
        kind = "very_low" if mean < 50 else "low"
        if out and out[-1][2] == kind:
            s = out.pop()[0] - 1
            mean = float(mean_of(values[s : e + 1]))
        out.append((s + 1, e + 1, kind, mean))
    return out


def _band(value: float) -> str:
    if value < 50:
        return "very low"
    if value < 70:
        return "low"
    return "confident" if value < 90 else "very high"


@pytest.mark.parametrize("acc", WITH_MODEL)
def test_brief_table_matches_an_independent_reading_of_the_model_file(acc: str) -> None:
    """Each segment row of the brief is recomputed from the raw model file via gemmi."""
    values = _gemmi_plddt(acc)
    assert values == ENTRIES[acc]["alphafold"]["plddt"]
    expected = _independent_segments(values)
    fraying = [
        s
        for s in expected
        if s[2] != "ordered"
        and s[1] - s[0] + 1 <= FRAYING_MAX
        and (s[0] == 1 or s[1] == len(values))
    ]
    brief = _brief(acc)
    rows = [s for s in expected if s not in fraying]
    assert _segment_rows(brief) == [
        [_span(s, e), str(e - s + 1), f"{m:.2f}", _band(m)] for s, e, _, m in rows
    ]
    for s, e, _, m in fraying:
        assert f"{_span(s, e)} (mean pLDDT {m:.2f})" in brief


def _segment_rows(brief: str) -> list[list[str]]:
    """The first four cells (residues, length, mean, band) of the brief's segment table."""
    lines = brief.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Residues | Length |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.split("|")[1:5]])
    return rows


def _span(start: int, end: int) -> str:
    """Residues as a brief writes them: ``16`` for one, ``30–189`` for more."""
    return str(start) if start == end else f"{start}–{end}"


def test_p05067_brief_shows_its_ordered_segments_and_never_calls_it_unreliable() -> None:
    """APP's three ordered domains appear with their own means; the global mean is one line."""
    brief = _brief("P05067")
    for row in (
        f"| 30–189 | 160 | 88.48 | confident | {by_band(APP, (30, 189))} | unit 1 |",
        f"| 284–343 | 60 | 89.91 | confident | {by_band(APP, (284, 343))} | unit 2 |",
        f"| 376–569 | 194 | 89.47 | confident | {by_band(APP, (376, 569))} | unit 3 |",
    ):
        assert row in brief
    lowered = brief.lower()
    assert "reliability" not in lowered
    assert lowered.count("whole-model mean plddt") == 1


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([95.0] * 10, [(1, 10, "ordered")]),
        ([95.0] * 10 + [40.0] * MERGE_GAP + [95.0] * 10, [(1, 10 + MERGE_GAP + 10, "ordered")]),
        (
            [95.0] * 10 + [40.0] * (MERGE_GAP + 1) + [95.0] * 10,
            [
                (1, 10, "ordered"),
                (11, 11 + MERGE_GAP, "very_low"),
                (12 + MERGE_GAP, 21 + MERGE_GAP, "ordered"),
            ],
        ),
        ([40.0] * 20 + [95.0] * (MIN_SEGMENT_LENGTH - 1) + [40.0] * 20, [(1, 44, "very_low")]),
        ([60.0] * 20 + [30.0] * 20, [(1, 20, "low"), (21, 40, "very_low")]),
        ([30.0] * 20 + [60.0] * (MIN_SEGMENT_LENGTH - 1) + [30.0] * 20, [(1, 44, "very_low")]),
        (
            [30.0] * 20 + [60.0] * MIN_SEGMENT_LENGTH + [30.0] * 20,
            [(1, 20, "very_low"), (21, 25, "low"), (26, 45, "very_low")],
        ),
    ],
)
def test_segment_rules(values: list[float], expected: list[tuple[int, int, str]]) -> None:
    """Short gaps merge into ordered segments, short ordered blips stay disordered,
    and low (50–70) is kept apart from very low (< 50)."""
    found = segment(values)
    assert [(s.start, s.end, s.kind) for s in [*found.segments, *found.fraying]] == expected


@pytest.mark.parametrize("acc", WITH_MODEL)
def test_no_segment_in_a_brief_is_shorter_than_the_rule_it_prints(acc: str) -> None:
    """Every brief says a run of fewer than MIN_SEGMENT_LENGTH residues is no segment of
    its own: no table row may be one (BRCA1's 55–58 and Q5VSL9's 494–497 were 4 long)."""
    structure = analyze_structure(process_protein(acc))
    short = [s for s in structure["segments"] if s["length"] < MIN_SEGMENT_LENGTH]
    assert short == []
    assert MERGE_GAP < MIN_SEGMENT_LENGTH  # a gap too short to stand alone is bridged


@pytest.mark.parametrize(
    ("values", "fraying"),
    [
        ([60.0] * FRAYING_MAX + [95.0] * 30, [(1, FRAYING_MAX)]),
        ([60.0] * (FRAYING_MAX + 1) + [95.0] * 30, []),
        ([95.0] * 30 + [40.0] * 5, [(31, 35)]),
    ],
)
def test_terminal_fraying_is_set_apart(values: list[float], fraying: list[tuple[int, int]]) -> None:
    """A short low stretch at either end is fraying, not a segment of the table."""
    found = segment(values)
    assert [(s.start, s.end) for s in found.fraying] == fraying
    assert not {(s.start, s.end) for s in found.segments} & set(fraying)


def _independent_units(acc: str) -> list[list[tuple[int, int]]]:
    """Units recomputed from the raw model file: CB (CA for Gly) contacts counted by brute force."""
    structure = gemmi.read_structure(str(RAW / ENTRIES[acc]["alphafold"]["model_file"]))
    atoms = [r.find_atom("CB", "*") or r.find_atom("CA", "*") for r in structure[0][0]]
    ordered = [
        (s["start"], s["end"])
        for s in analyze_structure(process_protein(acc))["segments"]
        if s["kind"] == "ordered" and s["length"] >= MIN_UNIT_LENGTH
    ]
    joined = {k: {k} for k in range(len(ordered))}
    for a, (s1, e1) in enumerate(ordered):
        for b in range(a + 1, len(ordered)):
            s2, e2 = ordered[b]
            contacts = sum(
                1
                for i in range(s1, e1 + 1)
                for j in range(s2, e2 + 1)
                if atoms[i - 1].pos.dist(atoms[j - 1].pos) <= CONTACT_DISTANCE
            )
            if contacts >= MIN_CONTACTS:
                group = joined[a] | joined[b]
                for k in group:
                    joined[k] = group
    groups = {min(g): sorted(g) for g in joined.values()}
    return [[ordered[k] for k in groups[key]] for key in sorted(groups)]


@pytest.mark.parametrize("acc", ["P05067", "P38398", "P00221"])
def test_units_match_an_independent_contact_count(acc: str) -> None:
    """Units are the ordered segments joined by enough CB contacts in the model itself."""
    units = analyze_structure(process_protein(acc))["units"]
    assert [[tuple(r) for r in u["ranges"]] for u in units] == _independent_units(acc)


def test_pae_between_units_matches_the_raw_pae_file() -> None:
    """Q5VSL9's mean PAE between its units is recomputed from the raw PAE file."""
    structure = analyze_structure(process_protein("Q5VSL9"))
    document = json.loads((RAW / "AF-Q5VSL9-F1-predicted_aligned_error_v4.json").read_text())
    pae = document[0]["predicted_aligned_error"]
    first, second = structure["units"]
    rows = [r - 1 for s, e in first["ranges"] for r in range(s, e + 1)]
    cols = [r - 1 for s, e in second["ranges"] for r in range(s, e + 1)]
    forward = [pae[i][j] for i in rows for j in cols]
    backward = [pae[j][i] for i in rows for j in cols]
    both = forward + backward
    assert structure["unit_pae"] == [
        {
            "first": 1,
            "second": 2,
            "mean_pae": round(sum(both) / len(both), 2),
            "aligned_on_first": round(sum(forward) / len(forward), 2),
            "aligned_on_second": round(sum(backward) / len(backward), 2),
            "share_under_5": round(sum(1 for v in both if v < 5) / len(both), 3),
            "placement": "relative placement not determined",
        }
    ]
    brief = _brief("Q5VSL9")
    assert (
        f"| 1 and 2 | {mean_of(both)} | {mean_of(forward)} / {mean_of(backward)} | relative "
        "placement not determined |"
    ) in brief


@pytest.mark.parametrize("acc", ["Q5VSL9", "P05067"])
def test_a_brief_states_the_thresholds_its_segments_were_cut_by(acc: str) -> None:
    """The three thresholds that shape the segments (merged gaps, the shortest segment,
    terminal fraying) are stated in the brief beside its table, with the values the
    segmentation used."""
    brief = _brief(acc)
    rule = brief.split("How segments are cut: ", 1)[1].split("\n", 1)[0]
    assert f"broken by at most {MERGE_GAP} residues below 70" in rule
    assert f"fewer than {MIN_SEGMENT_LENGTH} residues is no segment" in rule
    assert f"at most {FRAYING_MAX} residues at either end" in rule


def test_a_units_pae_check_leaves_out_each_residues_pae_to_itself() -> None:
    """Within each of Q5VSL9's units, the mean PAE and the share of pairs under 5 Å are
    both over the pairs of different residues (recomputed from the raw PAE file): a
    residue's PAE to itself says nothing of how the unit holds together."""
    structure = analyze_structure(process_protein("Q5VSL9"))
    document = json.loads((RAW / "AF-Q5VSL9-F1-predicted_aligned_error_v4.json").read_text())
    pae = document[0]["predicted_aligned_error"]
    for unit in structure["units"]:
        residues = [r - 1 for s, e in unit["ranges"] for r in range(s, e + 1)]
        pairs = [pae[i][j] for i in residues for j in residues if i != j]
        check = unit["pae"]
        assert check["within_pae"] == round(sum(pairs) / len(pairs), 2)
        assert check["within_share_under_5"] == round(
            sum(1 for v in pairs if v < 5) / len(pairs), 3
        )


def test_a_scripts_json_carries_the_pae_figures_as_numbers() -> None:
    """The figures a script reads (output.json, --json) hold each unit's PAE check and
    the PAE between units as numbers, the same as the brief's, and the pLDDT segments
    end to end; a model without PAE says None, never a confirmation."""
    from lyra.proteins import analyze_sync

    output = analyze_sync(["Q5VSL9", "P05067"], timeout=10)
    q5, app = (next(a for a in output.completed_analyses if a.protein_id == p)
               for p in ("Q5VSL9", "P05067"))  # fmt: skip
    first = q5.figures["unit_list"][0]
    assert first["pae_check"]["rigid"] is False
    assert first["pae_check"]["within_pae"] == 6.25
    assert first["ranges"][0] == [66, 335]
    [between] = q5.figures["unit_pae"]
    assert (between["first"], between["second"], between["mean_pae"]) == (1, 2, 24.99)
    assert "| 1 and 2 | 24.99 |" in q5.brief
    segments = q5.figures["segments"]
    assert segments[0]["start"] == 1
    assert all(a["end"] + 1 == b["start"] for a, b in pairwise(segments))
    assert all(u["pae_check"] is None for u in app.figures["unit_list"])
    assert "unit_pae" not in app.figures
    # the domains by residue, as UniProt's flat file gives them (read here on its own)
    flat = (RAW / "uniprot_P05067_flatfile_2025.txt").read_text(encoding="utf-8")
    given = [(int(a), int(b)) for a, b in re.findall(r"^FT   DOMAIN +(\d+)\.\.(\d+)$", flat, re.M)]
    domains = app.figures["domains"]
    assert [(d["start"], d["end"]) for d in domains] == given
    assert all(
        d["type"] == "Domain" and d["label"].endswith(f"{d['start']}–{d['end']}") for d in domains
    )


def test_the_outside_table_says_which_stretches_it_leaves_out() -> None:
    """Q5VSL9's low stretches 336–350 and 785–796 (under 20 residues) are not in the
    table of stretches outside the units, and the brief says that such are left out."""
    brief = _brief("Q5VSL9")
    table = brief.split("### Outside the units", 1)[1].split("\n### ", 1)[0]
    assert "shorter low stretches are left out" in table
    listed = [line.split(" | ")[0].strip("| ") for line in table.splitlines() if "|" in line]
    assert "336–350" not in listed
    assert "351–421" in listed


@pytest.mark.parametrize(
    ("feature", "verdict"),
    [
        ({"type": "Region", "description": "Disordered"}, "agree: annotated disordered"),
        ({"type": "Domain", "description": "X"}, "disagree: annotated as a structured element"),
        ({"type": "Signal", "description": ""}, "removed in the mature protein"),
        ({"type": "Propeptide", "description": ""}, "removed in the mature protein"),
        ({"type": "Motif", "description": "NLS"}, ""),
    ],
)
def test_feature_verdicts_on_a_very_low_stretch(feature: dict[str, Any], verdict: str) -> None:
    """On a very low stretch, a disordered region agrees and a domain disagrees; a signal
    peptide or propeptide is removed in the mature protein."""
    values = [30.0] * 10 + [95.0] * 10
    [mapped] = map_features([{**feature, "start": 1, "end": 10, "ligand": None}], values)
    assert mapped["verdict"].startswith(verdict)
    assert (mapped["mean_plddt"], mapped["band"]) == (30.0, "very low")


@pytest.mark.parametrize(
    ("predicted_by", "verdict", "label"),
    [
        (None, "agree: a structured element, predicted ordered", "Domain: E1 1–10"),
        (
            "PROSITE-ProRule:PRU01217",
            "agree: a structured element, predicted ordered (two predictions, not an observation)",
            "Domain: E1 (predicted from its sequence, PROSITE-ProRule:PRU01217) 1–10",
        ),
    ],
)
def test_a_domain_a_sequence_model_predicts_is_said_to_be_one(
    predicted_by: str | None, verdict: str, label: str
) -> None:
    """A domain resting on a sequence model's match alone (ECO:0000255 with PROSITE-
    ProRule, as APP's E1, Kunitz and E2) agrees with a confident model as one prediction
    with another, as a disordered region MobiDB-lite predicts does; one observed, as
    plain agreement."""
    from lyra.proteins._features import label as label_of

    feature = {"type": "Domain", "description": "E1", "start": 1, "end": 10, "ligand": None}
    if predicted_by:
        feature["predicted_by"] = predicted_by
    [mapped] = map_features([feature], [90.0] * 10)
    assert mapped["verdict"] == verdict
    assert label_of(feature) == label


def test_features_beyond_the_model_are_left_out() -> None:
    """A feature annotated past the modelled residues is not mapped."""
    feature = {"type": "Domain", "start": 5, "end": 30, "description": "", "ligand": None}
    assert map_features([feature], [90.0] * 20) == []


def test_p04637_brief_labels_its_2005_annotation_and_says_what_is_missing() -> None:
    """p53's features are from the 2005 flat file (labelled so); without per-residue
    pLDDT each is listed with "not held", and the brief says how to get the pLDDT."""
    brief = _brief("P04637")
    assert "Rel. 48, last annotated 2005-09-13: old annotation" in brief
    assert (
        "(uniprot_P04637_flatfile_2005_bioruby.txt) (Rel. 48, last annotated 2005-09-13)" in brief
    )
    assert "| DNA binding | 102–292 | not held |" in brief
    assert "| Region: Oligomerization | 325–356 | not held |" in brief
    assert "run with --source live" in brief


def test_a_failed_structure_stage_leaves_the_plddt_not_read_never_not_held() -> None:
    """When the structure analysis fails, the features of a protein whose data hold its
    per-residue pLDDT are listed as "not read" and the brief says why, never "not held"
    (that is for data without it, as P04637's)."""
    from lyra.proteins import analyze_sync

    output = analyze_sync(["P05067"], faults=["P05067:structure_error"], timeout=10)
    [partial] = output.partial_analyses
    assert "### UniProt features (pLDDT not read)" in partial.brief
    assert "| Domain: E1 | 28–189 | not read |" in partial.brief
    assert "the structure analysis that reads it did not finish" in partial.brief
    assert "not held" not in partial.brief


def test_a_scripts_json_marks_figures_of_the_lower_trust_secondary_source() -> None:
    """A protein whose figures come from the file of figures quoted elsewhere (P04637:
    no model file bundled) is marked so in its model's JSON, where a script can test
    it; one read from its model file is not."""
    from lyra.proteins import analyze_sync

    output = analyze_sync(["P04637", "P05067"], timeout=10)
    models = {a.protein_id: a.figures["model"] for a in output.completed_analyses}
    assert models["P04637"]["source"] == "facts_secondary_sources.json"
    assert models["P04637"]["lower_trust"] is True
    assert models["P05067"]["source"] == "AF-P05067-F1-model_v6.pdb"
    assert models["P05067"]["lower_trust"] is False


def test_the_feature_table_says_which_kinds_it_reads_and_holds_only_those() -> None:
    """The table of UniProt features names the kinds it reads, every row is of one of
    them, and it says that the other kinds, as the disulfide bonds APP's entry gives,
    are not read (a rule said "all features")."""
    brief = _brief("P05067")
    table = brief.split("### UniProt features and their confidence", 1)[1].split("\n### ", 1)[0]
    kinds = table.split("Kinds read: ", 1)[1].split(" (", 1)[0].split(", ")
    rows = table.split("| Feature | Residues |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    types = {row[2:].split(" | ", 1)[0].split(":", 1)[0] for row in rows}
    assert types
    assert types <= set(kinds)
    # the kinds read beside the table are where it says: the chains and the sites
    assert "Chain" in kinds
    assert "| Amyloid-beta protein 42 | 672–713 |" in brief
    assert "Glycosylation" in kinds
    sites = brief.split("Sites (", 1)[1].split("\n", 1)[0]
    assert "N-linked (GlcNAc...) asparagine at residues 542" in sites  # a glycosylation
    flat = (RAW / "uniprot_P05067_flatfile_2025.txt").read_text(encoding="utf-8")
    assert "\nFT   DISULFID " in flat
    assert "Disulfide bond" not in kinds
    assert "(disulfide bonds, cleavage sites, modified residues, …) are not read" in table


def test_a_brief_without_per_residue_plddt_says_which_kinds_it_reads_too() -> None:
    """The table of features whose pLDDT is not held (the spike: no model file) names the
    kinds read as well; the spike's disulfide bonds and cleavage sites are not read."""
    brief = _brief("P0DTC2")
    held = brief.split("### UniProt features (pLDDT not held)", 1)[1].split("\n### ", 1)[0]
    assert "Kinds read: " in held
    assert "(disulfide bonds, cleavage sites, modified residues, …) are not read" in held
