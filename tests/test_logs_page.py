"""The dashboard of a real run, looked at in headless Chromium.

``lyra analyze`` runs in-process with an injected fault, ``lyra logs report``
draws its page, and Chromium takes a screenshot, which must show something: a
PNG that is not one colour. Skipped when Chromium is not installed (``.ci/run``
installs it from Debian's packages when it can).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
import structlog

from lyra.cli import main
from lyra.recovery import record_waits

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WINDOW = (1200, 1600)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page of a run: P04637 completes, XXXXX does not exist, Q8I3H7 fails twice."""
    folder = tmp_path_factory.mktemp("dashboard")
    run = folder / "run"
    argv = ["analyze", "P04637", "XXXXX", "Q8I3H7", "--inject", "Q8I3H7:structure_error"]
    try:
        with record_waits():
            assert main([*argv, "--retries", "1", "--run-dir", str(run)]) == 1
    finally:
        structlog.reset_defaults()
    out = folder / "dashboard.html"
    assert main(["logs", "report", str(run), "--html", str(out)]) == 0
    return out


def screenshot(page: Path, png: Path, profile: Path) -> subprocess.CompletedProcess[str]:
    """Chromium, headless and offline, draws ``page`` into ``png``."""
    assert CHROMIUM is not None
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--screenshot={png}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        page.as_uri(),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def png_rows(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the (filtered) pixel rows of a PNG, checked chunk by chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, idat, header = 8, b"", b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in {kind!r}"
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour]
    stride = 1 + width * channels * depth // 8  # a filter byte, then the row
    pixels = zlib.decompress(idat)
    assert len(pixels) == stride * height, "the image data does not fill the image"
    return width, height, [pixels[i : i + stride] for i in range(0, len(pixels), stride)]


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
def test_the_dashboard_draws_something_in_chromium(page: Path, tmp_path: Path) -> None:
    """Headless Chromium renders the page of a real run into a screenshot that is no
    single colour: the page loads offline and draws its tables and charts."""
    png = tmp_path / "dashboard.png"
    done = screenshot(page, png, tmp_path / "profile")
    assert png.exists(), f"no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    width, height, rows = png_rows(png.read_bytes())
    assert (width, height) == WINDOW
    # One colour leaves at most two distinct filtered rows (the first, then the rest):
    # text, tables and bars leave hundreds.
    assert len(set(rows)) > 200


def test_a_single_colour_png_is_told_apart() -> None:
    """The check above can fail: a blank image has almost no distinct rows."""
    width, height = 40, 30
    blank = b"".join(b"\x00" + b"\xff" * width * 3 for _ in range(height))
    chunks = [(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))]
    chunks += [(b"IDAT", zlib.compress(blank)), (b"IEND", b"")]
    data = b"\x89PNG\r\n\x1a\n" + b"".join(
        struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        for kind, body in chunks
    )
    assert png_rows(data)[:2] == (width, height)
    assert len(set(png_rows(data)[2])) == 1
