#!/usr/bin/env python3
"""Build lyra's bundled offline protein dataset from the raw protein data files.

Usage::

    python scripts/build_protein_data.py [--raw PATH] [--out PATH] [--pae DIR]
                                         [--fixtures DIR]

The raw data live in ``data/proteins/`` (provenance beside them). Model files are
read with gemmi (atoms, B-factor pLDDT, ``_ma_qa_metric_local``), UniProt flat
files with Biopython's SwissProt parser, JSON with the standard library. PAE
files are copied byte for byte into ``src/lyra/proteins/data/pae/``. Every value
in the output is taken from a raw file (never typed in here); when several files
give the same field the highest-trust one wins (UniProt JSON > AFDB API JSON >
model mmCIF > FASTA and flat file > model PDB > per-project summary >
facts_secondary_sources.json) and the others are cross-checked against it. Any
disagreement, unknown file or unknown key stops the build. The output is deterministic:
re-running on the same input gives a byte-identical file.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gemmi
from Bio import SwissProt

from lyra.proteins._confidence import mean
from lyra.proteins._features import predicted_by
from lyra.proteins._modelfiles import ModelFile, read_model
from lyra.proteins._modelfiles import read_pae as parse_pae

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RAW = REPO_ROOT / "data" / "proteins"
DEFAULT_PAE = REPO_ROOT / "src" / "lyra" / "proteins" / "data" / "pae"
DEFAULT_OUT = REPO_ROOT / "src" / "lyra" / "proteins" / "data" / "proteins.json"

SCHEMA_VERSION = 1
SOURCE_NOTE = (
    "Built by scripts/build_protein_data.py from data/proteins "
    "(AlphaFold DB and UniProt data, CC-BY 4.0); see README.md next to this file."
)
FACTS_FILE = "facts_secondary_sources.json"
LYRA_ID = re.compile(r"^[A-Za-z0-9]{1,15}$")

# Recorded HTTP responses copied byte-for-byte for a replaying test server.
FIXTURES = {
    "afdb_prediction_P05067.json": "afdb_api_prediction_P05067.json",
    "uniprot_P04637.json": "uniprot_P04637_subset.json",
    "uniprot_P69905.json": "uniprot_P69905_trimmed.json",
    # Files an AlphaFold DB record names, served under /files/ by the test server.
    "files/AF-P05067-F1-model_v6.pdb": "AF-P05067-F1-model_v6.pdb",
    "files/AF-P05067-F1-confidence_v6.json": "derived/AF-P05067-F1-confidence_v6.derived.json",
    "files/AF-P00221-F1-model_v4.cif": "AF-P00221-F1-model_v4.cif",
    "files/AF-P00221-F1-confidence_v4.json": "derived/AF-P00221-F1-confidence_v4.derived.json",
    "files/AF-P00221-F1-predicted_aligned_error_v4.json": (
        "AF-P00221-F1-predicted_aligned_error_v4.json"
    ),
}

# Source ranks: lower wins.
R_UNIPROT, R_AFDB_API, R_CIF, R_FASTA, R_PDB, R_SUMMARY, R_FACTS = range(7)
# A model file's entry name (PDB DBREF, mmCIF _struct_ref.db_code) copies UniProt's:
# below every UniProt file (JSON, flat file, FASTA), whatever the model's format.
R_MODEL_NAME = R_PDB

ACC = r"[A-Z0-9]+(?:-\d+)?"
FILE_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("readme", re.compile(r"^(README\.txt|PROVENANCE\.md|provenance\.json)$")),
    ("flatfile", re.compile(rf"^uniprot_(?P<acc>{ACC})_flatfile_\d{{4}}(?:_\w+)?\.txt$")),
    (
        "pae",
        re.compile(
            rf"^AF-(?P<acc>{ACC})-F(?P<frag>\d+)-predicted_aligned_error_v(?P<ver>\d+)\.json$"
        ),
    ),
    ("facts", re.compile(rf"^{re.escape(FACTS_FILE)}$")),
    ("uniprot", re.compile(rf"^uniprot_(?P<acc>{ACC})_[A-Za-z0-9]+\.json$")),
    ("afdb_api", re.compile(rf"^afdb_api_prediction_(?P<acc>{ACC})\.json$")),
    ("fasta", re.compile(rf"^(?P<acc>{ACC})\.fasta$")),
    (
        "model",
        re.compile(rf"^AF-(?P<acc>{ACC})-F(?P<frag>\d+)-model_v(?P<ver>\d+)\.(?P<ext>pdb|cif)$"),
    ),
    ("summary", re.compile(rf"^AF-(?P<acc>{ACC})-F(?P<frag>\d+)_summary_v(?P<ver>\d+)_\w+\.json$")),
    (
        "derived",
        re.compile(
            rf"^derived/AF-(?P<acc>{ACC})-F(?P<frag>\d+)-confidence_v(?P<ver>\d+)\.derived\.json$"
        ),
    ),
]

THREE_TO_ONE = {
    "ALA": "A", "ARG": "R", "ASN": "N", "ASP": "D", "CYS": "C", "GLN": "Q", "GLU": "E",
    "GLY": "G", "HIS": "H", "ILE": "I", "LEU": "L", "LYS": "K", "MET": "M", "PHE": "F",
    "PRO": "P", "SER": "S", "THR": "T", "TRP": "W", "TYR": "Y", "VAL": "V",
}  # fmt: skip
AMINO_ACIDS = frozenset(THREE_TO_ONE.values())

FRACTION_KEYS = {
    "very_low": "fractionPlddtVeryLow",
    "low": "fractionPlddtLow",
    "confident": "fractionPlddtConfident",
    "very_high": "fractionPlddtVeryHigh",
}

# Fields compared case-insensitively across sources; "sequence"/"entry_id" compare exactly.
TEXT_FIELDS = ("description", "organism", "gene", "function")
IDENTITY_FIELDS = ("description", "organism", "gene")
"""The fields of a brief's header (the function sentence names its source itself)."""
CHECKED_FIELDS = (
    *TEXT_FIELDS, "sequence", "entry_id", "coordinates", "model_date", "entry_name"
)  # fmt: skip


class BuildError(Exception):
    """The shared data are inconsistent or not understood."""


# --------------------------------------------------------------------------- helpers


def band(value: float) -> str:
    """AlphaFold confidence band of one pLDDT value (google-deepmind/alphafold confidence.py)."""
    if value < 50:
        return "very_low"
    if value < 70:
        return "low"
    if value < 90:
        return "confident"
    return "very_high"


BAND_LETTER = {"very_low": "D", "low": "L", "confident": "M", "very_high": "H"}


def mean_plddt(values: list[float]) -> float:
    """Mean pLDDT rounded to 2 decimals, as lyra rounds every mean it states."""
    return mean(values)


def plddt_fractions(values: list[float]) -> dict[str, float]:
    """Fraction of residues per AlphaFold band, rounded to 3 decimals like AFDB."""
    counts = dict.fromkeys(FRACTION_KEYS, 0)
    for value in values:
        counts[band(value)] += 1
    return {name: round(count / len(values), 3) for name, count in counts.items()}


def check_sequence(seq: str, where: str) -> str:
    """Return seq if it is a plain 20-letter amino-acid string, else fail."""
    if not seq or set(seq) - AMINO_ACIDS:
        raise BuildError(f"{where}: sequence has non-standard letters or is empty")
    return seq


def crc64(seq: str) -> str:
    """SWISS-PROT CRC64 checksum of a sequence, as UniProt prints it."""
    crc = 0
    for byte in seq.encode("ascii"):
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xD800000000000000 if crc & 1 else crc >> 1
    return f"{crc:016X}"


# --------------------------------------------------------------------------- candidates


@dataclass
class Record:
    """Candidate values for one accession, gathered from every shared file that mentions it."""

    accession: str
    cands: dict[str, list[tuple[int, str, Any]]] = field(default_factory=dict)
    checks: list[tuple[str, str, Any]] = field(default_factory=list)

    def add(self, name: str, value: Any, source: str, rank: int) -> None:
        """Offer a value for a field from a source file."""
        if value is None or value == "" or value == []:
            return
        self.cands.setdefault(name, []).append((rank, source, value))

    def expect(self, what: str, value: Any, source: str) -> None:
        """Record a fact (residue count, taxon) to verify once the record is resolved."""
        if value is not None:
            self.checks.append((what, source, value))

    def pick(self, name: str) -> tuple[Any, str | None]:
        """Return the highest-ranked value for a field and its source file, or (None, None)."""
        options = sorted(self.cands.get(name, []), key=lambda c: (c[0], c[1]))
        if not options:
            return None, None
        _, source, value = options[0]
        if name in CHECKED_FIELDS:
            for _, other_source, other in options[1:]:
                same = (
                    str(other).casefold() == str(value).casefold()
                    if name in TEXT_FIELDS
                    else other == value
                )
                if not same:
                    raise BuildError(
                        f"{self.accession}: {name} differs: {value!r} ({source}) "
                        f"vs {other!r} ({other_source})"
                    )
        return value, source


def record_for(records: dict[str, Record], accession: str) -> Record:
    """Return (creating if needed) the record for an accession."""
    if accession not in records:
        records[accession] = Record(accession)
    return records[accession]


# --------------------------------------------------------------------------- parsers


def _cif_value(block: gemmi.cif.Block, tag: str) -> str | None:
    """The single value of an mmCIF tag (unquoted), or None for missing / '?' / '.'."""
    value = block.find_value(tag)
    if value is None or value in ("?", "."):
        return None
    return gemmi.cif.as_string(value)


def _cif_entry_name(block: gemmi.cif.Block, accession: str, name: str) -> str | None:
    """The UniProt entry name ``_struct_ref.db_code`` gives for the model's accession."""
    rows = block.find("_struct_ref.", ["db_name", "pdbx_db_accession", "db_code"])
    codes = [
        gemmi.cif.as_string(row[2])
        for row in rows
        if [gemmi.cif.as_string(row[0]), gemmi.cif.as_string(row[1])] == ["UNP", accession]
    ]
    if len(codes) > 1:
        raise BuildError(f"{name}: several _struct_ref rows for {accession}")
    return codes[0] if codes else None


def _offer_model(rec: Record, name: str, version: int, rank: int, model: ModelFile) -> None:
    """Offer what every model file gives: pLDDT, coordinates, sequence, date."""
    rec.add("model_plddt", list(model.plddt), name, rank)
    rec.add("coordinates", [c for xyz in model.coordinates for c in xyz], name, rank)
    rec.add("model_date", model.date, name, rank)
    rec.add("model_file", name, name, rank)
    rec.add("model_version", version, name, rank)
    rec.add("sequence", check_sequence(model.sequence, name), name, rank)
    rec.expect("model_residues", len(model.plddt), name)


def read_cif_model(rec: Record, path: Path, name: str, version: int) -> None:
    """Offer the values in an AlphaFold ModelCIF file (read with gemmi)."""
    text = path.read_text(encoding="utf-8")
    block = gemmi.cif.read_string(text).sole_block()
    acc = _cif_value(block, "_ma_target_ref_db_details.db_accession")
    if acc != rec.accession:
        raise BuildError(f"{name}: db_accession {acc!r} does not match the file name")
    model = read_model(text, name)
    # pLDDT lives twice in a ModelCIF file: per atom (B-factor) and per residue
    # (_ma_qa_metric_local, the pLDDT metric); they must agree.
    ids = [gemmi.cif.as_string(v) for v in block.find_values("_ma_qa_metric.id")]
    names = [gemmi.cif.as_string(v) for v in block.find_values("_ma_qa_metric.name")]
    modes = [gemmi.cif.as_string(v) for v in block.find_values("_ma_qa_metric.mode")]
    local = {i for i, n, m in zip(ids, names, modes, strict=True) if n == "pLDDT" and m == "local"}
    table = block.find("_ma_qa_metric_local.", ["label_seq_id", "metric_id", "metric_value"])
    rows = [(int(r[0]), float(r[2])) for r in table if gemmi.cif.as_string(r[1]) in local]
    if [n for n, _ in rows] != list(range(1, len(rows) + 1)):
        raise BuildError(f"{name}: local pLDDT rows are not residues 1..n")
    if [round(v, 2) for _, v in rows] != list(model.plddt):
        raise BuildError(f"{name}: _ma_qa_metric_local disagrees with the B-factors")
    rec.add("entry_id", _cif_value(block, "_entry.id"), name, R_CIF)
    rec.add("description", _cif_value(block, "_entity.pdbx_description"), name, R_CIF)
    rec.add("gene", _cif_value(block, "_ma_target_ref_db_details.gene_name"), name, R_CIF)
    rec.add("entry_name", _cif_entry_name(block, rec.accession, name), name, R_MODEL_NAME)
    rec.add(
        "organism",
        _cif_value(block, "_ma_target_ref_db_details.organism_scientific"),
        name,
        R_CIF,
    )
    rec.expect("taxid", _cif_value(block, "_ma_target_ref_db_details.ncbi_taxonomy_id"), name)
    _offer_model(rec, name, version, R_CIF, model)
    # The file's global pLDDT is the mean over residues in v6 files and the mean
    # over atoms in v4 files (P00221: 84.43 over atoms, 83.87 over residues).
    published = float(_cif_value(block, "_ma_qa_metric_global.metric_value") or "nan")
    atoms = [a.b_iso for r in gemmi.make_structure_from_block(block)[0][0] for a in r]
    means = {"residues": sum(model.plddt) / len(model.plddt), "atoms": sum(atoms) / len(atoms)}
    over = [what for what, mean in means.items() if abs(published - mean) <= 0.015]
    if not over:
        raise BuildError(f"{name}: global pLDDT {published} is no mean of the model's pLDDT")
    rec.add("file_global_plddt", {"value": published, "over": over[0], "file": name}, name, R_CIF)


def read_pdb_model(rec: Record, path: Path, name: str, version: int) -> None:
    """Offer the values in an AlphaFold PDB file (atoms read with gemmi; the
    COMPND, SOURCE and DBREF header lines name the protein)."""
    text = path.read_text(encoding="ascii")
    header = {"COMPND": [], "SOURCE": []}  # type: dict[str, list[str]]
    dbref = (None, None, None)  # database, accession, entry name (DBREF columns 27-54)
    for line in text.splitlines():
        record = line[:6].strip()
        if record in header:
            header[record].append(line[10:].strip())
        elif record == "DBREF":
            dbref = (line[26:32].strip(), line[33:42].strip(), line[42:54].strip())
    if dbref[:2] != ("UNP", rec.accession):
        raise BuildError(f"{name}: DBREF {dbref[:2]!r} does not match the file name")
    compnd_text = " ".join(header["COMPND"])
    source_text = " ".join(header["SOURCE"])
    molecule = re.search(r"MOLECULE: (.*?);", compnd_text)
    organism = re.search(r"ORGANISM_SCIENTIFIC: (.*?);", source_text)
    taxid = re.search(r"ORGANISM_TAXID: (\d+)", source_text)
    rec.add("entry_id", f"AF-{rec.accession}-F1", name, R_PDB)
    rec.add("description", molecule.group(1) if molecule else None, name, R_PDB)
    rec.add("entry_name", dbref[2], name, R_MODEL_NAME)
    if organism:
        rec.add("organism_pdb", organism.group(1), name, R_PDB)
    rec.expect("taxid", taxid.group(1) if taxid else None, name)
    _offer_model(rec, name, version, R_PDB, read_model(text, name))


def read_pae(rec: Record, path: Path, name: str, version: int) -> None:
    """Offer an AlphaFold DB PAE file: copied verbatim into the package, checked square."""
    matrix = parse_pae(json.loads(path.read_text(encoding="utf-8")))
    rec.add("pae_file", name, name, R_CIF)
    rec.expect("model_residues", len(matrix), name)


FLAT_TYPES = {
    "DNA_BIND": "DNA binding", "REGION": "Region", "MOTIF": "Motif", "METAL": "Metal binding",
    "BINDING": "Binding site", "DOMAIN": "Domain", "ZN_FING": "Zinc finger",
    "SIGNAL": "Signal", "TRANSIT": "Transit peptide", "PROPEP": "Propeptide", "CHAIN": "Chain",
    "PEPTIDE": "Peptide", "TRANSMEM": "Transmembrane", "INTRAMEM": "Intramembrane",
    "REPEAT": "Repeat", "COILED": "Coiled coil", "ACT_SITE": "Active site",
    "TOPO_DOM": "Topological domain", "CARBOHYD": "Glycosylation",
}  # fmt: skip
MONTHS = {m: i for i, m in enumerate(
    ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), 1
)}  # fmt: skip


def _iso(date: str) -> str:
    """``13-SEP-2005`` as ``2005-09-13``."""
    day, month, year = date.split("-")
    return f"{year}-{MONTHS[month]:02d}-{int(day):02d}"


_EVIDENCE = re.compile(r"\s*\{ECO:[^}]*\}")
"""A UniProt evidence tag (``{ECO:0000269|PubMed:…}``) in a comment's text."""
_WRAPPED = re.compile(r"(?<=\w)- (?=[a-z])")
"""A word the flat file broke after its hyphen (``C-`` / ``terminus``), joined by the parser
with a space."""


def _comment(comments: list[str], topic: str, *, whole_only: bool = False) -> str | None:
    """The first comment on ``topic``, one about the whole protein if there is one (not
    ``[C99]: …``, about one of its products; with ``whole_only``, never one of those),
    without evidence tags or wrapping."""
    texts = [c.partition(": ")[2] for c in comments if c.partition(": ")[0] == topic]
    whole = [t for t in texts if not t.startswith("[")] or ([] if whole_only else texts)
    if not whole:
        return None
    text = _WRAPPED.sub("-", _EVIDENCE.sub("", whole[0])).strip()
    return text[:-1] if text.endswith("..") else text


_DISPLAYED = re.compile(r"IsoId=([A-Z0-9]+-\d+)(?:, [A-Z0-9-]+)*; Sequence=Displayed")
"""The isoform an ALTERNATIVE PRODUCTS comment says the entry displays (its sequence)."""


def _displayed_isoform(comments: list[str], accession: str) -> str | None:
    """The isoform accession (``P05067-1``) whose sequence the entry displays, its
    canonical sequence, where the entry lists isoforms."""
    for comment in comments:
        if comment.startswith("ALTERNATIVE PRODUCTS:"):
            found = _DISPLAYED.search(comment)
            if found and found.group(1).partition("-")[0] == accession:
                return found.group(1)
    return None


_NAMED = re.compile(r"Name=([^;]+);(?:[^;]*;)*?\s*IsoId=([A-Z0-9]+-\d+)")
"""An ALTERNATIVE PRODUCTS isoform: its name, then (after its synonyms) its first IsoId."""


def _isoform_names(comments: list[str], accession: str) -> dict[str, str] | None:
    """The isoforms an ALTERNATIVE PRODUCTS comment names, by accession
    (``{"P05067-9": "L-APP752", …}``), where the entry lists them."""
    for comment in comments:
        if comment.startswith("ALTERNATIVE PRODUCTS:"):
            found = {
                iso: name.strip()
                for name, iso in _NAMED.findall(comment)
                if iso.partition("-")[0] == accession
            }
            return found or None
    return None


def _flat_evidence(text: object) -> list[tuple[str, str | None]]:
    """A flat-file feature's ``/evidence`` (``ECO:0000256|SAM:MobiDB-lite, …``) as
    ``(code, source)`` pairs."""
    pairs = []
    for item in str(text or "").split(","):
        code, _, source = item.strip().partition("|")
        if code:
            pairs.append((code, source or None))
    return pairs


def read_flatfile(rec: Record, path: Path, name: str) -> None:
    """Offer the names, features and comments of a UniProtKB flat-file entry (Biopython's
    parser). UniProt changed its DT and ID lines together (release 7.0, 2006): an old
    entry (data class ``STANDARD``) dates its annotation by release, a current one
    (``Reviewed``) by entry version."""
    with path.open(encoding="ascii") as handle:
        entry = SwissProt.read(handle)
    if rec.accession not in entry.accessions[:1]:
        raise BuildError(f"{name}: primary accession does not match the file name")
    sequence = check_sequence(entry.sequence, name)
    if entry.seqinfo[2] != crc64(sequence):
        raise BuildError(f"{name}: CRC64 disagrees with the sequence")
    rec.add("sequence", sequence, name, R_FASTA)
    rec.add("entry_name", entry.entry_name, name, R_UNIPROT)
    rec.add("secondary_accessions", list(entry.accessions[1:]), name, R_UNIPROT)
    rec.add("displayed_isoform", _displayed_isoform(entry.comments, rec.accession), name, R_UNIPROT)
    rec.add("isoform_names", _isoform_names(entry.comments, rec.accession), name, R_UNIPROT)
    # (the protein's own function, as from a JSON entry: not one of a cleaved product's)
    rec.add("function", _comment(entry.comments, "FUNCTION", whole_only=True), name, R_UNIPROT)
    date, number = entry.annotation_update
    current = entry.data_class in ("Reviewed", "Unreviewed")
    features = []
    for feature in entry.features:
        kind = FLAT_TYPES.get(feature.type)
        if kind is None:
            continue
        start, end = int(feature.location.start) + 1, int(feature.location.end)
        qualifiers = feature.qualifiers
        description = str(qualifiers.get("note") or qualifiers.get("description") or "")
        ligand = qualifiers.get("ligand") or (
            description.rstrip(".") if kind == "Metal binding" else None
        )
        found = {
            "type": kind,
            "start": start,
            "end": end,
            "description": _EVIDENCE.sub("", description).strip().rstrip(".;"),
            "ligand": str(ligand) if ligand else None,
        }
        tools = predicted_by(_flat_evidence(qualifiers.get("evidence")))
        if tools is not None:
            found["predicted_by"] = tools
        features.append(found)
    cofactor = _comment(entry.comments, "COFACTOR")
    rec.add(
        "uniprot",
        {
            "source": f"UniProtKB/Swiss-Prot flat file {entry.entry_name} ({name})",
            "file": name,
            "release": None if current else f"Rel. {number}",
            "date": _iso(date),
            "entry_version": number if current else None,
            "features": features,
            "subunit": _comment(entry.comments, "SUBUNIT"),
            "cofactors": [cofactor] if cofactor else [],
        },
        name,
        R_FASTA,
    )


def parse_fasta_header(header: str, expected_acc: str, name: str) -> dict[str, str | None]:
    """Parse a UniProt-style FASTA header; tolerate bare '>ACC' and trailing '(notes)'."""
    text = header[1:].strip()
    first, _, rest = text.partition(" ")
    if "|" in first:
        parts = first.split("|")
        if len(parts) != 3:
            raise BuildError(f"{name}: cannot read FASTA id {first!r}")
        acc, entry_name = parts[1], parts[2]
    else:
        acc = first
        maybe_entry, _, after = rest.partition(" ")
        entry_name = (
            maybe_entry if re.fullmatch(r"[A-Z0-9]{1,10}_[A-Z0-9]{1,5}", maybe_entry) else ""
        )
        if entry_name:
            rest = after
    if acc != expected_acc:
        raise BuildError(f"{name}: header accession {acc!r} does not match the file name")
    result: dict[str, str | None] = {"entry_name": entry_name or None}
    # Split "Name OS=... OX=... GN=... (note)" into the name and KEY=value fields.
    pieces = re.split(r"\s(?=[A-Z]{2}=)", " " + rest if rest.startswith(("OS=", "OX=")) else rest)
    protein_name = pieces[0].strip()
    fields = {}
    for piece in pieces[1:]:
        key, _, value = piece.partition("=")
        fields[key] = value.strip()
    # A collector's trailing "(note)" may follow the last field; drop it.
    if fields:
        last = list(fields)[-1]
        fields[last] = re.sub(r"\s*\(.*\)$", "", fields[last])
        result["description"] = protein_name or None
    else:
        result["description"] = None  # bare header: no trustworthy name
    result["organism"] = fields.get("OS") or None
    result["taxid"] = fields.get("OX") or None
    gene = fields.get("GN")
    result["gene"] = gene.split()[0] if gene else None
    return result


def read_fasta(rec: Record, path: Path, name: str) -> None:
    """Offer the header fields and sequence of a single-record FASTA file."""
    lines = path.read_text(encoding="ascii").splitlines()
    headers = [line for line in lines if line.startswith(">")]
    if len(headers) != 1 or not lines[0].startswith(">"):
        raise BuildError(f"{name}: expected exactly one FASTA record")
    head = parse_fasta_header(lines[0], rec.accession, name)
    seq = check_sequence("".join(line.strip() for line in lines[1:]), name)
    rec.add("sequence", seq, name, R_FASTA)
    rec.add("description", head["description"], name, R_FASTA)
    rec.add("organism", head["organism"], name, R_FASTA)
    rec.add("gene", head["gene"], name, R_FASTA)
    rec.add("entry_name", head["entry_name"], name, R_FASTA)
    rec.expect("taxid", head["taxid"], name)


def read_uniprot(rec: Record, path: Path, name: str) -> None:
    """Offer the values of a UniProt REST JSON entry."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("primaryAccession") != rec.accession:
        raise BuildError(f"{name}: primaryAccession does not match the file name")
    desc = data.get("proteinDescription", {})
    full = desc.get("recommendedName", {}).get("fullName", {}).get("value")
    if full is None and desc.get("submissionNames"):
        full = desc["submissionNames"][0].get("fullName", {}).get("value")
    rec.add("description", full, name, R_UNIPROT)
    rec.add("entry_name", data.get("uniProtkbId"), name, R_UNIPROT)
    rec.add("secondary_accessions", data.get("secondaryAccessions"), name, R_UNIPROT)
    organism = data.get("organism", {})
    rec.add("organism", organism.get("scientificName"), name, R_UNIPROT)
    rec.expect("taxid", organism.get("taxonId"), name)
    genes = data.get("genes") or []
    if genes:
        rec.add("gene", genes[0].get("geneName", {}).get("value"), name, R_UNIPROT)
    functions = [
        text["value"]
        for comment in data.get("comments", [])
        if comment.get("commentType") == "FUNCTION" and "molecule" not in comment
        for text in comment.get("texts", [])
    ]
    if functions:
        rec.add("function", " ".join(functions), name, R_UNIPROT)
    sequence = data.get("sequence")
    if sequence:
        seq = check_sequence(sequence["value"], name)
        if sequence.get("length") not in (None, len(seq)):
            raise BuildError(f"{name}: sequence.length disagrees with the sequence")
        if sequence.get("crc64") not in (None, crc64(seq)):
            raise BuildError(f"{name}: sequence.crc64 disagrees with the sequence")
        rec.add("sequence", seq, name, R_UNIPROT)


def _fractions(record: dict[str, Any]) -> dict[str, float] | None:
    """The four band fractions of an AlphaFold DB record, or None unless all are given."""
    fractions = {k: record.get(v) for k, v in FRACTION_KEYS.items()}
    return fractions if all(v is not None for v in fractions.values()) else None


def offer_figures(
    rec: Record,
    name: str,
    rank: int,
    version: int | None,
    record: dict[str, Any],
    fractions: dict[str, float] | None = None,
) -> None:
    """Offer one model's whole-model figures as a set (mean, band fractions, creation
    date): a brief takes them together, from one model version, never mixed."""
    created = record.get("modelCreatedDate")
    figures = {
        "version": version,
        "global_plddt": record.get("globalMetricValue"),
        "fractions": fractions,
        "model_date": str(created)[:10] if created else None,
    }
    if figures["global_plddt"] is not None or fractions is not None:
        rec.add("figures", figures, name, rank)


def read_afdb_api(records: dict[str, Record], path: Path, name: str) -> None:
    """Offer the values of every entry in an AFDB /api/prediction response."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise BuildError(f"{name}: expected a JSON list")
    for item in data:
        rec = record_for(records, item["uniprotAccession"])
        seq = check_sequence(item["uniprotSequence"], name)
        if item.get("sequence", seq) != seq or (item["uniprotStart"], item["uniprotEnd"]) != (
            1,
            len(seq),
        ):
            raise BuildError(f"{name}: {rec.accession} model does not cover the full sequence")
        rec.add("sequence", seq, name, R_AFDB_API)
        rec.add("description", item.get("uniprotDescription"), name, R_AFDB_API)
        rec.add("organism", item.get("organismScientificName"), name, R_AFDB_API)
        rec.add("gene", item.get("gene"), name, R_AFDB_API)
        rec.expect("taxid", item.get("taxId"), name)
        rec.add("entry_id", item.get("entryId"), name, R_AFDB_API)
        version = item.get("latestVersion")
        rec.add("model_version", version, name, R_AFDB_API)
        rec.add("entry_name", item.get("uniprotId"), name, R_AFDB_API)
        rec.expect(f"af_global_{version}", item.get("globalMetricValue"), name)
        fractions = _fractions(item)
        if fractions is not None:
            rec.expect(f"af_fractions_{version}", fractions, name)
        offer_figures(rec, name, R_AFDB_API, version, item, fractions)


def read_derived(rec: Record, path: Path, name: str, version: int) -> None:
    """Offer the per-residue pLDDT of a derived AFDB-style confidence JSON."""
    data = json.loads(path.read_text(encoding="utf-8"))
    numbers, scores, cats = (
        data["residueNumber"],
        data["confidenceScore"],
        data["confidenceCategory"],
    )
    if numbers != list(range(1, len(scores) + 1)) or len(cats) != len(scores):
        raise BuildError(f"{name}: residues are not 1..n")
    if [BAND_LETTER[band(s)] for s in scores] != cats:
        raise BuildError(f"{name}: confidenceCategory disagrees with confidenceScore")
    rec.add("plddt", [float(s) for s in scores], name, R_PDB)
    rec.add("entry_id", f"AF-{rec.accession}-F1", name, R_PDB)
    rec.add("model_version", version, name, R_PDB)


def read_summary(rec: Record, path: Path, name: str, version: int) -> None:
    """Offer the mean pLDDT of a per-project AlphaFold model summary."""
    data = json.loads(path.read_text(encoding="utf-8"))
    rec.add("entry_id", f"AF-{rec.accession}-F1", name, R_SUMMARY)
    rec.add("model_version", version, name, R_SUMMARY)
    offer_figures(rec, name, R_SUMMARY, version, {"globalMetricValue": data["plddt"]["mean"]})
    rec.expect("model_residues", data.get("residues"), name)


FACTS_AFDB_KEYS = {
    "entryId", "uniprotId", "uniprotDescription", "gene", "taxId", "organismScientificName",
    "sequenceStart", "sequenceEnd", "uniprotEnd", "latestVersion", "modelCreatedDate",
    "sequenceVersionDate", "globalMetricValue", *FRACTION_KEYS.values(),
    # Published as four numbers in an unstated band order: deliberately not used.
    "fractions_as_published_order_unstated",
}  # fmt: skip
FACTS_BLOCK_KEYS = {
    "afdb_v4_pdb_summary", "model_v6_cif_counts", "uniprot", "organism",
    "afdb_homepage_example", "note", "provenance",
}  # fmt: skip


def read_facts(records: dict[str, Record], path: Path, name: str) -> None:
    """Offer the lower-trust values quoted in facts_secondary_sources.json."""
    data = json.loads(path.read_text(encoding="utf-8"))
    for acc, block in data.items():
        if acc.startswith("_"):
            continue
        rec = record_for(records, acc)
        for key, value in block.items():
            version_match = re.fullmatch(r"afdb_v(\d+)", key)
            if version_match:
                read_facts_afdb(rec, value, name, int(version_match.group(1)))
            elif key not in FACTS_BLOCK_KEYS:
                raise BuildError(f"{name}: {acc}: unknown key {key!r}")
        if "afdb_v4_pdb_summary" in block:
            summary = block["afdb_v4_pdb_summary"]
            version = int(re.findall(r"\d+", "afdb_v4_pdb_summary")[0])  # the key names it
            mean = {"globalMetricValue": summary.get("plddt_mean")}
            offer_figures(rec, name, R_FACTS + 1, version, mean)
            rec.expect("model_residues", summary.get("residues"), name)
        if "model_v6_cif_counts" in block:
            counts = block["model_v6_cif_counts"]
            rec.expect("model_residues", counts.get("residues"), name)
            rec.expect("af_global_6", counts.get("mean_plddt"), name)
        if "uniprot" in block:
            uni = block["uniprot"]
            rec.add("description", uni.get("name"), name, R_FACTS)
            rec.add("organism", uni.get("organism"), name, R_FACTS)
            rec.add("gene", uni.get("gene"), name, R_FACTS)
            rec.add("entry_name", uni.get("uniProtkbId"), name, R_FACTS)
            rec.expect("length", uni.get("length"), name)
            rec.expect("taxid", uni.get("taxonId"), name)
        rec.add("organism", block.get("organism"), name, R_FACTS)
        if "afdb_homepage_example" in block:
            match = re.fullmatch(
                rf"{re.escape(acc)}: (?P<func>.+?)\s+Mean pLDDT (?P<mean>\d+(?:\.\d+)?)\.?",
                block["afdb_homepage_example"],
            )
            if not match:
                raise BuildError(f"{name}: {acc}: cannot read afdb_homepage_example")
            rec.add("function", match["func"], name, R_FACTS)
            offer_figures(rec, name, R_FACTS, None, {"globalMetricValue": float(match["mean"])})
        if "note" in block:
            match = re.search(r"entry id (AF-[A-Za-z0-9]+(?:-F\d+)?)\b", block["note"])
            if match:
                rec.add("entry_id", match.group(1), name, R_FACTS)


def read_facts_afdb(rec: Record, block: dict[str, Any], name: str, version: int) -> None:
    """Offer the values of one afdb_vN block of the facts file."""
    unknown = set(block) - FACTS_AFDB_KEYS
    if unknown:
        raise BuildError(f"{name}: {rec.accession}: unknown afdb keys {sorted(unknown)}")
    if block.get("latestVersion", version) != version:
        raise BuildError(f"{name}: {rec.accession}: latestVersion disagrees with block name")
    rec.add("entry_id", block.get("entryId"), name, R_FACTS)
    rec.add("model_version", version, name, R_FACTS)
    if "latestVersion" not in block:  # the version is only the collector's block name
        rec.add("version_named_by", f"afdb_v{version}", name, R_FACTS)
    rec.add("description", block.get("uniprotDescription"), name, R_FACTS)
    rec.add("gene", block.get("gene"), name, R_FACTS)
    rec.add("organism", block.get("organismScientificName"), name, R_FACTS)
    rec.expect("taxid", block.get("taxId"), name)
    rec.add("entry_name", block.get("uniprotId"), name, R_FACTS)
    offer_figures(rec, name, R_FACTS, version, block, _fractions(block))
    if block.get("sequenceStart", 1) != 1:
        raise BuildError(f"{name}: {rec.accession}: model does not start at residue 1")
    rec.expect("length", block.get("sequenceEnd"), name)
    rec.expect("length", block.get("uniprotEnd"), name)


# --------------------------------------------------------------------------- assembly


def _version_basis(rec: Record, version: Any) -> str | None:
    """Where the model version comes from when no source states it: only the name the
    collector gave a facts block (``afdb_v6``); ``None`` when a source states it."""
    named = rec.cands.get("version_named_by") or []
    stated = [c for c in rec.cands.get("model_version", []) if c[2] == version]
    if version is None or not named or any(c[1] not in {n[1] for n in named} for c in stated):
        return None
    return f"the collector's name for its block in {named[0][1]}, {named[0][2]}"


def gather(shared: Path) -> dict[str, Record]:
    """Read every file of the shared directory into per-accession records."""
    records: dict[str, Record] = {}
    files = sorted(p.relative_to(shared).as_posix() for p in shared.rglob("*") if p.is_file())
    for name in files:
        matches = [(kind, m) for kind, pattern in FILE_PATTERNS if (m := pattern.match(name))]
        if not matches:
            raise BuildError(f"unknown file in the shared directory: {name}")
        kind, match = matches[0]
        path = shared / name
        groups = match.groupdict()
        if groups.get("frag", "1") != "1":
            raise BuildError(f"{name}: only single-fragment (F1) models are supported")
        version = int(groups["ver"]) if "ver" in groups else 0
        if kind == "readme":
            continue
        if kind == "facts":
            read_facts(records, path, name)
        elif kind == "afdb_api":
            read_afdb_api(records, path, name)
            if groups["acc"] not in records:
                raise BuildError(f"{name}: no entry for {groups['acc']}")
        else:
            rec = record_for(records, groups["acc"])
            if kind == "uniprot":
                read_uniprot(rec, path, name)
            elif kind == "flatfile":
                read_flatfile(rec, path, name)
            elif kind == "pae":
                read_pae(rec, path, name, version)
            elif kind == "fasta":
                read_fasta(rec, path, name)
            elif kind == "summary":
                read_summary(rec, path, name, version)
            elif kind == "derived":
                read_derived(rec, path, name, version)
            elif groups["ext"] == "pdb":
                read_pdb_model(rec, path, name, version)
            else:
                read_cif_model(rec, path, name, version)
    return records


def taxon_names(records: dict[str, Record]) -> dict[str, set[str]]:
    """Map taxon id -> scientific names given for it by the raw (non-facts) files."""
    names: dict[str, set[str]] = {}
    for rec in records.values():
        organism, source = rec.pick("organism")
        if organism is None or source == FACTS_FILE:
            continue
        for what, _, value in rec.checks:
            if what == "taxid":
                names.setdefault(str(value), set()).add(organism)
    return names


def resolve(rec: Record, taxa: dict[str, set[str]]) -> dict[str, Any]:
    """Turn a record's candidates into one output entry (plus the sources used)."""
    used: set[str] = set()

    def take(name: str) -> Any:
        value, source = rec.pick(name)
        if source is not None:
            used.add(source)
        return value

    # PDB files only give an upper-case organism; use the spelling other raw files give
    # for the same taxon id when it matches case-insensitively, else keep it verbatim.
    pdb_org, pdb_source = rec.pick("organism_pdb")
    if pdb_org is not None:
        taxids = {str(v) for what, _, v in rec.checks if what == "taxid"}
        spelled = sorted(
            n for t in taxids for n in taxa.get(t, ()) if n.casefold() == pdb_org.casefold()
        )
        rec.add("organism", spelled[0] if spelled else pdb_org, pdb_source, R_PDB)

    sequence = take("sequence")
    function = take("function")
    description = take("description")
    if description is None and function is not None:
        # Only a function sentence is known: use it, honestly, as the description.
        description = function
    entry: dict[str, Any] = {
        "uniprot_id": rec.accession,
        "description": description,
        "organism": take("organism"),
        "gene": take("gene"),
        "length": len(sequence) if sequence is not None else None,
        "sequence": sequence,
        "function": function,
        "entry_name": take("entry_name"),
        "secondary_accessions": sorted(
            {a for _, source, found in rec.cands.get("secondary_accessions", []) for a in found}
        ),
    }
    used.update(source for _, source, _ in rec.cands.get("secondary_accessions", []))
    quoted = [name for name in IDENTITY_FIELDS if rec.pick(name)[1] == FACTS_FILE]
    if quoted:  # no raw file gives them: a brief names their lower-trust source
        entry["quoted_fields"] = quoted
    displayed = take("displayed_isoform")
    if displayed is not None:
        entry["displayed_isoform"] = displayed
    names = take("isoform_names")
    if names:
        entry["isoform_names"] = names

    # Per-residue pLDDT: derived files win; model files must agree with them.
    plddt = take("plddt")
    model_plddt, model_source = rec.pick("model_plddt")
    for _, other_source, other in rec.cands.get("model_plddt", []):
        if plddt is not None and [round(v, 2) for v in other] != plddt:
            raise BuildError(f"{rec.accession}: {other_source} pLDDT disagrees with derived")
    if plddt is None and model_plddt is not None and model_source is not None:
        plddt = model_plddt
        used.add(model_source)
    plddt = [round(v, 2) for v in plddt] if plddt is not None else None

    entry_id, entry_id_source = rec.pick("entry_id")
    if entry_id_source is not None:
        used.add(entry_id_source)
    sets = sorted(rec.cands.get("figures", []), key=lambda c: (c[0], c[1]))
    chosen = None
    if plddt is not None:
        version = take("model_version")
        global_plddt: float | None = mean_plddt(plddt)
        fractions: dict[str, float] | None = plddt_fractions(plddt)
        model_date = take("model_date")
        figures_source = rec.pick("model_file")[0]
    else:
        # Whole-model figures only: one model's set, the most complete and most trusted.
        complete = [c for c in sets if c[2]["global_plddt"] is not None and c[2]["fractions"]]
        chosen = (complete or sets or [None])[0]
        figures = chosen[2] if chosen else {}
        version = figures.get("version") or take("model_version")
        global_plddt, fractions = figures.get("global_plddt"), figures.get("fractions")
        model_date = figures.get("model_date")
        figures_source = chosen[1] if chosen else None
        if figures_source is not None:
            used.add(figures_source)
    # Other models' means the data give: a cross-check the brief names, never mixed in.
    others: dict[tuple[Any, Any], dict[str, Any]] = {}
    for rank, source, figures in sets:
        if chosen is not None and source == chosen[1]:
            continue
        mean = figures["global_plddt"]
        if mean is not None and (figures["version"], mean) not in others:
            others[(figures["version"], mean)] = {
                "version": figures["version"],
                "global_plddt": mean,
                "source": source,
                # a project's own summary of the model file: its figure, not AlphaFold DB's
                "computed_by_project": rank == R_SUMMARY,
            }
            used.add(source)
    if any(v is not None for v in (entry_id, version, global_plddt, fractions, plddt)):
        coordinates = take("coordinates")
        entry["alphafold"] = {
            "entry_id": entry_id,
            "entry_id_source": entry_id_source,
            "model_version": version,
            "global_plddt": global_plddt,
            "fractions": fractions,
            "plddt": plddt,
            "model_date": model_date,
            "model_file": take("model_file"),
            "coordinates": coordinates,
            "pae_file": take("pae_file"),
            "figures_source": figures_source,
            "model_version_basis": _version_basis(rec, version),
            "file_global_plddt": take("file_global_plddt"),
            "other_means": list(others.values()),
        }
        if coordinates is not None and plddt is not None and len(coordinates) != 3 * len(plddt):
            raise BuildError(f"{rec.accession}: coordinates do not cover every residue")
    else:
        entry["alphafold"] = None
    entry["uniprot"] = take("uniprot")

    verify(rec, entry)
    entry["sources"] = sorted(used)
    return entry


def verify(rec: Record, entry: dict[str, Any]) -> None:
    """Cross-check the resolved entry against every recorded expectation."""
    af = entry["alphafold"] or {}
    plddt = af.get("plddt")
    for what, source, value in rec.checks:
        if what == "taxid":
            taxids = {str(v) for w, _, v in rec.checks if w == "taxid"}
            if len(taxids) != 1:
                raise BuildError(f"{rec.accession}: taxon ids disagree: {sorted(taxids)}")
        elif what == "length":
            if entry["length"] is not None and value != entry["length"]:
                raise BuildError(f"{rec.accession}: {source} length {value} != {entry['length']}")
        elif what == "model_residues":
            if entry["length"] is not None and value != entry["length"]:
                raise BuildError(f"{rec.accession}: {source} residues {value} != sequence")
            if plddt is not None and value != len(plddt):
                raise BuildError(f"{rec.accession}: {source} residues {value} != pLDDT count")
        elif what.startswith("af_global_"):
            # Published means are computed from unrounded values: allow rounding slack.
            same_model = str(af.get("model_version")) == what.rsplit("_", 1)[1]
            if same_model and abs(float(value) - af["global_plddt"]) > 0.015:
                raise BuildError(f"{rec.accession}: {source} mean {value} != {af['global_plddt']}")
        elif what.startswith("af_fractions_"):
            same_model = str(af.get("model_version")) == what.rsplit("_", 1)[1]
            if same_model and plddt is not None:
                for key, frac in value.items():
                    if abs(frac - af["fractions"][key]) > 0.0015:
                        raise BuildError(f"{rec.accession}: {source} fraction {key} disagrees")
    for key in ("description", "organism"):
        if not entry[key]:
            raise BuildError(f"{rec.accession}: no {key} in the data")


def build(shared: Path) -> dict[str, Any]:
    """Build the whole dataset document from the shared directory."""
    records = gather(shared)
    taxa = taxon_names(records)
    entries: dict[str, Any] = {}
    isoforms: dict[str, list[dict[str, Any]]] = {}
    for acc in sorted(records):
        base, dash, _ = acc.partition("-")
        entry = resolve(records[acc], taxa)
        if dash:
            isoforms.setdefault(base, []).append(
                {
                    "accession": acc,
                    "length": entry["length"],
                    "sequence": entry["sequence"],
                    "alphafold": entry["alphafold"],
                    "sources": entry["sources"],
                }
            )
        else:
            if not LYRA_ID.match(acc):
                raise BuildError(f"accession {acc!r} is not a valid lyra id")
            entries[acc] = entry
    check_aliases(entries)
    for base, forms in isoforms.items():
        if base not in entries:
            raise BuildError(f"isoforms of {base} but no canonical entry")
        entries[base]["isoforms"] = sorted(
            forms, key=lambda form: int(form["accession"].rpartition("-")[2])
        )
    return {
        "schema_version": SCHEMA_VERSION,
        "source_note": SOURCE_NOTE,
        "entries": entries,
        "provenance": provenance(shared, entries),
    }


PROVENANCE_KEYS = {"repository", "path", "commit", "how", "from", "note"}
PROVENANCE_HOW = {
    "verbatim", "gunzipped", "re-serialised", "subset", "extracted", "derived", "assembled"
}  # fmt: skip


def provenance(shared: Path, entries: dict[str, Any]) -> dict[str, Any]:
    """Where each file an entry names comes from (``provenance.json`` of the raw folder,
    which its README.txt and PROVENANCE.md say in words): every one must be there."""
    records = json.loads((shared / "provenance.json").read_text(encoding="utf-8"))["files"]
    used = {  # (an entry's sources include those of its other models' means)
        name
        for entry in entries.values()
        for form in [entry, *entry.get("isoforms", [])]
        for name in form["sources"]
    }
    missing = sorted(used - set(records))
    if missing:
        raise BuildError(f"provenance.json says nothing of {', '.join(missing)}")
    for name, record in records.items():
        if not set(record) <= PROVENANCE_KEYS or record.get("how") not in PROVENANCE_HOW:
            raise BuildError(f"provenance.json: {name}: an unknown key or 'how'")
        if (record["repository"] is None) != (record["commit"] is None):
            raise BuildError(f"provenance.json: {name}: a repository without its commit")
    return {name: records[name] for name in sorted(used)}


def check_aliases(entries: dict[str, Any]) -> None:
    """Each entry name and secondary accession names one entry, and none is an entry's
    own accession: the offline source resolves them to their primary accession."""
    seen: dict[str, str] = {}
    for acc, entry in entries.items():
        for alias in [
            entry["entry_name"],
            *entry["secondary_accessions"],
            entry.get("displayed_isoform"),
        ]:
            if alias is None:
                continue
            if alias in entries or seen.setdefault(alias, acc) != acc:
                raise BuildError(f"{alias} names {acc} and {seen.get(alias, alias)}")


def dumps(obj: Any, indent: int = 0) -> str:
    """Deterministic JSON: sorted keys, one-space indent, scalar lists kept on one line."""
    pad = " " * indent
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        inner = ",\n".join(
            f"{pad} {json.dumps(key)}: {dumps(obj[key], indent + 1)}" for key in sorted(obj)
        )
        return "{\n" + inner + "\n" + pad + "}"
    if isinstance(obj, list):
        if all(not isinstance(item, dict | list) for item in obj):
            return "[" + ", ".join(json.dumps(item) for item in obj) + "]"
        inner = ",\n".join(f"{pad} {dumps(item, indent + 1)}" for item in obj)
        return "[\n" + inner + "\n" + pad + "]"
    return json.dumps(obj)


def copy_pae(raw: Path, document: dict[str, Any], dest: Path) -> None:
    """Copy each PAE file an entry names, byte for byte, into the package."""
    dest.mkdir(parents=True, exist_ok=True)
    names = sorted(
        af["pae_file"]
        for entry in document["entries"].values()
        for af in [entry["alphafold"], *(i["alphafold"] for i in entry.get("isoforms", []))]
        if af and af.get("pae_file")
    )
    for stale in dest.glob("*.json"):
        if stale.name not in names:
            stale.unlink()
    for name in names:
        shutil.copyfile(raw / name, dest / name)


def copy_fixtures(shared: Path, dest: Path) -> None:
    """Copy the recorded HTTP responses byte-for-byte into dest."""
    for target, source in sorted(FIXTURES.items()):
        (dest / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared / source, dest / target)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", type=Path, default=DEFAULT_RAW, help="raw data dir")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output JSON path")
    parser.add_argument("--pae", type=Path, default=DEFAULT_PAE, help="PAE files dir")
    parser.add_argument(
        "--fixtures", type=Path, default=None, help="also copy recorded responses into this dir"
    )
    args = parser.parse_args(argv)
    try:
        document = build(args.raw)
    except BuildError as exc:
        print(f"build_protein_data: {exc}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dumps(document) + "\n", encoding="utf-8", newline="\n")
    copy_pae(args.raw, document, args.pae)
    if args.fixtures is not None:
        copy_fixtures(args.raw, args.fixtures)
    print(f"wrote {len(document['entries'])} entries to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
