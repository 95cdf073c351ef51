"""The openai SDK's exceptions (the OpenAI Agents SDK's models, LangGraph's OpenAI chat models).

A test walks the installed framework's exception classes and fails on one
that is not mapped here, so a new release cannot slip past. The framework is
never imported: classes are recognised by module and class name.
"""

from __future__ import annotations

from lyra._taxonomy import ErrorType
from lyra.delegation._foreign._cause import Cause, Kind, from_table, unmapped

_K, _E = Kind, ErrorType

OPENAI_ERRORS: dict[str, tuple[Kind, ErrorType]] = {}


def describe_openai(exc: BaseException) -> Cause:
    """An exception of ``openai``."""
    return from_table(exc, OPENAI_ERRORS, "openai") or unmapped(exc, "openai")
