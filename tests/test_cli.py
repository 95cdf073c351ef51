"""The command line: lyra analyze, delegate and report parse, as a user runs them."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lyra.cli import main
from lyra.cli._analyze_command import STREAM_ABOVE
from raw_proteins import RAW


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(args)
    out, err = capsys.readouterr()
    return status, out, err


def test_analyze_json_mixed_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's command: 2 completed, 1 failed at fetch with its skips, report, exit 1."""
    status, out, _ = run_cli(
        ["analyze", "P04637", "TOTALLY_FAKE_ID", "Q8I3H7", "--json", "--run-dir", str(tmp_path)],
        capsys,
    )
    data = json.loads(out)
    assert status == 1
    assert data["summary"] == {  # PRD-001's four keys: no "unfinished" for a finished run
        "total_requested": 3,
        "successful": 2,
        "partial": 0,
        "failed": 1,
    }
    failed = data["failed_analyses"][0]
    assert failed["protein_id"] == "TOTALLY_FAKE_ID"
    assert failed["failed_at_stage"] == "fetch_protein"
    assert failed["tasks_skipped"] == ["analyze_structure", "reason", "critique", "synthesize"]
    assert (failed["category"], failed["retryable"]) == ("invalid_task", False)
    assert "<failure_category>invalid_task</failure_category>" in failed["report"]
    assert [c["protein_id"] for c in data["completed_analyses"]] == ["P04637", "Q8I3H7"]


def test_analyze_writes_the_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run directory holds events, one report per protein, briefs and the output."""
    run_cli(["analyze", "P04637", "XXXXX", "--run-dir", str(tmp_path)], capsys)
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["P04637.txt", "XXXXX.txt"]
    assert [p.name for p in (tmp_path / "briefs").iterdir()] == ["P04637.md"]
    output = json.loads((tmp_path / "output.json").read_text())
    assert output["summary"]["failed"] == 1
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    names = [e["event"] for e in events]
    assert names.count("delegation_started") == 2
    assert names.count("delegation_failed") == 1
    assert names[-1] == "run_finished"
    assert all({"timestamp", "level", "event"} <= e.keys() for e in events)


def test_analyze_text_output_explains_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --json, briefs are printed and each failure says what to try next."""
    status, out, _ = run_cli(["analyze", "P04637", "XXXXX", "--run-dir", str(tmp_path)], capsys)
    assert status == 1
    assert "# Cellular tumor antigen p53 (P04637)" in out
    assert (
        "Found (1):\n  • P04637 (Cellular tumor antigen p53, AF-P04637-F1 v6), whole-model "
        "mean pLDDT 75.06 (facts_secondary_sources.json: a lower-trust secondary source, "
        "figures quoted elsewhere; no per-residue data)" in out  # its source named
    )
    assert "• XXXXX: invalid_task at fetch_protein: Protein XXXXX not found" in out
    assert "Next:\n  • Check the identifiers (not UniProt accessions" in out
    assert "Tasks usable: 50% of the tasks asked (1 of 2 usable" in out
    assert out.rstrip().endswith("1 of 2 completed, 0 partial, 1 failed.")


def test_a_failed_critical_protein_still_counts_what_was_usable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A quorum lost to a critical failure trusts no answer (confidence 0), but the share
    of the tasks asked that are usable is still what it is: 1 of 2, not 0%."""
    argv = ["analyze", "P04637", "XXXXX", "--critical", "XXXXX", "--run-dir", str(tmp_path)]
    status, out, _ = run_cli(argv, capsys)
    assert status == 1
    assert "Tasks usable: 50% of the tasks asked (critical XXXXX failed" in out


def test_analyze_all_good_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Exit status 0 when every protein completed."""
    status, _, _ = run_cli(["analyze", "P04637", "--run-dir", str(tmp_path)], capsys)
    assert status == 0


def test_question_with_structure_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """IDs are found in a free-text question, and 'structure only' gives that plan."""
    status, out, _ = run_cli(
        [
            "analyze",
            "--question",
            "Is the structure of P04637 reliable? Structure only.",
            "--json",
            "--run-dir",
            str(tmp_path),
        ],
        capsys,
    )
    data = json.loads(out)
    assert status == 0
    tasks = data["completed_analyses"][0]["tasks"]
    assert [t["task_type"] for t in tasks] == ["fetch_protein", "analyze_structure"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["analyze"], "no protein IDs given"),
        (["analyze", "--question", "what about p53?"], "no protein IDs found in the question"),
        (["analyze", "P04637", "--inject", "P04637:explode"], "unknown fault 'explode'"),
        (["analyze", "P04637", "--inject", "P04637:slow"], "needs SECONDS"),
        (["analyze", "P04637", "--inject", "P04637:rate_limit:inf"], "finite number of seconds"),
        (["analyze", "P04637", "--inject", "nonsense"], "is not ID:FAULT"),
        (["analyze", "P04637", "--inject", "Q8I3H7:hang"], "names Q8I3H7, which is not requested"),
        (["analyze", "P04637", "--force"], "--force needs --resume"),
        (["analyze", "P04637", "--worker-wait", "5"], "--worker-wait needs --database-url"),
    ],
)
def test_usage_errors_exit_2_with_a_clear_message(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad input gets exit status 2 and a message naming the problem."""
    status, out, err = run_cli(args, capsys)
    assert (status, out) == (2, "")
    assert message in err


@pytest.mark.parametrize("bad", [["--timeout", "0"], ["--timeout", "x"], ["--concurrency", "0"]])
def test_bad_numbers_are_usage_errors(bad: list[str]) -> None:
    """argparse rejects non-positive timeouts and concurrency with exit status 2."""
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "P04637", *bad])
    assert exit_info.value.code == 2


@pytest.mark.parametrize("command", [["mcp", "--http"], ["a2a"]])
@pytest.mark.parametrize("port", ["65536", "99999", "-1"])
def test_a_port_past_65535_is_a_usage_error(
    command: list[str], port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A port no socket can have is refused, not wrapped to another (99999 bound 34463)."""
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--port", port])
    assert exit_info.value.code == 2
    assert "must be a port, 0 to 65535" in capsys.readouterr().err


def test_a_blank_prompt_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """'lyra delegate "" exits 1 with an invalid_task report suggesting "Break into
    simpler, well-defined tasks"': no task is given, so it is the caller's mistake, as a
    negative --timeout is, and no child runs."""
    with pytest.raises(SystemExit) as exit_info:
        main(["delegate", " ", "--child", "lyra.proteins:ProteinChild"])
    assert exit_info.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "the prompt is empty" in err


def test_hang_once_recovered_with_doubled_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's recovery command: attempt 2 succeeds with a 4 s timeout; events say why."""
    status, out, _ = run_cli(
        [
            "analyze",
            "P04637",
            "--inject",
            "P04637:hang@1",
            "--timeout",
            "2",
            "--retries",
            "1",
            "--json",
            "--run-dir",
            str(tmp_path),
        ],
        capsys,
    )
    assert status == 0
    assert json.loads(out)["completed_analyses"][0]["attempts"] == 2
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    failed = next(e for e in events if e["event"] == "delegation_failed")
    assert (failed["category"], failed["retryable"], failed["attempt"]) == ("timeout", True, 1)
    recovery = next(e for e in events if e["event"] == "recovery_attempt")
    assert (recovery["attempt"], recovery["timeout"]) == (2, 4.0)
    assert recovery["strategy"] in ("timeout_doubling", "continuation")
    started = [e for e in events if e["event"] == "delegation_started"]
    assert [(e["attempt"], e["timeout"]) for e in started] == [(1, 2.0), (2, 4.0)]


PROTEIN_CHILD = ["--child", "lyra.proteins:ProteinChild"]


def test_delegate_prints_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    """lyra delegate runs the child named by --child and prints its report."""
    status, out, _ = run_cli(
        ["delegate", "Analyze P04637", "--timeout", "10", *PROTEIN_CHILD], capsys
    )
    assert status == 0
    assert out.rstrip().endswith("</task_metadata>")
    assert "<status>completed</status>" in out


def test_delegate_prints_a_childs_text_that_cannot_drive_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """'lyra delegate prints child output containing escape sequences raw': a child's
    answer that clears the screen did so; its control characters show as U+FFFD, as in
    lyra analyze's briefs (the report's text is otherwise the same)."""
    (tmp_path / "loud_child.py").write_text(
        "async def child(prompt, ctx):\n    return '\\x1b[2J\\x1b[31mall tasks done'\n"
    )
    monkeypatch.chdir(tmp_path)
    status, out, _ = run_cli(["delegate", "x", "--child", "loud_child:child"], capsys)
    assert status == 0
    assert "\x1b" not in out
    assert "\ufffd[2J\ufffd[31mall tasks done" in out


def test_delegate_failure_exits_one(capsys: pytest.CaptureFixture[str]) -> None:
    """A failed delegation prints the failure report and exits 1."""
    status, out, _ = run_cli(["delegate", "Tell me a joke", "--json", *PROTEIN_CHILD], capsys)
    assert status == 1
    assert json.loads(out)["category"] == "missing_context"


@pytest.mark.parametrize("events", ["missing/events.jsonl", "/dev/full"])
def test_delegate_says_when_its_events_cannot_be_written(
    events: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--events to a file that cannot be opened, or a full disk: the report is still
    printed, stderr says what was lost, and the exit status (4) says it too."""
    if events == "/dev/full" and not Path(events).exists():
        pytest.skip("no /dev/full on this system")
    target = events if events.startswith("/") else str(tmp_path / events)
    argv = ["delegate", "Analyze P04637", *PROTEIN_CHILD, "--events", target]
    status, out, err = run_cli(argv, capsys)
    assert status == 4
    assert "<status>completed</status>" in out
    assert err.startswith(f"lyra delegate: could not write events to {target}: ")


def test_delegate_without_a_child_says_how_to_configure_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No --child, no LYRA_CHILD and no API key: a usage error naming every way to fix it."""
    status, out, err = run_cli(["delegate", "Summarise this"], capsys)
    assert (status, out) == (2, "")
    assert "LYRA_CHILD" in err
    assert "ANTHROPIC_API_KEY" in err


@pytest.mark.parametrize("value", ["nocolon", "a b:c", "x:"])
def test_delegate_child_must_be_module_colon_attribute(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed --child is a usage error that shows the expected form."""
    with pytest.raises(SystemExit) as stop:
        main(["delegate", "task", "--child", value])
    assert stop.value.code == 2
    assert "module:attribute" in capsys.readouterr().err


def test_report_parse_reads_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """lyra report parse turns the reports of a run into JSON with the documented fields."""
    run_cli(["analyze", "P04637", "XXXXX", "--run-dir", str(tmp_path)], capsys)
    transcript = tmp_path / "all.txt"
    transcript.write_text(
        "\n".join(p.read_text() for p in sorted((tmp_path / "reports").iterdir()))
    )
    status, out, _ = run_cli(["report", "parse", str(transcript)], capsys)
    reports = json.loads(out)
    assert status == 0
    assert [(r["status"], r["category"]) for r in reports] == [
        ("completed", None),
        ("failed", "invalid_task"),
    ]
    assert set(reports[1]) == {
        "status",
        "session_id",
        "subject",
        "category",
        "retryable",
        "attempt",
        "message",
        "output",
        "completed_steps",
        "files_modified",
        "blocked_on",
        "suggested_actions",
    }
    # The first of several reports: where its output began cannot be told.
    assert reports[0]["output"] is None


def test_report_parse_gives_a_single_reports_output_and_exits_1_when_none_is_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A completed report alone in its file has its output in the default JSON; a file
    with no report prints an empty list, says so on stderr and exits 1."""
    run_cli(["analyze", "P04637", "--run-dir", str(tmp_path)], capsys)
    status, out, _ = run_cli(["report", "parse", str(tmp_path / "reports" / "P04637.txt")], capsys)
    [report] = json.loads(out)
    assert status == 0
    assert report["status"] == "completed"
    assert report["output"].startswith("# Cellular tumor antigen p53 (P04637)")
    empty = tmp_path / "empty.txt"
    empty.write_text("no report here\n")
    status, out, err = run_cli(["report", "parse", str(empty)], capsys)
    assert (status, json.loads(out)) == (1, [])
    assert "no reports found" in err


def test_report_parse_takes_several_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Several report files give one JSON list, in the order given."""
    run_cli(["analyze", "P04637", "XXXXX", "--run-dir", str(tmp_path)], capsys)
    reports = sorted(str(p) for p in (tmp_path / "reports").iterdir())
    status, out, _ = run_cli(["report", "parse", *reports], capsys)
    assert status == 0
    assert [r["status"] for r in json.loads(out)] == ["completed", "failed"]


def test_report_parse_reads_a_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder stands for every file in it: a run directory gives each protein's report,
    named by its subject (briefs, events and JSON hold no report)."""
    run_cli(["analyze", "P04637", "XXXXX", "--run-dir", str(tmp_path)], capsys)
    status, out, _ = run_cli(["report", "parse", str(tmp_path)], capsys)
    assert status == 0
    assert [(r["subject"], r["status"]) for r in json.loads(out)] == [
        ("P04637", "completed"),
        ("XXXXX", "failed"),
    ]


def test_a_page_for_a_folder_that_does_not_exist_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """lyra logs report --html into a folder that does not exist says so (exit 2) rather
    than making the folder."""
    run_cli(["analyze", "P04637", "--run-dir", str(tmp_path / "run")], capsys)
    page = tmp_path / "typo" / "page.html"
    status, _, err = run_cli(["logs", "report", str(tmp_path / "run"), "--html", str(page)], capsys)
    assert status == 2
    assert err.strip() == f"lyra logs: cannot write {page}: no such folder"
    assert not page.parent.exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_page_that_cannot_be_written_is_exit_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk is no usage error: the page was asked for right and not written."""
    run_cli(["analyze", "P04637", "--run-dir", str(tmp_path / "run")], capsys)
    status, _, err = run_cli(
        ["logs", "report", str(tmp_path / "run"), "--html", "/dev/full"], capsys
    )
    assert status == 4
    assert "cannot write /dev/full" in err


def test_a_run_dir_that_is_a_file_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--run-dir naming a file is one line saying it is a file."""
    afile = tmp_path / "notes.txt"
    afile.write_text("mine")
    status, _, err = run_cli(["analyze", "P04637", "--run-dir", str(afile)], capsys)
    assert (status, err.strip()) == (2, f"lyra: cannot use run directory {afile}: it is a file")
    assert afile.read_text() == "mine"


def test_report_parse_missing_file_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    """A file that does not exist ends with a message, not a traceback: a usage error."""
    status, out, err = run_cli(["report", "parse", "/nonexistent/report.txt"], capsys)
    assert (status, out) == (2, "")
    assert err.strip() == "lyra: cannot read /nonexistent/report.txt: No such file or directory"


def test_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    """lyra analyze --help explains the faults, gives examples and the exit codes."""
    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for text in ("rate_limit:SECS", "examples:", "exit status:", "--run-dir"):
        assert text in out
    # When a run streams is said as the program decides it: by size, not by source.
    assert f"a run of more than {STREAM_ABOVE} proteins streams" in out


def test_sigint_stops_a_run_at_once(tmp_path: Path) -> None:
    """Ctrl+C during a multi-protein run exits promptly with 130 and no traceback, and
    the run directory ends as the run did: output.json holds the protein that finished
    and names those that did not, and the log closes with run_interrupted."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lyra",
            "analyze",
            "P04637",
            "Q8I3H7",
            "P69905",
            "--inject",
            "Q8I3H7:hang",
            "--inject",
            "P69905:hang",
            "--timeout",
            "60",
            "--run-dir",
            str(tmp_path),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    events = tmp_path / "events.jsonl"

    def under_way() -> bool:
        text = events.read_text() if events.exists() else ""
        return text.count("delegation_started") >= 3 and "delegation_completed" in text

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not under_way():
        time.sleep(0.05)
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=10)
    assert time.monotonic() - sent < 3
    assert process.returncode == 130
    assert "Traceback" not in err
    output = json.loads((tmp_path / "output.json").read_text())
    assert json.loads(out) == output  # --json: a script reads what finished, and what not
    assert output["interrupted"] is True
    assert [e["protein_id"] for e in output["completed_analyses"]] == ["P04637"]
    assert output["unfinished"] == ["Q8I3H7", "P69905"]  # in request order
    assert output["summary"] == {
        "total_requested": 3,
        "successful": 1,
        "partial": 0,
        "failed": 0,
        "unfinished": 2,
    }
    listed = tmp_path / "unfinished.txt"
    assert listed.read_text() == "Q8I3H7\nP69905\n"
    assert f"the 2 that did not finish are listed in {listed}" in err
    assert f"lyra analyze --ids-file {listed}" in err
    last = json.loads(events.read_text().splitlines()[-1])
    assert (last["event"], last["unfinished"]) == ("run_interrupted", 2)


def test_ctrl_c_pressed_twice_still_saves_every_protein_once(tmp_path: Path) -> None:
    """A second Ctrl+C right after the first, while the run saves what it did, is said
    and waited out: no traceback (it was thrown into asyncio's shutdown: a page of
    one, coroutines never awaited), and every protein asked is in results.jsonl or
    unfinished.txt, once."""
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(f"Q1{n:04d}\n" for n in range(3000)))  # none bundled: quick
    run = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "lyra", "analyze", "--ids-file", str(ids), "--concurrency",
         "64", "--run-dir", str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    events = run / "events.jsonl"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (
        not events.exists() or events.read_text().count("delegation_started") < 200
    ):
        time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "Traceback" not in err
    assert "never awaited" not in err
    lines = (run / "results.jsonl").read_text().splitlines()
    done = [json.loads(line)["protein_id"] for line in lines]
    left = (run / "unfinished.txt").read_text().split()
    assert sorted(done + left) == sorted(ids.read_text().split())


def test_resuming_an_interrupted_plain_run_is_refused_and_says_what_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--resume of a run started without --durable that was interrupted is exit 2, never
    'already finished' with exit 0: it names the proteins' list to run instead."""
    from lyra.proteins import AnalysisOutput, Summary

    summary = Summary(total_requested=3, successful=1, partial=0, failed=0, unfinished=2)
    output = AnalysisOutput.empty().model_copy(
        update={"summary": summary, "interrupted": True, "unfinished": ["Q8I3H7", "P69905"]}
    )
    (tmp_path / "output.json").write_text(output.model_dump_json())
    status, out, err = run_cli(["analyze", "--resume", str(tmp_path)], capsys)
    assert (status, out) == (2, "")
    assert "interrupted before 2 of its proteins finished" in err
    assert f"lyra analyze --ids-file {tmp_path / 'unfinished.txt'}" in err


def test_a_refused_durable_request_leaves_no_run_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A durable run refused for bad input writes nothing, so the folder stays usable."""
    folder = tmp_path / "run"
    status, _, err = run_cli(
        [
            "analyze",
            "P04637",
            "--durable",
            "--run-dir",
            str(folder),
            "--inject",
            "Q99999:not_found",
        ],
        capsys,
    )
    assert status == 2
    assert "not requested" in err
    assert not (folder / "run.json").exists()


# -- the delegation tree from the command line (DESIGN §12) -------------------------------


def test_delegate_keeps_a_budget(capsys: pytest.CaptureFixture[str]) -> None:
    """--max-tokens ends a child that spends past it: exit 1, timeout/budget, its usage."""
    argv = ["delegate", "spend", "--child", "fakes.children:spender", "--max-tokens", "500"]
    status, out, _ = run_cli([*argv, "--json"], capsys)
    report = json.loads(out)
    assert status == 1
    assert (report["category"], report["error_type"], report["tokens_used"]) == (
        "timeout",
        "budget",
        800,
    )


def test_delegate_ends_an_idle_child(capsys: pytest.CaptureFixture[str]) -> None:
    """--idle-timeout ends a child that stops making progress long before --timeout."""
    argv = ["delegate", "x", "--child", "fakes.children:stalls", "--idle-timeout", "0.2"]
    started = time.monotonic()
    status, out, _ = run_cli([*argv, "--timeout", "30", "--json"], capsys)
    assert time.monotonic() - started < 5
    assert (status, json.loads(out)["error_type"]) == (1, "idle")


def test_analyze_ends_an_idle_protein_and_spares_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hung protein ends at --idle-timeout as timeout/idle; the others complete."""
    argv = ["analyze", "P04637", "Q8I3H7", "--inject", "P04637:hang", "--idle-timeout", "0.3"]
    status, out, _ = run_cli([*argv, "--json", "--run-dir", str(tmp_path)], capsys)
    output = json.loads(out)
    assert status == 1
    assert [e["protein_id"] for e in output["completed_analyses"]] == ["Q8I3H7"]
    (failed,) = output["failed_analyses"] + output["partial_analyses"]
    assert failed["category"] == "timeout"
    assert "<error_type>idle</error_type>" in (tmp_path / "reports" / "P04637.txt").read_text()


def test_ids_and_files_after_an_option_are_read_as_the_list_they_belong_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``lyra analyze P04637 --timeout 60 Q8I3H7`` analyses both (argparse alone refused
    Q8I3H7 as unrecognised), and so for ``logs``' files; an unknown option is still an
    error, and so is a word a command has no list for."""
    argv = ["analyze", "P04637", "--timeout", "60", "Q8I3H7", "--json"]
    status, out, _ = run_cli([*argv, "--run-dir", str(tmp_path / "run")], capsys)
    assert status == 0
    assert [c["protein_id"] for c in json.loads(out)["completed_analyses"]] == ["P04637", "Q8I3H7"]
    events = tmp_path / "run" / "events.jsonl"
    again = tmp_path / "again.jsonl"
    again.write_bytes(events.read_bytes())
    status, out, err = run_cli(["logs", "stats", str(events), "--json", str(again)], capsys)
    assert (status, json.loads(out)["completed"]) == (0, 2)
    assert "counted 2 repeated" in err  # the second file was read: its sessions are the same
    argv = ["analyze", "--run-dir", str(tmp_path / "dashed"), "P04637", "--json", "--", "Q8I3H7"]
    status, out, _ = run_cli(argv, capsys)
    assert [c["protein_id"] for c in json.loads(out)["completed_analyses"]] == ["P04637", "Q8I3H7"]
    for argv in (["analyze", "P04637", "--timeout", "60", "--bogus"], ["mcp", "extra"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert "unrecognized arguments" in capsys.readouterr().err


def test_logs_stats_totals_what_each_outcome_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """lyra logs stats adds up tokens, cost and turns per outcome: what the failures cost."""
    events = tmp_path / "events.jsonl"
    base = ["delegate", "spend", "--child", "fakes.children:spender", "--events", str(events)]
    run_cli(base, capsys)
    run_cli([*base, "--max-tokens", "500"], capsys)
    status, out, _ = run_cli(["logs", "stats", str(events), "--json"], capsys)
    stats = json.loads(out)
    assert status == 0
    completed = {"delegations": 1, "tokens": 1200, "cost_usd": 0.03, "turns": 3}
    timed_out = {"delegations": 1, "tokens": 800, "cost_usd": 0.02, "turns": 2}
    assert (stats["spend"]["completed"], stats["spend"]["timeout"]) == (completed, timed_out)
    assert (stats["tokens_used"], stats["cost_usd"], stats["turns"]) == (2000, 0.05, 5)
    status, table, _ = run_cli(["logs", "stats", str(events)], capsys)
    assert "timeout          1     800  $0.0200      2" in table


def test_analyze_keeps_a_run_wide_turn_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--max-turns is one budget for the whole run (each protein stage is a turn): the
    proteins it covers complete; the one that goes over is stopped as timeout/budget;
    the rest never start; every protein is still reported once."""
    ids = ["P04637", "Q8I3H7", "P69905"]
    argv = ["analyze", *ids, "--max-turns", "7", "--concurrency", "1", "--json"]
    status, out, _ = run_cli([*argv, "--run-dir", str(tmp_path)], capsys)
    output = json.loads(out)
    assert status == 1
    assert [e["protein_id"] for e in output["completed_analyses"]] == ["P04637"]
    stopped = {e["protein_id"]: e for e in output["failed_analyses"] + output["partial_analyses"]}
    assert sorted(stopped) == ["P69905", "Q8I3H7"]
    assert {e["category"] for e in stopped.values()} == {"timeout"}
    for protein in stopped:
        report = (tmp_path / "reports" / f"{protein}.txt").read_text()
        assert "<error_type>budget</error_type>" in report
    assert "before the attempt started" in stopped["P69905"]["report"]


# -- proteome scale: IDs from a file, results streamed ---------------------------------------


@pytest.mark.parametrize(
    "encoded",
    [
        "\ufeffP04637\r\nP69905\r\n".encode(),  # Excel's "CSV UTF-8", Notepad's UTF-8
        "\ufeffP04637\nP69905\n".encode("utf-16-le"),  # Notepad's "Unicode"
        "P04637\nP69905\n".encode("utf-16"),
        "\ufeffP04637\r\n\ufeffP69905\r\n".encode(),  # two such files joined (cat)
    ],
)
def test_an_ids_file_saved_by_windows_tools_reads_every_accession(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], encoded: bytes
) -> None:
    """A byte order mark is no part of the first accession, and UTF-16 is read as
    text: both proteins complete, none is 'invalid' for an invisible character."""
    ids = tmp_path / "ids.txt"
    ids.write_bytes(encoded)
    argv = ["analyze", "--ids-file", str(ids), "--json", "--run-dir", str(tmp_path / "r")]
    status, out, _ = run_cli(argv, capsys)
    output = json.loads(out)
    assert status == 0
    assert [e["protein_id"] for e in output["completed_analyses"]] == ["P04637", "P69905"]


def test_every_ids_file_given_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--ids-file repeated adds each file's accessions (only the last was read); a file
    named twice is read once."""
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("P04637\n", encoding="utf-8")
    second.write_text("P69905\n", encoding="utf-8")
    files = ["--ids-file", str(first), "--ids-file", str(second), "--ids-file", str(first)]
    argv = ["analyze", *files, "--json", "--run-dir", str(tmp_path / "r")]
    status, out, _ = run_cli(argv, capsys)
    assert status == 0
    assert [e["protein_id"] for e in json.loads(out)["completed_analyses"]] == ["P04637", "P69905"]


def test_an_ids_file_may_be_a_list_a_line_or_a_uniprot_export(tmp_path: Path) -> None:
    """Several accessions a line (spaces, tabs or commas) are each read; of a table
    whose tab-separated header names its accession column (UniProt's exports, 'Entry')
    only that column, without its header."""
    from lyra.cli._request import read_ids

    listed = tmp_path / "listed.txt"
    listed.write_text("P04637 P69905,Q8I3H7\n# more\nP05067-2, p38398\n", encoding="utf-8")
    assert read_ids(str(listed)) == ["P04637", "P69905", "Q8I3H7", "P05067-2", "p38398"]
    export = tmp_path / "uniprotkb.tsv"
    export.write_text(
        "Entry\tEntry Name\tProtein names\n"
        "P04637\tP53_HUMAN\tCellular tumor antigen p53\n"
        "P69905\tHBA_HUMAN\tHemoglobin subunit alpha\n",
        encoding="utf-8",
    )
    assert read_ids(str(export)) == ["P04637", "P69905"]
    mapping = tmp_path / "idmapping.tsv"  # UniProt's ID mapping: the accessions second
    mapping.write_text("From\tEntry\tEntry Name\nTP53\tP04637\tP53_HUMAN\n", encoding="utf-8")
    assert read_ids(str(mapping)) == ["P04637"]
    row = tmp_path / "row.txt"  # a spreadsheet row pasted: every cell an accession
    row.write_text("P04637\tP69905\tQ8I3H7\n", encoding="utf-8")
    assert read_ids(str(row)) == ["P04637", "P69905", "Q8I3H7"]


def test_an_ids_file_that_is_fasta_gives_the_accessions_its_headers_name(
    tmp_path: Path,
) -> None:
    """A FASTA file (UniProt's download, or the bundle's own) gives one accession a
    header; its sequence lines are never read as IDs (they were: 26 of 27 "proteins"
    failed, a sequence line and the header's words among them)."""
    from lyra.cli._request import read_ids

    uniprot = tmp_path / "uniprotkb.fasta"
    uniprot.write_text(
        ">sp|P04637|P53_HUMAN Cellular tumor antigen p53 OS=Homo sapiens\nMEEPQSDPSV\n"
        ">tr|Q8I3H7|Q8I3H7_PLAF7 Uncharacterized protein\nMKLLV\nGSTAA\n",
        encoding="utf-8",
    )
    assert read_ids(str(uniprot)) == ["P04637", "Q8I3H7"]
    bundled = read_ids(str(RAW / "P05067.fasta"))
    assert bundled == ["P05067"]
    commented = tmp_path / "commented.fasta"  # a comment first, headers indented
    commented.write_text("# from UniProt\n\n  >P04637|P53_HUMAN\nMEEPQ\n", encoding="utf-8")
    assert read_ids(str(commented)) == ["P04637"]


def test_a_list_of_accessions_then_fasta_is_a_usage_error_not_sequences_read_as_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that lists accessions and then holds FASTA is refused at the first header:
    its sequence lines were read as IDs, each a failed "protein"."""
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("P04637\nP69905\n>sp|P05067|A4_HUMAN APP\nMLPGLALLLL\n", encoding="utf-8")
    status, out, err = run_cli(["analyze", "--ids-file", str(mixed)], capsys)
    assert (status, out) == (2, "")
    assert f"{mixed}, line 3, is a FASTA header after a list of accessions" in err


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "accession\n"])
def test_an_ids_file_without_accessions_is_a_usage_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text(text, encoding="utf-8")
    status, out, err = run_cli(["analyze", "--ids-file", str(ids)], capsys)
    assert (status, out) == (2, "")
    assert f"no protein IDs in {ids}" in err


def test_ids_from_a_file_are_read_like_ids_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--ids-file: comments (whole lines or after an ID) and blank lines skipped,
    duplicates analysed once, every protein once in results.jsonl; a short list is
    printed and listed in the output like IDs given as arguments."""
    ids = tmp_path / "ids.txt"
    text = "# my proteins\nP04637\n\n  p69905  # haemoglobin\nP04637\nXXXXX\n"
    ids.write_text(text, encoding="utf-8")
    status, out, _ = run_cli(
        ["analyze", "--ids-file", str(ids), "--run-dir", str(tmp_path / "r")], capsys
    )
    lines = [
        json.loads(line) for line in (tmp_path / "r" / "results.jsonl").read_text().splitlines()
    ]
    assert status == 1
    assert sorted((e["protein_id"], e["kind"]) for e in lines) == [
        ("P04637", "completed"),
        ("P69905", "completed"),
        ("XXXXX", "failed"),
    ]
    assert "2 of 3 completed, 0 partial, 1 failed." in out
    assert "# Cellular tumor antigen p53" in out  # a brief per protein, as for arguments
    saved = json.loads((tmp_path / "r" / "output.json").read_text())
    assert saved["streamed"] is False
    assert [e["protein_id"] for e in saved["failed_analyses"]] == ["XXXXX"]


def test_more_than_a_hundred_proteins_stream_to_results_jsonl_once_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Over 100 proteins (here from a file) the run streams: each once in results.jsonl,
    a compact stdout (counts and failures by category, not briefs), empty entry lists;
    a file of fewer does not stream."""
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(["P04637", *(f"X{n:04d}" for n in range(110))]), encoding="utf-8")
    status, out, _ = run_cli(
        ["analyze", "--ids-file", str(ids), "--run-dir", str(tmp_path / "r")], capsys
    )
    lines = (tmp_path / "r" / "results.jsonl").read_text().splitlines()
    assert status == 1
    assert len(lines) == len({json.loads(line)["protein_id"] for line in lines}) == 111
    assert "1 of 111 completed, 0 partial, 110 failed." in out
    assert "invalid_task     110" in out
    assert "# Cellular tumor antigen p53" not in out
    # The Next lines name the failures listed (20), and say the rest are elsewhere.
    assert "90 more not completed are in results.jsonl" in out
    saved = json.loads((tmp_path / "r" / "output.json").read_text())
    assert (saved["streamed"], saved["completed_analyses"]) == (True, [])
    ids.write_text("\n".join(["P04637", *(f"X{n:04d}" for n in range(STREAM_ABOVE - 1))]))
    run_cli(["analyze", "--ids-file", str(ids), "--run-dir", str(tmp_path / "few")], capsys)
    few = json.loads((tmp_path / "few" / "output.json").read_text())
    assert (few["streamed"], len(few["completed_analyses"])) == (False, 1)


def test_ids_from_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--ids-file - reads the accessions from standard input."""
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("P04637\nQ8I3H7\n"))
    argv = ["analyze", "--ids-file", "-", "--json", "--run-dir", str(tmp_path)]
    status, out, _ = run_cli(argv, capsys)
    assert (status, json.loads(out)["summary"]["successful"]) == (0, 2)


def test_a_missing_ids_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An --ids-file that cannot be read is exit 2 with one line naming it."""
    status, out, err = run_cli(["analyze", "--ids-file", str(tmp_path / "nope.txt")], capsys)
    assert (status, out) == (2, "")
    assert "nope.txt" in err


@pytest.mark.anyio
async def test_a_streamed_analysis_keeps_no_entry_it_need_not(tmp_path: Path) -> None:
    """stream=True: the output holds counts and the answer, not the entries, and a
    critical protein retried after the first round is in results.jsonl once."""
    from lyra.proteins import analyze
    from lyra.supervisor import QuorumPolicy

    output = await analyze(
        iter(["P04637", "Q8I3H7", "XXXXX"]),
        run_dir=tmp_path,
        stream=True,
        faults=["Q8I3H7:tool_error"],
        quorum=QuorumPolicy(critical=frozenset({"Q8I3H7"})),
        timeout=5,
    )
    assert output.completed_analyses == output.failed_analyses == []
    assert output.quorum is not None
    assert "critical Q8I3H7 failed" in output.quorum.reason  # after its retry round
    assert (output.summary.successful, output.summary.failed) == (1, 2)
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["protein_id"] for line in lines) == [
        "P04637",
        "Q8I3H7",
        "XXXXX",
    ]


@pytest.mark.anyio
async def test_a_streamed_answer_counts_every_failure_not_the_lines_it_shows(
    tmp_path: Path,
) -> None:
    """A streamed run lists a sample of each kind; the count beside the heading is the
    run's, and the sample ends with how many more there are."""
    from lyra.proteins import analyze
    from lyra.proteins._tally import SAMPLE

    ids = ["P04637", *(f"ZZ{i:04d}" for i in range(SAMPLE + 10))]
    output = await analyze(iter(ids), run_dir=tmp_path, stream=True, timeout=5)
    assert output.answer is not None
    assert f"Could not be analysed ({SAMPLE + 10}):" in output.answer
    assert "… and 10 more (results.jsonl has every one)" in output.answer
    assert "Found (1):" in output.answer
    assert output.answer.count("\n  • ZZ") == SAMPLE


@pytest.mark.anyio
async def test_a_stopped_streamed_analysis_names_every_protein_it_did_not_finish(
    tmp_path: Path,
) -> None:
    """A streamed run stopped from outside lists, in output.json and unfinished.txt,
    the proteins handed to a child and not finished and then the input never read;
    the summary counts them, so that it adds up to every protein requested."""
    import anyio

    from lyra.proteins import analyze

    ids = ["P04637", "Q8I3H7", "P69905", *(f"ZZ{i:04d}" for i in range(30))]
    with anyio.move_on_after(1.5):
        await analyze(
            iter(ids),
            run_dir=tmp_path,
            stream=True,
            concurrency=2,
            faults=["Q8I3H7:hang", "P69905:hang"],
            timeout=60,
        )
    output = json.loads((tmp_path / "output.json").read_text())
    assert output["interrupted"] is True
    assert output["unfinished"] == ["Q8I3H7", "P69905", *ids[3:]]  # in request order
    summary = output["summary"]
    assert (summary["successful"], summary["unfinished"]) == (1, len(ids) - 1)
    assert summary["total_requested"] == len(ids)
    listed = (tmp_path / "unfinished.txt").read_text().split()
    assert listed == output["unfinished"]
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    written = [json.loads(line)["protein_id"] for line in lines]
    assert written == ["P04637"]  # every protein once: finished or listed, never both


_INTERRUPTED_INPUT = """
import sys, anyio
from lyra.proteins import analyze

class Interrupting:  # an ID whose reading is interrupted, as a signal may interrupt any bytecode
    def __str__(self):
        raise KeyboardInterrupt

ids = ["XXXXX", "P04637", "P69905", Interrupting(), "Q8I3H7", "P38398", "P05067"]
anyio.run(lambda: analyze(iter(ids), run_dir=sys.argv[1], stream=True, concurrency=1))
"""


def test_an_interrupt_inside_the_input_still_names_the_rest_of_it(tmp_path: Path) -> None:
    """Ctrl+C raised while a streamed run reads its input (in a process of its own:
    the interrupt leaves the event loop): the proteins after that point are still read
    and named as unfinished, for the input outlives the interrupt; the failures so far
    are counted by category, as a finished run's are."""
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_INPUT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "KeyboardInterrupt" in done.stderr
    output = json.loads((tmp_path / "output.json").read_text())
    assert output["unfinished"][-3:] == ["Q8I3H7", "P38398", "P05067"]
    assert "P04637" not in output["unfinished"]  # it finished before the interrupt
    summary = output["summary"]
    assert (summary["successful"], summary["failed"], summary["unfinished"]) == (1, 1, 4)
    assert summary["total_requested"] == 6
    assert output["by_category"] == {"invalid_task": 1}
    assert (tmp_path / "unfinished.txt").read_text().split() == output["unfinished"]


# -- the live view -------------------------------------------------------------------------


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_a_terminal_shows_a_live_table_of_the_running_children(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal, stderr shows a table of the running children (what each is doing,
    its attempt, elapsed and idle time) titled with the counts; stdout stays data."""
    screen = Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    argv = ["analyze", "P04637", "Q8I3H7", "--inject", "P04637:slow:0.3", "--json"]
    status = main([*argv, "--run-dir", str(tmp_path)])
    out = capsys.readouterr().out
    drawn = screen.getvalue()
    assert status == 0
    assert json.loads(out)["summary"]["successful"] == 2  # stdout is only the JSON
    for heading in ("protein", "doing", "attempt", "elapsed", "idle"):
        assert heading in drawn
    assert "P04637" in drawn
    assert "[2/2] 2 completed, 0 partial, 0 failed" in drawn


def test_off_a_terminal_progress_is_plain_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Piped, stderr gets one plain line per finished protein (no escape codes)."""
    argv = ["analyze", "P04637", "XXXXX", "--run-dir", str(tmp_path)]
    _, _, err = run_cli(argv, capsys)
    assert "] XXXXX: failed (invalid_task), 1 attempt(s)" in err
    assert "[2/2] " in err
    assert "\x1b[" not in err


@pytest.mark.anyio
async def test_running_attempts_can_be_observed() -> None:
    """Inside observing(), running() says what each attempt is doing right now."""
    from lyra import ChildContext, Supervisor
    from lyra.delegation import observing, running

    seen: list[Any] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        ctx.step("Read the input")

        async def tool() -> None:
            seen.extend(running())

        await ctx.tool("lookup", tool)
        return "done"

    with observing():
        await Supervisor(child).delegate("x", timeout=5, subject="S")
        after = running()
    (view,) = seen
    assert (view.subject, view.doing, view.attempt) == ("S", "running lookup", 1)
    assert view.elapsed >= view.idle >= 0
    assert after == []
    assert running() == []  # nobody observes any more


TESTS = Path(__file__).resolve().parent


def lyra_process(
    *args: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """The real ``lyra`` command in a fresh interpreter, with tests/ importable."""
    environment = {"PATH": os.environ["PATH"], "PYTHONPATH": str(TESTS), **env}
    return subprocess.run(
        [sys.executable, "-m", "lyra", *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=cwd,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("json_flag", [["--json"], []], ids=["json", "report"])
def test_a_childs_own_stdout_never_reaches_delegates_data(json_flag: list[str]) -> None:
    """What a child writes to stdout -- print(), descriptor 1, a subprocess -- goes to
    stderr; stdout holds the report (or JSON that parses) alone."""
    done = lyra_process("delegate", "hello", "--child", "fakes.children:noisy", *json_flag)
    assert done.returncode == 0, done.stderr
    if json_flag:
        assert json.loads(done.stdout)["output"] == "said: hello"
    else:
        assert done.stdout.startswith("said: hello\n")
    assert "noise" not in done.stdout
    for noise in ("from print: hello", "from the descriptor", "from a subprocess"):
        assert f"noise {noise}" in done.stderr


MY_CHILD = """\
async def agent(prompt, ctx):
    return f"mine: {prompt}"


def make(greeting="mine"):
    async def built(prompt, ctx):
        return f"{greeting}: {prompt}"

    return built


class Mine:
    async def run(self, prompt, ctx):
        return f"mine: {prompt}"
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["--child", "LYRA_CHILD"])
@pytest.mark.parametrize("attribute", ["agent", "make", "Mine"], ids=["child", "factory", "class"])
def test_a_child_module_in_the_current_directory_is_found(
    tmp_path: Path, how: str, attribute: str
) -> None:
    """``mychild.py`` in the folder lyra runs from is importable by name, as with python -m;
    the attribute is a child, or a function or class that builds one with no arguments."""
    (tmp_path / "mychild.py").write_text(MY_CHILD, encoding="utf-8")
    target = f"mychild:{attribute}"
    args, env = (["--child", target], {}) if how == "--child" else ([], {"LYRA_CHILD": target})
    done = subprocess.run(
        [str(Path(sys.executable).with_name("lyra")), "delegate", "hi", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], **env},
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout.splitlines()[0]) == (0, "mine: hi"), done.stderr


@pytest.mark.slow
def test_a_child_module_that_is_nowhere_names_where_it_was_looked_for(tmp_path: Path) -> None:
    """A missing child module is one line naming the folders searched and the fixes."""
    done = lyra_process("delegate", "hi", "--child", "nochild:agent", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    message = done.stderr.strip()
    assert message.startswith(
        "lyra: cannot load the child nochild:agent: no module named 'nochild'"
    )
    assert str(tmp_path) in message
    assert "nochild.py" in message
    assert "PYTHONPATH" in message


@pytest.mark.slow
def test_a_child_whose_own_import_fails_says_what_is_missing(tmp_path: Path) -> None:
    """A child module found but importing a missing package names that package, not the child."""
    (tmp_path / "needy.py").write_text("import not_installed_anywhere\n", encoding="utf-8")
    done = lyra_process("delegate", "hi", "--child", "needy:agent", cwd=tmp_path)
    assert done.returncode == 2
    assert "No module named 'not_installed_anywhere'" in done.stderr


@pytest.mark.slow
def test_a_plain_analysis_loads_nothing_of_the_durable_engine(tmp_path: Path) -> None:
    """``lyra analyze P04637 --run-dir DIR`` (no --durable) never imports lyra.durable,
    so a plain run starts without the durable engine's cost."""
    code = (
        "import sys\nfrom lyra.cli import main\n"
        f"status = main(['analyze', 'P04637', '--run-dir', {str(tmp_path / 'run')!r}])\n"
        "print(status, sorted(m for m in sys.modules if m.startswith(('lyra.durable', 'dbos'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stderr


def test_every_command_and_action_explains_itself_in_its_help() -> None:
    """Every ``lyra`` command and action has a description in its --help (``lyra report``
    and the ``lyra logs`` actions had only their usage lines)."""
    import argparse

    from lyra.cli._main import build_parser

    def walk(parser: argparse.ArgumentParser, name: str) -> list[tuple[str, str | None]]:
        found = [(name, parser.description)]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    found += walk(child, f"{name} {sub}")
        return found

    undescribed = [name for name, text in walk(build_parser(), "lyra") if not text]
    assert undescribed == []
