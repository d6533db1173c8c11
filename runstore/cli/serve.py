"""`runstore ui`: the command that serves the store as a local web app (runstore.ui)."""

from __future__ import annotations

import click

from .common import Seconds, Size, handle_errors, open_store


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--watch", type=Seconds(), default=None,
              metavar="SECONDS",
              help="Also ingest PATHS every SECONDS (as `ingest --watch`); open pages "
                   "update as snapshots land.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Any address but loopback needs a token.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port to listen on (0: any free port).")
@click.option("--token", envvar="RUNSTORE_UI_TOKEN", default=None, metavar="TOKEN",
              help="Require this token on every request (default: none on loopback, a "
                   "random one printed once otherwise; also $RUNSTORE_UI_TOKEN).")
@click.option("--sql-timeout", "sql_timeout", type=Seconds(), default=30.0, show_default=True,
              metavar="SECONDS",
              help="Stop a query of the SQL page (or its download, or the Runs page's SQL "
                   "condition) still running after SECONDS; the page shows the error. The "
                   "app's own pages have no limit.")
@click.option("--memory-limit", "memory_limit", type=Size(), default=None, metavar="SIZE",
              help="Memory one such query may use, e.g. 4GB or 25%: it runs in a worker "
                   "process capped at SIZE, and a query that needs more is stopped (the page "
                   "shows the error; the server goes on). Default: $RUNSTORE_MEMORY_LIMIT, "
                   "else a quarter of the machine's memory (at most two such queries run at "
                   "once).")
@click.pass_context
@handle_errors(stop_queries=False)  # the server handles Ctrl-C itself
def ui(ctx: click.Context, paths: tuple[str, ...], watch: float | None, host: str, port: int,
       token: str | None, sql_timeout: float, memory_limit: int | None) -> None:
    """Serve the store as a local web app: runs, charts, compare, health, SQL, checkpoints,
    timing, rollouts.

    Prints the URL to open and serves until Ctrl-C; it opens no browser and reads no
    network. PATHS are ingested once before serving (with --watch: every SECONDS). Nothing
    else the app does writes the store or the run directories. See docs/ui.md.

    Example:

    \b
        runstore ui                              # http://127.0.0.1:8765
        runstore ui runs/ --watch 30             # live: ingest runs/ every 30 s
        runstore ui --host 0.0.0.0 --port 9000   # prints a URL with ?token=...
        runstore ui --sql-timeout 300            # allow the SQL page 5 minutes a query
        runstore ui --memory-limit 8GB           # and 8 GB of memory
    """
    from ..ui.server import serve

    # A long-lived process: its views are created once, for every request to read.
    store = open_store(ctx, reading=False, memory_limit=memory_limit, inline_views=False)
    serve(store, paths=list(paths), watch=watch, host=host, port=port, token=token,
          sql_timeout=sql_timeout)
