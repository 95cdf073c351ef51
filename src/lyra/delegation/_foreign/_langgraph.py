"""LangGraph's and langchain-core's exceptions (``langgraph.errors``, ``langchain_core``).

A test walks the installed framework's exception classes and fails on one
that is not mapped here, so a new release cannot slip past. The framework is
never imported: classes are recognised by module and class name.
"""

from __future__ import annotations

from lyra._taxonomy import ErrorType
from lyra.delegation._foreign._cause import Cause, Kind, from_table, unmapped

_K, _E = Kind, ErrorType

LANGGRAPH_ERRORS: dict[str, tuple[Kind, ErrorType]] = {}


def describe_langgraph(exc: BaseException) -> Cause:
    """An exception of ``langgraph``."""
    return from_table(exc, LANGGRAPH_ERRORS, "langgraph") or unmapped(exc, "langgraph")
