"""Headless Chromium for the tests and the doc screenshots: find it, screenshot a page, read its DOM.

Contract: `find_chromium()` returns the path of a Chromium/Chrome binary
(`$RUNSTORE_CHROMIUM`, else the first on PATH) or None; `screenshot(page, png, width=,
height=)` renders a local HTML file headless into a PNG; `dump_dom(page)` returns the DOM
after the page's scripts ran and Chromium's log (console messages, uncaught errors). Both run
Chromium with a throw-away profile, no sandbox, no GPU and no background networking, and
raise `RuntimeError` with Chromium's stderr when it fails. Used by tests/present/test_charts.py and
tools/chart_screenshots.py; nothing of runstore's own needs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync",
                  "--hide-scrollbars", "--force-device-scale-factor=1")


def find_chromium() -> str | None:
    """`$RUNSTORE_CHROMIUM`, else the first Chromium/Chrome binary on PATH, else None."""
    explicit = os.environ.get("RUNSTORE_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    chromium = find_chromium()
    if chromium is None:
        raise RuntimeError("no Chromium found: install it (`apt-get install chromium`) or set "
                           "$RUNSTORE_CHROMIUM to its path")
    with tempfile.TemporaryDirectory(prefix="runstore-chromium-") as profile:
        cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited with {proc.returncode}: {proc.stderr[-2000:]}")
    return proc


def screenshot(page: str | Path, png: str | Path, *, width: int = 1000, height: int = 600,
               timeout: float = 120.0) -> Path:
    """Render the local HTML file `page` headless and write a `width`×`height` PNG."""
    out = Path(png).absolute()
    out.unlink(missing_ok=True)
    _run([f"--screenshot={out}", f"--window-size={width},{height}",
          "--virtual-time-budget=5000", Path(page).absolute().as_uri()], timeout)
    if not out.is_file():
        raise RuntimeError(f"chromium wrote no screenshot to {out}")
    return out


@dataclass(frozen=True)
class PageDump:
    dom: str  # the DOM once the page's scripts ran, as HTML text
    log: str  # Chromium's log: console messages and uncaught errors ("CONSOLE(...)")


def dump_dom(page: str | Path, *, timeout: float = 120.0) -> PageDump:
    """Load the local HTML file `page` headless; its DOM after the scripts ran, and the log."""
    proc = _run(["--dump-dom", "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0",
                 Path(page).absolute().as_uri()], timeout)
    return PageDump(proc.stdout, proc.stderr)
