"""The one place that knows lyra's distribution name and its optional extras.

The import name is ``lyra``; the distribution is ``lyra-supervisor`` (``lyra``
on the package index is an unrelated project). lyra is not published yet: it is
installed from a checkout (``pip install -e '.[extra]'``) or a wheel built from
one, so no hint sends a user to the index for lyra itself. A hint names the
extra's own packages (on the index, with lyra's bounds: they install however
lyra was installed) and the checkout's form.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
import shlex
import sys
from types import ModuleType

from lyra.errors import ConfigurationError

DISTRIBUTION = "lyra-supervisor"
"""lyra's name on the package index."""


FRAMEWORK_CHILDREN: tuple[tuple[str, str, str], ...] = (
    ("pydantic_ai.agent", "AbstractAgent", "lyra.children.pydantic_ai.PydanticAIChild"),
    ("agents", "Agent", "lyra.children.openai_agents.OpenAIAgentsChild"),
    ("langgraph.pregel.protocol", "PregelProtocol", "lyra.children.langgraph.LangGraphChild"),
    ("langgraph.graph.state", "StateGraph", "lyra.children.langgraph.LangGraphChild"),
    ("claude_agent_sdk", "ClaudeAgentOptions", "lyra.children.claude_agent.ClaudeAgentChild"),
    ("google.adk.workflow", "BaseNode", "lyra.children.google_adk.GoogleADKChild"),
    ("google.adk.apps.app", "App", "lyra.children.google_adk.GoogleADKChild"),
)
"""Each framework's agent class (module, name) and the framework child that wraps it."""
_FRAMEWORK_PACKAGES = frozenset(module.partition(".")[0] for module, _, _ in FRAMEWORK_CHILDREN)


def framework_child_for(value: object) -> str | None:
    """The framework child that wraps ``value``, an agent of a framework (a
    pydantic-ai or OpenAI Agents ``Agent``, a LangGraph graph, ...); else None.
    Only a framework already imported is looked at: nothing is imported here."""
    if type(value).__module__.partition(".")[0] not in _FRAMEWORK_PACKAGES:
        return None  # the cheap test first: most objects are no framework's
    for module, name, child in FRAMEWORK_CHILDREN:
        kind = getattr(sys.modules.get(module), name, None)
        if isinstance(kind, type) and isinstance(value, kind):
            return child
    return None


_EXTRA_REQUIREMENT = re.compile(r"""^([^;]+);\s*extra\s*==\s*['"]([^'"]+)['"]\s*$""")


def install_hint(extra: str) -> str:
    """How to add ``extra``: ``pip install 'dbos<4,>=3.4' (or pip install -e
    '.[durable]' in a lyra checkout)``; the checkout's form alone when lyra's own
    metadata is not there to name the packages (run from a source tree)."""
    checkout = f"pip install -e '.[{extra}]' in a lyra checkout"
    packages = extra_requirements(extra)
    if not packages:
        return checkout
    return f"pip install {' '.join(map(shlex.quote, packages))} (or {checkout})"


def extra_requirements(extra: str) -> list[str]:
    """The requirements ``extra`` adds, from the installed distribution's metadata
    (empty when lyra is not installed as a distribution, or has no such extra)."""
    try:
        declared = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    found = (_EXTRA_REQUIREMENT.match(line) for line in declared)
    return [match[1].strip() for match in found if match and match[2] == extra]


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
