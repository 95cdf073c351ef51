"""IDs a scientist types, resolved to the primary accession the data use.

UniProt entry names (``P53_HUMAN``), secondary accessions (``Q15086``, an
accession merged into ``P04637``) and the isoform an entry displays as its
canonical sequence (``P05067-1``) that the bundled data record are resolved to
their primary accession, with a one-line note saying so. A comma-joined
argument (``"P04637,P05067"``) is several IDs, never one with half of it lost.
A gene name (``TP53``) is not resolved -- one gene name belongs to many organisms'
proteins -- but its refusal names the bundled entry of that gene
(:func:`id_hint`, which also says what an entry name or a secondary accession
with an isoform's ``-N`` stands for). Anything else is left as it is, for the ID
checks to judge.
"""

from __future__ import annotations

from functools import cache
from typing import Final, Literal

from lyra.proteins._ids import normalize_protein_id
from lyra.proteins._offline import bundled_entries

__all__ = [
    "gene_entries",
    "gene_hint",
    "id_hint",
    "named_hint",
    "protein_names",
    "resolve_protein_id",
    "split_ids",
]

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
        displayed = entry.get("displayed_isoform")
        if displayed:
            found[displayed] = (
                accession,
                f"{displayed} is the isoform UniProt's entry {accession} displays (its "
                "canonical sequence)",
            )
    return found


@cache
def _genes() -> dict[str, list[str]]:
    """Gene name (upper case) → the bundled entries of that gene."""
    found: dict[str, list[str]] = {}
    for accession, entry in bundled_entries().items():
        gene = entry.get("gene")
        if isinstance(gene, str) and gene.strip():
            found.setdefault(gene.strip().upper(), []).append(accession)
    return found


def gene_entries(value: str) -> list[str]:
    """The bundled entries whose gene ``value`` names (any case; ``[]``: none)."""
    return list(_genes().get(value.strip().upper(), ()))


def gene_hint(value: str) -> str:
    """For an ID that is a gene name of a bundled entry, what to give instead
    (``"; TP53 is the gene of P04637 (Cellular tumor antigen p53, Homo sapiens) in the
    bundled data: …"``); else ``""``."""
    accessions = _genes().get(value.strip().upper())
    return f"; {value.strip()} {named_hint('gene', accessions)}" if accessions else ""


def named_hint(kind: Literal["gene", "name"], accessions: list[str]) -> str:
    """What a gene name or a protein name of bundled entries stands for, and what to give
    instead (``"is the gene of P04637 (Cellular tumor antigen p53, Homo sapiens) in the
    bundled data: …"``)."""
    entries = bundled_entries()
    named = ", ".join(
        f"{a} ({entries[a].get('description')}, {entries[a].get('organism')})" for a in accessions
    )
    what = "a gene name" if kind == "gene" else "a protein's name"
    whose = "genes" if kind == "gene" else "proteins"
    return (
        f"is the {kind} of {named} in the bundled data: {what} is no accession (other "
        f"organisms' {whose} share it), so give the accession"
    )


@cache
def protein_names() -> dict[str, str]:
    """Accession → the bundled entry's name, where it is a name (a few words), not a
    sentence (a fragment's description may be one)."""
    return {
        accession: name
        for accession, entry in bundled_entries().items()
        if isinstance(name := entry.get("description"), str)
        and 0 < len(name.split()) <= 6
        and not name.rstrip().endswith(".")
    }


def id_hint(value: str) -> str:
    """What an ID the checks refuse (or the data lack) most likely meant, from the
    bundled data: a gene's entry (:func:`gene_hint`); for an entry name or secondary
    accession with an isoform's ``-N`` (``A4_HUMAN-2``, ``P09000-2``), the primary
    accession isoforms are named by; for another name with ``_``, that entry names are
    read for the bundled entries only. Else ``""``."""
    hint = gene_hint(value)
    key = value.strip().upper()
    base, dash, number = key.partition("-")
    alias = _aliases().get(base) if dash and number.isdigit() else None
    if hint or (alias is None and "_" not in key):
        return hint
    if alias is not None:
        primary, note = alias
        return (
            f"; {note} in the bundled data, and isoforms are named by the primary "
            f"accession: {primary}-{number.lstrip('0') or number}, if that is the one meant"
        )
    return (
        "; a name with '_' is a UniProt entry name (such as A4_HUMAN), read only for the "
        "bundled data's entries: give the accession"
    )


def resolve_protein_id(raw: str) -> tuple[str, str | None]:
    """``raw`` as the ID to analyse, and a note when it was resolved: an entry name or a
    secondary accession the bundled data map becomes its primary accession
    (``P53_HUMAN`` → ``P04637``); any other ID is only normalised where valid."""
    key = raw.strip().upper()
    alias = _aliases().get(key)
    if alias is None:
        return normalize_protein_id(raw) or raw, None
    primary, note = alias
    return primary, f"{note} in the bundled data: analysed as {primary}"


def split_ids(raw: str) -> list[str]:
    """An argument as its IDs: joined by commas (``"P04637,P05067"``, ``"P69905,"``), or
    by white space when every word is an ID (``"P04637 P69905"`` quoted as one argument;
    ``"bad id!"`` stays one request, reported as it was given). A blank one as itself (a
    blank request is reported, not dropped)."""
    parts = [part.strip() for part in raw.split(_SEPARATOR)]
    found: list[str] = []
    for part in parts:
        words = part.split()
        found += words if len(words) > 1 and all(map(normalize_protein_id, words)) else [part]
    return [part for part in found if part] or [raw]
