"""The sub-agent reports of capybara-vibe, where lyra's format comes from.

Its failures are lyra's layout, read as lyra's are. Its successes end in an
``<execution_summary>`` block instead of ``<task_metadata>``; its metadata
gives ``<duration>45.23s</duration>``, and the files it modified in
``<modified count="2">a.py, b.py</modified>``. capybara-vibe escapes nothing,
so text in its success reports is read as written.
"""

from __future__ import annotations

import re

OPEN, CLOSE = "<execution_summary>", "</execution_summary>"
"""capybara-vibe's metadata block (its successes)."""
DURATION = "duration"
"""Its duration tag, in seconds with an ``s`` after them."""

_MODIFIED = re.compile(r"<modified(?:\s[^<>]*)?>([^<]*)</modified>")


def modified_files(block: str) -> tuple[str, ...] | None:
    """The files a summary block lists as modified, as written; ``None`` when it
    lists none."""
    found = _MODIFIED.search(block)
    if found is None:
        return None
    raw = found[1].strip()
    return tuple(raw.split(", ")) if raw and raw != "none" else ()


def seconds(duration: str) -> str:
    """The number in a ``<duration>`` value (``45.23s``)."""
    return duration.strip().removesuffix("s")
