"""``delegate_task`` and ``adelegate_task``: report text in, report text out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lyra._sync import blocking
from lyra.children import default_child
from lyra.delegation import Answerer, Budget, Child, Limits, Verifier
from lyra.delegation._internal import DEFAULT_MAX_REPEATS, Account, resolved, run_attempt


async def adelegate_task(
    prompt: str,
    *,
    timeout: float = 300.0,
    idle_timeout: float | None = None,
    budget: Budget | None = None,
    child: Child | None = None,
    context: Mapping[str, Any] | None = None,
    session_id: str | None = None,
    subject: str | None = None,
    attempt: int = 1,
    max_repeats: int | None = DEFAULT_MAX_REPEATS,
    verify: Verifier | None = None,
    answer: Answerer | None = None,
) -> str:
    """Delegate ``prompt`` to a child and return its output or failure report.

    The text always ends in a ``<task_metadata>`` block. ``idle_timeout``
    ends a child that makes no progress for that long; ``budget`` limits its
    tokens, cost, turns and tool calls (nested delegations included);
    ``max_repeats`` identical tool calls end it as a loop (``None``: never).
    ``verify(output)`` checks a success (``None``/``True`` accepts, ``False`` or a
    reason rejects it: ``partial`` / ``verification``); ``answer(question)``
    answers the child's ``ctx.ask`` (``None``: it has no answer). ``context`` is
    JSON data the child reads as ``ctx.context``; ``session_id``, ``subject`` and
    ``attempt`` name the delegation in its report and events.

    A child's failure never raises: it is the report. Raises, before any child runs:
    :class:`~lyra.errors.ConfigurationError` for no child at all (none given, no
    ``LYRA_CHILD``, no ``ANTHROPIC_API_KEY``) or something that is no child;
    ``TypeError`` or ``ValueError`` naming the argument for a prompt that is no
    string, a timeout that is not a positive finite number, a budget that is not a
    :class:`~lyra.Budget`, a callback that cannot be called. ``KeyboardInterrupt``
    and ``SystemExit`` propagate at once.
    """
    # What Supervisor(child, ...).delegate(prompt, ...) does, without building a
    # supervisor for one call: a framework run pays for every object made here.
    limits = Limits(timeout=timeout, idle_timeout=idle_timeout, max_repeats=max_repeats)
    account = Account.for_budget(budget)
    if child is None:
        child = default_child()
    result = await run_attempt(
        resolved(child),
        prompt,
        limits=limits,
        account=account,
        session_id=session_id,
        subject=subject,
        attempt=attempt,
        context=context,
        verify=verify,
        answer=answer,
    )
    return result.report


delegate_task = blocking(
    adelegate_task,
    "delegate_task",
    """Blocking form of :func:`adelegate_task`; call it where no event loop runs
    (inside one it raises ``RuntimeError``: ``await adelegate_task(...)`` there).

    ``attempt`` is the number a hand-written retry loop gives this call (the
    report's ``<attempt>`` tag). It raises what :func:`adelegate_task` raises, and a
    ``TypeError`` naming itself for an argument it does not take.
    """,
)
