"""ChildContext: how a child reports progress, runs tools, and declares itself blocked."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NoReturn, TypeVar, overload

import anyio
import anyio.to_thread

from lyra.delegation._models import FailureCategory
from lyra.errors import ChildBlocked

T = TypeVar("T")

_BLOCKABLE = frozenset(
    {FailureCategory.MISSING_CONTEXT, FailureCategory.INVALID_TASK, FailureCategory.TOOL_ERROR}
)


class ChildContext:
    """The supervisor's window into one child attempt.

    A child calls :meth:`step` for each finished piece of work,
    :meth:`file_modified` for each file it wrote, runs tools through
    :meth:`tool` (so usage is counted and blocking tools cannot hold the
    deadline) and calls :meth:`block` when it cannot go on.
    """

    def __init__(
        self,
        *,
        session_id: str,
        timeout: float,
        attempt: int = 1,
        subject: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.timeout = timeout
        self.attempt = attempt
        self.subject = subject
        self.context: Mapping[str, Any] = dict(context or {})
        self.completed_steps: list[str] = []
        self.files_modified: list[str] = []
        self.tool_usage: dict[str, int] = {}
        self.last_successful_tool: str | None = None
        self.blocked: ChildBlocked | None = None
        self.failed_tool: str | None = None
        self._failed_tool_error: BaseException | None = None
        self._deadline = anyio.current_time() + timeout

    @property
    def tool_executions(self) -> int:
        """How many tool calls the child started."""
        return sum(self.tool_usage.values())

    @property
    def made_progress(self) -> bool:
        """True once the child ran a tool or completed a step."""
        return bool(self.completed_steps) or self.tool_executions > 0

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self._deadline - anyio.current_time())

    def step(self, description: str) -> None:
        """Record one completed step (shown as ``✓ description`` in reports)."""
        self.completed_steps.append(str(description))

    def file_modified(self, path: str) -> None:
        """Record a file the child wrote; repeated paths are listed once."""
        path = str(path)
        if path not in self.files_modified:
            self.files_modified.append(path)

    @overload
    async def tool(
        self, name: str, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any
    ) -> T: ...

    @overload
    async def tool(self, name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...

    async def tool(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run a tool, counting its use; sync tools run in a worker thread.

        The worker thread is abandoned on cancellation, so a tool stuck in
        blocking code cannot hold the child past its deadline. An exception
        from the tool propagates unchanged and is remembered as a tool failure.
        """
        self.tool_usage[name] = self.tool_usage.get(name, 0) + 1
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(*args, **kwargs)
            else:
                call = functools.partial(fn, *args, **kwargs)
                result = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
                if inspect.isawaitable(result):
                    result = await result
        except Exception as exc:
            self.failed_tool, self._failed_tool_error = name, exc
            raise
        self.last_successful_tool = name
        return result

    def raised_by_tool(self, exc: BaseException) -> bool:
        """True when ``exc`` is the exception a tool run through :meth:`tool` raised."""
        return exc is self._failed_tool_error

    def block(self, category: FailureCategory | str, reason: str) -> NoReturn:
        """Declare the child blocked and end it.

        ``category`` is ``missing_context``, ``invalid_task`` or ``tool_error``.
        The declaration holds even if the child catches the exception.
        """
        declared = FailureCategory(category)
        if declared not in _BLOCKABLE:
            allowed = ", ".join(sorted(_BLOCKABLE))
            raise ValueError(f"a child can block only with one of {allowed}, not {declared}")
        self.blocked = ChildBlocked(declared, str(reason))
        raise self.blocked
