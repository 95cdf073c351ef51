"""``delegate_task`` and ``adelegate_task``: report text in, report text out."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, TypeVar

import anyio

from lyra.delegation import Child
from lyra.supervisor import Supervisor

T = TypeVar("T")


async def adelegate_task(
    prompt: str,
    *,
    timeout: float = 300.0,
    child: Child | None = None,
    context: Mapping[str, Any] | None = None,
    session_id: str | None = None,
    subject: str | None = None,
) -> str:
    """Delegate ``prompt`` to a child and return its output or failure report.

    The text always ends in a ``<task_metadata>`` block. A child's failure
    never raises; a missing child raises
    :class:`~lyra.errors.ConfigurationError`; ``KeyboardInterrupt`` and
    ``SystemExit`` propagate at once.
    """
    result = await Supervisor(child).delegate(
        prompt, timeout=timeout, context=context, session_id=session_id, subject=subject
    )
    return result.report


def delegate_task(
    prompt: str,
    *,
    timeout: float = 300.0,
    child: Child | None = None,
    context: Mapping[str, Any] | None = None,
    session_id: str | None = None,
    subject: str | None = None,
) -> str:
    """Blocking form of :func:`adelegate_task`; call it where no event loop runs."""
    return run_blocking(
        "adelegate_task",
        partial(
            adelegate_task,
            prompt,
            timeout=timeout,
            child=child,
            context=context,
            session_id=session_id,
            subject=subject,
        ),
    )


def run_blocking(async_name: str, fn: Callable[[], Awaitable[T]]) -> T:
    """Run an async API function to completion from synchronous code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(fn)
    raise RuntimeError(
        f"this blocking call cannot run inside an event loop; use 'await {async_name}(...)'"
    )
