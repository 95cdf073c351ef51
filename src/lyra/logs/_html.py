"""One self-contained HTML page of failure statistics, charts as inline SVG.

No script, style sheet or font comes from anywhere else, so the file can be
mailed or attached to a ticket. Every bar is a ``<rect>`` carrying
``data-chart``, ``data-key``, ``data-series`` and ``data-value``: the numbers
a reader sees are the numbers a test (or a script) can read back, and they
equal the fields of ``lyra logs stats --json``:

==================  ====================================  ======================
data-chart          data-key                              data-series
==================  ====================================  ======================
by_category         category                              ``failed``
timeline            bucket start (ISO 8601)               ``completed``/``failed``
top_blockers        blocker pattern                       ``failed``
duration_histogram  ``lo`` (seconds, as in the JSON)      ``completed``/``failed``
==================  ====================================  ======================
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from lyra.logs._stats import FailureStats

WIDTH = 760
_LABEL_W = 300  # room for a blocker pattern in the horizontal bar charts
_ROW_H = 22
_COL_AREA_H = 160
_COLORS = {"completed": "#4c9a6a", "failed": "#c8553d"}
_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:800px;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em}
table{border-collapse:collapse}td,th{padding:2px 10px;text-align:right}
td:first-child,th:first-child{text-align:left}tr:nth-child(even){background:#f4f4f4}
svg text{font:12px system-ui,sans-serif;fill:#222}.muted{color:#777}
"""


@dataclass(frozen=True, slots=True)
class _Bar:
    key: str
    label: str
    values: dict[str, int]  # series -> value


def _attr(text: object) -> str:
    return escape(str(text), quote=True)


def _rect(chart: str, bar: _Bar, series: str, x: float, y: float, w: float, h: float) -> str:
    value = bar.values[series]
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{max(h, 0):.1f}" '
        f'fill="{_COLORS[series]}" data-chart="{chart}" data-key="{_attr(bar.key)}" '
        f'data-series="{series}" data-value="{value}">'
        f"<title>{escape(bar.label)}: {value} {series}</title></rect>"
    )


def _svg(chart: str, title: str, height: float, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0f}" '
        f'viewBox="0 0 {WIDTH} {height:.0f}" role="img" aria-label="{_attr(title)}" '
        f'data-chart="{chart}">' + "".join(body) + "</svg>"
    )


def hbar_chart(chart: str, title: str, bars: Sequence[_Bar]) -> str:
    """Horizontal bars, one series (``failed``), label on the left, value on the right."""
    if not bars:
        return '<p class="muted">No data.</p>'
    top = max(max(bar.values["failed"] for bar in bars), 1)
    area = WIDTH - _LABEL_W - 60
    body: list[str] = []
    for i, bar in enumerate(bars):
        y = i * _ROW_H + 4
        w = area * bar.values["failed"] / top
        label = bar.label if len(bar.label) <= 45 else bar.label[:44] + "…"
        body += [
            f'<text x="{_LABEL_W - 8}" y="{y + 14}" text-anchor="end">{escape(label)}</text>',
            _rect(chart, bar, "failed", _LABEL_W, y, w, _ROW_H - 6),
            f'<text x="{_LABEL_W + w + 6:.1f}" y="{y + 14}">{bar.values["failed"]}</text>',
        ]
    return _svg(chart, title, len(bars) * _ROW_H + 8, body)


def column_chart(chart: str, title: str, bars: Sequence[_Bar], *, every: int = 1) -> str:
    """Stacked columns (``completed`` under ``failed``), x labels every ``every`` bars."""
    if not bars:
        return '<p class="muted">No data.</p>'
    top = max(max(sum(bar.values.values()) for bar in bars), 1)
    left, width = 40, (WIDTH - 50) / len(bars)
    body = [f'<text x="4" y="14">{top}</text>', f'<text x="4" y="{_COL_AREA_H + 10}">0</text>']
    for i, bar in enumerate(bars):
        x, base = left + i * width, float(_COL_AREA_H + 10)
        for series in ("completed", "failed"):
            h = _COL_AREA_H * bar.values[series] / top
            base -= h
            body.append(_rect(chart, bar, series, x + 1, base, width - 2, h))
        if i % every == 0:
            body.append(f'<text x="{x + 1:.1f}" y="{_COL_AREA_H + 26}">{escape(bar.label)}</text>')
    legend = "".join(
        f'<rect x="{WIDTH - 200 + 90 * j}" y="{_COL_AREA_H + 36}" width="10" height="10" '
        f'fill="{color}"/><text x="{WIDTH - 186 + 90 * j}" y="{_COL_AREA_H + 45}">{name}</text>'
        for j, (name, color) in enumerate(_COLORS.items())
    )
    return _svg(chart, title, _COL_AREA_H + 52, [*body, legend])


# -- the four charts -----------------------------------------------------------------


def _category_bars(stats: FailureStats) -> list[_Bar]:
    return [_Bar(k, k, {"failed": n}) for k, n in stats.by_category.items()]


def _blocker_bars(stats: FailureStats) -> list[_Bar]:
    return [_Bar(text, text, {"failed": n}) for text, n in stats.top_blockers]


def _timeline_bars(stats: FailureStats) -> list[_Bar]:
    step = stats.timeline.bucket_seconds
    fmt = "%H:%M:%S" if step < 60 else "%m-%d %H:%M" if step < 86400 else "%Y-%m-%d"
    return [
        _Bar(
            b.start.isoformat(),
            b.start.strftime(fmt),
            {"completed": b.completed, "failed": b.failed},
        )
        for b in stats.timeline.buckets
    ]


def _seconds(value: float) -> str:
    return f"{value:g}s"


def _histogram_bars(stats: FailureStats) -> list[_Bar]:
    return [
        _Bar(
            repr(b.lo),
            f"≥{_seconds(b.lo)}" if b.hi is None else f"{_seconds(b.lo)}–{_seconds(b.hi)}",
            {"completed": b.completed, "failed": b.failed},
        )
        for b in stats.duration_histogram
    ]


# -- the page ---------------------------------------------------------------------------


def _summary_table(stats: FailureStats) -> str:
    rows = [
        ("Delegations", stats.delegations),
        ("Completed", stats.completed),
        ("Failed", f"{stats.failed} ({stats.failure_rate:.1%})"),
        ("Retryable failures", stats.retryable),
        ("Recovered tasks", stats.recovered),
        ("Unfinished", stats.unfinished),
        ("Recovery attempts", stats.recovery_attempts),
        ("Malformed lines skipped", stats.malformed_lines),
    ]
    cells = "".join(
        f'<tr><td>{escape(k)}</td><td data-field="{_attr(k)}">{escape(str(v))}</td></tr>'
        for k, v in rows
    )
    return f"<table>{cells}</table>"


def _duration_table(stats: FailureStats) -> str:
    if not stats.durations:
        return '<p class="muted">No durations.</p>'

    def cell(value: float | None) -> str:
        return "–" if value is None else f"{value:.2f}"

    head = "<tr><th>outcome</th><th>n</th><th>p50 s</th><th>p95 s</th><th>max s</th></tr>"
    rows = "".join(
        f"<tr><td>{escape(k)}</td><td>{d.count}</td><td>{cell(d.p50)}</td>"
        f"<td>{cell(d.p95)}</td><td>{cell(d.max)}</td></tr>"
        for k, d in stats.durations.items()
    )
    return f"<table>{head}{rows}</table>"


def _span(stats: FailureStats) -> str:
    if stats.first_timestamp is None or stats.last_timestamp is None:
        return "no timestamps"
    return (
        f"{stats.first_timestamp:%Y-%m-%d %H:%M:%S} – {stats.last_timestamp:%Y-%m-%d %H:%M:%S} UTC"
    )


def render_html(stats: FailureStats, *, title: str = "lyra failure statistics") -> str:
    """The whole page: summary, four charts, duration table, and the stats as JSON data."""
    timeline, histogram = _timeline_bars(stats), _histogram_bars(stats)
    data = json.dumps(stats.model_dump(mode="json"), ensure_ascii=False)
    data = data.replace("<", "\\u003c")  # a blocker text cannot close the data element
    sections = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted">{stats.files} file(s), {stats.events} events, '
        f"{stats.reports} raw reports; {escape(_span(stats))}</p>",
        _summary_table(stats),
        "<h2>Failures by category</h2>",
        hbar_chart("by_category", "Failures by category", _category_bars(stats)),
        f"<h2>Failures over time ({stats.timeline.bucket_seconds}s buckets)</h2>",
        column_chart(
            "timeline", "Delegations over time", timeline, every=max(1, len(timeline) // 8)
        ),
        "<h2>Top blocker patterns</h2>",
        hbar_chart("top_blockers", "Top blocker patterns", _blocker_bars(stats)),
        "<h2>Duration distribution</h2>",
        column_chart(
            "duration_histogram",
            "Duration distribution",
            histogram,
            every=max(1, len(histogram) // 7),  # bin labels are wide; keep them apart
        ),
        _duration_table(stats),
        f'<script type="application/json" id="lyra-stats">{data}</script>',
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
        + "\n".join(sections)
        + "</body></html>\n"
    )
