"""What every translation of a foreign error produces: a :class:`Cause`, and the
pieces the per-SDK tables share (HTTP statuses, ``retry-after``, a class table)."""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from lyra._taxonomy import ErrorType
from lyra._text import safe_str


class Kind(StrEnum):
    """What an exception means for the rule table (DESIGN §3, rules 3-10)."""

    INVALID_INPUT = "invalid_input"  # rule 3
    NOT_FOUND = "not_found"  # rule 4
    INCOMPLETE = "incomplete"  # rule 5 (even with no completed step)
    TRANSIENT = "transient"  # rule 6
    ENVIRONMENT = "environment"  # rule 7
    PERMANENT = "permanent"  # rule 8
    MALFORMED_TASK = "malformed_task"  # rule 9
    CONTEXT_OVERFLOW = "context_overflow"  # rule 9: the prompt is over the context window
    UNKNOWN = "unknown"  # rule 10
    BUDGET = "budget"  # rule 1: a framework's own usage, turn or time limit was reached
    OUTPUT_INVALID = "output_invalid"  # rule 5: the framework rejected the output as done


@dataclass(frozen=True, slots=True)
class Cause:
    """An exception reduced to what classification needs."""

    kind: Kind
    error_type: ErrorType
    source: str
    """Where the mapping came from, in words (becomes part of ``evidence``)."""
    retry_after: float | None = None


Table = Mapping[str, tuple[Kind, ErrorType]]
"""Exception classes of one SDK by name, each with what it means."""


def nearest(exc: BaseException, table: Table) -> str | None:
    """The name of the nearest class in ``exc``'s MRO that ``table`` maps."""
    return next((cls.__name__ for cls in type(exc).__mro__ if cls.__name__ in table), None)


def from_table(exc: BaseException, table: Table, sdk: str) -> Cause | None:
    """The mapping of the nearest class in ``exc``'s MRO that ``table`` names
    (``None``: no class of it is in the table)."""
    name = nearest(exc, table)
    if name is None:
        return None
    kind, error_type = table[name]
    source, status = f"{sdk}.{type(exc).__name__}", status_of(getattr(exc, "status_code", None))
    if error_type is ErrorType.UNKNOWN and status is not None:
        # A class that stands for several statuses (a 409, a 5xx) says which: the
        # evidence names it, and a 529 (an overload) is a rate limit whatever the class.
        overload = from_status(status, source, retry_after_of(exc))
        if overload.error_type is ErrorType.RATE_LIMIT:
            return overload
        source = overload.source
    return Cause(kind, error_type, source, retry_after_of(exc))


def by_status(
    exc: BaseException,
    table: Table,
    generic: Collection[str],
    sdk: str,
    retry_after: float | None = None,
) -> Cause | None:
    """The cause ``exc``'s HTTP status code gives, when the nearest class the table maps
    is one of ``generic`` (a class that stands for many statuses); else None.
    ``retry_after`` is the SDK's own figure, where it gives one instead of headers."""
    status = status_of(getattr(exc, "status_code", None))
    if status is None or nearest(exc, table) not in generic:
        return None
    wait = retry_after if retry_after is not None else retry_after_of(exc)
    return from_status(status, f"{sdk}.{type(exc).__name__}", wait)


def unmapped(exc: BaseException, sdk: str) -> Cause:
    """Rule 10 for a class of a known SDK that no table names (a new release)."""
    return Cause(Kind.UNKNOWN, ErrorType.UNKNOWN, f"{sdk}.{type(exc).__name__} (unmapped)")


def from_status(status: int, source: str, retry_after: float | None = None) -> Cause:
    """Translate an HTTP status code (of a data source or an API) to a cause."""
    where = f"{source}, HTTP {status}" if "HTTP" not in source else source
    if status in (401, 402, 403):
        return Cause(Kind.PERMANENT, ErrorType.AUTH, where)
    if status in (404, 410):
        return Cause(Kind.NOT_FOUND, ErrorType.NOT_FOUND, where)
    if status in (429, 529):
        return Cause(Kind.TRANSIENT, ErrorType.RATE_LIMIT, where, retry_after)
    if status in (408, 504):
        return Cause(Kind.TRANSIENT, ErrorType.TIMEOUT, where, retry_after)
    if status in (409, 425) or (500 <= status < 600 and status != 501):
        return Cause(Kind.TRANSIENT, ErrorType.UNKNOWN, where, retry_after)
    if status in (400, 413, 414, 422, 431):
        return Cause(Kind.MALFORMED_TASK, ErrorType.DATA, where)
    return Cause(Kind.UNKNOWN, ErrorType.UNKNOWN, where)


_OVERFLOW_PHRASES = (
    "prompt is too long",  # Anthropic's Messages API, the Claude Code CLI
    "context_length_exceeded",  # OpenAI's error code
    "maximum context length",  # OpenAI's message
    "exceed context limit",  # Anthropic: input plus max_tokens
    "exceeds the context window",
    "context window exceeded",
    "exceeds the maximum number of tokens allowed",  # Gemini: "The input token count (N)
    # exceeds the maximum number of tokens allowed (M)", or without its first clause
    "too many tokens",
)
"""How providers and their framework wrappers say a prompt is over the context window."""


def overflowed(exc: BaseException) -> bool:
    """True when ``exc`` says the prompt was longer than the model's context window
    (a 400 of any provider, or its framework's wrapper of one)."""
    parts = [getattr(exc, "code", None), getattr(exc, "body", None), exc]
    text = " ".join(safe_str(part) for part in parts if part is not None).lower()
    return any(phrase in text for phrase in _OVERFLOW_PHRASES)


def status_of(value: object) -> int | None:
    """An HTTP status code, if ``value`` is one."""
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
        return value
    return None


def retry_after_of(exc: BaseException) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` on an error's response."""
    return retry_after_in(getattr(getattr(exc, "response", None), "headers", None))


def retry_after_in(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` in response headers (any mapping
    with ``get``: httpx's, requests', an ``email.message.Message`` of urllib's)."""
    if headers is None:
        return None
    try:
        millis = parse_retry_after(headers.get("retry-after-ms"))
        if millis is not None:
            return millis / 1000
        return parse_retry_after(headers.get("retry-after"))
    except (AttributeError, TypeError):  # headers of an unexpected shape
        return None


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``retry-after`` value (delta-seconds or an HTTP date);
    ``None`` for a missing, malformed, infinite or NaN value."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())
    return max(0.0, seconds) if math.isfinite(seconds) else None


def seconds(value: object) -> float | None:
    """A wait in seconds from whatever a child put there; ``None`` if it is no wait."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        wait = float(value)
        return wait if math.isfinite(wait) and wait >= 0 else None
    if isinstance(value, str):
        return parse_retry_after(value)
    return None
