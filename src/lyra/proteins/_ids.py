"""Protein identifiers: the loose input check of DESIGN §6 and accession search.

``validate_protein_id`` is deliberately loose (PRD-003 R5): it rejects junk --
empty strings, ``None``, injection attempts, paths, markup -- before any request
is made, without rejecting valid but unusual ids. The data source is the final
judge of whether a protein exists.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "ACCESSION_FORMAT",
    "MAX_ID_LENGTH",
    "accession_problem",
    "find_protein_ids",
    "mentioned_ids",
    "normalize_protein_id",
    "validate_protein_id",
]

MAX_ID_LENGTH: Final = 15
_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9]{1,15}")
_SUFFIX: Final = r"-[1-9][0-9]{0,2}"
_ISOFORM: Final = re.compile(_SUFFIX)
"""An isoform's suffix (``P05067-2``): UniProt numbers a protein's isoforms from 1."""
# The official UniProt accession pattern (uniprot.org/help/accession_numbers), with an
# isoform's suffix. In text it is found in either case and word-bounded, so not inside
# longer tokens; an isoform's suffix is kept (another sequence, another model), and so
# is a sequence version's ``.2`` (refused as an ID is, never read as the accession
# unsaid), and ``AF-P38398-F1`` names P38398's model (``AF-P05067-2-F1`` the isoform's).
_CORE: Final = r"(?:[OPQ][0-9][A-Z0-9]{3}[0-9]|[A-NR-Z][0-9](?:[A-Z][A-Z0-9]{2}[0-9]){1,2})"
_ACCESSION: Final = re.compile(rf"{_CORE}(?:{_SUFFIX})?")
_MENTIONED: Final = re.compile(
    rf"(?<!\w)(?i:{_CORE}(?:{_SUFFIX}(?!\w|-(?!F\d)))?)(?!\w)"  # AF-P05067-2-F1 too
    r"(?:\.[0-9]+(?!\w|\.\w))?"  # a sequence version (P04637.2, "… P04637.2.")
)
ACCESSION_FORMAT: Final = "[OPQ][0-9][A-Z0-9]{3}[0-9] or [A-NR-Z][0-9]([A-Z][A-Z0-9]{2}[0-9]){1,2}"
"""UniProt's documented accession format (uniprot.org/help/accession_numbers); an
isoform adds ``-N`` (``P05067-2``)."""
_SHOWN_CHARS: Final = 40  # an echoed bad id is cut short: it may be huge or hostile


def _shown(value: str) -> str:
    """``value`` as a safe, bounded repr for an error message."""
    if len(value) > _SHOWN_CHARS:
        return repr(value[:_SHOWN_CHARS]) + "…"
    return repr(value)


def validate_protein_id(raw: object) -> tuple[bool, str | None]:
    """Check a protein id before any request (PRD-003).

    Returns ``(True, None)`` for a usable id, or ``(False, message)`` saying what
    is wrong; :func:`normalize_protein_id` gives a usable id's canonical form.
    """
    problem = _problem(raw)
    return (False, problem) if problem is not None else (True, None)


def normalize_protein_id(raw: object) -> str | None:
    """A usable id stripped and upper-cased (``" p04637 "`` → ``"P04637"``), else ``None``."""
    return raw.strip().upper() if isinstance(raw, str) and _problem(raw) is None else None


def _problem(raw: object) -> str | None:
    if raw is None:
        return "Protein ID must be a non-empty string, got None"
    if not isinstance(raw, str):
        return f"Protein ID must be a non-empty string, got {type(raw).__name__}"
    value = raw.strip()
    if not value:
        return "Protein ID must be a non-empty string, got an empty or blank string"
    base, dash, number = value.partition("-")
    if dash and _ISOFORM.fullmatch(dash + number) and base.isascii() and base.isalnum():
        value = base  # an isoform (P05067-2): its accession is checked like any other
    if not value.isascii() or not value.isalnum():  # characters first: they say more
        return (
            f"Invalid protein ID format: {_shown(value)} (only letters A-Z and digits 0-9 "
            f"allowed, and an isoform's -N){_hint(value)}"
        )
    if len(value) > MAX_ID_LENGTH or not _ID_PATTERN.fullmatch(value):
        return (
            f"Invalid protein ID format: {_shown(value)} is {len(value)} characters long "
            f"(at most {MAX_ID_LENGTH} letters and digits)"
        )
    return None


def _hint(value: str) -> str:
    """What an ID that is not an accession most likely meant, when it says so."""
    found = _MENTIONED.search(value)
    if found is None:
        return ""
    several = [m.group(0).upper().partition(".")[0] for m in _MENTIONED.finditer(value)]
    if len(several) > 1:  # P05067;P04637
        return f"; give each accession apart: {' '.join(several)}"
    accession = several[0]
    if value.upper().startswith("AF-"):
        return f"; an AlphaFold DB entry ID: give its UniProt accession, {accession}"
    if "." in value:
        return f"; a sequence version: give the accession alone, {accession}"
    isoform = _DASHED.fullmatch(value[found.end() :])
    if isoform:  # P05067-02 (UniProt numbers isoforms without zeros), P05067–2 (a dash)
        return f"; did you mean {accession}-{isoform.group(1)}?"
    return f"; did you mean {accession}?"


_DASHED: Final = re.compile("[-\u2010-\u2015\u2212\ufe63\uff0d]+0*([1-9][0-9]{0,2})")
"""An isoform's number after a dash of any kind, as a paper or a word processor writes
it (en dash, minus sign, …), typed twice (``--2``), or with leading zeros."""


def find_protein_ids(text: str) -> list[str]:
    """UniProt accessions (isoforms too: ``P05067-2``; with a sequence version,
    ``P04637.2``, as written, for the ID check to refuse) mentioned in ``text``, in
    either case, upper-cased, in order of first appearance, once each."""
    return list(dict.fromkeys(accession for _, accession in mentioned_ids(text)))


def mentioned_ids(text: str) -> list[tuple[int, str]]:
    """Each mention of an accession in ``text`` (as :func:`find_protein_ids` reads them)
    with where it starts, in order."""
    return [(match.start(), match.group(0).upper()) for match in _MENTIONED.finditer(text)]


def accession_problem(protein_id: str) -> str | None:
    """Why an ID that passed :func:`validate_protein_id` cannot be a UniProt accession, or None.

    No data source needs asking about such an ID: it cannot exist.
    """
    if _ACCESSION.fullmatch(protein_id):
        return None
    return (
        f"{protein_id!r} is not a UniProt accession (expected 6 or 10 letters and digits in "
        f"UniProt's format {ACCESSION_FORMAT}, such as P04637 or A0A0C5B5G6)"
    )
