"""The pictures: drawn into the run directory, linked from the brief, and read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from matplotlib import image

from lyra._extras import install_hint
from lyra.proteins import _figures as figures
from lyra.proteins import analyze_sync
from lyra.proteins._analysis import analyze_structure
from lyra.proteins._offline import bundled_pae
from lyra.proteins._pictures import BAND_COLOURS, draw
from lyra.proteins._validate import process_protein


def _hex(pixel: Any) -> str:
    red, green, blue = (round(float(c) * 255) for c in pixel[:3])
    return f"#{red:02X}{green:02X}{blue:02X}"


def _band(value: float) -> str:
    if value < 50:
        return "very_low"
    if value < 70:
        return "low"
    return "confident" if value < 90 else "very_high"


@pytest.fixture(scope="module")
def track(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[float]]:
    """APP's pLDDT track, drawn once, and its per-residue pLDDT."""
    summary = process_protein("P05067")
    plddt = summary["alphafold"]["plddt"]
    folder = tmp_path_factory.mktemp("pictures")
    [picture] = draw("P05067", plddt, analyze_structure(summary), None, folder)
    return picture, plddt


@pytest.mark.parametrize("band", ["very_high", "confident", "low", "very_low"])
def test_the_track_colours_each_residue_by_its_band(
    track: tuple[Any, list[float]], band: str
) -> None:
    """Read back the PNG: residues well inside a run of one band have that band's colour."""
    picture, plddt = track
    pixels = image.imread(str(picture.path))
    inside = [
        r
        for r in range(3, len(plddt) - 2)
        if all(_band(plddt[i - 1]) == band for i in range(r - 2, r + 3))
    ]
    assert inside
    for residue in inside[:: max(1, len(inside) // 8)]:
        column, row = picture.track[residue]
        assert _hex(pixels[row, column]) == BAND_COLOURS[band], residue


def test_the_heatmap_is_drawn_where_pae_exists(tmp_path: Path) -> None:
    """The PAE heatmap is drawn where a PAE matrix exists (Q5VSL9) and not otherwise."""
    summary = process_protein("Q5VSL9")
    pae = bundled_pae(summary["alphafold"]["pae_file"])
    drawn = draw("Q5VSL9", summary["alphafold"]["plddt"], analyze_structure(summary), pae, tmp_path)
    assert [p.path.name for p in drawn] == ["Q5VSL9-plddt.png", "Q5VSL9-pae.png"]
    heat = image.imread(str(drawn[1].path))
    assert heat.shape[2] in (3, 4)
    none = draw("P05067", process_protein("P05067")["alphafold"]["plddt"], {}, None, tmp_path)
    assert [p.path.name for p in none] == ["P05067-plddt.png"]


def test_the_brief_links_the_pictures_in_the_run_directory(tmp_path: Path) -> None:
    """A run with a run directory draws the pictures and links them from the brief."""
    output = analyze_sync(["Q5VSL9", "Q8I3H7"], run_dir=tmp_path, timeout=30)
    brief = (tmp_path / "briefs" / "Q5VSL9.md").read_text(encoding="utf-8")
    assert "## Pictures" in brief
    assert "- [pLDDT along the sequence](../figures/Q5VSL9-plddt.png)" in brief
    assert "- [PAE heatmap](../figures/Q5VSL9-pae.png)" in brief
    assert (tmp_path / "figures" / "Q5VSL9-pae.png").stat().st_size > 0
    assert output.completed_analyses[0].brief == brief
    no_data = (tmp_path / "briefs" / "Q8I3H7.md").read_text(encoding="utf-8")
    assert "## Pictures" not in no_data  # nothing per residue to draw


def test_without_matplotlib_the_brief_says_how_to_get_pictures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the plots extra no picture is drawn and the brief names the extra."""
    monkeypatch.setattr(figures, "plots_installed", lambda: False)
    analyze_sync(["P05067"], run_dir=tmp_path, timeout=30)
    brief = (tmp_path / "briefs" / "P05067.md").read_text(encoding="utf-8")
    assert "Not drawn: pictures need the plots extra (matplotlib is not installed): " in brief
    assert install_hint("plots") in brief
    assert not (tmp_path / "figures").exists()


def _reddish(pixel: Any) -> bool:
    red, green, blue = (float(c) for c in pixel[:3])
    return red > 0.6 and red > green + 0.25 and red > blue + 0.25


def test_the_track_has_alphafold_dbs_legend_and_names_its_model(
    track: tuple[Any, list[float]],
) -> None:
    """'Pictures have no colour legend and no model version': each band's legend patch
    has AlphaFold DB's colour, and the title names the accession, version and file."""
    picture, _ = track
    pixels = image.imread(str(picture.path))
    assert set(picture.legend) == set(BAND_COLOURS)
    for band, (column, row) in picture.legend.items():
        assert _hex(pixels[row, column]) == BAND_COLOURS[band], band
    assert picture.heading.startswith("P05067 · AF-P05067-F1 v6 · AF-P05067-F1-model_v6.pdb")


def test_the_legend_cuts_the_bands_where_the_brief_does(track: tuple[Any, list[float]]) -> None:
    """'Very high (pLDDT > 90)' and 'Confident (90 > pLDDT > 70)' leave a residue at
    exactly 90 in no band: each bound of the legend drawn is inclusive on the side the
    bands (and the brief's 'very high (pLDDT ≥ 90)') put it."""
    picture, _ = track
    assert set(picture.labels) == set(BAND_COLOURS)
    for bound in (50.0, 70.0, 90.0):
        at, below = picture.labels[_band(bound)], picture.labels[_band(bound - 0.01)]
        assert f"pLDDT ≥ {bound:g}" in at or f"{bound:g} ≤ pLDDT" in at, at
        assert f"pLDDT < {bound:g}" in below, below


def test_the_track_has_a_feature_row(track: tuple[Any, list[float]]) -> None:
    """UniProt's features are rows of the picture: the transmembrane helix 702–722 is
    drawn in its topology row, and the domains have theirs."""
    picture, _ = track
    pixels = image.imread(str(picture.path))
    assert {"segments", "units", "domains", "topology", "processing"} <= set(picture.rows)
    column = picture.track[712][0]
    assert _hex(pixels[picture.rows["topology"], column]) == "#111111"


def test_the_track_leaves_no_empty_band_of_width(tmp_path: Path) -> None:
    """'22 % of their width blank without feature rows': without features the track
    starts where its short row labels end."""
    summary = process_protein("Q5VSL9")
    [picture, *_] = draw("Q5VSL9", summary["alphafold"]["plddt"], {}, None, tmp_path)
    width = image.imread(str(picture.path)).shape[1]
    assert picture.track[1][0] / width < 0.12


def test_the_heatmap_outlines_each_unit_and_names_its_model(tmp_path: Path) -> None:
    """'The PAE heatmap shows no unit boundaries': each segment of each unit is outlined
    on the diagonal, and the title names the model and the PAE file."""
    summary = process_protein("Q5VSL9")
    pae = bundled_pae(summary["alphafold"]["pae_file"])
    structure = analyze_structure(summary)
    [heat] = draw("Q5VSL9", None, structure, pae, tmp_path)
    assert set(heat.boxes) == {
        "unit 1 66–335", "unit 1 422–535", "unit 1 541–784", "unit 2 797–833"
    }  # fmt: skip
    pixels = image.imread(str(heat.path))
    for name, (column, row) in heat.boxes.items():
        near = [pixels[row, c] for c in range(column - 1, column + 2)]
        assert any(_reddish(p) for p in near), name
    assert heat.heading.startswith(
        "Q5VSL9 · AF-Q5VSL9-F1 v4 · AF-Q5VSL9-F1-predicted_aligned_error_v4.json"
    )
