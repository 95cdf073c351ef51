"""IDs a scientist types, resolved to the primary accession the data use.

UniProt entry names (``P53_HUMAN``) and secondary accessions (``Q15086``, an
accession merged into ``P04637``) that the bundled data record are resolved to
their primary accession, with a one-line note saying so. A comma-joined
argument (``"P04637,P05067"``) is several IDs, never one with half of it lost.
Anything else is left as it is, for the ID checks to judge.
"""

from __future__ import annotations

from functools import cache
from typing import Final

from lyra.proteins._ids import normalize_protein_id
from lyra.proteins._offline import bundled_entries

__all__ = ["resolve_protein_id", "split_ids"]

_SEPARATOR: Final = ","


@cache
def _aliases() -> dict[str, tuple[str, str]]:
    """Alias → (primary accession, the note), from the bundled data."""
    found: dict[str, tuple[str, str]] = {}
    for accession, entry in bundled_entries().items():
        name = entry.get("entry_name")
        if name:
            found[name] = (accession, f"{name} is the UniProt entry name of {accession}")
        for secondary in entry.get("secondary_accessions") or ():
            of = f"{accession} ({name})" if name else accession
            found[secondary] = (accession, f"{secondary} is a secondary accession of {of}")
    return found


def resolve_protein_id(raw: str) -> tuple[str, str | None]:
    """``raw`` as the ID to analyse, and a note when it was resolved: an entry name or a
    secondary accession the bundled data map becomes its primary accession
    (``P53_HUMAN`` → ``P04637``); any other ID is only normalised where valid."""
    key = raw.strip().upper()
    alias = _aliases().get(key)
    if alias is None:
        return normalize_protein_id(raw) or raw, None
    primary, note = alias
    return primary, f"{note} in the bundled UniProt data: analysed as {primary}"


def split_ids(raw: str) -> list[str]:
    """A comma-joined argument as its IDs (``"P04637,P05067"``, ``"P69905,"``); one
    without a comma, or with nothing between its commas, as itself."""
    if _SEPARATOR not in raw:
        return [raw]
    parts = [part.strip() for part in raw.split(_SEPARATOR)]
    return [part for part in parts if part] or [raw]
