"""Issue 21, point by point: each "Why" a structural biologist raised, as a test.

Each test failed on the code before the issue and passes now; the docstrings
quote the complaint they answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fakes.replay_server import ReplayServer
from lyra.proteins import LiveSource, OfflineSource, analyze_sync
from lyra.proteins._analysis import analyze_structure, critique, reason, synthesize
from lyra.proteins._validate import process_protein
from lyra.recovery import record_waits
from raw_proteins import by_band

APP = "AF-P05067-F1-model_v6.pdb"

REPO = Path(__file__).resolve().parents[1]
BUNDLED = OfflineSource().ids()


@pytest.fixture(autouse=True)
def no_real_sleeps() -> Iterator[list[float]]:
    """Backoff waits are recorded, not slept."""
    with record_waits() as waits:
        yield waits


@pytest.fixture(scope="module")
def everything() -> Any:
    """One run over every bundled protein (the output and its text)."""
    return analyze_sync(BUNDLED, timeout=30)


def _brief(acc: str, source: Any = None) -> str:
    summary = process_protein(acc, source)
    structure = analyze_structure(summary)
    reasoning = reason(summary, structure)
    return synthesize(acc, summary, structure, reasoning, critique(summary, structure, reasoning))


def test_the_global_mean_is_not_the_proteins_reliability(everything: Any) -> None:
    """'APP is called "overall reliability is low" … for p53 it says "the fold is likely
    right overall"': no reliability verdict from the mean; APP leads with its domains."""
    text = everything.text()
    assert "reliability" not in text.lower()
    assert "likely right overall" not in text
    assert (
        "P05067 (Amyloid-beta precursor protein, AF-P05067-F1 v6), 3 structural unit(s), "
        "the largest residues 376–569 (mean pLDDT 89.47, confident; not checked (no PAE))"
    ) in text


def test_briefs_list_confident_segments_and_keep_low_apart_from_very_low() -> None:
    """'The brief lists only low-confidence regions … lumps low with very low and lists
    5-residue end fraying': confident segments are rows, low and very low are apart,
    fraying is set apart."""
    brief = _brief("P05067")
    assert f"| 376–569 | 194 | 89.47 | confident | {by_band(APP, (376, 569))} | unit 3 |" in brief
    assert (
        f"| 344–348 | 5 | 55.19 | low | {by_band(APP, (344, 348))} | outside the units |" in brief
    )
    assert (
        f"| 349–375 | 27 | 41.36 | very low | {by_band(APP, (349, 375))} | outside the units |"
    ) in brief
    motsc = _brief("A0A0C5B5G6")
    assert "Terminal fraying (set apart): 1–5 (mean pLDDT 66.17)" in motsc
    assert "| 1–5 |" not in motsc


@pytest.mark.parametrize("acc", ["P69905", "P04637"])
def test_no_false_model_version_warning(acc: str) -> None:
    """'A false warning: the mean pLDDT and the band fractions may come from different
    AlphaFold model versions … where both come from one record'."""
    assert "different AlphaFold model versions" not in _brief(acc)


def test_a_second_models_mean_is_named_as_another_model() -> None:
    """P04637's whole-model figures are one v6 set (the header says v6, as the band
    fractions are); the v4 model's mean the data also give is named as another model,
    and as what it is: a project's own figure from the v4 model file, not AlphaFold DB's
    (the data's provenance notes say so; the brief did not)."""
    brief = _brief("P04637")
    assert "Source: AlphaFold DB model AF-P04637-F1 v6, created 2025-08-01;" in brief
    assert (
        "Another model in the data: v4, mean pLDDT 75.05, computed by another project from "
        "the v4 model, not a figure AlphaFold DB gives "
        "(AF-P04637-F1_summary_v4_IshaanGubbala.json); not the one described here." in brief
    )


def test_no_false_model_version_warning_live() -> None:
    """The same for a live brief, where every figure comes from one record."""
    with ReplayServer() as server, LiveSource(afdb_url=server.url, uniprot_url=server.url) as s:
        brief = _brief("P05067", s)
    assert "different AlphaFold model versions" not in brief
    assert "Model version v6, created 2025-08-01" in brief


def test_no_drug_target_ranking_from_plddt(everything: Any) -> None:
    """'α-globin is "most promising drug target" … insulin is "challenging" because of its
    signal peptide': the comparison sets predictions side by side and ranks nothing."""
    text = everything.text()
    for phrase in ("most promising", "drug target by structure", "challenging", "favourable"):
        assert phrase not in text
    assert "best" not in " ".join(everything.comparison.lines()).lower()
    assert "predictions, not drug targets" in everything.comparison.lines()[0]


def test_a_model_missing_from_the_data_is_not_retryable_and_points_to_live(
    everything: Any,
) -> None:
    """'P0DTC2 ... ends partial and the answer says "Run again with --retries 2"': it is
    not retryable. AlphaFold DB models it (its entry is in the bundled data, its figures
    are not), so the next step is --source live, not 'no AlphaFold DB model: the PDB'."""
    [spike] = [e for e in everything.partial_analyses if e.protein_id == "P0DTC2"]
    assert (spike.category, spike.retryable) == ("missing_context", False)
    assert "--retries" not in everything.answer
    assert "Fetch their AlphaFold DB models with --source live: P0DTC2" in everything.answer
    assert "No AlphaFold DB model" not in everything.answer


def test_labels_say_what_they_measure(everything: Any) -> None:
    """'"medium reliability" where AlphaFold DB says "confident"; "Answer confidence: 100%"
    … is a completion ratio; "Confidence in this reasoning: high" measures how much data
    there was'."""
    text = everything.text()
    assert "medium reliability" not in text
    assert "Answer confidence" not in text
    assert "Confidence in this reasoning" not in text
    assert "Tasks usable: " in text
    assert "## Sources" in text


class Spy:
    """A source that records what it was asked."""

    name = "spy"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def fetch(self, protein_id: str) -> object:
        self.asked.append(protein_id)
        return OfflineSource().fetch(protein_id)


@pytest.mark.parametrize("raw", ["P0463", "12345", "A0A0C5B5G6X"])
def test_malformed_ids_fail_as_not_accessions_without_a_lookup(raw: str) -> None:
    """'Malformed IDs pass validation and fail as "not in the offline dataset; try
    --source live"': they fail at fetch_protein as invalid_task, saying why, unasked."""
    spy = Spy()
    output = analyze_sync([raw], source=spy, timeout=10)
    [failed] = output.failed_analyses
    assert (failed.failed_at_stage, failed.category) == ("fetch_protein", "invalid_task")
    assert failed.error.startswith(f"Protein {raw} not found: '{raw}' is not a UniProt accession")
    assert "--source live" not in failed.error
    assert raw not in spy.asked


def test_next_groups_identical_advice() -> None:
    """'35 unbundled IDs print 35 "Check the identifier" lines': one line names them all."""
    ids = [f"P9A{n:02d}9" for n in range(35)]
    output = analyze_sync(ids, timeout=10)
    next_part = output.answer.split("Next:", 1)[1]
    lines = [line for line in next_part.splitlines() if line.strip().startswith("•")]
    assert lines == [
        "  • Not in the bundled dataset; run them with --source live: " + ", ".join(ids)
    ]


def test_live_mode_fetches_per_residue_confidence_and_features() -> None:
    """'Live mode never fetches per-residue confidence (it is set to None) and keeps
    only name, organism, gene, sequence and function from UniProt'."""
    with ReplayServer() as server, LiveSource(afdb_url=server.url, uniprot_url=server.url) as s:
        summary = s.fetch("P00221")
    assert isinstance(summary, dict)
    assert len(summary["alphafold"]["plddt"]) == 147
    assert summary["alphafold"]["profile"]["units"]


def test_model_files_are_read_with_gemmi(
    monkeypatch: pytest.MonkeyPatch, build_script: ModuleType
) -> None:
    """'Structures are parsed by hand; a bioinformatician expects the field's library':
    the build reads model files through gemmi (and has no CIF parser of its own)."""
    import gemmi

    assert not hasattr(build_script, "parse_cif")
    calls: list[str] = []
    real = gemmi.read_pdb_string
    monkeypatch.setattr(gemmi, "read_pdb_string", lambda text: calls.append("pdb") or real(text))
    record = build_script.Record("A1YPR0")
    build_script.read_pdb_model(
        record, REPO / "data/proteins/AF-A1YPR0-F1-model_v4.pdb", "x.pdb", 4
    )
    assert calls == ["pdb"]
