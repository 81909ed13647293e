"""Headless Chromium for tests of the HTML reports (`groupshift matrix`, `groupshift fleet`).

The reports are single self-contained files; a test proves they render by loading them in a real
browser and reading back the DOM after scripts ran, and keeps a screenshot as an artifact.
Chromium comes from Debian's `chromium` package (`.ci/run` installs it). On this network the
browser must not try to reach Google's services, so background networking, component updates,
sync and QUIC are switched off, and each run gets a fresh profile directory.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


class ChromiumMissing(RuntimeError):
    """No Chromium binary on PATH; tests skip with this message as the reason."""


def chromium() -> str:
    """The path of a Chromium binary, or raise ChromiumMissing naming what to install."""
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    raise ChromiumMissing("no chromium on PATH (Debian: apt-get install chromium)")


def _run(args: list[str], timeout: float) -> str:
    with tempfile.TemporaryDirectory(prefix="gs-chromium-") as profile:
        proc = subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout


def dump_dom(page: Path, *, budget_ms: int = 5000, timeout: float = 90.0) -> str:
    """The DOM of `page` after its scripts ran (up to `budget_ms` of virtual time)."""
    return _run([f"--virtual-time-budget={budget_ms}", "--dump-dom", page.resolve().as_uri()], timeout)


def screenshot(
    page: Path, out_png: Path, *, size: tuple[int, int] = (1400, 1000), timeout: float = 90.0
) -> Path:
    """Save a PNG of `page` as rendered, for a test artifact."""
    out_png.parent.mkdir(parents=True, exist_ok=True)
    _run(
        [
            f"--window-size={size[0]},{size[1]}",
            "--virtual-time-budget=5000",
            f"--screenshot={out_png.resolve()}",
            page.resolve().as_uri(),
        ],
        timeout,
    )
    if not out_png.exists() or out_png.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot to {out_png}")
    return out_png
