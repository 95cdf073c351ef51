"""What the framework children share: importing the framework of an extra, and
turning a framework's final output into the child's result text.

Each framework child lives in a module of its own (``pydantic_ai``,
``openai_agents``, ``claude_agent``, ``langgraph``), as pydantic-ai keeps one
module per provider, and imports its framework only when it is built.
"""

from __future__ import annotations

import dataclasses
import json
from types import ModuleType
from typing import Any

from lyra._extras import require


def framework(module: str, *, extra: str, child: str) -> ModuleType:
    """Import ``module`` for the framework child ``child``, or raise a
    ConfigurationError naming the extra to install."""
    return require(module, extra=extra, what=child)


def output_text(value: Any) -> str:
    """A framework's final output as the child's result text: a string as it is;
    structured output (a pydantic model, a dataclass, JSON data) serialised as JSON."""
    if isinstance(value, str):
        return value
    dump = getattr(value, "model_dump_json", None)
    if callable(dump):
        return str(dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.dumps(value, ensure_ascii=False, default=str)
