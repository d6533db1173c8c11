"""The web app: Starlette routes over `Api`, the pages' static files, live snapshot events.

Contract: `create_app(store, policy, ...)` returns an ASGI app whose every request first
passes `transport.Limits` (a path that decodes, a body of at most 1 MiB that arrives in time)
and `security.Guard` (Host, token, same-origin writes, headers); `sql_timeout` is the SQL
page's time limit (`Api`). A POST's JSON body is decoded with runstore's own nesting bound
(`ingest.parse.loads`: deeper than 512 levels is a 400, not a `RecursionError`). Routes:

* `/`, `/runs`, `/charts`, `/compare`, `/health`, `/sql`, `/checkpoints`, `/timing`, `/rollouts`: the one page
  (`static/index.html`); the page's script reads the path and query string, so each page
  state is a shareable URL.
* `/static/<name>`: only the files that `static/` holds when the app starts (a fixed table
  from name to bytes, symlinks skipped), and `/static/vendor/plotly.min.js` from the
  installed plotly package. A request names a key of that table or gets 404: no path is
  ever joined onto a directory, so there is nothing to traverse (not starlette's
  `StaticFiles`, which joins at request time and gzips on every request:
  docs/architecture.md, "Libraries").
* `/api/...`: JSON endpoints (see docs/ui.md), answered from `Api.cached` (per snapshot)
  except `status` and `settings`; a new snapshot also warms the Runs page's answer. A
  `RunstoreError` is HTTP 400
  `{"error": message}`; any other failure is HTTP 500 `{"error": "internal error (...)"}`
  with the traceback printed on the server's stderr only, never sent.
* `/api/events`: server-sent events; `snapshot` (data `{"snapshot": N}`) whenever a newer
  store snapshot is published (polled every `poll_s` seconds with `Store.snapshot`, one
  poller for all clients), and a comment line every 15 s to keep proxies from closing it;
  a HEAD gets the head alone.

Store work runs in Starlette's thread pool, so a slow query never blocks the event loop; user
SQL runs in the store's worker processes (`Store.workers`: one is started with the app, all
end with it). A download (`Download` whose body is a file) is sent in chunks from that file.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import sys
import traceback
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..errors import RunstoreError, UsageError
from .api import SQL_TIMEOUT_S, Api, Download, Params
from .security import Guard, Policy
from .transport import Limits

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from ..store import Store

UNCACHED = ("status", "settings")  # what the server knows now (watch state), not the snapshot
PAGES = ("runs", "charts", "compare", "health", "sql", "checkpoints", "timing", "rollouts")
STATIC = Path(__file__).with_name("static")


class Asset:
    """One static file held in memory, with its gzip form and an ETag."""

    def __init__(self, body: bytes, media_type: str):
        self.body = body
        self.media_type = media_type
        self.etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        self._gz: bytes | None = None

    @property
    def gz(self) -> bytes:
        if self._gz is None:
            self._gz = gzip.compress(self.body, 6)
        return self._gz


MEDIA = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
         ".json": "application/json", ".ico": "image/x-icon"}


def load_assets(directory: Path = STATIC) -> dict[str, Asset]:
    """Every regular file under `directory` (symlinks skipped), keyed by its POSIX path."""
    assets: dict[str, Asset] = {}
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if path.is_symlink() or any(p.is_symlink() for p in path.parents
                                    if directory in p.parents):
            continue
        if not path.is_file() or path.suffix not in MEDIA:
            continue
        assets[rel.as_posix()] = Asset(path.read_bytes(), MEDIA[path.suffix])
    plotly_js = resources.files("plotly") / "package_data" / "plotly.min.js"
    assets["vendor/plotly.min.js"] = Asset(plotly_js.read_bytes(), MEDIA[".js"])
    return assets


class Snapshots:
    """The newest snapshot number, polled by one task and awaited by every event stream."""

    def __init__(self, store: "Store", poll_s: float,
                 on_change: Callable[[], None] | None = None):
        self.store = store
        self.poll_s = poll_s
        self.on_change = on_change
        self.seq: int | None = None
        self.changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._warming: asyncio.Future[None] | None = None

    async def start(self) -> None:
        from starlette.concurrency import run_in_threadpool

        self.seq = await run_in_threadpool(self._read)
        self._task = asyncio.create_task(self._poll())
        self._warm()

    def _warm(self) -> None:
        if self.on_change is not None:
            from starlette.concurrency import run_in_threadpool

            self._warming = asyncio.create_task(run_in_threadpool(self.on_change))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def _read(self) -> int | None:
        try:
            return self.store.snapshot()
        except (OSError, RunstoreError):
            return self.seq

    async def _poll(self) -> None:
        from starlette.concurrency import run_in_threadpool

        while True:
            await asyncio.sleep(self.poll_s)
            seq = await run_in_threadpool(self._read)
            if seq != self.seq:
                self.seq = seq
                self._warm()
                self.changed.set()
                self.changed = asyncio.Event()


def create_app(store: "Store", policy: Policy, *, poll_s: float = 1.0,
               status_extra: Callable[[], dict[str, Any]] | None = None,
               static_dir: Path = STATIC, sql_timeout: float | None = SQL_TIMEOUT_S) -> Any:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.gzip import GZipMiddleware
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    api = Api(store, status_extra, sql_timeout=sql_timeout)
    assets = load_assets(static_dir)
    snapshots = Snapshots(store, poll_s, on_change=api.warm)

    def json_response(value: Any, status: int = 200,
                      headers: dict[str, str] | None = None) -> "Response":
        body = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
        return Response(body, status_code=status, media_type="application/json",
                        headers={"cache-control": "no-store", **(headers or {})})

    def endpoint(method: Callable[[Params], Any]) -> Callable[["Request"], Any]:
        async def handle(request: "Request") -> "Response":
            from starlette.concurrency import run_in_threadpool

            body = None
            if request.method == "POST":
                from ..store.inputs import json_body

                try:
                    body = json_body(await request.body() or b"{}")
                except UsageError as e:
                    return json_response({"error": str(e)}, 400)
            params = Params(request.query_params.multi_items(), body)
            try:
                # The answer is written inside the try too: one JSON cannot write (a NaN
                # that missed `answers.plain`) is a failure of the server, answered as one.
                return answer(await run_in_threadpool(method, params))
            except RunstoreError as e:
                return json_response({"error": str(e)}, 400)
            except Exception as e:  # never send a traceback; print it where the server runs
                print(f"runstore ui: {request.url.path} failed:", file=sys.stderr)
                traceback.print_exc(file=sys.stderr)
                return json_response({"error": f"internal error ({type(e).__name__}); see "
                                      "the server's output"}, 500)

        return handle

    def answer(result: Any) -> "Response":
        if isinstance(result, Download):
            headers = {"content-disposition": f'attachment; filename="{result.filename}"',
                       "cache-control": "no-store"}
            if isinstance(result.body, bytes):
                return Response(result.body, media_type=result.media_type, headers=headers)
            headers["content-length"] = str(result.size())
            return StreamingResponse(result.chunks(), media_type=result.media_type,
                                     headers=headers)
        return json_response(result)

    async def page(request: "Request") -> "Response":
        return static_response(request, assets["index.html"], cache=False)

    async def static(request: "Request") -> "Response":
        asset = assets.get(request.path_params["name"])
        if asset is None:
            return Response("not found\n", status_code=404, media_type="text/plain")
        return static_response(request, asset, cache=True)

    def static_response(request: "Request", asset: Asset, *, cache: bool) -> "Response":
        headers = {"etag": asset.etag, "vary": "accept-encoding",
                   "cache-control": "max-age=3600" if cache else "no-cache"}
        if request.headers.get("if-none-match") == asset.etag:
            return Response(status_code=304, headers=headers)
        if "gzip" in request.headers.get("accept-encoding", "") and len(asset.body) > 1024:
            headers["content-encoding"] = "gzip"
            return Response(asset.gz, media_type=asset.media_type, headers=headers)
        return Response(asset.body, media_type=asset.media_type, headers=headers)

    async def events(request: "Request") -> "Response":
        headers = {"cache-control": "no-store", "x-accel-buffering": "no"}
        if request.method == "HEAD":  # the head alone: a stream would hold the connection
            return Response(media_type="text/event-stream", headers=headers)

        async def stream() -> Any:
            yield f"event: snapshot\ndata: {json.dumps({'snapshot': snapshots.seq})}\n\n"
            while True:
                changed = snapshots.changed
                try:
                    await asyncio.wait_for(changed.wait(), timeout=15)
                except asyncio.TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                yield f"event: snapshot\ndata: {json.dumps({'snapshot': snapshots.seq})}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    gets: dict[str, Callable[[Params], Any]] = {
        "status": api.status, "runs": api.runs, "config-keys": api.config_keys,
        "settings": api.settings, "views": api.views, "series": api.series,
        "checkpoints": api.checkpoints, "timing/runs": api.timing_runs,
        "timing/steps": api.timing_steps,
        "timing/spans": api.timing_spans, "timing/slowest": api.timing_slowest,
        "timing/compare": api.timing_compare, "health": api.health, "keys": api.keys,
        "diff": api.diff,
        "trace": api.trace, "rollouts/runs": api.rollouts_runs,
        "rollouts/index": api.rollouts_index,
        "rollouts/trajectories": api.trajectories, "rollouts/conversations": api.conversations,
        "rollouts/conversation": api.conversation, "search": api.search,
    }
    posts: dict[str, Callable[[Params], Any]] = {"sql": api.sql, "sql/download": api.sql_download}
    routes = [Route("/", page), *[Route(f"/{name}", page) for name in PAGES],
              Route("/static/{name:path}", static),
              Route("/api/events", events),
              *[Route(f"/api/{name}", endpoint(fn if name in UNCACHED else api.cached(name, fn)),
                      methods=["GET", "HEAD"]) for name, fn in gets.items()],
              *[Route(f"/api/{name}", endpoint(fn), methods=["POST"])
                for name, fn in posts.items()]]

    async def not_found(request: "Request", exc: Exception) -> "Response":
        if request.url.path.startswith("/api/"):
            return json_response({"error": f"no endpoint {request.url.path} (see docs/ui.md)"},
                                 404)
        return Response("not found\n", status_code=404, media_type="text/plain")

    async def bad_method(request: "Request", exc: Exception) -> "Response":
        # Starlette's 405 carries the route's methods in `Allow`; the message names them too.
        allow = dict(getattr(exc, "headers", None) or {}).get("Allow", "")
        return json_response({"error": f"{request.method} is not allowed here; {request.url.path} "
                              f"takes {allow or 'no method'}"}, 405,
                             {"allow": allow} if allow else None)

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: Any) -> Any:
        await snapshots.start()
        api.start()
        try:
            yield
        finally:
            await snapshots.stop()
            api.close()

    app = Starlette(debug=False, routes=routes, lifespan=lifespan,
                    middleware=[Middleware(GZipMiddleware, minimum_size=2048)],
                    exception_handlers={404: not_found, 405: bad_method})
    app.state.snapshots = snapshots
    return Limits(Guard(app, policy))
