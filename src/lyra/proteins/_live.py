"""Live AlphaFold DB and UniProt over HTTP.

A fetch asks UniProt for the entry (``/uniprotkb/{id}.json``, with its
features) and AlphaFold DB for the prediction record (``/api/prediction/{id}``),
then downloads the files the record names: the per-residue confidence file
(``plddtDocUrl``), the PAE file (``paeDocUrl``) and the model (``cifUrl``, read
with gemmi for the coordinates that group segments into units). A file the
record does not name, or that answers 404, is missing and the brief says so.

What goes wrong raises, so that lyra's classifier sees it:

- HTTP 429, 408, 5xx, 401, 403 and any other unexpected status:
  :class:`~lyra.errors.TransientError` with ``status`` (the classifier maps the
  status: 401/403 are permanent, 429/5xx retryable) and ``retry_after``;
- a body that is not JSON, or JSON of the wrong shape (an object where AFDB
  sends a list, a PAE file that is no square matrix):
  ``TransientError(status=502)`` -- a bad gateway answer, worth one more try;
- connection errors and timeouts: httpx's own exceptions, unchanged.

File URLs on AlphaFold DB's public host are fetched from the configured host
(``LYRA_AFDB_URL``) instead, so that a mirror, or a test server, serves them.
``fetch`` is synchronous on purpose: the supervisor runs it in a worker thread
through ``ctx.tool``.
"""

from __future__ import annotations

from collections import OrderedDict
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self
from urllib.parse import quote, urlsplit

if TYPE_CHECKING:
    import httpx

from lyra.delegation import parse_retry_after
from lyra.errors import TransientError
from lyra.proteins._features import placed_on_sequence, read_features
from lyra.proteins._modelfiles import read_confidence, read_model, read_pae
from lyra.proteins._profile import model_profile
from lyra.proteins._sources import (
    AlphaFoldData,
    EntrySummary,
    Fractions,
    NotFound,
    ProteinSummary,
    UniProtData,
    dig,
    finite_number,
    not_found,
    text_or_none,
)
from lyra.settings import settings

__all__ = ["PUBLIC_AFDB_HOST", "LiveSource"]

PUBLIC_AFDB_HOST: Final = "alphafold.ebi.ac.uk"
_KEPT_PAE: Final = 8  # PAE matrices kept in memory for the pictures of a run

_AFDB_FRACTION_KEYS: Final = (
    "fractionPlddtVeryLow",
    "fractionPlddtLow",
    "fractionPlddtConfident",
    "fractionPlddtVeryHigh",
)


def _from_uniprot(entry: dict[str, Any]) -> EntrySummary:
    """The summary fields of a UniProtKB JSON entry."""
    description = text_or_none(
        dig(entry, "proteinDescription", "recommendedName", "fullName", "value")
    )
    if description is None:  # unreviewed (TrEMBL) entries carry submission names instead
        description = text_or_none(
            dig(entry, "proteinDescription", "submissionNames", 0, "fullName", "value")
        )
    sequence = text_or_none(dig(entry, "sequence", "value"))
    length = dig(entry, "sequence", "length")
    return {
        "description": description,
        "organism": text_or_none(dig(entry, "organism", "scientificName")),
        "gene": text_or_none(dig(entry, "genes", 0, "geneName", "value")),
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
            return text_or_none(dig(comment, "texts", 0, "value"))
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
    """The model of ``protein_id``'s sequence; AFDB lists isoforms too, in any order.
    An isoform's (``P05067-2``) is its own record, never the canonical sequence's."""
    candidates = [m for m in models if isinstance(m, dict)]
    for model in candidates:
        if model.get("uniprotAccession") == protein_id:
            return model
    if "-" in protein_id:
        return None
    return next((m for m in candidates if "-" not in str(m.get("uniprotAccession", ""))), None)


def _from_afdb(model: dict[str, Any]) -> AlphaFoldData:
    version = model.get("latestVersion")
    created = text_or_none(model.get("modelCreatedDate"))
    return {
        "entry_id": text_or_none(model.get("entryId")) or text_or_none(model.get("modelEntityId")),
        "entry_id_source": None,
        "model_version": version if isinstance(version, int) and version > 0 else None,
        "global_plddt": finite_number(model.get("globalMetricValue")),
        "fractions": _fractions(model),
        "plddt": None,  # filled from the confidence file the record names
        "model_date": created[:10] if created else None,
        "model_file": None,
        "pae_file": None,
        "profile": None,
        "figures_source": None,  # set to the record's URL by the fetch
        "file_global_plddt": None,
        "other_means": [],
    }


def _isoforms(accession: str, models: list[Any]) -> list[str]:
    """The other isoforms the AlphaFold DB answer lists (``P05067-2`` …), in number order."""
    found = [
        str(m["uniprotAccession"])
        for m in models
        if isinstance(m, dict) and str(m.get("uniprotAccession", "")).startswith(f"{accession}-")
    ]
    return sorted(found, key=lambda a: (len(a), a))


def _annotation(entry: dict[str, Any], url: str) -> UniProtData | None:
    """The UniProt annotation of a REST JSON entry (None when it lists no features)."""
    if not isinstance(entry.get("features"), list):
        return None
    comments = [c for c in entry.get("comments") or [] if isinstance(c, dict)]
    subunit = next(
        (
            text_or_none(dig(c, "texts", 0, "value"))
            for c in comments
            if c.get("commentType") == "SUBUNIT"
        ),
        None,
    )
    cofactors = [
        str(f.get("name"))
        for c in comments
        if c.get("commentType") == "COFACTOR"
        for f in c.get("cofactors") or []
        if isinstance(f, dict) and f.get("name")
    ]
    version = dig(entry, "entryAudit", "entryVersion")
    return {
        "source": url,
        "release": None,
        "date": text_or_none(dig(entry, "entryAudit", "lastAnnotationUpdateDate")),
        "entry_version": version if isinstance(version, int) else None,
        "features": read_features(entry),
        "subunit": subunit,
        "cofactors": list(dict.fromkeys(cofactors)),
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
        self._pae: OrderedDict[str, list[list[float]]] = OrderedDict()
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
        canonical, dash, _ = accession.partition("-")
        quoted = quote(accession, safe="")
        uniprot_url = f"{self.uniprot_url}/uniprotkb/{quoted}.json"
        afdb_url = f"{self.afdb_url}/api/prediction/{quoted}"
        # An isoform (P05067-2) is AlphaFold DB's alone: UniProt's features of the entry
        # are placed on the canonical sequence, and would land on the wrong residues.
        uniprot = None if dash else self._get_json(uniprot_url, "UniProt", accession)
        models = self._get_json(afdb_url, "AlphaFold DB", accession)
        if uniprot is not None and not isinstance(uniprot, dict):
            raise _malformed("UniProt", accession, f"a JSON {type(uniprot).__name__}")
        if isinstance(uniprot, dict) and uniprot.get("entryType") == "Inactive":
            uniprot = None  # a deleted or demerged entry: UniProt no longer has it
        if models is not None and not isinstance(models, list):
            raise _malformed("AlphaFold DB", accession, f"a JSON {type(models).__name__}")
        model = _pick_model(accession, models) if models is not None else None
        if uniprot is None and model is None and dash:
            return not_found(
                accession,
                f"AlphaFold DB, which files an isoform under its own accession (the "
                f"canonical sequence, often isoform 1, is {canonical})",
            )
        if uniprot is None and model is None:
            return not_found(accession, "UniProt or AlphaFold DB")
        sources = [url for url, part in ((uniprot_url, uniprot), (afdb_url, model)) if part]
        summary = _merge(accession, uniprot, model, sources)
        if summary["alphafold"] is not None:
            summary["alphafold"]["figures_source"] = afdb_url
        summary["isoforms"] = _isoforms(accession, models or [])
        if dash:
            summary["isoform_of"] = canonical
        if uniprot is not None:
            summary["uniprot"] = _annotation(uniprot, uniprot_url)
            modelled = text_or_none(model.get("uniprotSequence")) if model else None
            _place_on_model(summary, text_or_none(dig(uniprot, "sequence", "value")), modelled)
        if model is not None and summary["alphafold"] is not None:
            self._model_files(accession, model, summary)
        return summary

    def _model_files(self, accession: str, record: dict[str, Any], summary: ProteinSummary) -> None:
        """Download the confidence, PAE and model files the record names (each optional)."""
        af = summary["alphafold"]
        assert af is not None
        plddt_url = self._file_url(record.get("plddtDocUrl"))
        pae_url = self._file_url(record.get("paeDocUrl"))
        model_urls = [self._file_url(record.get(key)) for key in ("cifUrl", "pdbUrl")]
        confidence = self._get_json(plddt_url, "AlphaFold DB", accession) if plddt_url else None
        if confidence is None:
            return  # no per-residue data: the brief names what is missing
        try:
            plddt = read_confidence(confidence)
        except ValueError as exc:
            raise _malformed("AlphaFold DB", accession, f"a confidence file where {exc}") from exc
        af["plddt"] = plddt
        af["model_file"] = plddt_url
        summary["sources"].append(str(plddt_url))
        coordinates = None
        for url in [u for u in model_urls if u]:
            text = self._get_text(url, "AlphaFold DB", accession)
            if text is None:
                continue  # the next format, if the record names one
            try:
                model = read_model(text, urlsplit(url).path)
            except (ValueError, RuntimeError) as exc:
                raise _malformed(
                    "AlphaFold DB", accession, "a model file gemmi cannot read"
                ) from exc
            if len(model.plddt) == len(plddt):
                coordinates = [c for xyz in model.coordinates for c in xyz]
                summary["sources"].append(url)
            break
        pae = None
        if pae_url:
            document = self._get_json(pae_url, "AlphaFold DB", accession)
            if document is not None:
                try:
                    pae = read_pae(document)
                except (ValueError, TypeError) as exc:
                    raise _malformed("AlphaFold DB", accession, f"a PAE file where {exc}") from exc
                af["pae_file"] = pae_url
                summary["sources"].append(pae_url)
                self._remember(pae_url, pae)
        annotation = summary.get("uniprot")
        features = annotation["features"] if annotation is not None else ()
        af["profile"] = model_profile(plddt, coordinates, pae, features)

    def _file_url(self, url: object) -> str | None:
        """A file URL of the record; on AlphaFold DB's public host, the configured host's."""
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            return None
        parts = urlsplit(url)
        if parts.netloc == PUBLIC_AFDB_HOST:
            return self.afdb_url + parts.path
        return url

    def _remember(self, url: str, pae: list[list[float]]) -> None:
        self._pae[url] = pae
        while len(self._pae) > _KEPT_PAE:
            self._pae.popitem(last=False)

    def pae_matrix(self, summary: dict[str, Any]) -> list[list[float]] | None:
        """The PAE matrix of a fetched summary (kept from the fetch), or None."""
        url = (summary.get("alphafold") or {}).get("pae_file")
        return self._pae.get(url) if isinstance(url, str) else None

    def _get_text(self, url: str, service: str, accession: str) -> str | None:
        """The body as text, None for 404/410, or raise as :meth:`_get_json` does."""
        response = self._client.get(url, timeout=self.timeout, follow_redirects=True)
        if response.status_code in (404, 410):
            return None
        if response.status_code != 200:
            raise TransientError(
                f"{service} answered HTTP {response.status_code} for {accession}",
                retry_after=parse_retry_after(response.headers.get("retry-after")),
                status=response.status_code,
            )
        return response.text

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


def _place_on_model(summary: ProteinSummary, current: str | None, modelled: str | None) -> None:
    """UniProt's features are numbered on its current sequence; the model is of the
    sequence AlphaFold DB took from UniProt when it was built. Where UniProt has changed
    the sequence since, the features are placed on the model through an alignment of
    the two (:func:`~lyra.proteins._features.placed_on_sequence`), renumbered for it;
    one across an insertion or a deletion is not."""
    annotation = summary["uniprot"]
    if annotation is None or not current or not modelled or current == modelled:
        return
    features, shared, changed = placed_on_sequence(annotation["features"], current, modelled)
    summary["uniprot"] = {
        **annotation,
        "features": features,
        "model_sequence": {
            "length": len(modelled),
            "shared": shared,
            "changed": changed,
            "features": len(annotation["features"]),
        },
    }


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
    sequence = up["sequence"] or text_or_none(fallback.get("uniprotSequence"))
    length = up["length"] if up["length"] is not None else (len(sequence) if sequence else None)
    return {
        "uniprot_id": accession,
        "description": up["description"] or text_or_none(fallback.get("uniprotDescription")),
        "organism": up["organism"] or text_or_none(fallback.get("organismScientificName")),
        "gene": up["gene"] or text_or_none(fallback.get("gene")),
        "length": length,
        "sequence": sequence,
        "function": up["function"],
        "confidence": af["global_plddt"] if af else None,
        "alphafold": af,
        "uniprot": None,
        "isoforms": [],
        "source": "live",
        "sources": sources,
    }
