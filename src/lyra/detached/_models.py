"""What a detached delegation is asked to do, and what its store says about it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from lyra.delegation import Budget, TaskReport

State = Literal["working", "input_required", "completed", "failed", "cancelled"]
"""Where a detached delegation is. The names are MCP's task statuses (protocol
2025-11-25), so that a task API can be offered on the same store: ``completed``
and ``failed`` say what the child's report says, ``cancelled`` that a client
cancelled it (it has no report)."""

FINISHED: frozenset[State] = frozenset({"completed", "failed", "cancelled"})


class DelegationRequest(BaseModel):
    """One delegation to run in the background: the task and its limits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt: str = Field(description="The task, complete in itself.")
    # (strict: a bool or a string is refused, as delegate_task and Task refuse it)
    timeout: float = Field(
        default=300.0,
        gt=0,
        allow_inf_nan=False,
        strict=True,
        description="Seconds the child may take in all.",
    )
    idle_timeout: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        strict=True,
        description="Seconds without progress before the child is stopped.",
    )
    budget: Budget | None = Field(
        default=None, description="Limits for the child and everything it delegates."
    )


class DelegationStatus(BaseModel):
    """A detached delegation as its store sees it now."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    delegation_id: str
    state: State
    prompt: str = Field(description="The task (its first 200 characters).")
    created_at: float = Field(description="When it was started (seconds since the epoch).")
    updated_at: float = Field(description="When its state last changed.")
    steps: tuple[str, ...] = Field(default=(), description="Steps the child completed so far.")
    current_tool: str | None = Field(default=None, description="The tool the child is running now.")
    tokens_used: int = 0
    cost_usd: float = 0.0
    turns: int = 0
    time_left: float | None = Field(
        default=None, description="Seconds before its deadline (while it works, when known)."
    )
    question: str | None = Field(
        default=None, description="The child's question, while it waits for an answer."
    )
    expires_at: float | None = Field(
        default=None, description="When a finished delegation's result is forgotten."
    )
    report: TaskReport | None = Field(
        default=None, description="The child's report, once it finished (not when cancelled)."
    )

    @property
    def finished(self) -> bool:
        """True once it completed, failed or was cancelled."""
        return self.state in FINISHED
