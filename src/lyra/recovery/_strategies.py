"""Pick the next attempt from a failure (DESIGN §5 and §12)."""

from __future__ import annotations

import inspect
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from lyra.delegation import ChildFailure, ErrorType, FailureCategory
from lyra.recovery._decompose import default_decomposer
from lyra.recovery._policy import RecoveryPolicy
from lyra.recovery._prompts import continuation_prompt, enriched_prompt

ContextProvider = Callable[[ChildFailure], Mapping[str, Any] | Awaitable[Mapping[str, Any]]]
"""Called once after a missing_context (or idle) failure; returns context to add to the prompt."""


@dataclass(frozen=True, slots=True)
class Plan:
    """One attempt: its strategy, prompt, timeout, and the wait before it."""

    strategy: str
    prompt: str
    timeout: float
    wait: float = 0.0
    subtasks: tuple[str, ...] = ()


@dataclass(slots=True)
class LoopState:
    """What the loop remembers between attempts."""

    prompt: str  # the task as it stands (enrichment replaces it once)
    child: object = None  # whose own ``decompose`` may split the task
    retries: int = 0
    enriched: bool = False


async def next_plan(
    failure: ChildFailure,
    previous: Plan,
    state: LoopState,
    policy: RecoveryPolicy,
    context_provider: ContextProvider | None,
    *,
    rng: random.Random | None = None,
) -> Plan | None:
    """The attempt this failure calls for, or ``None`` when nothing can help.

    ``rng`` draws the backoff jitter (the ``random`` module when ``None``)."""
    if failure.category not in policy.retry_categories:
        return None
    retry = state.retries + 1
    match failure.category:
        case FailureCategory.TIMEOUT if failure.error_type is ErrorType.BUDGET:
            return _within_budget(failure, previous, state)
        case FailureCategory.TIMEOUT if failure.error_type is ErrorType.IDLE:
            return await _after_idle(failure, previous, state, policy, context_provider)
        case FailureCategory.TIMEOUT:
            return await _after_timeout(failure, previous, state, policy)
        case FailureCategory.MISSING_CONTEXT:
            return await _enrich(failure, previous, state, context_provider)
        case FailureCategory.TOOL_ERROR if failure.suggested_retry:
            fixed = await _fixed(failure, policy)
            wait = (
                failure.retry_after or 0.0
                if fixed
                else policy.backoff(retry, failure.retry_after, rng=rng)
            )
            if wait > policy.max_wait:
                return None  # the service asked for longer than we are allowed to wait
            return replace(previous, strategy="backoff", prompt=state.prompt, wait=wait)
        case FailureCategory.PARTIAL:
            return _continuation(failure, previous, state)
        case _:
            return None


async def _after_timeout(
    failure: ChildFailure, previous: Plan, state: LoopState, policy: RecoveryPolicy
) -> Plan | None:
    """A slow child: more time (a continuation if it finished steps); a child
    that did nothing: decomposition."""
    if failure.suggested_retry:
        timeout = min(previous.timeout * 2, policy.timeout_cap)
        if failure.completed_steps:
            prompt = continuation_prompt(state.prompt, failure)
            return Plan("continuation", prompt, timeout)
        return Plan("timeout_doubling", state.prompt, timeout)
    return await _decomposition(previous, state, policy)


async def _after_idle(
    failure: ChildFailure,
    previous: Plan,
    state: LoopState,
    policy: RecoveryPolicy,
    context_provider: ContextProvider | None,
) -> Plan | None:
    """An idle child never just gets a longer wait: decomposition, else the
    context it may be waiting for, else (after real progress) a continuation
    under the same limits -- a hung call often goes through the next time."""
    split = await _decomposition(previous, state, policy)
    if split is not None:
        return split
    enriched = await _enrich(failure, previous, state, context_provider)
    if enriched is not None:
        return enriched
    return _continuation(failure, previous, state) if failure.suggested_retry else None


def _within_budget(failure: ChildFailure, previous: Plan, state: LoopState) -> Plan | None:
    """Out of budget: a continuation only where the account still has room
    (the attempt draws on the same account, so it can never overspend)."""
    return _continuation(failure, previous, state) if failure.suggested_retry else None


def _continuation(failure: ChildFailure, previous: Plan, state: LoopState) -> Plan:
    prompt = continuation_prompt(state.prompt, failure)
    return replace(previous, strategy="continuation", prompt=prompt, subtasks=(), wait=0.0)


async def _decomposition(previous: Plan, state: LoopState, policy: RecoveryPolicy) -> Plan | None:
    if previous.subtasks:
        return None  # already decomposed: no strategy left
    decomposer = policy.decomposer or default_decomposer(state.child)
    subtasks = list(await _maybe_await(decomposer(state.prompt)))
    if len(subtasks) < 2:
        return None  # nothing to split: no strategy left
    return Plan("decomposition", state.prompt, previous.timeout, subtasks=tuple(subtasks))


async def _enrich(
    failure: ChildFailure,
    previous: Plan,
    state: LoopState,
    context_provider: ContextProvider | None,
) -> Plan | None:
    if context_provider is None or state.enriched:
        return None
    context = await _maybe_await(context_provider(failure))
    if not context:
        return None
    state.enriched = True
    state.prompt = enriched_prompt(state.prompt, failure, context)
    return replace(previous, strategy="enrichment", prompt=state.prompt, subtasks=(), wait=0.0)


async def _fixed(failure: ChildFailure, policy: RecoveryPolicy) -> bool:
    fixed = False
    for fixer in policy.fixers:
        fixed = bool(await _maybe_await(fixer(failure))) or fixed
    return fixed


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
