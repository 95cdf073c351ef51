"""Prompts for the next attempt, rendered from templates; and the rule-based decomposer.

Nothing here knows what a task is about: a workload that splits its tasks
its own way (by accession, by file) gives its child a ``decompose`` method or
the policy a ``decomposer``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lyra.delegation import ChildFailure
from lyra.templates import render

_ITEM = re.compile(r"^\s*(?:\d{1,3}[.)]|[-*•])\s+(\S.*)$")


def continuation_prompt(prompt: str, failure: ChildFailure, note: str | None = None) -> str:
    """What was done, the blocker, what remains, and (``note``) what to do differently."""
    return render(
        "continuation.txt.j2",
        prompt=prompt,
        steps=failure.completed_steps,
        files=failure.files_modified,
        blocker=failure.blocked_on,
        note=note,
    )


def enriched_prompt(prompt: str, failure: ChildFailure, context: Mapping[str, Any]) -> str:
    """The original prompt with the context a provider supplied."""
    return render("enrichment.txt.j2", prompt=prompt, blocker=failure.blocked_on, context=context)


def decompose(prompt: str) -> list[str]:
    """Split a task into subtasks by rule: one per item of a numbered or
    bulleted list in the prompt. Fewer than two: the prompt does not split."""
    items = [m.group(1).strip() for line in prompt.splitlines() if (m := _ITEM.match(line))]
    return items if len(items) >= 2 else []


def subtask_prompt(prompt: str, subtask: str, index: int, total: int) -> str:
    """A subtask with enough of the whole to stand alone."""
    return render("decomposition.txt.j2", prompt=prompt, subtask=subtask, index=index, total=total)
