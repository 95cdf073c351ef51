"""A model's confidence profile: segments, structural units and what PAE says of them.

Computed where the bulky data are read (per-residue pLDDT, the model's
coordinates, the PAE matrix), so that only this compact JSON travels on:
through a child's state, a durable checkpoint, a model's tool answer. With a
PAE matrix every unit is checked (:func:`lyra.proteins._pae.check_unit`), and
the PAE is given between units, between each unit and every stretch outside
the units (a low-confidence segment, a short confident helix), and between
UniProt's domains when the features are known.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lyra.proteins._confidence import Segment, segment, span
from lyra.proteins._features import band_counts
from lyra.proteins._pae import Matrix, between, check_unit
from lyra.proteins._units import MIN_UNIT_LENGTH, Unit, units

__all__ = ["DOMAIN_TYPES", "model_profile", "segment_data"]

DOMAIN_TYPES = frozenset({"Domain", "Repeat", "Zinc finger", "DNA binding"})
"""UniProt feature types whose PAE to each other the profile gives."""


def segment_data(seg: Segment, plddt: Sequence[float]) -> dict[str, Any]:
    """One segment as JSON data: its band is its mean's, ``by_band`` its residues'."""
    return {
        "start": seg.start,
        "end": seg.end,
        "length": seg.length,
        "kind": seg.kind,
        "band": seg.label,
        "mean_plddt": seg.mean_plddt,
        "by_band": band_counts(plddt[seg.start - 1 : seg.end]),
    }


def _unit_data(unit: Unit, pae: Matrix | None, plddt: Sequence[float]) -> dict[str, Any]:
    return {
        **unit.model_dump(),
        "where": unit.where,
        "band": unit.label,
        "by_band": band_counts([plddt[r - 1] for s, e in unit.ranges for r in range(s, e + 1)]),
        "pae": check_unit(unit.ranges, pae) if pae is not None else None,
    }


def _outside(segments: Iterable[Segment], found: Sequence[Unit]) -> list[Segment]:
    """Stretches in no unit that a brief interprets: low or very low segments of a
    unit's length or more, and ordered stretches too short to be a unit."""
    inside = {r for u in found for s, e in u.ranges for r in range(s, e + 1)}
    return [
        s
        for s in segments
        if s.start not in inside and (s.kind == "ordered" or s.length >= MIN_UNIT_LENGTH)
    ]


def _domain_pae(features: Iterable[Mapping[str, Any]], pae: Matrix) -> list[dict[str, Any]]:
    """The PAE between every pair of UniProt domains within the model."""
    domains = [f for f in features if f["type"] in DOMAIN_TYPES and int(f["end"]) <= len(pae)]
    return [
        {
            "first": f"{a['description'] or a['type']} {span(a['start'], a['end'])}",
            "second": f"{b['description'] or b['type']} {span(b['start'], b['end'])}",
            **between(pae, [(a["start"], a["end"])], [(b["start"], b["end"])]),
        }
        for x, a in enumerate(domains)
        for b in domains[x + 1 :]
    ]


def model_profile(
    plddt: Sequence[float],
    coordinates: Sequence[float] | None = None,
    pae: Matrix | None = None,
    features: Iterable[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Segments always; units when coordinates are known (a flat x, y, z list);
    what PAE says of them (and of UniProt's domains) when the matrix is known too."""
    cut = segment(plddt)
    pae = pae if pae is not None and len(pae) == len(plddt) else None
    found = None
    if coordinates is not None and len(coordinates) == 3 * len(plddt):
        triples = [
            (coordinates[i], coordinates[i + 1], coordinates[i + 2])
            for i in range(0, len(coordinates), 3)
        ]
        found = units(cut.ordered, plddt, triples)
    unit_pae = segment_pae = None
    if found is not None and pae is not None:
        unit_pae = [
            {"first": a.number, "second": b.number, **between(pae, a.ranges, b.ranges)}
            for x, a in enumerate(found)
            for b in found[x + 1 :]
        ]
        segment_pae = [
            {
                "start": s.start,
                "end": s.end,
                "unit": u.number,
                **between(pae, [(s.start, s.end)], u.ranges),
            }
            for s in _outside(cut.segments, found)
            for u in found
        ]
    return {
        "segments": [segment_data(s, plddt) for s in cut.segments],
        "fraying": [segment_data(s, plddt) for s in cut.fraying],
        "units": [_unit_data(u, pae, plddt) for u in found] if found is not None else None,
        "unit_pae": unit_pae,
        "segment_pae": segment_pae,
        "domain_pae": _domain_pae(features, pae) if pae is not None else None,
        # (AlphaFold DB's v4 files round each value to a whole ångström)
        "pae_whole_angstroms": all(v == int(v) for row in pae for v in row) if pae else None,
    }
