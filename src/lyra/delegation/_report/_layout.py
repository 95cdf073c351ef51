"""lyra's own layout, read in one regex match: the fast path of every reader.

The regexes below spell the exact layout :mod:`._render` writes (and the
metadata tags in :mod:`._syntax`'s order); a report in that layout, the common
case, is read by one match. Anything else takes the general reader
(:mod:`._parse`), which reads the same fields from the same text. The match
never reaches across a closing tag: it starts at a header inside the region. A
metadata value with an entity in it sends the block to the general reader.
"""

from __future__ import annotations

import re
from typing import Any

from lyra.delegation._models import TaskReport, assembled
from lyra.delegation._report import _capybara as capybara
from lyra.delegation._report._blocks import last_header, output, region_before
from lyra.delegation._report._syntax import (
    ACTION,
    CLOSE,
    COMMON_TAGS,
    EMPTY_FILES,
    FAILED_DELEGATION,
    FAILURE_TAGS,
    FALLBACK,
    HEADER,
    LINE_HEADER,
    NO_ITEMS,
    OPEN,
    STEP,
    TAG,
    USAGE_TAGS,
    files,
    unindented,
)
from lyra.delegation._report._values import (
    CATEGORIES,
    DEFAULTS,
    ERROR_TYPES,
    EVERY_FIELD,
    failed_delegation,
    to_float,
)
from lyra.errors import ReportParseError

# Every repeat is possessive ("*+") and every optional part atomic ("(?>...)"):
# what follows each one can never start with what it repeats, so giving back
# text would never let a match succeed, and the engine keeps no states to try.
# The one exception is the body's duration, which "s\n" follows. A tag's value
# is "[^<]" (one character compared, where "[^<&]" is a set): a block with an
# "&" in it is left to the general reader by one look for it after the match.
_BODY = (
    r"Child agent failed: (?P<message>[^\n]*+(?:\n    [^\n]*+)*+)\n"
    r"\nCategory: (?P<body_category>[^\n]*+)\n"
    r"Duration: (?P<body_duration>[^\n]*)s\n"
    r"Retryable: (?P<body_retryable>Yes|No)\n"
    r"\nWork completed before failure:\n"
    r"(?P<steps>  None\n|(?:  ✓ [^\n]*+\n(?:    [^\n]*+\n)*+)++)"
    r"\nFiles modified: (?P<files>[^\n]*+)\n"
    r"(?>\nBlocked on: (?P<blocked>[^\n]*+(?:\n    [^\n]*+)*+)\n|)"
    r"\nSuggested recovery actions:\n"
    r"(?P<actions>  None\n|(?:  • [^\n]*+\n(?:    [^\n]*+\n)*+)++)"
)


def _optional(tags: dict[str, str]) -> str:
    # "(?>x|)" rather than "(?:x)?": a branch costs the regex engine less than a repeat.
    return "".join(rf"(?>\n  <{tag}>(?P<{tag}>[^<]*+)</{tag}>|)" for tag in tags)


def _repeated(tag: str) -> str:
    return rf"(?P<{tag}>(?:\n  <{tag}>[^<]*+</{tag}>)*+)"


_BLOCK_START = r"<task_metadata>\n  <session_id>(?P<session_id>[^<]*+)</session_id>\n  <status>"
_BLOCK_END = (  # the tags most blocks lack, skipped at once where the block ends before them
    r"(?>(?=\n</task_metadata>)|"
    + _optional(USAGE_TAGS)
    + _repeated(FAILED_DELEGATION)
    + _repeated(FALLBACK)
    + r")\n</task_metadata>"
)
_RENDERED = re.compile(_BODY + r"\n?\Z")  # a body alone
RENDERED_FAILURE = re.compile(
    _BODY.replace("?P<body_category>", "?:").replace("?P<body_retryable>", "?:")
    + r"\n?"
    + _BLOCK_START
    + r"failed</status>"
    r"\n  <failure_category>(?P<failure_category>[^<]*+)</failure_category>"
    r"\n  <retryable>(?P<retryable>true|false)</retryable>"
    + _optional(FAILURE_TAGS)
    + _optional(COMMON_TAGS)
    + _BLOCK_END
)
"""A failure report, from its header to the end of its metadata (the body's
category and retryability are the metadata's, so they are not kept)."""
_ACTIONS = RENDERED_FAILURE.groupindex["actions"]  # the body's last group
_failure_at = RENDERED_FAILURE.fullmatch
_RENDERED_SUCCESS = re.compile(
    _BLOCK_START + r"completed</status>" + _optional(COMMON_TAGS) + _BLOCK_END
)
_success_at = _RENDERED_SUCCESS.fullmatch
_FAILED = {**DEFAULTS, "status": "failed"}
_COMPLETED = {**DEFAULTS, "status": "completed"}


def quick_match(text: str) -> re.Match[str] | None:
    """The last report matched whole in the rendered layout, when it is lyra's own
    and only plain text follows it: :data:`RENDERED_FAILURE` from its header, or
    the success pattern from its block. ``None`` when it is not so.

    It finds what :func:`._blocks.last_block` and :func:`._blocks.last_header`
    would, with fewer scans of the text. A whole match leaves no room for
    another header line after the one it starts at; no closing tag of either
    kind may lie in the body it reads, nor a capybara-vibe one after it.
    """
    if text.endswith(CLOSE):  # as a report alone does: nothing after its block
        end = len(text)
        closing = end - len(CLOSE)
    else:
        closing = text.rfind(CLOSE)
        if closing < 0 or text.find(capybara.CLOSE, closing) >= 0:
            return None
        end = closing + len(CLOSE)
        if text.find(HEADER, end) >= 0:
            return None  # a report without metadata may follow: the general reader looks
    failure = _failure_at(text, 0, end) if text.startswith(HEADER) else None
    if failure is None:
        # A success, whose block says so (no header need be looked for), or a
        # failure whose header line is not the text's first.
        opening = text.rfind(OPEN, 0, closing)
        if opening < 0:
            return None
        success = _success_at(text, opening, end)
        if success is not None:
            return success if text.find("&", opening, end) < 0 else None
        at = text.rfind(LINE_HEADER, 0, opening) + 1
        failure = _failure_at(text, at, end) if at else None
        if failure is None:
            return None
    start, body_end = failure.start(), failure.end(_ACTIONS)
    if text.find("&", body_end, end) >= 0:  # a value with an entity: the general reader's
        return None
    if text.find("<", start) >= body_end:  # one look settles it for a body lyra wrote
        return failure
    if text.find(CLOSE, start, body_end) < 0 and text.find(capybara.CLOSE, start, body_end) < 0:
        return failure
    return None


def quick_report(text: str) -> TaskReport | None:
    """``parse_report``'s fast path (see :func:`quick_match`)."""
    match = quick_match(text)
    if match is None:
        return None
    if match.re is RENDERED_FAILURE:
        return _failure_report(match)
    opening = match.start()
    return _success_report(match, output(text, region_before(text, opening), opening, False))


def rendered(text: str, start: int, opening: int, closing: int) -> TaskReport | None:
    """The report of one region and lyra block in the rendered layout, else ``None``."""
    end = closing + len(CLOSE)
    if text.find("&", opening, end) >= 0:  # a value with an entity: the general reader's
        return None
    at = last_header(text, start, opening)
    failure = None if at is None else RENDERED_FAILURE.fullmatch(text, at, end)
    if failure is not None:
        return _failure_report(failure)
    success = _RENDERED_SUCCESS.fullmatch(text, opening, end)
    if success is None:
        return None
    return _success_report(success, output(text, start, opening, False))


def _success_report(success: re.Match[str], text: str) -> TaskReport:
    (
        session_id,
        attempt,
        duration,
        subject,
        tokens,
        cost,
        turns,
        tool_calls,
        parent,
        overrun,
        child,
        failed,
        fallbacks,
    ) = success.groups()
    values = _COMPLETED.copy()  # every field, in the model's order; set in place
    values["output"] = text
    try:
        values["session_id"] = session_id or None
        if attempt is not None:
            values["attempt"] = int(attempt)
        if duration is not None:
            values["duration"] = float(duration)
        values["subject"] = subject or None
        if tokens is not None or cost is not None or turns is not None or overrun is not None:
            _usage(values, tokens, cost, turns, overrun)
        if tool_calls is not None:
            values["tool_calls"] = int(tool_calls)
    except ValueError as exc:
        raise ReportParseError(f"malformed report: {exc!r}") from None
    if parent or failed or child or fallbacks:
        _nesting(values, parent, failed, child, fallbacks)
    return assembled(TaskReport, values, EVERY_FIELD)  # as values.built, a call less


def _failure_report(failure: re.Match[str]) -> TaskReport:
    (
        message,
        duration,
        steps,
        file_names,
        blocked,
        actions,
        session_id,
        category,
        retryable,
        error_type,
        retry_after,
        question,
        attempt,
        duration_s,
        subject,
        tokens,
        cost,
        turns,
        tool_calls,
        parent,
        overrun,
        child,
        failed,
        fallbacks,
    ) = failure.groups()
    values = _FAILED.copy()  # every field, in the model's order; set in place
    try:
        values["session_id"] = session_id or None
        if attempt is not None:
            values["attempt"] = int(attempt)
        values["duration"] = float(duration if duration_s is None else duration_s)
        values["subject"] = subject or None
        values["category"] = CATEGORIES[category] if category else None  # (none known)
        values["retryable"] = retryable == "true"
        if error_type is not None:
            values["error_type"] = ERROR_TYPES[error_type]
        if retry_after is not None:
            values["retry_after"] = float(retry_after)
        if tokens is not None or cost is not None or turns is not None or overrun is not None:
            _usage(values, tokens, cost, turns, overrun)
        if tool_calls is not None:
            values["tool_calls"] = int(tool_calls)
    except (KeyError, ValueError) as exc:
        raise ReportParseError(f"malformed report: {exc!r}") from None
    values["question"] = question or None
    if parent or failed or child or fallbacks:
        _nesting(values, parent, failed, child, fallbacks)
    # The free text and file names: unindented and unescaped where they need it.
    values["message"] = unindented(message) if "\n" in message or "&" in message else message
    if blocked:  # (as written: a blank blocker is none)
        values["blocked_on"] = unindented(blocked) if "\n" in blocked or "&" in blocked else blocked
    if steps != NO_ITEMS:
        values["completed_steps"] = items(steps, STEP)
    if file_names != EMPTY_FILES:
        values["files_modified"] = files(file_names)
    if actions != NO_ITEMS:
        values["suggested_actions"] = items(actions, ACTION)
    return assembled(TaskReport, values, EVERY_FIELD)  # as values.built, a call less


def _usage(
    values: dict[str, Any],
    tokens: str | None,
    cost: str | None,
    turns: str | None,
    overrun: str | None,
) -> None:
    """Usage (DESIGN §12) and a deadline overrun, which most reports lack."""
    if tokens is not None:
        values["tokens_used"] = int(tokens)
    if cost is not None:
        values["cost_usd"] = float(cost)
    if turns is not None:
        values["turns"] = int(turns)
    if overrun is not None:
        values["overrun_s"] = float(overrun)


def _nesting(
    values: dict[str, Any],
    parent: str | None,
    failed: str | None,
    child: str | None,
    fallbacks: str | None,
) -> None:
    """The delegation above, the failed ones below (DESIGN §12) and the children a
    fallback chain moved past (§5), which most lack."""
    values["parent_session_id"] = parent or None
    values["child"] = child or None
    if failed:
        values["failed_delegations"] = tuple(
            failed_delegation(value) for _, value in TAG.findall(failed)
        )
    if fallbacks:
        values["fallbacks"] = tuple(value for _, value in TAG.findall(fallbacks))


def fast_body(body: str) -> dict[str, Any] | None:
    """The fields of a body in exactly the renderer's layout, or ``None``."""
    match = _RENDERED.match(body)
    if match is None:
        return None
    message, category, duration, retryable, steps, file_names, blocked, actions = match.groups()
    return {
        "message": unindented(message),
        "category": category.strip(),
        "duration": to_float(duration, "duration"),
        "retryable": retryable == "Yes",
        "completed_steps": items(steps, STEP),
        "files_modified": files(file_names),
        "blocked_on": None if blocked is None else unindented(blocked) or None,
        "suggested_actions": items(actions, ACTION),
    }


def items(block: str, between: str) -> tuple[str, ...]:
    """The items of a rendered list: every value's own lines are indented further."""
    if block == NO_ITEMS:
        return ()
    found = block[4:-1].split(between)
    if "&" in block or "\n    " in block:
        return tuple([unindented(item) if "&" in item or "\n" in item else item for item in found])
    return tuple(found)
