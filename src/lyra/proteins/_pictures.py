"""Pictures a structural biologist would rather look at than read (matplotlib).

Per protein, in the run directory's ``figures/``:

- ``<ID>-plddt.png``: the pLDDT track along the sequence, each residue coloured
  by its AlphaFold DB band (AlphaFold DB's own colours and legend), and beneath
  it the segments, the structural units and the UniProt features by kind;
- ``<ID>-pae.png``: the PAE heatmap as AlphaFold DB draws it (greens, scored
  residue across, aligned residue down), with each unit's segments and each
  UniProt domain outlined on the diagonal, where a PAE matrix exists.

Each title names the protein and its model: entry, version and file. The row
labels take the width they need, no more.

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

from lyra.proteins._confidence import band_of, span
from lyra.proteins._profile import DOMAIN_TYPES
from lyra.supervisor import file_stem, write_atomic

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
    "pip install 'matplotlib<4,>=3.11' (or pip install -e '.[plots]' in a lyra checkout)"
)
BOX_COLOUR: Final = "#D62728"
"""The outline of units and domains on the PAE heatmap (clear of its greens)."""
_BAND_LABELS: Final = {
    "very_high": "Very high (pLDDT ≥ 90)",
    "confident": "Confident (70 ≤ pLDDT < 90)",
    "low": "Low (50 ≤ pLDDT < 70)",
    "very_low": "Very low (pLDDT < 50)",
}
"""AlphaFold DB's band names, with the bounds the bands are cut at (as in AlphaFold's
own ``confidence.py`` and the brief: 90.00 is very high). AlphaFold DB's page writes
them with strict signs (``Very high (pLDDT > 90)``), which leave 90 and 70 in no band."""
_FEATURE_ROWS: Final = (
    ("domains", frozenset({"Domain", "Repeat", "Zinc finger", "DNA binding"})),
    ("topology", frozenset({"Topological domain", "Transmembrane", "Intramembrane"})),
    ("processing", frozenset({"Signal", "Transit peptide", "Propeptide"})),
    ("regions", frozenset({"Region", "Coiled coil"})),
    ("motifs", frozenset({"Motif"})),
)
_GREY: Final = "#5A5A5A"
_FEATURE_COLOURS: Final = {
    "Extracellular": "#6B4C9A",
    "Lumenal": "#6B4C9A",
    "Cytoplasmic": "#9467BD",
    "Transmembrane": "#111111",
}
"""Topology told apart (outside, membrane, inside); every other feature grey."""
_DPI: Final = 100
_WIDTH: Final = 11.0
_LABEL_INCH: Final = 0.055
"""Width of one character of a row label (7 pt) in inches."""
_MAX_FEATURE_ROWS: Final = 12
Bar = tuple[int, int, str, str]
_DRAWING = threading.Lock()  # matplotlib is not thread-safe: one picture at a time


@dataclass(frozen=True)
class Picture:
    """A picture written to the run directory, and where things were drawn on it."""

    path: Path
    title: str
    heading: str = ""
    """The title drawn on the picture: the protein and its model (entry, version, file)."""
    track: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Residue → pixel (column, row) of its bar in the pLDDT track (track pictures only)."""
    rows: dict[str, int] = field(default_factory=dict)
    """Row label beneath the track (``segments``, ``topology``…) → its pixel row."""
    legend: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Band → pixel (column, row) inside its patch in the colour legend (track pictures)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Band → the text drawn beside its patch in the legend (track pictures)."""
    boxes: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Box label (``unit 1 66–335``) → pixel (column, row) on its outline (PAE pictures)."""


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
    try:
        write_atomic(path, buffer.getvalue(), sync=False)  # (nothing half-written is left)
    except OSError as exc:  # named by the picture it is, not by the temporary file
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def _heading(protein_id: str, structure: Mapping[str, Any], what: str, file: str | None) -> str:
    """``P05067 · AF-P05067-F1 v6 · AF-P05067-F1-model_v6.pdb: pLDDT by residue``."""
    version = structure.get("model_version")
    model = " ".join(
        x for x in (structure.get("entry_id"), f"v{version}" if version else None) if x
    )
    return " · ".join(x for x in (protein_id, model, file) if x) + f": {what}"


def _lanes(spans: Sequence[tuple[int, int, str]]) -> list[list[tuple[int, int, str]]]:
    """Spans packed into as few rows as keep them from overlapping (first fit)."""
    lanes: list[list[tuple[int, int, str]]] = []
    for item in sorted(spans):
        lane = next((row for row in lanes if row[-1][1] < item[0]), None)
        if lane is None:
            lanes.append([item])
        else:
            lane.append(item)
    return lanes


def _feature_rows(structure: Mapping[str, Any]) -> list[tuple[str, list[Bar]]]:
    """UniProt's features as rows by kind (domains, topology, processing, regions,
    motifs), overlapping ones on rows of their own."""
    rows: list[tuple[str, list[Bar]]] = []
    for kind, types in _FEATURE_ROWS:
        spans = [
            (f["start"], f["end"], f["description"] if f["type"] != "Transmembrane" else f["type"])
            for f in structure.get("features") or []
            if f["type"] in types
        ]
        for n, lane in enumerate(_lanes(spans)):
            bars = [(s, e, _FEATURE_COLOURS.get(text, _GREY), text) for s, e, text in lane]
            rows.append((kind if n == 0 else "", bars))
    return rows[:_MAX_FEATURE_ROWS]


def _rows(structure: Mapping[str, Any]) -> list[tuple[str, list[Bar]]]:
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
    return rows + _feature_rows(structure)


def _pixel(axes: Any, height: float, x: float, y: float) -> tuple[int, int]:
    """Data point (x, y) of ``axes`` as the image's pixel (column, row)."""
    column, row = axes.transData.transform((x, y))
    return round(float(column)), round(height * _DPI) - round(float(row))


def _track(
    protein_id: str, plddt: Sequence[float], structure: Mapping[str, Any], path: Path
) -> Picture:
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    rows = _rows(structure)
    height = 3.4 + 0.28 * len(rows)
    label = max((len(text) for text, _ in rows), default=0)
    left = (0.5 + label * _LABEL_INCH) / _WIDTH  # the labels' width, no more
    width = 0.97 - left
    figure = Figure(figsize=(_WIDTH, height), dpi=_DPI)
    top = figure.add_axes((left, 1 - 2.3 / height, width, 1.6 / height))
    residues = range(1, len(plddt) + 1)
    colours = [BAND_COLOURS[band_of(v)] for v in plddt]
    # One vertical line per residue, as wide as a residue (a LineCollection: fast).
    bar = width * _WIDTH * 72 / len(plddt)  # points per residue across the axes
    top.vlines(residues, 0, plddt, colors=colours, linewidth=bar, antialiased=False)
    top.set_xlim(0.5, len(plddt) + 0.5)
    top.set_ylim(0, 100)
    top.set_ylabel("pLDDT")
    heading = _heading(protein_id, structure, "pLDDT by residue", structure.get("model_file"))
    top.set_title(heading, fontsize=9, pad=22)
    for level in (50, 70, 90):
        top.axhline(level, color="#BBBBBB", linewidth=0.5, zorder=0)
    patches = [Patch(color=BAND_COLOURS[b], label=_BAND_LABELS[b]) for b in _BAND_LABELS]
    legend = top.legend(
        handles=patches,
        loc="lower left",
        bbox_to_anchor=(0, 1.0),
        ncol=4,
        fontsize=7,
        frameon=False,
        handlelength=1.5,
    )
    bottom = figure.add_axes((left, 0.7 / height, width, 0.28 * len(rows) / height), sharex=top)
    for index, (_, spans) in enumerate(rows):
        y = len(rows) - 1 - index
        for start, end, colour, text in spans:
            bottom.broken_barh([(start - 0.5, end - start + 1)], (y + 0.15, 0.7), color=colour)
            if text and (end - start + 1) * bar >= len(text) * 4.5:  # only where it fits
                bottom.text(
                    (start + end) / 2, y + 0.5, text, ha="center", va="center", fontsize=6,
                    color="white", clip_on=True,
                )  # fmt: skip
    bottom.set_ylim(0, len(rows))
    bottom.set_yticks(
        [len(rows) - 0.5 - i for i in range(len(rows))], [r[0] for r in rows], fontsize=7
    )
    bottom.tick_params(axis="y", length=0)
    bottom.set_xlabel("residue")
    # Where each residue's bar and each legend patch were drawn, in image pixels.
    track = {r: _pixel(top, height, r, plddt[r - 1] / 2) for r in residues}
    lanes = {
        name: _pixel(bottom, height, 1, len(rows) - 0.5 - i)[1]
        for i, (name, _) in enumerate(rows)
        if name
    }
    _save(figure, path)
    spots = {}
    for band, handle in zip(_BAND_LABELS, legend.legend_handles, strict=True):
        if handle is not None:
            box = handle.get_window_extent()
            middle = (float(box.x0 + box.x1) / 2, float(box.y0 + box.y1) / 2)
            spots[band] = (round(middle[0]), round(height * _DPI - middle[1]))
    return Picture(
        path=path,
        title="pLDDT along the sequence",
        heading=heading,
        track=track,
        rows=lanes,
        legend=spots,
        labels={
            band: text.get_text()
            for band, text in zip(_BAND_LABELS, legend.get_texts(), strict=True)
        },
    )


def _heatmap(
    protein_id: str, pae: Sequence[Sequence[float]], structure: Mapping[str, Any], path: Path
) -> Picture:
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    figure = Figure(figsize=(6.4, 5.6), dpi=_DPI)
    axes = figure.add_subplot()
    image = axes.imshow(
        pae,
        cmap="Greens_r",
        vmin=0,
        origin="upper",
        interpolation="nearest",
        extent=(0.5, len(pae) + 0.5, len(pae) + 0.5, 0.5),
    )
    heading = _heading(protein_id, structure, "predicted aligned error", structure.get("pae_file"))
    axes.set_title(heading.replace(" · ", "\n", 2).replace("\n", " · ", 1), fontsize=8)
    axes.set_xlabel("Scored residue")
    axes.set_ylabel("Aligned residue")
    figure.colorbar(image, ax=axes, label="Expected position error (Å)")
    boxes: dict[str, tuple[float, float]] = {}
    for name, start, end, style in _boxes(structure):
        axes.add_patch(
            Rectangle(
                (start - 0.5, start - 0.5), end - start + 1, end - start + 1,
                fill=False, edgecolor=BOX_COLOUR, linewidth=1.2, linestyle=style,
            )
        )  # fmt: skip
        boxes[name] = (start - 0.5, (start + end) / 2)  # a point on its left edge
    height = figure.get_figheight()
    _save(figure, path)
    return Picture(
        path=path,
        title="PAE heatmap",
        heading=heading,
        boxes={name: _pixel(axes, height, x, y) for name, (x, y) in boxes.items()},
    )


def _boxes(structure: Mapping[str, Any]) -> list[tuple[str, int, int, str]]:
    """The squares drawn on the PAE diagonal: each segment of each unit (solid) and each
    UniProt domain (dashed)."""
    found = [
        (f"unit {u['number']} {span(s, e)}", s, e, "solid")
        for u in structure.get("units") or []
        for s, e in u["ranges"]
    ]
    found += [
        (
            f"{f['description'] or f['type']} {span(f['start'], f['end'])}",
            f["start"],
            f["end"],
            "dashed",
        )
        for f in structure.get("features") or []
        if f["type"] in DOMAIN_TYPES
    ]
    return found


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
            pictures.append(_heatmap(protein_id, pae, structure, folder / f"{stem}-pae.png"))
    return pictures
