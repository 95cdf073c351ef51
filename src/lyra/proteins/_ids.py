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
    "normalize_protein_id",
    "validate_protein_id",
]

MAX_ID_LENGTH: Final = 15
_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9]{1,15}")
# The official UniProt accession pattern (uniprot.org/help/accession_numbers),
# word-bounded so it is not found inside longer tokens.
_ACCESSION: Final = re.compile(
    r"\b(?:[OPQ][0-9][A-Z0-9]{3}[0-9]|[A-NR-Z][0-9](?:[A-Z][A-Z0-9]{2}[0-9]){1,2})\b"
)
ACCESSION_FORMAT: Final = "[OPQ][0-9][A-Z0-9]{3}[0-9] or [A-NR-Z][0-9]([A-Z][A-Z0-9]{2}[0-9]){1,2}"
"""UniProt's documented accession format (uniprot.org/help/accession_numbers)."""
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
    if not value.isascii() or not value.isalnum():  # characters first: they say more
        return (
            f"Invalid protein ID format: {_shown(value)} (only letters A-Z and digits 0-9 allowed)"
        )
    if len(value) > MAX_ID_LENGTH or not _ID_PATTERN.fullmatch(value):
        return (
            f"Invalid protein ID format: {_shown(value)} is {len(value)} characters long "
            f"(at most {MAX_ID_LENGTH} letters and digits)"
        )
    return None


def find_protein_ids(text: str) -> list[str]:
    """UniProt accessions mentioned in ``text``, in order of first appearance, once each."""
    return list(dict.fromkeys(match.group(0) for match in _ACCESSION.finditer(text)))


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
