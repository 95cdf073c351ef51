"""The limits of a delegation as one value (DESIGN §12)."""

from __future__ import annotations

import math
import reprlib
from dataclasses import dataclass
from typing import Any

from lyra.delegation._budget import Budget, checked_budget

DEFAULT_TIMEOUT = 300.0
DEFAULT_MAX_REPEATS = 10
"""Identical tool calls (same tool, same arguments) an attempt may make before the
next one ends it as a loop: a polling tool rarely needs more, and a looping agent
makes thousands (DESIGN §3)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What bounds one delegation: ``timeout`` (seconds, in total), ``idle_timeout``
    (seconds without progress; ``None``: none), ``budget`` (tokens, cost, turns and
    tool calls, shared by the whole tree below it; ``None``: none) and
    ``max_repeats`` (identical tool calls before the attempt ends as a loop;
    ``None``: no limit). An ``idle_timeout`` at or past ``timeout`` never fires (the
    deadline comes first); it is accepted, since a supervisor's idle timeout applies to
    calls whose timeouts differ.

    The public functions take these as keywords (``timeout=``, ``idle_timeout=``,
    ``budget=``, ``max_repeats=``) and make one ``Limits``; it travels as one value
    through recovery, the supervisor and durable runs. Checked when made: a clear
    error for a caller's mistake.
    """

    timeout: float = DEFAULT_TIMEOUT
    idle_timeout: float | None = None
    budget: Budget | None = None
    max_repeats: int | None = DEFAULT_MAX_REPEATS

    def __post_init__(self) -> None:
        _set = object.__setattr__
        _set(self, "timeout", check_timeout(self.timeout))
        if self.idle_timeout is not None:
            _set(self, "idle_timeout", check_timeout(self.idle_timeout, "idle_timeout"))
        checked_budget(self.budget)
        if self.max_repeats is not None:
            check_max_repeats(self.max_repeats)

    def but(
        self,
        *,
        timeout: float | None = None,
        idle_timeout: float | None = None,
        budget: Budget | None = None,
        max_repeats: int | None = None,
    ) -> Limits:
        """These limits with the changes given (a ``None`` leaves a field as it is, and so
        does the value it already has: a supervisor's every call passes its timeout)."""
        # (not dataclasses.replace: a supervisor makes one per delegation, and replace
        # looks its fields up each time, a tenth of a trivial delegation)
        new = (
            _changed(self.timeout, timeout),
            _changed(self.idle_timeout, idle_timeout),
            _changed(self.budget, budget),
            _changed(self.max_repeats, max_repeats),
        )
        if new == (self.timeout, self.idle_timeout, self.budget, self.max_repeats):
            return self
        return Limits(*new)


def _changed(old: Any, new: Any) -> Any:
    """A field's value after a change (``None``, or the value it has: no change)."""
    return old if new is None or new == old else new


def check_timeout(timeout: float, what: str = "timeout") -> float:
    """The timeout as a float, or a clear error for a caller's mistake."""
    # (a tuple, not int | float: that union would be built on every delegation)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(timeout).__name__}")
    try:
        seconds = float(timeout)
    except OverflowError:  # (an int past what a float holds: 10**400)
        seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(
            f"{what} must be a positive number of seconds, not {reprlib.repr(timeout)}"
        )
    return seconds


def check_max_repeats(value: object) -> int:
    """``max_repeats`` as given, or a clear error."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_repeats must be a whole number ≥ 1 (or None), not {value!r}")
    return value
