"""The offline protein child: fetch → analyze_structure → reason → critique → synthesize.

Each stage yields a :class:`TaskResult`. A failed fetch skips every later
stage; a failed middle stage skips the rest of the middle, and synthesis
still runs on what exists, marked ``partial``. Results live in a
:class:`ProteinState` kept in ``ctx.state`` (JSON data), which lyra carries
across the attempts of one task -- and, in durable runs, across crashes -- so
a retry continues from the stage that failed instead of fetching again.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict

from lyra import ChildContext
from lyra.delegation import exception_text
from lyra.errors import InvalidInput, LyraError, SubjectNotFound, TransientError
from lyra.proteins._aliases import id_hint
from lyra.proteins._analysis import (
    analyze_structure,
    critique,
    reason,
    structure_summary,
    synthesize,
)
from lyra.proteins._confidence import figure
from lyra.proteins._faults import Fault, parse_fault
from lyra.proteins._ids import (
    accession_problem,
    find_protein_ids,
    normalize_protein_id,
    validate_protein_id,
)
from lyra.proteins._live import LiveSource
from lyra.proteins._offline import OfflineSource
from lyra.proteins._sources import ProteinSource
from lyra.proteins._synthetic import SyntheticSource
from lyra.proteins._validate import validate_response

FETCH, STRUCTURE, REASON, CRITIQUE, SYNTHESIZE = (
    "fetch_protein",
    "analyze_structure",
    "reason",
    "critique",
    "synthesize",
)
FULL_PLAN: tuple[str, ...] = (FETCH, STRUCTURE, REASON, CRITIQUE, SYNTHESIZE)
STRUCTURE_PLAN: tuple[str, ...] = (FETCH, STRUCTURE)
_MIDDLE = (STRUCTURE, REASON, CRITIQUE)
_STRUCTURE_ONLY = re.compile(r"\bstructure[- ]only\b|\bonly (?:the )?structure\b", re.I)

Plan = Literal["full", "structure"]
NOT_TEXT = "not_text"
"""A task's context key: why the request's item it was made from is no ID at all (it
was ``None``, a number): the task fails saying so, as an invalid task (rule 3)."""
TaskStatus = Literal["success", "failed", "skipped", "partial"]


class StageFailed(LyraError):
    """A stage returned a soft failure (a result dict with an ``error`` key)."""


class TaskResult(BaseModel):
    """The outcome of one stage of one protein."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    task_id: str
    protein_id: str
    task_type: str
    status: TaskStatus
    result: Any = None
    error: str | None = None
    duration_seconds: float = 0.0


@dataclass
class ProteinState:
    """What one protein's child has done so far, across attempts."""

    protein_id: str
    stages: tuple[str, ...] = FULL_PLAN
    results: dict[str, TaskResult] = field(default_factory=dict)
    running: str | None = None
    """The stage under way when the attempt ended (a deadline cuts it short)."""
    output: str | None = None

    def snapshot(self) -> dict[str, Any]:
        """The progress as JSON data (what a durable step records after an attempt)."""
        return {
            "stages": list(self.stages),
            "results": {k: v.model_dump(mode="json") for k, v in self.results.items()},
            "running": self.running,
            "output": self.output,
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Take the progress a :meth:`snapshot` recorded (replacing this one's)."""
        self.stages = tuple(snapshot.get("stages") or self.stages)
        self.results = {k: TaskResult.model_validate(v) for k, v in snapshot["results"].items()}
        self.running = snapshot["running"]
        self.output = snapshot["output"]

    @classmethod
    def of(
        cls, state: Mapping[str, Any], protein_id: str, stages: tuple[str, ...] = FULL_PLAN
    ) -> ProteinState:
        """The progress a child kept in ``ctx.state`` (or a fresh one)."""
        progress = cls(protein_id, stages)
        kept = state.get(protein_id)
        if isinstance(kept, Mapping):
            progress.restore(kept)
        return progress

    def reusable(self, stage: str) -> Any:
        """The result of a stage that already succeeded, else ``None``."""
        done = self.results.get(stage)
        return done.result if done is not None and done.status == "success" else None

    def record(self, stage: str, status: TaskStatus, **fields: Any) -> None:
        """Store the result of a stage (replacing an earlier attempt's)."""
        index = self.stages.index(stage)
        self.results[stage] = TaskResult(
            task_id=f"{self.protein_id}_{stage}_{index}",
            protein_id=self.protein_id,
            task_type=stage,
            status=status,
            **fields,
        )

    def task_results(self, interrupted: str | None = None) -> list[TaskResult]:
        """Every stage's result in plan order; a stage cut short is ``failed``
        with ``interrupted`` as its error, and the stages after it ``skipped``."""
        results = []
        for index, stage in enumerate(self.stages):
            done = self.results.get(stage)
            if stage == self.running and interrupted is not None:
                done = TaskResult(
                    task_id=f"{self.protein_id}_{stage}_{index}",
                    protein_id=self.protein_id,
                    task_type=stage,
                    status="failed",
                    error=interrupted,
                )
            results.append(
                done
                or TaskResult(
                    task_id=f"{self.protein_id}_{stage}_{index}",
                    protein_id=self.protein_id,
                    task_type=stage,
                    status="skipped",
                )
            )
        return results


def plan_for(prompt: str, plan: str | None = None) -> tuple[str, ...]:
    """The stages for a plan name, or for a prompt that asks for structure only."""
    if plan is None:
        plan = "structure" if _STRUCTURE_ONLY.search(prompt) else "full"
    if plan not in ("full", "structure"):
        raise ValueError(f"unknown plan {plan!r}; use 'full' or 'structure'")
    return STRUCTURE_PLAN if plan == "structure" else FULL_PLAN


class ProteinChild:
    """The offline protein child: one protein's pipeline under the child contract.

    The protein comes from ``ctx.subject``, else the UniProt accession the prompt's
    first line names (else the first in the prompt); a first line naming several is an
    invalid task: one protein per child. Its progress is kept in ``ctx.state``, so a
    retry of the same task continues from the stage that failed. Each stage it runs is one turn,
    charged to the delegation tree's budget (``max_turns``). Injected faults come from
    ``faults`` and from the task's ``ctx.context["faults"]`` (specs such as
    ``"P04637:hang@1"``).
    """

    def __init__(
        self,
        source: ProteinSource | None = None,
        *,
        faults: Sequence[Fault] = (),
        plan: Plan | None = None,
    ) -> None:
        self.source = source if source is not None else OfflineSource()
        self.faults = tuple(faults)
        self.plan = plan

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        """Analyse the protein and return its brief (or structure summary)."""
        subject = ctx.subject
        protein_id = subject if subject is not None else _first_accession(prompt, ctx)
        stages = plan_for(prompt, self.plan or ctx.context.get("plan"))
        state = ProteinState.of(ctx.state, protein_id, stages)
        faults = [
            f
            for f in (*self.faults, *map(parse_fault, ctx.context.get("faults", ())))
            if f.protein_id == protein_id and f.strikes(ctx.attempt)
        ]
        try:
            return await _Run(state, self.source, faults, ctx).pipeline()
        finally:  # also when the deadline cuts the attempt short
            ctx.state[protein_id] = state.snapshot()

    @staticmethod
    def decompose(prompt: str) -> list[str]:
        """Split a task about several proteins into one subtask per accession."""
        return [f"Analyze {accession}" for accession in find_protein_ids(prompt)]


def protein_child(
    source: Literal["offline", "live", "synthetic"] = "offline",
    afdb_url: str | None = None,
    uniprot_url: str | None = None,
    seed: int = 0,
) -> ProteinChild:
    """A protein child whose source is described by data, so that a durable run's
    worker builds the same one: ``ChildRef("lyra.proteins:protein_child",
    {"source": "live"})``; ``{"source": "synthetic", "seed": 7}`` gives the seeded
    synthetic source of load tests."""
    if source == "offline":
        return ProteinChild(OfflineSource())
    if source == "synthetic":
        return ProteinChild(SyntheticSource(seed))
    return ProteinChild(LiveSource(afdb_url=afdb_url, uniprot_url=uniprot_url))


def _first_accession(prompt: str, ctx: ChildContext) -> str:
    task = next((line for line in prompt.splitlines() if line.strip()), "")
    # The task's own line names the protein; what follows may quote a larger task (a
    # decomposed one names its part first, then the whole).
    found = find_protein_ids(task) or find_protein_ids(prompt)[:1]  # (each once)
    if not found:
        ctx.block("missing_context", "No UniProt accession found in the prompt")
    if len(found) > 1:  # one would be analysed and the others never said: refused
        ctx.block(
            "invalid_task",
            f"The prompt names {len(found)} proteins ({', '.join(found)}); a protein child "
            f"analyses one: give each its own task (lyra analyze {' '.join(found)}), or name "
            "the one meant as the task's subject",
        )
    return found[0]


@dataclass
class _Run:
    """One attempt at one protein's pipeline."""

    state: ProteinState
    source: ProteinSource
    faults: list[Fault]
    ctx: ChildContext

    async def pipeline(self) -> str:
        summary = await self.stage(FETCH, self.fetch)
        if self.state.stages == STRUCTURE_PLAN:
            return await self.structure_only(summary)
        return await self.full(summary)

    async def structure_only(self, summary: dict[str, Any]) -> str:
        """The structure summary. When the stage fails, the summary of what exists (the
        entry, its annotation, the problem) is still written and the failure re-raised:
        the protein ends partial, as the full plan's synthesis makes it (DESIGN §6)."""
        try:
            structure = await self.stage(STRUCTURE, lambda: _checked(self.structure(summary)))
        except Exception as exc:
            failed = {"error": _error_text(exc)}
            self.state.output = structure_summary(self.state.protein_id, summary, failed)
            raise
        self.state.output = structure_summary(self.state.protein_id, summary, structure)
        return self.state.output

    async def full(self, summary: dict[str, Any]) -> str:
        done: dict[str, Any] = {}
        steps: dict[str, Callable[[], Any]] = {
            STRUCTURE: lambda: self.structure(summary),
            REASON: lambda: reason(summary, done.get(STRUCTURE)),
            CRITIQUE: lambda: critique(summary, done.get(STRUCTURE), done.get(REASON)),
        }
        failure: Exception | None = None
        for stage in _MIDDLE:
            if failure is not None:
                self.state.results.pop(stage, None)  # skipped this time
                continue
            try:
                done[stage] = await self.stage(stage, partial(_checked_call, steps[stage]))
            except Exception as exc:  # noqa: BLE001 - the first failure is re-raised below
                failure = exc
        missing = [stage for stage in _MIDDLE if stage not in done]
        failed = self.state.results.get(STRUCTURE)
        brief = await self.stage(
            SYNTHESIZE,
            lambda: synthesize(
                self.state.protein_id,
                summary,
                done.get(STRUCTURE),
                done.get(REASON),
                done.get(CRITIQUE),
                missing,
                problem=failed.error if failed is not None and failed.status == "failed" else None,
            ),
            status="partial" if missing else "success",
        )
        self.state.output = brief
        if failure is not None:
            raise failure
        return str(brief)

    async def stage(
        self, name: str, work: Callable[[], Any], *, status: TaskStatus = "success"
    ) -> Any:
        """Run one stage (or reuse its earlier success), recording its TaskResult.

        Each stage run is one turn of this child, charged to the run's budget."""
        reused = self.state.reusable(name)
        if reused is not None and status == "success":
            self.ctx.step(f"Reused {name} from an earlier attempt")
            return reused
        self.state.running = name
        started = time.perf_counter()
        try:
            self.ctx.charge(turns=1, ahead=True)
            await self.inject(name)
            result = work()
            if isinstance(result, Awaitable):
                result = await result
        except Exception as exc:
            self.state.record(
                name, "failed", error=_error_text(exc), duration_seconds=_since(started)
            )
            self.state.running = None
            raise
        self.state.record(name, status, result=result, duration_seconds=_since(started))
        self.state.running = None
        self.ctx.step(_step_text(name, self.state.protein_id, result))
        return result

    def structure(self, summary: dict[str, Any]) -> dict[str, Any]:
        """The structure stage; without any AlphaFold DB model, or with one the source
        holds no figures of, the child is blocked (``missing_context``, not retryable:
        another try from the same source finds none either)."""
        result = analyze_structure(summary)
        if result.get("model_elsewhere"):
            self.ctx.block("missing_context", result["error"])
        if result.get("missing_model"):
            self.ctx.block(
                "missing_context",
                f"{result['error']}. Experimental structures may exist in the PDB: "
                f"{pdb_link(self.state.protein_id)}",
            )
        return result

    async def inject(self, stage: str) -> None:
        """Apply this attempt's injected faults to a stage."""
        for fault in self.faults:
            if fault.kind == "slow":
                await anyio.sleep(fault.seconds or 0)
            elif fault.kind == "hang" and stage == STRUCTURE:
                await anyio.sleep_forever()
            elif fault.kind == "structure_error" and stage == STRUCTURE:
                raise RuntimeError(
                    f"Injected failure in analyze_structure for {self.state.protein_id}"
                )

    async def fetch(self) -> dict[str, Any]:
        """Validate the ID, fetch through the source (a tool), validate the answer."""
        not_text = self.ctx.context.get(NOT_TEXT)
        if not_text is not None:  # the request's item was None, a number: no ID at all
            raise InvalidInput(str(not_text))
        ok, problem = validate_protein_id(self.state.protein_id)
        value = normalize_protein_id(self.state.protein_id)
        if not ok or value is None:
            shown = self.state.protein_id if isinstance(self.state.protein_id, str) else ""
            raise InvalidInput((problem or "invalid protein ID") + id_hint(shown))
        why = accession_problem(value) if _accessions_only(self.source) else None
        if why is not None:  # it cannot exist: no source is asked
            raise SubjectNotFound(f"Protein {value} not found: {why}{id_hint(value)}")
        raw = await self.ctx.tool(FETCH, self.source_call(), value)
        return usable_summary(raw, value, self.source.name)

    def source_call(self) -> Callable[[str], object]:
        """The source's fetch, with any fetch fault of this attempt in front of it."""
        kinds = {fault.kind: fault for fault in self.faults}
        if "tool_error" in kinds:
            return _raises(ConnectionError("Injected connection failure (connection refused)"))
        if "rate_limit" in kinds:
            wait = kinds["rate_limit"].seconds
            return _raises(
                TransientError("HTTP 429 Too Many Requests", retry_after=wait, status=429)
            )
        if "not_found" in kinds:
            return lambda pid: {
                "error": f"Protein {pid} not found (injected not_found fault)",
                "status": 404,
            }
        if "malformed" in kinds:
            return lambda pid: _without_description(self.source.fetch(pid))
        return self.source.fetch


def _accessions_only(source: ProteinSource) -> bool:
    """True unless the source says its IDs need not be UniProt accessions."""
    return getattr(source, "uniprot_accessions", True) is not False


def pdb_link(protein_id: str) -> str:
    """Where experimental structures of a protein are listed (PDBe-KB, by UniProt accession;
    an isoform's under its entry's, as PDBe-KB lists them)."""
    return f"https://www.ebi.ac.uk/pdbe/pdbe-kb/proteins/{protein_id.partition('-')[0]}"


def usable_summary(raw: object, protein_id: str, source: str) -> dict[str, Any]:
    """The validated summary, or the exception its soft failure stands for."""
    summary = validate_response(raw, protein_id, source)
    if "error" in summary:
        if summary.get("status") == 404:  # what the ID may have meant, from the bundled data
            summary = {**summary, "error": f"{summary['error']}{id_hint(protein_id)}"}
        raise fetch_error(summary)
    return summary


def fetch_error(error: Mapping[str, Any]) -> Exception:
    """The exception a soft fetch failure stands for (404: the subject does not exist)."""
    message = str(error["error"])
    status = error.get("status")
    if status == 404:
        return SubjectNotFound(message)
    if isinstance(status, int):
        return TransientError(message, status=status)
    return TransientError(message, error_type="data")  # an answer we cannot use


def _checked_call(work: Callable[[], Any]) -> Any:
    return _checked(work())


def _checked(result: Any) -> Any:
    """A stage's result, or StageFailed for a soft failure (an ``error`` key)."""
    if isinstance(result, Mapping) and "error" in result:
        raise StageFailed(str(result["error"]))
    return result


def _raises(exc: Exception) -> Callable[[str], object]:
    def fetch(protein_id: str) -> object:
        raise exc

    return fetch


def _without_description(answer: object) -> object:
    if isinstance(answer, dict):
        return {key: value for key, value in answer.items() if key != "description"}
    return answer


def _error_text(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, StageFailed) else exception_text(exc)


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 6)


def _step_text(stage: str, protein_id: str, result: Any) -> str:
    if stage == FETCH:
        return f"Fetched {protein_id}"
    if stage == STRUCTURE and isinstance(result, Mapping):
        mean = result.get("mean_plddt")
        return f"Analysed structure of {protein_id}" + (
            f" (whole-model mean pLDDT {figure(mean)})" if mean else ""
        )
    return {
        REASON: "Reasoned about",
        CRITIQUE: "Critiqued the reasoning for",
        SYNTHESIZE: "Composed the brief for",  # (the run directory writes it, not the child)
    }[stage] + f" {protein_id}"
