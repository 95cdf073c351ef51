"""pydantic-ai's exceptions (``pydantic_ai.exceptions``).

A test walks the installed framework's exception classes and fails on one
that is not mapped here, so a new release cannot slip past. The framework is
never imported: classes are recognised by module and class name.
"""

from __future__ import annotations

from lyra._taxonomy import ErrorType
from lyra.delegation._foreign._cause import Cause, Kind, from_table, unmapped

_K, _E = Kind, ErrorType

PYDANTIC_AI_ERRORS: dict[str, tuple[Kind, ErrorType]] = {}


def describe_pydantic_ai(exc: BaseException) -> Cause:
    """An exception of ``pydantic_ai``."""
    return from_table(exc, PYDANTIC_AI_ERRORS, "pydantic_ai") or unmapped(exc, "pydantic_ai")
