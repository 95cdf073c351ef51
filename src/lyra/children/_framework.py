"""What the framework children share: importing the framework of an extra, and
turning a framework's final output into the child's result text.

Each framework child lives in a module of its own (``pydantic_ai``,
``openai_agents``, ``claude_agent``, ``langgraph``), as pydantic-ai keeps one
module per provider, and imports its framework only when it is built.
"""

from __future__ import annotations

import dataclasses
import json
import reprlib
from types import ModuleType
from typing import Any

from lyra._extras import framework_child_for, require


def framework(module: str, *, extra: str, child: str) -> ModuleType:
    """Import ``module`` for the framework child ``child``, or raise a
    ConfigurationError naming the extra to install."""
    return require(module, extra=extra, what=child)


def check_wraps(value: Any, kind: type | tuple[type, ...], *, child: str, what: str) -> None:
    """Raise a TypeError unless ``value`` is a ``kind``: at construction, not at the
    first run. Another framework's agent names the child that wraps it."""
    if isinstance(value, kind):
        return
    kind = type(value)
    got = f"a {kind.__module__}.{kind.__qualname__}"
    if kind.__module__ == "builtins":
        got = reprlib.repr(value)
    wrapper = (framework_child_for(value) or "").rpartition(".")[2]
    hint = f" (for that, use {wrapper})" if wrapper and wrapper != child else ""
    if hasattr(value, "compile") and child == "LangGraphChild":
        hint = ": call its .compile() first"
    raise TypeError(f"{child} wraps {what}; got {got}{hint}")


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
