"""Pictures a structural biologist would rather look at than read (matplotlib).

Per protein, in the run directory's ``figures/``:

- ``<ID>-plddt.png``: the pLDDT track along the sequence, each residue coloured
  by its AlphaFold DB band (AlphaFold DB's own colours), and beneath it the
  segments, the structural units and the UniProt features;
- ``<ID>-pae.png``: the PAE heatmap, where a PAE matrix exists.

matplotlib is the ``plots`` extra; without it no picture is drawn and the
brief says how to get them. Figures are drawn with matplotlib's object API
(no pyplot state), so drawing is safe beside other threads.
"""

from __future__ import annotations

import importlib.util
import io
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from lyra.proteins._confidence import band_of
from lyra.supervisor import file_stem

__all__ = ["BAND_COLOURS", "PLOTS_HINT", "Picture", "draw", "plots_installed"]

BAND_COLOURS: Final = {
    "very_high": "#0053D6",
    "confident": "#65CBF3",
    "low": "#FFDB13",
    "very_low": "#FF7D45",
}
"""AlphaFold DB's colours for its bands."""
PLOTS_HINT: Final = (
    "pictures need the plots extra (matplotlib is not installed): "
    "pip install 'lyra-supervisor[plots]'"
)
_DPI: Final = 100
_MAX_FEATURE_ROWS: Final = 12
_DRAWING = threading.Lock()  # matplotlib is not thread-safe: one picture at a time


@dataclass(frozen=True)
class Picture:
    """A picture written to the run directory, and where residues were drawn on it."""

    path: Path
    title: str
    track: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Residue → pixel (column, row) of its bar in the pLDDT track (track pictures only)."""


def plots_installed() -> bool:
    """True when matplotlib (the plots extra) can be imported."""
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        return False


def _save(figure: Any, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".png.part")
    partial.write_bytes(buffer.getvalue())
    partial.replace(path)


def _rows(structure: Mapping[str, Any]) -> list[tuple[str, list[tuple[int, int, str, str]]]]:
    """The rows beneath the track: (label, [(start, end, colour, text)])."""
    rows = [
        (
            "segments",
            [
                (s["start"], s["end"], BAND_COLOURS[band_of(s["mean_plddt"])], "")
                for s in structure.get("segments") or []
            ],
        )
    ]
    if structure.get("units"):
        rows.append(
            (
                "units",
                [
                    (start, end, "#7F7F7F", f"U{u['number']}")
                    for u in structure["units"]
                    for start, end in u["ranges"]
                ],
            )
        )
    for feature in (structure.get("features") or [])[:_MAX_FEATURE_ROWS]:
        label = feature["type"] + (f": {feature['description']}" if feature["description"] else "")
        rows.append((label[:40], [(feature["start"], feature["end"], "#4D4D4D", "")]))
    return rows


def _track(
    protein_id: str, plddt: Sequence[float], structure: Mapping[str, Any], path: Path
) -> Picture:
    from matplotlib.figure import Figure

    rows = _rows(structure)
    height = 3.0 + 0.28 * len(rows)
    figure = Figure(figsize=(11, height), dpi=_DPI)
    top = figure.add_axes((0.22, 1 - 2.0 / height, 0.74, 1.6 / height))
    residues = range(1, len(plddt) + 1)
    colours = [BAND_COLOURS[band_of(v)] for v in plddt]
    # One vertical line per residue, as wide as a residue (a LineCollection: fast).
    width = 0.74 * 11 * 72 / len(plddt)  # points per residue across the axes
    top.vlines(residues, 0, plddt, colors=colours, linewidth=width, antialiased=False)
    top.set_xlim(0.5, len(plddt) + 0.5)
    top.set_ylim(0, 100)
    top.set_ylabel("pLDDT")
    top.set_title(f"{protein_id}: pLDDT by residue (AlphaFold DB bands)")
    for level in (50, 70, 90):
        top.axhline(level, color="#BBBBBB", linewidth=0.5, zorder=0)
    bottom = figure.add_axes((0.22, 0.7 / height, 0.74, 0.28 * len(rows) / height), sharex=top)
    for index, (_, spans) in enumerate(rows):
        y = len(rows) - 1 - index
        for start, end, colour, text in spans:
            bottom.broken_barh([(start - 0.5, end - start + 1)], (y + 0.15, 0.7), color=colour)
            if text:
                bottom.text((start + end) / 2, y + 0.5, text, ha="center", va="center", fontsize=7)
    bottom.set_ylim(0, len(rows))
    bottom.set_yticks(
        [len(rows) - 0.5 - i for i in range(len(rows))], [r[0] for r in rows], fontsize=7
    )
    bottom.set_xlabel("residue")
    # Where each residue's bar was drawn (its middle at half height), in image pixels.
    total = round(height * _DPI)
    track = {}
    for residue in residues:
        x, y = top.transData.transform((residue, plddt[residue - 1] / 2))
        track[residue] = (round(float(x)), total - round(float(y)))
    _save(figure, path)
    return Picture(path=path, title="pLDDT along the sequence", track=track)


def _heatmap(protein_id: str, pae: Sequence[Sequence[float]], path: Path) -> Picture:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 5), dpi=_DPI)
    axes = figure.add_subplot()
    image = axes.imshow(
        pae,
        cmap="Greens_r",
        vmin=0,
        origin="upper",
        interpolation="nearest",
        extent=(0.5, len(pae) + 0.5, len(pae) + 0.5, 0.5),
    )
    axes.set_title(f"{protein_id}: predicted aligned error (Å)")
    axes.set_xlabel("scored residue")
    axes.set_ylabel("aligned residue")
    figure.colorbar(image, ax=axes, label="expected position error (Å)")
    _save(figure, path)
    return Picture(path=path, title="PAE heatmap")


def draw(
    protein_id: str,
    plddt: Sequence[float] | None,
    structure: Mapping[str, Any],
    pae: Sequence[Sequence[float]] | None,
    folder: Path,
) -> list[Picture]:
    """Draw the pictures that the data allow into ``folder`` (matplotlib must be installed)."""
    stem = file_stem(protein_id)
    pictures = []
    with _DRAWING:
        if plddt:
            pictures.append(_track(protein_id, plddt, structure, folder / f"{stem}-plddt.png"))
        if pae:
            pictures.append(_heatmap(protein_id, pae, folder / f"{stem}-pae.png"))
    return pictures
