"""``lyra analyze``'s arguments as one typed request, made at the boundary.

Nothing below the command line sees an argparse namespace: the analysis runs
from a :class:`lyra.proteins.AnalyzeRequest` (``lyra.proteins.analyze`` takes
it as it is), and a durable run records it (``run.json``) so that ``--resume``
runs exactly the same request again.
"""

from __future__ import annotations

import argparse
import csv
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lyra.cli._options import budget_of, read_text
from lyra.errors import ConfigurationError

if TYPE_CHECKING:  # the protein workload loads for `lyra analyze` only, when it runs
    from lyra.proteins import AnalyzeRequest, QuestionPlan

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


def differences(recorded: AnalyzeRequest, given: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(option, recorded, given) for explicitly given options that change the result."""
    return [
        (_OPTION.get(name, "--" + name.replace("_", "-")), getattr(recorded, name), value)
        for name, value in given.items()
        if name not in IDENTITY_EXEMPT and getattr(recorded, name) != value
    ]


_OPTION = {
    "plan": "--structure-only",
    "quorum": "--min-success/--critical",
    "faults": "--inject",
    "budget": "--max-tokens/--max-cost/--max-turns",
}
"""The command line's name of a request field it names otherwise."""


def as_given(option: str, value: Any) -> str:
    """A request field's value as the command line writes it (not as Python does)."""
    if option == "--structure-only":
        return "on" if value == "structure" else "off"
    if option == _OPTION["quorum"]:
        return f"{value.min_success}/{' '.join(sorted(value.critical)) or 'none'}"
    if option == _OPTION["budget"] and value is not None:
        limits = {
            "--max-tokens": value.max_tokens,
            "--max-cost": value.max_cost_usd,
            "--max-turns": value.max_turns,
        }
        return " ".join(f"{flag} {limit:g}" for flag, limit in limits.items() if limit is not None)
    if value is None or value == ():
        return "none"
    if isinstance(value, tuple | list | frozenset):
        return " ".join(map(str, value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def request_from(args: argparse.Namespace, *, plan: bool = True) -> AnalyzeRequest:
    """The request the arguments make; ConfigurationError (exit 2) says what is wrong.

    A question is planned here (by rule, or by the model when a key is set),
    so that a durable run records its proteins and a resume never plans again.
    """
    from lyra._sync import run_blocking
    from lyra.proteins import AnalyzeRequest, plan_question, requested_ids
    from lyra.supervisor import QuorumPolicy

    planned = None
    if plan and args.question:
        planned = run_blocking("plan_question", lambda: plan_question(args.question))
    from_file = file_ids(args)
    # (repeats kept: analyze runs each protein once and says which were asked twice)
    ids = [*args.ids, *from_file, *((planned.mentions or planned.ids) if planned else [])]
    if not ids:
        raise ConfigurationError(_no_ids(args.question, planned))
    faults, critical = _faults(args.inject), _critical(args.critical)
    requested = requested_ids(ids)
    if args.min_success > len(requested):
        raise ConfigurationError(
            f"--min-success {args.min_success} but only {len(requested)} protein(s) requested"
        )
    for option, named in (
        ("--inject", [f.split(":")[0] for f in faults]),
        ("--critical", critical),
    ):
        stray = sorted(set(named) - set(requested))
        if stray:
            raise ConfigurationError(f"{option} names {', '.join(stray)}, which is not requested")
    structure = args.structure_only or (planned is not None and planned.plan == "structure")
    return AnalyzeRequest(
        ids=tuple(ids),
        question=args.question,
        plan="structure" if structure else "full",
        timeout=args.timeout,
        idle_timeout=args.idle_timeout,
        budget=budget_of(args),
        retries=args.retries,
        source=args.source,
        faults=faults,
        quorum=QuorumPolicy(min_success=args.min_success, critical=frozenset(critical)),
        concurrency=args.concurrency,
    )


def _no_ids(question: str | None, planned: QuestionPlan | None) -> str:
    """Why no protein is requested: none given, or none read in the question (and what
    the plan says it did not read)."""
    if not question:
        return "no protein IDs given (try: lyra analyze P04637)"
    why = "".join(f"\n  {note}" for note in planned.notes) if planned is not None else ""
    return f"no protein IDs found in the question (try: lyra analyze P04637){why}"


_HEADERS = frozenset({"entry", "accession", "accessions", "id", "ids", "uniprot", "uniprot_id"})
"""Names of a column of accessions (``Entry`` heads UniProt's exports): a first line
that is only such a name is a header; a tab- or comma-separated one names the column
to read."""
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f\ufffd]")
"""Characters no text file of accessions holds: NUL and the other control characters
(tabs and line ends apart), and the replacement for bytes that are not UTF-8."""

_LINE_BOM = re.compile("^\ufeff+", re.MULTILINE)
"""A byte order mark at a line's start: one file's, after files were joined (``cat`` of
two Notepad files); read_text drops only the first."""


def file_ids(args: argparse.Namespace) -> list[str]:
    """The accessions of every ``--ids-file``, in order, each file read once (standard
    input can be read once; both the request and the options a resume checks need them)."""
    if not args.ids_file:
        return []
    if getattr(args, "ids_from_file", None) is None:
        paths = dict.fromkeys(args.ids_file)  # a file named twice is read once
        args.ids_from_file = [found for path in paths for found in read_ids(path)]
    ids: list[str] = args.ids_from_file
    return ids


def read_ids(path: str) -> list[str]:
    """Accessions from a file (``-``: stdin): one or more a line, separated by spaces,
    tabs or commas; from a FASTA file, those its headers name. A table whose header (tab-
    or comma-separated) names its accession column (``Entry``, as UniProt exports them)
    gives that column alone, each row read by the header's delimiter; a first line that
    is only such a name is skipped. Blank lines and ``#`` comments (whole lines, or after
    an accession) are skipped too.
    Duplicates are kept here: the analysis runs each once. ConfigurationError (exit 2)
    for a file that is not text, or that holds no accession."""
    where = "standard input" if path == "-" else path
    text = _LINE_BOM.sub("", read_text(path))
    bad = _CONTROL.search(text)
    if bad is not None:
        raise ConfigurationError(
            f"{where} is not a text file of accessions (character {bad.start() + 1} is "
            f"{'not UTF-8' if bad.group() == chr(0xFFFD) else 'a control character'}); "
            "--ids-file reads UniProt accessions such as P04637, one or more a line"
        )
    if _is_fasta(text):
        named = _fasta_ids(text)
        _refuse_words(named, where)
        return named
    ids: list[str] = []
    table: tuple[str, int] | None = None  # the header's delimiter and accession column
    headed = False  # the first line with a name has been read
    for number, line in enumerate(text.splitlines(), 1):
        line = line.partition("#")[0]
        if line.lstrip().startswith(">"):  # (its sequence would be read as IDs)
            raise ConfigurationError(
                f"{where}, line {number}, is a FASTA header after a list of accessions: "
                "give a list of accessions or a FASTA file, not both in one"
            )
        if table is not None:
            cells = next(csv.reader([line], delimiter=table[0]), [])
            ids += _names(cells[table[1]]) if len(cells) > table[1] else []
            continue
        names = _names(line)
        if names and not headed:
            headed = True
            table = _accession_column(line)
            if table is not None or (len(names) == 1 and names[0].casefold() in _HEADERS):
                continue
        ids += names
    _refuse_words(ids, where)
    return ids


def _is_fasta(text: str) -> bool:
    """True when the first line that is neither blank nor a ``#`` comment is a header."""
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return line.startswith(">")
    return False


def _fasta_ids(text: str) -> list[str]:
    """The accessions of a FASTA file's headers, its sequences skipped: UniProt's
    (``>sp|P05067|A4_HUMAN …``, ``>tr|…``) or a header's first word (``>P05067 …``,
    ``>P05067|A4_HUMAN``)."""
    ids: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(">"):
            fields = (line[1:].split() or [""])[0].split("|")
            uniprot = len(fields) > 2 and fields[0] in ("sp", "tr") and fields[1]
            ids.append(fields[1] if uniprot else fields[0])
    return [found for found in ids if found]


def _names(text: str) -> list[str]:
    """The IDs in a line or a cell: separated by spaces, tabs or commas."""
    return text.replace(",", " ").split()


def _accession_column(line: str) -> tuple[str, int] | None:
    """The delimiter and accession column of a table's header line, if it is one."""
    for delimiter in ("\t", ","):
        cells = next(csv.reader([line], delimiter=delimiter), [])
        named = [i for i, cell in enumerate(cells) if cell.strip().casefold() in _HEADERS]
        if len(cells) > 1 and named:
            return delimiter, named[0]
    return None


def _refuse_words(ids: list[str], where: str) -> None:
    """ConfigurationError for a file with no accession at all (words, or nothing)."""
    from lyra.proteins import find_protein_ids, resolve_protein_id

    if not ids:
        raise ConfigurationError(f"no protein IDs in {where} (one a line, e.g. P04637)")
    if not any(find_protein_ids(i) or resolve_protein_id(i)[1] for i in ids):
        shown = ", ".join(repr(i) for i in ids[:3]) + (", …" if len(ids) > 3 else "")
        raise ConfigurationError(
            f"{where} holds no UniProt accession (it reads {shown}); --ids-file reads "
            "accessions such as P04637, one or more a line"
        )


def given_options(args: argparse.Namespace, defaults: argparse.Namespace) -> dict[str, Any]:
    """The request fields the command line set to something other than their default."""
    from lyra.supervisor import QuorumPolicy

    given: dict[str, Any] = {}
    for name in ("question", "timeout", "idle_timeout", "retries", "source", "concurrency"):
        value = getattr(args, name)
        if value != getattr(defaults, name):
            given[name] = value
    if args.structure_only:
        given["plan"] = "structure"
    ids = [*args.ids, *file_ids(args)]
    if ids:
        given["ids"] = tuple(ids)
    budget = budget_of(args)
    if budget is not None:
        given["budget"] = budget
    if args.inject:
        given["faults"] = _faults(args.inject)
    if args.critical or args.min_success != defaults.min_success:
        critical = frozenset(_critical(args.critical))
        given["quorum"] = QuorumPolicy(min_success=args.min_success, critical=critical)
    return given


def _faults(specs: list[str]) -> tuple[str, ...]:
    """``--inject`` specs, checked and normalised."""
    from lyra.proteins import parse_fault

    try:
        return tuple(parse_fault(spec).spec for spec in specs)
    except ValueError as exc:
        raise ConfigurationError(f"--inject: {exc}") from None


def _critical(ids: list[str]) -> tuple[str, ...]:
    """``--critical`` IDs, resolved and normalised where valid, each once."""
    from lyra.proteins import requested_ids

    return tuple(requested_ids(ids))
