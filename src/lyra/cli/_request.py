"""``lyra analyze``'s arguments as one typed request, made at the boundary.

Nothing below the command line sees an argparse namespace: the analysis runs
from an :class:`AnalyzeRequest`, and a durable run records it (``run.json``)
so that ``--resume`` runs exactly the same request again.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lyra import Budget
from lyra.cli._options import budget_of, read_text
from lyra.errors import ConfigurationError

IDENTITY_EXEMPT = frozenset({"concurrency", "ids"})
"""Request fields that may change on ``--resume`` (they do not change the result),
or that are compared on their own (IDs, in request order and normalised)."""


@dataclass(frozen=True)
class Placement:
    """Where the command line asks a run to live and run."""

    run_dir: str | None
    resume: str | None
    durable: bool
    database_url: str | None
    worker_wait: float | None = None
    """Seconds a queued run waits for a worker to take a child (None: forever)."""
    force: bool = False
    """Resume even when the checkpoints are missing or damaged (everything runs again)."""


class AnalyzeRequest(BaseModel):
    """What ``lyra analyze`` was asked to do (a planned question is already planned)."""

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    ids: tuple[str, ...]
    question: str | None = None
    structure_only: bool = False
    timeout: float = 300.0
    idle_timeout: float | None = None
    budget: Budget | None = None
    retries: int = 0
    source: Literal["offline", "live"] = "offline"
    faults: tuple[str, ...] = Field(default=(), description="--inject specs")
    min_success: int = 1
    critical: tuple[str, ...] = ()
    concurrency: int = 8

    def differences(self, given: dict[str, Any]) -> list[tuple[str, Any, Any]]:
        """(field, recorded, given) for explicitly given options that change the result."""
        return [
            (name, getattr(self, name), value)
            for name, value in given.items()
            if name not in IDENTITY_EXEMPT and getattr(self, name) != value
        ]


def request_from(args: argparse.Namespace, *, plan: bool = True) -> AnalyzeRequest:
    """The request the arguments make; ConfigurationError (exit 2) says what is wrong.

    A question is planned here (by rule, or by the model when a key is set),
    so that a durable run records its proteins and a resume never plans again.
    """
    from lyra._sync import run_blocking
    from lyra.proteins import normalize_protein_id, plan_question, requested_ids

    planned = None
    if plan and args.question:
        planned = run_blocking("plan_question", lambda: plan_question(args.question))
    from_file = file_ids(args)
    ids = list(dict.fromkeys([*args.ids, *from_file, *(planned.ids if planned else [])]))
    if not ids:
        where = " in the question" if args.question else ""
        raise ConfigurationError(f"no protein IDs given{where} (try: lyra analyze P04637)")
    faults, critical = _faults(args.inject), _critical(args.critical)
    requested = {p for p in map(normalize_protein_id, ids) if p is not None}
    if args.min_success > len(requested_ids(ids)):
        raise ConfigurationError(
            f"--min-success {args.min_success} but only {len(requested_ids(ids))} "
            "protein(s) requested"
        )
    for option, named in (
        ("--inject", [f.split(":")[0] for f in faults]),
        ("--critical", critical),
    ):
        stray = sorted(set(named) - requested)
        if stray:
            raise ConfigurationError(f"{option} names {', '.join(stray)}, which is not requested")
    return AnalyzeRequest(
        ids=tuple(ids),
        question=args.question,
        structure_only=args.structure_only or (planned is not None and planned.plan == "structure"),
        timeout=args.timeout,
        idle_timeout=args.idle_timeout,
        budget=budget_of(args),
        retries=args.retries,
        source=args.source,
        faults=faults,
        min_success=args.min_success,
        critical=critical,
        concurrency=args.concurrency,
    )


_HEADERS = frozenset({"entry", "accession", "accessions", "id", "ids", "uniprot", "uniprot_id"})
"""Names of a column of accessions (``Entry`` heads UniProt's exports): a first line
that is only such a name is a header; a tab-separated one names the column to read."""


def file_ids(args: argparse.Namespace) -> list[str]:
    """The accessions of ``--ids-file``, read once (standard input can be read once;
    both the request and the options a resume checks need them)."""
    if not args.ids_file:
        return []
    if getattr(args, "ids_from_file", None) is None:
        args.ids_from_file = read_ids(args.ids_file)
    ids: list[str] = args.ids_from_file
    return ids


def read_ids(path: str) -> list[str]:
    """Accessions from a file (``-``: stdin): one or more a line, separated by spaces,
    tabs or commas. A table whose tab-separated header names its accession column
    (``Entry``, as UniProt exports them) gives that column alone; a first line that
    is only such a name is skipped. Blank lines and ``#`` comments (whole lines, or
    after an accession) are skipped too. Duplicates are kept here: the analysis runs
    each once. ConfigurationError (exit 2) for a file with none."""
    ids: list[str] = []
    column: int | None = None  # the header's accession column, in a table
    headed = False  # the first line with a name has been read
    for line in read_text(path).splitlines():
        line = line.partition("#")[0]
        cells = line.split("\t")
        if column is not None:
            ids += cells[column].split() if len(cells) > column else []
            continue
        names = line.replace(",", " ").split()
        if names and not headed:
            headed = True
            column = _accession_column(cells)
            if column is not None or (len(names) == 1 and names[0].casefold() in _HEADERS):
                continue
        ids += names
    if not ids:
        where = "standard input" if path == "-" else path
        raise ConfigurationError(f"no protein IDs in {where} (one a line, e.g. P04637)")
    return ids


def _accession_column(cells: list[str]) -> int | None:
    """Which tab-separated cell of a header line names the accessions, if one does."""
    if len(cells) < 2:
        return None
    named = [i for i, cell in enumerate(cells) if cell.strip().casefold() in _HEADERS]
    return named[0] if named else None


def given_options(args: argparse.Namespace, defaults: argparse.Namespace) -> dict[str, Any]:
    """The request fields the command line set to something other than their default."""
    fields = AnalyzeRequest.model_fields
    given: dict[str, Any] = {}
    for name in fields:
        if name in ("ids", "budget", "faults", "critical", "ids_file"):
            continue
        value = getattr(args, name, None)
        if value != getattr(defaults, name, None):
            given[name] = value
    ids = [*args.ids, *file_ids(args)]
    if ids:
        given["ids"] = tuple(ids)
    budget = budget_of(args)
    if budget is not None:
        given["budget"] = budget
    if args.inject:
        given["faults"] = _faults(args.inject)
    if args.critical:
        given["critical"] = _critical(args.critical)
    return given


def _faults(specs: list[str]) -> tuple[str, ...]:
    """``--inject`` specs, checked and normalised."""
    from lyra.proteins import parse_fault

    try:
        return tuple(parse_fault(spec).spec for spec in specs)
    except ValueError as exc:
        raise ConfigurationError(f"--inject: {exc}") from None


def _critical(ids: list[str]) -> tuple[str, ...]:
    """``--critical`` IDs, normalised where valid, each once."""
    from lyra.proteins import normalize_protein_id

    return tuple(dict.fromkeys(normalize_protein_id(raw) or raw for raw in ids))
