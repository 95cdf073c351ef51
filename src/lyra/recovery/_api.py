"""``delegate_with_retry`` and ``adelegate_with_retry``: the recovery loop, as text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lyra._sync import blocking
from lyra.delegation import Answerer, Budget, Child, ChildRef, Limits, Verifier
from lyra.delegation._internal import DEFAULT_MAX_REPEATS, check_timeout
from lyra.recovery._loop import recover
from lyra.recovery._policy import RecoveryPolicy, checked_policy
from lyra.recovery._strategies import ContextProvider


async def adelegate_with_retry(
    prompt: str,
    *,
    child: Child | ChildRef | None = None,
    max_retries: int | None = None,
    base_timeout: float = 300.0,
    idle_timeout: float | None = None,
    budget: Budget | None = None,
    policy: RecoveryPolicy | None = None,
    context_provider: ContextProvider | None = None,
    subject: str | None = None,
    context: Mapping[str, Any] | None = None,
    max_repeats: int | None = DEFAULT_MAX_REPEATS,
    verify: Verifier | None = None,
    answer: Answerer | None = None,
    fallbacks: Sequence[Child | ChildRef] = (),
) -> str:
    """Delegate with recovery; return the last report (its ``<attempt>`` tag says which;
    its usage tags are every attempt's together).

    ``max_retries`` (3 unless given) overrides the ``policy``'s when both are
    given. ``budget`` is shared by every attempt, decomposed subtask and nested
    delegation of the loop; ``idle_timeout`` bounds each attempt's time
    without progress; ``max_repeats`` identical tool calls end an attempt as a
    loop. ``verify`` checks each success, ``answer`` answers the child's
    questions (so does ``context_provider``: its context for a ``missing_context``
    failure, enriching the prompt, may hold the answer to the child's question,
    keyed by the question or as ``"answer"``; ``ctx.ask`` then returns it), and
    ``fallbacks`` take over in order when a child's model provider
    fails (a quota, a key, or trouble that outlasts the backoff); the report says
    which child answered and why the ones before did not.
    """
    policy = checked_policy(policy) or RecoveryPolicy()
    if max_retries is not None:
        policy = RecoveryPolicy.model_validate({**dict(policy), "max_retries": max_retries})
    limits = Limits(
        timeout=check_timeout(base_timeout, "base_timeout"),
        idle_timeout=idle_timeout,
        budget=budget,
        max_repeats=max_repeats,
    )
    outcome = await recover(
        prompt,
        child=child,
        limits=limits,
        policy=policy,
        context_provider=context_provider,
        subject=subject,
        context=context,
        fallbacks=fallbacks,
        verify=verify,
        answer=answer,
    )
    return outcome.report


delegate_with_retry = blocking(
    adelegate_with_retry, "delegate_with_retry", "Blocking form of :func:`adelegate_with_retry`."
)
