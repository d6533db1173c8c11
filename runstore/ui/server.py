"""`runstore ui`: bind, print the URL once, serve until Ctrl-C; optionally keep ingesting.

Contract: `serve(store, paths=..., watch=S, host=, port=, token=, sql_timeout=)` binds
`host:port` (port 0: any free port), prints one line `runstore ui: serving STORE at URL` on
stdout (with `?token=...` when a token is in force) and serves until SIGINT/SIGTERM, then
returns. The SQL page's queries stop after `sql_timeout` seconds (`api.SQL_TIMEOUT_S`
unless given), and run in worker processes capped at the store's memory limit (`Store(...,
memory_limit=)`). Connections are served by `transport.Protocol` (a header timeout); uvicorn
logs only errors, so nothing a client sends writes to the server's stderr.

* A loopback host (127.0.0.1, ::1, localhost) needs no token; a `token` given is still
  enforced. Any other host always has one: the given `token`, else a random one
  (`secrets.token_urlsafe`) that is printed once in that URL, as Jupyter does.
* With `watch`, a background thread runs `runstore.health.watch.Watcher` passes over `paths`
  every `watch` seconds (the same ingest and health check as `runstore ingest --watch`,
  whose alerts and reports are printed the same way); the pages learn of each new snapshot
  through `/api/events`. Without `watch` nothing writes the store: `paths` given without
  it are ingested once before serving, as `runstore ingest PATHS` would.
* Stopping ends the watch thread as Ctrl-C ends an ingest: a pass waiting for the store's
  lock stops waiting at once, an ingest under way stops at its next whole file and publishes
  what it read whole (no commit is cut short by the UI).
"""

from __future__ import annotations

import secrets
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..errors import UsageError
from .api import SQL_TIMEOUT_S
from .security import Policy, is_loopback
from .transport import Protocol

if TYPE_CHECKING:
    from ..store import Store

Echo = Callable[[str], None]


def _echo_err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _echo_out(text: str) -> None:
    print(text, flush=True)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (IPv6 when the host is one), or a UsageError."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise UsageError(f"cannot bind --host {host}: {e.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror}; pick another "
                         "--port (or --port 0 for any free one)") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_for(host: str, port: int, token: str | None) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    if shown in ("0.0.0.0", "[::]"):
        shown = socket.gethostname()
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


class WatchThread:
    """`--watch`: Watcher passes in a background thread; its state for `/api/status`."""

    def __init__(self, store: "Store", paths: Sequence[str], interval: float,
                 out: Echo = _echo_out, err: Echo = _echo_err):
        self.interval = interval
        self.paths = list(paths)
        self.stop = threading.Event()
        self.last_pass: float | None = None
        self.last_error: str | None = None
        self.passes = 0
        self.watcher = store.watcher(paths, check=True,
                                     on_alert=lambda alert: out(alert.text()),
                                     on_report=lambda report: err(report.summary()),
                                     on_warning=lambda text: err(f"warning: {text}"))
        self.thread = threading.Thread(target=self._loop, name="runstore-ui-watch", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                self.watcher.run_pass()
                self.last_error = None
            except KeyboardInterrupt:  # close() asked the pass to end
                return
            except self.watcher.TRANSIENT as e:
                self.last_error = str(e) or type(e).__name__
                _echo_err(f"warning: this pass failed, retrying in {self.interval:g} s: "
                          f"{self.last_error}")
            except Exception as e:  # a pass that can never succeed: say so, keep serving
                self.last_error = str(e) or type(e).__name__
                _echo_err(f"Error: --watch stopped: {self.last_error}")
                return
            self.passes += 1
            self.last_pass = time.time()
            self.stop.wait(max(self.interval - (time.monotonic() - started),
                               self.interval / 10))

    def close(self, timeout: float = 120.0) -> None:
        self.stop.set()
        self.watcher.request_stop()
        self.thread.join(timeout)

    def status(self) -> dict[str, Any]:
        return {"watch": {"paths": self.paths, "interval_s": self.interval,
                          "passes": self.passes, "last_pass": self.last_pass,
                          "last_error": self.last_error}}


def effective_token(host: str, token: str | None) -> str | None:
    """The token in force: the one given; else, off loopback, a fresh random one."""
    if token is not None and not token.strip():
        raise UsageError("--token is empty; give a token, or leave it out")
    if token is None and not is_loopback(host):
        return secrets.token_urlsafe(24)
    return token


def serve(store: "Store", *, paths: Sequence[str] = (), watch: float | None = None,
          host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
          sql_timeout: float | None = SQL_TIMEOUT_S, poll_s: float = 1.0,
          out: Echo = _echo_out, err: Echo = _echo_err) -> None:
    import uvicorn

    from .app import create_app

    token = effective_token(host, token)
    if paths and watch is None:
        report = store.ingest(list(paths), on_warning=lambda t: err(f"warning: {t}"))
        err(report.summary())
    if watch is None:
        store.manifest()  # no store (and no PATHS to make one): say so before binding
    elif not paths:
        raise UsageError("--watch needs PATHS to ingest, e.g. runstore ui runs/ --watch 30")
    sock = bind(host, port)
    bound_port = sock.getsockname()[1]
    watcher = WatchThread(store, paths, watch, out, err) if watch is not None else None
    policy = Policy(host=host, port=bound_port, token=token)
    app = create_app(store, policy, poll_s=poll_s, sql_timeout=sql_timeout,
                     status_extra=watcher.status if watcher else None)
    # Protocol: uvicorn's h11 protocol with a header timeout (ui/transport.py). Log level
    # "error": uvicorn warns on stderr of every malformed request it refuses (with a 400), so
    # any client could fill the server's terminal; an error (a fault of the server) still shows.
    config = uvicorn.Config(app, log_level="error", access_log=False, server_header=False,
                            lifespan="on", timeout_graceful_shutdown=3, http=Protocol)
    server = uvicorn.Server(config)
    out(f"runstore ui: serving {store.path} at {url_for(host, bound_port, token)}")
    if watcher is not None:
        out(f"runstore ui: ingesting {' '.join(map(str, paths))} every {watch:g} s")
        watcher.start()
    try:
        server.run(sockets=[sock])
    finally:
        if watcher is not None:
            watcher.close()
        sock.close()
