"""RecoveryPolicy: how far recovery may go, and the backoff between attempts."""

from __future__ import annotations

import random
import reprlib
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lyra.delegation import ChildFailure, FailureCategory

Fixer = Callable[[ChildFailure], bool | Awaitable[bool]]
"""A user-supplied Python callable that may repair the environment after a
tool_error; it returns True when it fixed something. lyra never derives a
fixer from report text: only callables the user registers run."""


class RecoveryPolicy(BaseModel):
    """Limits and pacing of a recovery loop (strict: a count is a whole number and a time
    a number, never a string or a bool; ``fixers`` any sequence)."""

    model_config = ConfigDict(
        frozen=True, defer_build=True, extra="forbid", arbitrary_types_allowed=True, strict=True
    )

    max_retries: int = Field(default=3, ge=0, description="Retries after the first attempt.")
    timeout_cap: float = Field(
        default=3600.0, gt=0, description="No attempt's timeout exceeds this."
    )
    backoff_base: float = Field(default=1.0, ge=0, description="First backoff wait, in seconds.")
    backoff_cap: float = Field(default=60.0, ge=0, description="Longest backoff wait, in seconds.")
    jitter: float = Field(default=0.5, ge=0, le=1, description="Random share added to each wait.")
    max_wait: float = Field(
        default=600.0,
        gt=0,
        description="A service asking for a longer wait than this ends the loop.",
    )
    fallback_after: int = Field(
        default=2,
        ge=0,
        description="Backoffs on one child for a provider's retryable failure before the "
        "next fallback child takes over (a quota or key failure moves on at once).",
    )
    answer_wait: float = Field(
        default=3600.0,
        ge=0,
        allow_inf_nan=False,
        description="Durable runs only: seconds a task whose child asked a question nobody "
        "answered in the attempt (`ctx.ask`) waits in the database for its answer (sent "
        "with `lyra answer`, or by MCP's `answer_delegation`), a restart of its process "
        "included; answered, the attempt runs again with the answer waiting in `ctx.ask` "
        "(not counted as a retry). 0: the task ends missing_context / input_required at once, "
        "and each attempt that cannot be followed by another is saved with the task's "
        "result rather than as a checkpoint of its own (one write fewer per task).",
    )
    total_budget: float | None = Field(
        default=None, gt=0, description="Seconds for the whole loop, waits included."
    )
    retry_categories: frozenset[FailureCategory] = Field(
        default=frozenset(FailureCategory), description="Categories recovery may act on."
    )
    fixers: tuple[Fixer, ...] = Field(
        default=(), strict=False, description="Allow-listed environment fixers (a list or tuple)."
    )
    decomposer: Any = Field(
        default=None,
        description="Splits a task that timed out without progress (a Decomposer); "
        "None: a model when an API key is set, else the rules.",
    )

    @field_validator("retry_categories", mode="before")
    @classmethod
    def _categories(cls, value: Any) -> frozenset[FailureCategory]:
        return frozenset(FailureCategory(item) for item in value)

    def backoff(
        self, retry: int, retry_after: float | None = None, *, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait before retry number ``retry`` (1-based).

        Exponential with jitter (a share of up to ``jitter`` added), capped (jitter
        included) -- at the cap still spread, over its top ``jitter`` share, so that
        siblings in a long outage never retry on one beat -- and never shorter than
        a ``retry-after`` the failing service asked for. ``rng`` draws the jitter
        (the ``random`` module when ``None``).
        """
        wait = self.backoff_base * 2.0 ** min(retry - 1, 1023)
        draw = rng.random() if rng is not None else random.random()  # jitter, not cryptography
        least = min(wait, self.backoff_cap / (1 + self.jitter))
        wait = min(self.backoff_cap, least + least * self.jitter * draw)
        return float(max(wait, retry_after or 0.0))


def checked_policy(policy: object) -> RecoveryPolicy | None:
    """``policy=`` as given: ``None`` or a :class:`RecoveryPolicy`, else a TypeError now,
    not every task failing as lyra's own error once the loop reads it."""
    if policy is None or isinstance(policy, RecoveryPolicy):
        return policy
    example = (
        "RecoveryPolicy(**policy)" if isinstance(policy, dict) else "RecoveryPolicy(max_retries=2)"
    )
    raise TypeError(
        f"policy must be a lyra.RecoveryPolicy, e.g. {example}; got {reprlib.repr(policy)}"
    )
