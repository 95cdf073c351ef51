"""`lyra analyze` as a scientist types it: IDs, ID files, a network that is down, what
the terminal says of a recovered timeout, resume, SIGTERM, and the typed request."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import ValidationError

from lyra.cli import main
from lyra.proteins import AnalyzeRequest, analyze_sync, resolve_protein_id
from lyra.proteins._offline import bundled_entries
from lyra.proteins._planner import RULES_NOTE, plan_by_rules, rules_note

RAW = Path(__file__).resolve().parents[1] / "data" / "proteins"


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(args)
    out, err = capsys.readouterr()
    return status, out, err


def _analysed(out: str) -> list[str]:
    output = json.loads(out)
    entries = [*output["completed_analyses"], *output["failed_analyses"]]
    return [e["protein_id"] for e in entries]


# --------------------------------------------------------------------------- IDs


def test_entry_names_and_secondary_accessions_resolve_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'P53_HUMAN is refused … Q15086, a secondary accession of P04637 in the bundled
    data, is "not in bundled dataset"': both resolve to P04637 (analysed once), each
    with a one-line note."""
    argv = ["analyze", "P53_HUMAN", "Q15086", "A4_HUMAN", "--structure-only", "--json"]
    status, out, _ = run_cli([*argv, "--run-dir", str(tmp_path)], capsys)
    assert status == 0
    assert _analysed(out) == ["P04637", "P05067"]
    assert json.loads(out)["notes"] == [
        "P53_HUMAN is the UniProt entry name of P04637 in the bundled data: analysed as P04637",
        "Q15086 is a secondary accession of P04637 (P53_HUMAN) in the bundled data: "
        "analysed as P04637",
        "P53_HUMAN and Q15086 name the same protein, P04637: analysed once",
        "A4_HUMAN is the UniProt entry name of P05067 in the bundled data: analysed as P05067",
    ]
    status, text, _ = run_cli(["analyze", "P53_HUMAN", "--run-dir", str(tmp_path / "t")], capsys)
    assert text.startswith("Note: P53_HUMAN is the UniProt entry name of P04637")


def test_an_id_requested_twice_is_analysed_once_and_said_so_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'lyra analyze P05067 P05067 gives total_requested 1 and "1 of 1" with no note': the
    protein appears once in the output, and a note says why there is one of it, whatever
    the case it was given in and however often."""
    argv = ["analyze", "P05067", "p05067", "P05067", "P04637", "--structure-only", "--json"]
    status, out, _ = run_cli([*argv, "--run-dir", str(tmp_path)], capsys)
    assert status == 0
    assert sorted(_analysed(out)) == ["P04637", "P05067"]
    assert json.loads(out)["summary"]["total_requested"] == 2  # distinct proteins
    assert json.loads(out)["notes"] == ["P05067 was requested more than once: analysed once"]


def test_an_id_a_question_names_twice_is_noted_as_arguments_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """'--question "P05067 and p05067" analyses once with no note': a question's repeats
    get the note the same IDs as arguments give."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    argv = ["analyze", "--question", "P05067 and p05067", "--structure-only", "--json"]
    status, out, _ = run_cli([*argv, "--run-dir", str(tmp_path)], capsys)
    assert status == 0
    assert _analysed(out) == ["P05067"]
    assert "P05067 was requested more than once: analysed once" in json.loads(out)["notes"]


def test_an_id_typed_twice_alike_is_noted_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same spelling twice, on the command line or in an --ids-file, gets the note as
    well (the command line once dropped exact repeats before analyze could see them)."""
    ids = tmp_path / "ids.txt"
    ids.write_text("P00221\nP00221\n", encoding="utf-8")
    for given in (["P00221", "P00221"], ["--ids-file", str(ids)]):
        argv = ["analyze", *given, "--structure-only", "--json"]
        status, out, _ = run_cli([*argv, "--run-dir", str(tmp_path / given[0])], capsys)
        assert status == 0
        assert _analysed(out) == ["P00221"]
        assert json.loads(out)["notes"] == ["P00221 was requested more than once: analysed once"]


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("A4_HUMAN-2", "A4_HUMAN is the UniProt entry name of P05067 in the bundled data, and "
         "isoforms are named by the primary accession: P05067-2, if that is the one meant"),
        ("P09000-2", "P09000 is a secondary accession of P05067 (A4_HUMAN) in the bundled "
         "data, and isoforms are named by the primary accession: P05067-2"),
        ("P05067_HUMAN", "a name with '_' is a UniProt entry name (such as A4_HUMAN), read "
         "only for the bundled data's entries: give the accession"),
    ],
)  # fmt: skip
def test_a_refused_id_says_what_it_may_have_meant(
    given: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry name or a secondary accession with an isoform's -N, and an entry name
    the bundled data do not know, are refused saying what to give instead (they said
    only which characters are allowed, though entry names are read)."""
    status, out, _ = run_cli(["analyze", given, "--json", "--run-dir", str(tmp_path)], capsys)
    assert status == 1
    [failed] = json.loads(out)["failed_analyses"]
    assert said in failed["error"]
    # ... and the advice at the end says the same, never --source live for it
    _, out, err = run_cli(["analyze", given, "--run-dir", str(tmp_path / "text")], capsys)
    if given.endswith("-2"):
        assert f"run P05067-2 instead of {given}" in out + err
        assert "--source live: " not in out + err


def test_an_id_that_is_no_accession_given_twice_in_two_cases_is_one_request() -> None:
    """An ID given twice in any case is one request with a note, an invalid one too
    (P05067.3, reported as first typed), as a valid one is."""
    output = analyze_sync(["P05067.3", "p05067.3", "bad id!", "BAD ID!"], plan="structure")
    assert output.summary.total_requested == 2
    assert [f.protein_id for f in output.failed_analyses] == ["P05067.3", "bad id!"]
    assert output.notes == [
        "P05067.3 was requested more than once: analysed once",
        "BAD ID! was requested more than once: analysed once",
    ]


def test_an_item_that_is_no_text_fails_saying_so_and_keeps_its_place() -> None:
    """``None`` or a number among the IDs is one failed entry each, in its place, saying
    an ID must be a string (rule 3: invalid input before any request), never taken for an
    accession named "None" or "123"; the text "None" is still checked as an ID."""
    given = [None, 123, "P05067", "None", "123", 123]
    output = analyze_sync(given, plan="structure", timeout=10)
    assert output.summary.total_requested == 5  # (the number 123 twice: once, with a note)
    failed = {f.protein_id: f for f in output.failed_analyses}
    assert failed["None (NoneType)"].error == "Protein ID must be a non-empty string, got None"
    assert failed["123 (int)"].error == "Protein ID must be a non-empty string, got int"
    assert {failed[k].error_type for k in ("None (NoneType)", "123 (int)")} == {"data"}
    assert failed["NONE"].error.startswith("Protein NONE not found")  # the text "None"
    assert failed["123"].error != failed["123 (int)"].error  # the text "123"
    assert [a.protein_id for a in output.completed_analyses] == ["P05067"]
    assert output.notes == ["123 (int) was requested more than once: analysed once"]


def test_a_structure_only_brief_names_every_source_with_its_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A structure-only brief ends with the sources of its figures, as a full brief does:
    each file's repository, path and commit, as the bundle's provenance records them."""
    argv = ["analyze", "Q5VSL9", "--structure-only", "--run-dir", str(tmp_path)]
    status, _, _ = run_cli(argv, capsys)
    assert status == 0
    brief = (tmp_path / "briefs" / "Q5VSL9.md").read_text(encoding="utf-8")
    sources = brief.split("## Sources\n", 1)[1]
    assert "- PAE: AF-Q5VSL9-F1-predicted_aligned_error_v4.json" in sources
    provenance = json.loads((tmp_path / "output.json").read_text())["completed_analyses"][0][
        "figures"
    ]["provenance"]
    assert provenance
    for name, record in provenance.items():
        assert (
            f"{name} ({record['repository']} {record['path']} @{record['commit'][:12]})" in sources
        )


def test_the_note_on_a_protein_asked_for_by_several_names_names_each_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The note on a protein requested again names what was typed, each spelling once (in
    capitals, as IDs are read), and a name resolved twice is noted as resolved once."""
    argv = ["analyze", "P53_HUMAN", "q15086", "P53_HUMAN", "P04637", "Q15086", "--json"]
    status, out, _ = run_cli([*argv, "--structure-only", "--run-dir", str(tmp_path)], capsys)
    assert status == 0
    assert _analysed(out) == ["P04637"]
    assert json.loads(out)["notes"] == [
        "P53_HUMAN is the UniProt entry name of P04637 in the bundled data: analysed as P04637",
        "Q15086 is a secondary accession of P04637 (P53_HUMAN) in the bundled data: "
        "analysed as P04637",
        "P53_HUMAN, Q15086 and P04637 name the same protein, P04637: analysed once",
    ]
    argv = ["analyze", "P53_HUMAN", "p53_human", "--json", "--structure-only"]
    status, out, _ = run_cli([*argv, "--run-dir", str(tmp_path / "again")], capsys)
    assert json.loads(out)["notes"] == [
        "P53_HUMAN is the UniProt entry name of P04637 in the bundled data: analysed as P04637",
        "P53_HUMAN was requested more than once: analysed once",
    ]


MODEL_ENTRY_NAMES = [
    ("FER1_SPIOL", "P00221", "AF-P00221-F1-model_v4.cif"),
    ("ZBT7C_HUMAN", "A1YPR0", "AF-A1YPR0-F1-model_v4.pdb"),
    ("STRP1_HUMAN", "Q5VSL9", "AF-Q5VSL9-F1-model_v4.cif"),
    ("MOTSC_HUMAN", "A0A0C5B5G6", "AF-A0A0C5B5G6-F1-model_v6.cif"),
]
"""Entry names that only the bundled model files give (PDB DBREF, mmCIF _struct_ref.db_code)."""


@pytest.mark.parametrize(("name", "accession", "model_file"), MODEL_ENTRY_NAMES)
def test_entry_names_the_model_files_give_resolve(
    name: str, accession: str, model_file: str, build_script: ModuleType
) -> None:
    """'lyra analyze FER1_SPIOL is refused, though the bundled model file names it': the
    name resolves with its note, and the build read it verbatim from that model file,
    which the entry lists among its sources."""
    assert resolve_protein_id(name) == (
        accession,
        f"{name} is the UniProt entry name of {accession} in the bundled data: "
        f"analysed as {accession}",
    )
    entry = bundled_entries()[accession]
    assert model_file in entry["sources"]
    record = build_script.Record(accession)
    pdb = model_file.endswith(".pdb")
    read = build_script.read_pdb_model if pdb else build_script.read_cif_model
    read(record, RAW / model_file, model_file, entry["alphafold"]["model_version"])
    assert record.pick("entry_name") == (name, model_file)


def test_a_comma_joined_argument_is_split_never_half_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'"P04637,P05067" as one argument gets "did you mean P04637?" and silently drops
    P05067'."""
    argv = ["analyze", "P04637,P05067", "P69905,", "--structure-only", "--json"]
    status, out, _ = run_cli([*argv, "--run-dir", str(tmp_path)], capsys)
    assert status == 0
    assert _analysed(out) == ["P04637", "P05067", "P69905"]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("export.tsv", "Entry\tEntry Name\nP69905,\tHBA_HUMAN\nP04637\tP53_HUMAN\n"),
        ("export.csv", 'Entry,Entry Name,Length\nP69905,HBA_HUMAN,142\n"P04637",P53_HUMAN,393\n'),
    ],
)
def test_table_rows_are_parsed_by_their_delimiter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    """'A malformed row of an Entry table yields the ID P69905,': a table is read by
    its header's delimiter (tab or comma), its accession column alone."""
    ids = tmp_path / name
    ids.write_text(text, encoding="utf-8")
    argv = ["analyze", "--ids-file", str(ids), "--structure-only", "--json"]
    status, out, _ = run_cli([*argv, "--run-dir", str(tmp_path / "r")], capsys)
    assert status == 0
    assert _analysed(out) == ["P69905", "P04637"]


def test_a_file_of_words_is_a_usage_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'A file of plain words is analysed as IDs HELLO and WORLD'."""
    ids = tmp_path / "words.txt"
    ids.write_text("hello\nworld\n", encoding="utf-8")
    status, out, err = run_cli(["analyze", "--ids-file", str(ids)], capsys)
    assert (status, out) == (2, "")
    assert f"{ids} holds no UniProt accession (it reads 'hello', 'world')" in err


def test_random_binary_is_refused_as_not_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27: '100 KB of random bytes → 3,599 IDs'."""
    ids = tmp_path / "random.bin"
    ids.write_bytes(random.Random(27).randbytes(100_000))
    status, out, err = run_cli(["analyze", "--ids-file", str(ids)], capsys)
    assert (status, out) == (2, "")
    assert f"{ids} is not a text file of accessions" in err
    assert not list(tmp_path.glob("runs"))


# --------------------------------------------------------------------------- runs


def test_live_without_a_network_says_so_and_names_the_offline_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """'--source live offline advises "Retry with exponential backoff / --retries 2", the
    wrong fix without a network, and does not say the bundled source works offline'."""
    monkeypatch.setenv("LYRA_AFDB_URL", "http://127.0.0.1:9")  # refused: no network
    monkeypatch.setenv("LYRA_UNIPROT_URL", "http://127.0.0.1:9")
    argv = ["analyze", "P04637", "P05067", "--source", "live", "--run-dir", str(tmp_path)]
    status, out, _ = run_cli(argv, capsys)
    assert status == 1
    nexts = out.split("Next:\n", 1)[1].split("\n\n", 1)[0]
    assert nexts.startswith("  • The network cannot be reached (live data source: Connect")
    assert "--source offline (the default) works without a network" in nexts
    assert nexts.rstrip().endswith("lyra analyze P04637 P05067")
    assert "backoff" not in nexts.lower()
    assert "--retries" not in nexts


def test_the_terminal_shows_the_doubled_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'The terminal of --inject P04637:hang@1 --timeout 2 --retries 1 shows only
    "completed, 2 attempt(s)" where the README promises the doubled timeout'."""
    argv = ["analyze", "P04637", "--inject", "P04637:hang@1", "--timeout", "0.3"]
    status, out, err = run_cli([*argv, "--retries", "1", "--run-dir", str(tmp_path)], capsys)
    assert status == 0
    recovered = (
        "attempt 1 (timeout 0.3 s): timeout; attempt 2 (continuation, timeout doubled to "
        "0.6 s): completed"
    )
    assert f"[1/1] P04637: completed, 2 attempt(s): {recovered}" in err
    assert recovered in out  # the answer's line for the protein


def test_resuming_a_finished_plain_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'A finished non-durable run's --resume reprints it where the README says it is
    refused'."""
    run_cli(["analyze", "P04637", "--run-dir", str(tmp_path)], capsys)
    status, out, err = run_cli(["analyze", "--resume", str(tmp_path)], capsys)
    assert (status, out) == (2, "")
    assert "a run started without --durable, which cannot be resumed" in err
    assert f"its results are in {tmp_path / 'output.json'}" in err


@pytest.mark.slow
def test_sigterm_during_a_streamed_ids_file_run_loses_nothing_and_prints_no_traceback(
    tmp_path: Path,
) -> None:
    """Issue 27: SIGTERM during a large streamed --ids-file run exits 130, every ID is
    either in results.jsonl or in unfinished.txt (once), and stderr has no traceback
    and no 'coroutine was never awaited'."""
    ids = [f"O{n:05d}" for n in range(20_000)]  # accessions the bundle lacks: each fails fast
    listing = tmp_path / "ids.txt"
    listing.write_text("\n".join(ids) + "\n", encoding="utf-8")
    run = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "lyra", "analyze", "--ids-file", str(listing), "--run-dir", run],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONWARNINGS": "default"},
        text=True,
    )
    results = run / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if results.exists() and results.read_text().count("\n") >= 50:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    for noise in ("Traceback", "never awaited", "unhandled exception"):
        assert noise not in err
    finished = [json.loads(line)["protein_id"] for line in results.read_text().splitlines()]
    unfinished = (run / "unfinished.txt").read_text().split()
    assert 50 <= len(finished) < len(ids)
    assert sorted(finished + unfinished) == ids  # every ID once, in one list or the other
    output = json.loads((run / "output.json").read_text())
    assert output["interrupted"] is True
    assert output["summary"]["unfinished"] == len(unfinished)


# --------------------------------------------------------------------------- the request


def test_analyze_takes_the_typed_request_or_the_ids_with_its_fields() -> None:
    """Issue 29: proteins.analyze takes the typed request; analyze(ids, **options) is the
    same request, spelled as keywords, and an unknown option is refused by name."""
    request = AnalyzeRequest(ids=("P04637", "P69905"), plan="structure", timeout=30)
    typed = analyze_sync(request)
    spelled = analyze_sync(["P04637", "P69905"], plan="structure", timeout=30)
    for output in (typed, spelled):
        assert [len(e.tasks) for e in output.completed_analyses] == [2, 2]  # fetch, structure
    assert typed.summary == spelled.summary
    with pytest.raises(ValidationError, match="timeout_s"):
        analyze_sync(["P04637"], timeout_s=30)


def test_help_names_everything_a_run_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'--help lists events.jsonl, reports, briefs and output.json; the run also wrote
    results.jsonl and figures/': every entry of a run directory is named in --help."""
    status, _, _ = run_cli(["analyze", "Q5VSL9", "--run-dir", str(tmp_path)], capsys)
    assert status == 0
    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    written = sorted(path.name for path in tmp_path.iterdir())
    assert {"figures", "results.jsonl", "output.json"} <= set(written)
    for name in written:
        assert (name + ("/" if (tmp_path / name).is_dir() else "")) in text, name


def test_a_blank_id_is_named_blank_wherever_the_run_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'lyra analyze "" prints "• : invalid_task" and "[1/1] : failed", while the Next line
    calls it "(blank)"': one name for it everywhere, and it is still its own failure."""
    status, out, err = run_cli(["analyze", "", "Q5VSL9", "--run-dir", str(tmp_path)], capsys)
    assert status == 1
    assert "• (blank): invalid_task at fetch_protein: Protein ID must be a non-empty" in out
    assert "identifiers (each a UniProt accession, such as P04637 or P05067-2): (blank)" in out
    assert "(blank): failed (invalid_task)" in err
    assert "• :" not in out
    assert "] :" not in err


def test_a_question_no_model_answers_says_so_and_names_its_proteins_as_arguments_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a model to write the answer, a question is not answered in words, and a
    note says so; the entry name it gives is analysed as its accession, as an argument
    is, and a sequence version is refused as it is as an argument."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    question = "Is P00221 an iron-sulfur protein like HBA_HUMAN? Is P04637.2 disordered?"
    argv = ["analyze", "--question", question, "--structure-only", "--json"]
    status, out, _ = run_cli([*argv, "--run-dir", str(tmp_path)], capsys)
    output = json.loads(out)
    assert status == 1  # P04637.2 failed
    assert _analysed(out) == ["P00221", "P69905", "P04637.2"]
    [failed] = output["failed_analyses"]
    assert failed["protein_id"] == "P04637.2"
    assert failed["error"].endswith("a sequence version: give the accession alone, P04637")
    assert output["notes"] == [
        "HBA_HUMAN is the UniProt entry name of P69905 in the bundled data: analysed as P69905",
        rules_note(model=False),
        "The question chose the proteins and the plan; it is not answered in words (no model "
        "writes the answer: set ANTHROPIC_API_KEY for one): the briefs give what the data say "
        "of each protein",
    ]


def test_a_gene_name_in_a_question_is_named_as_not_analysed_never_dropped_unsaid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rules read accessions and entry names only: a gene name the bundled data know
    (TP53) is not analysed, and the notes say so with the accession to give; a gene
    whose protein the run analyses (APP, of P05067) needs no note. With no protein read
    at all, the usage error says the same."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    question = "Compare TP53 with P05067 (APP), structure only"
    argv = ["analyze", "--question", question, "--json", "--run-dir", str(tmp_path / "a")]
    status, out, _ = run_cli(argv, capsys)
    output = json.loads(out)
    assert (status, _analysed(out)) == (0, ["P05067"])
    [gene] = [note for note in output["notes"] if "TP53" in note]
    assert gene.startswith("Not analysed: TP53 in the question is the gene of P04637 (Cellular")
    assert not [note for note in output["notes"] if "APP in the question" in note]
    assert rules_note(model=False) in output["notes"]

    status, out, err = run_cli(["analyze", "--question", "Is TP53 like APP?"], capsys)
    assert (status, out) == (2, "")
    assert "no protein IDs found in the question" in err
    assert "\n  Not analysed: TP53 in the question is the gene of P04637" in err
    assert "\n  Not analysed: APP in the question is the gene of P05067" in err
    assert rules_note(model=False) in err


@pytest.mark.parametrize(
    ("question", "named"),
    [
        ("Compare tp53 with P05067", ["tp53 in the question is the gene of P04637"]),
        ("Is EGFR-TKI resistance linked to P05067?", ["EGFR in the question is the gene of"]),
        ("TP53-MDM2 binding in P05067", ["TP53 in the question is the gene of P04637"]),
        ("Compare HBA_HUMAN with insulin", ["insulin in the question is the name of P01308"]),
        ("THE INS AND OUTS OF P05067", []),  # capitals throughout: INS is a word here
        ("the app store and S proteins", []),  # a word, a letter: no gene
        ("Is the APP isoform P05067-2 disordered?", []),  # its isoform is analysed
        ("TP53 and tp53 mutants, INS (insulin), P05067", ["TP53", "INS"]),  # a note a protein
        ("P05067 (APP) and its isoforms", []),  # the gene of a protein analysed
    ],
)
def test_the_rules_name_the_genes_and_proteins_they_do_not_read(
    question: str, named: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gene is found as genes are written (capitals, or a digit in any case, alone or
    joined by hyphens) and a bundled protein by its name; each is named as not analysed
    unless a protein of the plan is its entry. The rules note says how to have a model
    plan only when none is configured."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    notes = plan_by_rules(question).notes
    assert notes[0] == rules_note(model=False)
    assert len(notes[1:]) == len(named)
    for note, start in zip(notes[1:], named, strict=True):
        assert note.startswith(f"Not analysed: {start}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert plan_by_rules(question).notes[0] == RULES_NOTE
