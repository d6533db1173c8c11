"""`runstore ui`'s security rules: the token, the Host check, same-origin writes, no path
traversal, hostile SQL refused, and a store and run tree that the UI never writes."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlencode

import pytest

import oracle
import runstore
from runstore.errors import UsageError
from runstore.ui.app import create_app, load_assets
from runstore.ui.security import Policy, is_loopback, split_host
from runstore.ui.server import effective_token
from ui_harness import UiServer, http

TOKEN = "s3cret-Token_value"


@pytest.fixture(scope="module")
def token_server(ui_demo: tuple[Path, Path]) -> Iterator[UiServer]:
    with UiServer(ui_demo[1], "--token", TOKEN) as s:
        yield s


# -- token ------------------------------------------------------------------------------------

def test_token_is_printed_once_in_the_url(token_server: UiServer) -> None:
    assert token_server.token == TOKEN
    assert "".join(token_server.output).count(TOKEN) == 1


@pytest.mark.parametrize("path", ["/api/status", "/api/runs", "/runs", "/static/js/main.js",
                                  "/api/events", "/api/health", "/health",
                                  "/api/timing/compare?run=a&vs=b", "/api/keys", "/compare",
                                  "/api/diff?run=a&run=b"])
def test_no_token_no_access(token_server: UiServer, path: str) -> None:
    r = http(token_server.url, "GET", path)
    assert r.status == 401
    if path.startswith("/api/"):
        assert "token" in r.json()["error"]
    assert TOKEN not in r.text


@pytest.mark.parametrize("headers", [
    {"Authorization": "Bearer wrong"}, {"X-Runstore-Token": TOKEN[:-1]},
    {"Cookie": f"runstore_token_1={TOKEN}"},  # another port's cookie
    {"Authorization": f"Basic {TOKEN}"}, {"Cookie": "garbage;;=="},
])
def test_a_wrong_token_is_refused(token_server: UiServer, headers: dict[str, str]) -> None:
    assert http(token_server.url, "GET", "/api/status", headers=headers).status == 401


def test_the_token_as_header_or_cookie(token_server: UiServer) -> None:
    for headers in ({"Authorization": f"Bearer {TOKEN}"}, {"X-Runstore-Token": TOKEN},
                    {"Cookie": f"other=1; runstore_token_{token_server.port}={TOKEN}"}):
        r = http(token_server.url, "GET", "/api/status", headers=headers)
        assert r.status == 200, headers
    r = http(token_server.url, "POST", "/api/sql", body={"sql": "select 1 as x"},
             headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status == 200 and r.json()["rows"] == [[1]]



# Cookies other apps on this host set (cookies are not port-scoped), as browsers send them: a
# nameless one (`document.cookie = "flag"`), JSON, a space, non-ASCII (sent as UTF-8 bytes).
OTHER_COOKIES = ["flag", 'prefs={"theme": "dark"}', "note=a b", "city=Zürich", "a=b;c"]


@pytest.mark.parametrize("other", OTHER_COOKIES)
@pytest.mark.parametrize("first", [True, False])
def test_the_token_cookie_is_found_among_other_apps_cookies(token_server: UiServer, other: str,
                                                            first: bool) -> None:
    mine = f"runstore_token_{token_server.port}={TOKEN}"
    cookie = f"{mine}; {other}" if first else f"{other}; {mine}"
    r = http(token_server.url, "GET", "/api/status",
             headers={"Cookie": cookie.encode().decode("latin-1")})
    assert r.status == 200, (cookie, r.text)
    wrong = cookie.replace(TOKEN, TOKEN + "x")
    r = http(token_server.url, "GET", "/api/status",
             headers={"Cookie": wrong.encode().decode("latin-1")})
    assert r.status == 401, wrong

def test_the_first_visit_sets_a_cookie_and_drops_the_token_from_the_url(token_server: UiServer) -> None:
    r = http(token_server.url, "GET", f"/rollouts?run=a%2Fb&token={TOKEN}&split=train")
    assert r.status == 303
    assert r.headers["location"] == "/rollouts?run=a%2Fb&split=train"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"runstore_token_{token_server.port}={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert http(token_server.url, "GET", f"/runs?token={TOKEN}x").status == 401


def test_a_generated_token_off_loopback() -> None:
    assert effective_token("127.0.0.1", None) is None
    assert effective_token("localhost", None) is None
    assert effective_token("::1", None) is None
    assert effective_token("127.0.0.1", "given") == "given"
    a, b = effective_token("0.0.0.0", None), effective_token("0.0.0.0", None)
    assert a and b and a != b and len(a) >= 30
    assert effective_token("192.168.1.20", "mine") == "mine"
    with pytest.raises(UsageError):
        effective_token("0.0.0.0", "  ")


def test_the_token_from_the_environment(ui_demo: tuple[Path, Path]) -> None:
    with UiServer(ui_demo[1], env={"RUNSTORE_UI_TOKEN": "from-env"}) as s:
        assert s.token == "from-env"
        assert http(s.url, "GET", "/api/status").status == 401
        assert http(s.url, "GET", "/api/status", headers={"X-Runstore-Token": "from-env"}).status == 200


# -- Host --------------------------------------------------------------------------------------

@pytest.mark.parametrize("host, status", [
    ("evil.example", 421), ("evil.example:{port}", 421), ("localhost.evil.example", 421),
    ("10.1.2.3:{port}", 421), ("127.0.0.1.nip.io", 421),
    ("localhost:{port}", 200), ("127.0.0.1:{port}", 200), ("[::1]:{port}", 200),
    ("LOCALHOST", 200), ("127.0.0.2", 200),
    # Not `host[:port]`: what follows the name is no port, so the name is not this server's.
    ("127.0.0.1:{port}, evil.example", 421), ("127.0.0.1:evil.example", 421),
    ("localhost:{port}@evil.example", 421), ("[::1", 421), ("[::1]evil.example", 421),
    ("127.0.0.1, evil.example", 421), ("::1", 421), ("127.0.0.1:{port}:1", 421),
    ("localhost.:{port}", 200), ("localhost.", 200), ("[::1]", 200),
])
def test_host_header_must_name_this_server(ui_server: UiServer, host: str, status: int) -> None:
    r = http(ui_server.url, "GET", "/api/status", headers={"Host": host.format(port=ui_server.port)})
    assert r.status == status, r.text
    if status == 421:
        assert "Host" in r.json()["error"]


def test_a_request_without_host_is_refused(ui_server: UiServer) -> None:
    with socket.create_connection(("127.0.0.1", ui_server.port), timeout=10) as sock:
        sock.sendall(b"GET /api/status HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    assert data.split(b"\r\n", 1)[0].split()[1] in (b"400", b"421")
    assert b'"runs"' not in data


def test_host_rules_of_wildcard_and_named_binds() -> None:
    wild = Policy(host="0.0.0.0", port=1)
    assert wild.host_allowed(socket.gethostname()) and wild.host_allowed("10.0.0.5:1")
    assert wild.host_allowed("[fe80::1]:1") and wild.host_allowed("localhost")
    assert not wild.host_allowed("evil.example") and not wild.host_allowed(None)
    named = Policy(host="box.lab.internal", port=1)
    assert named.host_allowed("box.lab.internal:1") and named.host_allowed("BOX.lab.internal.")
    assert not named.host_allowed("other.lab.internal")
    assert is_loopback("127.9.9.9") and is_loopback("[::1]") and not is_loopback("0.0.0.0")
    assert split_host("[::1]:8765") == "::1" and split_host("Example.COM:80") == "example.com"


# -- writes come from this origin, as JSON ----------------------------------------------------

def test_posts_must_be_json_from_this_origin(ui_server: UiServer) -> None:
    body = json.dumps({"sql": "select 1"}).encode()
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        r = http(ui_server.url, "POST", "/api/sql", body=body, headers={"Content-Type": ctype})
        assert r.status == 415, ctype
    r = http(ui_server.url, "POST", "/api/sql", body=body,
             headers={"Content-Type": "application/json", "Origin": "http://evil.example"})
    assert r.status == 403
    r = http(ui_server.url, "POST", "/api/sql", body=body,
             headers={"Content-Type": "application/json",
                      "Origin": f"http://127.0.0.1:{ui_server.port}"})
    assert r.status == 200



def routed_methods(path: str) -> set[str]:
    """The methods the app routes for `path` (read from the app, not listed here)."""
    app: Any = create_app(UnwritableAnswerStore(), Policy("127.0.0.1", 1))  # type: ignore[arg-type]
    while not hasattr(app, "routes"):
        app = app.app
    return next(set(r.methods) for r in app.routes if r.path == path)


@pytest.mark.parametrize("method, path", [
    ("OPTIONS", "/api/status"), ("PUT", "/api/status"), ("DELETE", "/api/sql"),
    ("OPTIONS", "/api/sql"), ("PATCH", "/api/runs"),
])
def test_a_method_no_route_takes_is_a_405_naming_those_it_takes(ui_server: UiServer, method: str,
                                                                path: str) -> None:
    r = http(ui_server.url, method, path)
    assert r.status == 405, r.text
    allowed = routed_methods(path)
    assert set(r.headers["allow"].replace(" ", "").split(",")) == allowed
    assert all(m in r.json()["error"] for m in allowed)

def test_every_response_carries_the_security_headers(ui_server: UiServer) -> None:
    for path in ["/runs", "/api/status", "/static/js/main.js", "/api/nope", "/static/nope"]:
        r = http(ui_server.url, "GET", path)
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-eval" not in csp
        assert "frame-ancestors 'none'" in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "no-referrer"
        assert "server" not in r.headers


# -- static files: nothing to traverse ---------------------------------------------------------

TRAVERSALS = [
    "/static/../../../../etc/passwd", "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/static/..%2f..%2f..%2f..%2fetc%2fpasswd", "/static/%252e%252e%252f%252e%252e%252fetc%252fpasswd",
    "/static/..%252f..%252f..%252fetc%252fpasswd", "/static/..\\..\\..\\etc\\passwd",
    "/static/%5c..%5c..%5cetc%5cpasswd", "/static//etc/passwd", "/static/%2fetc%2fpasswd",
    "/static/../app.py", "/static/..%2fapp.py", "/static/js/../../app.py",
    "/static/js/%2e%2e/%2e%2e/security.py", "/static/vendor/../../app.py",
    "/static/vendor/..%2f..%2f..%2fplotly%2f__init__.py", "/static/./js/../../ui_server.py",
    "/static/%00/etc/passwd", "/..%2f..%2fetc/passwd", "/runs/../../etc/passwd",
    "/static/js/main.js%00.png", "/static/js/main.js/..%2f..%2f..%2fapp.py",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_no_path_traversal(ui_server: UiServer, path: str) -> None:
    here = Path(__file__).resolve().parents[2] / "runstore" / "ui"
    r = http(ui_server.url, "GET", path)
    assert r.status in (400, 404), (path, r.status)
    assert b"root:" not in r.body
    assert (here / "app.py").read_bytes()[:200] not in r.body


def test_static_files_that_exist_are_served(ui_server: UiServer) -> None:
    r = http(ui_server.url, "GET", "/static/js/main.js")
    here = Path(__file__).resolve().parents[2] / "runstore" / "ui" / "static"
    assert r.status == 200 and r.body == (here / "js" / "main.js").read_bytes()
    assert r.headers["content-type"].startswith("text/javascript")


def asgi(app: Any, method: str, path: str, headers: dict[str, str] | None = None,
         body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """One request through an ASGI app, in process."""
    async def run() -> list[dict[str, Any]]:
        hdrs = {"host": "127.0.0.1:8765", **{k.lower(): v for k, v in (headers or {}).items()}}
        path_only, _, query = path.partition("?")
        scope = {"type": "http", "method": method, "path": path_only,
                 "raw_path": path_only.encode(), "query_string": query.encode(),
                 "headers": [(k.encode(), v.encode()) for k, v in hdrs.items()],
                 "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 8765),
                 "client": ("127.0.0.1", 5555), "root_path": ""}
        sent: list[dict[str, Any]] = []
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.sleep(3600)
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app(scope, receive, send)
        return sent

    messages = asyncio.run(run())
    start = next(m for m in messages if m["type"] == "http.response.start")
    data = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, data


def test_symlinks_in_the_static_folder_are_not_served(tmp_path: Path, ui_demo: tuple[Path, Path]) -> None:
    secret_dir = tmp_path / "outside"
    secret_dir.mkdir()
    (secret_dir / "secret.js").write_text("SECRET-CONTENT")
    static = tmp_path / "static"
    (static / "js").mkdir(parents=True)
    (static / "index.html").write_text("<!doctype html>")
    (static / "js" / "ok.js").write_text("ok")
    os.symlink(secret_dir / "secret.js", static / "js" / "leak.js")
    os.symlink(secret_dir, static / "linked")
    assets = load_assets(static)
    assert "js/ok.js" in assets and "js/leak.js" not in assets
    assert not any(name.startswith("linked") for name in assets)
    app = create_app(runstore.open(ui_demo[1]), Policy("127.0.0.1", 8765), static_dir=static)
    assert asgi(app, "GET", "/static/js/ok.js")[0] == 200
    for path in ["/static/js/leak.js", "/static/linked/secret.js", "/static/linked%2fsecret.js"]:
        status, _, body = asgi(app, "GET", path)
        assert status == 404 and b"SECRET" not in body


# -- errors never leak a traceback -------------------------------------------------------------

class ExplodingStore:
    path = "/nowhere"

    def snapshot(self) -> int:
        return 1

    def arrow(self, *a: Any, **k: Any) -> Any:
        raise RuntimeError("boom at /very/secret/path.py line 42")

    sql = runs = fetch = workers = arrow


def test_an_internal_error_is_a_500_without_the_details(capsys: pytest.CaptureFixture[str]) -> None:
    app = create_app(ExplodingStore(), Policy("127.0.0.1", 8765))  # type: ignore[arg-type]
    status, headers, body = asgi(app, "POST", "/api/sql", {"content-type": "application/json"},
                                 json.dumps({"sql": "select 1"}).encode())
    assert status == 500
    error = json.loads(body)["error"]
    assert "RuntimeError" in error and "secret" not in error and "Traceback" not in error
    assert "boom" in capsys.readouterr().err  # the server's own output has it



class UnwritableAnswerStore:
    """A store whose `views` answer holds a NaN that no JSON number can carry."""

    path = "/nowhere"

    def snapshot(self) -> int:
        return 1

    def views(self) -> list[Any]:
        from types import SimpleNamespace

        return [SimpleNamespace(name="v", description="", columns=[("x", float("nan"))],
                                body="select 1")]

    def arrow(self, *a: Any, **k: Any) -> Any:
        import pyarrow as pa

        return pa.table({c: pa.array([], pa.string())
                         for c in ("table_name", "column_name", "data_type")})

    def workers(self) -> Any:
        raise RuntimeError("no workers here")


def test_an_answer_json_cannot_write_is_a_json_500(capsys: pytest.CaptureFixture[str]) -> None:
    app = create_app(UnwritableAnswerStore(), Policy("127.0.0.1", 8765))  # type: ignore[arg-type]
    status, headers, body = asgi(app, "GET", "/api/views")
    assert status == 500 and headers["content-type"] == "application/json"
    assert json.loads(body)["error"].startswith("internal error (ValueError)")
    assert "JSON" in capsys.readouterr().err  # the server's own output says why

# -- hostile SQL -------------------------------------------------------------------------------

GUARDED = [
    "copy runs to '{tmp}/out.csv'", "copy (select 1) to '{tmp}/out.parquet' (format parquet)",
    "attach '{tmp}/x.duckdb' as x", "install httpfs", "load httpfs", "force install httpfs",
    "set enable_external_access = true", "reset enable_external_access",
    "pragma enable_logging", "call enable_logging()", "export database '{tmp}/exp'",
    "create table t as select 1", "drop view kl_health", "select 1; select 2",
    "insert into runs select * from runs", "with d as (delete from runs returning *) select * from d",
    "select * from query('select 1')", "select * from query_table('runs')",
    "select set_variable('x', 1)", "select json_execute_serialized_sql('{{}}')",
    "update runs set kind = 'x'", "checkpoint", "detach x", "use memory",
]


@pytest.mark.parametrize("sql", GUARDED)
def test_statements_the_read_only_guard_refuses(ui_server: UiServer, sql: str, tmp_path: Path) -> None:
    r = http(ui_server.url, "POST", "/api/sql", body={"sql": sql.format(tmp=tmp_path)})
    assert r.status == 400, (sql, r.text)
    assert r.json()["error"]
    assert list(tmp_path.iterdir()) == []


# Refused by DuckDB's own sandbox (allowed_directories, enable_external_access = false,
# lock_configuration = true), which Store applies to every query connection.
SANDBOXED = [
    "select * from read_csv('/etc/passwd')", "select * from read_text('/etc/passwd')",
    "select * from read_blob('/etc/hostname')", "select * from glob('/etc/*')",
    "select * from read_json_auto('{outside}.json')", "select * from enable_logging()",
    "select * from read_parquet('{outside}.parquet')", "select * from read_csv('{outside}.csv')",
]


@pytest.fixture(scope="module")
def sandboxed(ui_server: UiServer) -> bool:
    r = http(ui_server.url, "POST", "/api/sql",
             body={"sql": "select current_setting('enable_external_access') as v"})
    return r.status == 200 and r.json()["rows"] == [[False]]


@pytest.mark.parametrize("sql", SANDBOXED)
def test_file_reads_and_state_changes_outside_the_store_fail(ui_server: UiServer, sql: str,
                                                             sandboxed: bool, tmp_path: Path,
                                                             request: pytest.FixtureRequest) -> None:
    assert sandboxed, "the UI's query connections must carry DuckDB's sandbox"
    import pyarrow as pa
    import pyarrow.parquet as pq

    outside = tmp_path / "outside"
    pq.write_table(pa.table({"secret": ["SECRET-ROW"]}), f"{outside}.parquet")
    Path(f"{outside}.json").write_text('{"secret": "SECRET-ROW"}\n')
    Path(f"{outside}.csv").write_text("secret\nSECRET-ROW\n")
    r = http(ui_server.url, "POST", "/api/sql", body={"sql": sql.format(outside=outside)})
    assert r.status == 400, r.text
    assert "root:" not in r.text and "SECRET-ROW" not in r.text


# -- the UI never writes -----------------------------------------------------------------------

def test_using_every_endpoint_writes_neither_store_nor_tree(ui_demo: tuple[Path, Path],
                                                            tmp_path: Path) -> None:
    import shutil

    ui_tree, store = tmp_path / "runs", tmp_path / "store"
    shutil.copytree(ui_demo[0], ui_tree, symlinks=True)
    runstore.open(store).ingest([ui_tree])
    before = (oracle.tree_digest(ui_tree), oracle.tree_digest(store))
    run = "math_rl_sweep/qwen3-8b/lr_1e-5"
    where = {"run": run, "split": "eval/test", "iteration": 0}
    gets = ["status", "settings", "runs", "runs?" + urlencode({"where": "kind = 'rl'", "config": "learning_rate"}),
            "config-keys", "views", "checkpoints", "timing/runs",
            "timing/steps?" + urlencode({"run": run}),
            "timing/spans?" + urlencode({"run": run, "step": 3}),
            "timing/slowest?" + urlencode({"run": run}), "trace?" + urlencode({"run": run, "step": 3}),
            "timing/compare?" + urlencode({"run": run, "vs": "gsm8k_tool_rl/sweep/lr_1e-4/seed_0"}),
            "health", "keys", "keys?" + urlencode({"run": run, "like": "reward"}),
            "diff?" + urlencode({"run": [run, "gsm8k_tool_rl/sweep/lr_1e-4/seed_0"], "all": 1}, doseq=True),
            "series?" + urlencode({"metric": "env/all/reward/total", "group_by": "auto", "smooth": 0.5}),
            "series?" + urlencode({"metric": "env/all/reward/total", "x": "time"}),
            "rollouts/runs", "rollouts/index?" + urlencode({"run": run}),
            "rollouts/trajectories?" + urlencode(where), "rollouts/conversations?" + urlencode(where),
            "rollouts/conversation?" + urlencode({**where, "group": 0, "traj": 3}),
            "search?q=boxed", "series?" + urlencode({"metric": "env/all/reward/total", "smooth": 0.5})]
    with UiServer(store) as s:
        for path in gets:
            assert http(s.url, "GET", "/api/" + path).status == 200, path
        for body in ({"sql": "select count(*) from metrics"}, {"sql": "drop table runs"}):
            http(s.url, "POST", "/api/sql", body=body)
        for fmt in ("csv", "parquet"):
            assert http(s.url, "POST", "/api/sql/download",
                        body={"sql": "select * from runs", "format": fmt}).status == 200
    assert (oracle.tree_digest(ui_tree), oracle.tree_digest(store)) == before
