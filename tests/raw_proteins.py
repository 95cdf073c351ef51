"""The bundled protein data read straight from its raw files with the field's own
libraries (gemmi, Biopython), independently of lyra's code: what the protein tests
recompute a brief's figures from."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import gemmi
from Bio import SwissProt

from lyra.proteins import AnalysisOutput

RAW = Path(__file__).resolve().parents[1] / "data" / "proteins"


def brief_of(output: AnalysisOutput, protein_id: str) -> str:
    """The brief of ``protein_id`` in an analysis (completed or partial)."""
    entries = [*output.completed_analyses, *output.partial_analyses]
    return next(e.brief for e in entries if e.protein_id == protein_id)


def raw_plddt(name: str) -> list[float]:
    """Per-residue pLDDT of a raw model file: each residue's CA B-factor, read with gemmi."""
    structure = gemmi.read_structure(str(RAW / name))
    return [round(residue["CA"][0].b_iso, 2) for residue in structure[0][0]]


def raw_pae(name: str) -> list[list[float]]:
    """The PAE matrix of a raw AlphaFold DB PAE file."""
    return json.loads((RAW / name).read_text(encoding="utf-8"))[0]["predicted_aligned_error"]


def by_band(name: str, *ranges: tuple[int, int]) -> str:
    """The residues of ``ranges`` (1-based, inclusive) of a raw model in each of AlphaFold
    DB's bands (≥ 90, 70–90, 50–70, < 50), as a brief's tables write them."""
    plddt = raw_plddt(name)
    values = [plddt[r - 1] for start, end in ranges for r in range(start, end + 1)]
    counts = [
        sum(v >= 90 for v in values),
        sum(70 <= v < 90 for v in values),
        sum(50 <= v < 70 for v in values),
        sum(v < 50 for v in values),
    ]
    names = ("very high", "confident", "low", "very low")
    return " · ".join(f"{name} {n}" for name, n in zip(names, counts, strict=True))


def mean_of(values: list[float]) -> str:
    """A mean as a brief prints a measured figure: the exact mean of the values as
    written, to two decimals, half up at a tie."""
    exact = sum(Decimal(str(v)) for v in values) / len(values)
    return str(exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def app_flat_file() -> Any:
    """P05067's UniProt flat file, read with Biopython."""
    with (RAW / "uniprot_P05067_flatfile_2025.txt").open(encoding="ascii") as handle:
        return SwissProt.read(handle)
