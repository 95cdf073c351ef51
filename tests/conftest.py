"""Test-wide guards: no network, no real model, no configured default child; and the
protein data build script, loaded as a module for the tests that call its readers."""

from __future__ import annotations

import importlib.util
import ipaddress
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import structlog

import lyra.events


def _is_local(address: Any) -> bool:
    if isinstance(address, str):  # AF_UNIX path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _guarded(real: Any) -> Any:
    def connect(self: socket.socket, address: Any) -> Any:
        if not _is_local(address):
            raise ConnectionRefusedError(f"tests may not touch the network (tried {address!r})")
        return real(self, address)

    return connect


@pytest.fixture(autouse=True, scope="session")
def _no_network() -> Iterator[None]:
    """Refuse every connection that does not stay on this machine (so no test
    can reach a real model endpoint or data service, or spend money)."""
    socket.socket.connect = _guarded(_real_connect)  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded(_real_connect_ex)  # type: ignore[method-assign]
    yield
    socket.socket.connect = _real_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _real_connect_ex  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl+C reaches the processes the tests start, however pytest was started: a shell
    that runs a command in the background without job control makes it ignore SIGINT,
    which every process it starts inherits, so lyra's Ctrl+C tests would see nothing
    happen. A handler of ours (unlike an ignored signal) is reset to the default in a
    child, where Python turns it into KeyboardInterrupt."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No real API key, no child choice; lyra's events routed into a silent structlog,
    so that ``structlog.testing.capture_logs()`` sees them."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "LYRA_CHILD", "LYRA_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # a refused local port
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    lyra.events.configure(structlog=True)
    yield
    lyra.events.configure()
    structlog.reset_defaults()


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (lyra targets anyio; asyncio is what users run)."""
    return "asyncio"


@pytest.fixture(scope="session")
def build_script() -> ModuleType:
    """``scripts/build_protein_data.py`` as a module (it is a script, not a package)."""
    path = Path(__file__).resolve().parents[1] / "scripts" / "build_protein_data.py"
    spec = importlib.util.spec_from_file_location("build_data", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_data"] = module
    spec.loader.exec_module(module)
    return module
