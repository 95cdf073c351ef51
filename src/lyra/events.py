"""lyra's events (DESIGN §8): the one place every module emits them.

Events are structlog events on the ``lyra`` logger, flat key/value fields.
lyra never configures logging; the command line (or your application) does.
"""

from __future__ import annotations

from typing import Any

import structlog

__all__ = ["error", "info", "warning"]

_log = structlog.get_logger("lyra")


def info(event: str, /, **fields: Any) -> None:
    """Emit an event at info level."""
    _log.info(event, **fields)


def warning(event: str, /, **fields: Any) -> None:
    """Emit an event at warning level (something degraded, the run goes on)."""
    _log.warning(event, **fields)


def error(event: str, /, **fields: Any) -> None:
    """Emit an event at error level (lyra's own bug, contained)."""
    _log.error(event, **fields)
