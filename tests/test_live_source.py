"""Tests for LiveSource against recorded AlphaFold DB and UniProt responses (no network)."""

from __future__ import annotations

import email.utils
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fakes.replay_server import (
    ReplayServer,
    json_reply,
    malformed,
    rate_limited,
    reply,
    server_error,
    slow,
)
from lyra.delegation import parse_retry_after
from lyra.errors import TransientError
from lyra.proteins._analysis import analyze_structure, synthesize
from lyra.proteins._live import LiveSource
from lyra.proteins._sources import ProteinSource
from lyra.proteins._validate import process_protein

DATA = Path(__file__).resolve().parents[1] / "src" / "lyra" / "proteins" / "data" / "proteins.json"
ENTRIES: dict[str, dict[str, Any]] = json.loads(DATA.read_text(encoding="utf-8"))["entries"]
RAW = Path(__file__).resolve().parents[1] / "data" / "proteins"
UNIPROT_P04637 = "/uniprotkb/P04637.json"
AFDB_P05067 = "/api/prediction/P05067"


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    """A running replay server."""
    with ReplayServer() as fake:
        yield fake


@pytest.fixture
def live(server: ReplayServer) -> Iterator[LiveSource]:
    """A LiveSource pointed at the replay server for both services."""
    with LiveSource(afdb_url=server.url, uniprot_url=server.url, timeout=5.0) as source:
        yield source


def _summary(result: object) -> dict[str, Any]:
    assert isinstance(result, dict)
    assert "error" not in result, result
    return result


def test_p04637_from_uniprot_with_afdb_404(live: LiveSource, server: ReplayServer) -> None:
    """UniProt's recording plus an AFDB 404 gives a summary with ``alphafold: None``."""
    summary = _summary(live.fetch("P04637"))
    assert server.paths == [UNIPROT_P04637, "/api/prediction/P04637"]
    assert summary["description"] == "Cellular tumor antigen p53"
    assert summary["organism"] == "Homo sapiens"
    assert summary["gene"] == "TP53"
    assert summary["length"] == 393
    assert summary["sequence"] == ENTRIES["P04637"]["sequence"]
    assert (summary["alphafold"], summary["confidence"]) == (None, None)
    assert summary["source"] == "live"
    assert summary["sources"] == [f"{server.url}{UNIPROT_P04637}"]
    assert analyze_structure(summary)["error"].startswith("No structure data for P04637")


def test_p69905_function_comes_from_uniprot(live: LiveSource) -> None:
    """The first FUNCTION comment of the protein itself becomes ``function``."""
    summary = _summary(live.fetch("P69905"))
    assert summary["function"] == ENTRIES["P69905"]["function"]
    assert summary["description"] == "Hemoglobin subunit alpha"
    assert summary["gene"] is None  # the trimmed recording has no genes block


def test_p05067_from_afdb_alone(live: LiveSource, server: ReplayServer) -> None:
    """With UniProt 404, the AFDB record gives identity, and the files it names the
    per-residue confidence and the coordinates (its PAE file is not there: missing, and
    the brief says which service did not serve what, never to run it live)."""
    summary = _summary(live.fetch("P05067"))
    bundled = ENTRIES["P05067"]
    assert summary["description"] == bundled["description"]
    assert (summary["organism"], summary["gene"]) == ("Homo sapiens", "APP")
    assert summary["length"] == len(summary["sequence"]) == bundled["length"] == 770
    af = summary["alphafold"]
    assert (af["entry_id"], af["model_version"], af["model_date"]) == (
        "AF-P05067-F1",
        6,
        "2025-08-01",
    )
    assert af["global_plddt"] == summary["confidence"] == 67.38  # the API's figure
    assert af["fractions"] == bundled["alphafold"]["fractions"]
    assert af["plddt"] == bundled["alphafold"]["plddt"]
    assert summary["isoforms"] == [form["accession"] for form in bundled["isoforms"]]
    assert af["model_file"] == f"{server.url}/files/AF-P05067-F1-confidence_v6.json"
    assert af["pae_file"] is None
    assert f"{server.url}/files/AF-P05067-F1-model_v6.pdb" in summary["sources"]
    assert "/files/AF-P05067-F1-predicted_aligned_error_v6.json" in server.paths
    structure = analyze_structure(summary)
    assert [u["where"] for u in structure["units"]] == ["30–189", "284–343", "376–569"]
    assert structure["unit_pae"] is None
    assert (
        "the PAE file (checking the units and placing them needs it; AlphaFold DB did not "
        "serve it for this entry)"
    ) in structure["missing"]
    brief = synthesize("P05067", summary, structure)
    assert "--source live" not in brief  # the run is live: no advice to run it live
    assert "UniProt did not serve it for this entry" in brief


def test_p00221_gets_confidence_model_and_pae_files(live: LiveSource, server: ReplayServer) -> None:
    """The record's confidence, model and PAE files are fetched from the configured host,
    read (gemmi for the model) and turned into segments, units and PAE between units."""
    summary = _summary(live.fetch("P00221"))
    assert server.paths == [
        "/uniprotkb/P00221.json",
        "/api/prediction/P00221",
        "/files/AF-P00221-F1-confidence_v4.json",
        "/files/AF-P00221-F1-model_v4.cif",
        "/files/AF-P00221-F1-predicted_aligned_error_v4.json",
    ]
    af = summary["alphafold"]
    assert af["pae_file"] == f"{server.url}/files/AF-P00221-F1-predicted_aligned_error_v4.json"
    assert len(af["plddt"]) == 147
    structure = analyze_structure(summary)
    assert [(u["where"], u["mean_plddt"]) for u in structure["units"]] == [("50–147", 96.02)]
    assert structure["unit_pae"] == []  # one unit: no pair to compare
    assert len(live.pae_matrix(summary) or []) == 147


def test_uniprot_features_are_mapped_onto_live_confidence(
    live: LiveSource, server: ReplayServer
) -> None:
    """UniProt's features (here an entry built for tests, in the REST shape) are kept and
    each gets its mean pLDDT and a verdict; the brief names the entry, version and date."""
    entry = {  # built for tests: REST JSON shape, features chosen by this test
        "entryType": "UniProtKB reviewed (Swiss-Prot)",
        "primaryAccession": "P05067",
        "entryAudit": {"lastAnnotationUpdateDate": "2025-02-05", "entryVersion": 280},
        "organism": {"scientificName": "Homo sapiens"},
        "proteinDescription": {"recommendedName": {"fullName": {"value": "Amyloid-beta A4"}}},
        "comments": [{"commentType": "SUBUNIT", "texts": [{"value": "Binds, test text."}]}],
        "features": [
            {"type": "Signal", "location": {"start": {"value": 1}, "end": {"value": 17}}},
            {
                "type": "Domain",
                "location": {"start": {"value": 376}, "end": {"value": 569}},
                "description": "E2 (built for tests)",
            },
            {
                "type": "Region",
                "location": {"start": {"value": 582}, "end": {"value": 697}},
                "description": "Disordered",
                "evidences": [
                    {"evidenceCode": "ECO:0000256", "source": "SAM", "id": "MobiDB-lite"}
                ],
            },
            {"type": "Variant", "location": {"start": {"value": 5}, "end": {"value": 5}}},
        ],
    }
    server.script("/uniprotkb/P05067.json", json_reply(entry))
    summary = _summary(live.fetch("P05067"))
    structure = analyze_structure(summary)
    mapped = {f["type"]: f for f in structure["features"]}
    assert set(mapped) == {"Signal", "Domain", "Region"}
    plddt = ENTRIES["P05067"]["alphafold"]["plddt"]
    assert mapped["Domain"]["mean_plddt"] == round(sum(plddt[375:569]) / 194, 2) == 89.47
    assert mapped["Domain"]["verdict"].startswith("agree")
    assert mapped["Region"]["predicted_by"] == "MobiDB-lite"  # (its evidences: REST's shape)
    assert mapped["Region"]["verdict"] == (
        "agree: predicted disordered from its sequence (MobiDB-lite), predicted very low "
        "(two predictions, not an observation)"
    )
    assert mapped["Signal"]["verdict"].startswith("removed in the mature protein")
    brief = synthesize("P05067", summary, structure)
    assert f"Annotation: {server.url}/uniprotkb/P05067.json (entry version 280" in brief
    [row] = [line for line in brief.splitlines() if line.startswith("| Domain: E2 (built")]
    assert row.startswith("| Domain: E2 (built for tests) | 376–569 | 89.47 | confident | ")
    assert row.endswith("| agree: a structured element, predicted ordered |")


def test_a_malformed_pae_file_is_a_bad_gateway(live: LiveSource, server: ReplayServer) -> None:
    """A PAE file that is no square matrix raises TransientError(502), worth another try."""
    server.script(
        "/files/AF-P00221-F1-predicted_aligned_error_v4.json",
        json_reply([{"predicted_aligned_error": [[0, 1], [1]]}]),
    )
    with pytest.raises(TransientError, match="PAE file") as caught:
        live.fetch("P00221")
    assert caught.value.status == 502


def test_a_missing_confidence_file_leaves_figures_whole(
    live: LiveSource, server: ReplayServer
) -> None:
    """Without the confidence file the record's whole-model figures remain, and the
    analysis names what is missing and how to get it."""
    server.script("/files/AF-P00221-F1-confidence_v4.json", server_error(404))
    summary = _summary(live.fetch("P00221"))
    assert summary["alphafold"]["plddt"] is None
    structure = analyze_structure(summary)
    assert structure["mean_plddt"] == 84.43
    assert structure["segments"] is None
    assert any("per-residue pLDDT" in m for m in structure["missing"])


def test_unknown_accession_is_a_soft_404(live: LiveSource, server: ReplayServer) -> None:
    """Neither service knowing an accession gives the soft-failure dict, not an exception;
    an ID that cannot be an accession is not even asked about."""
    assert live.fetch("Q99999") == {
        "error": "Protein Q99999 not found in UniProt or AlphaFold DB",
        "status": 404,
    }
    assert len(server.paths) == 2
    result = process_protein("zzzzzzzzz", live)
    assert result["status"] == 404
    assert result["source"] == "live"
    assert "is not a UniProt accession" in result["error"]
    assert len(server.paths) == 2


def test_process_protein_over_live(live: LiveSource) -> None:
    """process_protein validates a live summary and fills its defaults."""
    result = process_protein(" p04637 ", live)
    assert result["uniprot_id"] == "P04637"
    assert result["drug_target_assessment"] == "Assessment unavailable"


@pytest.mark.parametrize("path", [UNIPROT_P04637, "/api/prediction/P04637"])
def test_rate_limit_raises_transient_error_with_retry_after(
    live: LiveSource, server: ReplayServer, path: str
) -> None:
    """A 429 from either service raises TransientError carrying ``retry_after``."""
    server.script(path, rate_limited(7))
    with pytest.raises(TransientError) as caught:
        live.fetch("P04637")
    assert (caught.value.status, caught.value.retry_after) == (429, 7.0)
    assert _summary(live.fetch("P04637"))["gene"] == "TP53"  # the next try is served


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 401, 403, 400])
def test_error_statuses_raise_transient_error(
    live: LiveSource, server: ReplayServer, status: int
) -> None:
    """Server errors, timeouts and auth failures raise TransientError with the status."""
    server.script(AFDB_P05067, server_error(status))
    with pytest.raises(TransientError, match=f"AlphaFold DB answered HTTP {status}") as caught:
        live.fetch("P05067")
    assert (caught.value.status, caught.value.retry_after) == (status, None)


@pytest.mark.parametrize(
    ("path", "answer", "what"),
    [
        (UNIPROT_P04637, malformed(), "not JSON"),
        (UNIPROT_P04637, malformed(b"<html>maintenance</html>"), "not JSON"),
        (UNIPROT_P04637, malformed(b"\xff\xfe\x00garbage"), "not JSON"),
        (UNIPROT_P04637, json_reply(["not", "an", "entry"]), "a JSON list"),
        (AFDB_P05067, json_reply({"entryId": "AF-P05067-F1"}), "a JSON dict"),
    ],
)
def test_malformed_body_raises_bad_gateway(
    live: LiveSource, server: ReplayServer, path: str, answer: Any, what: str
) -> None:
    """A body that is not JSON, or JSON of the wrong shape, raises TransientError(502)."""
    server.script(path, answer)
    accession = path.split("/")[-1].removesuffix(".json")
    with pytest.raises(TransientError, match="malformed") as caught:
        live.fetch(accession)
    assert caught.value.status == 502
    assert what in str(caught.value)


def test_missing_description_is_caught_by_validation(
    live: LiveSource, server: ReplayServer
) -> None:
    """Well-formed JSON without a name passes the source but fails validation softly."""
    server.script(UNIPROT_P04637, json_reply({"primaryAccession": "P04637"}))
    result = process_protein("P04637", live)
    assert result["error"] == "Incomplete data — missing: description, organism"


def test_slow_reply_times_out(server: ReplayServer) -> None:
    """A reply slower than the client timeout raises httpx.TimeoutException promptly."""
    server.script(UNIPROT_P04637, slow(reply(200, b"{}"), 30))
    with LiveSource(afdb_url=server.url, uniprot_url=server.url, timeout=0.2) as source:
        started = time.monotonic()
        with pytest.raises(httpx.TimeoutException):
            source.fetch("P04637")
    assert time.monotonic() - started < 5


def test_close_is_prompt_with_a_slow_reply_pending() -> None:
    """Closing the server wakes a handler waiting on a slow reply."""
    fake = ReplayServer().start()
    fake.script(UNIPROT_P04637, slow(reply(200, b"{}"), 60))
    errors: list[BaseException] = []

    def call() -> None:
        try:
            httpx.get(f"{fake.url}{UNIPROT_P04637}", timeout=30)
        except httpx.HTTPError as exc:
            errors.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    while not fake.paths:
        time.sleep(0.01)
    started = time.monotonic()
    fake.close()
    thread.join(5)
    assert time.monotonic() - started < 3
    assert not thread.is_alive()
    assert errors  # the client saw the connection drop, not a reply


def test_connection_refused_propagates() -> None:
    """A refused connection raises httpx's ConnectError unchanged."""
    with (
        LiveSource(afdb_url="http://127.0.0.1:9", uniprot_url="http://127.0.0.1:9") as source,
        pytest.raises(httpx.ConnectError),
    ):
        source.fetch("P04637")


def test_passed_in_client_is_not_closed(server: ReplayServer) -> None:
    """A client given to LiveSource stays open after the source closes."""
    with httpx.Client() as client:
        with LiveSource(afdb_url=server.url, uniprot_url=server.url, client=client) as source:
            assert _summary(source.fetch("P04637"))["gene"] == "TP53"
        assert not client.is_closed


def test_live_source_is_a_protein_source(live: LiveSource) -> None:
    """LiveSource satisfies the ProteinSource protocol."""
    assert isinstance(live, ProteinSource)
    assert live.name == "live"


def test_replay_server_reports_unknown_routes() -> None:
    """A request outside the two services is a problem that fails a strict server."""
    with pytest.raises(AssertionError, match="no route"), ReplayServer() as fake:
        assert httpx.get(f"{fake.url}/elsewhere").status_code == 404


def test_uniprot_404_body_has_the_service_shape(server: ReplayServer) -> None:
    """Unknown accessions get UniProt's documented 404 body."""
    response = httpx.get(f"{server.url}/uniprotkb/Q99999.json")
    assert response.status_code == 404
    assert response.json()["messages"] == ["Resource not found"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), ("7", 7.0), ("1.5", 1.5), ("-3", 0.0), ("soon", None), ("nan", None)],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    """Delta-seconds values parse; junk gives None."""
    assert parse_retry_after(value) == expected


def test_parse_retry_after_http_date() -> None:
    """An HTTP-date value gives the seconds until that time."""
    value = email.utils.formatdate(time.time() + 30, usegmt=True)
    seconds = parse_retry_after(value)
    assert seconds is not None
    assert 25 <= seconds <= 31


def _afdb_records(accession: str) -> list[dict[str, Any]]:
    """AlphaFold DB's recorded answer for P05067 (all ten isoforms' records)."""
    recorded = Path(__file__).resolve().parent / "fixtures" / "recorded"
    records: list[dict[str, Any]] = json.loads(
        (recorded / f"afdb_prediction_{accession}.json").read_text(encoding="utf-8")
    )
    return records


def test_an_isoform_is_its_own_alphafold_model_and_never_asks_uniprot(
    live: LiveSource, server: ReplayServer
) -> None:
    """P05067-2 is AlphaFold DB's record of that isoform (its sequence, its figures),
    named as an isoform of P05067; UniProt is not asked, since its features are placed
    on the canonical sequence."""
    isoform = [r for r in _afdb_records("P05067") if r["uniprotAccession"] == "P05067-2"]
    server.script("/api/prediction/P05067-2", json_reply(isoform))
    summary = _summary(live.fetch("p05067-2"))
    assert not [path for path in server.paths if path.startswith("/uniprotkb/")]
    assert (summary["uniprot_id"], summary["isoform_of"]) == ("P05067-2", "P05067")
    assert summary["alphafold"]["entry_id"] == "AF-P05067-2-F1"
    assert summary["confidence"] == isoform[0]["globalMetricValue"]
    assert summary["length"] == len(isoform[0]["uniprotSequence"])
    assert summary["uniprot"] is None
    brief = synthesize("P05067-2", summary, analyze_structure(summary))
    assert "UniProt did not serve" not in brief  # (it was never asked)
    assert (
        "UniProt numbers its features on the canonical sequence of P05067, so a live run "
        "does not fetch them for an isoform"
    ) in brief


def test_an_isoform_alphafold_db_does_not_model_is_not_found_not_the_canonical(
    live: LiveSource, server: ReplayServer
) -> None:
    """An answer that lists other isoforms but not the one asked for is a 'not found',
    never the canonical sequence's model under the isoform's name."""
    server.script("/api/prediction/P05067-3", json_reply(_afdb_records("P05067")))
    result = live.fetch("P05067-3")
    assert isinstance(result, dict)
    assert result.get("status") == 404, result


def test_live_features_and_pae_explain_the_n_terminus_and_place_the_domains(
    live: LiveSource, server: ReplayServer
) -> None:
    """With UniProt's features and a PAE file, a low segment is matched to the feature
    that explains it, and the PAE between UniProt's domains is given, each figure
    recomputed from the raw PAE file (the entry is built for tests: its features are
    this test's choice, in UniProt's REST shape)."""

    def feature(kind: str, start: int, end: int, description: str) -> dict[str, Any]:
        where = {"start": {"value": start}, "end": {"value": end}}
        return {"type": kind, "location": where, "description": description}

    entry = {  # built for tests
        "entryType": "UniProtKB reviewed (Swiss-Prot)",
        "primaryAccession": "P00221",
        "organism": {"scientificName": "Spinacia oleracea"},
        "proteinDescription": {"recommendedName": {"fullName": {"value": "Ferredoxin-1"}}},
        "features": [
            feature("Transit peptide", 1, 49, "Chloroplast (built for tests)"),
            feature("Domain", 50, 100, "first half (built for tests)"),
            feature("Domain", 101, 147, "second half (built for tests)"),
        ],
    }
    server.script("/uniprotkb/P00221.json", json_reply(entry))
    summary = _summary(live.fetch("P00221"))
    structure = analyze_structure(summary)
    [start] = [s for s in structure["segments"] if s["start"] == 1]
    assert start["features"] == ["Transit peptide: Chloroplast (built for tests) 1–49"]
    raw = json.loads((RAW / "AF-P00221-F1-predicted_aligned_error_v4.json").read_text())
    pae = raw[0]["predicted_aligned_error"]
    first, second = range(49, 100), range(100, 147)
    forward = [pae[i][j] for i in first for j in second]
    backward = [pae[j][i] for i in first for j in second]
    [pair] = structure["domain_pae"]
    assert pair["mean_pae"] == round(sum(forward + backward) / (2 * len(forward)), 2)
    assert pair["aligned_on_first"] == round(sum(forward) / len(forward), 2)
    brief = synthesize("P00221", summary, structure)
    assert (
        f"| first half (built for tests) 50–100 and second half (built for tests) 101–147 | "
        f"{pair['mean_pae']:g} |"
    ) in brief


def _p05067_entry(sequence: str, features: list[tuple[str, int, int]]) -> dict[str, Any]:
    """A UniProt entry of P05067 in the REST shape, built for tests: its sequence and
    features are the test's own."""
    return {
        "entryType": "UniProtKB reviewed (Swiss-Prot)",
        "primaryAccession": "P05067",
        "organism": {"scientificName": "Homo sapiens"},
        "proteinDescription": {"recommendedName": {"fullName": {"value": "Amyloid-beta A4"}}},
        "sequence": {"value": sequence, "length": len(sequence)},
        "features": [
            {
                "type": kind,
                "location": {"start": {"value": start}, "end": {"value": end}},
                "description": f"{kind} (built for tests)",
            }
            for kind, start, end in features
        ],
    }


def _modelled_p05067() -> str:
    """The sequence AlphaFold DB modelled for P05067, from the recorded record."""
    records = json.loads(
        (Path(__file__).parent / "fixtures/recorded/afdb_prediction_P05067.json").read_text(
            encoding="utf-8"
        )
    )
    [record] = [r for r in records if r["uniprotAccession"] == "P05067"]
    return str(record["uniprotSequence"])


def test_features_of_a_sequence_uniprot_changed_since_the_model_are_placed_by_what_is_shared(
    live: LiveSource, server: ReplayServer
) -> None:
    """UniProt numbers its features on its current sequence; the model is of the one
    AlphaFold DB took when it was built. Here UniProt's has lost residues 290–294 since:
    a feature before them keeps its numbers, one after them is renumbered for the model
    (5 more), one across them is not placed, and the brief says so in the model's numbers."""
    modelled = _modelled_p05067()
    current = modelled[:289] + modelled[294:]  # built for tests: 290–294 removed
    features = [("Signal", 1, 17), ("Domain", 371, 564), ("Region", 280, 300)]
    server.script("/uniprotkb/P05067.json", json_reply(_p05067_entry(current, features)))
    summary = _summary(live.fetch("P05067"))
    assert summary["length"] == 765  # UniProt's own
    structure = analyze_structure(summary)
    mapped = {f["type"]: f for f in structure["features"]}
    assert set(mapped) == {"Signal", "Domain"}
    assert (mapped["Signal"]["start"], mapped["Signal"]["end"]) == (1, 17)
    assert (mapped["Domain"]["start"], mapped["Domain"]["end"]) == (376, 569)
    plddt = summary["alphafold"]["plddt"]
    assert mapped["Domain"]["mean_plddt"] == round(sum(plddt[375:569]) / 194, 2) == 89.47
    brief = synthesize("P05067", summary, structure)
    assert summary["uniprot"]["model_sequence"]["shared"] == [(1, 289, 0), (295, 770, -5)]
    assert (
        "UniProt's sequence of P05067 (765 residues) is not the one AlphaFold DB modelled "
        "(770 residues): UniProt has changed it since the model was built, and residue "
        "numbers here are the model's. Aligned, the two share 1–289, 295–770 (290–765 in "
        "UniProt). Of UniProt's 3 features, the 2 within those stretches are placed on the "
        "model; the rest cross an insertion or a deletion"
    ) in brief
    assert "The model covers 770 residues but the sequence has 765" not in brief


def test_a_residue_uniprot_changed_in_place_keeps_every_feature_across_it(
    live: LiveSource, server: ReplayServer
) -> None:
    """One residue substituted since the model was built (built for tests: 500 changed):
    numbering holds, so the chain and a domain across it are still placed, and the brief
    names the residue that differs."""
    modelled = _modelled_p05067()
    changed = "W" if modelled[499] != "W" else "A"
    current = modelled[:499] + changed + modelled[500:]
    features = [("Signal", 1, 17), ("Chain", 18, 770), ("Domain", 480, 520)]
    server.script("/uniprotkb/P05067.json", json_reply(_p05067_entry(current, features)))
    summary = _summary(live.fetch("P05067"))
    structure = analyze_structure(summary)
    placed = [(f["start"], f["end"]) for f in structure["features"]]
    assert placed == [(1, 17), (18, 770), (480, 520)]
    assert summary["uniprot"]["model_sequence"]["changed"] == [500]
    brief = synthesize("P05067", summary, structure)
    assert (
        "Aligned, the two share 1–770; 1 residue(s) changed in place (500) keep their "
        "features. All 3 of UniProt's features are placed on the model."
    ) in brief


def test_features_of_the_modelled_sequence_are_placed_as_numbered(
    live: LiveSource, server: ReplayServer
) -> None:
    """Where UniProt's sequence is the one modelled, every feature is placed as UniProt
    numbers it, and no caveat is given about the sequence."""
    features = [("Signal", 1, 17), ("Region", 280, 300)]
    entry = _p05067_entry(_modelled_p05067(), features)
    server.script("/uniprotkb/P05067.json", json_reply(entry))
    summary = _summary(live.fetch("P05067"))
    assert "model_sequence" not in summary["uniprot"]
    structure = analyze_structure(summary)
    assert [(f["start"], f["end"]) for f in structure["features"]] == [(1, 17), (280, 300)]
    assert "not the one AlphaFold DB modelled" not in synthesize("P05067", summary, structure)
