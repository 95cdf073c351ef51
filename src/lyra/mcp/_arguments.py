"""The arguments a delegation takes, as both delegating tools declare them (their
input schemas say the same)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from lyra.delegation import Budget

Prompt = Annotated[str, Field(description="The task, complete in itself.")]
# strict: a number as its schema says, never "5" or true read as one
Timeout = Annotated[
    float,
    Field(gt=0, allow_inf_nan=False, strict=True, description="Seconds the child may take in all."),
]
IdleTimeout = Annotated[
    float | None,
    Field(
        gt=0,
        allow_inf_nan=False,
        strict=True,
        description="Seconds without progress before the child is stopped.",
    ),
]
BudgetLimits = Annotated[
    Budget | None, Field(description="Limits for the child and everything it delegates.")
]
