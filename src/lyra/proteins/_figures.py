"""The pictures of a finished protein, drawn into the run directory and linked
from its brief (or, without matplotlib, the brief says how to get them)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lyra import events
from lyra.delegation import exception_text
from lyra.proteins._output import CompletedAnalysis, PartialAnalysis, ProteinEntry
from lyra.proteins._pictures import PLOTS_HINT, draw, plots_installed
from lyra.proteins._pipeline import ProteinState
from lyra.proteins._sources import ProteinSource
from lyra.proteins._structure import per_residue
from lyra.supervisor import RunDir

__all__ = ["with_pictures"]


def _pae(source: ProteinSource, summary: Mapping[str, Any]) -> Any:
    find = getattr(source, "pae_matrix", None)
    return find(summary) if find is not None else None


def with_pictures(
    entry: ProteinEntry, state: Mapping[str, Any], source: ProteinSource, run_dir: RunDir
) -> ProteinEntry:
    """``entry`` with its brief linking the pictures drawn for it into ``run_dir``'s
    figures (or saying why none were; one that cannot be written is among the run's
    unwritten files)."""
    if not isinstance(entry, CompletedAnalysis | PartialAnalysis):
        return entry
    progress = ProteinState.of(state, entry.protein_id)
    summary = progress.reusable("fetch_protein") or {}
    structure = progress.reusable("analyze_structure")
    plddt = per_residue((summary.get("alphafold") or {}).get("plddt"))
    if not isinstance(structure, Mapping) or plddt is None:
        return entry
    if not plots_installed():
        note = f"Not drawn: {PLOTS_HINT}."
    else:
        folder = run_dir.path / "figures"
        try:
            drawn = draw(entry.protein_id, plddt, structure, _pae(source, summary), folder)
        except Exception as exc:  # noqa: BLE001 - a picture never costs the protein its brief
            if isinstance(exc, OSError) and exc.filename and Path(exc.filename).parent == folder:
                run_dir.failed(Path(exc.filename), exc)  # a picture the disk refused
            events.warning(
                events.PICTURES_FAILED, subject=entry.protein_id, error=exception_text(exc)
            )
            note = f"Not drawn: {exception_text(exc)}."
        else:
            note = "\n".join(f"- [{p.title}](../figures/{p.path.name})" for p in drawn)
    brief = f"{entry.brief.rstrip()}\n\n## Pictures\n\n{note}\n"
    return entry.model_copy(update={"brief": brief})
