"""Protein data sources: the bundled offline set and live AlphaFold DB + UniProt.

Both return the same summary (:class:`ProteinSummary`) or, for a protein that
does not exist, the soft-failure dict ``{"error": "Protein X not found in …",
"status": 404}`` -- never an exception for "not found" (PRD-001/PRD-003).
Everything else that goes wrong in :class:`LiveSource` raises, so that lyra's
classifier sees it:

- HTTP 429, 408, 5xx, 401, 403 and any other unexpected status:
  :class:`~lyra.errors.TransientError` with ``status`` (the classifier maps the
  status: 401/403 are permanent, 429/5xx retryable) and ``retry_after``;
- a body that is not JSON, or JSON of the wrong shape (an object where AFDB
  sends a list): ``TransientError(status=502)`` -- a bad gateway answer, worth
  one more try;
- connection errors and timeouts: httpx's own exceptions, unchanged.

``fetch`` is synchronous on purpose: the supervisor runs it in a worker
thread through ``ctx.tool``.
"""

from __future__ import annotations

import copy
import json
import math
from functools import cache
from importlib import resources
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, Self, TypedDict, runtime_checkable
from urllib.parse import quote

if TYPE_CHECKING:
    import httpx

from lyra.delegation import parse_retry_after
from lyra.errors import TransientError
from lyra.settings import settings

__all__ = [
    "AlphaFoldData",
    "Fractions",
    "LiveSource",
    "NotFound",
    "OfflineSource",
    "ProteinSource",
    "ProteinSummary",
]


class Fractions(TypedDict):
    """Share of residues in each AlphaFold pLDDT band (0..1)."""

    very_low: float  # pLDDT < 50
    low: float  # 50 <= pLDDT < 70
    confident: float  # 70 <= pLDDT < 90
    very_high: float  # pLDDT >= 90


class AlphaFoldData(TypedDict):
    """AlphaFold DB model figures; any of them may be unknown."""

    entry_id: str | None
    model_version: int | None
    global_plddt: float | None
    fractions: Fractions | None
    plddt: list[float] | None


class ProteinSummary(TypedDict):
    """What a source returns for a protein that exists."""

    uniprot_id: str
    description: str | None
    organism: str | None
    gene: str | None
    length: int | None
    sequence: str | None
    function: str | None
    confidence: float | None  # the global pLDDT, if known
    alphafold: AlphaFoldData | None
    source: Literal["offline", "live"]
    sources: list[str]  # where the values came from (files, or URLs that answered)


class NotFound(TypedDict):
    """The soft failure for a protein the source does not have."""

    error: str
    status: int


@runtime_checkable
class ProteinSource(Protocol):
    """Anything that can fetch a protein summary (see the module docstring).

    A source may also offer ``ping() -> object``, a cheap health check that
    ``analyze`` calls before a run; without one, it fetches P04637.
    """

    name: str

    def fetch(self, protein_id: str) -> object:
        """The raw response for ``protein_id``: a summary, or a soft-failure dict."""
        ...


def _not_found(protein_id: str, where: str) -> NotFound:
    return {"error": f"Protein {protein_id} not found in {where}", "status": 404}


# --------------------------------------------------------------------------- offline


@cache
def _bundled_entries() -> dict[str, Any]:
    """The bundled dataset's entries, read once per process."""
    # Anchored at the regular package ``lyra`` (not lyra.proteins) so it works
    # whatever ``lyra.proteins`` is at import time.
    path = resources.files("lyra").joinpath("proteins", "data", "proteins.json")
    document = json.loads(path.read_text(encoding="utf-8"))
    entries: dict[str, Any] = document["entries"]
    return entries


def _offline_summary(entry: dict[str, Any]) -> ProteinSummary:
    alphafold = entry.get("alphafold")
    af: AlphaFoldData | None = None
    if isinstance(alphafold, dict):
        af = {
            "entry_id": alphafold.get("entry_id"),
            "model_version": alphafold.get("model_version"),
            "global_plddt": alphafold.get("global_plddt"),
            "fractions": alphafold.get("fractions"),
            "plddt": alphafold.get("plddt"),
        }
    return {
        "uniprot_id": entry["uniprot_id"],
        "description": entry.get("description"),
        "organism": entry.get("organism"),
        "gene": entry.get("gene"),
        "length": entry.get("length"),
        "sequence": entry.get("sequence"),
        "function": entry.get("function"),
        "confidence": af["global_plddt"] if af else None,
        "alphafold": af,
        "source": "offline",
        "sources": list(entry.get("sources") or []),
    }


class OfflineSource:
    """The bundled dataset (real AlphaFold DB + UniProt entries); lyra's default."""

    name: str = "offline"

    def fetch(self, protein_id: str) -> ProteinSummary | NotFound:
        """A fresh copy of the bundled summary, or the 404 soft failure."""
        key = protein_id.strip().upper()
        entry = _bundled_entries().get(key)
        if entry is None:
            held = ", ".join(sorted(_bundled_entries()))
            return _not_found(
                key, f"the bundled offline dataset (it holds {held}; try --source live)"
            )
        # Deep copy: callers may mutate the result; the cache must stay intact.
        return copy.deepcopy(_offline_summary(entry))

    def ids(self) -> list[str]:
        """Every accession the bundled dataset holds, sorted."""
        return sorted(_bundled_entries())


# --------------------------------------------------------------------------- live

_AFDB_FRACTION_KEYS: Final = (
    "fractionPlddtVeryLow",
    "fractionPlddtLow",
    "fractionPlddtConfident",
    "fractionPlddtVeryHigh",
)


def finite_number(value: object) -> float | None:
    """``value`` if it is a finite real number (bool excluded), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _dig(data: object, *keys: str | int) -> object:
    """``data[k1][k2]…`` through dicts and lists, or None when any step is missing."""
    for key in keys:
        if isinstance(key, int) and isinstance(data, list) and -len(data) <= key < len(data):
            data = data[key]
        elif isinstance(key, str) and isinstance(data, dict):
            data = data.get(key)
        else:
            return None
    return data


class _UniProt(TypedDict):
    description: str | None
    organism: str | None
    gene: str | None
    length: int | None
    sequence: str | None
    function: str | None


def _from_uniprot(entry: dict[str, Any]) -> _UniProt:
    """The summary fields of a UniProtKB JSON entry."""
    description = _text(_dig(entry, "proteinDescription", "recommendedName", "fullName", "value"))
    if description is None:  # unreviewed (TrEMBL) entries carry submission names instead
        description = _text(
            _dig(entry, "proteinDescription", "submissionNames", 0, "fullName", "value")
        )
    sequence = _text(_dig(entry, "sequence", "value"))
    length = _dig(entry, "sequence", "length")
    return {
        "description": description,
        "organism": _text(_dig(entry, "organism", "scientificName")),
        "gene": _text(_dig(entry, "genes", 0, "geneName", "value")),
        "length": length if isinstance(length, int) and not isinstance(length, bool) else None,
        "sequence": sequence,
        "function": _uniprot_function(entry),
    }


def _uniprot_function(entry: dict[str, Any]) -> str | None:
    """The first FUNCTION comment of the protein itself (not of a cleaved peptide)."""
    comments = entry.get("comments")
    for comment in comments if isinstance(comments, list) else []:
        is_function = isinstance(comment, dict) and comment.get("commentType") == "FUNCTION"
        if is_function and "molecule" not in comment:
            return _text(_dig(comment, "texts", 0, "value"))
    return None


def _fractions(entry: dict[str, Any]) -> Fractions | None:
    """The four band fractions, or None unless AFDB gave all four as numbers."""
    found: list[float] = []
    for key in _AFDB_FRACTION_KEYS:
        value = finite_number(entry.get(key))
        if value is None:
            return None
        found.append(value)
    return {"very_low": found[0], "low": found[1], "confident": found[2], "very_high": found[3]}


def _pick_model(protein_id: str, models: list[Any]) -> dict[str, Any] | None:
    """The model of the canonical sequence; AFDB lists isoforms too, in any order."""
    candidates = [m for m in models if isinstance(m, dict)]
    for model in candidates:
        if model.get("uniprotAccession") == protein_id:
            return model
    return next((m for m in candidates if "-" not in str(m.get("uniprotAccession", ""))), None)


def _from_afdb(model: dict[str, Any]) -> AlphaFoldData:
    version = model.get("latestVersion")
    return {
        "entry_id": _text(model.get("entryId")) or _text(model.get("modelEntityId")),
        "model_version": version if isinstance(version, int) and version > 0 else None,
        "global_plddt": finite_number(model.get("globalMetricValue")),
        "fractions": _fractions(model),
        "plddt": None,  # per-residue pLDDT needs one more download; not fetched live
    }


class LiveSource:
    """AlphaFold DB (``/api/prediction/{id}``) and UniProt (``/uniprotkb/{id}.json``).

    UniProt gives the protein's identity; AlphaFold DB the model figures and, if
    UniProt has nothing, the identity too. The hosts default to the settings
    (``LYRA_AFDB_URL``, ``LYRA_UNIPROT_URL``). Each request carries ``timeout``
    seconds, also on a ``client`` passed in. A client created here is closed by
    :meth:`close` (or leaving the ``with`` block); a passed-in one is not.
    """

    name: str = "live"

    def __init__(
        self,
        *,
        afdb_url: str | None = None,
        uniprot_url: str | None = None,
        timeout: float = 10.0,
        client: httpx.Client | None = None,
    ) -> None:
        config = settings()
        self.afdb_url = (afdb_url or config.afdb_url).rstrip("/")
        self.uniprot_url = (uniprot_url or config.uniprot_url).rstrip("/")
        import httpx  # here: only live runs pay for it (with rich installed, it loads rich)

        self.timeout = httpx.Timeout(timeout)
        self._owns_client = client is None
        self._client = client or httpx.Client(
            timeout=self.timeout,
            headers={"accept": "application/json", "user-agent": "lyra (protein brief)"},
            follow_redirects=True,  # UniProt redirects merged accessions (303)
        )

    def close(self) -> None:
        """Close the HTTP client if this source created it."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def fetch(self, protein_id: str) -> ProteinSummary | NotFound:
        """Ask both services and merge; the 404 soft failure if neither knows the id."""
        accession = protein_id.strip().upper()
        quoted = quote(accession, safe="")
        uniprot_url = f"{self.uniprot_url}/uniprotkb/{quoted}.json"
        afdb_url = f"{self.afdb_url}/api/prediction/{quoted}"
        uniprot = self._get_json(uniprot_url, "UniProt", accession)
        models = self._get_json(afdb_url, "AlphaFold DB", accession)
        if uniprot is not None and not isinstance(uniprot, dict):
            raise _malformed("UniProt", accession, f"a JSON {type(uniprot).__name__}")
        if isinstance(uniprot, dict) and uniprot.get("entryType") == "Inactive":
            uniprot = None  # a deleted or demerged entry: UniProt no longer has it
        if models is not None and not isinstance(models, list):
            raise _malformed("AlphaFold DB", accession, f"a JSON {type(models).__name__}")
        model = _pick_model(accession, models) if models is not None else None
        if uniprot is None and model is None:
            return _not_found(accession, "UniProt or AlphaFold DB")
        sources = [url for url, part in ((uniprot_url, uniprot), (afdb_url, model)) if part]
        return _merge(accession, uniprot, model, sources)

    def _get_json(self, url: str, service: str, accession: str) -> object:
        """The parsed body, None for 404/410, or raise (see the module docstring)."""
        response = self._client.get(url, timeout=self.timeout, follow_redirects=True)
        status = response.status_code
        if status in (404, 410):
            return None
        if status != 200:
            raise TransientError(
                f"{service} answered HTTP {status} for {accession}",
                retry_after=parse_retry_after(response.headers.get("retry-after")),
                status=status,
            )
        try:
            return response.json()
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            raise _malformed(service, accession, "a body that is not JSON") from exc


def _malformed(service: str, accession: str, what: str) -> TransientError:
    return TransientError(
        f"{service} returned a malformed response for {accession}: {what}", status=502
    )


def _merge(
    accession: str,
    uniprot: dict[str, Any] | None,
    model: dict[str, Any] | None,
    sources: list[str],
) -> ProteinSummary:
    """One summary: UniProt's values first, AlphaFold DB's where UniProt has none."""
    up = _from_uniprot(uniprot or {})
    af = _from_afdb(model) if model is not None else None
    fallback = model or {}
    sequence = up["sequence"] or _text(fallback.get("uniprotSequence"))
    length = up["length"] if up["length"] is not None else (len(sequence) if sequence else None)
    return {
        "uniprot_id": accession,
        "description": up["description"] or _text(fallback.get("uniprotDescription")),
        "organism": up["organism"] or _text(fallback.get("organismScientificName")),
        "gene": up["gene"] or _text(fallback.get("gene")),
        "length": length,
        "sequence": sequence,
        "function": up["function"],
        "confidence": af["global_plddt"] if af else None,
        "alphafold": af,
        "source": "live",
        "sources": sources,
    }
