"""What to try next, grouped: one line per kind of advice, naming every protein it is for.

Proteins that failed for the same reason get one line ("Check the identifiers:
FAKE1, FAKE2"), not one line each. The advice is the protein workload's own
where it knows the cause better than the generic report does: an ID that is no
UniProt accession, an accession the bundled dataset does not hold, a protein
AlphaFold DB has no model for; otherwise the report's first suggested action.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from lyra.proteins._output import CompletedAnalysis, ProteinEntry
from lyra.proteins._pipeline import pdb_link
from lyra.proteins._structure import LIVE_HINT
from lyra.supervisor import ServiceHealth

__all__ = ["next_steps"]

_NOT_ACCESSION = "is not a UniProt accession"
_NOT_BUNDLED = "try --source live"
_MALFORMED = ("Invalid protein ID format", "Protein ID must be")
_NO_MODEL = "AlphaFold DB has no model"
_PDB = "No AlphaFold DB model: look for experimental structures in the PDB"
_PRIMARY = re.compile(r"isoforms are named by the primary accession: (\S+), if that is")


def _unreachable(health: ServiceHealth) -> str:
    """The advice for proteins a source could not fetch because the network is down."""
    return (
        f"The network cannot be reached ({health.name}: {health.detail}): --source live "
        "needs AlphaFold DB and UniProt, and retrying will not reach them. --source offline "
        "(the default) works without a network, from the bundled data: lyra analyze {id_list}"
    )


def _advice(entry: ProteinEntry, unreachable: ServiceHealth | None = None) -> str | None:
    """The kind of advice for one entry (its protein ID is added by the caller)."""
    if isinstance(entry, CompletedAnalysis):
        return None
    if unreachable is not None and entry.error_type == "connection":
        return _unreachable(unreachable)
    error = entry.error
    meant = _PRIMARY.search(error)
    if meant is not None:  # (an isoform of a bundled entry by another of its names)
        return f"Isoforms are named by the primary accession: run {meant[1]} instead of {{ids}}"
    if error.startswith(_MALFORMED):  # the reason for each is in its own line above
        return "Fix the identifiers (each a UniProt accession, such as P04637 or P05067-2)"
    if _NOT_ACCESSION in error:
        return "Check the identifiers (not UniProt accessions, e.g. P04637 or A0A0C5B5G6)"
    if _NOT_BUNDLED in error:
        return "Not in the bundled dataset; run them with --source live"
    if LIVE_HINT in error:
        return "Fetch their AlphaFold DB models with --source live"
    if _NO_MODEL in error or "no AlphaFold DB model" in error:
        return _PDB
    if entry.suggested_actions:
        action = entry.suggested_actions[0]
        return action.replace(f"'{entry.protein_id}'", "{ids}")
    return None


def next_steps(
    entries: Sequence[ProteinEntry], unreachable: ServiceHealth | None = None
) -> list[str]:
    """One line per kind of advice, in first-seen order, with the proteins it is for
    (``unreachable``: the data source's health check, when the network is down)."""
    grouped: dict[str, list[str]] = {}
    for entry in entries:
        advice = _advice(entry, unreachable)
        if advice is not None:
            grouped.setdefault(advice, []).append(entry.shown_id)
    lines = []
    for advice, ids in grouped.items():
        if advice == _PDB:
            ids = [f"{i} ({pdb_link(i)})" for i in ids]
        names = ", ".join(ids)
        if "{id_list}" in advice:
            lines.append(advice.replace("{id_list}", " ".join(ids)))
        elif "{ids}" in advice:
            lines.append(advice.replace("{ids}", names))
        else:
            lines.append(f"{advice}: {names}")
    return lines
