"""The bundled offline dataset (real AlphaFold DB + UniProt entries); lyra's default.

``proteins.json`` (built by ``scripts/build_protein_data.py`` from
``data/proteins``) holds each entry; PAE files sit beside it, verbatim, in
``pae/``. A fetch returns a fresh copy of the summary, its confidence profile
computed from the bundled pLDDT, coordinates and PAE.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

from lyra.proteins._features import carried_to_isoform
from lyra.proteins._ids import accession_problem
from lyra.proteins._modelfiles import read_pae
from lyra.proteins._profile import model_profile
from lyra.proteins._sources import AlphaFoldData, NotFound, ProteinSummary, not_found

__all__ = ["OfflineSource", "bundled_entries", "bundled_pae"]


def _data() -> Any:
    # Anchored at the regular package ``lyra`` (not lyra.proteins) so it works
    # whatever ``lyra.proteins`` is at import time.
    return resources.files("lyra").joinpath("proteins", "data")


@cache
def _document() -> dict[str, Any]:
    """The bundled dataset, read once per process."""
    document: dict[str, Any] = json.loads(
        _data().joinpath("proteins.json").read_text(encoding="utf-8")
    )
    return document


def bundled_entries() -> dict[str, Any]:
    """The bundled dataset's entries."""
    entries: dict[str, Any] = _document()["entries"]
    return entries


def _provenance(sources: list[str]) -> dict[str, Any]:
    """Where each of ``sources`` comes from (repository, path, commit; how it was made)."""
    known: dict[str, Any] = _document().get("provenance") or {}
    return {name: known[name] for name in sources if name in known}


@cache
def bundled_pae(name: str) -> list[list[float]]:
    """A bundled PAE matrix by its file name (read once per process)."""
    return read_pae(json.loads(_data().joinpath("pae", name).read_text(encoding="utf-8")))


def _entry(accession: str) -> dict[str, Any] | None:
    """The bundled entry of ``accession``; an isoform's (``P05067-2``) made from the
    record its canonical entry keeps of it."""
    entries = bundled_entries()
    if accession in entries:
        entry: dict[str, Any] = entries[accession]
        return entry
    canonical, dash, _ = accession.partition("-")
    if dash and canonical in entries:
        return _isoform(canonical, accession)
    return None


def _isoform_names(entry: dict[str, Any]) -> list[str]:
    """The accessions of the isoforms a canonical entry keeps (``P05067-2`` …)."""
    return [form["accession"] for form in entry.get("isoforms") or []]


@cache
def _isoform(canonical: str, accession: str) -> dict[str, Any] | None:
    """An isoform as an entry of its own: its sequence and model, the canonical entry's
    names and comments, and those of its features (placed on the canonical sequence)
    that lie where the isoform's sequence is the canonical one's."""
    entry = bundled_entries()[canonical]
    form = next((f for f in entry.get("isoforms") or [] if f.get("accession") == accession), None)
    if form is None:
        return None
    length = form.get("length")
    uniprot = entry.get("uniprot")
    sources = list(form.get("sources") or [])
    if uniprot is not None and entry.get("sequence") and form.get("sequence"):
        features, shared = carried_to_isoform(
            uniprot.get("features") or (), entry["sequence"], form["sequence"]
        )
        uniprot = {**uniprot, "features": features, "shared_with_canonical": shared}
        if uniprot.get("file"):  # the canonical entry's UniProt file is one of ours
            sources.append(uniprot["file"])
    return {
        **{
            key: entry.get(key)
            for key in ("description", "organism", "gene", "function", "quoted_fields")
        },
        "uniprot_id": accession,
        "isoform_of": canonical,
        "isoform_name": (entry.get("isoform_names") or {}).get(accession),
        "length": int(length) if length is not None else None,
        "sequence": form.get("sequence"),
        "alphafold": form.get("alphafold"),
        "uniprot": uniprot,
        "sources": sorted(set(sources)),
    }


@cache
def _profile(accession: str) -> dict[str, Any] | None:
    entry = _entry(accession) or {}
    alphafold = entry.get("alphafold") or {}
    plddt = alphafold.get("plddt")
    if not plddt:
        return None
    pae = bundled_pae(alphafold["pae_file"]) if alphafold.get("pae_file") else None
    features = (entry.get("uniprot") or {}).get("features") or ()
    return model_profile(plddt, alphafold.get("coordinates"), pae, features)


def _offline_summary(entry: dict[str, Any]) -> ProteinSummary:
    alphafold = entry.get("alphafold")
    af: AlphaFoldData | None = None
    if isinstance(alphafold, dict):
        af = {
            "entry_id": alphafold.get("entry_id"),
            "entry_id_source": alphafold.get("entry_id_source"),
            "model_version": alphafold.get("model_version"),
            "global_plddt": alphafold.get("global_plddt"),
            "fractions": alphafold.get("fractions"),
            "plddt": alphafold.get("plddt"),
            "model_date": alphafold.get("model_date"),
            "model_file": alphafold.get("model_file"),
            "pae_file": alphafold.get("pae_file"),
            "profile": _profile(entry["uniprot_id"]),
            "figures_source": alphafold.get("figures_source"),
            "file_global_plddt": alphafold.get("file_global_plddt"),
            "other_means": list(alphafold.get("other_means") or []),
        }
        if alphafold.get("model_version_basis"):
            af["model_version_basis"] = alphafold["model_version_basis"]
    summary: ProteinSummary = {
        "uniprot_id": entry["uniprot_id"],
        "description": entry.get("description"),
        "organism": entry.get("organism"),
        "gene": entry.get("gene"),
        "length": entry.get("length"),
        "sequence": entry.get("sequence"),
        "function": entry.get("function"),
        "confidence": af["global_plddt"] if af else None,
        "alphafold": af,
        "uniprot": entry.get("uniprot"),
        "isoforms": _isoform_names(entry),
        "source": "offline",
        "sources": list(entry.get("sources") or []),
        "provenance": _provenance(entry.get("sources") or []),
    }
    if entry.get("isoform_of"):
        summary["isoform_of"] = entry["isoform_of"]
    if entry.get("quoted_fields"):
        summary["quoted_fields"] = list(entry["quoted_fields"])
    if entry.get("displayed_isoform"):
        summary["displayed_isoform"] = entry["displayed_isoform"]
    name = entry.get("isoform_name") or (entry.get("isoform_names") or {}).get(
        entry.get("displayed_isoform") or ""
    )
    if name:  # UniProt's name of this sequence (APP770, L-APP752)
        summary["isoform_name"] = name
    return summary


def _unnamed(canonical: str, key: str) -> str:
    """``; UniProt's entry … names 11 isoforms …`` when it names none ``key``."""
    named = bundled_entries()[canonical].get("isoform_names") or {}
    if not named or key in named:
        return ""
    numbers = sorted(int(iso.rpartition("-")[2]) for iso in named)
    listed = (
        f"{canonical}-{numbers[0]} to {canonical}-{numbers[-1]}"
        if numbers == list(range(numbers[0], numbers[-1] + 1))
        else ", ".join(f"{canonical}-{n}" for n in numbers)
    )
    return (
        f"; the bundled UniProt entry of {canonical} names {len(named)} isoforms ({listed}), "
        f"and {key} is none of them"
    )


class OfflineSource:
    """The bundled dataset (real AlphaFold DB + UniProt entries); lyra's default."""

    name: str = "offline"

    def fetch(self, protein_id: str) -> ProteinSummary | NotFound:
        """A fresh copy of the bundled summary, or the 404 soft failure."""
        key = protein_id.strip().upper()
        entry = _entry(key)
        canonical = key.partition("-")[0]
        if entry is None and "-" in key and canonical in bundled_entries():
            forms = _isoform_names(bundled_entries()[canonical])
            if forms:  # the bundled AlphaFold DB record of the entry lists every model of it
                return not_found(
                    key,
                    f"AlphaFold DB's record of {canonical} in the bundled data: AlphaFold DB "
                    f"has no model of it, only of {canonical} (the canonical sequence) and "
                    f"its isoforms {', '.join(forms)}{_unnamed(canonical, key)}",
                )
            return not_found(
                key,
                f"the bundled offline dataset: it holds {canonical} (the canonical sequence, "
                f"often isoform 1: analyse it as {canonical}); try --source live",
            )
        if entry is None:
            if accession_problem(key) is None:
                return not_found(
                    key,
                    "the bundled offline dataset (it holds "
                    f"{', '.join(sorted(bundled_entries()))}; try --source live)",
                )
            return not_found(key, "the bundled offline dataset")
        # Deep copy: callers may mutate the result; the cache must stay intact.
        return copy.deepcopy(_offline_summary(entry))

    def pae_matrix(self, summary: dict[str, Any]) -> list[list[float]] | None:
        """The bundled PAE matrix of a summary, or None."""
        name = (summary.get("alphafold") or {}).get("pae_file")
        return bundled_pae(name) if isinstance(name, str) else None

    def ids(self) -> list[str]:
        """Every accession the bundled dataset holds (not its isoforms), sorted."""
        return sorted(bundled_entries())
