"""The protein pipeline as tools, so a model-backed child can run the analysis.

The same stage functions as the offline child, exposed one tool per stage.
Tools take a protein ID and keep each protein's earlier stage results, so the
model only passes IDs, never large data; what a tool returns is compact JSON
of real figures (no per-residue arrays, no sequence).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from lyra.children import AnthropicChild, Tool
from lyra.errors import InvalidInput, SubjectNotFound
from lyra.proteins._analysis import analyze_structure, critique, reason, synthesize
from lyra.proteins._ids import accession_problem, normalize_protein_id, validate_protein_id
from lyra.proteins._offline import OfflineSource
from lyra.proteins._pipeline import StageFailed, usable_summary
from lyra.proteins._sources import ProteinSource
from lyra.proteins._text import render

_BULKY = {"sequence", "plddt", "coordinates"}


def protein_tools(source: ProteinSource | None = None) -> list[Tool]:
    """fetch_protein, analyze_structure, reason, critique and synthesize as tools."""
    source = source or OfflineSource()
    done: dict[str, dict[str, Any]] = {}

    def stage(protein_id: str, name: str) -> Any:
        key = _checked_id(protein_id)
        if name not in done.get(key, {}):
            raise InvalidInput(f"run {name} for {key} first")
        return done[key][name]

    def fetch_protein(protein_id: str) -> str:
        """Fetch a protein's UniProt summary and AlphaFold figures by accession (e.g. P04637)."""
        key = _checked_id(protein_id)
        why = accession_problem(key)
        if why is not None:  # it cannot exist: no source is asked
            raise SubjectNotFound(f"Protein {key} not found: {why}")
        summary = usable_summary(source.fetch(key), key, source.name)
        done[key] = {"fetch_protein": summary}
        return _compact(summary)

    def analyze_structure_tool(protein_id: str) -> str:
        """Where the predicted structure is confident: segments, units, PAE, UniProt features."""
        return _store(
            done,
            protein_id,
            "analyze_structure",
            analyze_structure(stage(protein_id, "fetch_protein")),
        )

    def reason_tool(protein_id: str) -> str:
        """What the model supports, part by part (no ranking of targets from pLDDT)."""
        summary = stage(protein_id, "fetch_protein")
        return _store(
            done,
            protein_id,
            "reason",
            reason(summary, done[_checked_id(protein_id)].get("analyze_structure")),
        )

    def critique_tool(protein_id: str) -> str:
        """Caveats about the reasoning and the data it rests on."""
        key = _checked_id(protein_id)
        return _store(
            done,
            protein_id,
            "critique",
            critique(
                stage(key, "fetch_protein"),
                done[key].get("analyze_structure"),
                done[key].get("reason"),
            ),
        )

    def synthesize_tool(protein_id: str) -> str:
        """The Markdown brief from whatever stages have run (it names the missing ones)."""
        key = _checked_id(protein_id)
        results = done.get(key, {})
        missing = [s for s in ("analyze_structure", "reason", "critique") if s not in results]
        return synthesize(
            key,
            stage(key, "fetch_protein"),
            results.get("analyze_structure"),
            results.get("reason"),
            results.get("critique"),
            missing,
        )

    tools: list[tuple[str, Callable[..., str]]] = [
        ("fetch_protein", fetch_protein),
        ("analyze_structure", analyze_structure_tool),
        ("reason", reason_tool),
        ("critique", critique_tool),
        ("synthesize", synthesize_tool),
    ]
    return [Tool.from_function(fn, name=name) for name, fn in tools]


def anthropic_protein_child(source: ProteinSource | None = None, **options: Any) -> AnthropicChild:
    """An Anthropic child that analyses proteins with the pipeline's stages as tools."""
    options.setdefault("system", render("protein_child_system.txt.j2"))
    return AnthropicChild(tools=protein_tools(source), **options)


def _checked_id(protein_id: str) -> str:
    ok, problem = validate_protein_id(protein_id)
    value = normalize_protein_id(protein_id)
    if not ok or value is None:
        raise InvalidInput(problem or "invalid protein ID")
    return value


def _store(done: dict[str, dict[str, Any]], protein_id: str, name: str, result: Any) -> str:
    if isinstance(result, dict) and "error" in result:
        raise StageFailed(str(result["error"]))
    done[_checked_id(protein_id)][name] = result
    return _compact(result)


def _compact(value: Any) -> str:
    if isinstance(value, dict):
        value = {k: _compact_value(v) for k, v in value.items() if k not in _BULKY}
    return json.dumps(value, default=str)


def _compact_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in _BULKY}
    return value
