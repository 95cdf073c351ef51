"""From the strings a reader found to a :class:`TaskReport`.

Numbers, the two enumerations and nested failures are checked here, and an
impossible value raises :class:`~lyra.errors.ReportParseError` (nothing else).
Every field is then checked or a string, so the model is built without
validating it again: ``BaseModel.model_construct`` would cost more than
validation itself.
"""

from __future__ import annotations

import math
from typing import Any

from lyra._taxonomy import ErrorType, FailureCategory
from lyra.delegation._models import FailedDelegation, TaskReport, assembled, timed
from lyra.errors import ReportParseError

CATEGORIES = {str(category): category for category in FailureCategory}
ERROR_TYPES = {str(error_type): error_type for error_type in ErrorType}
DEFAULTS = {name: field.get_default() for name, field in TaskReport.model_fields.items()}
"""Every field's default, in the model's order."""
EVERY_FIELD = set(DEFAULTS)
"""The fields set of every parsed report (the parser gives every field), one set
for all of them: pydantic never changes a frozen model's set in place
(``model_copy`` copies it first), and this one is 1.2 KB, more than the values."""


def to_int(value: str, what: str) -> int:
    """A count (tokens, turns, an attempt's number): a whole number, 0 or more (the
    attempt's, 1 or more)."""
    try:
        number = int(value)
    except ValueError:
        raise ReportParseError(f"{what} is not a whole number: {value!r}") from None
    if number < (1 if what == "attempt" else 0):
        raise ReportParseError(f"{what} cannot be {number}")
    return number


def to_float(value: str, what: str) -> float:
    """A measure (seconds, dollars): a finite number, 0 or more."""
    try:
        number = float(value)
    except ValueError:
        raise ReportParseError(f"{what} is not a number: {value!r}") from None
    if not 0 <= number < math.inf:  # (NaN too: no comparison holds)
        raise ReportParseError(f"{what} cannot be {value.strip()}")
    return number


def member(members: dict[str, Any], value: str, what: str) -> Any:
    """The category or error type named ``value``."""
    found = members.get(value)
    if found is None:
        raise ReportParseError(f"malformed report: {what} {value!r} is not one lyra knows")
    return found


def failed_delegation(value: str) -> FailedDelegation:
    """One ``<failed_delegation>`` value: ``session_id category error_type``."""
    session_id, _, rest = value.rpartition(" ")
    session_id, _, category = session_id.rpartition(" ")
    try:
        return FailedDelegation(session_id=session_id, category=category, error_type=rest)
    except ValueError:  # pydantic's ValidationError: an impossible value
        raise ReportParseError(f"malformed failed_delegation tag: {value!r}") from None


def report(fields: dict[str, Any]) -> TaskReport:
    """A report of values already checked, the others left at their defaults."""
    values = {**DEFAULTS, **fields}
    values["duration"] = timed(values["status"], values["duration"])
    return built(values)


def built(values: dict[str, Any]) -> TaskReport:
    """A report of every field's value, in the model's order; the parser gives
    every field, so every field counts as set."""
    return assembled(TaskReport, values, EVERY_FIELD)
