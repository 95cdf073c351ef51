"""Confidence where it lives: per-residue pLDDT cut into contiguous segments.

AlphaFold DB's bands (its own names): *very high* (pLDDT ≥ 90), *confident*
(70–90), *low* (50–70), *very low* (< 50). A residue is *ordered* at pLDDT ≥ 70.

The segments follow the chain: ordered stretches, and between them the low
and very low stretches, each with its residue range, length and mean pLDDT.
Three named thresholds shape them, so that one residue's dip neither splits a
domain nor becomes a "region":

- :data:`MERGE_GAP`: an ordered stretch interrupted by at most this many
  residues below 70 stays one segment (a loop of a domain, not a boundary); it
  is one less than :data:`MIN_SEGMENT_LENGTH`, so no gap is a segment of its
  own that the next rule forbids;
- :data:`MIN_SEGMENT_LENGTH`: a run shorter than this is no segment of its
  own: an ordered blip stays inside the low-confidence stretch around it, and
  within that stretch a short low or very low run joins its neighbour;
- :data:`FRAYING_MAX`: a low or very low segment at either end of the chain
  that is at most this long is *terminal fraying* (an end's flexibility, set
  apart from the table), not a region of interest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "BANDS",
    "BAND_NAMES",
    "FRAYING_MAX",
    "MERGE_GAP",
    "MIN_SEGMENT_LENGTH",
    "ORDERED_PLDDT",
    "Band",
    "Segment",
    "Segmentation",
    "band_of",
    "figure",
    "mean",
    "num",
    "segment",
    "span",
]

Band = Literal["very_high", "confident", "low", "very_low"]
Kind = Literal["ordered", "low", "very_low"]

BANDS: Final[tuple[Band, ...]] = ("very_low", "low", "confident", "very_high")
BAND_NAMES: Final[dict[str, str]] = {
    "very_high": "very high",
    "confident": "confident",
    "low": "low",
    "very_low": "very low",
}
"""AlphaFold DB's own words for its bands."""
ORDERED_PLDDT: Final = 70.0
MIN_SEGMENT_LENGTH: Final = 5
MERGE_GAP: Final = MIN_SEGMENT_LENGTH - 1
"""A gap too short to be a segment of its own joins its neighbours, and between two
ordered stretches they are ordered: a longer bridge would leave a segment the
rule says cannot be (a 4-residue gap stood alone as a "low" segment)."""
FRAYING_MAX: Final = 10


def band_of(plddt: float) -> Band:
    """The AlphaFold DB band of one pLDDT value."""
    if plddt < 50:
        return "very_low"
    if plddt < 70:
        return "low"
    return "confident" if plddt < 90 else "very_high"


def mean(values: Sequence[float]) -> float:
    """Mean to 2 decimals: the exact mean of the values as written, half up at a tie
    (values 56.35 and 56.36 average 56.36). A float mean lands on either side of a tie
    (56.354999…), so a mean that is one is recomputed in decimal; the rest, all but a
    handful, keep the float's rounding, which is exact away from a tie."""
    value = sum(values) / len(values)
    hundredths = value * 100
    if abs(hundredths - math.floor(hundredths) - 0.5) > 1e-6:
        return round(value, 2)
    exact = sum((Decimal(repr(v)) for v in values), Decimal(0)) / len(values)
    return float(exact.quantize(_HUNDREDTH, rounding=ROUND_HALF_UP))


_HUNDREDTH: Final = Decimal("0.01")


class Segment(BaseModel):
    """A contiguous stretch of residues (1-based, inclusive) and its pLDDT."""

    model_config = ConfigDict(frozen=True)

    start: int
    end: int
    kind: Kind
    mean_plddt: float

    @property
    def length(self) -> int:
        """Residues in the segment."""
        return self.end - self.start + 1

    @property
    def band(self) -> Band:
        """The band of the segment's mean pLDDT."""
        return band_of(self.mean_plddt)

    @property
    def label(self) -> str:
        """The band's name as AlphaFold DB writes it."""
        return BAND_NAMES[self.band]


class Segmentation(BaseModel):
    """The segments along the chain and the terminal fraying set apart."""

    model_config = ConfigDict(frozen=True)

    segments: list[Segment]
    fraying: list[Segment]

    @property
    def ordered(self) -> list[Segment]:
        """The ordered segments (pLDDT ≥ 70 apart from short gaps)."""
        return [s for s in self.segments if s.kind == "ordered"]


def _runs(flags: Sequence[bool]) -> list[tuple[int, int, bool]]:
    """Maximal runs ``(start, end, flag)``, 0-based inclusive."""
    runs: list[tuple[int, int, bool]] = []
    for index, flag in enumerate(flags):
        if runs and runs[-1][2] == flag:
            runs[-1] = (runs[-1][0], index, flag)
        else:
            runs.append((index, index, flag))
    return runs


def _ordered_spans(values: Sequence[float]) -> list[tuple[int, int]]:
    """Ordered stretches (0-based inclusive) after merging short gaps and dropping blips."""
    spans: list[list[int]] = []
    for start, end, ordered in _runs([v >= ORDERED_PLDDT for v in values]):
        if not ordered:
            continue
        if spans and start - spans[-1][1] - 1 <= MERGE_GAP:
            spans[-1][1] = end
        else:
            spans.append([start, end])
    return [(s, e) for s, e in spans if e - s + 1 >= MIN_SEGMENT_LENGTH]


def _disordered(values: Sequence[float], start: int, end: int) -> list[tuple[int, int, Kind]]:
    """A stretch below the ordered spans cut into low and very low runs (short runs absorbed)."""
    pieces: list[tuple[int, int, Kind]] = []
    for s, e, very in _runs([v < 50 for v in values[start : end + 1]]):
        kind: Kind = "very_low" if very else "low"
        short = e - s + 1 < MIN_SEGMENT_LENGTH
        if pieces and (short or pieces[-1][2] == kind):
            pieces[-1] = (pieces[-1][0], e + start, pieces[-1][2])
        else:
            pieces.append((s + start, e + start, kind))
    # A short first piece joins the one after it.
    if len(pieces) > 1 and pieces[0][1] - pieces[0][0] + 1 < MIN_SEGMENT_LENGTH:
        pieces[1] = (pieces[0][0], pieces[1][1], pieces[1][2])
        pieces.pop(0)
    merged: list[tuple[int, int, Kind]] = []
    for s, e, kind in pieces:
        if merged and merged[-1][2] == kind:
            merged[-1] = (merged[-1][0], e, kind)
        else:
            merged.append((s, e, kind))
    return merged


def segment(values: Sequence[float]) -> Segmentation:
    """The chain's segments from its per-residue pLDDT (see the module docstring)."""
    spans: list[tuple[int, int, Kind]] = []
    cursor = 0
    for start, end in _ordered_spans(values):
        if start > cursor:
            spans.extend(_disordered(values, cursor, start - 1))
        spans.append((start, end, "ordered"))
        cursor = end + 1
    if cursor < len(values):
        spans.extend(_disordered(values, cursor, len(values) - 1))
    built: list[Segment] = []
    for first, last, found in spans:
        value = mean(values[first : last + 1])
        kind = found
        if found != "ordered":  # a stretch below 70 is named by its own mean
            kind = "very_low" if value < 50 else "low"
            if built and built[-1].kind == kind:
                first = built.pop().start - 1
                value = mean(values[first : last + 1])
        built.append(Segment(start=first + 1, end=last + 1, kind=kind, mean_plddt=value))
    fraying = [
        seg
        for seg in built
        if seg.kind != "ordered"
        and seg.length <= FRAYING_MAX
        and (seg.start == 1 or seg.end == len(values))
    ]
    return Segmentation(segments=[s for s in built if s not in fraying], fraying=fraying)


def span(start: int, end: int) -> str:
    """Residues as a brief writes them: ``16`` for one, ``30–189`` for more."""
    return str(start) if start == end else f"{start}–{end}"


def num(value: float) -> str:
    """A threshold or setting as a brief writes it: ``5``, ``2``, ``18.5``."""
    return f"{round(value, 2):g}"


def figure(value: float) -> str:
    """A measured pLDDT or PAE as a brief writes it: always two decimals, as the model
    files give pLDDT (``47.00``, ``3.10``), so a column never mixes precisions."""
    return f"{value:.2f}"
