"""Detached delegations: start one now, read its status and collect its report
later, by id; cancel it; answer its child's question (``ctx.ask``). In memory by default,
durable with :class:`DurableRunner` (extra ``durable``).

This is the store behind ``lyra mcp``'s ``start_delegation`` and related
tools, with nothing of MCP in it, for any service that hands out delegations
by id. ``observed`` is the factory a durable workflow builds its watched child
with (by name: ``lyra.detached:observed``).
"""

from lyra.detached._durable import DurableRunner
from lyra.detached._models import DelegationRequest, DelegationStatus, State
from lyra.detached._store import (
    KEEP_FOR,
    Asker,
    Delegations,
    InProcess,
    NoQuestion,
    Recorded,
    Runner,
    UnknownDelegation,
)
from lyra.detached._watch import Observed, attempt, observed

__all__ = [
    "KEEP_FOR",
    "Asker",
    "DelegationRequest",
    "DelegationStatus",
    "Delegations",
    "DurableRunner",
    "InProcess",
    "NoQuestion",
    "Observed",
    "Recorded",
    "Runner",
    "State",
    "UnknownDelegation",
    "attempt",
    "observed",
]
