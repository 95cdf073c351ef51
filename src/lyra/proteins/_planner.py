"""The planner: which proteins a free-text question is about, and which plan.

By rule: the UniProt accessions and entry names in the text, and "structure
only" style wording for a structure-only plan. With an API key, a model plans first (it
can read "the p53 protein" as P04637); whatever it proposes is validated, and
the rules answer when it fails or proposes nothing valid.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict

from lyra import events
from lyra.children import ask_structured, model_configured
from lyra.delegation import exception_text
from lyra.proteins._aliases import gene_entries, named_hint, protein_names, resolve_protein_id
from lyra.proteins._ids import mentioned_ids, normalize_protein_id
from lyra.proteins._pipeline import STRUCTURE_PLAN, plan_for
from lyra.proteins._text import render

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "uniprot_ids": {"type": "array", "items": {"type": "string"}},
        "requires_full_pipeline": {
            "type": "boolean",
            "description": "false when the question is about the structure only",
        },
    },
    "required": ["uniprot_ids", "requires_full_pipeline"],
}


class QuestionPlan(BaseModel):
    """The proteins to analyse and the plan, and who decided."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    ids: list[str]
    plan: Literal["full", "structure"]
    planned_by: Literal["rules", "model"]
    notes: tuple[str, ...] = ()
    """What the plan did not read: how the rules read a question, and each gene or
    protein name of a bundled entry it gives that none of ``ids`` stands for."""
    mentions: list[str] = []
    """Every mention, in order, repeats kept: a request reads these, so that a protein
    the question names twice gets the note arguments give ("requested more than once")."""


_ENTRY_NAME: Final = re.compile(r"(?<![\w|-])[A-Za-z0-9]{1,5}_[A-Za-z0-9]{1,5}(?![\w|-])")
"""A word shaped as a UniProt entry name (``HBA_HUMAN``: protein and species codes), not
the end of a FASTA header's ID (``sp|P69905|HBA_HUMAN`` names P69905 once)."""


def plan_by_rules(question: str) -> QuestionPlan:
    """The proteins the text names, in its order: accessions, and the entry names the
    bundled data resolve (``HBA_HUMAN``, in any case; another word of that shape may be
    anything, as ``MAX_LEN``); a structure-only plan when the text asks for one."""
    structure = plan_for(question) == STRUCTURE_PLAN
    plan: Literal["full", "structure"] = "structure" if structure else "full"
    mentions = _named(question)
    ids = list(dict.fromkeys(mentions))
    notes = (rules_note(model_configured()), *unread_names(question, ids))
    return QuestionPlan(ids=ids, plan=plan, planned_by="rules", notes=notes, mentions=mentions)


_WORD: Final = re.compile(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*")
"""A word, or words joined by hyphens (``TP53-mutant``, ``MT-RNR1``)."""

RULES_NOTE: Final = (
    "The question was read by rule: its proteins are the UniProt accessions and entry "
    "names it gives (a protein named another way, as a gene or common name, is not "
    "read: give its accession)"
)
"""What the rules read of a question, for the notes and errors that say so."""
NO_MODEL: Final = "; set ANTHROPIC_API_KEY for a model to plan"
"""What :data:`RULES_NOTE` adds when no model is configured."""


def rules_note(model: bool) -> str:
    """:data:`RULES_NOTE`, and how to have a model plan when none is configured."""
    return RULES_NOTE if model else RULES_NOTE + NO_MODEL


def unread_names(question: str, ids: list[str]) -> list[str]:
    """For each gene name (``TP53``) or protein name (``insulin``) of a bundled entry
    that ``question`` gives and that none of ``ids`` stands for, a sentence saying what
    to give instead: the rules read neither (other organisms' proteins share them)."""
    hints = []
    found: list[tuple[str, Literal["gene", "name"], list[str]]] = [
        *((word, "gene", entries) for word, entries in _genes_in(question)),
        *((word, "name", entries) for word, entries in _names_in(question)),
    ]
    analysed = {protein_id.partition("-")[0] for protein_id in ids}  # (an isoform's too)
    said: set[frozenset[str]] = set()
    for word, kind, entries in found:
        if not set(entries) & analysed and frozenset(entries) not in said:
            said.add(frozenset(entries))  # (one note a protein: TP53 and tp53, INS and insulin)
            hints.append(f"Not analysed: {word} in the question {named_hint(kind, entries)}")
    return hints


def _genes_in(question: str) -> Iterator[tuple[str, list[str]]]:
    """The gene names of bundled entries in the text, as a gene is written: in
    capitals (not in a text written all in capitals, where ``INS`` is a word), or with
    a digit in any case (``tp53``); alone or joined by hyphens (``TP53-mutant``)."""
    mixed_case = any(char.islower() for char in question)
    for match in _WORD.finditer(question):
        whole = match.group(0)
        for word in dict.fromkeys([whole, *whole.split("-")]):
            if len(word) < 2:  # (the spike's gene is S: a letter is no name)
                continue
            digit = any(char.isdigit() for char in word) and not word.isdigit()
            if (digit or (mixed_case and word.isupper())) and (entries := gene_entries(word)):
                yield word, entries


def _names_in(question: str) -> Iterator[tuple[str, list[str]]]:
    """The names of bundled entries (UniProt's recommended name, a short one) that the
    text gives whole, in any case (``insulin``, ``spike glycoprotein``)."""
    for accession, name in protein_names().items():
        found = re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", question, re.IGNORECASE)
        if found:
            yield found.group(0), [accession]


def _named(question: str) -> list[str]:
    """Every accession and bundled entry name in the text, in order, repeats kept."""
    found = mentioned_ids(question)
    found += [
        (match.start(), match.group(0).upper())
        for match in _ENTRY_NAME.finditer(question)
        if resolve_protein_id(match.group(0))[1] is not None
    ]
    return [word for _, word in sorted(found)]


async def plan_question(
    question: str, *, client: Any = None, use_model: bool | None = None
) -> QuestionPlan:
    """Plan a question: with a model when one is configured (or ``use_model``), else by rule."""
    if not (model_configured() if use_model is None else use_model):
        return plan_by_rules(question)
    try:
        answer = await ask_structured(
            question,
            system=render("planner_system.txt.j2"),
            tool="submit_plan",
            schema=_SCHEMA,
            client=client,
        )
    except Exception as exc:  # noqa: BLE001 - the rules still plan
        events.warning(events.MODEL_PLANNER_FAILED, error=exception_text(exc))
        return plan_by_rules(question)
    checked = [normalize_protein_id(raw) for raw in answer.get("uniprot_ids") or []]
    mentions = [value for value in checked if value is not None]
    ids = list(dict.fromkeys(mentions))
    if not ids:
        return plan_by_rules(question)
    full = answer.get("requires_full_pipeline", True) is not False
    return QuestionPlan(
        ids=ids,
        plan="full" if full else "structure",
        planned_by="model",
        notes=tuple(unread_names(question, ids)),
        mentions=mentions,
    )
