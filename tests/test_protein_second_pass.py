"""Issue 30, point by point: a structural biologist's second pass over the briefs.

Each test goes through the public API (``lyra.proteins.analyze_sync``) or the command
line, and checks the figures it reads against the raw files, read again here with the
field's libraries (gemmi for the model, Bio.SwissProt for the UniProt flat file, the
PAE JSON as AlphaFold DB writes it), not with lyra's code.
"""

from __future__ import annotations

import json

import gemmi
import pytest

from lyra.proteins import AnalysisOutput, OfflineSource, analyze_sync
from raw_proteins import RAW, app_flat_file, brief_of, by_band, mean_of, raw_pae, raw_plddt

APP = "AF-P05067-F1-model_v6.pdb"
BRCA = "AF-P38398-F1-model_v4.pdb"
STRIP = "AF-Q5VSL9-F1-model_v4.cif"

BANDS = ("very high", "confident", "low", "very low")


@pytest.fixture(scope="module")
def everything() -> AnalysisOutput:
    """One run over every bundled protein."""
    return analyze_sync(OfflineSource().ids(), timeout=30)


def _band(value: float) -> str:
    if value < 50:
        return "very low"
    if value < 70:
        return "low"
    return "confident" if value < 90 else "very high"


def _counts(values: list[float]) -> list[int]:
    """Residues in each band, very high first."""
    return [sum(1 for v in values if _band(v) == band) for band in BANDS]


def _feature_band(values: list[float]) -> str:
    """A feature's band as a reviewer would give it: "mixed" when a quarter or more of its
    residues are ordered (≥ 70) and a quarter or more very low (< 50), since the band of
    its mean would then describe neither part; else the band of its mean."""
    very_high, confident, _, very_low = _counts(values)
    if min(very_high + confident, very_low) >= 0.25 * len(values):
        return "mixed"
    return _band(float(mean_of(values)))


def _by_band(values: list[float]) -> str:
    return " · ".join(f"{b} {n}" for b, n in zip(BANDS, _counts(values), strict=True))


def _block(pae: list[list[float]], rows: range, cols: range) -> list[float]:
    return [pae[i - 1][j - 1] for i in rows for j in cols]


# --------------------------------------------------------------------------- PAE


def test_a_unit_whose_segments_pae_does_not_join_is_not_called_rigid(
    everything: AnalysisOutput,
) -> None:
    """'Q5VSL9 unit 1 is called "very high … fit for docking" while the PAE between 66–335
    and 422–493 is 10.1 Å' (since 4-residue gaps merge: 66–335 and 422–535, 8.7 Å): the unit
    is "segments in contact; arrangement not confirmed by PAE", its figures recomputed from
    the raw PAE file, and its use given per segment."""
    brief = brief_of(everything, "Q5VSL9")
    pae = raw_pae("AF-Q5VSL9-F1-predicted_aligned_error_v4.json")
    first, second = range(66, 336), range(422, 536)
    forward, backward = _block(pae, first, second), _block(pae, second, first)
    both = forward + backward
    share = sum(1 for v in both if v < 5) / len(both)
    row = (
        f"| 1 | 66–335 and 422–535 | {mean_of(both)} | {mean_of(forward)} / {mean_of(backward)} | "
        f"{share * 100:.1f}% | relative placement uncertain |"
    )
    assert row in brief
    assert float(mean_of(both)) > 5  # no rigid placement
    assert share < 0.5
    plddt = raw_plddt("AF-Q5VSL9-F1-model_v4.cif")
    unit = [r for s, e in ((66, 335), (422, 535), (541, 784)) for r in range(s, e + 1)]
    within = [pae[i - 1][j - 1] for i in unit for j in unit if i != j]
    assert (
        f"| 1 | 66–335, 422–535, 541–784 | 628 | {mean_of([plddt[r - 1] for r in unit])} | "
        f"very high | {by_band(STRIP, (66, 335), (422, 535), (541, 784))} | segments in "
        f"contact; arrangement not confirmed by PAE (mean PAE {mean_of(within)} Å within it; "
        f"66–335 and 422–535: {mean_of(both)} Å) |"
    ) in brief
    [line] = [h for h in brief.splitlines() if h.startswith("- Unit 1 ")]
    assert "fit for structure-based work" not in line
    assert "not on their relative placement" in line
    for start, end in ((66, 335), (422, 535), (541, 784)):
        # Each segment is judged on its own PAE, read from the raw file.
        piece = range(start, end + 1)
        own = [pae[i - 1][j - 1] for i in piece for j in piece if i != j]
        mean_plddt = mean_of(plddt[start - 1 : end])
        high = sum(v >= 90 for v in plddt[start - 1 : end])  # docking needs ≥ 90 residue by residue
        grade = "fold-level"
        if _band(float(mean_plddt)) == "very high":
            grade = f"fold-level, docking-grade only at its {high} very high residues"
            if high == end - start + 1:
                grade = "docking-grade within it"
        rigid = float(mean_of(own)) < 5  # 422–535 is not: PAE does not hold its two halves
        said = "" if rigid else ", not one rigid piece by PAE"
        assert (
            f"{start}–{end} {_band(float(mean_plddt))} ({mean_plddt}; mean PAE {mean_of(own)} Å "
            f"within it{said}): {grade if rigid else 'locally only'}"
        ) in line


def test_the_rule_its_threshold_and_its_reference_are_stated(everything: AnalysisOutput) -> None:
    """The brief states the rule that confirms a unit, its 5 Å threshold, and where the
    field groups domains by PAE (graph clustering of the matrix, pae_to_domains)."""
    brief = brief_of(everything, "P00221")
    assert (
        "lyra's rule: a unit found from contacts is one rigid unit when the mean PAE within "
        "it, and between each pair of its segments, is below 5 Å. The threshold is the PAE "
        "cutoff of pae_to_domains (T. Croll, github.com/tristanic/pae_to_domains; also in "
        "protti's predict_alphafold_domain and in ISOLDE), whose graph links two residues "
        "only where their PAE is below 5 Å before it is clustered into pseudo-rigid domains;"
    ) in brief
    # How the means are taken, and the thresholds behind "What it says" (a review found
    # neither stated): the diagonal left out, 5 and 15 Å between parts.
    assert (
        "leaves out each residue's PAE to itself (the diagonal: a residue aligned on itself, "
        "near 0 Å, says nothing of placement)"
    ) in brief
    assert (
        "it links single residue pairs and clusters the graph, where lyra tests means over "
        "whole blocks" in brief
    )
    assert (
        "the cutoffs are lyra's: below 5 Å confident, above 15 Å not determined, uncertain "
        "between." in brief
    )
    raw = json.loads((RAW / "AF-P00221-F1-predicted_aligned_error_v4.json").read_text())
    assert all(v == int(v) for row in raw[0]["predicted_aligned_error"] for v in row)
    assert "This PAE file gives each value in whole ångströms" in brief


def test_the_pae_files_precision_is_stated_only_where_it_rounds() -> None:
    """Whole ångströms are said of a file that gives them, not of one with decimals (a
    matrix built for this test)."""
    from lyra.proteins._profile import model_profile

    plddt = [90.0] * 4
    whole = [[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1], [3, 2, 1, 0]]
    finer = [[v + 0.25 for v in row] for row in whole]
    assert model_profile(plddt, None, whole)["pae_whole_angstroms"] is True
    assert model_profile(plddt, None, finer)["pae_whole_angstroms"] is False
    assert model_profile(plddt, None, None)["pae_whole_angstroms"] is None


def test_a_unit_is_rigid_by_pae_and_every_listed_pae_file_is_used(
    everything: AnalysisOutput,
) -> None:
    """'P00221's PAE file is listed as a source but nothing from it is reported (the
    transit peptide sits 24–29 Å from the domain; inside the domain 3.1 Å)'."""
    brief = brief_of(everything, "P00221")
    assert "- PAE: AF-P00221-F1-predicted_aligned_error_v4.json" in brief
    pae = raw_pae("AF-P00221-F1-predicted_aligned_error_v4.json")
    domain, tail = range(50, 148), range(1, 50)
    within = [pae[i - 1][j - 1] for i in domain for j in domain if i != j]
    assert mean_of(within) == "3.10"
    assert f"one rigid unit by PAE (mean PAE {mean_of(within)} Å within it, below 5 Å)" in brief
    on_tail, on_domain = _block(pae, tail, domain), _block(pae, domain, tail)
    assert (mean_of(on_domain), mean_of(on_tail)) == ("24.41", "28.86")
    assert (
        f"| 1–49 | 1 | {mean_of(on_tail + on_domain)} | "
        f"{mean_of(on_tail)} / {mean_of(on_domain)} | relative placement not determined |"
    ) in brief


def test_without_pae_a_unit_is_not_checked(everything: AnalysisOutput) -> None:
    """'BRCA1 joins its coiled-coil helix 1392–1419 to the BRCT pair on 15 contacts with
    no PAE available': not checked, and used segment by segment."""
    brief = brief_of(everything, "P38398")
    assert (
        f"| 2 | 1392–1419, 1649–1859 | 239 | 91.28 | very high | "
        f"{by_band(BRCA, (1392, 1419), (1649, 1859))} | segments in contact; "
        "arrangement not checked (no PAE) |"
    ) in brief
    [line] = [h for h in brief.splitlines() if h.startswith("- Unit 2 ")]
    assert "1392–1419 confident (85.73): fold-level; 1649–1859 very high (92.02)" in line


# --------------------------------------------------------------------------- stretches


def test_a_short_confident_stretch_is_listed_and_matched_to_its_feature(
    everything: AnalysisOutput,
) -> None:
    """'APP 705–723 (confident, mean 81.84; the transmembrane helix) appears nowhere':
    it is listed, with its mean from the raw model, and matched to TRANSMEM 702–722 of
    the raw flat file."""
    plddt = raw_plddt("AF-P05067-F1-model_v6.pdb")
    assert mean_of(plddt[704:723]) == "81.84"
    transmem = _features("TRANSMEM")
    assert transmem == [(702, 722, "Helical")]
    brief = brief_of(everything, "P05067")
    assert (
        f"| 705–723 | 19 | 81.84 | confident | {by_band(APP, (705, 723))} | short confident "
        "stretch (no unit) | "
    ) in brief
    [line] = [h for h in brief.splitlines() if h.startswith("- Residues 705–723 ")]
    assert "Transmembrane: Helical 702–722" in line
    assert "the membrane helix is predicted confidently" in line


def test_low_band_segments_are_interpreted_where_features_explain_them(
    everything: AnalysisOutput,
) -> None:
    """'Low-band segments (50–70) are never interpreted': APP's low C-terminal tail is
    its cytoplasmic domain; P00221's low N-terminus is placed by PAE and, its name being
    chloroplastic, pointed to as the likely transit peptide (no features are bundled)."""
    brief = brief_of(everything, "P05067")
    [tail] = [h for h in brief.splitlines() if h.startswith("- Residues 742–770 ")]
    assert "low confidence: at most a rough backbone" in tail
    assert "Topological domain: Cytoplasmic 723–770" in tail
    ferredoxin = brief_of(everything, "P00221")
    [start] = [h for h in ferredoxin.splitlines() if h.startswith("- Residues 1–49 ")]
    assert "PAE to unit 1 26.64 Å (24.41 Å aligned on the unit, 28.86 Å aligned on" in start
    assert "N-terminal transit peptide" in start


def test_very_low_allows_poorly_predicted(everything: AnalysisOutput) -> None:
    """The disorder sentence allows 'or poorly predicted'."""
    brief = brief_of(everything, "P38398")
    assert (
        "likely disordered in isolation, ordered only with a partner, or poorly predicted" in brief
    )


def test_a_peptide_modelled_alone_is_not_fit_for_work_on_the_fold(
    everything: AnalysisOutput,
) -> None:
    """'A 10-residue helix of a peptide modelled alone is "fit for work on the fold"'."""
    brief = brief_of(everything, "A0A0C5B5G6")
    [line] = [h for h in brief.splitlines() if h.startswith("- Residues 6–15 ")]
    assert "fit for work on the fold" not in line
    assert "16 residues modelled alone: a locally confident stretch, not a fold" in line


# --------------------------------------------------------------------------- features


def _features(*kinds: str) -> list[tuple[int, int, str]]:
    """Features of the raw P05067 flat file, read with Biopython's SwissProt parser."""
    entry = app_flat_file()
    return [
        (int(f.location.start) + 1, int(f.location.end), str(f.qualifiers.get("note", "")))
        for f in entry.features
        if f.type in kinds
    ]


def test_a_stretch_no_feature_explains_names_the_features_within_it(
    everything: AnalysisOutput,
) -> None:
    """'APP 582–697: "no UniProt feature matches it", while it holds the Cu/Zn sites
    677/681/684/685 and the start of Aβ42': the features within it or across its ends
    are named (sites by ligand), those spanning it all are not."""
    entry = app_flat_file()
    sites: dict[str, list[int]] = {}
    for f in entry.features:
        if f.type == "BINDING" and 582 <= int(f.location.start) + 1 <= 697:
            sites.setdefault(f.qualifiers["ligand"], []).append(int(f.location.start) + 1)
    assert sites == {"Cu(2+)": [677, 681, 684, 685], "Zn(2+)": [677, 681, 684, 685]}
    [line] = [
        h
        for h in brief_of(everything, "P05067").splitlines()
        if h.startswith("- Residues 582–697 ")
    ]
    assert (  # (the extracellular domain, 18–701, spans it: it is no news about it)
        "no UniProt feature other than a chain or a site shares at least 50% of its residues "
        "and of its own (within it or across its ends: "
    ) in line
    for ligand, where in sites.items():
        assert f"Binding site: {ligand} {', '.join(map(str, where))}" in line
    assert "Chain: Amyloid-beta protein 42 672–713" in line
    assert "Amyloid-beta precursor protein 18–770" not in line  # the whole chain: no news


def test_an_isoform_carries_the_canonical_features_where_its_sequence_is_the_same(
    everything: AnalysisOutput,
) -> None:
    """'P05067-2's brief says UniProt's features are not mapped, while its residues
    1–289 are the canonical ones, numbering and all': read from the raw isoform model
    and flat file, the features wholly within the shared stretch are mapped, a feature
    reaching past it is not."""
    from lyra.proteins import analyze_sync

    structure = gemmi.read_structure(str(RAW / "AF-P05067-2-F1-model_v6.cif"))
    isoform = gemmi.one_letter_code([r.name for r in structure[0][0]])
    canonical = app_flat_file().sequence
    shared = next(i for i, (a, b) in enumerate(zip(isoform, canonical, strict=False)) if a != b)
    assert (shared, len(isoform)) == (289, 305)  # the scientist's 1–289
    domains = _features("DOMAIN")
    assert (28, 189, "E1") in domains
    [brief] = [a.brief for a in analyze_sync(["P05067-2"], timeout=10).completed_analyses]
    assert "| Domain: E1 | 28–189 |" in brief
    assert "Cu(2+) at residues 147 " in brief  # a site within the shared stretch
    assert "BPTI/Kunitz" not in brief  # 291–341: past it
    assert "(1–289) are mapped here, the rest are not" in brief


@pytest.mark.parametrize("isoform", ["P05067-2", "P05067-4"])
def test_an_isoforms_sources_name_the_file_its_features_come_from(isoform: str) -> None:
    """'The P05067-2 brief cites uniprot_P05067_flatfile_2025.txt for its features but
    leaves it out of its "all sources" list': every file a brief names as a source is
    in that list."""
    from lyra.proteins import analyze_sync

    lines = brief_of(analyze_sync([isoform], timeout=10), isoform).splitlines()
    [features] = [line for line in lines if line.startswith("- UniProt features: ")]
    [every] = [line for line in lines if line.startswith("- all sources: ")]
    assert "(uniprot_P05067_flatfile_2025.txt)" in features
    assert (
        "uniprot_P05067_flatfile_2025.txt (dkountour02399/ergastirio2o P05067.txt @8527bdd4a654)"
    ) in every


def test_every_source_of_a_brief_says_where_it_comes_from(everything: AnalysisOutput) -> None:
    """'Repository and commit are not recorded anywhere in the output; the briefs and
    --json name file names only': each file a brief's "all sources" names is followed by
    its repository, path and commit, or by the file it was made from, and the figures
    (the --json output) hold the same records."""
    provenance = json.loads((RAW / "provenance.json").read_text(encoding="utf-8"))["files"]
    for entry in everything.completed_analyses:
        [every] = [line for line in entry.brief.splitlines() if line.startswith("- all sources: ")]
        records = entry.figures["provenance"]
        assert records, entry.protein_id
        for name, record in records.items():
            assert record == provenance[name]
            assert f"{name} (" in every, (entry.protein_id, name)
            if record["repository"]:
                assert f"{record['repository']} {record['path']} @{record['commit'][:12]}" in every


def test_features_carried_to_an_isoform_are_renumbered_after_what_it_lacks() -> None:
    """A stretch the isoform lacks shifts the numbers of what follows it; a feature
    across the stretch is carried nowhere. The sequences are built for this test."""
    from lyra.proteins._features import carried_to_isoform

    canonical, isoform = "MABCDEFGHIKLMN", "MABCDHIKLMN"  # EFG (6–8) spliced out
    features = [
        {"type": "Domain", "description": "head", "start": 2, "end": 4},
        {"type": "Region", "description": "across", "start": 4, "end": 10},
        {"type": "Motif", "description": "tail", "start": 10, "end": 13},
    ]
    carried, shared = carried_to_isoform(features, canonical, isoform)
    assert shared == [(6, 11, 3)]  # (HIKLMN, six residues, is taken; MABCD, five, is not)
    carried, shared = carried_to_isoform(features, "W" + canonical, "W" + isoform)
    assert shared == [(1, 6, 0), (7, 12, 3)]
    assert [(f["description"], f["start"], f["end"]) for f in carried] == [
        ("head", 2, 4),
        ("tail", 7, 10),
    ]


def test_a_stretch_an_isoform_shares_between_two_that_differ_is_carried() -> None:
    """An isoform that lacks a stretch at each end and one in the middle keeps the
    features of what it shares between them, each renumbered by its own shift; residues
    that match by chance where a stretch was spliced out belong to the stretch they
    match in (APP's isoform 10, whose residues 19–20 are the canonical 75–76). The
    sequences are built for this test."""
    from lyra.proteins._features import carried_to_isoform

    head, lost, middle, gone, tail = "MKTAYIAKEV", "PQWDFGHLYY", "EVSTNWCHPRIS", "QQQ", "GLEDAVCKMF"
    canonical = head + lost + middle + gone + tail
    isoform = head[:8] + middle + tail  # (its 9–10, E V, match the canonical 9–10 by chance)
    features = [
        {"type": "Domain", "description": "middle", "start": 23, "end": 30},
        {"type": "Site", "description": "lost", "start": 15, "end": 15},
        {"type": "Region", "description": "across", "start": 30, "end": 38},
        {"type": "Motif", "description": "last", "start": 37, "end": 40},
    ]
    carried, shared = carried_to_isoform(features, canonical, isoform)
    assert shared == [(1, 8, 0), (9, 20, 12), (21, 30, 15)]
    assert [(f["description"], f["start"], f["end"]) for f in carried] == [
        ("middle", 11, 18),
        ("last", 22, 25),
    ]


_NAMES = {
    "SIGNAL": "Signal",
    "TOPO_DOM": "Topological domain",
    "TRANSMEM": "Transmembrane",
    "DOMAIN": "Domain",
    "REGION": "Region",
    "MOTIF": "Motif",
}


def test_every_p05067_feature_figure_is_recomputed_from_the_raw_files(
    everything: AnalysisOutput,
) -> None:
    """Each domain, region, topology and transmembrane row of APP's table: residues from
    the flat file (Bio.SwissProt), mean pLDDT, band and residues per band from the model
    file (gemmi)."""
    plddt = raw_plddt("AF-P05067-F1-model_v6.pdb")
    brief = brief_of(everything, "P05067")
    table = brief.split("### UniProt features and their confidence")[1].split("\n\n")[2]
    rows = [line for line in table.splitlines() if " · " in line]
    expected = []
    for kind, name in _NAMES.items():
        for start, end, note in _features(kind):
            values = plddt[start - 1 : end]
            span = f"{start}–{end}"
            head = f"| {name}{': ' + note if note else ''} | {span} | {mean_of(values)} | "
            expected.append(f"{head}{_feature_band(values)} | {_by_band(values)} |")
    assert len(rows) == len(expected) == 19
    assert sorted(r.rsplit(" | ", 1)[0] + " |" for r in rows) == sorted(expected)
    # The 684-residue ectodomain holds E1, E2 and the acidic region: no one band.
    assert any(
        r.startswith("| Topological domain: Extracellular | 18–701 | 68.82 | mixed |") for r in rows
    )


def test_p05067_chains_and_sites_are_recomputed_from_the_raw_files(
    everything: AnalysisOutput,
) -> None:
    """The mature chains' means, bands and residues by band, and each binding site's
    pLDDT, from the raw files: a chain over folded and disordered parts is "mixed", never
    the band of its mean ("Soluble APP-beta 70.26 confident" holds E1, E2 and the 90
    residues of the acidic region)."""
    plddt = raw_plddt("AF-P05067-F1-model_v6.pdb")
    brief = brief_of(everything, "P05067")
    for start, end, note in _features("CHAIN", "PEPTIDE"):
        values = plddt[start - 1 : end]
        assert (
            f"| {note} | {start}–{end} | {mean_of(values)} | {_feature_band(values)} | "
            f"{_by_band(values)} |"
        ) in brief
    assert "| Soluble APP-beta | 18–671 | 70.26 | mixed |" in brief
    entry = app_flat_file()
    sites: dict[str, list[tuple[int, int]]] = {}
    for f in entry.features:
        if f.type == "BINDING":
            where = (int(f.location.start) + 1, int(f.location.end))
            sites.setdefault(f.qualifiers["ligand"], []).append(where)
    assert set(sites) == {"heparin", "Cu(2+)", "Zn(2+)"}
    for ligand, spans in sites.items():
        where = ", ".join(
            f"{s} (pLDDT {mean_of(plddt[s - 1 : e])})"
            if s == e
            else f"{s}–{e} (mean pLDDT {mean_of(plddt[s - 1 : e])})"
            for s, e in spans
        )
        assert f"{ligand} at residues {where}" in brief


def test_domains_without_pae_say_so_and_p53_features_are_not_held(
    everything: AnalysisOutput,
) -> None:
    """APP's domains have no PAE between them in this data, and the brief says so; p53's
    2005 features are listed with "pLDDT not held" beside each."""
    assert "PAE between UniProt's domains: not known (no PAE file for this model; " in (
        brief_of(everything, "P05067")
    )
    p53 = brief_of(everything, "P04637")
    assert "| DNA binding | 102–292 | not held |" in p53
    assert "| Region: Oligomerization | 325–356 | not held |" in p53
    assert "Sites: Zinc at residues 176, 179, 238, 242 (pLDDT not held); " in p53
    assert "5'-phospho-RNA (covalent) at residue 392 (pLDDT not held)." in p53


# --------------------------------------------------------------------------- item 8


def test_the_mean_over_residues_and_the_files_mean_over_atoms_are_told_apart(
    everything: AnalysisOutput,
) -> None:
    """'The whole-model mean is the residue mean while AlphaFold DB's v4 figure is the atom
    mean (81.24 vs 80.82 for Q5VSL9), unexplained'."""
    structure = gemmi.read_structure(str(RAW / "AF-Q5VSL9-F1-model_v4.cif"))
    atoms = [atom.b_iso for residue in structure[0][0] for atom in residue]
    residues = [residue[0].b_iso for residue in structure[0][0]]
    assert (mean_of(atoms), mean_of(residues)) == ("81.24", "80.82")
    brief = brief_of(everything, "Q5VSL9")
    assert "Whole-model mean pLDDT: 80.82, the mean over residues" in brief
    assert (
        "The model file's own global pLDDT, 81.24, is the mean over its atoms, as AlphaFold "
        "DB gives v4 models' global pLDDT: the same model." in brief
    )


def test_a_last_digit_that_differs_is_not_explained_by_a_guess(everything: AnalysisOutput) -> None:
    """'P05067: 67.38 "computed from unrounded values" -- the exact mean of the 770
    two-decimal values is 67.3899, and values within 0.005 of them cannot average below
    67.385': the brief gives both figures and says they differ in the last digit, no cause."""
    assert mean_of(raw_plddt("AF-P05067-F1-model_v6.pdb")) == "67.39"
    brief = brief_of(everything, "P05067")
    assert "Whole-model mean pLDDT: 67.39, the mean over residues" in brief
    assert (
        "The same model's mean in afdb_api_prediction_P05067.json: 67.38, the same figure "
        "but for its last digit." in brief
    )
    assert "unrounded" not in brief


@pytest.mark.parametrize("protein_id", ["P69905", "P04637"])
def test_a_creation_date_the_data_record_is_given(
    everything: AnalysisOutput, protein_id: str
) -> None:
    """'"creation date not recorded" where the bundled data record 2025-08-01'."""
    brief = brief_of(everything, protein_id)
    version = "labelled v6 by its collector" if protein_id == "P69905" else "v6"
    assert f"AlphaFold DB model AF-{protein_id}-F1 {version}, created 2025-08-01" in brief
    assert "creation date not recorded" not in brief


def test_p53s_header_version_is_the_version_of_its_fractions(everything: AnalysisOutput) -> None:
    """'P04637's header says v4 while its fractions are v6'."""
    brief = brief_of(everything, "P04637")
    assert "Source: AlphaFold DB model AF-P04637-F1 v6, created 2025-08-01" in brief
    assert "- Residues by band (AF-P04637-F1 v6, created 2025-08-01): very high" in brief
    [entry] = [e for e in everything.completed_analyses if e.protein_id == "P04637"]
    assert entry.figures["model"]["version"] == 6
    assert entry.figures["fraction_at_plddt_70_or_more"] == pytest.approx(0.527 + 0.071)


def test_no_brief_prints_a_python_value_where_a_datum_is_missing(
    everything: AnalysisOutput,
) -> None:
    """A missing datum is named in words, never printed as None or nan."""
    for entry in [*everything.completed_analyses, *everything.partial_analyses]:
        for line in entry.brief.splitlines():
            assert line.strip() not in ("None", "nan"), entry.protein_id
            assert " None" not in line, (entry.protein_id, line)
            assert "nan Å" not in line, (entry.protein_id, line)


def test_app_isoforms_keep_the_domains_of_the_stretches_they_share_in_the_middle() -> None:
    """The bundled APP isoforms (real sequences): P05067-7 differs from the canonical
    sequence at its 345 (canonical 345–364) and lacks canonical 637–654, so its 346–617
    are canonical 365–636 and carry the E2 domain; P05067-10 lacks canonical 19–74, so
    its 19–20 are canonical 75–76, not the canonical 19–20 they happen to equal."""
    from lyra.proteins._offline import _entry

    l_app = _entry("P05067-7")["uniprot"]
    assert l_app["shared_with_canonical"] == [(1, 344, 0), (346, 617, 19), (618, 733, 37)]
    domains = [(f["start"], f["end"]) for f in l_app["features"] if f["type"] == "Domain"]
    assert (355, 546) in domains  # E2, canonical 374–565
    app639 = _entry("P05067-10")["uniprot"]
    assert app639["shared_with_canonical"][:2] == [(1, 18, 0), (19, 232, 56)]


@pytest.mark.parametrize(
    ("kinds", "said"),
    [
        (("Domain", "DNA binding"), True),
        (("Zinc finger", "Repeat"), True),
        (("Domain", "Domain"), True),
        (("DNA binding",), False),
        (("Domain", "Region"), False),
    ],
)
def test_pae_between_domains_is_said_unknown_for_every_kind_the_profile_pairs(
    kinds: tuple[str, ...], said: bool
) -> None:
    """'A model with one Domain plus a DNA-binding region and no PAE file would silently
    skip the "PAE between UniProt's domains: not known" line': the line is owed for the
    feature kinds whose PAE the profile gives (DOMAIN_TYPES), not for domains alone."""
    from lyra.proteins._analysis import _structure_view

    features = [
        {"type": kind, "description": None, "start": 20 * i + 1, "end": 20 * i + 15}
        | {"by_band": None, "band": "very high", "mean_plddt": 95.0}
        for i, kind in enumerate(kinds)
    ]
    view = _structure_view({"features": features, "domain_pae": None}, {})
    assert view is not None
    assert view["domains_without_pae"] is said


def test_a_header_field_only_the_lower_trust_file_gives_names_that_file(
    everything: AnalysisOutput,
) -> None:
    """'lyra analyze P69905 shows "Gene | HBA1" with no source: that value comes only from
    facts_secondary_sources.json; uniprot_P69905_trimmed.json has no gene field'. A field a
    raw file gives (P69905's organism, APP's gene) stays as it is."""
    uniprot = json.loads((RAW / "uniprot_P69905_trimmed.json").read_text())
    assert "genes" not in uniprot  # (the raw UniProt file names no gene)
    label = "(only in facts_secondary_sources.json: a lower-trust secondary source)"
    hba = brief_of(everything, "P69905")
    assert f"| Gene | HBA1 {label} |" in hba
    assert "| Organism | Homo sapiens |" in hba
    assert f"| Organism | Plasmodium falciparum (isolate 3D7) {label} |" in brief_of(
        everything, "Q8I3H7"
    )
    assert "| Gene | APP |" in brief_of(everything, "P05067")
