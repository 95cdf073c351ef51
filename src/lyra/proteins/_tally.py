"""What a run keeps of its proteins as they finish.

Every entry goes to the run directory at once: its report and brief, and a line
of ``results.jsonl``. A kept tally also holds every entry, for an output that
lists them all; a streaming one holds only what the summary, the quorum and the
answer need -- counts, each protein's quorum outcome (a few bytes), the entries
of critical proteins and a bounded sample -- so a run of any size fits in flat
memory. Critical proteins may be retried after the first round, so their lines
are written when the run ends: every protein is in ``results.jsonl`` exactly once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import orjson

from lyra.proteins import _conclude as conclude
from lyra.proteins._output import (
    CompletedAnalysis,
    FailedAnalysis,
    PartialAnalysis,
    ProteinEntry,
    Summary,
)
from lyra.supervisor import ChildOutcome, RunDir

SAMPLE = 20
"""Entries of each kind a streaming tally keeps for the answer."""

_KIND = {CompletedAnalysis: "completed", PartialAnalysis: "partial", FailedAnalysis: "failed"}


class Tally:
    """The entries of one run (see the module docstring)."""

    def __init__(self, folder: RunDir | None, *, keep: bool, hold: Iterable[str] = ()) -> None:
        self.folder = folder
        self.keep = keep
        self.hold = frozenset(hold)
        self.entries: dict[str, ProteinEntry] = {}
        """Every entry (kept), or the held and sampled ones (streaming)."""
        self.outcomes: dict[str, ChildOutcome] = {}
        self.kinds: Counter[str] = Counter()
        self.by_category: Counter[str] = Counter()
        self.started: dict[str, None] = {}
        """Proteins handed to a child and not finished yet, in the order handed."""
        self.written = _written(folder)
        """Proteins ``results.jsonl`` holds already (a resumed run does not repeat them)."""

    def start(self, protein_id: str) -> None:
        """Note a protein as handed to its child."""
        self.started[protein_id] = None

    def add(self, entry: ProteinEntry, report: str) -> None:
        """Count a finished protein (again, for a retried one) and write its files."""
        protein_id = entry.protein_id
        self.started.pop(protein_id, None)
        previous = self.entries.get(protein_id)
        if protein_id in self.outcomes:  # a retry: the new entry replaces the old
            self._uncount(previous or self.outcomes[protein_id])
        self.outcomes[protein_id] = conclude.outcome_of(entry)
        self.kinds[_KIND[type(entry)]] += 1
        if not isinstance(entry, CompletedAnalysis) and entry.category is not None:
            self.by_category[str(entry.category)] += 1
        if self.keep or protein_id in self.hold or self._sampling(entry):
            self.entries[protein_id] = entry
        self._write(entry, report)

    def _uncount(self, old: ProteinEntry | ChildOutcome) -> None:
        kind = old.outcome if isinstance(old, ChildOutcome) else _KIND[type(old)]
        self.kinds[kind] -= 1
        if isinstance(old, PartialAnalysis | FailedAnalysis) and old.category is not None:
            self.by_category[str(old.category)] -= 1

    def _sampling(self, entry: ProteinEntry) -> bool:
        kind = type(entry)
        return sum(1 for e in self.entries.values() if type(e) is kind) < SAMPLE

    def _write(self, entry: ProteinEntry, report: str) -> None:
        folder = self.folder
        if folder is None:
            return
        folder.save(folder.report(entry.protein_id), report, sync=False)
        if isinstance(entry, CompletedAnalysis | PartialAnalysis):
            folder.save(folder.brief(entry.protein_id), entry.brief, sync=False)
        if entry.protein_id not in self.hold:  # a held one may be retried: its line waits
            self._append(entry)

    def _append(self, entry: ProteinEntry) -> None:
        if self.folder is not None and entry.protein_id not in self.written:
            self.written.add(entry.protein_id)
            self.folder.append(self.folder.results, _line(entry))

    def finish(self) -> None:
        """Write the held proteins' lines (their entries are final now)."""
        if self.folder is None:
            return
        for protein_id in sorted(self.hold & self.entries.keys()):
            self._append(self.entries[protein_id])
        self.folder.close()

    def summary(self, unfinished: int | None = None) -> Summary:
        """The counts, which always add up to the proteins requested (``unfinished``:
        those an interrupted run did not finish; ``None`` for a run that ended)."""
        return Summary(
            total_requested=sum(self.kinds.values()) + (unfinished or 0),
            successful=self.kinds["completed"],
            partial=self.kinds["partial"],
            failed=self.kinds["failed"],
            unfinished=unfinished,
        )

    def quorum_view(self, requested: Iterable[str] | None) -> list[ChildOutcome]:
        """Each protein's quorum outcome, in request order when it is known."""
        if requested is None:
            return list(self.outcomes.values())
        return [self.outcomes[p] for p in requested if p in self.outcomes]

    def in_order(self, requested: Iterable[str]) -> list[ProteinEntry]:
        """The kept entries in request order."""
        return [self.entries[p] for p in requested if p in self.entries]


def _written(folder: RunDir | None) -> set[str]:
    """The proteins an earlier process of this run wrote to ``results.jsonl`` (whole
    lines only: a line cut short by a kill is no entry)."""
    if folder is None or not folder.results.exists():
        return set()
    written = set()
    with folder.results.open("rb") as lines:
        for line in lines:
            try:
                written.add(str(orjson.loads(line)["protein_id"]))
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue
    return written


def _line(entry: ProteinEntry) -> str:
    """One protein as a line of ``results.jsonl`` (``kind`` first)."""
    kind = _KIND[type(entry)]
    return f'{{"kind":"{kind}",{entry.model_dump_json()[1:]}'  # JSON-safe text
