"""Hypothesis against `runstore ui`'s whole request surface (issue 29, item 4): methods, paths,
query strings, headers and JSON bodies, sent over a raw socket so that malformed requests
reach a real server on 127.0.0.1 as they are. Whatever is sent, the answer is a whole HTTP
response below 500 with at most one line of body text, and the server writes nothing to
stderr (no traceback, no per-request warning). The endpoints and their parameter names are
read from the app and its source, not listed here; most requests carry the token and a
well-formed head, so that they get past the guard and exercise the endpoints themselves.

`UI_FUZZ_CASES` sets the number of generated requests (default 300; derandomized, so CI is
repeatable; `UI_FUZZ_RANDOM=1` draws new ones each run, to explore).
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from ui_harness import UiServer

TOKEN = "fuzz-T0ken"
CASES = int(os.environ.get("UI_FUZZ_CASES", "300"))
RANDOM = bool(os.environ.get("UI_FUZZ_RANDOM"))
SOURCE = Path(__file__).resolve().parents[2] / "runstore" / "ui"


def endpoints() -> tuple[list[str], list[str]]:
    """(GET endpoints, POST endpoints) as the app routes them."""
    import runstore
    from runstore.ui.app import create_app
    from runstore.ui.security import Policy

    class NoStore:
        path = "/nowhere"

    app: Any = create_app(NoStore(), Policy("127.0.0.1", 1))  # type: ignore[arg-type]
    while not hasattr(app, "routes"):
        app = app.app
    del runstore
    gets = sorted(r.path for r in app.routes if "GET" in (r.methods or ()))
    posts = sorted(r.path for r in app.routes if "POST" in (r.methods or ()))
    return gets, posts


GETS, POSTS = endpoints()
# Every parameter name an endpoint reads (`p.get("where")`, `p.integer("step")`, ...).
PARAMS = sorted({m for f in SOURCE.glob("*.py") for m in re.findall(
    r'p\.(?:get|text|integer|number|all)\("(\w+)"', f.read_text())} | {"only", "focus"})

REALISTIC = st.sampled_from([
    "env/all/reward/total", "optim/kl_sample_train_v1", "math_rl_sweep/*", "*", "0", "1", "3",
    "0.5", "train", "eval/test", "math_rl_sweep/qwen3-8b/lr_1e-5", "kind = 'rl'", "auto",
    "learning_rate", "time", "step", "minmax", "std", "1e-5", "boxed", "user", "assistant"])
VALUES = st.one_of(
    REALISTIC, REALISTIC, REALISTIC,
    st.text(max_size=40),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats().map(str),
    st.sampled_from(["", "0", "1", "-1", "0.5", "nan", "inf", "-inf", "1e400", "9" * 5000,
                     "auto", "std", "minmax", "step", "time", "train", "eval/test", "csv",
                     "parquet", "env/all/reward/total", "optim/kl_sample_train_v1",
                     "math_rl_sweep/*", "math_rl_sweep/qwen3-8b/lr_1e-5", "*", "[", "%",
                     "'; drop table runs; --", "kind = 'rl'", "best_reward > 0.5",
                     "length(run_name) > 3", "(((((", "\x00", "\r\n", "é€😀", TOKEN]),
)
SQL = st.one_of(
    st.text(max_size=80),
    st.sampled_from([
        "select 1", "select * from runs", "select * from metrics where key = 'x'",
        "select run_name, max_kl from kl_health", "select * from settings",
        "select $x", "select 1; select 2", "drop table runs", "copy runs to 'x.csv'",
        "select * from read_csv('/etc/passwd')", "select 'é€😀' as s", "select nan",
        "select 'nan'::double as x, 'inf'::double as y", "select [1, 2] as l, {'a': 1} as s",
        "select interval 1 day", "select * from range(10)", "select 1 as \"\x00\"",
        "select " + "(" * 300 + "1" + ")" * 300, "select " + "[" * 2000, "",
    ]),
)
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
BODY = st.one_of(
    st.fixed_dictionaries({"sql": SQL}, optional={"format": VALUES, "extra": JSON}).map(
        lambda d: json.dumps(d).encode()),
    JSON.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    st.sampled_from([b"", b"{", b"[" * 200_000, b"{\"sql\": \"select 1\"}" * 3, b"\xff\xfe",
                     b"{\"sql\": NaN}", b"{\"sql\": 1e999999}", b"{\"sql\": " + b"9" * 5000 + b"}",
                     b"\xef\xbb\xbf{\"sql\": \"select 1\"}"]),
)
TOKENS = st.text(alphabet="!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                 min_size=1, max_size=12)
FIELD_VALUE = st.binary(max_size=60).map(lambda b: bytes(c for c in b if c >= 0x20 and c != 0x7F))
SAFE = st.sampled_from(["", "/", "/%", "/:@", "/?=&", "/\\", "/:@!$&'()*+,;=-._~"])


@st.composite
def targets(draw: Any) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(["endpoint", "endpoint", "endpoint", "page", "path", "raw"]))
    if kind == "endpoint":
        path = draw(st.sampled_from(GETS + POSTS))
    elif kind == "page":
        path = draw(st.sampled_from(["/", "/runs", "/charts", "/sql", "/static/js/main.js",
                                     "/static/vendor/plotly.min.js", "/static/nope", "/api/nope"]))
    elif kind == "path":
        path = "/" + quote(draw(st.text(max_size=30)), safe=draw(SAFE))
    else:  # bytes as a client may send them (h11 refuses what HTTP does not allow)
        path = "/" + draw(st.binary(max_size=30)).decode("latin-1")
    pairs = draw(st.lists(st.tuples(st.sampled_from(PARAMS) | st.text(max_size=8), VALUES),
                          max_size=6))
    if draw(st.integers(0, 9)) == 0:
        pairs.append(("token", TOKEN))
    query = urlencode(pairs) if draw(st.integers(0, 4)) else "&".join(f"{k}={v}" for k, v in pairs)
    target = path + ("?" + query if query or draw(st.booleans()) else "")
    return path, target.encode("utf-8", "surrogateescape")


@st.composite
def requests(draw: Any, port: int) -> bytes:
    path, target = draw(targets())
    if draw(st.integers(0, 7)) == 0:
        method = draw(st.sampled_from(["GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS",
                                       "PATCH"]) | TOKENS)
    else:
        method = "POST" if path in POSTS else "GET"
    headers: list[tuple[bytes, bytes]] = []
    host = draw(st.sampled_from([f"127.0.0.1:{port}", "localhost", "[::1]", "evil.example", ""])
                if draw(st.integers(0, 9)) == 0 else st.just(f"127.0.0.1:{port}"))
    headers.append((b"Host", host.encode()))
    auth = draw(st.sampled_from(["bearer"] * 7 + ["cookie", "header", "none", "wrong"]))
    if auth == "bearer":
        headers.append((b"Authorization", f"Bearer {TOKEN}".encode()))
    elif auth == "cookie":
        headers.append((b"Cookie", f"runstore_token_{port}={TOKEN}".encode()))
    elif auth == "header":
        headers.append((b"X-Runstore-Token", TOKEN.encode()))
    elif auth == "wrong":
        headers.append((b"Authorization", b"Bearer " + draw(FIELD_VALUE)))
    body = draw(BODY) if method not in ("GET", "HEAD") or draw(st.integers(0, 9)) == 0 else b""
    if method not in ("GET", "HEAD") or body:
        ctype = draw(st.sampled_from([b"application/json"] * 8 + [b"text/plain", b"",
                                      b"application/json; charset=utf-8"])
                     if draw(st.integers(0, 9)) else FIELD_VALUE)
        headers.append((b"Content-Type", ctype))
    for _ in range(draw(st.integers(0, 3))):
        headers.append((draw(st.sampled_from(["Origin", "Cookie", "Accept-Encoding", "Range",
                                               "If-None-Match", "Expect", "X-Forwarded-For"])
                             | TOKENS).encode(), draw(FIELD_VALUE)))
    chunked = bool(body) and draw(st.integers(0, 4)) == 0
    if chunked:
        headers.append((b"Transfer-Encoding", b"chunked"))
        size = draw(st.integers(1, 64))
        parts = [body[i:i + size] for i in range(0, len(body), size)]
        payload = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"
    else:
        headers.append((b"Content-Length", str(len(body)).encode()))
        payload = body
    headers.append((b"Connection", b"close"))
    head = method.encode() + b" " + target + b" HTTP/1.1\r\n"
    head += b"".join(k + b": " + v + b"\r\n" for k, v in headers)
    return head + b"\r\n" + payload


def exchange(port: int, data: bytes) -> bytes:
    """Send `data`; the response, read until the server closes the connection (or, for the
    endless event stream of `/api/events`, until its head)."""
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        try:
            sock.sendall(data)  # (no half-close: asyncio would close the connection on EOF)
        except OSError:
            pass  # the server may refuse (413) before all was sent
        got = b""
        try:
            while chunk := sock.recv(65536):
                got += chunk
                top, done, _ = got.partition(b"\r\n\r\n")
                if done and b"content-type: text/event-stream" in top.lower():
                    break
        except ConnectionResetError:
            pass
    return got


@pytest.fixture(scope="module")
def server(ui_demo: tuple[Path, Path]) -> Iterator[UiServer]:
    with UiServer(ui_demo[1], "--token", TOKEN, "--sql-timeout", "3",
                  "--memory-limit", "512MB") as s:
        yield s
        _, err = s.stop()
        assert err == "", f"the server wrote to stderr:\n{err[-3000:]}"


SEEN: dict[int, int] = {}


def check(server: UiServer, data: bytes) -> None:
    got = exchange(server.port, data)
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", got)
    assert m, f"no HTTP response to {data[:300]!r}: {got[:200]!r}"
    status = int(m.group(1))
    SEEN[status] = SEEN.get(status, 0) + 1
    assert status < 500, f"{status} for {data[:300]!r}: {got[:500]!r}"
    if 400 <= status:
        body = got.partition(b"\r\n\r\n")[2]
        if b"\r\ntransfer-encoding: chunked" in got.partition(b"\r\n\r\n")[0].lower():
            body = b""  # not an error text of ours; never for the statuses below 500
        assert body.rstrip(b"\n").count(b"\n") == 0, f"{status}: {body[:500]!r}"
        assert b"Traceback" not in body


def test_fuzz_the_request_surface(server: UiServer) -> None:
    port = server.port

    @settings(max_examples=CASES, derandomize=not RANDOM, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(requests(port))
    @example(f"GET //evil.example/?token={TOKEN} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Connection: close\r\n\r\n".encode())
    @example(f"GET /%E2%82%AC?token={TOKEN} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Connection: close\r\n\r\n".encode())
    @example(f"GET /x%0d%0aSet-Cookie:%20evil=1?token={TOKEN} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Connection: close\r\n\r\n".encode())
    @example(b"POST /api/sql HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
             TOKEN.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: 200000"
             b"\r\nConnection: close\r\n\r\n" + b"[" * 200_000)
    def one(data: bytes) -> None:
        check(server, data)

    one()
    from conftest import REPORT

    REPORT["ui fuzz statuses"] = dict(sorted(SEEN.items()))
    # The generated requests reached the endpoints, not only the guard.
    assert SEEN.get(200, 0) > CASES // 10 and SEEN.get(400, 0) > CASES // 10, SEEN
