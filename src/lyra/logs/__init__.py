"""Event logs and raw reports → failure statistics, charts and timeout suggestions.

>>> from lyra.logs import collect_stats
>>> stats = collect_stats(["runs/"])          # every events.jsonl under runs/
>>> stats.failed, stats.by_category["timeout"], stats.top_blockers[:1]

Reading streams: files are read in bounded chunks, so a log of any size fits
in memory. Attempts (delegations)
and tasks (what they were for) are counted apart; a torn last line, a
truncated ``.gz`` and an attempt logged twice are each noted, never miscounted;
input that is not text (a device, a binary file) raises :class:`NotTextError` at once.
"""

from lyra.logs._html import render_html
from lyra.logs._read import (
    Event,
    NotTextError,
    ReadStats,
    expand_paths,
    iter_events,
    iter_reports,
    parse_timestamp,
    read_events,
    read_file,
)
from lyra.logs._stats import (
    Breakdown,
    DurationBin,
    DurationSummary,
    FailureStats,
    GroupBy,
    GroupStats,
    Spend,
    StatsBuilder,
    TimeBucket,
    Timeline,
    collect_stats,
    compute_stats,
    normalize_blocker,
    parse_since,
    percentile,
    task_key,
)
from lyra.logs._suggest import (
    KindSuggestion,
    TimeoutSuggestion,
    subject_kind,
    suggest_from_files,
    suggest_timeout,
)

__all__ = [
    "Breakdown",
    "DurationBin",
    "DurationSummary",
    "Event",
    "FailureStats",
    "GroupBy",
    "GroupStats",
    "KindSuggestion",
    "NotTextError",
    "ReadStats",
    "Spend",
    "StatsBuilder",
    "TimeBucket",
    "Timeline",
    "TimeoutSuggestion",
    "collect_stats",
    "compute_stats",
    "expand_paths",
    "iter_events",
    "iter_reports",
    "normalize_blocker",
    "parse_since",
    "parse_timestamp",
    "percentile",
    "read_events",
    "read_file",
    "render_html",
    "subject_kind",
    "suggest_from_files",
    "suggest_timeout",
    "task_key",
]
