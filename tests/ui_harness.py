"""A real `runstore ui` server process and a real headless Chromium, for tests and screenshots.

`UiServer(store, ...)` starts `python -m runstore --store STORE ui --port 0 ...` as a child
process, reads the URL it prints, and stops it by its PID (SIGTERM, then SIGKILL after a
grace period). `chromium_context(tmp)` is a Playwright persistent context on Debian's
/usr/bin/chromium with a fresh user-data dir (Playwright's own browser downloads do not work
offline). Both only ever talk to 127.0.0.1.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
URL_LINE = re.compile(r"runstore ui: serving .* at (http://\S+)")


class UiServer:
    """`runstore ui` in a child process (in `cwd`, where a runstore.toml may be); `.url`
    (without token), `.token`, `.pid`."""

    def __init__(self, store: Path | str, *args: str, env: dict[str, str] | None = None,
                 timeout: float = 60.0, cwd: Path | str | None = None):
        cmd = [sys.executable, "-m", "runstore", "--store", str(store), "ui", "--port", "0",
               *args]
        full_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=full_env, text=True, cwd=cwd)
        self.pid = self.proc.pid
        self.output: list[str] = []
        deadline = time.monotonic() + timeout
        found = None
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    break
                self.output.append(line)
                m = URL_LINE.search(line)
                if m:
                    found = m.group(1)
                    break
            elif self.proc.poll() is not None:
                break
        if found is None:
            # stop() reads what is left of both pipes and closes them: its answer is the
            # message (reading stderr after it raised "I/O operation on closed file" and hid
            # why the server did not start).
            out, err = self.stop()
            raise RuntimeError(f"runstore ui did not start within {timeout:g} s (exit status "
                               f"{self.proc.returncode}): {out}{err}")
        self.printed_url = found
        token = re.search(r"[?&]token=([^&\s]+)", found)
        self.token = token.group(1) if token else None
        self.url = found.split("?")[0].rstrip("/")
        self.port = int(self.url.rsplit(":", 1)[1])

    def stop(self) -> tuple[str, str]:
        """Stop the process by PID; returns what it wrote (stdout, stderr)."""
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        out, err = self.proc.communicate()
        return "".join(self.output) + (out or ""), err or ""

    def __enter__(self) -> "UiServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def have_chromium() -> bool:
    try:
        import playwright  # noqa: F401
    except ImportError:
        return False
    return Path(CHROMIUM).exists()


@contextmanager
def chromium_context(user_data: Path | None = None, *,
                     viewport: tuple[int, int] = (1440, 900)) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    data_dir = Path(user_data) if user_data else Path(tempfile.mkdtemp(prefix="runstore-ui-"))
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(data_dir), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": viewport[0], "height": viewport[1]}, accept_downloads=True)
        try:
            yield ctx
        finally:
            ctx.close()


def wait_ready(page: Any, name: str, timeout: float = 20_000) -> None:
    """Wait until the page frame says page `name` finished its first draw."""
    # A selector, not wait_for_function: that evaluates a string, which the page's CSP
    # (no 'unsafe-eval') rightly refuses.
    page.wait_for_selector(f'body[data-ready="{name}"]', state="attached", timeout=timeout)


def open_page(ctx: Any, url: str, name: str, errors: list[str] | None = None) -> Any:
    page = ctx.new_page()
    if errors is not None:
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    wait_ready(page, name)
    return page


def args_for(paths: Sequence[str | Path]) -> list[str]:
    return [str(p) for p in paths]


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        import json

        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def http(base: str, method: str, path: str, *, body: Any = None,
         headers: dict[str, str] | None = None, timeout: float = 60.0) -> Reply:
    """One request with http.client: the path is sent exactly as given (no normalising), and
    a Host header in `headers` replaces the default one."""
    import http.client
    import json
    from urllib.parse import urlsplit

    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    hdrs = dict(headers or {})
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    skip_host = any(k.lower() == "host" for k in hdrs)
    conn.putrequest(method, path, skip_host=skip_host, skip_accept_encoding=True)
    for k, v in hdrs.items():
        conn.putheader(k, v)
    if data is not None:
        conn.putheader("Content-Length", str(len(data)))
    conn.endheaders(data)
    resp = conn.getresponse()
    out = Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    conn.close()
    return out
