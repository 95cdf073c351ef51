"""The execution seam: how many children run, and where.

:class:`LocalExecutor` runs them in this process under anyio. A durable
executor (DBOS) implements the same :class:`Executor` protocol, so
classification, recovery and reporting never know which one ran them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

import anyio

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Runs ``work`` for every item, at most ``max_concurrency`` at once."""

    async def map(
        self,
        work: Callable[[T], Awaitable[R]],
        items: Sequence[T],
        *,
        max_concurrency: int,
        on_error: Callable[[T, Exception], R],
    ) -> list[R]:
        """Results in the order of ``items``; an item whose work raises gets
        ``on_error(item, exc)`` and never disturbs the others."""
        ...


class LocalExecutor:
    """In-process fan-out: a fixed pool of anyio workers pulling from the items.

    A pool (rather than one task per item behind a limiter) keeps memory flat
    however many items there are.
    """

    async def map(
        self,
        work: Callable[[T], Awaitable[R]],
        items: Sequence[T],
        *,
        max_concurrency: int,
        on_error: Callable[[T, Exception], R],
    ) -> list[R]:
        """Run ``work`` over ``items``; see :class:`Executor`."""
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
        results: list[R | None] = [None] * len(items)
        pending = iter(enumerate(items))

        async def worker() -> None:
            for index, item in pending:
                try:
                    results[index] = await work(item)
                except Exception as exc:  # noqa: BLE001 - isolation: one item never sinks the rest
                    results[index] = on_error(item, exc)

        async with anyio.create_task_group() as group:
            for _ in range(min(max_concurrency, len(items))):
                group.start_soon(worker)
        return results  # type: ignore[return-value]  # every slot is filled above
