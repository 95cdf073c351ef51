"""One self-contained HTML page of failure statistics, charts as inline SVG.

No script, style sheet or font comes from anywhere else, so the file can be
mailed or attached to a ticket and read offline. Attempts (delegations) and
tasks (what the attempts were for: a protein, a subject) are counted apart
and named as such throughout.

Every number on the page is one of ``lyra logs stats --json``, and says which:
a table cell carries ``data-field`` (the JSON path, dots between keys) and
``data-value`` (the JSON value); a bar is a ``<rect>`` carrying ``data-chart``,
``data-key``, ``data-series`` and ``data-value``:

==================  ====================================  ==============================
data-chart          data-key                              data-series
==================  ====================================  ==============================
by_category         category                              ``failed`` (attempts),
                                                          ``tasks_failed`` (tasks)
timeline            bucket start (ISO 8601)               ``failed`` (attempts)
top_blockers        blocker pattern                       ``failed`` (attempts)
duration_histogram  ``lo`` (seconds, as in the JSON)      ``completed``/``failed``
==================  ====================================  ==============================
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

from lyra.logs._stats import CANCELLED_KEY, COMPLETED_KEY, FailureStats

WIDTH = 760
_CHAR_W = 7.0  # px per character of the 12px chart text: generous, so labels never touch
_PLOT_H = 180
_BAR_MAX = 48  # widest column, so one bucket is a bar, not a wall
_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:800px;color:#222;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin:2em 0 .3em}
p.lead{margin:.2em 0 .8em}.muted{color:#666}.notes{color:#8a4b00}
table{border-collapse:collapse;margin:.4em 0}td,th{padding:2px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}tr:nth-child(even){background:#f4f4f4}
th{font-weight:600;border-bottom:1px solid #ccc;white-space:nowrap}
tr.total td{border-top:1px solid #ccc}
.cards{display:flex;gap:2em;flex-wrap:wrap}.cards>div{flex:1;min-width:300px}
.cards h2{margin-top:1em}svg{max-width:100%;height:auto;display:block}
svg text{font:12px system-ui,sans-serif;fill:#222}svg .axis{fill:#555}
svg .title{font-weight:600;fill:#444}
"""


@dataclass(frozen=True, slots=True)
class _Series:
    name: str  # data-series: the JSON field the values come from
    label: str  # the legend's words
    color: str


_FAILED = _Series("failed", "failed attempts", "#c8553d")
_TASKS_FAILED = _Series("tasks_failed", "failed tasks", "#7b2d8e")
_COMPLETED = _Series("completed", "completed attempts", "#4c9a6a")


@dataclass(frozen=True, slots=True)
class _Bar:
    key: str
    label: str
    values: dict[str, int]  # series name -> value


# -- pieces -------------------------------------------------------------------------


def _attr(text: object) -> str:
    return escape(str(text), quote=True)


def _text(
    x: float, y: float, text: str, *, anchor: str = "start", cls: str = "", upright: bool = True
) -> str:
    """A text at (x, y); not ``upright``: turned to read bottom to top (a y-axis title)."""
    attrs = f' class="{cls}"' if cls else ""
    if not upright:
        attrs += f' transform="rotate(-90 {x:.1f} {y:.1f})"'
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{attrs}>{escape(text)}</text>'


def _rect(chart: str, bar: _Bar, series: _Series, x: float, y: float, w: float, h: float) -> str:
    value = bar.values[series.name]
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{max(h, 0):.1f}" '
        f'fill="{series.color}" data-chart="{chart}" data-key="{_attr(bar.key)}" '
        f'data-series="{series.name}" data-value="{value}">'
        f"<title>{escape(bar.label)}: {value} {escape(series.label)}</title></rect>"
    )


def _svg(chart: str, title: str, height: float, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0f}" '
        f'viewBox="0 0 {WIDTH} {height:.0f}" role="img" aria-label="{_attr(title)}" '
        f'data-chart="{chart}">' + "".join(body) + "</svg>"
    )


def _legend(series: Sequence[_Series], y: float) -> list[str]:
    """Swatches and names, right-aligned on one line."""
    widths = [24 + len(s.label) * _CHAR_W for s in series]
    x = WIDTH - 8 - sum(widths)
    out = []
    for s, w in zip(series, widths, strict=True):
        out += [
            f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="12" height="12" fill="{s.color}"/>',
            _text(x + 17, y, s.label),
        ]
        x += w
    return out


def ticks(top: float) -> list[int]:
    """Axis ticks for counts up to ``top``: 0, then whole steps of 1, 2 or 5 × 10^k,
    about five of them, the last at or above ``top``."""
    if top <= 0:
        return [0, 1]
    rough = top / 5
    magnitude = 10 ** math.floor(math.log10(rough))
    step = next(s for s in (max(1, round(m * magnitude)) for m in (1, 2, 5, 10)) if s >= rough)
    return [i * step for i in range(math.ceil(top / step) + 1)]


def _fit(text: str, width: float) -> str:
    """``text`` cut (with an ellipsis) to what ``width`` pixels hold."""
    most = max(4, int(width / _CHAR_W))
    return text if len(text) <= most else text[: most - 1] + "…"


# -- charts -----------------------------------------------------------------------------


def column_chart(
    chart: str,
    title: str,
    bars: Sequence[_Bar],
    series: Sequence[_Series],
    *,
    y_title: str,
    x_title: str,
) -> str:
    """Columns (``series`` stacked in order) over labelled x slots, with a y axis of
    round ticks, grid lines, axis titles and, for more than one series, a legend."""
    if not bars:
        return '<p class="muted">No data.</p>'
    marks = ticks(max(sum(bar.values[s.name] for s in series) for bar in bars))
    left, right, top = 36 + len(f"{marks[-1]:,}") * _CHAR_W, 24.0, 12.0  # room for tick labels
    plot_w, base = WIDTH - left - right, top + _PLOT_H
    scale = _PLOT_H / marks[-1]
    body = [_text(14, top + _PLOT_H / 2, y_title, anchor="middle", cls="title", upright=False)]
    for mark in marks:
        y = base - mark * scale
        body.append(f'<line x1="{left}" x2="{WIDTH - right}" y1="{y:.1f}" y2="{y:.1f}" '
                    f'stroke="{"#999" if mark == 0 else "#e4e4e4"}"/>')  # fmt: skip
        body.append(_text(left - 6, y + 4, f"{mark:,}", anchor="end", cls="axis"))
    slot = plot_w / len(bars)
    width = min(slot * 0.8, _BAR_MAX)
    longest = max(len(bar.label) for bar in bars) * _CHAR_W
    every = max(1, math.ceil((longest + 12) / slot))
    for i, bar in enumerate(bars):
        center = left + slot * (i + 0.5)
        y = base
        for s in series:
            h = bar.values[s.name] * scale
            y -= h
            body.append(_rect(chart, bar, s, center - width / 2, y, width, h))
        if i % every == 0:
            # keep the label inside the picture: the last one used to be clipped
            x = min(max(center, longest / 2 + 2), WIDTH - longest / 2 - 2)
            body.append(_text(x, base + 16, bar.label, anchor="middle", cls="axis"))
    body.append(_text(left + plot_w / 2, base + 38, x_title, anchor="middle", cls="title"))
    height = base + 46
    if len(series) > 1:
        body += _legend(series, height + 8)
        height += 20
    return _svg(chart, title, height, body)


def hbar_chart(
    chart: str, title: str, bars: Sequence[_Bar], series: Sequence[_Series], *, x_title: str
) -> str:
    """Horizontal bars, one row per key and one bar per series in it, the label on the
    left, the value at the bar's end, an x axis of round ticks below."""
    if not bars:
        return '<p class="muted">No data.</p>'
    label_w = min(300.0, max(len(bar.label) for bar in bars) * _CHAR_W + 8)
    left, right = label_w + 8, 48.0
    plot_w = WIDTH - left - right
    bar_h, gap = 14.0, 10.0
    row_h = bar_h * len(series) + gap
    plot_h = row_h * len(bars)
    marks = ticks(max(bar.values[s.name] for bar in bars for s in series))
    scale = plot_w / marks[-1]
    body = []
    for mark in marks:
        x = left + mark * scale
        body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{plot_h:.1f}" '
                    f'stroke="{"#999" if mark == 0 else "#e4e4e4"}"/>')  # fmt: skip
        body.append(_text(x, plot_h + 14, f"{mark:,}", anchor="middle", cls="axis"))
    for i, bar in enumerate(bars):
        y = i * row_h + gap / 2
        label = _fit(bar.label, label_w)
        body.append(_text(left - 8, y + bar_h * len(series) / 2 + 4, label, anchor="end"))
        for j, s in enumerate(series):
            value = bar.values[s.name]
            body.append(_rect(chart, bar, s, left, y + j * bar_h, value * scale, bar_h - 2))
            if value:  # no bar, no number: the axis says zero
                body.append(
                    _text(left + value * scale + 4, y + j * bar_h + bar_h - 4, f"{value:,}")
                )
    body.append(_text(left + plot_w / 2, plot_h + 32, x_title, anchor="middle", cls="title"))
    height = plot_h + 40
    if len(series) > 1:
        body += _legend(series, height + 8)
        height += 20
    return _svg(chart, title, height, body)


# -- the charts' data -----------------------------------------------------------------


def _category_bars(stats: FailureStats) -> list[_Bar]:
    return [
        _Bar(key, key, {"failed": n, "tasks_failed": stats.tasks_by_category.get(key, 0)})
        for key, n in stats.by_category.items()
    ]


def _blocker_bars(stats: FailureStats) -> list[_Bar]:
    return [_Bar(text, text, {"failed": n}) for text, n in stats.top_blockers]


def _timeline_bars(stats: FailureStats) -> list[_Bar]:
    step = stats.timeline.bucket_seconds
    fmt = "%H:%M:%S" if step < 60 else "%H:%M" if step < 86400 else "%Y-%m-%d"
    buckets = stats.timeline.buckets
    if step < 86400 and buckets and buckets[0].start.date() != buckets[-1].start.date():
        fmt = "%m-%d %H:%M"  # the span crosses midnight: the date is part of the time
    return [_Bar(b.start.isoformat(), b.start.strftime(fmt), {"failed": b.failed}) for b in buckets]


def _span_of(seconds: int) -> str:
    """A bucket width in words: ``10 s``, ``5 min``, ``1 h``, ``7 days``."""
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'s' if unit == 'day' and n > 1 else ''}"
    return f"{seconds} s"


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _histogram_bars(stats: FailureStats) -> list[_Bar]:
    return [
        _Bar(
            repr(b.lo),
            f"≥ {_seconds(b.lo)}" if b.hi is None else f"{b.lo:g}–{_seconds(b.hi)}",
            {"completed": b.completed, "failed": b.failed},
        )
        for b in stats.duration_histogram
    ]


# -- tables -------------------------------------------------------------------------------


def _cell(path: str, value: object, shown: str | None = None) -> str:
    """A table cell showing one JSON value, marked with its path for a reader to check."""
    raw = json.dumps(value)
    text = shown if shown is not None else ("–" if value is None else f"{value:,}")
    return f'<td data-field="{_attr(path)}" data-value="{_attr(raw)}">{escape(text)}</td>'


def _rate(part: int, whole: int) -> str:
    return f" ({part / whole:.1%})" if whole else ""


def _elapsed(value: float | None) -> str:
    """Seconds to the hundredth, or the thousandth below 0.1 s (never a bare 0.00)."""
    return "–" if value is None else f"{value:.2f}" if value >= 0.1 else f"{value:.3f}"


def _money(value: float, total: float) -> str:
    """Dollars, to the cent once the ``total`` they are part of reaches $100."""
    return f"${value:,.2f}" if total >= 100 else f"${value:,.4f}"


def _summary(stats: FailureStats) -> str:
    finished = stats.completed + stats.failed
    attempts = [
        ("Delegations", "delegations", stats.delegations, None),
        ("Completed", "completed", stats.completed, None),
        ("Failed", "failed", stats.failed, f"{stats.failed:,}{_rate(stats.failed, finished)}"),
        ("Retryable failures", "retryable", stats.retryable, None),
        ("Cancelled (stopped from outside)", "cancelled", stats.cancelled, None),
        ("Unfinished (never ended)", "unfinished", stats.unfinished, None),
        ("Recovery attempts", "recovery_attempts", stats.recovery_attempts, None),
    ]
    tasks = [
        ("Tasks", "tasks", stats.tasks, None),
        ("Completed", "tasks_completed", stats.tasks_completed, None),
        ("… after recovering", "recovered", stats.recovered, None),
        (
            "Failed",
            "tasks_failed",
            stats.tasks_failed,
            f"{stats.tasks_failed:,}{_rate(stats.tasks_failed, stats.tasks)}",
        ),
        ("Cancelled (every attempt)", "tasks_cancelled", stats.tasks_cancelled, None),
    ]

    def table(rows: list[tuple[str, str, int, str | None]]) -> str:
        cells = "".join(
            f"<tr><td>{escape(name)}</td>{_cell(path, value, shown)}</tr>"
            for name, path, value, shown in rows
        )
        return f"<table>{cells}</table>"

    return (
        '<div class="cards"><div><h2>Attempts</h2><p class="muted">One attempt is one '
        "delegation to a child; each retry is another attempt.</p>"
        f"{table(attempts)}</div><div><h2>Tasks</h2><p class='muted'>A task is what the "
        "attempts were for (a protein, a subject); it failed if its last attempt failed.</p>"
        f"{table(tasks)}</div></div>"
    )


def _outcome_table(stats: FailureStats) -> str:
    """Per outcome: attempts, tasks, what they cost, how long they took."""
    head = (
        "<tr><th>outcome</th><th>attempts</th><th>tasks</th><th>charged</th>"
        "<th>tokens</th><th>cost</th><th>turns</th><th>p50 s</th><th>p95 s</th><th>max s</th></tr>"
    )
    rows = []

    def money(value: float) -> str:
        return _money(value, stats.cost_usd)

    def spend_cells(key: str) -> list[str]:
        spent = stats.spend.get(key)
        if spent is None:
            return [f"<td>0</td><td>0</td><td>{money(0)}</td><td>0</td>"]
        return [
            _cell(f"spend.{key}.delegations", spent.delegations),
            _cell(f"spend.{key}.tokens", spent.tokens),
            _cell(f"spend.{key}.cost_usd", spent.cost_usd, money(spent.cost_usd)),
            _cell(f"spend.{key}.turns", spent.turns),
        ]

    for key in [COMPLETED_KEY, *stats.by_category]:
        if key == COMPLETED_KEY:
            attempts = _cell("completed", stats.completed)
            tasks = _cell("tasks_completed", stats.tasks_completed)
        else:
            attempts = _cell(f"by_category.{key}", stats.by_category[key])
            tasks = _cell(f"tasks_by_category.{key}", stats.tasks_by_category.get(key, 0))
        cost = spend_cells(key)
        d = stats.durations.get(key)
        times = (
            ["<td>–</td>"] * 3
            if d is None
            else [
                _cell(f"durations.{key}.{q}", value, _elapsed(value))
                for q, value in (("p50", d.p50), ("p95", d.p95), ("max", d.max))
            ]
        )
        rows.append(f"<tr><td>{escape(key)}</td>{attempts}{tasks}{''.join(cost + times)}</tr>")
    if stats.cancelled:  # stopped from outside: no outcome, but what they spent
        rows.append(
            f"<tr><td>{CANCELLED_KEY}</td>{_cell('cancelled', stats.cancelled)}<td></td>"
            + "".join(spend_cells(CANCELLED_KEY))
            + "<td></td>" * 3
            + "</tr>"
        )
    if stats.unfinished:  # started, never ended: attempts without an outcome
        rows.append(
            f"<tr><td>unfinished</td>{_cell('unfinished', stats.unfinished)}"
            + "<td></td>" * 8
            + "</tr>"
        )
    total = (
        f'<tr class="total"><td>total</td>{_cell("delegations", stats.delegations)}'
        f"{_cell('tasks', stats.tasks)}<td></td>{_cell('tokens_used', stats.tokens_used)}"
        f"{_cell('cost_usd', stats.cost_usd, money(stats.cost_usd))}{_cell('turns', stats.turns)}"
        + "<td></td>" * 3
        + "</tr>"
    )
    note = (
        ""
        if stats.spend
        else '<p class="muted">No attempt was charged tokens, cost or turns (a child '
        "that reports no usage charges nothing).</p>"
    )
    return f"<table>{head}{''.join(rows)}{total}</table>{note}"


# -- the page ---------------------------------------------------------------------------


def _span(stats: FailureStats) -> str:
    first, last = stats.first_timestamp, stats.last_timestamp
    if first is None or last is None:
        return "no timestamps"
    return f"{_when(first)} – {_when(last)} UTC"


def _when(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S}"


def _notes(stats: FailureStats) -> str:
    notes = []
    if stats.malformed_lines:
        notes.append(f"{stats.malformed_lines:,} malformed line(s) skipped.")
    notes += [f"A torn last line skipped in {path}." for path in stats.torn_files]
    notes += [f"{path} ends early (truncated or damaged): read up to there." for path in
              stats.truncated_files]  # fmt: skip
    if stats.duplicates:
        notes.append(
            f"{stats.duplicates:,} repeated finishing or recovery event(s) (a session logged "
            "twice, as a resumed run may) counted once."
        )
    if stats.skipped_before_since or stats.skipped_undated:
        notes.append(
            f"--since left out {stats.skipped_before_since:,} earlier and "
            f"{stats.skipped_undated:,} undated record(s)."
        )
    if not notes:
        return ""
    return '<ul class="notes">' + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"


def render_html(stats: FailureStats, *, title: str = "lyra failure statistics") -> str:
    """The whole page: attempts and tasks, outcomes with their cost, four charts, and
    the statistics as JSON data."""
    data = json.dumps(stats.model_dump(mode="json"), ensure_ascii=False)
    data = data.replace("<", "\\u003c")  # a blocker text cannot close the data element
    bucket = _span_of(stats.timeline.bucket_seconds)
    buckets = stats.timeline.buckets
    one_day = buckets and buckets[0].start.date() == buckets[-1].start.date()
    day = f" on {buckets[0].start:%Y-%m-%d}" if one_day else ""
    sections = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="lead muted">{stats.files:,} file(s), {stats.events:,} events, '
        f"{stats.reports:,} raw reports; {escape(_span(stats))}</p>",
        _notes(stats),
        _summary(stats),
        "<h2>Outcomes</h2>",
        '<p class="muted">Attempts and tasks per outcome; tokens, cost and turns of root '
        "delegations (a nested delegation's spend is in its parent's).</p>",
        _outcome_table(stats),
        "<h2>Failures by category</h2>",
        hbar_chart(
            "by_category",
            "Failures by category",
            _category_bars(stats),
            (_FAILED, _TASKS_FAILED),
            x_title="failures",
        ),
        "<h2>Failed attempts over time</h2>",
        column_chart(
            "timeline",
            "Failed attempts over time",
            _timeline_bars(stats),
            (_FAILED,),
            y_title=f"failed attempts per {bucket}",
            x_title=f"time (UTC{day}), {bucket} buckets",
        ),
        "<h2>Top blocker patterns</h2>",
        hbar_chart(
            "top_blockers",
            "Top blocker patterns",
            _blocker_bars(stats),
            (_FAILED,),
            x_title="failed attempts",
        ),
        "<h2>How long attempts took</h2>",
        column_chart(
            "duration_histogram",
            "How long attempts took",
            _histogram_bars(stats),
            (_COMPLETED, _FAILED),
            y_title="attempts",
            x_title="duration of the attempt (seconds)",
        ),
        f'<script type="application/json" id="lyra-stats">{data}</script>',
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
        + "\n".join(s for s in sections if s)
        + "</body></html>\n"
    )
