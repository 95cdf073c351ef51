"""Health probes: each dependency gets a short, bounded check before a run."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict

from lyra.delegation import exception_text, safe_str

Status = Literal["ok", "degraded", "down", "not_configured"]


class ServiceHealth(BaseModel):
    """One dependency's state when the run began."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str
    status: Status
    detail: str = ""
    latency_ms: float | None = None

    @property
    def healthy(self) -> bool:
        """True unless the service is degraded or down."""
        return self.status in ("ok", "not_configured")


async def probe(name: str, check: Callable[[], object], *, timeout: float = 2.0) -> ServiceHealth:
    """Run a blocking ``check`` in a thread, at most ``timeout`` seconds.

    A check that raises means ``down``; one that is slow means ``degraded``;
    a check returning a dict with an ``error`` key is ``degraded`` too.
    """
    started = time.perf_counter()
    result: object = None
    try:
        with anyio.fail_after(timeout):
            result = await anyio.to_thread.run_sync(check, abandon_on_cancel=True)
    except TimeoutError:
        return ServiceHealth(name=name, status="degraded", detail=f"no answer within {timeout:g}s")
    except Exception as exc:  # noqa: BLE001 - a probe reports, it never raises
        return ServiceHealth(name=name, status="down", detail=exception_text(exc))
    latency = round((time.perf_counter() - started) * 1000, 1)
    if isinstance(result, dict) and "error" in result:
        return ServiceHealth(
            name=name, status="degraded", detail=safe_str(result["error"]), latency_ms=latency
        )
    return ServiceHealth(name=name, status="ok", latency_ms=latency)
