"""A TCP proxy on 127.0.0.1 in front of an S3 endpoint: what a distant region's round trips
cost, and what requests a command makes.

`HeldRequests(endpoint_url, hold, kind)` listens on a port of its own (`url`), passes every
connection on to the endpoint, and holds each request `hold` seconds before passing it on (the
first bytes a client sends after its last answer began: one wait per request, not per packet
of its body). For each kind of request (`kind(request_line)`, e.g. "GET", or the object it
asks for) it counts how many were made (`seen`) and the most that were in flight at once
(`most`: sent, and not yet answered). It is a context manager; leaving it (or `close`) stops
accepting and ends every connection. The S3 tests and bench/bench_s3.py's `--latency` use it.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Callable


class HeldRequests:
    """A proxy in front of an S3 endpoint that holds and counts requests (see the module)."""

    def __init__(self, endpoint_url: str, hold: float,
                 kind: Callable[[str], str] = lambda request_line: "any"):
        self.port = int(endpoint_url.rsplit(":", 1)[1])
        self.hold, self.kind = hold, kind
        self.lock = threading.Lock()
        self.now: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.seen: dict[str, int] = {}
        self.sockets: list[socket.socket] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> "HeldRequests":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting, and end every connection (the clients' pools may hold some)."""
        self.server.close()
        with self.lock:
            live = list(self.sockets)
        for s in live:
            _end(s)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.port))
            with self.lock:
                self.sockets += [client, upstream]
            asked: list[str | None] = [None]  # the kind of the request awaiting its answer
            for args in ((client, upstream, asked, True), (upstream, client, asked, False)):
                threading.Thread(target=self._pipe, args=args, daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, asked: list[str | None],
              requests: bool) -> None:
        try:
            while data := src.recv(1 << 16):
                if requests and asked[0] is None:  # the first bytes of a new request
                    kind = self.kind(data.split(b"\r\n", 1)[0].decode("latin-1"))
                    with self.lock:
                        self.now[kind] = self.now.get(kind, 0) + 1
                        self.most[kind] = max(self.most.get(kind, 0), self.now[kind])
                        self.seen[kind] = self.seen.get(kind, 0) + 1
                    asked[0] = kind
                    time.sleep(self.hold)
                elif not requests and asked[0] is not None:  # its answer begins
                    with self.lock:
                        self.now[asked[0]] -= 1
                    asked[0] = None
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _end(src)
            _end(dst)


def _end(s: socket.socket) -> None:
    """Shut `s` down (waking a thread reading it) and close it; already closed is fine."""
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
