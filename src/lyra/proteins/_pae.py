"""What the predicted aligned error (PAE) says about parts of a model.

PAE is AlphaFold's expected position error (Å) of residue *j* when the model is
aligned on residue *i*: row *i* of AlphaFold DB's matrix is the aligned residue,
column *j* the scored one. Between two sets of residues the brief gives the mean
of each direction (aligned on the first, aligned on the second) and of both.

The rule that confirms a structural unit (:func:`check_unit`): a unit found
from contacts is **one rigid unit** when the mean PAE among its residues is
below :data:`RIGID_PAE` Å and, for a unit of several segments, the mean PAE
between each pair of its segments (both directions) is below it too;
otherwise its segments are in contact but their arrangement is not confirmed
by PAE. The rule is lyra's; its threshold is the PAE cutoff of Croll's
``pae_to_domains`` (github.com/tristanic/pae_to_domains; also protti's
``predict_alphafold_domain`` and ISOLDE), whose graph links two residues only
where their PAE is below 5 Å before it is clustered into pseudo-rigid domains (one
residue pair at a time, where lyra tests means over blocks). Between units, below
:data:`PAE_PLACED` Å their relative placement is confident, above
:data:`PAE_UNPLACED` Å it is not determined by the model: the cutoffs are lyra's, the
reading AlphaFold's papers give (Jumper et al. 2021, Tunyasuvunakool et al. 2021,
Nature 596).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from lyra.proteins._confidence import figure, num, span

__all__ = [
    "PAE_PLACED",
    "PAE_UNPLACED",
    "RIGID_PAE",
    "Matrix",
    "between",
    "check_unit",
    "placement",
    "unit_verdict",
]

RIGID_PAE: Final = 5.0
PAE_PLACED: Final = 5.0
PAE_UNPLACED: Final = 15.0

Matrix = Sequence[Sequence[float]]
Ranges = Sequence[tuple[int, int]]


def _row_spans(
    pae: Matrix, rows: Ranges, cols: Ranges, skip_diagonal: bool
) -> Iterator[tuple[Sequence[float], float | None]]:
    """Each row's values over ``cols`` (one slice per column range; 1-based inclusive
    residue ranges), and its PAE to itself when ``skip_diagonal`` leaves it out."""
    for r0, r1 in rows:
        for i in range(r0 - 1, r1):
            row = pae[i]
            for c0, c1 in cols:
                yield row[c0 - 1 : c1], None
            if skip_diagonal and any(c0 <= i + 1 <= c1 for c0, c1 in cols):
                yield (), row[i]


def _block(pae: Matrix, rows: Ranges, cols: Ranges, *, skip_diagonal: bool = False) -> float:
    """Mean PAE over rows × columns (``skip_diagonal``: each residue's to itself left out)."""
    total, count = 0.0, 0
    for values, itself in _row_spans(pae, rows, cols, skip_diagonal):
        if itself is None:
            total, count = total + sum(values), count + len(values)
        else:
            total, count = total - itself, count - 1
    return total / count if count else 0.0


def _under(
    pae: Matrix, rows: Ranges, cols: Ranges, limit: float, *, skip_diagonal: bool = False
) -> float:
    """Share of residue pairs (rows × columns) whose PAE is below ``limit``
    (``skip_diagonal``: each residue's to itself left out, as :func:`_block` does)."""
    under = count = 0
    for values, itself in _row_spans(pae, rows, cols, skip_diagonal):
        if itself is None:
            under, count = under + sum(1 for v in values if v < limit), count + len(values)
        else:
            under, count = under - (itself < limit), count - 1
    return under / count if count else 0.0


def placement(mean: float) -> str:
    """What a mean PAE between two parts says about their relative placement."""
    if mean < PAE_PLACED:
        return "relative placement confident"
    if mean > PAE_UNPLACED:
        return "relative placement not determined"
    return "relative placement uncertain"


def between(pae: Matrix, first: Ranges, second: Ranges) -> dict[str, Any]:
    """The PAE between two sets of residues: each direction, both together, and the
    share of pairs below :data:`RIGID_PAE` Å."""
    forward, backward = _block(pae, first, second), _block(pae, second, first)
    both = (forward + backward) / 2
    under = (_under(pae, first, second, RIGID_PAE) + _under(pae, second, first, RIGID_PAE)) / 2
    return {
        "mean_pae": round(both, 2),
        "aligned_on_first": round(forward, 2),
        "aligned_on_second": round(backward, 2),
        "share_under_5": round(under, 3),
        "placement": placement(both),
    }


def check_unit(ranges: Ranges, pae: Matrix) -> dict[str, Any]:
    """The rule of the module docstring applied to one unit: ``rigid`` (bool), the
    mean PAE within it, within each of its segments (a unit of several: where their
    arrangement is not confirmed, each segment is judged on its own), and between each
    pair of its segments."""
    within = round(_block(pae, ranges, ranges, skip_diagonal=True), 2)
    segments = [
        {"where": span(*a), "within_pae": round(_block(pae, [a], [a], skip_diagonal=True), 2)}
        for a in ranges
    ]
    pairs = [
        {"first": span(*a), "second": span(*b), **between(pae, [a], [b])}
        for x, a in enumerate(ranges)
        for b in ranges[x + 1 :]
    ]
    rigid = within < RIGID_PAE and all(p["mean_pae"] < RIGID_PAE for p in pairs)
    return {
        "rigid": rigid,
        "within_pae": within,
        "within_share_under_5": round(
            _under(pae, ranges, ranges, RIGID_PAE, skip_diagonal=True), 3
        ),
        "segments": segments if len(ranges) > 1 else [],
        "segment_pairs": pairs,
    }


def unit_verdict(check: Mapping[str, Any] | None, segments: int = 1) -> str:
    """A unit's PAE check (:func:`check_unit`) in words; ``None``: no PAE."""
    if check is None:
        return (
            "not checked (no PAE)"
            if segments == 1
            else ("segments in contact; arrangement not checked (no PAE)")
        )
    within = f"mean PAE {figure(check['within_pae'])} Å within it"
    if check["rigid"]:
        return f"one rigid unit by PAE ({within}, below {num(RIGID_PAE)} Å)"
    pairs = check["segment_pairs"]
    if not pairs:
        return f"arrangement within it not confirmed by PAE ({within})"
    worst = max(pairs, key=lambda p: p["mean_pae"])
    return (
        f"segments in contact; arrangement not confirmed by PAE ({within}; "
        f"{worst['first']} and {worst['second']}: {figure(worst['mean_pae'])} Å)"
    )
