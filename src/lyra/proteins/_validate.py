"""Defensive handling of protein responses (PRD-003, DESIGN §6).

Every response is checked before any field is used. Anything unusable becomes a
structured error dict -- ``{"error", "uniprot_id", "source"}`` plus ``status``
when the response had one -- never an exception, so PRD-001's soft-failure
check sees it. Exceptions raised by a source itself propagate: the caller
classifies them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from lyra import events
from lyra.delegation import valid_data
from lyra.proteins._aliases import id_hint
from lyra.proteins._ids import accession_problem, normalize_protein_id, validate_protein_id
from lyra.proteins._offline import OfflineSource
from lyra.proteins._sources import ProteinSource

__all__ = ["OPTIONAL_DEFAULTS", "REQUIRED_FIELDS", "process_protein", "validate_response"]

REQUIRED_FIELDS: Final = ("description", "organism")
#: Filled in when the field is missing *or* null, so downstream code never
#: meets a None gene or assessment.
OPTIONAL_DEFAULTS: Final[Mapping[str, Any]] = {
    "gene": "Unknown",
    "drug_target_assessment": "Assessment unavailable",
    "length": None,
    "confidence": None,
}


_MAX_SHOWN: Final = 100


def _problem(response: object) -> str | None:
    """Why ``response`` cannot be used, or None when it can."""
    if response is None:
        return "No response from protein database"
    if not isinstance(response, dict):
        return f"Unexpected response type: {type(response).__name__}"
    if "error" in response:
        return str(response["error"]) or "The source reported an unspecified error"
    missing = [
        field
        for field in REQUIRED_FIELDS
        if not isinstance(response.get(field), str) or not response[field].strip()
    ]
    if missing:
        return f"Incomplete data — missing: {', '.join(missing)}"
    return None


def _error(message: str, protein_id: object, source: str) -> dict[str, Any]:
    shown = protein_id if protein_id is None or isinstance(protein_id, str) else repr(protein_id)
    if isinstance(shown, str) and len(shown) > _MAX_SHOWN:  # a hostile id may be huge
        shown = shown[:_MAX_SHOWN] + "…"
    return {"error": message, "uniprot_id": shown, "source": source}


def validate_response(response: object, protein_id: str, source: str) -> dict[str, Any]:
    """A usable copy of ``response`` with optional fields defaulted, or an error dict.

    Text that is not valid Unicode (a lone surrogate a JSON answer may carry) is
    replaced, so the analysis and every file written from it stay writable.
    """
    response = valid_data(response)
    reason = _problem(response)
    if reason is not None:
        events.warning(
            events.PROTEIN_RESPONSE_INVALID, uniprot_id=protein_id, source=source, reason=reason
        )
        error = _error(reason, protein_id, source)
        if isinstance(response, dict) and isinstance(response.get("status"), int):
            error["status"] = response["status"]  # lets the caller tell 404 from 5xx
        return error
    assert isinstance(response, dict)  # _problem() rejected everything else
    result: dict[str, Any] = dict(response)
    for field, default in OPTIONAL_DEFAULTS.items():
        if result.get(field) is None:
            result[field] = default
    return result


def process_protein(protein_id: object, source: ProteinSource | None = None) -> dict[str, Any]:
    """Validate the id, fetch it (offline by default) and validate the response.

    A bad id, or one that is no UniProt accession, gives an error dict without any
    request; a missing protein or a bad response gives an error dict; exceptions
    raised by the source propagate.
    """
    source = source if source is not None else OfflineSource()
    ok, problem = validate_protein_id(protein_id)
    value = normalize_protein_id(protein_id)
    if not ok or value is None:
        error = _error(problem or "invalid protein ID", protein_id, source.name)
        events.warning(
            events.PROTEIN_ID_INVALID,
            uniprot_id=error["uniprot_id"],
            source=source.name,
            reason=problem,
        )
        return error
    why = accession_problem(value) if getattr(source, "uniprot_accessions", True) else None
    if why is not None:  # it cannot exist: no source is asked (DESIGN §6)
        events.warning(events.PROTEIN_ID_NOT_ACCESSION, uniprot_id=value, source=source.name)
        error = _error(f"Protein {value} not found: {why}{id_hint(value)}", value, source.name)
        return {**error, "status": 404}
    return validate_response(source.fetch(value), value, source.name)
