"""A real webhook endpoint for the notification tests: an HTTP server on 127.0.0.1 that the
tests start and stop (the `server` fixture yields its base URL and its `Hook`).

The server records every request; paths choose its behaviour (`/ok`, `/fail/N/...` fails N
times with 500 first, `/status/CODE`, `/redirect`, `/hang` waits until the test releases it,
`/slow` answers after 0.1 s, `/stall` answers 200 with its headers and then stalls in a body it
never sends until the test releases it, `/gate` answers 400 while `hook.gate_closed` is set, 200 once it
is cleared, `/after/CODE/VALUE/N/...` answers CODE with the header `Retry-After: VALUE` (VALUE
URL-quoted) N times, then 200).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from urllib.parse import unquote, urlsplit

import pytest

# How often a test server's loop looks for `shutdown()` (http.server's default, 0.5 s, made
# every test that stops one wait that long).
POLL_S = 0.02


class Hook:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.failures: dict[str, int] = {}
        self.release = threading.Event()
        self.gate_closed = threading.Event()
        self.lock = threading.Lock()

    def received(self, prefix: str) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["path"].startswith(prefix)]

    def accepted(self, prefix: str) -> list[Any]:
        """The JSON bodies of the requests to `prefix` that were answered 2xx."""
        return [strict(r["body"]) for r in self.received(prefix)
                if r["code"] is not None and 200 <= r["code"] < 300]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        hook: Hook = self.server.hook  # type: ignore[attr-defined]
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        path = urlsplit(self.path).path
        entry = {"path": path, "body": body, "at": time.monotonic(),
                 "type": self.headers.get("Content-Type"), "code": None}
        with hook.lock:
            hook.requests.append(entry)
        code, headers = 200, {}
        if path.startswith("/hang"):
            hook.release.wait(60)
        elif path.startswith("/slow"):
            time.sleep(0.1)
        elif path.startswith("/fail/"):
            n = int(path.split("/")[2])
            with hook.lock:
                done = hook.failures.get(path, 0)
                hook.failures[path] = done + 1
            code = 500 if done < n else 200
        elif path.startswith("/gate"):
            code = 400 if hook.gate_closed.is_set() else 200
        elif path.startswith("/status/"):
            code = int(path.split("/")[2])
        elif path.startswith("/after/"):
            _, _, status, value, n, *_ = path.split("/")
            with hook.lock:
                done = hook.failures.get(path, 0)
                hook.failures[path] = done + 1
            if done < int(n):
                code, headers = int(status), {"Retry-After": unquote(value)}
        elif path.startswith("/stall"):
            entry["code"] = 200
            try:
                self.send_response(200)
                self.send_header("Content-Length", "10")  # and never sends them
                self.end_headers()
                self.wfile.flush()
            except OSError:
                return
            hook.release.wait(60)
            return
        elif path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "/ok/redirected")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        entry["code"] = code
        try:
            self.send_response(code)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()
        except OSError:
            pass  # the client gave up (a timeout test)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, Hook]]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    hook = Hook()
    httpd.hook = hook  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, args=(POLL_S,), daemon=True)
    thread.start()
    host, port = httpd.server_address[:2]
    try:
        yield f"http://{host}:{port}", hook
    finally:
        hook.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def wait_for(cond: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return bool(cond())


def strict(body: bytes) -> Any:
    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")
    return json.loads(body, parse_constant=refuse)


