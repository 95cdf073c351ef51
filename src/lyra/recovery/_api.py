"""``delegate_with_retry`` and ``adelegate_with_retry``: the recovery loop, as text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lyra._sync import blocking
from lyra.delegation import Budget, Child
from lyra.recovery._loop import recover
from lyra.recovery._policy import RecoveryPolicy
from lyra.recovery._strategies import ContextProvider


async def adelegate_with_retry(
    prompt: str,
    *,
    child: Child | None = None,
    max_retries: int | None = None,
    base_timeout: float = 300.0,
    idle_timeout: float | None = None,
    budget: Budget | None = None,
    policy: RecoveryPolicy | None = None,
    context_provider: ContextProvider | None = None,
    subject: str | None = None,
    context: Mapping[str, Any] | None = None,
) -> str:
    """Delegate with recovery; return the last report (its ``<attempt>`` tag says which).

    ``max_retries`` (3 unless given) overrides the ``policy``'s when both are
    given. ``budget`` is shared by every attempt, decomposed subtask and nested
    delegation of the loop; ``idle_timeout`` bounds each attempt's time
    without progress.
    """
    policy = policy or RecoveryPolicy()
    if max_retries is not None:
        policy = RecoveryPolicy.model_validate({**dict(policy), "max_retries": max_retries})
    outcome = await recover(
        prompt,
        child=child,
        base_timeout=base_timeout,
        idle_timeout=idle_timeout,
        budget=budget,
        policy=policy,
        context_provider=context_provider,
        subject=subject,
        context=context,
    )
    return outcome.report


delegate_with_retry = blocking(
    adelegate_with_retry, "delegate_with_retry", "Blocking form of :func:`adelegate_with_retry`."
)
