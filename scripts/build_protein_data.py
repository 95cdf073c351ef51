#!/usr/bin/env python3
"""Build lyra's bundled offline protein dataset from the shared protein data files.

Usage::

    python scripts/build_protein_data.py [--shared PATH] [--out PATH] [--fixtures DIR]

Stdlib only. Every value in the output is taken from a file in the shared directory
(never typed in here); when several files give the same field the highest-trust one wins
(UniProt JSON > AFDB API JSON > model mmCIF > FASTA > model PDB > per-project summary >
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = REPO_ROOT.parent / "shared" / "data" / "proteins"
DEFAULT_OUT = REPO_ROOT / "src" / "lyra" / "proteins" / "data" / "proteins.json"

SCHEMA_VERSION = 1
SOURCE_NOTE = (
    "Built by scripts/build_protein_data.py from shared/data/proteins "
    "(AlphaFold DB and UniProt data, CC-BY 4.0); see README.md next to this file."
)
FACTS_FILE = "facts_secondary_sources.json"
LYRA_ID = re.compile(r"^[A-Za-z0-9]{1,15}$")

# Recorded HTTP responses copied byte-for-byte for a replaying test server.
FIXTURES = {
    "afdb_prediction_P05067.json": "afdb_api_prediction_P05067.json",
    "uniprot_P04637.json": "uniprot_P04637_subset.json",
    "uniprot_P69905.json": "uniprot_P69905_trimmed.json",
}

# Source ranks: lower wins.
R_UNIPROT, R_AFDB_API, R_CIF, R_FASTA, R_PDB, R_SUMMARY, R_FACTS = range(7)

ACC = r"[A-Z0-9]+(?:-\d+)?"
FILE_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("readme", re.compile(r"^README\.txt$")),
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
CHECKED_FIELDS = (*TEXT_FIELDS, "sequence", "entry_id")


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
    """Mean pLDDT rounded to 2 decimals."""
    return round(sum(values) / len(values), 2)


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


def cif_tokens(text: str) -> Iterator[tuple[bool, str]]:
    """Yield (is_bare, token) for a CIF file; quoted and ;-delimited values are not bare."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(";"):
            parts = [line[1:]]
            i += 1
            while not lines[i].startswith(";"):
                parts.append(lines[i])
                i += 1
            i += 1
            yield False, "\n".join(parts)
            continue
        pos = 0
        while pos < len(line):
            char = line[pos]
            if char.isspace():
                pos += 1
            elif char == "#":
                break
            elif char in "'\"":
                end = pos + 1
                while True:
                    end = line.index(char, end)
                    if end + 1 == len(line) or line[end + 1].isspace():
                        break
                    end += 1
                yield False, line[pos + 1 : end]
                pos = end + 1
            else:
                end = pos
                while end < len(line) and not line[end].isspace():
                    end += 1
                yield True, line[pos:end]
                pos = end
        i += 1


def parse_cif(text: str) -> dict[str, list[str]]:
    """Parse a single-block mmCIF file into {tag: [values]} (loops become columns)."""
    tokens = list(cif_tokens(text))
    items: dict[str, list[str]] = {}

    def is_keyword(tok: tuple[bool, str]) -> bool:
        bare, value = tok
        return bare and (value.startswith(("_", "data_")) or value == "loop_")

    i = 0
    while i < len(tokens):
        bare, token = tokens[i]
        if bare and token.startswith("data_"):
            i += 1
        elif bare and token == "loop_":
            i += 1
            tags = []
            while i < len(tokens) and tokens[i][0] and tokens[i][1].startswith("_"):
                tags.append(tokens[i][1])
                i += 1
            values = []
            while i < len(tokens) and not is_keyword(tokens[i]):
                values.append(tokens[i][1])
                i += 1
            if not tags or len(values) % len(tags):
                raise BuildError(f"malformed CIF loop starting with {tags[:1]}")
            for k, tag in enumerate(tags):
                items[tag] = values[k :: len(tags)]
        elif bare and token.startswith("_"):
            items[token] = [tokens[i + 1][1]]
            i += 2
        else:
            raise BuildError(f"unexpected CIF token {token!r}")
    return items


def cif_one(items: dict[str, list[str]], tag: str) -> str | None:
    """The single value of a CIF tag, or None for missing / '?' / '.'."""
    values = items.get(tag)
    if values is None:
        return None
    if len(values) != 1:
        raise BuildError(f"CIF tag {tag} has {len(values)} values, expected 1")
    return None if values[0] in ("?", ".") else values[0]


def read_cif_model(rec: Record, path: Path, name: str, version: int) -> None:
    """Offer the values in an AlphaFold ModelCIF file."""
    items = parse_cif(path.read_text(encoding="utf-8"))
    acc = cif_one(items, "_ma_target_ref_db_details.db_accession")
    if acc != rec.accession:
        raise BuildError(f"{name}: db_accession {acc!r} does not match the file name")
    rec.add("entry_id", cif_one(items, "_entry.id"), name, R_CIF)
    rec.add("model_version", version, name, R_CIF)
    rec.add("description", cif_one(items, "_entity.pdbx_description"), name, R_CIF)
    rec.add("gene", cif_one(items, "_ma_target_ref_db_details.gene_name"), name, R_CIF)
    rec.add(
        "organism", cif_one(items, "_ma_target_ref_db_details.organism_scientific"), name, R_CIF
    )
    rec.expect("taxid", cif_one(items, "_ma_target_ref_db_details.ncbi_taxonomy_id"), name)
    seq = cif_one(items, "_entity_poly.pdbx_seq_one_letter_code_can")
    if seq is not None:
        rec.add("sequence", check_sequence("".join(seq.split()), name), name, R_CIF)
    # Local pLDDT: rows of _ma_qa_metric_local whose metric is the local pLDDT metric.
    local_ids = [
        mid
        for mid, mode, mname in zip(
            items["_ma_qa_metric.id"],
            items["_ma_qa_metric.mode"],
            items["_ma_qa_metric.name"],
            strict=True,
        )
        if mode == "local" and mname == "pLDDT"
    ]
    rows = [
        (int(seq_id), float(value))
        for seq_id, mid, value in zip(
            items["_ma_qa_metric_local.label_seq_id"],
            items["_ma_qa_metric_local.metric_id"],
            items["_ma_qa_metric_local.metric_value"],
            strict=True,
        )
        if mid in local_ids
    ]
    if [r for r, _ in rows] != list(range(1, len(rows) + 1)):
        raise BuildError(f"{name}: local pLDDT rows are not residues 1..n")
    rec.add("model_plddt", [v for _, v in rows], name, R_CIF)
    rec.expect("model_residues", len(rows), name)
    rec.expect(
        "af_global_" + str(version), cif_one(items, "_ma_qa_metric_global.metric_value"), name
    )


def read_pdb_model(rec: Record, path: Path, name: str, version: int) -> None:
    """Offer the values in an AlphaFold PDB file (pLDDT is the CA B-factor)."""
    seqres: list[str] = []
    compnd: list[str] = []
    source: list[str] = []
    ca: list[tuple[str, int, float]] = []
    dbref = None
    for line in path.read_text(encoding="ascii").splitlines():
        record = line[:6].strip()
        if record == "SEQRES":
            seqres.extend(line[19:].split())
        elif record == "COMPND":
            compnd.append(line[10:].strip())
        elif record == "SOURCE":
            source.append(line[10:].strip())
        elif record == "DBREF":
            dbref = line[33:42].strip()
        elif record == "ATOM" and line[12:16].strip() == "CA":
            ca.append((line[21], int(line[22:26]), float(line[60:66])))
    if dbref != rec.accession:
        raise BuildError(f"{name}: DBREF accession {dbref!r} does not match the file name")
    if len({chain for chain, _, _ in ca}) != 1:
        raise BuildError(f"{name}: expected exactly one chain")
    if [num for _, num, _ in ca] != list(range(1, len(ca) + 1)):
        raise BuildError(f"{name}: CA atoms are not residues 1..n")
    try:
        seq = "".join(THREE_TO_ONE[res] for res in seqres)
    except KeyError as exc:
        raise BuildError(f"{name}: non-standard residue {exc}") from None
    compnd_text = " ".join(compnd)
    source_text = " ".join(source)
    molecule = re.search(r"MOLECULE: (.*?);", compnd_text)
    organism = re.search(r"ORGANISM_SCIENTIFIC: (.*?);", source_text)
    taxid = re.search(r"ORGANISM_TAXID: (\d+)", source_text)
    rec.add("entry_id", f"AF-{rec.accession}-F1", name, R_PDB)
    rec.add("model_version", version, name, R_PDB)
    rec.add("description", molecule.group(1) if molecule else None, name, R_PDB)
    if organism:
        rec.add("organism_pdb", organism.group(1), name, R_PDB)
    rec.expect("taxid", taxid.group(1) if taxid else None, name)
    rec.add("sequence", check_sequence(seq, name), name, R_PDB)
    rec.add("model_plddt", [b for _, _, b in ca], name, R_PDB)
    rec.expect("model_residues", len(ca), name)


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
        rec.add("global_plddt", item.get("globalMetricValue"), name, R_AFDB_API)
        rec.expect(f"af_global_{version}", item.get("globalMetricValue"), name)
        fractions = {k: item.get(v) for k, v in FRACTION_KEYS.items()}
        if all(v is not None for v in fractions.values()):
            rec.add("fractions", fractions, name, R_AFDB_API)
            rec.expect(f"af_fractions_{version}", fractions, name)


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
    rec.add("global_plddt", data["plddt"]["mean"], name, R_SUMMARY)
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
            rec.add("global_plddt", summary.get("plddt_mean"), name, R_FACTS + 1)
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
            rec.add("global_plddt", float(match["mean"]), name, R_FACTS)
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
    rec.add("description", block.get("uniprotDescription"), name, R_FACTS)
    rec.add("gene", block.get("gene"), name, R_FACTS)
    rec.add("organism", block.get("organismScientificName"), name, R_FACTS)
    rec.expect("taxid", block.get("taxId"), name)
    rec.add("global_plddt", block.get("globalMetricValue"), name, R_FACTS)
    fractions = {k: block.get(v) for k, v in FRACTION_KEYS.items()}
    if all(v is not None for v in fractions.values()):
        rec.add("fractions", fractions, name, R_FACTS)
    if block.get("sequenceStart", 1) != 1:
        raise BuildError(f"{name}: {rec.accession}: model does not start at residue 1")
    rec.expect("length", block.get("sequenceEnd"), name)
    rec.expect("length", block.get("uniprotEnd"), name)


# --------------------------------------------------------------------------- assembly


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
    }

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

    entry_id = take("entry_id")
    version = take("model_version")
    if plddt is not None:
        global_plddt: float | None = mean_plddt(plddt)
        fractions: dict[str, float] | None = plddt_fractions(plddt)
    else:
        global_plddt = take("global_plddt")
        fractions = take("fractions")
    if any(v is not None for v in (entry_id, version, global_plddt, fractions, plddt)):
        entry["alphafold"] = {
            "entry_id": entry_id,
            "model_version": version,
            "global_plddt": global_plddt,
            "fractions": fractions,
            "plddt": plddt,
        }
    else:
        entry["alphafold"] = None

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
    for base, forms in isoforms.items():
        if base not in entries:
            raise BuildError(f"isoforms of {base} but no canonical entry")
        entries[base]["isoforms"] = sorted(
            forms, key=lambda form: int(form["accession"].rpartition("-")[2])
        )
    return {"schema_version": SCHEMA_VERSION, "source_note": SOURCE_NOTE, "entries": entries}


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


def copy_fixtures(shared: Path, dest: Path) -> None:
    """Copy the recorded HTTP responses byte-for-byte into dest."""
    dest.mkdir(parents=True, exist_ok=True)
    for target, source in sorted(FIXTURES.items()):
        shutil.copyfile(shared / source, dest / target)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="shared data dir")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output JSON path")
    parser.add_argument(
        "--fixtures", type=Path, default=None, help="also copy recorded responses into this dir"
    )
    args = parser.parse_args(argv)
    try:
        document = build(args.shared)
    except BuildError as exc:
        print(f"build_protein_data: {exc}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dumps(document) + "\n", encoding="utf-8", newline="\n")
    if args.fixtures is not None:
        copy_fixtures(args.shared, args.fixtures)
    print(f"wrote {len(document['entries'])} entries to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
