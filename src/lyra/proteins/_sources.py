"""Protein data sources: what they return, and the protocol they follow.

Two sources return the same summary (:class:`ProteinSummary`): the bundled
offline set (:mod:`lyra.proteins._offline`) and live AlphaFold DB + UniProt
(:mod:`lyra.proteins._live`). For a protein that does not exist they return
the soft-failure dict ``{"error": "Protein X not found in …", "status": 404}``
-- never an exception for "not found" (PRD-001/PRD-003). Everything else that
goes wrong raises, so that lyra's classifier sees it.

A summary carries per-residue pLDDT and the model's confidence *profile*
(segments, structural units, PAE between units: :mod:`lyra.proteins._profile`),
computed where the bulky coordinates and PAE matrix are read, and the UniProt
annotation (features, subunit, cofactors) when an entry with features exists.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, Protocol, TypedDict, runtime_checkable

__all__ = [
    "AlphaFoldData",
    "Fractions",
    "ModelSequence",
    "NotFound",
    "ProteinSource",
    "ProteinSummary",
    "UniProtData",
    "fetch_hint",
    "finite_number",
    "function_source",
    "lower_trust",
    "named_source",
    "not_found",
    "protein_name",
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
    entry_id_source: str | None  # the file the entry id came from (None: the figures' source)
    model_version: int | None
    global_plddt: float | None
    fractions: Fractions | None
    plddt: list[float] | None
    model_date: str | None
    model_file: str | None  # the file (or URL) the per-residue figures came from
    pae_file: str | None  # the PAE file (or URL), if there is one
    profile: dict[str, Any] | None  # segments, units, what PAE says (lyra.proteins._profile)
    figures_source: str | None  # the file or URL the whole-model figures came from
    file_global_plddt: dict[str, Any] | None  # a model file's own figure: value, over, file
    # other models' means in the data: version, value, source, and whether a project
    # computed it from the model file (computed_by_project), not AlphaFold DB
    other_means: list[dict[str, Any]]
    model_version_basis: NotRequired[str]  # where the version comes from, when no source states it


class ModelSequence(TypedDict):
    """The sequence a model was built on, where UniProt's has changed since."""

    length: int  # the modelled sequence's residues
    shared: list[tuple[int, int, int]]  # stretches aligned (first, last, shift): model numbers
    changed: list[int]  # the model's residues UniProt has changed in place (substitutions)
    features: int  # UniProt's features before those across an insertion or deletion were left


class UniProtData(TypedDict):
    """The UniProt entry's annotation: its features and the comments caveats use."""

    source: str  # the file or URL, named
    file: NotRequired[str]  # the bundled file it was read from (a name in ``sources``)
    release: str | None  # "Rel. 48" (flat file) or None
    date: str | None  # last annotation update, ISO
    entry_version: int | None
    features: list[dict[str, Any]]
    subunit: str | None
    cofactors: list[str]
    # an isoform's: the stretches it shares with the canonical sequence (as ``shared``)
    shared_with_canonical: NotRequired[list[tuple[int, int, int]]]
    model_sequence: NotRequired[ModelSequence]  # when the model's sequence is not UniProt's


class EntrySummary(TypedDict):
    """The summary fields of a UniProt entry."""

    description: str | None
    organism: str | None
    gene: str | None
    length: int | None
    sequence: str | None
    function: str | None


class ProteinSummary(EntrySummary):
    """What a source returns for a protein that exists."""

    uniprot_id: str
    confidence: float | None  # the global pLDDT, if known
    alphafold: AlphaFoldData | None
    uniprot: UniProtData | None  # None: no UniProt entry with features was available
    isoforms: list[str]  # other isoforms AlphaFold DB models (P05067-2, …), if known
    source: Literal["offline", "live"]
    sources: list[str]  # where the values came from (files, or URLs that answered)
    provenance: NotRequired[dict[str, Any]]  # a file's repository, path, commit and "how"
    isoform_of: NotRequired[str]  # an isoform's (P05067-2) canonical accession (P05067)
    displayed_isoform: NotRequired[str]  # the isoform UniProt's entry shows (P04637-1), if any
    isoform_name: NotRequired[str]  # UniProt's name of this sequence's isoform (APP770), if any
    # header fields (description, organism, gene) that only the lower-trust file gives
    quoted_fields: NotRequired[list[str]]


class NotFound(TypedDict):
    """The soft failure for a protein the source does not have."""

    error: str
    status: int


@runtime_checkable
class ProteinSource(Protocol):
    """Anything that can fetch a protein summary (see the module docstring).

    A source may also offer ``ping() -> object``, a cheap health check that
    ``analyze`` calls before a run (without one, it fetches P04637);
    ``pae_matrix(summary)``, the PAE matrix of a summary it returned (for the
    pictures); and ``uniprot_accessions = False`` when its IDs need not be
    UniProt accessions (otherwise an ID that is none fails without a fetch).
    """

    name: str

    def fetch(self, protein_id: str) -> object:
        """The raw response for ``protein_id``: a summary, or a soft-failure dict."""
        ...


def not_found(protein_id: str, where: str) -> NotFound:
    return {"error": f"Protein {protein_id} not found in {where}", "status": 404}


# --------------------------------------------------------------------------- helpers


def finite_number(value: object) -> float | None:
    """``value`` if it is a finite real number (bool excluded), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def named_source(name: str) -> str:
    """A file or URL as a brief names it; the lower-trust file of figures quoted
    elsewhere (``facts_secondary_sources.json``) says so."""
    if lower_trust(name):
        return f"{name}: a lower-trust secondary source, figures quoted elsewhere"
    return name


def lower_trust(name: str | None) -> bool | None:
    """True for the file of figures quoted elsewhere (``facts_secondary_sources.json``),
    which is no model file nor any source's own answer; ``None`` for no file named."""
    return None if name is None else "secondary" in name


def version_text(version: object, basis: object = None) -> str:
    """A model's version as a brief names it (``v6``); one no source states, only a
    label some collector gave (``basis``), says so: it is no fact of the data."""
    if not version:
        return ""
    return f"labelled v{version} by its collector" if basis else f"v{version}"


def fetch_hint(summary: Mapping[str, Any], service: str) -> str:
    """How to get what ``service`` (``"AlphaFold DB"``, ``"UniProt"``) would give: fetch it
    live, or, on a live run, that it did not give it."""
    if summary.get("source") == "live":
        if service == "UniProt" and summary.get("isoform_of"):
            return (
                "UniProt numbers its features on the canonical sequence of "
                f"{summary['isoform_of']}, so a live run does not fetch them for an isoform"
            )
        return f"{service} did not serve it for this entry"
    return f"run with --source live to fetch it from {service}"


def protein_name(summary: Mapping[str, Any]) -> str | None:
    """The protein's name: its description, unless that only repeats its function
    sentence (a source with no name for the protein puts the function there, since a
    description must not be empty: Q8I3H7's bundled entry)."""
    name = text_or_none(summary.get("description"))
    if name is None or name.strip() == str(summary.get("function") or "").strip():
        return None
    return name.strip()


def function_source(summary: Mapping[str, Any]) -> str:
    """Where a summary's function sentence comes from: UniProt (live, or a bundled UniProt
    file among its sources), else the file it was quoted from, named."""
    if summary.get("source") == "live":
        return "UniProt"
    sources = [str(x) for x in summary.get("sources") or []]
    uniprot = next((x for x in sources if x.lower().startswith("uniprot")), None)
    if uniprot:
        return f"UniProt, {uniprot}"
    secondary = next((x for x in sources if "secondary" in x), None)
    return named_source(secondary) if secondary else "source not recorded"


def text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def dig(data: object, *keys: str | int) -> object:
    """``data[k1][k2]…`` through dicts and lists, or None when any step is missing."""
    for key in keys:
        if isinstance(key, int) and isinstance(data, list) and -len(data) <= key < len(data):
            data = data[key]
        elif isinstance(key, str) and isinstance(data, dict):
            data = data.get(key)
        else:
            return None
    return data
