"""The Supervisor: the parent that hands work to children."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lyra.delegation import Child, DelegationResult, default_child, run_attempt


class Supervisor:
    """Delegates prompts to child agents under deadlines.

    ``child`` is the default child for every delegation; without one, the
    configured default (:func:`lyra.delegation.default_child`) is resolved on
    first use, so constructing a Supervisor never fails.
    """

    def __init__(self, child: Child | None = None) -> None:
        self._child = child

    @property
    def child(self) -> Child:
        """The child used when a delegation names none."""
        if self._child is None:
            self._child = default_child()
        return self._child

    async def delegate(
        self,
        prompt: str,
        *,
        timeout: float = 300.0,
        child: Child | None = None,
        context: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        subject: str | None = None,
        attempt: int = 1,
    ) -> DelegationResult:
        """Run one child on ``prompt`` and return the result with its report."""
        return await run_attempt(
            child if child is not None else self.child,
            prompt,
            timeout=timeout,
            session_id=session_id,
            subject=subject,
            attempt=attempt,
            context=context,
        )
