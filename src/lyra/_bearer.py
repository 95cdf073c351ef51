"""The one check of an ``Authorization: Bearer <token>`` header, for every server
lyra runs over HTTP (``lyra mcp --http``, ``lyra a2a``)."""

from __future__ import annotations

import hmac


def bearer_matches(header: str | bytes, token: bytes) -> bool:
    """True when ``header`` (an ``Authorization`` value) carries ``token``: the scheme
    in any case (RFC 7235), the token compared in constant time."""
    text = header.decode("latin-1") if isinstance(header, bytes) else header
    scheme, _, given = text.strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode("latin-1", "replace"), token
    )
