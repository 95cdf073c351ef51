"""A seeded synthetic source: realistic entries for any well-formed accession.

For load and chaos work only: the same (seed, accession) always gives the
same entry, with a plausible name, organism, gene, sequence and a per-residue
pLDDT track of ordered domains and disordered linkers. Nothing here is real
data, and every entry says so in ``sources``.
"""

from __future__ import annotations

import random
from typing import Any

from lyra.proteins._ids import normalize_protein_id

_AMINO = "ACDEFGHIKLMNPQRSTVWY"
_FAMILIES = (
    "kinase",
    "phosphatase",
    "transporter",
    "receptor",
    "ligase",
    "protease",
    "helicase",
    "transcription factor",
    "chaperone",
    "dehydrogenase",
)
_QUALIFIERS = (
    "Putative",
    "Probable",
    "Uncharacterized",
    "Serine/threonine",
    "Zinc finger",
    "ATP-dependent",
    "Mitochondrial",
    "Nuclear",
)
_ORGANISMS = (
    "Homo sapiens",
    "Mus musculus",
    "Saccharomyces cerevisiae",
    "Escherichia coli (strain K12)",
    "Plasmodium falciparum (isolate 3D7)",
    "Arabidopsis thaliana",
    "Danio rerio",
)


class SyntheticSource:
    """Deterministic made-up entries (``source`` ``synthetic``) for load tests."""

    name = "synthetic"
    uniprot_accessions = False
    """Any ID that passes the loose gate has an entry here, accession or not."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def fetch(self, protein_id: str) -> dict[str, Any]:
        """A synthetic summary in the same schema as the real sources."""
        accession = normalize_protein_id(protein_id)
        if accession is None:
            return {"error": f"Protein {protein_id} not found in synthetic data", "status": 404}
        rng = random.Random(f"{self.seed}:{accession}")
        length = rng.randint(60, 1200)
        plddt = _plddt_track(rng, length)
        mean = round(sum(plddt) / length, 2)
        return {
            "uniprot_id": accession,
            "description": f"{rng.choice(_QUALIFIERS)} {rng.choice(_FAMILIES)} "
            f"{rng.randint(1, 40)}",
            "organism": rng.choice(_ORGANISMS),
            "gene": f"{''.join(rng.choices('ABCDEFGHKLMNPRST', k=3))}{rng.randint(1, 9)}",
            "length": length,
            "sequence": "".join(rng.choices(_AMINO, k=length)),
            "function": None,
            "confidence": mean,
            "alphafold": {
                "entry_id": f"AF-{accession}-F1",
                "model_version": 4,
                "global_plddt": mean,
                "fractions": _fractions(plddt),
                "plddt": plddt,
            },
            "source": "synthetic",
            "sources": [f"synthetic(seed={self.seed})"],
        }


def _plddt_track(rng: random.Random, length: int) -> list[float]:
    """Ordered domains (high pLDDT) separated by disordered stretches (low)."""
    values: list[float] = []
    ordered = rng.random() < 0.7
    while len(values) < length:
        run = rng.randint(15, 120) if ordered else rng.randint(5, 60)
        low, high = (75.0, 98.0) if ordered else (25.0, 65.0)
        values += [round(rng.uniform(low, high), 2) for _ in range(run)]
        ordered = not ordered
    return values[:length]


def _fractions(plddt: list[float]) -> dict[str, float]:
    n = len(plddt)
    bands = {
        "very_low": sum(v < 50 for v in plddt),
        "low": sum(50 <= v < 70 for v in plddt),
        "confident": sum(70 <= v < 90 for v in plddt),
        "very_high": sum(v >= 90 for v in plddt),
    }
    return {band: round(count / n, 3) for band, count in bands.items()}
