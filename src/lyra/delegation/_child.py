"""The child contract: an async callable ``child(prompt, ctx) -> str`` or an
object with ``async def run(self, prompt, ctx) -> str``."""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol, TypeAlias, runtime_checkable

import anyio
import anyio.to_thread

from lyra.delegation._context import ChildContext
from lyra.errors import ConfigurationError


@runtime_checkable
class ChildAgent(Protocol):
    """A child agent object: ``await child.run(prompt, ctx)`` returns the output."""

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        """Do the task and return its result text."""
        ...


ChildFn: TypeAlias = Callable[[str, ChildContext], Awaitable[str]]
Child: TypeAlias = ChildAgent | ChildFn


def as_callable(child: Child) -> ChildFn:
    """The coroutine function behind any child, checked once before it runs.

    A plain (synchronous) function is accepted too: it runs in a worker
    thread, so its deadline still holds while it blocks.
    """
    run = getattr(child, "run", None)
    if run is not None and inspect.iscoroutinefunction(run):
        return run  # type: ignore[no-any-return]
    if inspect.iscoroutinefunction(child) or inspect.iscoroutinefunction(type(child).__call__):
        return child  # type: ignore[return-value]  # an async callable: a ChildFn
    if callable(child):
        return partial(_in_thread, child)
    raise ConfigurationError(
        f"{child!r} is not a child agent: pass an async callable child(prompt, ctx) "
        "or an object with 'async def run(self, prompt, ctx)'"
    )


async def _in_thread(fn: Callable[[str, ChildContext], Any], prompt: str, ctx: ChildContext) -> Any:
    result = await anyio.to_thread.run_sync(fn, prompt, ctx, abandon_on_cancel=True)
    return await result if inspect.isawaitable(result) else result


def default_child() -> Child:
    """The configured default child.

    ``LYRA_CHILD`` chooses: ``anthropic`` (needs ``ANTHROPIC_API_KEY``; a
    model with the protein pipeline's stages as tools), ``protein`` (the
    offline protein child) or ``auto`` (the default: Anthropic when a key is
    set, otherwise the offline protein child).
    """
    choice = os.environ.get("LYRA_CHILD", "auto").strip().lower() or "auto"
    has_key = bool(os.environ.get("ANTHROPIC_API_KEY"))
    if choice == "anthropic" or (choice == "auto" and has_key):
        if not has_key:
            raise ConfigurationError(
                "LYRA_CHILD=anthropic needs ANTHROPIC_API_KEY; set it, "
                "or use LYRA_CHILD=protein for the offline protein child"
            )
        from lyra.proteins import anthropic_protein_child

        return anthropic_protein_child()  # a model with the protein stages as tools
    if choice in ("auto", "protein"):
        from lyra.proteins import ProteinChild

        return ProteinChild()
    raise ConfigurationError(
        f"LYRA_CHILD={choice!r} names no child; use 'auto', 'anthropic' or 'protein'"
    )
