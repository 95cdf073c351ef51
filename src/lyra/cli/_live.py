"""The progress display of ``lyra analyze``: on stderr, never on stdout.

On a terminal, a live table (rich) of the children running now -- protein,
what it is doing, attempt, time elapsed, time since its last progress, tokens
-- under the counts so far, by outcome, and failed or partial by category. Not on a
terminal, plain lines: one per protein as it finishes, or, for a streamed run,
one summary line every few seconds and one when the last protein finishes.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, TextIO

import anyio

from lyra.delegation import RunningAttempt, concurrency, observing, running
from lyra.delegation._internal import printable

REFRESH = 0.25
"""Seconds between two redraws of the table."""
SHOWN = 12
"""Most running children listed (the longest-running first)."""
SUMMARY_EVERY = 5.0
"""Seconds between two summary lines of a streamed run off a terminal."""


class LiveView:
    """Counts finished proteins (``update``) and shows progress while ``show`` runs."""

    def __init__(self, total: int, stream: TextIO, *, streamed: bool = False) -> None:
        self.total, self.stream, self.streamed = total, stream, streamed
        self.done = 0
        self.kinds: Counter[str] = Counter()
        self.categories: Counter[str] = Counter()
        self.terminal = stream.isatty()
        self._last_summary = time.monotonic()

    def update(self, entry: Any) -> None:
        """A protein finished: count it (and, off a terminal, say so)."""
        self.done += 1
        kind = type(entry).__name__.removesuffix("Analysis").lower()
        self.kinds[kind] += 1
        category = getattr(entry, "category", None)
        if category is not None:
            self.categories[str(category)] += 1
        if self.terminal:
            return
        if not self.streamed:
            attempts = getattr(entry, "attempts", 1)
            why = f" ({category})" if category is not None else ""
            shown = printable(entry.shown_id)  # an ID from a file may hold escape codes
            recovery = getattr(entry, "recovery", None)
            how = f": {recovery}" if recovery else ""  # a doubled timeout, a backoff
            done = f"[{self.done}/{self.total}] {shown}: {kind}{why}, {attempts} attempt(s)"
            lowered = concurrency()
            pace = f" [rate limited: {lowered[0]} of {lowered[1]} at once]" if lowered else ""
            self._line(done + how + pace)
        elif self.done >= self.total or time.monotonic() - self._last_summary >= SUMMARY_EVERY:
            self._last_summary = time.monotonic()  # (the last protein's line always comes)
            self._line(self.counts())

    def counts(self) -> str:
        """The counts so far, in one line (and, while a provider pushes back, how many
        children run at once)."""
        # partial proteins carry a category too: the breakdown is labelled as stdout's
        # "Failed or partial, by category", never as the failed count's
        by = ", ".join(f"{name} {n}" for name, n in sorted(self.categories.items()) if n)
        lowered = concurrency()
        return (
            f"[{self.done:,}/{self.total:,}] {self.kinds['completed']:,} completed, "
            f"{self.kinds['partial']:,} partial, {self.kinds['failed']:,} failed"
            + (f"; failed or partial, by category: {by}" if by else "")
            + (f"; rate limited: {lowered[0]} of {lowered[1]} at once" if lowered else "")
        )

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    async def show(self, work: Any) -> Any:
        """Await ``work()`` with the display running; the display ends with it."""
        if not self.terminal:
            return await work()
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self.stream)
        with observing(), Live(console=console, auto_refresh=False, transient=True) as live:
            async with anyio.create_task_group() as group:

                async def redraw() -> None:
                    while True:
                        live.update(self.table(running()), refresh=True)
                        await anyio.sleep(REFRESH)

                group.start_soon(redraw)
                result = await work()
                group.cancel_scope.cancel()
        console.print(self.counts(), highlight=False)
        return result

    def table(self, attempts: list[RunningAttempt]) -> Any:
        """The table of running children, titled with the counts so far."""
        from rich.table import Table
        from rich.text import Text

        table = Table(title=self.counts(), title_justify="left", expand=False)
        for heading in ("protein", "doing", "attempt", "elapsed", "idle", "tokens"):
            table.add_column(heading, justify="right" if heading != "doing" else "left")
        table.columns[0].justify = "left"
        for view in attempts[:SHOWN]:
            table.add_row(  # Text: an ID or a step is shown as written, never as markup
                Text(printable(view.subject or view.session_id)),
                Text(printable(view.doing[:48])),
                str(view.attempt),
                f"{view.elapsed:.1f}s",
                f"{view.idle:.1f}s",
                f"{view.tokens:,}" if view.tokens else "",
            )
        if len(attempts) > SHOWN:
            table.caption = f"… and {len(attempts) - SHOWN} more running"
        return table
