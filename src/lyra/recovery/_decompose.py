"""Decomposers: split a task that timed out without progress into subtasks.

The rule-based one (:func:`lyra.recovery.decompose`) splits lists.
:class:`ModelDecomposer` asks a model, and falls back to the rules when the
model cannot help. Which one a loop uses: the policy's ``decomposer`` if set,
else the child's own ``decompose(prompt)`` method if it has one (a workload
knows how its tasks split), else the model when an API key is configured,
else the rules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from lyra import events
from lyra.children import ask_structured, model_configured
from lyra.delegation import exception_text
from lyra.recovery._prompts import decompose
from lyra.templates import render

Decomposer = Callable[[str], list[str] | Awaitable[list[str]]]
"""Takes the task's prompt; returns its subtasks (fewer than two: no split)."""

MAX_SUBTASKS = 8

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "subtasks": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Independent, self-contained subtasks, in order.",
        }
    },
    "required": ["subtasks"],
}


class ModelDecomposer:
    """Asks a model to split the task; the rules answer when it cannot."""

    def __init__(self, client: Any = None, model: str | None = None) -> None:
        self.client, self.model = client, model

    async def __call__(self, prompt: str) -> list[str]:
        """The model's subtasks (2 to 8 of them), else the rule-based split."""
        try:
            answer = await ask_structured(
                prompt,
                system=render("decompose_system.txt.j2"),
                tool="submit_subtasks",
                schema=_SCHEMA,
                client=self.client,
                model=self.model,
            )
        except Exception as exc:  # noqa: BLE001 - any failure: the rules still split
            events.warning(events.MODEL_DECOMPOSER_FAILED, error=exception_text(exc))
            return decompose(prompt)
        subtasks = [str(item).strip() for item in answer.get("subtasks") or [] if str(item).strip()]
        return subtasks[:MAX_SUBTASKS] if len(subtasks) >= 2 else decompose(prompt)


def default_decomposer(child: object = None) -> Decomposer:
    """The child's own ``decompose`` if it has one, else a model when an API
    key is set, else the rules."""
    own = getattr(child, "decompose", None)
    if callable(own):
        return own  # type: ignore[no-any-return]
    return ModelDecomposer() if model_configured() else decompose
