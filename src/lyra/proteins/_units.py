"""Structural units: the model's ordered segments grouped by their contacts.

Two ordered segments belong to one unit when the model packs them together:
at least :data:`MIN_CONTACTS` residue pairs whose CB atoms (CA for glycine)
lie within :data:`CONTACT_DISTANCE` Å, found with gemmi's ``ContactSearch``.
Residues fewer than :data:`MIN_SEPARATION` apart in the sequence never count
(neighbours along the chain are always close). Ordered segments shorter than
:data:`MIN_UNIT_LENGTH` form no unit. Contacts say the model packs segments
together, not that it is confident of how: where a PAE file exists,
:mod:`lyra.proteins._pae` checks each unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pydantic import BaseModel, ConfigDict

from lyra.proteins._confidence import BAND_NAMES, Segment, band_of, mean, span

__all__ = [
    "CONTACT_DISTANCE",
    "MIN_CONTACTS",
    "MIN_SEPARATION",
    "MIN_UNIT_LENGTH",
    "Unit",
    "contacts",
    "units",
]

CONTACT_DISTANCE: Final = 8.0
MIN_CONTACTS: Final = 10
MIN_SEPARATION: Final = 3
MIN_UNIT_LENGTH: Final = 20

Coordinates = Sequence[tuple[float, float, float]]


class Unit(BaseModel):
    """Ordered segments the model packs together: a domain-like unit."""

    model_config = ConfigDict(frozen=True)

    number: int
    ranges: list[tuple[int, int]]
    residues: int
    mean_plddt: float
    joins: list[tuple[str, str, int]] = []
    """Each pair of its segments the model packs together, with the residue pairs in
    contact between them (``("1392–1419", "1649–1859", 15)``): how strong the
    evidence for the grouping is."""

    @property
    def label(self) -> str:
        """The band of the unit's mean pLDDT, in AlphaFold DB's words."""
        return BAND_NAMES[band_of(self.mean_plddt)]

    @property
    def where(self) -> str:
        """Its residue ranges, ``30–189, 284–343``."""
        return ", ".join(span(s, e) for s, e in self.ranges)


def contacts(coordinates: Coordinates) -> set[tuple[int, int]]:
    """Residue pairs (1-based, i < j) in contact in the model (see the module docstring)."""
    import gemmi  # here: a run without per-residue data never pays for it

    structure = gemmi.Structure()
    model = gemmi.Model(1)
    chain = gemmi.Chain("A")
    for number, (x, y, z) in enumerate(coordinates, start=1):
        residue = gemmi.Residue()
        residue.name = "UNK"
        residue.seqid = gemmi.SeqId(number, " ")
        atom = gemmi.Atom()
        atom.name = "CB"
        atom.element = gemmi.Element("C")
        atom.pos = gemmi.Position(x, y, z)
        residue.add_atom(atom)
        chain.add_residue(residue)
    model.add_chain(chain)
    structure.add_model(model)
    search = gemmi.NeighborSearch(structure[0], structure.cell, 5).populate()
    found = gemmi.ContactSearch(CONTACT_DISTANCE).find_contacts(search)
    pairs = set()
    for hit in found:
        i, j = hit.partner1.residue.seqid.num, hit.partner2.residue.seqid.num
        if i is None or j is None:
            continue
        if abs(i - j) >= MIN_SEPARATION:
            pairs.add((min(i, j), max(i, j)))
    return pairs


def units(
    ordered: Sequence[Segment], plddt: Sequence[float], coordinates: Coordinates
) -> list[Unit]:
    """The ordered segments grouped into units by their contacts in the model."""
    big = [s for s in ordered if s.length >= MIN_UNIT_LENGTH]
    owner = {r: k for k, s in enumerate(big) for r in range(s.start, s.end + 1)}
    counts: dict[tuple[int, int], int] = {}
    for i, j in contacts(coordinates):
        a, b = owner.get(i), owner.get(j)
        if a is not None and b is not None and a != b:
            key = (min(a, b), max(a, b))
            counts[key] = counts.get(key, 0) + 1
    group = list(range(len(big)))

    def root(k: int) -> int:
        while group[k] != k:
            k = group[k]
        return k

    for (a, b), n in sorted(counts.items()):
        if n >= MIN_CONTACTS:
            group[max(root(a), root(b))] = min(root(a), root(b))
    members: dict[int, list[int]] = {}
    for k in range(len(big)):
        members.setdefault(root(k), []).append(k)
    found = []
    for number, keys in enumerate(members.values(), start=1):
        segs = [big[k] for k in keys]
        values = [plddt[r - 1] for s in segs for r in range(s.start, s.end + 1)]
        joins = [
            (span(big[a].start, big[a].end), span(big[b].start, big[b].end), n)
            for (a, b), n in sorted(counts.items())
            if n >= MIN_CONTACTS and a in keys and b in keys
        ]
        found.append(
            Unit(
                number=number,
                ranges=[(s.start, s.end) for s in segs],
                residues=len(values),
                mean_plddt=mean(values),
                joins=joins,
            )
        )
    return found
