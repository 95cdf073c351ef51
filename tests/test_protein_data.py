"""Tests for the bundled protein dataset and the script that builds it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from Bio import SwissProt

from raw_proteins import mean_of

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "src" / "lyra" / "proteins" / "data" / "proteins.json"
SCRIPT = REPO / "scripts" / "build_protein_data.py"
FIXTURES = REPO / "tests" / "fixtures" / "recorded"
RAW = REPO / "data" / "proteins"
PAE = REPO / "src" / "lyra" / "proteins" / "data" / "pae"

LYRA_ID = re.compile(r"^[A-Za-z0-9]{1,15}$")
DOCUMENT = json.loads(DATA.read_text(encoding="utf-8"))
ENTRIES: dict[str, dict[str, Any]] = DOCUMENT["entries"]
ENTRY_KEYS = {
    "uniprot_id", "description", "organism", "gene", "length", "sequence", "function",
    "alphafold", "uniprot", "sources", "entry_name", "secondary_accessions",
}  # fmt: skip
ALPHAFOLD_KEYS = {
    "entry_id", "model_version", "global_plddt", "fractions", "plddt", "model_date",
    "model_file", "coordinates", "pae_file", "figures_source", "file_global_plddt",
    "other_means", "entry_id_source", "model_version_basis",
}  # fmt: skip
EXPECTED = {
    "P04637", "Q8I3H7", "P69905", "P00533", "P38398", "P01308", "P0DTC2", "P05067",
    "A1YPR0", "A0A0C5B5G6", "P00221", "Q5VSL9",
}  # fmt: skip


def _records() -> list[tuple[str, dict[str, Any]]]:
    """Every entry and every nested isoform, labelled by accession."""
    out = []
    for acc, entry in sorted(ENTRIES.items()):
        out.append((acc, entry))
        out.extend((iso["accession"], iso) for iso in entry.get("isoforms", []))
    return out


RECORDS = _records()
WITH_AF = [(acc, rec["alphafold"]) for acc, rec in RECORDS if rec["alphafold"]]
WITH_PLDDT = [(acc, af) for acc, af in WITH_AF if af["plddt"] is not None]
WITH_FRACTIONS = [(acc, af) for acc, af in WITH_AF if af["fractions"] is not None]


def _band(value: float) -> str:
    """AlphaFold confidence band name for one pLDDT value."""
    if value < 50:
        return "very_low"
    if value < 70:
        return "low"
    return "confident" if value < 90 else "very_high"


@pytest.fixture
def shared_dir() -> Path:
    """The raw protein data, kept in the repository."""
    return RAW


def test_bundled_json_has_schema_version_1() -> None:
    """The bundled JSON loads and declares schema version 1 with a source note."""
    assert DOCUMENT["schema_version"] == 1
    assert isinstance(DOCUMENT["source_note"], str)
    assert "\n" not in DOCUMENT["source_note"]
    assert "CC-BY 4.0" in DOCUMENT["source_note"]


PROVENANCE = json.loads((RAW / "provenance.json").read_text(encoding="utf-8"))["files"]
DOCS = " ".join(
    (RAW / name).read_text(encoding="utf-8") for name in ("README.txt", "PROVENANCE.md")
)


def test_provenance_names_every_raw_file_and_nothing_else() -> None:
    """provenance.json has a record for each data file of the raw folder, and each file
    it says another was made from is there."""
    docs = {"README.txt", "PROVENANCE.md", "provenance.json"}
    files = {p.relative_to(RAW).as_posix() for p in RAW.rglob("*") if p.is_file()} - docs
    assert set(PROVENANCE) == files
    for name, record in PROVENANCE.items():
        assert record.get("from") is None or record["from"] in files, name


def _documented(name: str) -> str:
    """What the docs say of ``name``: its paragraph in README.txt (a line naming it among
    others, and the indented lines under it), else its row of PROVENANCE.md's table (with
    the table's first row, where it says "same")."""
    block: list[str] = []
    for line in (RAW / "README.txt").read_text(encoding="utf-8").splitlines():
        if line[:1].isspace() and block:
            block.append(line)
        elif block:
            break
        elif name in re.split(r"[\s,]+", line):
            block = [line]
    if block:
        return "\n".join(block)
    rows = [
        r
        for r in (RAW / "PROVENANCE.md").read_text(encoding="utf-8").splitlines()
        if r[:3] == "| `"
    ]
    [row] = [r for r in rows if r.startswith(f"| `{name}` |")]
    return f"{row}\n{rows[0]}" if "| same |" in row else row


@pytest.mark.parametrize(
    "name", sorted(n for n, r in PROVENANCE.items() if r["repository"]), ids=str
)
def test_provenance_says_what_the_docs_say(name: str) -> None:
    """A file's repository, path, commit and making in provenance.json are those the
    docs give that very file (its paragraph or table row; the commit in full or by its
    first 8 digits), so that no record can take another file's origin."""
    record, said = PROVENANCE[name], _documented(name)
    assert re.fullmatch(r"[0-9a-f]{40}", record["commit"])
    assert record["repository"] in said
    assert record["path"] in said
    assert record["commit"][:8] in said
    for how in ("gunzipped", "re-serialised", "subset"):
        said_so = re.search(rf"\b{how}\b", said, re.IGNORECASE) is not None  # (not a name's)
        assert (record["how"] == how) == said_so, (name, how)


def test_the_bundle_carries_the_provenance_of_every_file_an_entry_names() -> None:
    """Every source an entry (or isoform) names has its record in the bundle, as written
    in provenance.json."""
    named = {s for _, rec in RECORDS for s in rec["sources"]}
    assert named <= set(DOCUMENT["provenance"])
    for name in named:
        assert DOCUMENT["provenance"][name] == PROVENANCE[name]


def test_bundled_json_contains_every_shared_accession() -> None:
    """Exactly the accessions found in the shared data are top-level entries."""
    assert set(ENTRIES) == EXPECTED


def test_file_is_deterministically_formatted() -> None:
    """The file ends in one newline and has its keys sorted at the top level."""
    text = DATA.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert list(DOCUMENT) == sorted(DOCUMENT)
    assert list(ENTRIES) == sorted(ENTRIES)


@pytest.mark.parametrize("acc", sorted(ENTRIES))
def test_entry_has_required_fields(acc: str) -> None:
    """Each entry has a valid lyra id key, the schema's fields, and a description and organism."""
    entry = ENTRIES[acc]
    assert LYRA_ID.match(acc)
    optional = {"isoforms", "displayed_isoform", "isoform_names", "quoted_fields"}
    assert set(entry) - optional == ENTRY_KEYS
    for name in entry.get("quoted_fields", ()):  # only the lower-trust file gives it
        assert name in {"description", "organism", "gene"}
        assert "facts_secondary_sources.json" in entry["sources"]
    assert entry["uniprot_id"] == acc
    assert isinstance(entry["description"], str)
    assert entry["description"].strip()
    assert isinstance(entry["organism"], str)
    assert entry["organism"].strip()
    assert entry["sources"]
    assert entry["sources"] == sorted(set(entry["sources"]))
    if entry["alphafold"] is not None:
        assert set(entry["alphafold"]) == ALPHAFOLD_KEYS


@pytest.mark.parametrize(("acc", "record"), RECORDS, ids=[acc for acc, _ in RECORDS])
def test_length_matches_sequence(acc: str, record: dict[str, Any]) -> None:
    """length equals len(sequence) and both are null together."""
    if record["sequence"] is None:
        assert record["length"] is None
    else:
        assert record["length"] == len(record["sequence"])
        assert re.fullmatch(r"[ACDEFGHIKLMNPQRSTVWY]+", record["sequence"])


@pytest.mark.parametrize(("acc", "af"), WITH_PLDDT, ids=[acc for acc, _ in WITH_PLDDT])
def test_plddt_covers_every_residue(acc: str, af: dict[str, Any]) -> None:
    """Per-residue pLDDT has one value per residue of the (full-length) model."""
    record = dict(RECORDS)[acc]
    assert len(af["plddt"]) == record["length"]


@pytest.mark.parametrize(("acc", "af"), WITH_PLDDT, ids=[acc for acc, _ in WITH_PLDDT])
def test_global_plddt_is_mean_of_plddt(acc: str, af: dict[str, Any]) -> None:
    """global_plddt is the 2-decimal mean of the per-residue values."""
    plddt = af["plddt"]
    assert f"{af['global_plddt']:.2f}" == mean_of(plddt)


@pytest.mark.parametrize(("acc", "af"), WITH_PLDDT, ids=[acc for acc, _ in WITH_PLDDT])
def test_fractions_match_plddt_bands(acc: str, af: dict[str, Any]) -> None:
    """Fractions equal the share of residues in each AlphaFold band."""
    plddt = af["plddt"]
    for name, fraction in af["fractions"].items():
        count = sum(1 for value in plddt if _band(value) == name)
        assert fraction == round(count / len(plddt), 3)


@pytest.mark.parametrize(("acc", "af"), WITH_FRACTIONS, ids=[acc for acc, _ in WITH_FRACTIONS])
def test_fractions_sum_to_one(acc: str, af: dict[str, Any]) -> None:
    """The four band fractions sum to 1 within rounding."""
    assert set(af["fractions"]) == {"very_low", "low", "confident", "very_high"}
    assert sum(af["fractions"].values()) == pytest.approx(1.0, abs=0.002)


@pytest.mark.parametrize(("acc", "af"), WITH_AF, ids=[acc for acc, _ in WITH_AF])
def test_plddt_values_are_in_range(acc: str, af: dict[str, Any]) -> None:
    """Every pLDDT value (per residue and global) lies in [0, 100]."""
    values = list(af["plddt"] or [])
    if af["global_plddt"] is not None:
        values.append(af["global_plddt"])
    assert all(0 <= value <= 100 for value in values)
    assert all(value == round(value, 2) for value in values)


@pytest.mark.parametrize(
    ("acc", "path", "expected"),
    [
        ("P04637", ("description",), "Cellular tumor antigen p53"),
        ("P04637", ("gene",), "TP53"),
        ("P04637", ("length",), 393),
        ("P04637", ("alphafold", "global_plddt"), 75.06),
        ("P04637", ("alphafold", "model_version"), 6),
        ("P04637", ("alphafold", "model_date"), "2025-08-01"),
        ("P04637", ("entry_name",), "P53_HUMAN"),
        ("Q5VSL9", ("alphafold", "file_global_plddt", "value"), 81.24),
        ("Q5VSL9", ("alphafold", "file_global_plddt", "over"), "atoms"),
        ("Q8I3H7", ("gene",), None),
        ("Q8I3H7", ("length",), None),
        ("Q8I3H7", ("sequence",), None),
        ("Q8I3H7", ("alphafold", "plddt"), None),
        ("Q8I3H7", ("alphafold", "global_plddt"), 85.57),
        (
            "Q8I3H7",
            ("function",),
            "May protect the malaria parasite against attack by the immune system.",
        ),
        ("A0A0C5B5G6", ("alphafold", "global_plddt"), 72.08),
        ("A0A0C5B5G6", ("length",), 16),
        ("P05067", ("length",), 770),
        ("P38398", ("length",), 1863),
        ("P69905", ("length",), 142),
    ],
)
def test_known_real_values(acc: str, path: tuple[str, ...], expected: object) -> None:
    """Spot values match the real data (README.txt and the raw files)."""
    value: Any = ENTRIES[acc]
    for key in path:
        value = value[key]
    assert value == expected


def test_isoforms_are_nested_not_top_level() -> None:
    """P05067 isoforms sit in an isoforms list, never as dashed top-level keys."""
    isoforms = ENTRIES["P05067"]["isoforms"]
    accessions = [iso["accession"] for iso in isoforms]
    assert all(re.fullmatch(r"P05067-\d+", acc) for acc in accessions)
    assert not set(accessions) & set(ENTRIES)
    two = next(iso for iso in isoforms if iso["accession"] == "P05067-2")
    assert two["length"] == 305
    assert len(two["alphafold"]["plddt"]) == 305


def test_rebuild_is_byte_identical(shared_dir: Path, tmp_path: Path) -> None:
    """Running the build script again reproduces the bundled files byte for byte."""
    out, pae, fixtures = tmp_path / "proteins.json", tmp_path / "pae", tmp_path / "recorded"
    command = [sys.executable, str(SCRIPT), "--raw", str(shared_dir), "--out", str(out)]
    result = subprocess.run(
        [*command, "--pae", str(pae), "--fixtures", str(fixtures)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == DATA.read_bytes()
    assert sorted(p.name for p in pae.iterdir()) == sorted(p.name for p in PAE.iterdir())
    for built in [*pae.iterdir(), *fixtures.rglob("*.*")]:
        bundled = (PAE if built.parent == pae else FIXTURES) / built.relative_to(
            pae if built.parent == pae else fixtures
        )
        assert built.read_bytes() == bundled.read_bytes(), built.name


@pytest.mark.parametrize(("acc", "af"), WITH_PLDDT, ids=[acc for acc, _ in WITH_PLDDT])
def test_coordinates_cover_every_residue(acc: str, af: dict[str, Any]) -> None:
    """Each model with per-residue pLDDT has one CB (or CA) position per residue."""
    assert len(af["coordinates"]) == 3 * len(af["plddt"])
    assert af["model_file"]
    assert af["model_date"]


def test_the_2005_flat_file_gives_p04637_its_features() -> None:
    """P04637's features come from the 2005 flat file (Biopython), labelled with its date."""
    uniprot = ENTRIES["P04637"]["uniprot"]
    assert (uniprot["release"], uniprot["date"]) == ("Rel. 48", "2005-09-13")
    assert "uniprot_P04637_flatfile_2005_bioruby.txt" in uniprot["source"]
    kinds = {(f["type"], f["start"], f["end"]) for f in uniprot["features"]}
    assert {("DNA binding", 102, 292), ("Metal binding", 176, 176)} <= kinds
    assert uniprot["cofactors"] == ["Binds 1 zinc ion per subunit."]


@pytest.mark.parametrize(
    ("acc", "flat_file"),
    [
        ("P04637", "uniprot_P04637_flatfile_2005_bioruby.txt"),
        ("P05067", "uniprot_P05067_flatfile_2025.txt"),
    ],
)
def test_a_flat_files_function_comment_is_the_entrys_function(
    acc: str, flat_file: str, shared_dir: Path
) -> None:
    """An entry read from a flat file carries its FUNCTION comment (the protein's own, as
    from a JSON entry), read back here with Biopython, evidence tags aside; a protein whose
    only FUNCTION comments are its cleaved products' (P0DTC2's chains) has none."""
    with (shared_dir / flat_file).open(encoding="ascii") as handle:
        comments = SwissProt.read(handle).comments
    own = next(c for c in comments if c.startswith("FUNCTION: ") and "FUNCTION: [" not in c)
    first_sentence = own.removeprefix("FUNCTION: ").split(". ")[0]
    assert ENTRIES[acc]["function"].startswith(first_sentence)
    assert "ECO:" not in ENTRIES[acc]["function"]
    assert ENTRIES["P0DTC2"]["function"] is None


def test_pae_files_are_bundled_verbatim() -> None:
    """Each bundled PAE file is the raw file, byte for byte, and named by its entry."""
    named = {af["pae_file"] for _, af in WITH_AF if af.get("pae_file")}
    assert (
        named
        == {p.name for p in PAE.iterdir()}
        == {
            "AF-P00221-F1-predicted_aligned_error_v4.json",
            "AF-Q5VSL9-F1-predicted_aligned_error_v4.json",
        }
    )
    for name in named:
        assert (PAE / name).read_bytes() == (RAW / name).read_bytes()


def _model_residue_counts(shared: Path) -> dict[str, int]:
    """Residue count (CA atoms) of each model file in the shared data, by accession."""
    counts: dict[str, int] = {}
    for path in sorted(shared.glob("AF-*-F1-model_v*.*")):
        acc = path.name[3:].partition("-F1-model")[0]
        lines = path.read_text(encoding="utf-8").splitlines()
        if path.suffix == ".pdb":
            n = sum(1 for line in lines if line.startswith("ATOM") and line[12:16] == " CA ")
        else:
            n = sum(1 for line in lines if line.startswith("ATOM") and line.split()[3] == "CA")
        assert counts.setdefault(acc, n) == n
    return counts


def test_plddt_length_equals_model_residue_count(shared_dir: Path) -> None:
    """Per-residue pLDDT length equals the residue count of the source model file."""
    counts = _model_residue_counts(shared_dir)
    records = dict(RECORDS)
    assert counts
    for acc, n in counts.items():
        assert len(records[acc]["alphafold"]["plddt"]) == n


def test_sources_name_shared_files(shared_dir: Path) -> None:
    """Every listed source is a file in the shared data directory."""
    for _, record in RECORDS:
        for name in record["sources"]:
            assert (shared_dir / name).is_file(), name


@pytest.mark.parametrize(
    ("fixture", "source"),
    [
        ("afdb_prediction_P05067.json", "afdb_api_prediction_P05067.json"),
        ("uniprot_P04637.json", "uniprot_P04637_subset.json"),
        ("uniprot_P69905.json", "uniprot_P69905_trimmed.json"),
        ("files/AF-P05067-F1-model_v6.pdb", "AF-P05067-F1-model_v6.pdb"),
        ("files/AF-P00221-F1-model_v4.cif", "AF-P00221-F1-model_v4.cif"),
        (
            "files/AF-P00221-F1-predicted_aligned_error_v4.json",
            "AF-P00221-F1-predicted_aligned_error_v4.json",
        ),
    ],
)
def test_recorded_fixture_is_byte_copy(fixture: str, source: str, shared_dir: Path) -> None:
    """Each recorded response fixture is a byte-for-byte copy of its shared source."""
    assert (FIXTURES / fixture).read_bytes() == (shared_dir / source).read_bytes()


@pytest.mark.parametrize(
    "fixture", ["afdb_prediction_P05067.json", "uniprot_P04637.json", "uniprot_P69905.json"]
)
def test_recorded_fixture_is_json(fixture: str) -> None:
    """Each recorded response fixture exists and parses as JSON."""
    assert json.loads((FIXTURES / fixture).read_text(encoding="utf-8"))


def test_a_source_without_provenance_stops_the_build(tmp_path: Path) -> None:
    """A file an entry names that provenance.json says nothing of stops the build with
    its name: no brief can cite a source whose origin is unrecorded."""
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    document = json.loads((raw / "provenance.json").read_text(encoding="utf-8"))
    del document["files"]["uniprot_P05067_flatfile_2025.txt"]
    (raw / "provenance.json").write_text(json.dumps(document), encoding="utf-8")
    command = [sys.executable, str(SCRIPT), "--raw", str(raw), "--out", str(tmp_path / "o.json")]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "provenance.json says nothing of uniprot_P05067_flatfile_2025.txt" in result.stderr
