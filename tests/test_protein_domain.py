"""Tests for the protein domain: ids, response validation, analysis stages, briefs."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, cast

import pytest
import structlog

from lyra.errors import TransientError
from lyra.proteins._analysis import (
    analyze_structure,
    critique,
    reason,
    structure_summary,
    synthesize,
)
from lyra.proteins._ids import find_protein_ids, normalize_protein_id, validate_protein_id
from lyra.proteins._offline import OfflineSource
from lyra.proteins._sources import ProteinSource
from lyra.proteins._validate import process_protein, validate_response
from raw_proteins import RAW, by_band

BRCA = "AF-P38398-F1-model_v4.pdb"
MOTS = "AF-A0A0C5B5G6-F1-model_v6.cif"

DATA = Path(__file__).resolve().parents[1] / "src" / "lyra" / "proteins" / "data" / "proteins.json"
ENTRIES: dict[str, dict[str, Any]] = json.loads(DATA.read_text(encoding="utf-8"))["entries"]
WITH_PLDDT = sorted(
    acc for acc, e in ENTRIES.items() if e["alphafold"] and e["alphafold"]["plddt"] is not None
)
SUMMARY_KEYS = {
    "uniprot_id", "description", "organism", "gene", "length", "sequence", "function",
    "confidence", "alphafold", "uniprot", "isoforms", "source", "sources", "provenance",
}  # fmt: skip


class FakeSource:
    """A scripted source that records the ids it was asked for."""

    name = "fake"

    def __init__(self, response: object = None, *, raises: Exception | None = None) -> None:
        self.response = response
        self.raises = raises
        self.calls: list[str] = []

    def fetch(self, protein_id: str) -> object:
        self.calls.append(protein_id)
        if self.raises is not None:
            raise self.raises
        return self.response


def _good(**overrides: Any) -> dict[str, Any]:
    """A minimal valid response, with ``overrides`` applied (None deletes a key)."""
    response: dict[str, Any] = {
        "uniprot_id": "P12345",
        "description": "Test protein",
        "organism": "Homo sapiens",
    }
    for key, value in overrides.items():
        if value is None:
            response.pop(key, None)
        else:
            response[key] = value
    return response


def _band(value: float) -> str:
    """The AlphaFold band of one pLDDT value, computed independently of lyra."""
    if value < 50:
        return "very_low"
    if value < 70:
        return "low"
    return "confident" if value < 90 else "very_high"


def _global_only(mean: float | None, fractions: dict[str, float] | None = None) -> dict[str, Any]:
    """A summary with whole-protein AlphaFold figures only."""
    af = {
        "entry_id": "AF-X-F1",
        "model_version": 6,
        "global_plddt": mean,
        "fractions": fractions,
        "plddt": None,
    }
    return {**_good(length=100), "alphafold": af}


def _with_plddt(values: list[float]) -> dict[str, Any]:
    """A summary whose AlphaFold model has the per-residue values given."""
    af = {
        "entry_id": "AF-X-F1",
        "model_version": 6,
        "global_plddt": None,
        "fractions": None,
        "plddt": values,
    }
    return {**_good(length=len(values)), "alphafold": af}


def _pipeline(protein_id: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], Any]:
    summary = process_protein(protein_id)
    structure = analyze_structure(summary)
    reasoning = reason(summary, structure)
    return summary, structure, reasoning, critique(summary, structure, reasoning)


# --------------------------------------------------------------------------- ids


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("P04637", "P04637"),
        ("  p04637\n", "P04637"),
        ("A0A0C5B5G6", "A0A0C5B5G6"),
        ("ZZZZZZZZZ", "ZZZZZZZZZ"),
        ("A" * 15, "A" * 15),
        ("p05067-2", "P05067-2"),  # an isoform: valid but unusual, as PRD-003 allows
    ],
)
def test_valid_ids_are_accepted_and_normalized(raw: str, expected: str) -> None:
    """A well-formed id is accepted as PRD-003 says, (True, None); its canonical form is
    stripped and upper-cased."""
    assert validate_protein_id(raw) == (True, None)
    assert normalize_protein_id(raw) == expected


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (None, "non-empty string, got None"),
        (123, "got int"),
        (b"P04637", "got bytes"),
        (["P04637"], "got list"),
        ("", "empty or blank"),
        ("   \t", "empty or blank"),
        ("A" * 16, "16 characters long"),
        ("P04637; rm -rf /", "Invalid protein ID format"),
        ("'; DROP TABLE proteins;--", "Invalid protein ID format"),
        ("../etc/passwd", "Invalid protein ID format"),
        ("<script>", "Invalid protein ID format"),
        ("TOTALLY_FAKE_ID", "Invalid protein ID format"),
        ("P05067-0", "Invalid protein ID format"),  # isoforms are numbered from 1
        ("P05067-", "Invalid protein ID format"),
        ("P04 637", "Invalid protein ID format"),
        ("P0463\u0667", "Invalid protein ID format"),  # an Arabic-Indic digit
        ("Pé4637", "Invalid protein ID format"),
    ],
)
def test_invalid_ids_are_rejected_with_a_message(raw: object, fragment: str) -> None:
    """None, non-strings, blanks, over-long ids and injection strings get a clear message."""
    ok, message = validate_protein_id(raw)
    assert not ok
    assert message is not None
    assert fragment in message
    assert normalize_protein_id(raw) is None


def test_rejection_message_is_bounded() -> None:
    """A huge hostile id is not echoed in full."""
    ok, message = validate_protein_id("X;" * 10_000)
    assert not ok
    assert message is not None
    assert len(message) < 200


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Compare P04637 and Q8I3H7.", ["P04637", "Q8I3H7"]),
        ("P04637, P04637 again, then A0A0C5B5G6", ["P04637", "A0A0C5B5G6"]),
        ("isoform P05067-2 of APP", ["P05067-2"]),
        ("XP04637 and P046371 are not accessions", []),
        ("lower case p04637 is matched too", ["P04637"]),
        ("A1YPR0 (ZBTB7C), P0DTC2 (spike)", ["A1YPR0", "P0DTC2"]),
        ("", []),
    ],
)
def test_find_protein_ids(text: str, expected: list[str]) -> None:
    """Accessions are found word-bounded, in either case, an isoform's suffix kept, in
    order, once each."""
    assert find_protein_ids(text) == expected


# --------------------------------------------------------------------------- PRD-003 cases


def test_prd3_case1_valid_id() -> None:
    """A valid id returns the summary schema with every PRD-003 field."""
    result = process_protein("Q8I3H7")
    assert "error" not in result
    assert result["uniprot_id"] == "Q8I3H7"
    assert result["organism"] == "Plasmodium falciparum (isolate 3D7)"
    assert result["confidence"] == 85.57
    assert result["gene"] == "Unknown"  # null in the data, defaulted
    assert result["length"] is None
    assert result["drug_target_assessment"] == "Assessment unavailable"
    assert result.keys() >= SUMMARY_KEYS


def test_prd3_case2_nonexistent_id_is_a_soft_error() -> None:
    """An ID that cannot be an accession is 'not found' with the reason, and nothing is asked."""
    source = FakeSource(_good())
    result = process_protein("ZZZZZZZZZ", source)
    assert source.calls == []
    assert result == {
        "error": "Protein ZZZZZZZZZ not found: 'ZZZZZZZZZ' is not a UniProt accession "
        "(expected 6 or 10 letters and digits in UniProt's format [OPQ][0-9][A-Z0-9]{3}[0-9] "
        "or [A-NR-Z][0-9]([A-Z][A-Z0-9]{2}[0-9]){1,2}, such as P04637 or A0A0C5B5G6)",
        "uniprot_id": "ZZZZZZZZZ",
        "source": "fake",
        "status": 404,
    }


def test_an_accession_the_bundle_lacks_points_to_live_mode() -> None:
    """A well-formed accession not bundled is not found; the message says --source live."""
    result = process_protein("Q99999")
    assert result["status"] == 404
    assert result["error"].startswith("Protein Q99999 not found in the bundled offline dataset")
    assert result["error"].endswith("try --source live)")


@pytest.mark.parametrize("raw", ["P0463", "12345", "A0A0C5B5G6X", "FAKE", "XXXXX"])
def test_ids_that_pass_the_gate_but_are_no_accession(raw: str) -> None:
    """PRD-003's gate stays loose; the fetch still fails them as not found, saying why."""
    assert validate_protein_id(raw) == (True, None)
    source = FakeSource(_good())
    result = process_protein(raw, source)
    assert source.calls == []
    assert result["error"].startswith(f"Protein {raw} not found: '{raw}' is not a UniProt")
    assert "--source live" not in result["error"]


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("", "non-empty string"),  # case 3
        (None, "Protein ID must be a non-empty string"),  # case 4
        ("'; DROP TABLE proteins;--", "Invalid protein ID format"),  # case 5
        ("P04637; rm -rf /", "Invalid protein ID format"),
        ("../etc/passwd", "Invalid protein ID format"),
    ],
)
def test_prd3_cases3to5_bad_ids_make_no_request(raw: object, fragment: str) -> None:
    """Empty, None and injection ids give an error dict before any fetch."""
    source = FakeSource(_good())
    result = process_protein(raw, source)
    assert source.calls == []
    assert fragment in result["error"]
    assert result["source"] == "fake"
    assert result["uniprot_id"] == raw


def test_prd3_case6_source_error_dict() -> None:
    """A source's own error dict becomes a structured error, keeping its status."""
    source = FakeSource({"error": "Service unavailable", "status": 503})
    result = process_protein("P04637", source)
    assert result == {
        "error": "Service unavailable",
        "uniprot_id": "P04637",
        "source": "fake",
        "status": 503,
    }


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (None, "No response from protein database"),  # case 7
        ([_good()], "Unexpected response type: list"),
        ("P04637", "Unexpected response type: str"),
        (42, "Unexpected response type: int"),
    ],
)
def test_prd3_case7_none_or_non_dict_response(response: object, message: str) -> None:
    """None and non-dict responses become error dicts instead of crashing."""
    result = process_protein("P04637", FakeSource(response))
    assert result == {"error": message, "uniprot_id": "P04637", "source": "fake"}


@pytest.mark.parametrize(
    ("response", "field", "default"),
    [
        (_good(), "drug_target_assessment", "Assessment unavailable"),  # case 8
        (_good(), "gene", "Unknown"),
        (_good(gene=None), "gene", "Unknown"),
        ({**_good(), "gene": None}, "gene", "Unknown"),
        (_good(), "length", None),
        (_good(), "confidence", None),
        (_good(gene="TP53"), "gene", "TP53"),
        (_good(drug_target_assessment="x"), "drug_target_assessment", "x"),
    ],
)
def test_prd3_case8_optional_fields_get_defaults(
    response: dict[str, Any], field: str, default: object
) -> None:
    """Missing or null optional fields get their defaults; present ones are kept."""
    result = process_protein("P12345", FakeSource(response))
    assert "error" not in result
    assert result[field] == default


@pytest.mark.parametrize(
    ("response", "missing"),
    [
        (_good(description=None), "description"),  # case 9
        (_good(organism=None), "organism"),
        (_good(description=None, organism=None), "description, organism"),
        (_good(description=""), "description"),
        (_good(description="   "), "description"),
        (_good(organism=7), "organism"),
    ],
)
def test_prd3_case9_missing_required_field(response: dict[str, Any], missing: str) -> None:
    """A missing or empty required field fails cleanly (R3: no partial data kept)."""
    result = process_protein("P12345", FakeSource(response))
    assert result == {
        "error": f"Incomplete data — missing: {missing}",
        "uniprot_id": "P12345",
        "source": "fake",
    }


def test_prd3_case10_mix_of_valid_and_invalid() -> None:
    """Every id of a mixed list is processed: two summaries and one error dict."""
    results = [process_protein(pid) for pid in ["Q8I3H7", "FAKE", "P04637"]]
    assert ["error" in r for r in results] == [False, True, False]
    assert [r["uniprot_id"] for r in results] == ["Q8I3H7", "FAKE", "P04637"]


def test_validation_failures_are_logged() -> None:
    """Bad ids and bad responses are logged as structlog warnings with context."""
    with structlog.testing.capture_logs() as logs:
        process_protein("'; DROP TABLE", FakeSource(_good()))
        process_protein("P12345", FakeSource(_good(organism=None)))
    assert [(e["event"], e["log_level"], e["uniprot_id"]) for e in logs] == [
        ("protein_id_invalid", "warning", "'; DROP TABLE"),
        ("protein_response_invalid", "warning", "P12345"),
    ]
    assert logs[1]["reason"] == "Incomplete data — missing: organism"
    assert logs[1]["source"] == "fake"


def test_source_exceptions_propagate() -> None:
    """An exception raised by the source is not swallowed: the caller classifies it."""
    source = FakeSource(raises=TransientError("down", status=503))
    with pytest.raises(TransientError, match="down"):
        process_protein("P04637", source)


def test_validate_response_returns_a_copy() -> None:
    """Validation never mutates the response it was given."""
    response = _good()
    result = validate_response(response, "P12345", "fake")
    assert result is not response
    assert "gene" not in response


def test_non_string_id_in_error_is_shown_safely() -> None:
    """A non-string id appears in the error dict as a repr, so it stays serialisable."""
    result = process_protein(12345)
    assert result["uniprot_id"] == "12345"
    json.dumps(result)


# --------------------------------------------------------------------------- offline source


def _offline(acc: str) -> dict[str, Any]:
    """The offline summary of ``acc``, asserted not to be an error."""
    result = OfflineSource().fetch(acc)
    assert "error" not in result
    return cast(dict[str, Any], result)


@pytest.mark.parametrize("acc", sorted(ENTRIES))
def test_offline_source_returns_the_summary_schema(acc: str) -> None:
    """Every bundled entry comes back in the summary schema and passes validation."""
    summary = _offline(acc.lower())
    displayed = (
        {"displayed_isoform", "isoform_name"} if ENTRIES[acc].get("displayed_isoform") else set()
    )
    quoted = {"quoted_fields"} if ENTRIES[acc].get("quoted_fields") else set()
    assert summary.keys() == SUMMARY_KEYS | displayed | quoted
    assert summary["source"] == "offline"
    alphafold = ENTRIES[acc]["alphafold"]
    assert summary["confidence"] == (alphafold["global_plddt"] if alphafold else None)
    assert "error" not in validate_response(summary, acc, "offline")


def test_offline_source_hands_out_copies() -> None:
    """Mutating one result does not change the next one."""
    _offline("P38398")["alphafold"]["plddt"].clear()
    assert len(_offline("P38398")["alphafold"]["plddt"]) == 1863


def test_sources_satisfy_the_protocol() -> None:
    """OfflineSource and a test double are ProteinSources."""
    assert isinstance(OfflineSource(), ProteinSource)
    assert isinstance(FakeSource(), ProteinSource)


# --------------------------------------------------------------------------- structure


def test_p38398_figures_match_an_independent_computation() -> None:
    """P38398's mean, range and band fractions equal what the per-residue list gives."""
    values = ENTRIES["P38398"]["alphafold"]["plddt"]
    structure = analyze_structure(process_protein("P38398"))
    bands = ("very_low", "low", "confident", "very_high")
    counts = {b: sum(1 for v in values if _band(v) == b) for b in bands}
    assert structure["residues"] == len(values) == 1863
    assert structure["mean_plddt"] == round(sum(values) / len(values), 2) == 41.29
    assert (structure["min_plddt"], structure["max_plddt"]) == (min(values), max(values))
    assert structure["fractions"] == {b: round(n / len(values), 3) for b, n in counts.items()}
    assert structure["fractions"] == ENTRIES["P38398"]["alphafold"]["fractions"]
    assert "reliability" not in structure


def test_q8i3h7_without_per_residue_data() -> None:
    """Q8I3H7 has only a global pLDDT: segments are unknown (None), and the result says why."""
    structure = analyze_structure(process_protein("Q8I3H7"))
    assert structure["per_residue"] is False
    assert structure["segments"] is None
    assert structure["mean_plddt"] == 85.57
    assert structure["fractions"] is None
    assert (structure["min_plddt"], structure["max_plddt"]) == (None, None)
    assert any("per-residue pLDDT" in m and "--source live" in m for m in structure["missing"])


@pytest.mark.parametrize(
    "summary",
    [
        _good(uniprot_id="P0DTC2"),  # no alphafold key at all
        {**_good(uniprot_id="P0DTC2"), "alphafold": None},
    ],
)
def test_no_structure_data_is_a_soft_failure(summary: dict[str, Any]) -> None:
    """Without AlphaFold figures the stage returns an error dict naming the protein."""
    result = analyze_structure(summary)
    assert result.keys() == {"error", "missing_model"}
    assert result["error"].startswith("No structure data for P0DTC2")


def test_untrusted_text_in_a_brief_is_escaped_once() -> None:
    """A UniProt field holding ``&`` or ``<`` is escaped once in the features table that
    has no pLDDT (a macro's text was escaped again as it was placed: ``&amp;amp;``)."""
    import copy

    summary = copy.deepcopy(process_protein("P0DTC2"))
    summary["uniprot"]["features"][0]["description"] = "A&B <x>"
    brief = synthesize("P0DTC2", summary, analyze_structure(summary), None, None, ["critique"])
    assert "A&amp;B &lt;x&gt;" in brief
    assert "&amp;amp;" not in brief
    assert "&amp;lt;" not in brief


def test_a_brief_without_its_critique_still_gives_what_the_entry_says_to_beware_of() -> None:
    """'P0DTC2's partial brief says only "Critique unavailable", while its 2021 flat file
    has SUBUNIT Homotrimer, a signal peptide 1–12 and a transmembrane helix 1214–1234':
    the caveats the UniProt entry alone supports are given, read here from the raw file."""
    from Bio import SwissProt

    from lyra.proteins import analyze_sync

    with (RAW / "uniprot_P0DTC2_flatfile_2021.txt").open(encoding="utf-8") as handle:
        entry = SwissProt.read(handle)
    subunit = next(c for c in entry.comments if c.startswith("SUBUNIT"))
    assert "Homotrimer" in subunit
    spans = {f.type: (int(f.location.start) + 1, int(f.location.end)) for f in entry.features}
    assert (spans["SIGNAL"], spans["TRANSMEM"]) == ((1, 12), (1214, 1234))
    [brief] = [a.brief for a in analyze_sync(["P0DTC2"], timeout=10).partial_analyses]
    caveats = brief.split("## Caveats", 1)[1].split("## Sources", 1)[0]
    assert "Critique unavailable. What the UniProt entry alone says to beware of:" in caveats
    assert "Homotrimer" in caveats
    assert "signal peptide 1–12 is removed in the mature protein" in caveats
    assert "membrane segments (1214–1234)" in caveats


def test_caveats_say_nothing_of_a_model_the_data_do_not_hold() -> None:
    """'P0DTC2: "AlphaFold DB's model is of the full precursor" and "AlphaFold DB models
    membrane segments (1214–1234) without a membrane", but no model is held': the
    caveats say what a model would be, never what it is."""
    from lyra.proteins import analyze_sync

    [brief] = [a.brief for a in analyze_sync(["P0DTC2"], timeout=10).partial_analyses]
    caveats = brief.split("## Caveats", 1)[1].split("## Sources", 1)[0]
    assert "AlphaFold DB's model is" not in caveats
    assert "AlphaFold DB models membrane segments" not in caveats
    assert "which is what AlphaFold DB models" not in caveats
    assert (
        "- Processing: signal peptide 1–12 is removed in the mature protein; a model of the "
        "full precursor (this data holds none) would include it"
    ) in caveats
    assert (
        "- UniProt's membrane segments (1214–1234): an AlphaFold DB model (this data holds "
        "none) would place them without a membrane"
    ) in caveats


def test_an_abridged_subunit_comment_keeps_what_it_says_of_the_oligomeric_state() -> None:
    """APP's SUBUNIT comment (1,700 characters in the 2025 flat file) names a dozen
    partners before "Homodimerizes; …": the caveat about oligomers keeps that sentence
    whole, says where sentences were left out, and keeps p53's "homotetramer"."""
    from Bio import SwissProt

    with (RAW / "uniprot_P05067_flatfile_2025.txt").open(encoding="utf-8") as handle:
        entry = SwissProt.read(handle)
    subunit = next(c for c in entry.comments if c.startswith("SUBUNIT: Binds"))
    [dimer] = [s for s in re.split(r"(?<=\.) ", subunit) if s.startswith("Homodimerizes")]
    assert subunit.index(dimer) > 900
    *_, result = _pipeline("P05067")
    [caveat] = [c for c in result["caveats"] if "UniProt SUBUNIT" in c]
    assert f"UniProt SUBUNIT (entry of 2025-04-09): … {dimer} … (abridged;" in caveat
    *_, p53 = _pipeline("P04637")
    assert any("Binds DNA as a homotetramer." in c for c in p53["caveats"])


def test_the_glycans_a_model_lacks_are_named_from_the_entrys_sites() -> None:
    """The spike's 2021 flat file lists its glycosylation sites (CARBOHYD): AlphaFold DB
    models none of the sugars, and the caveats say so at each site, read here from the
    raw file."""
    from Bio import SwissProt

    from lyra.proteins import analyze_sync

    with (RAW / "uniprot_P0DTC2_flatfile_2021.txt").open(encoding="utf-8") as handle:
        entry = SwissProt.read(handle)
    sites = [int(f.location.end) for f in entry.features if f.type == "CARBOHYD"]
    assert len(sites) == 24
    [brief] = [a.brief for a in analyze_sync(["P0DTC2"], timeout=10).partial_analyses]
    assert (
        f"AlphaFold DB models no glycans. UniProt's 24 glycosylation site(s) "
        f"({', '.join(map(str, sites))}) are modelled bare"
    ) in brief


def test_a_model_the_bundled_data_hold_no_figures_of_is_fetched_live_not_sent_to_the_pdb() -> None:
    """P0DTC2's bundled data name its AlphaFold DB entry but hold no pLDDT: the failure
    says AlphaFold DB models it and how to fetch it, and the advice is --source live,
    not 'no AlphaFold DB model: look in the PDB'."""
    from lyra.proteins import analyze_sync
    from lyra.proteins._next import next_steps

    result = analyze_structure(process_protein("P0DTC2"))
    assert "missing_model" not in result
    assert (  # the entry id only the lower-trust file gives is said to come from it
        "AlphaFold DB models it (AF-0000000365840314, according to facts_secondary_sources.json: "
        "a lower-trust secondary source, figures quoted elsewhere)" in result["error"]
    )
    assert result["error"].endswith("run with --source live to fetch it from AlphaFold DB")
    output = analyze_sync(["P0DTC2"], timeout=10)
    assert next_steps(output.partial_analyses) == [
        "Fetch their AlphaFold DB models with --source live: P0DTC2"
    ]


# --------------------------------------------------------------------------- reasoning


def _allowed_numbers(summary: dict[str, Any], structure: dict[str, Any]) -> set[str]:
    """Every number the reasoning may quote: figures of segments and units and their
    ranges, the PAE read for them, the features that explain them, the thresholds."""
    allowed = {"5", "20", "50", "70", "90", str(summary["length"])}
    pae = [
        *(p for u in structure["units"] or [] for p in [u["pae"] or {}]),
        *(p for u in structure["units"] or [] for p in (u["pae"] or {}).get("segment_pairs", [])),
        *(p for u in structure["units"] or [] for p in (u["pae"] or {}).get("segments", [])),
        *(p for s in structure["segments"] or [] for p in s["pae"]),
    ]
    for figures in pae:
        allowed |= {f"{v:.2f}" for k, v in figures.items() if isinstance(v, float)}
    for part in [*(structure["segments"] or []), *(structure["units"] or [])]:
        allowed |= {str(v) for k, v in part.items() if isinstance(v, int)}
        allowed |= {f"{part['mean_plddt']:.2f}"}
        counts = part["by_band"]  # its residues by band, and how many are below 90
        allowed |= {str(n) for n in counts.values()}
        allowed |= {str(sum(counts.values()) - counts["very_high"])}
        for start, end in part.get("ranges", []):
            allowed |= {str(start), str(end)}
    for feature in (summary.get("uniprot") or {}).get("features") or []:
        allowed |= {str(feature["start"]), str(feature["end"])}
        allowed |= set(re.findall(r"\d+(?:\.\d+)?", feature["description"]))
    allowed |= {f"{structure['mean_plddt']:.2f}"}
    return allowed


@pytest.mark.parametrize("acc", WITH_PLDDT)
def test_reasoning_only_quotes_numbers_from_the_data(acc: str) -> None:
    """Every number the reasoning quotes comes from the segments and units of the data."""
    summary, structure, reasoning, _ = _pipeline(acc)
    allowed = _allowed_numbers(summary, structure)
    assert reasoning["hypotheses"]
    for text in reasoning["hypotheses"]:
        assert set(re.findall(r"\d+(?:\.\d+)?", text)) <= allowed, text


@pytest.mark.parametrize("acc", sorted(ENTRIES))
def test_reasoning_ranks_no_target(acc: str) -> None:
    """No assessment calls a protein a promising or challenging target from pLDDT."""
    _, _, reasoning, _ = _pipeline(acc)
    text = " ".join([reasoning["drug_target_assessment"], *reasoning["hypotheses"]]).lower()
    for word in ("promising", "challenging", "favourable", "tractab", "reliability"):
        assert word not in text
    assert "no ranking of targets" in text or text.startswith("assessment unavailable")


def test_reasoning_says_where_data_are_missing() -> None:
    """Q8I3H7's unknown distribution is stated, not guessed."""
    _, _, reasoning, _ = _pipeline("Q8I3H7")
    assert any("cannot be located" in h for h in reasoning["hypotheses"])
    assert reasoning["evidence"]["units"] is None


def test_reasoning_without_structure() -> None:
    """With no structure result the assessment is unavailable."""
    reasoning = reason(process_protein("P04637"), {"error": "boom"})
    assert reasoning["hypotheses"] == []
    assert reasoning["drug_target_assessment"].startswith("Assessment unavailable")


# --------------------------------------------------------------------------- critique


@pytest.mark.parametrize(
    ("acc", "fragments"),
    [
        ("P38398", ["not experimental evidence", "Model version v4, created 2022-06-01"]),
        (
            "P04637",
            [
                "UniProt SUBUNIT (entry of 2005-09-13): ",
                "UniProt COFACTOR (entry of 2005-09-13): Binds 1 zinc ion per subunit; Zinc "
                "at residues 176, 179, 238, 242.",
            ],
        ),
        ("Q8I3H7", ["model version is not recorded", "secondary source"]),
        ("P69905", ["Model version v6", "secondary source"]),
        ("P00221", ["Model version v4, created"]),
        ("P05067", ["also models 9 other isoform(s) (P05067-2, P05067-4, P05067-5"]),
    ],
)
def test_critique_caveats(acc: str, fragments: list[str]) -> None:
    """Caveats come from each entry's data; the critique names what the brief rests on."""
    *_, result = _pipeline(acc)
    text = "\n".join(result["caveats"])
    for fragment in fragments:
        assert fragment in text
    assert "confidence_in_reasoning" not in result
    assert result["basis"]
    assert "different AlphaFold model versions" not in text


def test_critique_flags_inconsistent_figures() -> None:
    """A mean pLDDT the band fractions cannot produce is called out."""
    fractions = {"very_low": 1.0, "low": 0.0, "confident": 0.0, "very_high": 0.0}
    summary = _global_only(95.0, fractions)
    structure = analyze_structure(summary)
    result = critique(summary, structure, reason(summary, structure))
    assert any("outside the range" in caveat for caveat in result["caveats"])


def test_critique_without_structure() -> None:
    """With no structure result the critique says no confidence figure was used."""
    result = critique(process_protein("P04637"), None, None)
    assert result["caveats"] == [
        "No structure analysis was available, so no confidence figure was used."
    ]


# --------------------------------------------------------------------------- synthesis


def test_full_brief_names_everything() -> None:
    """A complete brief leads with the confidence table and names each source."""
    summary, structure, reasoning, crit = _pipeline("P38398")
    brief = synthesize("P38398", summary, structure, reasoning, crit)
    for fragment in [
        "Breast cancer type 1 susceptibility protein (P38398)",
        "| Organism | Homo sapiens |",
        "| Gene | BRCA1 |",
        "| Length | 1863 residues |",
        "Source: AlphaFold DB model AF-P38398-F1 v4, created 2022-06-01; per-residue pLDDT "
        "from AF-P38398-F1-model_v4.pdb.",
        f"| 1649–1859 | 211 | 92.02 | very high | {by_band(BRCA, (1649, 1859))} | unit 2 |",
        f"| 2 | 1392–1419, 1649–1859 | 239 | 91.28 | very high | "
        f"{by_band(BRCA, (1392, 1419), (1649, 1859))} | segments in contact; "
        "arrangement not checked (no PAE) |",
        "Terminal fraying (set apart): 1–6 (mean pLDDT 54.28), 1860–1863 (mean pLDDT 46.99).",
        "- Whole-model mean pLDDT: 41.29, the mean over residues (one number over ordered and "
        "disordered parts alike",
        "very low (below 50) 80.3%",
        "https://alphafold.ebi.ac.uk/entry/P38398",
        "https://www.uniprot.org/uniprotkb/P38398/entry",
        "not experimental evidence",
        "## Sources",
    ]:
        assert fragment in brief
    assert brief.index("## Confidence along the chain") < brief.index("Whole-model mean pLDDT")
    assert "Partial" not in brief
    assert "Confidence in this reasoning" not in brief


def test_q8i3h7_brief_says_length_and_gene_are_not_in_the_data() -> None:
    """Q8I3H7's brief says plainly that its length, gene and segments are not known here."""
    summary, structure, reasoning, crit = _pipeline("Q8I3H7")
    brief = synthesize("Q8I3H7", summary, structure, reasoning, crit)
    assert "| Gene | not in this data |" in brief
    assert "| Length | not in this data |" in brief
    assert "Segments: unknown (no per-residue pLDDT in this data)." in brief
    assert "Whole-model mean pLDDT: 85.57" in brief


@pytest.mark.parametrize(
    ("stages", "missing"),
    [
        (("analyze_structure", "reason", "critique"), "analyze_structure, reason, critique"),
        (("reason", "critique"), "reason, critique"),
        (("critique",), "critique"),
    ],
)
def test_partial_brief_names_missing_stages(stages: tuple[str, ...], missing: str) -> None:
    """A brief with missing stages says which analyses are missing and that it is partial."""
    summary, structure, reasoning, _ = _pipeline("P04637")
    kept = {
        "structure": None if "analyze_structure" in stages else structure,
        "reasoning": None if "reason" in stages else reasoning,
    }
    brief = synthesize("P04637", summary, **kept, critique=None, missing_stages=stages)
    assert f"Missing analyses: {missing}" in brief
    assert "incomplete" in brief
    assert "Cellular tumor antigen p53 (P04637)" in brief
    assert "Critique unavailable" in brief


def test_structure_summary() -> None:
    """The structure-only text gives the figures, or the reason there are none."""
    summary = process_protein("A0A0C5B5G6")
    text = structure_summary("A0A0C5B5G6", summary, analyze_structure(summary))
    assert "Whole-model mean pLDDT: 72.08" in text
    assert (
        f"| 6–15 | 10 | 75.38 | confident | {by_band(MOTS, (6, 15))} | short confident stretch "
        "(no unit) |"
    ) in text
    assert "Terminal fraying (set apart): 1–5 (mean pLDDT 66.17), 16 (mean" in text  # one residue
    missing = process_protein("P0DTC2")
    text = structure_summary("P0DTC2", missing, analyze_structure(missing))
    assert "No structure data for P0DTC2" in text


def test_fractions_in_structure_sum_to_about_one() -> None:
    """Computed band fractions sum to 1 within rounding."""
    for acc in WITH_PLDDT:
        fractions = analyze_structure(process_protein(acc))["fractions"]
        assert math.isclose(sum(fractions.values()), 1.0, abs_tol=0.003)


def test_the_share_at_70_or_more_is_counted_not_summed_from_rounded_fractions() -> None:
    """``fraction_at_plddt_70_or_more`` is the residues at pLDDT ≥ 70 over all, rounded
    once: APP's 427 of 770 is 0.555, where its rounded bands (0.288 + 0.266) sum to 0.554."""
    for acc in WITH_PLDDT:
        summary = process_protein(acc)
        values = summary["alphafold"]["plddt"]
        counted = sum(1 for value in values if value >= 70) / len(values)
        assert analyze_structure(summary)["fraction_at_plddt_70_or_more"] == round(counted, 3)
    app = analyze_structure(process_protein("P05067"))
    assert app["fraction_at_plddt_70_or_more"] == 0.555


def test_malformed_ids_get_one_line_of_advice_naming_each_even_a_blank_one() -> None:
    """IDs refused for their form are grouped in one 'Next' line that names each (a
    blank one as '(blank)'), not one garbled line each; each reason stays in its own
    failure line."""
    from lyra.proteins import analyze_sync
    from lyra.proteins._next import next_steps

    output = analyze_sync(["P05#x", "", "AF-P05067-F1", "P04637"], timeout=10)
    assert next_steps(output.failed_analyses) == [
        "Fix the identifiers (each a UniProt accession, such as P04637 or P05067-2): "
        "P05#x, (blank), AF-P05067-F1"
    ]
