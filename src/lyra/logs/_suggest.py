"""A timeout suggestion from how long completed delegations took.

The suggestion is a high percentile of completed durations times a margin,
rounded up to whole seconds. Subjects are grouped by *kind*, the shape of
their ID (``P04637`` → ``A99999``), because different kinds of task take
different times; a kind with too few samples falls back to the overall
suggestion. Durations of timed-out attempts are censored (they would have
taken longer), so they are counted and mentioned, never averaged in.
Subtasks of a decomposition ran a share of a task under a share of its
timeout, so they say nothing about a whole task's timeout and are left out.
"""

from __future__ import annotations

import math
import re
import sys
from array import array
from collections import Counter
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from lyra.events import DELEGATION_COMPLETED, DELEGATION_FAILED, DELEGATION_STARTED
from lyra.logs._read import Event, PathLike, ReadStats, read_events
from lyra.logs._stats import Sessions, percentile

OVERALL = "overall"
NO_SUBJECT = "(none)"
_LONG = 24  # subjects longer than this are free text, not IDs: one kind for all
_UPPER, _LOWER, _DIGIT = re.compile(r"[A-Z]"), re.compile(r"[a-z]"), re.compile(r"[0-9]")

Basis = Literal["kind", "overall", "too_few"]


class KindSuggestion(BaseModel):
    """The suggestion for one subject kind (or ``overall``)."""

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    kind: str
    samples: int
    """Completed delegations of this kind."""
    percentile_value: float | None
    """The chosen percentile of their durations, seconds."""
    timed_out: int
    """Attempts of this kind that hit their deadline (their durations are not used)."""
    suggested_timeout: float | None
    basis: Basis
    """``kind``: from this kind's own data; ``overall``: too few of its own, so the
    overall value; ``too_few``: not enough data anywhere."""
    examples: list[str]


class TimeoutSuggestion(BaseModel):
    """What ``lyra logs suggest-timeout`` prints."""

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    percentile: float
    margin: float
    min_samples: int
    overall: KindSuggestion
    kinds: list[KindSuggestion]
    timeouts_used: dict[str, int]
    """Timeouts the delegations were started with (seconds, as text) and how often."""
    note: str


def subject_kind(subject: str | None) -> str:
    """The shape of an ID: upper-case letters → ``A``, lower → ``a``, digits → ``9``."""
    if not subject:
        return NO_SUBJECT
    if len(subject) > _LONG:
        return "(long)"
    return _DIGIT.sub("9", _LOWER.sub("a", _UPPER.sub("A", subject)))


def _round_up(seconds: float) -> float:
    """Whole seconds, at least one: a deadline finer than that is noise; the largest
    float for a product that overflows (a huge margin or logged duration)."""
    return float(max(1, math.ceil(min(seconds, sys.float_info.max) - 1e-9)))


class _Kind:
    __slots__ = ("durations", "examples", "timed_out")

    def __init__(self) -> None:
        self.durations: array[float] = array("d")
        self.timed_out = 0
        self.examples: list[str] = []


def suggest_timeout(
    events: Iterable[Event],
    *,
    percentile_q: float = 95.0,
    margin: float = 1.5,
    min_samples: int = 20,
) -> TimeoutSuggestion:
    """Suggest timeouts from the completed delegations among ``events``; a session
    logged twice counts once."""
    kinds: dict[str, _Kind] = {}
    timeouts: Counter[float] = Counter()
    sessions = Sessions()
    for event in events:
        if event.parent_task_id is not None:
            continue  # a subtask: a share of the work under a share of the time
        name = event.name
        if name == DELEGATION_STARTED:
            if sessions.first(event.session_id, False) and event.timeout is not None:
                timeouts[event.timeout] += 1
        elif (
            name in (DELEGATION_COMPLETED, DELEGATION_FAILED)
            and sessions.first(event.session_id, True)
            and (name == DELEGATION_COMPLETED or _cut_by_its_deadline(event))
        ):
            _note(kinds.setdefault(subject_kind(event.subject), _Kind()), event)
    overall = _overall(kinds.values(), percentile_q, margin, min_samples)
    rows = [
        _kind_row(name, kind, overall, percentile_q, margin, min_samples)
        for name, kind in sorted(kinds.items(), key=lambda item: (-len(item[1].durations), item[0]))
    ]
    return TimeoutSuggestion(
        percentile=percentile_q,
        margin=margin,
        min_samples=min_samples,
        overall=overall,
        kinds=rows,
        timeouts_used={f"{t:g}": n for t, n in sorted(timeouts.items())},
        note=_note_text(overall, min_samples),
    )


def suggest_from_files(
    paths: Iterable[PathLike],
    *,
    percentile_q: float = 95.0,
    margin: float = 1.5,
    min_samples: int = 20,
    stats: ReadStats | None = None,
) -> TimeoutSuggestion:
    """:func:`suggest_timeout` over event logs (or raw reports) read from ``paths``;
    ``stats`` (if given) tallies what was read and skipped."""
    return suggest_timeout(
        read_events(paths, stats=stats),
        percentile_q=percentile_q,
        margin=margin,
        min_samples=min_samples,
    )


def _cut_by_its_deadline(event: Event) -> bool:
    """A failure of error type ``timeout``: the total deadline ended it (its true
    duration unknown), or a service it waited on timed out, which the log does not tell
    apart; not one a budget, the idle timeout or a loop ended, whose ``timeout``
    category says nothing of how long the task takes (a log without ``error_type``
    counts every timeout)."""
    return event.category == "timeout" and event.error_type in (None, "timeout")


def _note(kind: _Kind, event: Event) -> None:
    if event.name == DELEGATION_FAILED:
        kind.timed_out += 1
        return
    if event.duration is not None and event.duration >= 0:
        kind.durations.append(event.duration)
        if event.subject and len(kind.examples) < 3 and event.subject not in kind.examples:
            kind.examples.append(event.subject)


def _suggestion(
    name: str, durations: list[float], timed_out: int, q: float, margin: float, enough: bool
) -> KindSuggestion:
    value = percentile(sorted(durations), q)
    return KindSuggestion(
        kind=name,
        samples=len(durations),
        percentile_value=value,
        timed_out=timed_out,
        suggested_timeout=_round_up(value * margin) if enough and value is not None else None,
        basis="kind" if enough else "too_few",
        examples=[],
    )


def _overall(kinds: Iterable[_Kind], q: float, margin: float, min_samples: int) -> KindSuggestion:
    durations: list[float] = []
    timed_out = 0
    for kind in kinds:
        durations.extend(kind.durations)
        timed_out += kind.timed_out
    return _suggestion(OVERALL, durations, timed_out, q, margin, len(durations) >= min_samples)


def _kind_row(
    name: str, kind: _Kind, overall: KindSuggestion, q: float, margin: float, min_samples: int
) -> KindSuggestion:
    own = _suggestion(
        name, list(kind.durations), kind.timed_out, q, margin, len(kind.durations) >= min_samples
    )
    if own.basis == "too_few" and overall.suggested_timeout is not None:
        own = own.model_copy(
            update={"suggested_timeout": overall.suggested_timeout, "basis": "overall"}
        )
    return own.model_copy(update={"examples": kind.examples})


def _note_text(overall: KindSuggestion, min_samples: int) -> str:
    if overall.samples == 0:
        return "no completed delegations with a duration: nothing to suggest"
    if overall.suggested_timeout is None:
        return (
            f"too few data: {overall.samples} completed delegation(s), "
            f"need at least {min_samples} (see --min-samples)"
        )
    if overall.timed_out:
        return (
            f"{overall.timed_out} attempt(s) timed out; their true durations are unknown, "
            "so the suggestion may be low"
        )
    return "ok"
