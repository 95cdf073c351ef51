"""The one place that knows lyra's distribution name and its optional extras.

The import name is ``lyra``; the name on the package index is
``lyra-supervisor`` (``lyra`` there is an unrelated project), so every hint to
install something says ``pip install 'lyra-supervisor[extra]'``.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from lyra.errors import ConfigurationError

DISTRIBUTION = "lyra-supervisor"
"""lyra's name on the package index."""


FRAMEWORK_CHILDREN = {
    "pydantic_ai": "lyra.children.pydantic_ai.PydanticAIChild",
    "agents": "lyra.children.openai_agents.OpenAIAgentsChild",
    "langgraph": "lyra.children.langgraph.LangGraphChild",
    "claude_agent_sdk": "lyra.children.claude_agent.ClaudeAgentChild",
}
"""The framework child for the objects of each framework's top-level package."""


def framework_child_for(value: object) -> str | None:
    """The framework child that wraps ``value``, an object of an agent framework
    (a pydantic-ai or OpenAI Agents ``Agent``, a LangGraph graph, ...); else None."""
    return FRAMEWORK_CHILDREN.get(type(value).__module__.partition(".")[0])


def install_hint(extra: str) -> str:
    """The command that installs ``extra``: ``pip install 'lyra-supervisor[extra]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def missing_extra(what: str, extra: str, missing: str | None = None) -> ConfigurationError:
    """The error for a feature whose extra is not installed, naming what to install."""
    detail = f" ({missing} is not installed)" if missing else ""
    return ConfigurationError(f"{what} needs the {extra} extra{detail}: {install_hint(extra)}")


def installed(module: str) -> bool:
    """True when ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module set to None, a broken package
        return False


def require(module: str, *, extra: str, what: str) -> ModuleType:
    """Import ``module`` of an optional extra, or raise a ConfigurationError naming
    the extra. Only a missing top-level package is the extra's fault: any other
    import error inside an installed package propagates as it is."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != module.partition(".")[0]:
            raise
        raise missing_extra(what, extra, module.partition(".")[0]) from None
