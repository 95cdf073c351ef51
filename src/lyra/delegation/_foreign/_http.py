"""The exceptions of HTTP clients a tool may call a service with: httpx, requests
and the standard library's ``urllib``. A status is read as any service's
(:func:`~._cause.from_status`, ``retry-after`` honoured); a connection that failed is
rule 6, an address that can never work rule 3. Classes are recognised by name: no
client is imported."""

from __future__ import annotations

from typing import Any

from lyra._taxonomy import ErrorType
from lyra.delegation._foreign._cause import Cause, Kind, from_status, retry_after_in, status_of

_K, _E = Kind, ErrorType

_REQUESTS_BY_NAME: tuple[tuple[str, Kind, ErrorType], ...] = (
    # (the first a class's MRO names wins: ConnectTimeout is a Timeout and a ConnectionError)
    ("Timeout", _K.TRANSIENT, _E.TIMEOUT),
    ("ConnectionError", _K.TRANSIENT, _E.CONNECTION),  # refused, reset, DNS, TLS, proxy
    ("ChunkedEncodingError", _K.TRANSIENT, _E.CONNECTION),  # the body broke off
    ("ContentDecodingError", _K.TRANSIENT, _E.CONNECTION),
    ("RetryError", _K.TRANSIENT, _E.UNKNOWN),  # urllib3's retries ran out
    # An address or header that can never work: the input is wrong, not the service.
    ("MissingSchema", _K.INVALID_INPUT, _E.DATA),
    ("InvalidSchema", _K.INVALID_INPUT, _E.DATA),
    ("InvalidURL", _K.INVALID_INPUT, _E.DATA),
    ("InvalidHeader", _K.INVALID_INPUT, _E.DATA),
    ("URLRequired", _K.INVALID_INPUT, _E.DATA),
    ("TooManyRedirects", _K.PERMANENT, _E.UNKNOWN),  # a redirect loop: retrying loops again
)


def describe_httpx(exc: BaseException) -> Cause:
    """An ``httpx`` error: a status by its status, a timeout or a transport error rule 6."""
    names = _names(exc)
    source = _source(exc)
    if "HTTPStatusError" in names:
        response = getattr(exc, "response", None)
        return _status(response, source)
    if "TimeoutException" in names:
        return Cause(_K.TRANSIENT, _E.TIMEOUT, source)
    if "TransportError" in names:
        return Cause(_K.TRANSIENT, _E.CONNECTION, source)
    return Cause(_K.UNKNOWN, _E.UNKNOWN, source)


def describe_requests(exc: BaseException) -> Cause:
    """A ``requests`` error (``raise_for_status()``'s ``HTTPError`` by its response)."""
    names = _names(exc)
    source = _source(exc)
    response = getattr(exc, "response", None)
    if "HTTPError" in names and response is not None:
        return _status(response, source)
    for name, kind, error_type in _REQUESTS_BY_NAME:
        if name in names:
            return Cause(kind, error_type, source)
    return Cause(_K.UNKNOWN, _E.UNKNOWN, source)


def describe_urllib(exc: BaseException) -> Cause:
    """A ``urllib.error`` error: ``HTTPError`` by its code; ``URLError`` by its reason (a
    timeout, else a connection that failed)."""
    names = _names(exc)
    source = _source(exc)
    if "HTTPError" in names:
        status = status_of(getattr(exc, "code", None))
        if status is not None:
            return from_status(status, source, retry_after_in(getattr(exc, "headers", None)))
    if "ContentTooShortError" in names:
        return Cause(_K.TRANSIENT, _E.CONNECTION, source)
    reason = getattr(exc, "reason", None)
    if isinstance(reason, TimeoutError):
        return Cause(_K.TRANSIENT, _E.TIMEOUT, source)
    if isinstance(reason, OSError):  # refused, reset, a name that did not resolve
        return Cause(_K.TRANSIENT, _E.CONNECTION, source)
    return Cause(_K.UNKNOWN, _E.UNKNOWN, source)  # ("unknown url type", …)


def _status(response: Any, source: str) -> Cause:
    status = status_of(getattr(response, "status_code", None))
    if status is None:
        return Cause(_K.UNKNOWN, _E.UNKNOWN, source)
    return from_status(status, source, retry_after_in(getattr(response, "headers", None)))


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _source(exc: BaseException) -> str:
    return f"{type(exc).__module__.partition('.')[0]}.{type(exc).__name__}"
