"""Who may talk to the web UI: the Host check, the token, same-origin writes, safe headers.

Contract: `Guard(app, policy)` is an ASGI middleware that lets a request through only when

* its `Host` header names this server (`Policy.host_allowed`): `localhost`, an IP literal
  (a DNS-rebinding attack needs a domain name that resolves to this machine, and an address
  typed as an address cannot be rebound), the name the server was bound to, and, for a
  wildcard bind (`0.0.0.0`, `::`), this machine's host name and FQDN. A loopback bind accepts
  loopback addresses only. A value that is not `host[:port]` (`split_host`: junk after
  the name, an unclosed bracket) names nothing. Anything else is HTTP 421 (so a page on
  another site that rebinds its name to 127.0.0.1 reads nothing). Not starlette's
  `TrustedHostMiddleware`: it holds no rule for IP literals and answers 400
  (docs/architecture.md, "Libraries");
* when the server has a token: the request carries it, as `Authorization: Bearer T`, as an
  `X-Runstore-Token: T` header, or as the cookie that a visit to any page with `?token=T`
  sets, found among whatever cookies other apps on this host set (that visit is answered
  by a redirect to the same URL without the token, so the token stays out of the history
  and of Referer headers; the redirect's `Location` is the request's
  path re-encoded by `transport.path_reference`, so it can only name a path on this server). Tokens are compared in constant time. A
  missing or wrong token is HTTP 401 (JSON for `/api/...`, a short page otherwise);
* a request that is not GET/HEAD, when it has an `Origin` header, comes from this server's
  own origin, and a POST is JSON (`Content-Type: application/json`, which a form on another
  site cannot send without a CORS preflight this server never answers). A form sends only
  GET and POST, and any other method from another site needs that preflight too; here it
  reaches the routes, which take none, and is a 405 naming the methods the path takes.

Every response gets a strict Content-Security-Policy (scripts, styles, data only from this
server; no inline script; no framing), `X-Content-Type-Options: nosniff` and
`Referrer-Policy: no-referrer`. The cookie is HttpOnly and SameSite=Strict, named per port
(cookies are not port-scoped, and two servers on one host must not mix their tokens).
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import socket
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, urlencode

from .transport import HEADERS, Receive, Scope, Send, path_reference, reply, respond

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
# A Host header: a name (RFC 3986 reg-name, less the characters no host name has) or an
# IPv6 address in brackets, then an optional port.
_HOST = re.compile(r"(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9._~-]+))(?::[0-9]*)?")


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine (127.0.0.0/8, ::1, localhost)."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def split_host(header: str) -> str | None:
    """The host name of a `Host` header value, lower case, without port, IPv6 brackets or
    the root's trailing dot; None when the value is not `host[:port]` (RFC 9110: a name or
    IPv4 address, or an IPv6 address in brackets, then at most a port of digits)."""
    m = _HOST.fullmatch(header.strip().lower())
    if m is None:
        return None
    name = m.group("v6") or m.group("name").rstrip(".")
    return name or None


@dataclass(frozen=True)
class Policy:
    """What the guard allows: the bound host, the port (for the cookie name), the token."""

    host: str
    port: int
    token: str | None = None
    extra_names: frozenset[str] = field(default_factory=frozenset)

    @property
    def cookie(self) -> str:
        return f"runstore_token_{self.port}"

    def names(self) -> frozenset[str]:
        """Host names (not IP literals) that Host headers may carry."""
        bound = self.host.strip("[]").lower()
        names = set(LOOPBACK_NAMES) | set(self.extra_names)
        if _ip(bound) is None:
            names.add(bound)
        elif _ip(bound).is_unspecified:  # type: ignore[union-attr]
            for n in (socket.gethostname(), socket.getfqdn()):
                names.add(n.lower().rstrip("."))
        return frozenset(names)

    def host_allowed(self, header: str | None) -> bool:
        name = split_host(header) if header else None
        if name is None:
            return False
        ip = _ip(name)
        if is_loopback(self.host):
            return name in LOOPBACK_NAMES or (ip is not None and ip.is_loopback)
        return ip is not None or name in self.names()

    def token_ok(self, given: str | None) -> bool:
        if self.token is None:
            return True
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in scope.get("headers", []):
        out.setdefault(k.decode("latin-1").lower(), v.decode("latin-1"))
    return out


def _given_token(headers: dict[str, str], cookie_name: str) -> str | None:
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    if "x-runstore-token" in headers:
        return headers["x-runstore-token"].strip()
    if "cookie" in headers:
        # Read as browsers write the header, not by `http.cookies.SimpleCookie`, which drops
        # every cookie once one does not suit it: another app's cookie on this host (cookies
        # are not port-scoped) with a space, JSON, non-ASCII or no name would hide the token.
        from starlette.requests import cookie_parser

        return cookie_parser(headers["cookie"]).get(cookie_name)
    return None


class Guard:
    """ASGI middleware enforcing a `Policy` (see the module docstring)."""

    def __init__(self, app: Callable[..., Awaitable[None]], policy: Policy):
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets here
            return
        headers = _headers(scope)
        path = scope.get("path", "/")  # checked by `transport.Limits`, outside this guard
        api = path.startswith("/api/")
        if not self.policy.host_allowed(headers.get("host")):
            await reply(send, 421, "this server does not answer for that Host name", api)
            return
        query = scope.get("query_string", b"").decode("latin-1")
        pairs = parse_qsl(query, keep_blank_values=True)
        url_token = next((v for k, v in pairs if k == "token"), None)
        if self.policy.token is not None and url_token is not None and \
                scope["method"] in ("GET", "HEAD") and self.policy.token_ok(url_token):
            # The same path and query without the token, re-encoded as ASCII and never
            # starting with `//` (another host, to a browser): a path on this server.
            rest = urlencode([(k, v) for k, v in pairs if k != "token"])
            location = path_reference(path) + ("?" + rest if rest else "")
            cookie = (f"{self.policy.cookie}={self.policy.token}; Path=/; HttpOnly; "
                      "SameSite=Strict")
            await respond(send, 303, b"", "text/plain; charset=utf-8",
                          [(b"location", location.encode("ascii")),
                           (b"set-cookie", cookie.encode("latin-1"))])
            return
        if not self.policy.token_ok(_given_token(headers, self.policy.cookie)):
            await reply(send, 401, "a token is needed: open the URL that `runstore ui` "
                         "printed (it ends with ?token=...), or send the header "
                         "'Authorization: Bearer TOKEN'", api)
            return
        if scope["method"] not in ("GET", "HEAD"):
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            origin = headers.get("origin")
            if scope["method"] == "POST" and ctype != "application/json":
                await reply(send, 415, "send the request body as application/json", api)
                return
            if origin is not None and not self._same_origin(origin, headers.get("host", "")):
                await reply(send, 403, "cross-origin requests are refused", api)
                return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + HEADERS
            await send(message)

        await self.app(scope, receive, send_with_headers)

    @staticmethod
    def _same_origin(origin: str, host: str) -> bool:
        scheme, _, rest = origin.partition("://")
        return scheme == "http" and rest.lower() == host.lower()
