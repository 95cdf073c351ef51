"""One protein analysis as data: what to analyse, and how hard to try.

:class:`AnalyzeRequest` is what ``lyra analyze`` makes of its arguments at the
boundary, what a durable run records (``run.json``) and resumes, and what
:func:`lyra.proteins.analyze` runs. How a run is carried out -- the source
object, the run directory, the executor, callbacks -- are :func:`analyze`'s own
keywords, not part of the request.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lyra import Budget
from lyra.proteins._faults import Fault, parse_fault
from lyra.proteins._pipeline import Plan
from lyra.supervisor import QuorumPolicy

__all__ = ["AnalyzeRequest"]


class AnalyzeRequest(BaseModel):
    """One protein analysis: the proteins, the plan, the limits and the quorum."""

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    ids: tuple[str, ...] = ()
    """The proteins, as given (resolved and checked when the run reads them). A
    streamed Python run may pass them to :func:`analyze` as an iterable instead."""
    question: str | None = None
    """The question the answer addresses (its proteins are already in ``ids``)."""
    plan: Plan = "full"
    """``full`` (fetch → … → synthesize) or ``structure`` (ends at analyze_structure)."""
    timeout: float = Field(default=300.0, gt=0)
    """Seconds per attempt of each protein."""
    idle_timeout: float | None = Field(default=None, gt=0)
    """Seconds without progress before an attempt ends (``None``: no idle limit)."""
    budget: Budget | None = None
    """One budget for the whole run: every protein, retry and model call."""
    retries: int = Field(default=0, ge=0)
    """Recovery attempts after a failure."""
    concurrency: int = Field(default=8, ge=1)
    """Proteins at once."""
    faults: tuple[str, ...] = ()
    """Injected faults, ``ID:FAULT[:ARG][@N]`` (:class:`Fault` objects are accepted)."""
    quorum: QuorumPolicy = QuorumPolicy()
    """When the results are enough to answer (fewest successes, critical proteins)."""
    source: Literal["offline", "live"] = "offline"
    """The bundled data, or AlphaFold DB and UniProt over HTTP."""

    @model_validator(mode="before")
    @classmethod
    def _recorded_before(cls, data: Any) -> Any:
        """A run record written before the request was shared (``structure_only``,
        ``min_success``, ``critical`` as the command line names them) still reads."""
        if not isinstance(data, dict) or not {"structure_only", "min_success", "critical"} & set(
            data
        ):
            return data
        data = dict(data)
        if data.pop("structure_only", False):
            data["plan"] = "structure"
        quorum = {k: data.pop(k) for k in ("min_success", "critical") if k in data}
        data["quorum"] = QuorumPolicy(**quorum)
        return data

    @field_validator("faults", mode="before")
    @classmethod
    def _fault_specs(cls, value: Any) -> Any:
        """Each fault as its normalised spec; a ValueError names a bad one."""
        if isinstance(value, str):
            value = [value]
        return tuple(f.spec if isinstance(f, Fault) else parse_fault(str(f)).spec for f in value)
