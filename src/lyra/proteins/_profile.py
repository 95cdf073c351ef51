"""A model's confidence profile: segments, structural units and PAE between them.

Computed where the bulky data are read (per-residue pLDDT, the model's
coordinates, the PAE matrix), so that only this compact JSON travels on:
through a child's state, a durable checkpoint, a model's tool answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lyra.proteins._confidence import Segment, segment
from lyra.proteins._units import pae_between, units

__all__ = ["model_profile", "segment_data"]


def segment_data(seg: Segment) -> dict[str, Any]:
    """One segment as JSON data."""
    return {
        "start": seg.start,
        "end": seg.end,
        "length": seg.length,
        "kind": seg.kind,
        "band": seg.label,
        "mean_plddt": seg.mean_plddt,
    }


def model_profile(
    plddt: Sequence[float],
    coordinates: Sequence[float] | None = None,
    pae: Sequence[Sequence[float]] | None = None,
) -> dict[str, Any]:
    """Segments always; units when coordinates are known (a flat x, y, z list);
    the PAE between units when the PAE matrix is known too."""
    cut = segment(plddt)
    found = None
    if coordinates is not None and len(coordinates) == 3 * len(plddt):
        triples = [
            (coordinates[i], coordinates[i + 1], coordinates[i + 2])
            for i in range(0, len(coordinates), 3)
        ]
        found = units(cut.ordered, plddt, triples)
    between = None
    if found is not None and pae is not None and len(pae) == len(plddt):
        between = [{**p.model_dump(), "placement": p.verdict} for p in pae_between(found, pae)]
    return {
        "segments": [segment_data(s) for s in cut.segments],
        "fraying": [segment_data(s) for s in cut.fraying],
        "units": [{**u.model_dump(), "where": u.where, "band": u.label} for u in found]
        if found is not None
        else None,
        "unit_pae": between,
    }
