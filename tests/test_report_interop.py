"""Reports written by capybara-vibe, whose sub-agent reports lyra's format comes from.

The examples follow github.com/Haiduongcable/capybara-vibe: its success report
(``_generate_execution_summary`` in ``src/capybara/tools/builtin/delegate.py``,
documented with the example below in ``docs/execution-tracking.md``), the same
function's fallback ``<task_metadata>`` with a ``<duration>`` tag, and its
failure report (``ChildFailure.to_context_string`` in
``src/capybara/core/delegation/child_errors.py``).
"""

from __future__ import annotations

import io

import pytest

from lyra import (
    FailureCategory,
    TaskReport,
    extract_blocker,
    extract_category,
    extract_completed_steps,
    extract_files_modified,
    extract_suggested_actions,
    find_reports,
    is_retryable,
    parse_report,
    render_report,
)
from lyra.logs import iter_reports

# docs/execution-tracking.md, "Example Output", as capybara-vibe prints it.
CAPYBARA_SUCCESS = """\
Task completed. Modified authentication to use JWT tokens.

<execution_summary>
  <session_id>child-abc-123</session_id>
  <status>completed</status>
  <duration>45.23s</duration>
  <success_rate>92%</success_rate>

  <files>
    <read count="5">src/auth.py, src/models.py, tests/test_auth.py, requirements.txt, README.md</read>
    <modified count="2">src/auth.py, tests/test_auth.py</modified>
  </files>

  <tools total="13">
    read_file: 5x
    edit_file: 2x
    bash: 4x
    grep: 2x
  </tools>

  <errors count="1">
    • bash: npm test failed with exit code 1
  </errors>
</execution_summary>"""  # noqa: E501 - as capybara-vibe writes it

# delegate.py's fallback when a child kept no execution log: <duration> in the metadata.
CAPYBARA_FALLBACK = """\
Refactored the parser into two functions.

<task_metadata>
  <session_id>child-7f3a</session_id>
  <status>completed</status>
  <duration>12.50s</duration>
</task_metadata>"""

# to_context_string of a timeout (the values _analyze_timeout_failure gives):
# no blank line before "Blocked on:", the way capybara-vibe lays it out.
CAPYBARA_TIMEOUT = """\
Child agent failed: Child timed out after 300.0s

Category: timeout
Duration: 300.4s
Retryable: Yes

Work completed before failure:
  ✓ Created 2 files
  ✓ Modified 1 files

Files modified: src/config.py, tests/test_config.py
Blocked on: Time limit insufficient

Suggested recovery actions:
  • Retry with timeout=600s
  • Break task into smaller subtasks

<task_metadata>
  <session_id>child-timeout-1</session_id>
  <status>failed</status>
  <failure_category>timeout</failure_category>
  <retryable>true</retryable>
</task_metadata>"""

# to_context_string of an exception (ValueError in tests/test_delegate_tool.py):
# no steps ("    None") and no files.
CAPYBARA_ERROR = """\
Child agent failed: ValueError: Simulated error

Category: invalid_task
Duration: 0.1s
Retryable: No

Work completed before failure:
    None

Files modified: none
Blocked on: Simulated error

Suggested recovery actions:
  • Clarify task requirements
  • Break into simpler tasks
  • Provide more specific instructions

<task_metadata>
  <session_id>child-error-2</session_id>
  <status>failed</status>
  <failure_category>invalid_task</failure_category>
  <retryable>false</retryable>
</task_metadata>"""


def test_capybara_success_report_is_read() -> None:
    """An <execution_summary> success gives its status, output, session, duration and files."""
    report = parse_report(CAPYBARA_SUCCESS)
    assert report == TaskReport(
        status="completed",
        output="Task completed. Modified authentication to use JWT tokens.",
        session_id="child-abc-123",
        duration=45.23,
        files_modified=("src/auth.py", "tests/test_auth.py"),
    )


def test_capybara_duration_tag_is_read() -> None:
    """A <duration>12.50s</duration> metadata tag becomes the report's duration."""
    report = parse_report(CAPYBARA_FALLBACK)
    assert (report.status, report.session_id, report.duration) == ("completed", "child-7f3a", 12.5)
    assert report.output == "Refactored the parser into two functions."


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        (
            CAPYBARA_TIMEOUT,
            (
                FailureCategory.TIMEOUT,
                True,
                ["Created 2 files", "Modified 1 files"],
                ["src/config.py", "tests/test_config.py"],
                "Time limit insufficient",
                ["Retry with timeout=600s", "Break task into smaller subtasks"],
            ),
        ),
        (
            CAPYBARA_ERROR,
            (
                FailureCategory.INVALID_TASK,
                False,
                [],
                [],
                "Simulated error",
                [
                    "Clarify task requirements",
                    "Break into simpler tasks",
                    "Provide more specific instructions",
                ],
            ),
        ),
    ],
)
def test_capybara_failure_reports_are_read_field_for_field(text: str, fields: tuple) -> None:
    """capybara-vibe's failure layout gives every field, through parse_report and the helpers."""
    category, retryable, steps, files, blocker, actions = fields
    report = parse_report(text)
    assert (report.status, report.category, report.retryable) == ("failed", category, retryable)
    assert (list(report.completed_steps), list(report.files_modified)) == (steps, files)
    assert (report.blocked_on, list(report.suggested_actions)) == (blocker, actions)
    helpers = (
        extract_category(text),
        is_retryable(text),
        extract_completed_steps(text),
        extract_files_modified(text),
        extract_blocker(text),
        extract_suggested_actions(text),
    )
    assert helpers == fields


def test_capybara_success_is_no_failure_for_the_helpers() -> None:
    """The helpers see a capybara success as no failure at all."""
    assert extract_category(CAPYBARA_SUCCESS) is None
    assert is_retryable(CAPYBARA_SUCCESS) is False
    assert extract_files_modified(CAPYBARA_SUCCESS) == []


@pytest.mark.parametrize("chunk_size", [1, 7, 64, 1 << 20])
def test_a_transcript_mixing_both_formats_is_read_in_order(chunk_size: int) -> None:
    """find_reports and lyra logs find capybara's and lyra's reports in one transcript, in order."""
    lyra = render_report(TaskReport(status="completed", session_id="child-lyra", output="ok"))
    text = "\n".join([CAPYBARA_SUCCESS, CAPYBARA_TIMEOUT, "parent notes", lyra, CAPYBARA_FALLBACK])
    expected = ["child-abc-123", "child-timeout-1", "child-lyra", "child-7f3a"]
    assert [report.session_id for report in find_reports(text)] == expected
    events = list(iter_reports(io.StringIO(text), chunk_size=chunk_size))
    assert [(event.session_id, event.name) for event in events] == [
        ("child-abc-123", "delegation_completed"),
        ("child-timeout-1", "delegation_failed"),
        ("child-lyra", "delegation_completed"),
        ("child-7f3a", "delegation_completed"),
    ]
    assert parse_report(text).session_id == "child-7f3a"


def test_the_last_block_of_either_format_decides() -> None:
    """A capybara success after a lyra failure is the last report, and the other way round."""
    failure = render_report(
        TaskReport(status="failed", message="m", category="timeout", retryable=True, duration=1.0)
    )
    assert parse_report(failure + "\n" + CAPYBARA_SUCCESS).status == "completed"
    assert parse_report(CAPYBARA_SUCCESS + "\n" + failure).status == "failed"
    assert is_retryable(CAPYBARA_SUCCESS + "\n" + failure) is True


def test_lyra_duration_wins_over_capybara_duration() -> None:
    """When both tags are present, lyra's exact <duration_s> is the duration."""
    text = CAPYBARA_FALLBACK.replace(
        "</task_metadata>", "  <duration_s>12.498</duration_s>\n</task_metadata>"
    )
    assert parse_report(text).duration == 12.498


@pytest.mark.parametrize("chunk_size", [1, 7, 64])
def test_lyra_logs_cuts_after_every_report_of_either_format(
    chunk_size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read in chunks, a transcript is handed to the parser one report at a time, so
    nothing is held longer than a report, whichever format closes it."""
    from lyra.logs import _read

    pieces: list[str] = []

    def recording(text: str) -> object:
        pieces.append(text)
        return find_reports(text)

    monkeypatch.setattr(_read, "find_reports", recording)
    lyra = render_report(TaskReport(status="completed", session_id="child-lyra", output="ok"))
    text = "\n".join([CAPYBARA_SUCCESS, lyra, CAPYBARA_TIMEOUT])
    assert len(list(iter_reports(io.StringIO(text), chunk_size=chunk_size))) == 3
    assert [piece.rstrip().rsplit("\n", 1)[-1] for piece in pieces] == [
        "</execution_summary>",
        "</task_metadata>",
        "</task_metadata>",
    ]
