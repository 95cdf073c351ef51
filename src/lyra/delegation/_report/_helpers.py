"""One field at a time: the recovery guide's helpers, read as lyra reads reports.

Each takes report text (or a transcript ending in one), reads the last report
as :func:`parse_report` does and gives its field, and never raises: a success
or no report gives ``None``, ``False`` or an empty list, and so does a report
``parse_report`` rejects, unless it is in lyra's own layout, where a helper
checks only the value it reads. A recovery loop calls several helpers on one
report: they share one match of the rendered layout, remembered for the same
text object (a short one only, so that no large transcript is kept alive), or,
in any other layout, one parse.
"""

from __future__ import annotations

import re

from lyra._taxonomy import FailureCategory
from lyra.delegation._models import TaskReport
from lyra.delegation._report._layout import RENDERED_FAILURE, items, quick_match
from lyra.delegation._report._parse import general_report
from lyra.delegation._report._syntax import ACTION, STEP, files, unindented
from lyra.delegation._report._values import CATEGORIES
from lyra.errors import ReportParseError

_REMEMBER = 1 << 16
_remembered: tuple[object, re.Match[str] | TaskReport | None] = (None, None)
_Match = re.Match


def _last_failure(text: str) -> re.Match[str] | TaskReport | None:
    """The last report when it is a failure: its match in the rendered layout,
    or its parse in any other; ``None`` for a success, no report, or a report
    with an impossible field."""
    global _remembered
    last, found = _remembered
    if text is last:
        return found
    if not isinstance(text, str):
        return None
    normal = text.replace("\r\n", "\n") if "\r" in text else text
    found = quick_match(normal)
    if found is None:
        try:
            found = general_report(normal)
        except ReportParseError:
            found = None
        if found is not None and found.status != "failed":
            found = None
    elif found.re is not RENDERED_FAILURE:
        found = None
    if len(text) <= _REMEMBER:
        _remembered = (text, found)
    return found


def extract_category(text: str) -> FailureCategory | None:
    """The failure category of the last report, or ``None`` for a success or no report."""
    found = _last_failure(text)
    if isinstance(found, _Match):
        category: FailureCategory | None = CATEGORIES.get(found["failure_category"])
        return category
    return None if found is None else found.category


def is_retryable(text: str) -> bool:
    """True when the last report is a failure marked retryable."""
    found = _last_failure(text)
    if isinstance(found, _Match):
        return found["retryable"] == "true"
    return found is not None and bool(found.retryable)


def extract_completed_steps(text: str) -> list[str]:
    """The steps the child completed before it failed."""
    found = _last_failure(text)
    if isinstance(found, _Match):
        return list(items(found["steps"], STEP))
    return [] if found is None else list(found.completed_steps)


def extract_files_modified(text: str) -> list[str]:
    """The files the child modified before it failed."""
    found = _last_failure(text)
    if isinstance(found, _Match):
        return list(files(found["files"]))
    return [] if found is None else list(found.files_modified)


def extract_blocker(text: str) -> str | None:
    """What blocked the child, or ``None``."""
    found = _last_failure(text)
    if isinstance(found, _Match):
        blocked = found["blocked"]
        return None if blocked is None else unindented(blocked) or None
    return None if found is None else found.blocked_on


def extract_suggested_actions(text: str) -> list[str]:
    """The suggested recovery actions (text for a human; never executed)."""
    found = _last_failure(text)
    if isinstance(found, _Match):
        return list(items(found["actions"], ACTION))
    return [] if found is None else list(found.suggested_actions)
