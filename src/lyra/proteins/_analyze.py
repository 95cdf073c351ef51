"""``analyze``: one child per protein, each under its own deadline and recovery loop.

A bad ID, a missing protein, a slow source or a broken stage costs only that
protein. Every requested protein appears exactly once in the output.

Written against lyra's public API only, as a user's own workload would be: each
protein is a :class:`lyra.Task` for a :class:`lyra.Supervisor`, and the
outcomes become the protein entries of DESIGN §6.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Literal

import anyio

from lyra import ChildRef, Supervisor, Task, events
from lyra.delegation import (
    DelegationResult,
    FailureCategory,
    exception_text,
    safe_str,
    valid_text,
)
from lyra.errors import ConfigurationError, RunStopped
from lyra.proteins import _conclude as conclude
from lyra.proteins._aliases import resolve_protein_id, split_ids
from lyra.proteins._compare import Comparison, compare
from lyra.proteins._confidence import num, span
from lyra.proteins._faults import Fault, faults_by_protein
from lyra.proteins._figures import with_pictures
from lyra.proteins._ids import validate_protein_id
from lyra.proteins._live import LiveSource
from lyra.proteins._offline import OfflineSource
from lyra.proteins._output import (
    AnalysisOutput,
    CompletedAnalysis,
    FailedAnalysis,
    PartialAnalysis,
    ProteinEntry,
    Summary,
    TaskLine,
)
from lyra.proteins._pae import unit_verdict
from lyra.proteins._pipeline import (
    NOT_TEXT,
    STRUCTURE_PLAN,
    Plan,
    ProteinChild,
    ProteinState,
    TaskResult,
)
from lyra.proteins._planner import rules_note, unread_names
from lyra.proteins._profile import DOMAIN_TYPES
from lyra.proteins._request import AnalyzeRequest
from lyra.proteins._sources import ProteinSource, lower_trust, protein_name
from lyra.proteins._tally import Tally
from lyra.recovery import RecoveryOutcome, RecoveryPolicy
from lyra.settings import settings
from lyra.supervisor import (
    AnswerWriter,
    Executor,
    Graceful,
    LocalExecutor,
    QuorumDecision,
    QuorumPolicy,
    RunDir,
    ServiceHealth,
    TemplateAnswerWriter,
    decide,
    final_answer,
    probe,
)


async def analyze(
    request: AnalyzeRequest | Iterable[object],
    /,
    *,
    source: ProteinSource | Literal["offline", "live"] | None = None,
    run_dir: RunDir | Path | str | None = None,
    policy: RecoveryPolicy | None = None,
    executor: Executor | None = None,
    on_result: Callable[[ProteinEntry], None] | None = None,
    answer_writer: AnswerWriter | None = None,
    stream: bool = False,
    pictures: bool = True,
    **options: Any,
) -> AnalysisOutput:
    """Analyse proteins, each in its own child; never raises for a protein's failure.

    ``request`` is an :class:`AnalyzeRequest`, or the IDs with the request's fields
    as keywords: ``analyze(["P04637"], timeout=60, retries=1, plan="structure",
    faults=["P04637:hang@1"], quorum=QuorumPolicy(min_success=1))`` (an unknown
    keyword is a ValidationError). ``timeout`` and ``idle_timeout`` bound each
    attempt; ``budget`` is shared by the whole run; ``retries`` recovery attempts
    follow a failure (``policy`` overrides them); ``quorum`` decides whether the
    results are enough to answer; the answer is written by ``answer_writer`` (a
    template by default) and always exists.

    How the run is carried out: ``source`` is the data source, by name (the
    request's ``source``) or as an object of yours (``ProteinSource``); one made
    here is closed here. ``run_dir`` receives each report, brief and line of
    ``results.jsonl`` as soon as its protein finishes, and the output at the end;
    with it, ``pictures`` (the plots extra) draws each analysed protein's pLDDT
    track and PAE heatmap into its ``figures/``, linked from the brief (not for a
    streamed run). ``on_result`` sees each entry as it finishes; ``executor`` runs
    the children elsewhere (a durable one).

    ``stream=True`` is for proteome-sized runs: the IDs are read lazily (pass an
    iterable, not a request, to keep them out of memory), the entries live only in
    the run directory (``run_dir`` is then required), and the output holds the
    counts, the quorum and the answer, not the entries.
    """
    if isinstance(source, str):
        options["source"] = source
        source = None
    asked, ids = _request_of(request, options)
    folder = RunDir(run_dir) if run_dir is not None and not isinstance(run_dir, RunDir) else run_dir
    if stream and folder is None:
        raise ConfigurationError("a streamed analysis needs a run directory for its entries")
    with _source_for(source, asked.source) as data:
        return await _analyze(
            asked,
            _Input(ids),
            data,
            folder,
            # The protein child never asks (ctx.ask): no question waits, and a
            # durable run saves each task's last attempt with its result.
            policy=policy or RecoveryPolicy(max_retries=asked.retries, answer_wait=0),
            executor=executor,
            on_result=on_result,
            answer_writer=answer_writer,
            stream=stream,
            pictures=pictures,
        )


def _request_of(
    request: AnalyzeRequest | Iterable[object], options: dict[str, Any]
) -> tuple[AnalyzeRequest, Iterable[object]]:
    """The request, with any fields given as keywords, and the IDs to read."""
    if isinstance(request, AnalyzeRequest):
        asked = AnalyzeRequest(**{**dict(request), **options}) if options else request
        return asked, asked.ids
    if "ids" in options:
        raise ConfigurationError("give the IDs once: as the first argument, not also as ids=")
    return AnalyzeRequest(**options), request


@contextmanager
def _source_for(
    given: ProteinSource | None, name: Literal["offline", "live"]
) -> Iterator[ProteinSource]:
    """The source given, or the one the request names (made here, closed here)."""
    if given is not None:
        yield given
    elif name == "offline":
        yield OfflineSource()
    else:
        with LiveSource() as live:
            yield live


async def _analyze(
    asked: AnalyzeRequest,
    given: _Input,
    source: ProteinSource,
    folder: RunDir | None,
    *,
    policy: RecoveryPolicy,
    executor: Executor | None,
    on_result: Callable[[ProteinEntry], None] | None,
    answer_writer: AnswerWriter | None,
    stream: bool,
    pictures: bool,
) -> AnalysisOutput:
    """:func:`analyze` with its request and source settled."""
    quorum = asked.quorum
    listed = None if stream else list(given)
    requested: Iterable[str] = given if listed is None else listed
    durable = executor is not None and not isinstance(executor, LocalExecutor)
    supervisor = Supervisor(
        _child(source, durable=durable),
        timeout=asked.timeout,
        idle_timeout=asked.idle_timeout,
        budget=asked.budget,
        policy=policy,
        executor=executor,
    )
    tally = Tally(folder, keep=not stream, hold=quorum.critical)
    by_protein = faults_by_protein(asked.faults)

    async def finished(task: Task, outcome: RecoveryOutcome) -> None:
        entry = _entry(task.subject or "", outcome)
        if folder is not None and pictures and not stream:
            # Drawing takes a while: in a worker thread, so no other child waits on it.
            entry = await anyio.to_thread.run_sync(
                with_pictures, entry, outcome.state, source, folder
            )
        tally.add(entry, outcome.report)
        if on_result is not None:
            on_result(entry)

    def tasks(targets: Iterable[str]) -> Iterator[Task]:
        for protein_id in targets:
            tally.start(protein_id)
            faults = by_protein.get(protein_id, ())
            yield _task(protein_id, asked.plan, faults, given.not_text.get(protein_id))

    async def fan_out(targets: Iterable[str]) -> None:
        await supervisor.run(
            tasks(targets), max_concurrency=asked.concurrency, on_outcome=finished, keep=False
        )

    graceful = Graceful()
    no_health: list[ServiceHealth] = []
    health = await graceful.step("health", lambda: _health(source), fallback=no_health)
    try:
        await graceful.step(
            "fan_out",
            lambda: fan_out(requested),
            fallback=None,
            critical=True,
            unavailable=["the analyses that had not finished"],
        )
    except BaseException as exc:  # stopped from outside (Ctrl+C, SIGTERM): keep what finished
        if folder is not None and not durable:  # a durable run resumes from its checkpoints
            _save_interrupted(tally, folder, listed if listed is not None else requested)
        elif isinstance(exc, RunStopped):  # its storage gave out: nothing more is written,
            exc.output = _stopped_output(tally, folder, listed if listed is not None else requested)
        raise
    if any(error.failed_step == "fan_out" for error in graceful.errors):
        # The fan-out itself broke: whatever did not finish fails, and is still reported.
        for protein_id in [*tally.started, *requested]:
            if protein_id not in tally.outcomes:
                tally.add(_unfinished(protein_id, "the fan-out failed"), "")
    decision = await _quorum(tally, quorum, fan_out, listed)
    tally.finish()
    return await _conclude(
        tally,
        decision,
        folder,
        requested=listed,
        question=asked.question,
        health=health,
        graceful=graceful,
        answer_writer=answer_writer,
        retried=policy.max_retries > 0,
        notes=[*given.notes, *_question_notes(asked.question, answer_writer, listed)],
        unreachable=_unreachable(source, health),
    )


def _question_notes(
    question: str | None, writer: AnswerWriter | None, requested: Sequence[str] | None
) -> list[str]:
    """What the notes say of a question: each gene or protein name it gives that no
    protein of the run stands for (never read as one); without a model, that its proteins
    were read by rule, and that it is not answered in words (the template lists what the
    data say)."""
    if not question:
        return []
    notes = unread_names(question, list(requested or ()))
    if not settings().model_configured:  # (with a model, the run cannot tell who planned)
        notes.append(rules_note(model=False))
    if writer is None or isinstance(writer, TemplateAnswerWriter):
        notes.append(
            "The question chose the proteins and the plan; it is not answered in words (no "
            "model writes the answer: set ANTHROPIC_API_KEY for one): the briefs give what "
            "the data say of each protein"
        )
    return notes


async def _conclude(
    tally: Tally,
    decision: QuorumDecision,
    folder: RunDir | None,
    *,
    requested: Sequence[str] | None,
    question: str | None,
    health: list[ServiceHealth],
    graceful: Graceful,
    answer_writer: AnswerWriter | None,
    retried: bool,
    notes: list[str],
    unreachable: ServiceHealth | None,
) -> AnalysisOutput:
    """The comparison, the answer and the output, from what the tally holds."""
    entries = tally.in_order(requested) if requested is not None else list(tally.entries.values())
    output = assemble(entries) if requested is not None else AnalysisOutput.empty()
    output = output.model_copy(
        update={
            "summary": tally.summary(),
            "by_category": _by_category(tally),
            "results": str(folder.results) if folder is not None else None,
            "streamed": requested is None,
            "notes": notes,
        }
    )
    comparison = await graceful.step(
        "compare",
        lambda: _compare(entries, requested, allowed=decision.met),
        fallback=None,
        available=[e.protein_id for e in output.completed_analyses],
    )
    facts = conclude.facts(
        question
        or (
            f"Analyze {', '.join(requested)}"
            if requested is not None
            else f"Analyze {output.summary.total_requested} proteins"
        ),
        entries,
        summary=output.summary,
        decision=decision,
        comparison=comparison,
        health=health,
        errors=graceful.errors,
        retried=retried,
        unreachable=unreachable,
    )
    output = output.model_copy(
        update={
            "quorum": decision,
            "comparison": comparison,
            "health": health,
            "errors": graceful.errors,
            "answer": await final_answer(facts, answer_writer),
        }
    )
    if folder is not None:
        folder.save(folder.output, output.model_dump_json(indent=2))
    events.info(events.RUN_FINISHED, **output.summary.model_dump())
    return output


UNFINISHED = "unfinished.txt"
"""The run directory's list of the proteins an interrupted run did not finish."""


def _save_interrupted(tally: Tally, folder: RunDir, requested: Iterable[str]) -> None:
    """An interrupted run's output (what finished, and the proteins that did not), the
    unfinished ones one a line in ``unfinished.txt`` (to run with ``--ids-file``), and
    its closing event, so that the run directory and the log end as the run did.

    ``requested`` is the list, or a streamed run's :class:`_Input`: the proteins handed
    to a child and not finished are saved first, then the rest of the input is read
    and saved with them (a second interrupt while it is read keeps the first save)."""
    tally.finish()
    if not isinstance(requested, Sequence):
        _save_unfinished(folder, _unfinished_output(tally, folder, _handed(tally), None))
    output = _stopped_output(tally, folder, requested)
    _save_unfinished(folder, output)
    events.warning(events.RUN_INTERRUPTED, **output.summary.model_dump())


def _save_unfinished(folder: RunDir, output: AnalysisOutput) -> None:
    """``output.json`` and ``unfinished.txt`` of an interrupted run."""
    folder.save(folder.path / UNFINISHED, "".join(f"{p}\n" for p in output.unfinished))
    folder.save(folder.output, output.model_dump_json(indent=2))


def _stopped_output(
    tally: Tally, folder: RunDir | None, requested: Iterable[str]
) -> AnalysisOutput:
    """What a run had when it stopped: the entries that finished and the proteins that
    did not, in request order; of a streamed run (``requested``: its :class:`_Input`),
    those handed to a child first, then the rest of its input."""
    if isinstance(requested, Sequence):
        finished = [tally.entries[p] for p in requested if p in tally.entries]
        left = [p for p in requested if p not in tally.outcomes]
        return _unfinished_output(tally, folder, left, finished)
    unread = [p for p in requested if p not in tally.outcomes]
    return _unfinished_output(tally, folder, [*_handed(tally), *unread], None)


def _by_category(tally: Tally) -> dict[str, int]:
    """The failures so far by category, named in order (none counted as 0)."""
    return dict(sorted((+tally.by_category).items()))


def _handed(tally: Tally) -> list[str]:
    """The proteins handed to a child and not finished."""
    return [p for p in tally.started if p not in tally.outcomes]


def _unfinished_output(
    tally: Tally, folder: RunDir | None, unfinished: list[str], finished: list[ProteinEntry] | None
) -> AnalysisOutput:
    """The output of a run that did not finish (``finished``: the entries of a listed
    run; ``None`` for a streamed one, whose are in results.jsonl)."""
    results = folder.results if folder is not None and folder.results.exists() else None
    return assemble(finished or []).model_copy(
        update={
            "summary": tally.summary(unfinished=len(unfinished)),
            "by_category": _by_category(tally),
            "results": str(results) if results is not None else None,
            "streamed": finished is None,
            "interrupted": True,
            "unfinished": unfinished,
        }
    )


def _child(source: ProteinSource, *, durable: bool) -> ProteinChild | ChildRef:
    """The protein child: the object itself here; by name for a durable run, so
    that a resumed run or a worker builds the same one."""
    if not durable:
        return ProteinChild(source)
    if isinstance(source, LiveSource):
        urls = {"afdb_url": source.afdb_url, "uniprot_url": source.uniprot_url}
        return ChildRef(target="lyra.proteins:protein_child", options={"source": "live", **urls})
    if type(source) is OfflineSource:
        return ChildRef(target="lyra.proteins:protein_child", options={"source": "offline"})
    raise ConfigurationError(
        f"a durable run needs the offline or live source, not {type(source).__name__}"
    )


def _task(
    protein_id: str, plan: Plan, faults: Sequence[Fault], not_text: str | None = None
) -> Task:
    """One protein as a task; only its own injected faults travel with it, and why the
    item it was made from is no ID at all (``not_text``: ``None``, a number)."""
    context: dict[str, object] = {"plan": plan}
    if faults:
        context["faults"] = [fault.spec for fault in faults]
    if not_text is not None:
        context[NOT_TEXT] = not_text
    return Task(prompt=f"Analyze {protein_id}", subject=protein_id, context=context)


async def _health(source: ProteinSource) -> list[ServiceHealth]:
    """Probe the data source (``ping()`` if it has one, else one known entry)
    and, when an API key is set, the model service (listing one model)."""
    ping = getattr(source, "ping", None) or partial(source.fetch, "P04637")
    checks = [await probe(f"{source.name} data source", ping)]
    if settings().model_configured:
        import anthropic  # noqa: F401 - imported before the clock starts: it is slow to load

        checks.append(await probe("model service", _list_one_model))
    else:
        checks.append(
            ServiceHealth(
                name="model service",
                status="not_configured",
                detail="no ANTHROPIC_API_KEY: template answers",
            )
        )
    return checks


def _unreachable(source: ProteinSource, health: Sequence[ServiceHealth]) -> ServiceHealth | None:
    """The live source's health check when it could not reach its services at all."""
    if not isinstance(source, LiveSource):
        return None
    return next((h for h in health if h.name == "live data source" and h.status == "down"), None)


def _list_one_model() -> object:
    import anthropic

    options = settings().anthropic_client_options()
    with anthropic.Anthropic(max_retries=0, timeout=2.0, **options) as client:
        return client.models.list(limit=1)


async def _quorum(
    tally: Tally,
    policy: QuorumPolicy,
    fan_out: Callable[[Iterable[str]], Awaitable[None]],
    requested: Sequence[str] | None,
) -> QuorumDecision:
    """Decide; while a critical protein failed and rounds remain, retry it first."""
    for round_ in range(policy.critical_retries + 1):
        decision = decide(
            tally.quorum_view(requested), policy, retries_left=round_ < policy.critical_retries
        )
        events.info(
            events.QUORUM_DECISION,
            action=decision.action,
            met=decision.met,
            confidence=decision.confidence,
            reason=decision.reason,
            round=round_,
        )
        if decision.action != "retry_critical":
            return decision
        await fan_out(decision.retry)
    return decision


async def _compare(
    entries: Sequence[ProteinEntry], requested: Sequence[str] | None, *, allowed: bool
) -> Comparison | None:
    if requested is None:
        return None  # a streamed run: too many to compare in words (results.jsonl has all)
    figures = {e.protein_id: e.figures for e in entries if not isinstance(e, FailedAnalysis)}
    return compare(figures, requested, allowed=allowed)


def analyze_sync(request: AnalyzeRequest | Iterable[object], /, **options: Any) -> AnalysisOutput:
    """Blocking form of :func:`analyze` (the same options); call it where no event loop runs."""
    return anyio.run(partial(analyze, request, **options))


def assemble(entries: Sequence[ProteinEntry]) -> AnalysisOutput:
    """The final output from one entry per protein, in request order."""
    completed = [e for e in entries if isinstance(e, CompletedAnalysis)]
    partial_ = [e for e in entries if isinstance(e, PartialAnalysis)]
    failed = [e for e in entries if isinstance(e, FailedAnalysis)]
    return AnalysisOutput(
        completed_analyses=completed,
        partial_analyses=partial_,
        failed_analyses=failed,
        summary=Summary(
            total_requested=len(entries),
            successful=len(completed),
            partial=len(partial_),
            failed=len(failed),
        ),
    )


NOTES_KEPT = 20
"""Notes on resolved IDs an output keeps (a proteome's input may have many)."""


def requested_ids(ids: Iterable[object]) -> list[str]:
    """Requested IDs, resolved and normalised where valid, each once, in order."""
    return list(unique_ids(ids))


def unique_ids(ids: Iterable[object]) -> Iterator[str]:
    """:func:`requested_ids`, one at a time, read lazily (an ID file of any size)."""
    return _Input(ids)


class _Input:
    """The requested IDs, resolved and normalised, each once, read lazily: a
    comma-joined item is several IDs, an entry name or secondary accession the
    bundled data map is its primary accession (with a note). What is left can still
    be read after the fan-out stopped, whatever it stopped in: the iterator and the
    IDs seen live here, not in a generator an interrupt may have ended."""

    def __init__(self, ids: Iterable[object]) -> None:
        self._raw = iter([ids] if isinstance(ids, str) else ids)
        self._given: dict[str, list[str]] = {}  # each ID's spellings (in capitals), in order
        self._first: dict[str, str] = {}  # each ID in capitals: as it was first given
        self._pending: deque[tuple[str, str]] = deque()  # (ID, as given)
        self._repeated: dict[str, int] = {}  # a repeated ID's note, by its place in notes
        self.notes: list[str] = []
        """One line per ID resolved to another or requested again (the first
        :data:`NOTES_KEPT`)."""
        self.not_text: dict[str, str] = {}
        """Items that were no text (``None``, a number), by the text they are analysed
        as: why each is no protein ID (its task fails saying so, rule 3)."""

    def __iter__(self) -> _Input:
        return self

    def __next__(self) -> str:
        while True:
            while not self._pending:
                raw = next(self._raw)
                if not isinstance(raw, str):  # still one entry of the output, failed,
                    # named with its type: the number 123 is not the text "123"
                    text = valid_text(f"{safe_str(raw)} ({type(raw).__name__})")
                    self.not_text.setdefault(text, validate_protein_id(raw)[1] or "no text")
                    self._pending.append((text, text))
                    continue
                for part in split_ids(raw):
                    protein_id, note = resolve_protein_id(part)
                    self._pending.append((valid_text(protein_id), part.upper()))
                    if note is not None and note not in self.notes and len(self.notes) < NOTES_KEPT:
                        self.notes.append(note)
                        events.info(events.PROTEIN_ID_RESOLVED, given=part, subject=protein_id)
            protein_id, given = self._pending.popleft()
            # One ID in any case: an accession is in capitals already, and an ID that is
            # none (P05067.3, reported as typed) is the same request in any case too.
            key = f"\0{protein_id}" if protein_id in self.not_text else protein_id.upper()
            first = self._first.setdefault(key, protein_id)
            if first not in self._given:
                self._given[first] = [given]
                return first
            self._again(first, given)

    def _again(self, protein_id: str, given: str) -> None:
        """``protein_id`` was requested again (as ``given``): analysed once, and one note
        says so, naming each spelling that asked for it."""
        spellings = self._given[protein_id]
        if given not in spellings:
            spellings.append(given)
        if len(spellings) == 1:
            note = f"{spellings[0]} was requested more than once: analysed once"
        else:
            names = f"{', '.join(spellings[:-1])} and {spellings[-1]}"
            note = f"{names} name the same protein, {protein_id}: analysed once"
        at = self._repeated.get(protein_id)
        if at is not None:
            self.notes[at] = note
        elif len(self.notes) < NOTES_KEPT:
            self._repeated[protein_id] = len(self.notes)
            self.notes.append(note)


def entry_for(protein_id: str, outcome: RecoveryOutcome) -> ProteinEntry:
    """Classify one protein's end state (kept by its child in ``ctx.state``) into its entry."""
    state = ProteinState.of(outcome.state, protein_id)
    result = outcome.result
    attempts = len(outcome.attempts)
    interrupted = result.failure.message if result.failure is not None else None
    tasks = state.task_results(interrupted=interrupted)
    lines = [TaskLine(**t.model_dump(exclude={"result", "protein_id"})) for t in tasks]
    if result.ok:
        return CompletedAnalysis(
            protein_id=state.protein_id,
            brief=result.output or "",
            attempts=attempts,
            recovery=_recovery(outcome),
            figures=_figures(state),
            tasks=lines,
        )
    failed = {**_failure_fields(tasks, result, attempts, lines), "recovery": _recovery(outcome)}
    brief = state.output if _synthesised(tasks) or state.stages == STRUCTURE_PLAN else None
    if brief is not None:
        return PartialAnalysis(brief=brief, figures=_figures(state), **failed)
    return FailedAnalysis(**failed)


def _recovery(outcome: RecoveryOutcome) -> str | None:
    """How the attempts went, when there were several: ``attempt 1 (timeout 2 s):
    timeout; attempt 2 (continuation, timeout doubled to 4 s): completed``."""
    if len(outcome.attempts) < 2:
        return None
    steps, previous = [], None
    for attempt in outcome.attempts:
        failure = attempt.result.failure
        what = "completed" if failure is None else str(failure.category)
        timeout = f"timeout {num(attempt.timeout)} s"
        if previous is not None and attempt.timeout == 2 * previous:
            timeout = f"timeout doubled to {num(attempt.timeout)} s"
        how = f"{attempt.strategy}, " if previous is not None else ""
        steps.append(f"attempt {attempt.number} ({how}{timeout}): {what}")
        previous = attempt.timeout
    return "; ".join(steps)


def _figures(state: ProteinState) -> dict[str, Any]:
    """The numbers a comparison and the answer need, from the stage results, each unit
    with its PAE check and the model (entry, version, file) they come from."""
    summary = state.reusable("fetch_protein") or {}
    structure = state.reusable("analyze_structure") or {}
    units = structure.get("units") or []
    largest = max(units, key=lambda u: u["residues"]) if units else None
    confident = [s for s in structure.get("segments") or [] if s["kind"] == "ordered"]
    longest = max(confident, key=lambda s: s["length"]) if confident else None
    unit_list = [
        {
            **{k: u[k] for k in ("number", "where", "residues", "mean_plddt", "band")},
            "ranges": [list(r) for r in u["ranges"]],
            "pae": unit_verdict(u.get("pae"), len(u["ranges"])),
            "pae_check": u.get("pae"),  # its figures (rigid, within_pae, …); None: no PAE
        }
        for u in units
    ]
    figures = {
        "name": protein_name(summary),
        "model": {
            "entry_id": structure.get("entry_id"),
            "version": structure.get("model_version"),
            "version_basis": structure.get("model_version_basis"),  # None: stated by a source
            "source": (source := structure.get("model_file") or structure.get("figures_source")),
            "lower_trust": lower_trust(source),  # (figures quoted elsewhere: see provenance)
        }
        if structure
        else None,
        "provenance": summary.get("provenance") or None,  # each file's repository, commit
        "mean_plddt": structure.get("mean_plddt"),
        "fraction_at_plddt_70_or_more": structure.get("fraction_at_plddt_70_or_more"),
        "per_residue": structure.get("per_residue"),
        "units": len(units) if structure.get("units") is not None else None,
        "largest_unit": next((u for u in unit_list if u["number"] == largest["number"]), None)
        if largest
        else None,
        "unit_list": unit_list or None,
        "unit_pae": structure.get("unit_pae") or None,  # between each pair of units
        "segments": [
            {k: s[k] for k in ("start", "end", "length", "kind", "band", "mean_plddt")}
            for s in structure.get("segments") or []
        ]
        or None,
        "longest_confident": {
            "where": span(longest["start"], longest["end"]),
            "length": longest["length"],
            "mean_plddt": longest["mean_plddt"],
        }
        if longest and not units
        else None,
        "domains": [
            {
                "label": f"{f['description'] or f['type']} {span(f['start'], f['end'])}",
                "type": f["type"],  # (UniProt's feature type, and its residues: for scripts)
                "start": f["start"],
                "end": f["end"],
                "mean_plddt": f["mean_plddt"],
                "band": f["band"],
            }
            for f in structure.get("features") or []
            if f["type"] in DOMAIN_TYPES
        ]
        or None,
        "domains_source": _domains_source(summary),
    }
    return {key: value for key, value in figures.items() if value is not None}


def _domains_source(summary: Mapping[str, Any]) -> str | None:
    """Where the domain boundaries come from: the UniProt file (or URL), and for an
    isoform that they were mapped from the canonical sequence (a comparison line
    names it, as the brief does)."""
    uniprot = summary.get("uniprot") or {}
    where = uniprot.get("file") or uniprot.get("source")
    if not where:
        return None
    canonical = summary.get("isoform_of")
    return f"{where}, mapped from the canonical {canonical}" if canonical else where


def _synthesised(tasks: list[TaskResult]) -> bool:
    return any(t.task_type == "synthesize" and t.status in ("success", "partial") for t in tasks)


def _failure_fields(
    tasks: list[TaskResult], result: DelegationResult, attempts: int, lines: list[TaskLine]
) -> dict[str, Any]:
    failure = result.failure
    assert failure is not None
    failures = [t for t in tasks if t.status == "failed"]
    first = failures[0] if failures else None
    return {
        "protein_id": tasks[0].protein_id,
        "failed_at_stage": first.task_type if first else tasks[0].task_type,
        "error": (first.error if first else None) or failure.message,
        "tasks_skipped": [t.task_type for t in tasks if t.status == "skipped"],
        "additional_failures": [
            {"stage": t.task_type, "error": t.error or ""} for t in failures[1:]
        ],
        "category": failure.category,
        "error_type": failure.error_type,
        "retryable": failure.suggested_retry,
        "attempts": attempts,
        "report": result.report,
        "suggested_actions": list(failure.suggested_actions),
        "tasks": lines,
    }


def _entry(protein_id: str, outcome: RecoveryOutcome) -> ProteinEntry:
    """The protein's entry; lyra's own bug while building it fails that protein only."""
    try:
        return entry_for(protein_id, outcome)
    except Exception as exc:  # noqa: BLE001 - isolation: one protein, never the run
        events.error(events.PROTEIN_INTERNAL_ERROR, subject=protein_id, error=exception_text(exc))
        return _unfinished(protein_id, exception_text(exc))


def _unfinished(protein_id: str, why: str) -> FailedAnalysis:
    return FailedAnalysis(
        protein_id=protein_id,
        failed_at_stage="fetch_protein",
        error=f"Internal error in lyra: {why}",
        tasks_skipped=[],
        category=FailureCategory.TOOL_ERROR,
    )
