"""The Claude Agent SDK's exceptions (``claude_agent_sdk``).

A test walks the installed framework's exception classes and fails on one
that is not mapped here, so a new release cannot slip past. The framework is
never imported: classes are recognised by module and class name.
"""

from __future__ import annotations

from lyra._taxonomy import ErrorType
from lyra.delegation._foreign._cause import Cause, Kind, from_table, unmapped

_K, _E = Kind, ErrorType

CLAUDE_AGENT_ERRORS: dict[str, tuple[Kind, ErrorType]] = {}


def describe_claude_agent(exc: BaseException) -> Cause:
    """An exception of ``claude_agent_sdk``."""
    sdk = "claude_agent_sdk"
    return from_table(exc, CLAUDE_AGENT_ERRORS, sdk) or unmapped(exc, sdk)
