"""How requests reach the web app: bounded in time and size, and well-formed before any route.

Contract:

* `Protocol` is uvicorn's h11 protocol with a header timeout: a connection must deliver a
  request's whole head (request line and headers) within `HEADER_TIMEOUT_S` of opening, or of
  the previous response ending (keep-alive); otherwise it gets `408` and is closed. uvicorn
  itself has no such timeout (its keep-alive timer stops at a connection's first byte), so
  a client that sends half a request would hold its connection open forever. h11 already
  refuses a head larger than 16 KB (`h11_max_incomplete_event_size`'s default) with 400.
* `Limits(app)` is the outermost ASGI middleware. It refuses with 400 a request whose target
  `request_target` refuses, then reads the request's whole body before the app sees any of
  it: at most `MAX_BODY_BYTES` (a `Content-Length` above it is refused with 413 before a
  byte of the body is read; a chunked body as soon as it passes it), whole within
  `BODY_TIMEOUT_S` of its head (else 408: a client that drips it is dropped too). Those
  refusals carry `Connection:
  close`, so the server reads no more of that connection. Then the app gets the body in one
  message and, after it, the connection's own messages (a disconnect, for `/api/events`).
* `request_target(scope)` is the request's path checked and decoded, or the one-line reason
  it is refused: the target must be a path (`/…`, not `http://host/…` or `*`), and its
  percent-escapes must decode to UTF-8 without control characters (CR, LF, NUL, …), which no
  page or file name here has. Its query string must decode to UTF-8 too (a parameter is
  never silently changed to U+FFFD). `path_reference(path)` is such a path re-encoded for a
  `Location` header: ASCII, every character that is not a plain path character
  percent-encoded (`\\` as `%5C`, `€` as `%E2%82%AC`), and never starting with `//`, which a
  browser reads as another host (RFC 3986's path-absolute cannot start with an empty
  segment): a redirect built from it stays on this server.
* `reply(send, status, text, api)` is a one-line error: JSON `{"error": …}` under `/api/`,
  text elsewhere, with `no-store` and the security headers (`HEADERS`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable
from urllib.parse import quote, unquote_to_bytes

from uvicorn.protocols.http.h11_impl import H11Protocol

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

HEADER_TIMEOUT_S = 10.0  # to send a request's head
BODY_TIMEOUT_S = 10.0  # to send a request's whole body, from its head
MAX_BODY_BYTES = 1 << 20  # a request body (a SQL query and its options); 1 MiB
# Characters a path segment may hold as they are (RFC 3986 pchar, less `%`, plus `/`).
_PATH_SAFE = "/:@!$&'()*+,;=-._~"

CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data: blob:; connect-src 'self'; font-src 'self' data:; "
       "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = [(b"content-security-policy", CSP.encode()),
           (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"no-referrer"),
           (b"x-frame-options", b"DENY"),
           (b"cross-origin-opener-policy", b"same-origin"),
           (b"cross-origin-resource-policy", b"same-origin")]


class Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header timeout (see the module docstring)."""

    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        super().data_received(data)
        if self.cycle is not cycle:  # a request's head arrived
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and (self.cycle is None or
                                                self.cycle.response_complete):
            self._arm()  # waiting for the next request's head

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._timed_out)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _timed_out(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or (self.cycle is not None
                                           and not self.cycle.response_complete):
            return
        # Written as bytes: h11 cannot answer a request whose head it has not read.
        self.transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; "
                             b"charset=utf-8\r\ncontent-length: 36\r\nconnection: close\r\n\r\n"
                             b"the request head took too long; bye\n")
        self.transport.close()


def request_target(scope: Scope) -> tuple[str | None, str | None]:
    """(the decoded path, None), or (None, why the target is refused)."""
    raw = scope.get("raw_path") or scope.get("path", "/").encode("utf-8", "surrogateescape")
    if not raw.startswith(b"/"):
        return None, "the request target must be a path on this server, starting with /"
    try:
        path = unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return None, "the request path is not UTF-8 once its %-escapes are decoded"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        return None, "the request path holds a control character (CR, LF, NUL, ...)"
    query = scope.get("query_string", b"")
    try:
        unquote_to_bytes(query.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        return None, "the query string is not UTF-8 once its %-escapes are decoded"
    return path, None


def path_reference(path: str) -> str:
    """`path` as the ASCII path of a `Location` header that stays on this server."""
    return "/" + quote(path, safe=_PATH_SAFE).lstrip("/")


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value
    return None


class Limits:
    """ASGI middleware: a well-formed target, a bounded body (see the module docstring)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        api = scope.get("path", "").startswith("/api/")
        _, refused = request_target(scope)
        if refused is not None:
            await reply(send, 400, refused, api, close=True)
            return
        length = _header(scope, b"content-length")
        if length is not None and length.strip().isdigit() and int(length) > MAX_BODY_BYTES:
            await reply(send, 413, f"the request body is larger than {MAX_BODY_BYTES} bytes",
                        api, close=True)
            return
        body = bytearray()
        more = True
        # The whole body, not each part: a client dripping a byte at a time is dropped too.
        until = asyncio.get_running_loop().time() + BODY_TIMEOUT_S
        while more:
            try:
                message = await asyncio.wait_for(
                    receive(), max(0.0, until - asyncio.get_running_loop().time()))
            except asyncio.TimeoutError:
                await reply(send, 408, f"the request body did not arrive within "
                            f"{BODY_TIMEOUT_S:g} s", api, close=True)
                return
            if message["type"] == "http.disconnect":
                return  # nobody to answer
            body += message.get("body", b"")
            more = bool(message.get("more_body", False))
            if len(body) > MAX_BODY_BYTES:
                await reply(send, 413, f"the request body is larger than {MAX_BODY_BYTES} "
                            "bytes", api, close=True)
                return
        delivered = False

        async def replay() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def reply(send: Send, status: int, text: str, api: bool, *, close: bool = False,
                extra: list[tuple[bytes, bytes]] | None = None) -> None:
    """A one-line error (JSON under /api/); `close`: end the connection after it."""
    if api:
        body, ctype = json.dumps({"error": text}).encode(), "application/json"
    else:
        body, ctype = (text + "\n").encode(), "text/plain; charset=utf-8"
    more = [(b"connection", b"close")] if close else []
    await respond(send, status, body, ctype, more + (extra or []))


async def respond(send: Send, status: int, body: bytes, ctype: str,
                  extra: list[tuple[bytes, bytes]] | None = None) -> None:
    """A whole response with `no-store` and the security headers."""
    headers = [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-store")] + HEADERS + (extra or [])
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
