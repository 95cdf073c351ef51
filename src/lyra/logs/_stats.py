"""Failure statistics over a stream of events, in one pass.

Memory grows with what the answer needs, never with the file: counters, one
8-byte float per finished delegation for exact percentiles, the most recent
tasks and sessions (bounded), and (only with ``by``) one row per group.

Attempts and tasks are counted apart: a *delegation* is one attempt of a
child; a *task* is what the attempts were for (a recovery loop's ``task_id``,
else the subject within one file, else the session), and its outcome is its
last attempt's. Six proteins that fail three times each are 18 failed
attempts and 6 failed tasks.
"""

from __future__ import annotations

import math
import re
from array import array
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from lyra.delegation import ErrorType, FailureCategory
from lyra.events import (
    DECOMPOSITION_FINISHED,
    DELEGATION_CANCELLED,
    DELEGATION_COMPLETED,
    DELEGATION_FAILED,
    DELEGATION_STARTED,
    RECOVERY_ATTEMPT,
    RUN_FINISHED,
)
from lyra.logs._read import (
    Event,
    PathLike,
    ReadStats,
    Record,
    _count,
    _number,
    _text,
    event_of,
    expand_paths,
    parse_timestamp,
    read_records,
)

GroupBy = Literal["subject", "category", "error_type"]
GROUP_FIELDS: tuple[GroupBy, ...] = ("subject", "category", "error_type")
COMPLETED_KEY = "completed"
"""The key of completed delegations where failures are keyed by category."""
CANCELLED_KEY = "cancelled"
"""The key of cancelled delegations in ``spend``: stopped from outside, they still spent."""
NONE_KEY = "(none)"

DURATION_EDGES: tuple[float, ...] = (
    0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
)  # fmt: skip
"""Lower edges of the duration histogram's bins, seconds; the last bin is open."""

_RESOLUTIONS = (1, 10, 60, 600, 3600, 86400)
"""Seconds per timeline slot while reading; coarser when slots pile up."""
_MAX_SLOTS = 10_000
_DISPLAY_STEPS = (
    1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
    86400, 7 * 86400, 30 * 86400,
)  # fmt: skip
MAX_BUCKETS = 60
"""Most bars in the failures-over-time chart."""
_MAX_PATTERNS = 10_000  # distinct blocker patterns kept; the rest count as "(other)"
_FINISHED = frozenset({DELEGATION_COMPLETED, DELEGATION_FAILED})
_MAX_TASKS = 200_000
"""Most tasks whose outcome is remembered while it may still change (the newest
half is always kept). A recovery loop retries within a few attempts, so a task
that 100,000 newer tasks have passed is done: its last outcome is final, and
forgetting it keeps memory flat over huge logs."""
_MAX_SESSIONS = 200_000
"""Most sessions remembered (the newest half always) to recognise an attempt
logged twice (a resumed run replaying what it had already logged), which is
never far from the first."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")


class DurationSummary(_Model):
    """Durations of one outcome, seconds; percentiles interpolate linearly."""

    count: int
    p50: float | None
    p95: float | None
    max: float | None


class DurationBin(_Model):
    """One bar of the duration histogram: ``lo <= duration < hi`` (``hi`` None: open)."""

    lo: float
    hi: float | None
    completed: int
    failed: int


class TimeBucket(_Model):
    """Delegations that finished in ``[start, start + bucket_seconds)``."""

    start: datetime
    completed: int
    failed: int


class Timeline(_Model):
    """Finished delegations over time, in equal buckets."""

    bucket_seconds: int
    buckets: list[TimeBucket]


class Spend(_Model):
    """What delegations of one outcome were charged (root delegations only, so that a
    nested delegation's spend, already in its parent's, is not counted twice)."""

    delegations: int
    """Delegations of this outcome that were charged anything."""
    tokens: int
    cost_usd: float
    turns: int = 0
    """Model calls (or agent turns) charged."""


class GroupStats(_Model):
    """One row of a ``--by`` breakdown; completed delegations only, no unfinished ones."""

    key: str
    delegations: int
    completed: int
    failed: int
    failure_rate: float
    retryable: int
    duration_p50: float | None
    duration_p95: float | None


class Breakdown(_Model):
    """Finished delegations grouped by one field, most failures first."""

    field: GroupBy
    groups: list[GroupStats]


class FailureStats(_Model):
    """Everything ``lyra logs stats`` reports (the first seven fields are DESIGN §6's).

    ``delegations`` = ``completed`` + ``failed`` + ``cancelled`` + ``unfinished``
    attempts (cancelled: stopped from outside and logged so; unfinished: started,
    never finished: a run that was killed). A session
    that finishes twice (a resumed run logging an attempt again) counts once;
    the repeats are ``duplicates``. ``recovered`` counts tasks with a failed
    attempt that later completed. Tasks (see the module docstring) are counted
    apart from attempts: ``tasks_failed`` is how many tasks ended failed.
    Each subtask of a decomposition is a delegation and a task of its own for
    recovery (``task_id`` ``parent.N``), but only a part of its parent for the
    task counts; the parent's outcome is its ``decomposition_finished``
    status. A nested delegation (``ctx.delegate``) is an attempt, never a task.
    """

    delegations: int
    """Attempts: started or finished delegations."""
    completed: int
    """Attempts that completed."""
    failed: int
    """Attempts that failed."""
    by_category: dict[str, int]
    """Failed attempts per failure category."""
    retryable: int
    top_blockers: list[tuple[str, int]]
    recovered: int
    unfinished: int
    cancelled: int = 0
    """Attempts stopped from outside (a client that left, Ctrl+C, a cancelled parent):
    ended, neither completed nor failed."""
    failure_rate: float
    """``failed`` / (``completed`` + ``failed``): per attempt."""
    by_error_type: dict[str, int]
    tasks: int
    """Tasks with a finished attempt: ``tasks_completed`` + ``tasks_failed``."""
    tasks_completed: int
    """Tasks whose last attempt completed (first time or after recovering)."""
    tasks_failed: int
    """Tasks whose last attempt failed: failures that stand."""
    tasks_by_category: dict[str, int]
    """Failed tasks per category of their last failure (a split task that failed: of the
    failure that led to the split; its subtasks' are their own)."""
    tasks_cancelled: int = 0
    """Tasks every attempt of which was cancelled (Ctrl+C, a client that left): not in
    ``tasks``, which counts tasks with a finished attempt. (A task whose only attempt
    never ended, in a killed run, is in neither: its attempt is ``unfinished``.)"""
    task_failure_rate: float
    """``tasks_failed`` / ``tasks``."""
    durations: dict[str, DurationSummary]
    """Per outcome: ``completed`` and each failure category."""
    duration_histogram: list[DurationBin]
    timeline: Timeline
    recovery_attempts: int
    by_strategy: dict[str, int]
    tokens_used: int
    """Tokens charged, over every root delegation."""
    cost_usd: float
    """Spend charged, in US dollars, over every root delegation."""
    turns: int = 0
    """Turns charged, over every root delegation."""
    spend: dict[str, Spend]
    """Per outcome (``completed``, each failure category, and ``cancelled``): what it
    cost. The totals above include cancelled attempts: they spent too."""
    duplicates: int
    """Finishing events of a session that had finished already, and recovery attempts
    after a failed attempt already recovered from (the same line read twice), left out."""
    runs: int
    files: int
    events: int
    reports: int
    malformed_lines: int
    torn_files: list[str]
    """Files whose last line was cut short by a killed writer (skipped, not malformed)."""
    truncated_files: list[str]
    """Compressed files that end early or are damaged (read up to the damage)."""
    first_timestamp: datetime | None
    last_timestamp: datetime | None
    since: datetime | None
    skipped_before_since: int
    skipped_undated: int
    by: Breakdown | None = None


# -- blocker patterns -------------------------------------------------------------

_PATTERNS: tuple[tuple[re.Pattern[str], re.Pattern[str], str], ...] = tuple(
    (re.compile(gate), re.compile(pattern), placeholder)
    for gate, pattern, placeholder in (
        # A gate is what a pattern cannot match without: most blockers skip most
        # patterns for the price of a one-character search.
        ("'", r"'[^'\n]{1,200}'", "'<name>'"),
        ('"', r'"[^"\n]{1,200}"', '"<name>"'),
        ("://", r"\b[a-z][a-z0-9+.-]*://[^\s'\"]+", "<url>"),
        (r"[/\\]", r"(?<![\w.])(?:[A-Za-z]:)?(?:~|\.{1,2})?(?:[/\\][\w.@+-]+){2,}[/\\]?", "<path>"),
        ("/", r"(?<![\w/])[\w.-]+/[\w.-]+\.\w{1,8}\b", "<path>"),
        ("-", r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b", "<uuid>"),
        ("child-", r"\bchild-[0-9a-f]{4,}\b", "<session>"),
        (r"\d", r"\b(?=[A-Z0-9_-]*\d)(?=[A-Z0-9_-]*[A-Z])[A-Z0-9][A-Z0-9_-]{3,}\b", "<id>"),
        (r"\d", r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", "<hex>"),
        (r"\d", r"(?<![\w.<])[-+]?\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?", "<n>"),
    )
)
_SPACE = re.compile(r"\s+")
_STATUS = re.compile(r"\s*[1-5]\d\d\s*")
_FORMAT = re.compile(r"(\[[^\[\]\s]*\w-\w[^\[\]\s]*\]|(?<=[\])])\{\d+(?:,\d*)?\})")
"""A pattern a blocker quotes (``[A-Z0-9]{3}``): a character range in brackets, or a
count right after one; kept as it is, since it names a format, not a value."""


@lru_cache(maxsize=4096)  # blockers repeat: a log of a million failures has few distinct ones
def normalize_blocker(text: str) -> str:
    """A blocker with IDs, numbers, paths and quoted names replaced by placeholders.

    >>> normalize_blocker("No module named 'bcrypt'")
    "No module named '<name>'"
    """
    if _STATUS.fullmatch(text):  # an HTTP status alone is its own pattern, not <n>
        return text.strip()
    parts = _FORMAT.split(text) if "[" in text else [text]
    for i in range(0, len(parts), 2):  # (the odd ones are quoted formats)
        for gate, pattern, placeholder in _PATTERNS:
            if gate.search(parts[i]):
                parts[i] = pattern.sub(placeholder, parts[i])
    return _SPACE.sub(" ", "".join(parts)).strip()[:200]


# -- small helpers ------------------------------------------------------------------


def _plain_word(subject: str) -> bool:
    """A subject that is an ordinary word ('auth', 'tool'): in a blocker, it is a word."""
    return subject.isalpha() and subject.islower()


@lru_cache(maxsize=4096)
def _named(subject: str) -> re.Pattern[str]:
    """``subject`` where it stands alone: not inside a longer name or word."""
    return re.compile(rf"(?<![\w-]){re.escape(subject)}(?![\w-])")


def percentile(ordered: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of sorted values, linear between ranks."""
    if not ordered:
        return None
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return round(ordered[low] + (ordered[high] - ordered[low]) * (rank - low), 6)


def _summary(values: array[float]) -> DurationSummary:
    ordered = sorted(values)
    return DurationSummary(
        count=len(ordered),
        p50=percentile(ordered, 50),
        p95=percentile(ordered, 95),
        max=ordered[-1] if ordered else None,
    )


def _rate(failed: int, finished: int) -> float:
    return round(failed / finished, 4) if finished else 0.0


K = TypeVar("K")
V = TypeVar("V")


def halve(memory: dict[K, V]) -> tuple[dict[K, V], list[V]]:
    """The newer half of ``memory`` (in insertion order), and the values of the
    older half, let go. Letting half go at once keeps each step O(1) on average:
    a dict used as a queue (``del d[next(iter(d))]``) slows down as deleted
    entries pile up at its front."""
    items = list(memory.items())
    half = len(items) // 2
    return dict(items[half:]), [value for _, value in items[:half]]


class Sessions:
    """The most recent sessions and whether each has finished, to spot a line
    logged twice (a resumed run replaying what it had logged): a session's
    second start or second finish is a repeat. Between half of
    :data:`_MAX_SESSIONS` and all of it are remembered."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: dict[str, bool] = {}  # session -> finished yet; oldest first

    def first(self, session: str | None, finished: bool) -> bool:
        """False when this start (or finish) of ``session`` was seen before."""
        if session is None:
            return True
        state = self.seen.get(session)
        if state is None or (finished and not state):
            self.seen[session] = finished
            if len(self.seen) > _MAX_SESSIONS:
                self.seen = halve(self.seen)[0]
            return True
        return False


class _Group:
    """Counters of one ``--by`` row."""

    __slots__ = ("completed", "durations", "failed", "retryable")

    def __init__(self) -> None:
        self.completed = self.failed = self.retryable = 0
        self.durations: array[float] = array("d")

    def row(self, key: str) -> GroupStats:
        ordered = sorted(self.durations)
        finished = self.completed + self.failed
        return GroupStats(
            key=key,
            delegations=finished,
            completed=self.completed,
            failed=self.failed,
            failure_rate=_rate(self.failed, finished),
            retryable=self.retryable,
            duration_p50=percentile(ordered, 50),
            duration_p95=percentile(ordered, 95),
        )


# -- the one pass ---------------------------------------------------------------------


class StatsBuilder:
    """Accumulates :class:`FailureStats` from events fed one at a time."""

    def __init__(
        self, *, since: datetime | None = None, by: GroupBy | None = None, top: int = 10
    ) -> None:
        self.since = since
        self.by = by
        self.top = top
        self.completed = self.failed = self.retryable = self.recovered = self.cancelled = 0
        self.recovery_attempts = self.runs = self.duplicates = 0
        self.skipped_before = self.skipped_undated = 0
        # defaultdict(int) rather than Counter: a third of the cost per increment
        self.by_category: defaultdict[str, int] = defaultdict(
            int, {str(c): 0 for c in FailureCategory}
        )
        self.by_error_type: defaultdict[str, int] = defaultdict(int, {str(t): 0 for t in ErrorType})
        self.by_strategy: defaultdict[str, int] = defaultdict(int)
        self.blockers: defaultdict[str, int] = defaultdict(int)
        self.durations: defaultdict[str, array[float]] = defaultdict(lambda: array("d"))
        self.histogram = [[0, 0] for _ in DURATION_EDGES]  # [completed, failed] per bin
        self.started: defaultdict[str, int] = defaultdict(int)  # per file: unfinished =
        self.finished: defaultdict[str, int] = defaultdict(int)  # started - finished
        self.sessions = Sessions()
        self.recovered_from = Sessions()  # the failed attempts a recovery attempt followed
        # task -> the outcome of its last attempt (``completed`` or a category); oldest first
        self.tasks: dict[tuple[str, str, str], str] = {}
        self.subtasks: dict[tuple[str, str, str], str] = {}  # they recover, but are no tasks
        self.final_tasks: Counter[str] = Counter()  # outcomes of tasks let go as done
        self.cancelled_tasks: dict[tuple[str, str, str], None] = {}  # none finished yet
        self.cancelled_let_go = 0  # cancelled tasks past the bound (done: none finishes now)
        self.slots: defaultdict[tuple[int, bool], int] = defaultdict(int)  # (start, failed) -> n
        self.resolution_index = 0
        self.step = _RESOLUTIONS[0]  # seconds per slot now
        self.first: datetime | None = None
        self.last: datetime | None = None
        self.groups: dict[str, _Group] = {}
        # outcome -> [delegations, tokens, cost, turns]
        self.spend: defaultdict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0, 0])

    def add_all(self, events: Iterable[Event]) -> StatsBuilder:
        """Feed every event; returns ``self`` for chaining."""
        for event in events:
            self.add(event)
        return self

    def add(self, event: Event) -> None:
        """Count one event (unknown event names are ignored)."""
        moment = event.timestamp
        if not self._admit(moment):
            return
        name = event.name
        if name in _FINISHED:
            fields = event._asdict()
            self._finished(
                fields.get, name == DELEGATION_FAILED, moment, event.source, event.is_report
            )
        elif name == DELEGATION_STARTED:
            self._started(event.session_id, event.source)
        elif name == DELEGATION_CANCELLED:
            self._cancelled(event._asdict().get, event.source)
        elif name == RECOVERY_ATTEMPT:
            self._recovery(event.strategy, event.session_id)
        elif name == RUN_FINISHED:
            self.runs += 1
        elif name == DECOMPOSITION_FINISHED:
            self._decomposed(event)

    def add_record(self, record: Record, source: str = "") -> None:
        """Count one decoded event line: ``add(Event.from_dict(record, source))``,
        reading only the fields that count, without building the event."""
        name = record["event"]
        if name == DECOMPOSITION_FINISHED:  # rare: the event will do
            self.add(event_of(record, source))
            return
        get = record.get
        moment = parse_timestamp(get("timestamp"))
        if not self._admit(moment):
            return
        if name in _FINISHED:
            self._finished(get, name == DELEGATION_FAILED, moment, source, False)
        elif name == DELEGATION_STARTED:
            self._started(_text(get("session_id")), source)
        elif name == DELEGATION_CANCELLED:
            self._cancelled(get, source)
        elif name == RECOVERY_ATTEMPT:
            self._recovery(_text(get("strategy")), _text(get("session_id")))
        elif name == RUN_FINISHED:
            self.runs += 1

    def _admit(self, moment: datetime | None) -> bool:
        """Apply ``since``; note the time span of what is admitted."""
        if self.since is not None:
            if moment is None:
                self.skipped_undated += 1
                return False
            if moment < self.since:
                self.skipped_before += 1
                return False
        if moment is not None:
            if self.first is None or self.last is None:
                self.first = self.last = moment
            elif moment < self.first:
                self.first = moment
            elif moment > self.last:
                self.last = moment
        return True

    def _started(self, session: str | None, source: str) -> None:
        if self.sessions.first(session, False):
            self.started[source] += 1

    def _cancelled(self, get: Callable[[str], Any], source: str) -> None:
        """An attempt stopped from outside: ended, but neither completed nor failed. What
        it spent counts; its task is unfinished until an attempt of it finishes."""
        session = _text(get("session_id"))
        if not self.sessions.first(session, True):
            self.duplicates += 1
            return
        self.cancelled += 1
        self.finished[source] += 1
        if _text(get("parent_session_id")) is not None:  # a nested one is its parent's
            return
        key = _task_key(source, _text(get("task_id")), _text(get("subject")), session)
        # (a task already let go as done, past _MAX_TASKS newer ones, is not recognised)
        if key is not None and _text(get("parent_task_id")) is None and key not in self.tasks:
            self.cancelled_tasks[key] = None
            if len(self.cancelled_tasks) > _MAX_TASKS:
                self.cancelled_tasks, gone = halve(self.cancelled_tasks)
                self.cancelled_let_go += len(gone)
        self._spent(CANCELLED_KEY, get)

    def _recovery(self, strategy: str | None, failed_session: str | None) -> None:
        """A recovery attempt after the failed attempt ``failed_session``: one of each
        (the same line twice, from overlapping logs, counts once, as a repeat)."""
        if not self.recovered_from.first(failed_session, True):
            self.duplicates += 1
            return
        self.recovery_attempts += 1
        self.by_strategy[strategy or "unknown"] += 1

    def _finished(
        self, get: Callable[[str], Any], failed: bool, moment: datetime | None, source: str,
        is_report: bool,
    ) -> None:  # fmt: skip
        """Count a finished attempt, its fields read through ``get`` (a record's or an
        event's): one place for both, and no event built for a line of a log."""
        session = _text(get("session_id"))
        if not self.sessions.first(session, True):
            self.duplicates += 1
            return
        if not is_report:
            self.finished[source] += 1
        if failed:
            self.failed += 1
            outcome = _text(get("category")) or "unknown"
            self.by_category[outcome] += 1
            self.by_error_type[_text(get("error_type")) or "unknown"] += 1
            self.retryable += get("retryable") is True
            self._blocker(_text(get("blocked_on")), _text(get("subject")))
        else:
            self.completed += 1
            outcome = COMPLETED_KEY
        if _text(get("parent_session_id")) is None:  # a nested one is part of its parent's
            key = _task_key(source, _text(get("task_id")), _text(get("subject")), session)
            if key is not None:
                self._task(key, outcome, subtask=_text(get("parent_task_id")) is not None)
            self._spent(outcome, get)
        duration = _number(get("duration"))
        if duration is not None and 0 <= duration < math.inf:  # NaN fails both
            self.durations[outcome].append(duration)
            self.histogram[bisect_right(DURATION_EDGES, duration) - 1][failed] += 1
        if moment is not None:
            self._slot(moment, failed=failed)
        if self.by is not None:
            self._group(get, failed, duration)

    def _spent(self, outcome: str, get: Callable[[str], Any]) -> None:
        """What a root attempt charged, under its ``outcome``."""
        tokens, cost = _count(get("tokens_used")), _number(get("cost_usd"))
        turns = _count(get("turns"))
        if tokens or cost or turns:
            spent = self.spend[outcome]
            spent[0] += 1
            spent[1] += tokens or 0
            spent[2] += cost or 0.0
            spent[3] += turns or 0

    def _blocker(self, text: str | None, subject: str | None) -> None:
        if not text:
            return
        if subject and len(subject) > 1 and subject in text and not _plain_word(subject):
            text = _named(subject).sub("<id>", text)  # 'XXXXX' is an ID here too
        pattern = normalize_blocker(text)
        if pattern not in self.blockers and len(self.blockers) >= _MAX_PATTERNS:
            pattern = "(other)"
        self.blockers[pattern] += 1

    def _task(self, key: tuple[str, str, str], outcome: str, *, subtask: bool) -> None:
        """Note a task's latest outcome; a completion after a failure is a recovery."""
        tasks = self.subtasks if subtask else self.tasks
        if self.cancelled_tasks and not subtask:
            self.cancelled_tasks.pop(key, None)  # it finished after all
        previous = tasks.pop(key, None)  # set again: among the newest
        if outcome == COMPLETED_KEY and previous is not None and previous != COMPLETED_KEY:
            self.recovered += 1
        tasks[key] = outcome
        if len(tasks) > _MAX_TASKS:
            kept, done = halve(tasks)
            if subtask:
                self.subtasks = kept
            else:
                self.tasks = kept
                self.final_tasks.update(done)

    def _decomposed(self, event: Event) -> None:
        """A decomposed attempt ended: the parent task recovers only if it completed.

        Its subtasks were counted as delegations of their own (``task_id``
        ``parent.N``); this event is the parent's outcome, not a delegation.
        A failed decomposition leaves the parent failed, however many subtasks
        completed, under the category of the failure that led to it.
        """
        key = task_key(event)
        if key is None or event.status not in ("completed", "failed"):
            return
        outcome = COMPLETED_KEY
        if event.status == "failed":
            previous = self.tasks.get(key)
            failed_before = previous is not None and previous != COMPLETED_KEY
            outcome = previous if previous and failed_before else str(FailureCategory.PARTIAL)
        self._task(key, outcome, subtask=event.parent_task_id is not None)

    def _slot(self, moment: datetime, *, failed: bool) -> None:
        step = self.step
        slots = self.slots
        slots[(int(moment.timestamp() // step) * step, failed)] += 1
        if len(slots) > _MAX_SLOTS and self.resolution_index + 1 < len(_RESOLUTIONS):
            self._coarsen()

    def _coarsen(self) -> None:
        """Merge slots into the next resolution, keeping memory bounded over long spans."""
        self.resolution_index += 1
        self.step = step = _RESOLUTIONS[self.resolution_index]
        merged: defaultdict[tuple[int, bool], int] = defaultdict(int)
        for (start, failed), count in self.slots.items():
            merged[(start // step * step, failed)] += count
        self.slots = merged

    def _group(self, get: Callable[[str], Any], failed: bool, duration: float | None) -> None:
        if self.by == "subject":
            key = _text(get("subject")) or NONE_KEY
        elif not failed:
            key = COMPLETED_KEY
        else:
            key = _text(get("category" if self.by == "category" else "error_type")) or "unknown"
        group = self.groups.setdefault(key, _Group())
        if failed:
            group.failed += 1
            group.retryable += get("retryable") is True
        else:
            group.completed += 1
        if duration is not None and duration >= 0:
            group.durations.append(duration)

    # -- the result --------------------------------------------------------------

    def build(self, read: ReadStats | None = None) -> FailureStats:
        """The statistics of everything added so far."""
        read = read or ReadStats()
        unfinished = sum(
            max(0, count - self.finished[source]) for source, count in self.started.items()
        )
        outcomes = Counter(self.final_tasks)
        outcomes.update(self.tasks.values())
        tasks_completed = outcomes.pop(COMPLETED_KEY, 0)
        tasks_failed = sum(outcomes.values())
        tasks = tasks_completed + tasks_failed
        return FailureStats(
            delegations=self.completed + self.failed + self.cancelled + unfinished,
            completed=self.completed,
            failed=self.failed,
            by_category=dict(self.by_category),
            retryable=self.retryable,
            top_blockers=_top(self.blockers, self.top),
            recovered=self.recovered,
            unfinished=unfinished,
            cancelled=self.cancelled,
            failure_rate=_rate(self.failed, self.completed + self.failed),
            by_error_type=dict(self.by_error_type),
            tasks=tasks,
            tasks_completed=tasks_completed,
            tasks_failed=tasks_failed,
            tasks_by_category={**dict.fromkeys(self.by_category, 0), **outcomes},
            tasks_cancelled=len(self.cancelled_tasks) + self.cancelled_let_go,
            task_failure_rate=_rate(tasks_failed, tasks),
            durations=self._durations(),
            duration_histogram=self._histogram(),
            timeline=self._timeline(),
            recovery_attempts=self.recovery_attempts,
            by_strategy=dict(sorted(self.by_strategy.items())),
            tokens_used=int(sum(spent[1] for spent in self.spend.values())),
            cost_usd=round(sum(spent[2] for spent in self.spend.values()), 6),
            turns=int(sum(spent[3] for spent in self.spend.values())),
            spend={
                outcome: Spend(
                    delegations=int(n),
                    tokens=int(tokens),
                    cost_usd=round(cost, 6),
                    turns=int(turns),
                )
                for outcome, (n, tokens, cost, turns) in self.spend.items()
            },
            duplicates=self.duplicates,
            runs=self.runs,
            files=read.files,
            events=read.events,
            reports=read.reports,
            malformed_lines=read.malformed_lines,
            torn_files=list(read.torn_files),
            truncated_files=list(read.truncated_files),
            first_timestamp=self.first,
            last_timestamp=self.last,
            since=self.since,
            skipped_before_since=self.skipped_before,
            skipped_undated=self.skipped_undated,
            by=self._breakdown(),
        )

    def _durations(self) -> dict[str, DurationSummary]:
        order = [COMPLETED_KEY, *self.by_category]
        return {key: _summary(self.durations[key]) for key in order if key in self.durations}

    def _histogram(self) -> list[DurationBin]:
        used = [i for i, (done, failed) in enumerate(self.histogram) if done or failed]
        if not used:
            return []
        his = [*DURATION_EDGES[1:], None]
        return [
            DurationBin(lo=DURATION_EDGES[i], hi=his[i], completed=done, failed=failed)
            for i, (done, failed) in enumerate(self.histogram)
            if used[0] <= i <= used[-1]
        ]

    def _timeline(self) -> Timeline:
        resolution = _RESOLUTIONS[self.resolution_index]
        if not self.slots:
            return Timeline(bucket_seconds=resolution, buckets=[])
        starts = [start for start, _ in self.slots]
        first, last = min(starts), max(starts)
        step = _display_step(resolution, last + resolution - first)
        origin = first // step * step
        counts = [[0, 0] for _ in range((last - origin) // step + 1)]
        for (start, failed), count in self.slots.items():
            counts[(start - origin) // step][failed] += count
        buckets = [
            TimeBucket(
                start=datetime.fromtimestamp(origin + i * step, UTC), completed=done, failed=bad
            )
            for i, (done, bad) in enumerate(counts)
        ]
        return Timeline(bucket_seconds=step, buckets=buckets)

    def _breakdown(self) -> Breakdown | None:
        if self.by is None:
            return None
        rows = [group.row(key) for key, group in self.groups.items()]
        rows.sort(key=lambda row: (-row.failed, -row.delegations, row.key))
        return Breakdown(field=self.by, groups=rows)


def task_key(event: Event) -> tuple[str, str, str] | None:
    """Which task an attempt belongs to: its ``task_id``, else subject, else session."""
    return _task_key(event.source, event.task_id, event.subject, event.session_id)


def _task_key(
    source: str, task_id: str | None, subject: str | None, session: str | None
) -> tuple[str, str, str] | None:
    if task_id:
        return (source, "task", task_id)
    if subject:
        return (source, "subject", subject)
    if session:
        return (source, "session", session)
    return None


def _display_step(resolution: int, span: int) -> int:
    """The smallest readable bucket width that fits ``span`` into :data:`MAX_BUCKETS`."""
    for step in _DISPLAY_STEPS:
        if step % resolution == 0 and span <= step * MAX_BUCKETS:
            return step
    return _DISPLAY_STEPS[-1]


def _top(counter: dict[str, int], n: int) -> list[tuple[str, int]]:
    ranked = sorted(counter.items(), key=lambda item: (-item[1], item[0]))
    return ranked[:n]


# -- entry points ------------------------------------------------------------------------


def compute_stats(
    events: Iterable[Event],
    *,
    since: datetime | None = None,
    by: GroupBy | None = None,
    top: int = 10,
    read: ReadStats | None = None,
) -> FailureStats:
    """Failure statistics of ``events`` (see :class:`FailureStats`)."""
    return StatsBuilder(since=since, by=by, top=top).add_all(events).build(read)


def collect_stats(
    paths: Iterable[PathLike],
    *,
    since: datetime | None = None,
    by: GroupBy | None = None,
    top: int = 10,
) -> FailureStats:
    """Read event logs (or raw reports) from ``paths`` and compute their statistics.

    A directory stands for every ``events.jsonl`` under it, so a run directory
    or a folder of runs can be passed as is.
    """
    read = ReadStats()
    builder = StatsBuilder(since=since, by=by, top=top)
    add, add_record = builder.add, builder.add_record
    for path in expand_paths(paths):
        source = str(path)
        for item in read_records(path, stats=read):
            if isinstance(item, dict):
                add_record(item, source)
            else:
                add(item)
    return builder.build(read)


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
EARLIEST = datetime.min.replace(tzinfo=UTC)
"""What a span reaching back past year 1 means: every dated event."""


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """``2h``/``30m``/``1d`` ago, or an ISO 8601 date or time (naive means UTC).

    A span longer than the calendar reaches back (``99999999999h``) is
    :data:`EARLIEST`: every dated event. Raises ``ValueError`` for anything else.
    """
    relative = _RELATIVE.match(text)
    if relative:
        seconds = float(relative.group(1)) * _UNITS[relative.group(2)]
        try:
            return (now or datetime.now(UTC)) - timedelta(seconds=seconds)
        except OverflowError:  # past year 1 (or an infinite float from 400 digits)
            return EARLIEST
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"not a time: {text!r} (use e.g. 2h, 30m, 1d, 2026-01-31 or 2026-01-31T12:00Z)"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
