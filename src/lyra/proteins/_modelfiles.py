"""The field's file formats, read with the field's tools.

- Model files (PDB or mmCIF): gemmi reads them; pLDDT is the B-factor of each
  residue's atoms (AlphaFold writes it there and in ``_ma_qa_metric_local``,
  checked equal by the dataset build), coordinates are each residue's CB (CA
  for glycine).
- AlphaFold DB's confidence file (``{"residueNumber", "confidenceScore",
  "confidenceCategory"}``) and PAE file (``[{"predicted_aligned_error": [[…]],
  "max_predicted_aligned_error": …}]``) are plain JSON with a documented
  shape; no library of the field reads them, so they are checked here against
  that shape (a wrong shape raises ``ValueError``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["ModelFile", "read_confidence", "read_model", "read_pae"]


@dataclass(frozen=True)
class ModelFile:
    """What a model file gives: per-residue pLDDT, CB coordinates and its date."""

    plddt: tuple[float, ...]
    coordinates: tuple[tuple[float, float, float], ...]
    sequence: str
    date: str | None


def read_model(text: str, name: str) -> ModelFile:
    """Read one AlphaFold model (PDB or mmCIF text; ``name`` tells which) with gemmi."""
    import gemmi  # here: a run without model files never pays for it

    if name.endswith(".cif"):
        structure = gemmi.make_structure_from_block(gemmi.cif.read_string(text).sole_block())
    else:
        structure = gemmi.read_pdb_string(text)
    model = structure[0]
    if len(model) != 1:
        raise ValueError(f"{name}: expected one chain, found {len(model)}")
    plddt, coordinates, letters = [], [], []
    for residue in model[0]:
        atom = residue.find_atom("CB", "*") or residue.find_atom("CA", "*")
        if atom is None:
            raise ValueError(f"{name}: residue {residue.seqid.num} has neither CB nor CA")
        plddt.append(round(residue[0].b_iso, 2))
        coordinates.append((round(atom.pos.x, 3), round(atom.pos.y, 3), round(atom.pos.z, 3)))
        letters.append(gemmi.find_tabulated_residue(residue.name).one_letter_code.upper())
    key = "_pdbx_database_status.recvd_initial_deposition_date"
    date = structure.info[key] if key in structure.info else None  # noqa: SIM401 - no .get
    return ModelFile(tuple(plddt), tuple(coordinates), "".join(letters), date)


def read_confidence(document: Any) -> list[float]:
    """Per-residue pLDDT from AlphaFold DB's confidence JSON (residues 1..n)."""
    if not isinstance(document, dict):
        raise ValueError("the confidence file is not a JSON object")
    numbers, scores = document.get("residueNumber"), document.get("confidenceScore")
    if not isinstance(numbers, list) or not isinstance(scores, list) or not scores:
        raise ValueError("the confidence file has no residueNumber/confidenceScore lists")
    if numbers != list(range(1, len(scores) + 1)):
        raise ValueError("the confidence file's residues are not 1..n")
    values = [float(s) for s in scores if isinstance(s, int | float) and not isinstance(s, bool)]
    if len(values) != len(scores) or not all(0 <= v <= 100 for v in values):
        raise ValueError("the confidence file has scores that are not pLDDT values")
    return values


def read_pae(document: Any) -> list[list[float]]:
    """The PAE matrix from AlphaFold DB's PAE JSON (a list with one object)."""
    item = document[0] if isinstance(document, list) and document else document
    matrix = item.get("predicted_aligned_error") if isinstance(item, dict) else None
    if not isinstance(matrix, list) or not matrix:
        raise ValueError("the PAE file has no predicted_aligned_error matrix")
    size = len(matrix)
    rows = []
    for row in matrix:
        if not isinstance(row, list) or len(row) != size:
            raise ValueError("the PAE matrix is not square")
        values = [float(v) for v in row]
        if not all(math.isfinite(v) and v >= 0 for v in values):
            raise ValueError("the PAE matrix has values that are not distances")
        rows.append(values)
    return rows
