"""Libraries weighed against runstore's own code: what each would cost and what it would show.

    pip install -e '.[bench]'        # rich, tenacity, msgspec, lark, urllib3: compared only
    python bench/bench_libraries.py --store DIR [-n N]

`--store` is the store `runstore demo` writes (made under DIR when missing). Prints, for
docs/benchmarks.md ("Libraries"):

* imports: each candidate imported in a fresh process after what the command that would use
  it imports already (`runstore.cli`; the web UI's app for starlette's parts), N processes
  each, interleaved; the median seconds the import adds;
* commands: `runstore runs` and a no-op `runstore ingest` as whole processes, as they are and
  with the candidate library imported first (`python -c "import LIB; from runstore.cli import
  main; main()" ...`), A and B in turn, N pairs; medians and the ratio pair by pair;
* table: the runs of the store (run_name, run_id, model_name, learning_rate,
  final_checkpoint, status) at 80, 100 and 120 columns by runstore's renderer, DuckDB's box
  renderer (`DuckDBPyRelation.show(max_width=)`) and rich's `Table`: how many run_names are
  shown whole (a cut name no longer tells two runs apart), how many lines are wider than the
  width, and the median time to render;
* static: `GET /static/vendor/plotly.min.js` (gzip accepted, the web UI's largest file)
  answered by runstore's app (files held in memory, gzipped once) and by starlette's
  `StaticFiles` over a copy of the same files behind `GZipMiddleware` (gzip per request):
  bytes sent and the median time per request, both driven as ASGI apps in this process;
* hosts: Host headers for a loopback, a wildcard and a named bind, answered by runstore's
  `Policy.host_allowed` and by starlette's `TrustedHostMiddleware` given the same names (its
  IP literals kept to runstore's rule, as a hybrid would): every header where they disagree.

Nothing here writes to the store.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

# (label, what the process has imported before, the modules the candidate adds)
CLI = "import runstore.cli"
UI = "import runstore.cli, runstore.ui.app, starlette.applications, starlette.routing"
CANDIDATES = [
    ("rich (table)", CLI, "rich.console, rich.table"),
    ("rich (progress)", CLI, "rich.progress"),
    ("click.progressbar", CLI, "click"),
    ("urllib3 (Retry)", CLI, "urllib3.util.retry, urllib3"),
    ("httpx", CLI, "httpx"),
    ("tenacity", CLI, "tenacity"),
    ("starlette StaticFiles", UI, "starlette.staticfiles"),
    ("starlette TrustedHostMiddleware", UI, "starlette.middleware.trustedhost"),
    ("lark", CLI, "lark"),
    ("msgspec", CLI, "msgspec"),
]
TIMED_IMPORT = "{before}; import time; t = time.perf_counter(); import {mods}; " \
               "print(time.perf_counter() - t)"


def imports(n: int) -> None:
    times: dict[str, list[float]] = {c[0]: [] for c in CANDIDATES}
    missing: set[str] = set()
    for _ in range(n):
        for label, before, mods in CANDIDATES:
            if label in missing:
                continue
            p = subprocess.run([sys.executable, "-c", TIMED_IMPORT.format(before=before,
                                                                         mods=mods)],
                               capture_output=True, text=True, env=ENV)
            if p.returncode:
                missing.add(label)
                continue
            times[label].append(float(p.stdout))
    print(f"\n### imports (median of {n} processes; after what the command imports)\n")
    print("| candidate | imports | adds, ms |\n|---|---|---|")
    for label, _, mods in CANDIDATES:
        shown = ("not installed" if label in missing
                 else f"{statistics.median(times[label]) * 1000:.1f}")
        print(f"| {label} | {mods} | {shown} |")


def run_once(cmd: list[str]) -> tuple[float, float]:
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, env=ENV)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"{cmd} failed: {p.stderr.decode()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def commands(store: Path, tree: Path, n: int) -> None:
    main = "from runstore.cli import main; main()"
    pairs = {
        "runstore runs": (["runs"], "rich.console, rich.table"),
        "runstore ingest (nothing new)": (["ingest", str(tree)], "rich.progress"),
    }
    print(f"\n### whole commands (A as is, B with the library imported first; {n} pairs)\n")
    print("| command | library | A wall, s | B wall, s | B/A wall | A CPU, s | B CPU, s |")
    print("|---|---|---|---|---|---|---|")
    for name, (args, mods) in pairs.items():
        a = [sys.executable, "-m", "runstore", "--store", str(store), *args]
        b = [sys.executable, "-c", f"import {mods}; {main}", "--store", str(store), *args]
        run_once(a), run_once(b)  # warm the page cache and __pycache__, untimed
        ra, rb = [], []
        for _ in range(n):
            ra.append(run_once(a))
            rb.append(run_once(b))
        ratio = statistics.median(y[0] / x[0] for x, y in zip(ra, rb))
        med = lambda rs, i: statistics.median(r[i] for r in rs)  # noqa: E731
        print(f"| {name} | {mods} | {med(ra, 0):.3f} | {med(rb, 0):.3f} | {ratio:.2f} | "
              f"{med(ra, 1):.3f} | {med(rb, 1):.3f} |")


def _timed(fn, n: int = 20) -> float:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def table(store: Path) -> None:
    import duckdb
    from rich.console import Console
    from rich.table import Table

    import runstore
    from runstore.present.render import render

    arrow = runstore.open(store).sql(
        "select run_name, run_id, model_name, learning_rate, final_checkpoint, status "
        "from runs order by run_name").to_arrow()
    names = arrow.column("run_name").to_pylist()
    rows = arrow.to_pylist()
    con = duckdb.connect()
    rel = con.from_arrow(arrow)

    def ours(width: int) -> str:
        return render(arrow, "table", width=width)

    def box(width: int) -> str:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rel.show(max_width=width)
        return buf.getvalue()

    def rich_table(width: int) -> str:
        console = Console(width=width, file=io.StringIO(), color_system=None)
        t = Table(*arrow.column_names)
        for r in rows:
            t.add_row(*("" if v is None else str(v) for v in r.values()))
        console.print(t)
        return console.file.getvalue()  # type: ignore[attr-defined]

    print(f"\n### the runs table ({len(names)} runs, {arrow.num_columns} columns)\n")
    print("| renderer | width | run_names whole | lines too wide | ms |")
    print("|---|---|---|---|---|")
    for label, fn in (("runstore (present/render.py)", ours), ("DuckDB box renderer", box),
                      ("rich Table", rich_table)):
        for width in (80, 100, 120):
            text = fn(width)
            whole = sum(1 for n in names if n in text)
            wide = sum(1 for line in text.splitlines() if len(line) > width)
            ms = _timed(lambda: fn(width)) * 1000
            print(f"| {label} | {width} | {whole} of {len(names)} | {wide} | {ms:.2f} |")


async def _get(app, path: str, headers: dict[str, str]) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Status and body bytes of one GET through an ASGI app."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
             "root_path": "", "query_string": b"", "server": ("127.0.0.1", 8765),
             "client": ("127.0.0.1", 50000),
             "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
    status, size, asked = 0, 0, False
    done = asyncio.Event()

    async def receive():  # type: ignore[no-untyped-def]
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await done.wait()  # the client goes once the whole answer has arrived
        return {"type": "http.disconnect"}

    async def send(message):  # type: ignore[no-untyped-def]
        nonlocal status, size
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                done.set()

    await app(scope, receive, send)
    return status, size


def static(store: Path) -> None:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.gzip import GZipMiddleware
    from starlette.routing import Mount
    from starlette.staticfiles import StaticFiles

    import runstore
    from runstore.ui.app import STATIC, create_app, load_assets
    from runstore.ui.security import Policy

    ours = create_app(runstore.open(store), Policy("127.0.0.1", 8765))
    copy = Path(tempfile.mkdtemp(prefix="bench_static_"))
    for name, asset in load_assets(STATIC).items():
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_bytes(asset.body)
    theirs = Starlette(routes=[Mount("/static", StaticFiles(directory=copy))],
                       middleware=[Middleware(GZipMiddleware, minimum_size=1024)])
    headers = {"host": "127.0.0.1:8765", "accept-encoding": "gzip"}
    path = "/static/vendor/plotly.min.js"
    print("\n### GET " + path + " with gzip accepted (median of 20)\n")
    print("| server | status | bytes sent | ms per request |\n|---|---|---|---|")
    loop = asyncio.new_event_loop()
    for label, app in (("runstore (files in memory, gzipped once)", ours),
                       ("StaticFiles + GZipMiddleware", theirs)):
        status, size = loop.run_until_complete(_get(app, path, headers))
        ms = _timed(lambda: loop.run_until_complete(_get(app, path, headers))) * 1000
        print(f"| {label} | {status} | {size} | {ms:.1f} |")
    loop.close()
    shutil.rmtree(copy)


HOSTS = ["localhost", "localhost:8765", "LOCALHOST:8765", "localhost.:8765", "127.0.0.1:8765",
         "127.0.0.2:8765", "[::1]:8765", "[::1]", "10.0.0.5:8765", "[fe80::1]:8765",
         "evil.example:8765", "localhost.evil.example", "myhost:8765", "MyHost", ""]


def hosts() -> None:
    import ipaddress

    from starlette.middleware.trustedhost import TrustedHostMiddleware

    from runstore.ui.security import Policy, is_loopback, split_host

    async def ok(scope, receive, send):  # type: ignore[no-untyped-def]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def ip_rule(policy: Policy, header: str) -> bool | None:
        """runstore's rule for an IP literal (what a hybrid would keep); None for a name."""
        try:
            ip = ipaddress.ip_address(split_host(header))
        except ValueError:
            return None
        return ip.is_loopback if is_loopback(policy.host) else True

    loop = asyncio.new_event_loop()
    print("\n### Host headers where the two disagree\n")
    print("| bind | Host | runstore | TrustedHostMiddleware (names) + runstore (IPs) |")
    print("|---|---|---|---|")
    total = disagree = 0
    for bind in ("127.0.0.1", "0.0.0.0", "myhost"):
        policy = Policy(bind, 8765)
        names = sorted(n for n in policy.names()
                       if not (is_loopback(bind) and n not in ("localhost",
                                                               "localhost.localdomain",
                                                               "ip6-localhost")))
        middleware = TrustedHostMiddleware(ok, allowed_hosts=names)
        for header in HOSTS:
            ours = policy.host_allowed(header)
            ip = ip_rule(policy, header)
            if ip is None:
                status, _ = loop.run_until_complete(_get(middleware, "/", {"host": header}))
                theirs = status == 200
            else:
                theirs = ip
            total += 1
            if ours != theirs:
                disagree += 1
                print(f"| {bind} | `{header}` | {'allowed' if ours else 'refused'} | "
                      f"{'allowed' if theirs else 'refused (HTTP 400)'} |")
    loop.close()
    print(f"\n{disagree} of {total} (bind, Host) pairs disagree")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, required=True,
                    help="a directory for the store `runstore demo` writes (made when missing)")
    ap.add_argument("-n", type=int, default=9, help="processes of each kind (default 9)")
    ap.add_argument("--only", choices=("imports", "commands", "table", "static", "hosts"))
    args = ap.parse_args()
    if not (args.store / "store" / "_runstore").is_dir():
        subprocess.run([sys.executable, "-m", "runstore", "demo", str(args.store)], check=True,
                       capture_output=True, env=ENV)
    store, tree = args.store / "store", args.store / "runs"
    print(f"load average {os.getloadavg()[0]:.1f}")
    if args.only in (None, "imports"):
        imports(args.n)
    if args.only in (None, "commands"):
        commands(store, tree, args.n)
    if args.only in (None, "table"):
        table(store)
    if args.only in (None, "static"):
        static(store)
    if args.only in (None, "hosts"):
        hosts()
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
