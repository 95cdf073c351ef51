"""Issue 30's review: the lines a structural biologist still rejected in the briefs.

Each test reads the briefs (or the answer) of one run over every bundled protein through
the public API, and recomputes every figure it checks from the raw files with the
field's libraries (gemmi for the models, Bio.SwissProt for the flat file, the PAE JSON
as AlphaFold DB writes it), never with lyra's code.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from lyra.proteins import AnalysisOutput, OfflineSource, analyze_sync, reason
from lyra.proteins._pae import check_unit
from raw_proteins import RAW, app_flat_file, brief_of, mean_of, raw_plddt


@pytest.fixture(scope="module")
def everything() -> AnalysisOutput:
    """One run over every bundled protein and APP's isoforms 2 and 4."""
    return analyze_sync([*OfflineSource().ids(), "P05067-2", "P05067-4"], timeout=30)


def test_the_glycan_caveat_counts_this_sequences_glycans_alone() -> None:
    """A glycation (a sugar chemistry stuck on, no glycan) is no glycan; a site UniProt
    gives to named isoforms only is said apart, not counted; a partial one is said to be
    (a summary built for this test, in the bundled data's shape)."""
    from lyra.proteins._caveats import annotation_caveats

    def site(at: int, note: str) -> dict[str, Any]:
        return {"type": "Glycosylation", "start": at, "end": at, "description": note}

    summary = {
        "uniprot": {
            "features": [
                site(10, "N-linked (GlcNAc...) asparagine"),
                site(20, "O-linked (GalNAc...) threonine; partial"),
                site(30, "N-linked (Glc) (glycation) lysine"),
                site(40, "O-linked (Xyl...) (chondroitin sulfate) serine; in L-APP isoforms"),
            ]
        }
    }
    [caveat] = [c for c in annotation_caveats(summary) if "glycans" in c]
    assert caveat == (
        "AlphaFold DB models no glycans. UniProt's 2 glycosylation site(s) (10, 20; 1 of "
        "them occupied only in part) are modelled bare, so the sugars that cover the "
        "surface there (and may hide it from a binder) are absent from the model. UniProt "
        "gives 1 more site(s) to named isoforms only (40: in L-APP isoforms): not sites of "
        "this canonical sequence, as UniProt has them."
    )
    # In an isoform's brief, which isoforms "L-APP" names is not in the data: said so.
    [caveat] = [
        c for c in annotation_caveats({**summary, "isoform_of": "P05067"}) if "glycans" in c
    ]
    assert caveat.endswith(
        "(40: in L-APP isoforms): whether this isoform is one of them, "
        "the bundled data does not say."
    )
    # Only sites of named isoforms: none counted, they are still said.
    only = {"uniprot": {"features": summary["uniprot"]["features"][3:]}}
    [caveat] = [c for c in annotation_caveats(only) if "glycans" in c]
    assert caveat.startswith(
        "AlphaFold DB models no glycans. UniProt gives 1 site(s) to named isoforms only"
    )


def test_a_site_of_named_isoforms_is_placed_by_uniprots_isoform_names() -> None:
    """UniProt gives O-glycan 656 to the "L-APP isoforms"; its ALTERNATIVE PRODUCTS
    names each isoform (read here with Biopython from the flat file): L-APP752 (-9) is
    one of them, APP770 (the canonical) and APP695 (-4) are not. Each brief says which,
    and lists the site among its own Sites only where it holds (the canonical's listed
    it while its caveat said it was none of its; -9's and -4's said nothing either way)."""
    entry = app_flat_file()
    [products] = [c for c in entry.comments if c.startswith("ALTERNATIVE PRODUCTS:")]
    names = dict(
        (iso, name) for name, iso in re.findall(r"Name=([^;]+);[^I]*IsoId=(P05067-\d+)", products)
    )
    expected = {
        "P05067": names["P05067-1"],
        "P05067-9": names["P05067-9"],
        "P05067-4": names["P05067-4"],
    }
    assert expected == {"P05067": "APP770", "P05067-9": "L-APP752", "P05067-4": "APP695"}
    output = analyze_sync(list(expected), timeout=30)
    for accession, name in expected.items():
        brief = brief_of(output, accession)
        sites = _line(brief, "Sites")
        one_of = name.startswith("L-APP")
        if one_of:
            assert f"this isoform ({name}) is one of them, as UniProt names its isoforms" in brief
            assert "in L-APP isoforms at residue 638" in sites
        else:
            assert f"not sites of this sequence ({name}), as UniProt names its isoforms" in brief
            assert "L-APP" not in sites


def _line(brief: str, start: str) -> str:
    [line] = [h for h in brief.splitlines() if h.startswith(start)]
    return line


# --------------------------------------------------------------------------- caveats


@pytest.mark.parametrize("protein_id", ["P69905", "P00221", "P38398", "A1YPR0", "Q5VSL9"])
def test_a_model_without_annotation_still_says_it_has_no_cofactors(
    everything: AnalysisOutput, protein_id: str
) -> None:
    """Haemoglobin's haem, ferredoxin's iron-sulphur cluster, BRCA1's RING zinc: a unit
    called fit for docking is modelled without them, and the brief says so even when no
    UniProt entry names them."""
    caveats = brief_of(everything, protein_id).split("## Caveats")[1]
    assert (
        "- The model has no ligands, metals or cofactors (AlphaFold DB models the chain "
        "alone), so a site that binds one is predicted without it; which ones this protein "
        "binds is not in this data (UniProt's COFACTOR comment and binding sites would say; "
        "run with --source live to fetch it from UniProt)."
    ) in caveats


def test_the_annotated_ligands_and_the_processing_are_read_from_the_flat_file(
    everything: AnalysisOutput,
) -> None:
    """APP's caveats name each ligand of the raw entry's BINDING lines at its residues,
    and its signal peptide, in one grammatical sentence."""
    entry = app_flat_file()
    ligands: dict[str, list[str]] = {}
    for f in entry.features:
        if f.type == "BINDING":
            start, end = int(f.location.start) + 1, int(f.location.end)
            ligands.setdefault(f.qualifiers["ligand"], []).append(
                str(start) if start == end else f"{start}–{end}"
            )
    caveats = brief_of(everything, "P05067").split("## Caveats")[1]
    named = "; ".join(f"{ligand} at residues {', '.join(at)}" for ligand, at in ligands.items())
    assert (
        "- The model has no ligands, metals or cofactors (AlphaFold DB models the chain alone), "
        f"so a site that binds one is predicted without it. {named}."
    ) in caveats
    [signal] = [f for f in entry.features if f.type == "SIGNAL"]
    where = f"{int(signal.location.start) + 1}–{int(signal.location.end)}"
    assert (
        f"- Processing: AlphaFold DB's model is of the full precursor; signal peptide {where} is "
        "removed in the mature protein, so its confidence does not describe it."
    ) in caveats


def test_chains_cut_from_one_precursor_are_not_called_separate_molecules(
    everything: AnalysisOutput,
) -> None:
    """APP's 15 chains and peptides overlap (the mature chain 18–770 and its pieces): they
    are cut from the one precursor the model is of, and the brief claims nothing of how
    they fold or associate once cut; an isoform counts those it carries, not UniProt's."""
    chains = [  # from the raw flat file
        f"{int(f.location.start) + 1}–{int(f.location.end)}"
        for f in app_flat_file().features
        if f.type in ("CHAIN", "PEPTIDE")
    ]
    assert len(chains) == 15
    caveats = brief_of(everything, "P05067").split("## Caveats")[1]
    assert (
        f"- UniProt lists 15 chains or peptides ({', '.join(chains)}), some "
        "overlapping (a chain and the pieces it is cut into, or alternative cuts). They are "
        "cut from one precursor, which is what AlphaFold DB models;"
    ) in caveats
    assert "separate molecules" not in caveats
    isoform = brief_of(everything, "P05067-4").split("## Caveats")[1]
    assert "Of UniProt's chains or peptides, 12 lie wholly in the residues mapped here" in isoform


def test_a_disordered_region_predicted_from_the_sequence_is_no_confirmation(
    everything: AnalysisOutput,
) -> None:
    """APP's "Disordered" region rests on MobiDB-lite alone (ECO:0000256, its raw flat
    file's evidence): pLDDT agreeing with it is two predictions agreeing, and the brief
    says so where it names the region."""
    [region] = [
        f
        for f in app_flat_file().features
        if f.type == "REGION" and f.qualifiers.get("note") == "Disordered"
    ]
    assert region.qualifiers["evidence"] == "ECO:0000256|SAM:MobiDB-lite"
    where = f"{int(region.location.start) + 1}–{int(region.location.end)}"
    brief = brief_of(everything, "P05067")
    [row] = [line for line in brief.splitlines() if line.startswith("| Region: Disordered |")]
    assert row.startswith(f"| Region: Disordered | {where} |")
    assert row.endswith(
        "| agree: predicted disordered from its sequence (MobiDB-lite), predicted very low "
        "(two predictions, not an observation) |"
    )
    assert f"Region: Disordered (predicted from its sequence, MobiDB-lite) {where}" in brief
    assert "(annotated disordered)" not in brief


def test_a_unit_of_several_segments_says_how_many_contacts_join_them(
    everything: AnalysisOutput,
) -> None:
    """BRCA1's unit 2 joins a helix to the BRCT region: the brief states how units are
    found and how many residue pairs join those two segments, counted here from the
    raw model file with gemmi (CB within 8 Å, CA for glycine, 3 or more apart)."""
    import gemmi

    structure = gemmi.read_structure(str(RAW / "AF-P38398-F1-model_v4.pdb"))
    atoms = {
        residue.seqid.num: residue.find_atom("CA" if residue.name == "GLY" else "CB", "*").pos
        for residue in structure[0][0]
    }
    joined = sum(
        1 for i in range(1392, 1420) for j in range(1649, 1860) if atoms[i].dist(atoms[j]) <= 8.0
    )
    brief = brief_of(everything, "P38398")
    assert (
        "How units are found: ordered segments of at least 20 residues are one unit when the "
        "model packs them together, with at least 10 residue pairs"
    ) in brief
    assert f"unit 2: 1392–1419 with 1649–1859, {joined} residue pairs in contact" in brief


# --------------------------------------------------------------------------- PAE claims


def test_a_membrane_helix_placement_is_not_claimed_without_pae(
    everything: AnalysisOutput,
) -> None:
    """'Its placement against the rest of the protein is not [confident]' needs PAE, and
    APP has none here: the brief says the placement is not checked."""
    plddt = raw_plddt("AF-P05067-F1-model_v6.pdb")
    line = _line(
        brief_of(everything, "P05067"),
        f"- Residues 705–723 (19 residues, mean pLDDT {mean_of(plddt[704:723])}",
    )
    assert (
        "the membrane helix is predicted confidently; no membrane is modelled, and its "
        "placement against the rest of the protein is not checked (no PAE)"
    ) in line
    assert "is not, and" not in line


def test_a_segment_that_is_not_one_rigid_piece_is_for_local_use_only() -> None:
    """A segment of an unconfirmed unit whose own PAE is not low is "not one rigid piece":
    no docking-grade use is given for it, whatever its band. The PAE matrix and the unit
    are built for this test (no bundled unit has such a segment)."""
    size = 44
    first, second = range(1, 21), range(25, 45)

    def error(i: int, j: int) -> float:
        if i in first and j in first:
            return 2.0
        if i in second and j in second:
            return 8.0
        return 12.0

    matrix = [[error(i, j) for j in range(1, size + 1)] for i in range(1, size + 1)]
    check = check_unit([(1, 20), (25, 44)], matrix)
    assert [(s["where"], s["within_pae"]) for s in check["segments"]] == [
        ("1–20", 2.0),
        ("25–44", 8.0),
    ]
    segments = [
        {"start": 1, "end": 20, "length": 20, "kind": "ordered", "band": "very high",
         "mean_plddt": 95.0, "unit": 1, "features": None, "pae": []},
        {"start": 25, "end": 44, "length": 20, "kind": "ordered", "band": "very high",
         "mean_plddt": 94.0, "unit": 1, "features": None, "pae": []},
    ]  # fmt: skip
    unit = {
        "number": 1, "ranges": [(1, 20), (25, 44)], "where": "1–20, 25–44", "residues": 40,
        "mean_plddt": 94.5, "band": "very high", "pae": check,
    }  # fmt: skip
    structure = {"per_residue": True, "units": [unit], "segments": segments}
    [line] = reason({"length": size}, structure)["hypotheses"]
    assert "1–20 very high (95.00; mean PAE 2.00 Å within it): docking-grade within it" in line
    assert (
        "25–44 very high (94.00; mean PAE 8.00 Å within it, not one rigid piece by PAE): "
        "locally only"
    ) in line


def test_only_uniprots_name_of_an_imported_protein_points_to_a_transit_peptide(
    everything: AnalysisOutput,
) -> None:
    """'A protein imported into the organelle is made with a transit peptide' overclaims
    (many imported proteins have none), and a 'Mitochondrial-derived peptide' is made in
    the organelle, not imported: only UniProt's ', chloroplastic' or ', mitochondrial'
    points to a possible transit peptide, as what most such proteins have. The second
    protein and its segment are built for this test."""
    plddt = raw_plddt("AF-P00221-F1-model_v4.cif")
    line = _line(
        brief_of(everything, "P00221"),
        f"- Residues 1–49 (49 residues, mean pLDDT {mean_of(plddt[:49])}",
    )
    assert (
        "UniProt names the protein chloroplastic, imported into the organelle: most such "
        "proteins are made with an N-terminal transit peptide, cleaved on import, which this "
        "stretch may be"
    ) in line
    stretch = {"start": 1, "end": 25, "length": 25, "kind": "very_low", "band": "very low",
               "mean_plddt": 40.0, "unit": None, "features": None, "pae": []}  # fmt: skip
    structure = {"per_residue": True, "units": [], "segments": [stretch]}
    summary = {"description": "Mitochondrial-derived peptide X", "length": 25}
    [made_inside] = reason(summary, structure)["hypotheses"]
    assert "transit peptide" not in made_inside


# --------------------------------------------------------------------------- names


def test_a_function_sentence_is_never_a_protein_name(everything: AnalysisOutput) -> None:
    """Q8I3H7's data hold no name, only AlphaFold DB's homepage sentence about its
    function: the brief and the answer do not print that sentence as its name, and the
    function line names where it was quoted from; P69905's names its UniProt file."""
    facts = json.loads((RAW / "facts_secondary_sources.json").read_text(encoding="utf-8"))
    quoted = facts["Q8I3H7"]["afdb_homepage_example"]
    sentence = quoted.removeprefix("Q8I3H7: ").split(" Mean pLDDT")[0]
    brief = brief_of(everything, "Q8I3H7")
    assert brief.startswith("# Q8I3H7 (name not in this data)\n")
    assert "| Protein | name not in this data |" in brief
    assert (
        "**Function (facts_secondary_sources.json: a lower-trust secondary source, figures "
        f"quoted elsewhere):** {sentence}"
    ) in brief
    assert f"Q8I3H7 ({sentence}" not in everything.answer
    assert "  • Q8I3H7, whole-model mean pLDDT" in everything.answer
    uniprot = json.loads((RAW / "uniprot_P69905_trimmed.json").read_text(encoding="utf-8"))
    function = uniprot["comments"][0]["texts"][0]["value"]
    assert f"**Function (UniProt, uniprot_P69905_trimmed.json):** {function}" in brief_of(
        everything, "P69905"
    )


@pytest.mark.parametrize(("protein_id", "row"), [("A1YPR0", "Gene"), ("Q8I3H7", "Length")])
def test_a_datum_the_data_lack_is_not_called_unknown(
    everything: AnalysisOutput, protein_id: str, row: str
) -> None:
    """A1YPR0's gene is ZBTB7C; only its bundled model file does not give it: the brief
    says "not in this data", never "unknown"."""
    brief = brief_of(everything, protein_id)
    assert f"| {row} | not in this data |" in brief
    header = brief.split("## Confidence")[0]
    assert "unknown" not in header.lower()


def test_the_raw_a1ypr0_model_file_gives_no_gene() -> None:
    """The premise of the test above: the raw PDB file's header names the protein and its
    organism, not its gene."""
    text = (RAW / "AF-A1YPR0-F1-model_v4.pdb").read_text(encoding="ascii")
    source = [line for line in text.splitlines() if line.startswith(("COMPND", "SOURCE"))]
    assert any("ZINC FINGER AND BTB DOMAIN-CONTAINING PROTEIN 7C" in line for line in source)
    assert not any("GENE" in line for line in source)


# --------------------------------------------------------------------------- figures


_FIGURE = re.compile(r"(?:pLDDT|PAE) (\d+(?:\.\d+)?)(?: Å)?")


def test_every_measured_figure_has_two_decimals(everything: AnalysisOutput) -> None:
    """A column never mixes '47' with '53.28': every pLDDT and PAE figure in every brief
    and in the answer is printed with two decimals; APP isoform 2's 232–288, whose raw
    mean ends in a zero, among them."""
    texts = [e.brief for e in [*everything.completed_analyses, *everything.partial_analyses]]
    for text in [*texts, everything.answer]:
        for line in text.splitlines():
            if line.startswith(("Bands as", "A unit found", "lyra's rule", "A feature is mixed")):
                continue  # thresholds, not measurements
            for value in _FIGURE.findall(line):
                assert re.fullmatch(r"\d+\.\d\d", value), (value, line)
    plddt = raw_plddt("AF-P05067-2-F1-model_v6.cif")
    mean = mean_of(plddt[231:288])
    assert mean.endswith("0")
    assert f"| 232–288 | 57 | {mean} | very low |" in brief_of(everything, "P05067-2")


def test_the_segment_features_column_follows_its_stated_rule(
    everything: AnalysisOutput,
) -> None:
    """The features beside each segment are exactly those of the raw flat file that share
    at least half of the segment and half of themselves, and the brief says so."""
    brief = brief_of(everything, "P05067")
    assert (
        "A segment's UniProt features are those that share at least 50% of the segment's "
        "residues and of their own"
    ) in brief
    names = {
        "SIGNAL": "Signal", "TOPO_DOM": "Topological domain", "TRANSMEM": "Transmembrane",
        "DOMAIN": "Domain", "REGION": "Region", "MOTIF": "Motif",
    }  # fmt: skip

    def note(f: Any) -> str | None:  # a disordered region or domain a sequence model alone
        given = f.qualifiers.get("note")  # predicts says so (MobiDB-lite, PROSITE-ProRule)
        evidence = [e.strip().partition("|") for e in f.qualifiers.get("evidence", "").split(",")]
        predicted = evidence[0][0] and all(
            c in ("ECO:0000255", "ECO:0000256") for c, _, _ in evidence
        )
        if predicted and (f.type == "DOMAIN" or given == "Disordered"):
            tools = ", ".join(dict.fromkeys(s.removeprefix("SAM:") for _, _, s in evidence if s))
            return f"{given} (predicted from its sequence, {tools})"
        return given

    features = [
        (names[f.type], int(f.location.start) + 1, int(f.location.end), note(f))
        for f in app_flat_file().features
        if f.type in names
    ]
    table = brief.split("| Residues | Length | Mean pLDDT |")[1].split("\n\n")[0]
    rows = [row.split(" | ") for row in table.splitlines()[2:]]
    assert len(rows) == 13
    for row in rows:
        start, _, end = row[0].removeprefix("| ").partition("–")
        first, last = int(start), int(end or start)
        expected = [
            f"{kind}{': ' + note if note else ''} {s}–{e}"
            for kind, s, e, note in features
            if 2 * (min(last, e) - max(first, s) + 1) >= max(last - first + 1, e - s + 1)
        ]
        assert row[-1].removesuffix(" |") == ("; ".join(expected) or "—"), row


def test_a_gene_name_is_refused_naming_the_bundled_entry_of_that_gene() -> None:
    """A scientist types tp53: a gene name is no accession (many organisms have a TP53),
    so it is not resolved, but the refusal names the bundled entry whose gene it is,
    read from the raw UniProt JSON."""
    raw = json.loads((RAW / "uniprot_P04637_subset.json").read_text(encoding="utf-8"))
    gene = raw["genes"][0]["geneName"]["value"]
    name = raw["proteinDescription"]["recommendedName"]["fullName"]["value"]
    output = analyze_sync([gene.lower()], timeout=10)
    [failed] = output.failed_analyses
    assert (
        f"{gene} is the gene of {raw['primaryAccession']} ({name}, "
        f"{raw['organism']['scientificName']}) in the bundled data: a gene name is no "
        "accession"
    ) in failed.error


@pytest.mark.parametrize(
    ("note", "name", "holds"),
    [
        ("O-linked (Xyl...) serine; in L-APP isoforms", "L-APP752", True),
        ("O-linked (Xyl...) serine; in L-APP isoforms", "APP770", False),
        ("Phosphoserine; in isoform APP695 and isoform APP751", "APP751", True),
        ("Phosphoserine; in isoform APP695 and isoform APP751", "APP770", False),
        ("Phosphoserine; in isoforms 2, 3 and 4", "3", True),
        ("Phosphoserine; in isoforms 2, 3 and 4", "5", False),
        ("Phosphoserine; in isoform 2; alternate", "2", True),
        ("Phosphoserine; in isoform 2", "12", False),
        ("Phosphoserine; in all isoforms", "2", True),
        ("Phosphoserine; in some isoforms", "2", None),
        ("Phosphoserine", "2", None),
    ],
)
def test_a_site_given_to_named_isoforms_is_read_for_each_name(
    note: str, name: str, holds: bool | None
) -> None:
    """UniProt names the isoforms a site holds for as a family ("in L-APP isoforms"), one
    name, or a list ("in isoform APP695 and isoform APP751", "in isoforms 2, 3 and 4"):
    every name of a list counts (only the first did, so APP751 lost its site), "all
    isoforms" holds for each, and "some isoforms" says nothing of a given one."""
    from lyra.proteins._features import holds_for

    assert holds_for({"description": note}, name) is holds
