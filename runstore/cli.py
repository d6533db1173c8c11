"""The `runstore` command: thin click wrappers over `runstore.Store`.

Contract: every command builds the `Store` from `--store` / `$RUNSTORE_STORE` / `./.runstore`,
makes one library call and prints its result. Library errors become `Error: …` on stderr with
exit 1 (usage errors exit 2); `--debug` shows the traceback instead. Commands that print rows
share one set of output options (`--format`, `--output`).
"""

from __future__ import annotations

import functools
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

import click

from .errors import RunstoreError

FORMATS = ("table", "csv", "json", "jsonl", "markdown", "parquet")


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn runstore errors into `Error: …` and an exit code (tracebacks under --debug)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        try:
            return fn(*args, **kwargs)
        except RunstoreError as e:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"Error: {e}", err=True)
            ctx.exit(e.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)

    return wrapper


def output_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("--output", "-o", "output", type=click.Path(dir_okay=False),
                      help="Write to FILE instead of standard output.")(fn)
    fn = click.option("--format", "-F", "fmt", type=click.Choice(FORMATS),
                      help="Output format (default: table on a terminal, else csv).")(fn)
    return fn


def emit(table: Any, fmt: str | None, output: str | None) -> None:
    from . import output as out

    if fmt is None:
        fmt = "table" if (output is None and sys.stdout.isatty()) else "csv"
    if fmt == "parquet":
        if not output:
            raise click.UsageError("--format parquet needs --output FILE")
        out.write_parquet(table, output)
        return
    width = shutil.get_terminal_size((100, 24)).columns if output is None else 10_000
    text = out.render(table, fmt, width=width)
    if output:
        Path(output).write_text(text)
    else:
        click.echo(text, nl=False)


def parse_params(values: tuple[str, ...]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in values:
        if "=" not in item:
            raise click.UsageError(f"--param expects name=value, got {item!r}")
        name, value = item.split("=", 1)
        params[name.strip()] = _typed(value)
    return params


def _typed(value: str) -> Any:
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def _store(ctx: click.Context) -> Any:
    from .store import Store

    return Store(ctx.obj.get("store"))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", "-s", envvar="RUNSTORE_STORE", default=None,
              help="Store directory (default: $RUNSTORE_STORE, else ./.runstore).")
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.version_option(package_name="runstore")
@click.pass_context
def main(ctx: click.Context, store: str | None, debug: bool) -> None:
    """runstore: ingest training-run logs and ask cross-run questions in SQL.

    Example:

        runstore ingest runs/ && runstore sql "select run_name, kind from runs"
    """
    ctx.ensure_object(dict)
    ctx.obj.update(store=store, debug=debug)


class _Progress:
    """A one-line progress bar on stderr (runs and bytes), only when stderr is a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.last = 0.0

    def __call__(self, done: int, total: int, nbytes: int, name: str) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.1 and done < total):
            return
        self.last = now
        width = 24
        filled = int(width * done / total) if total else width
        bar = "#" * filled + "-" * (width - filled)
        line = f"\r[{bar}] {done}/{total} runs, {nbytes / 1e6:.1f} MB  {name[-40:]}"
        click.echo(line.ljust(100)[:120], err=True, nl=False)
        if done == total:
            click.echo("", err=True)


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@click.option("--watch", type=float, default=None, metavar="SECONDS",
              help="Ingest again every SECONDS until Ctrl-C.")
@click.option("--lock-timeout", type=float, default=60.0, show_default=True,
              help="Seconds to wait for another ingest holding the store.")
@click.pass_context
@handle_errors
def ingest(ctx: click.Context, paths: tuple[str, ...], quiet: bool, watch: float | None,
           lock_timeout: float) -> None:
    """Ingest every run found under PATHS (at any depth), incrementally.

    Example:

        runstore ingest runs/            # first time: everything

        runstore ingest runs/            # again: only what changed
    """
    store = _store(ctx)
    progress = _Progress(not quiet and sys.stderr.isatty())
    warn = None if quiet else (lambda text: click.echo(f"warning: {text}", err=True))
    while True:
        report = store.ingest(list(paths), progress=progress, on_warning=warn,
                              lock_timeout=lock_timeout)
        if not quiet:
            click.echo(report.summary(), err=True)
        if watch is None:
            return
        try:
            time.sleep(watch)
        except KeyboardInterrupt:
            return


@main.command()
@click.argument("query", required=False)
@click.option("--file", "-f", "file", type=click.File("r"), help="Read the query from FILE ('-' for stdin).")
@click.option("--param", "-p", "params", multiple=True, metavar="NAME=VALUE",
              help="Bind $NAME to VALUE (repeatable); never pasted into the SQL text. A NAME "
                   "that is a setting (kl_threshold) overrides it for this query.")
@output_options
@click.pass_context
@handle_errors
def sql(ctx: click.Context, query: str | None, file: Any, params: tuple[str, ...],
        fmt: str | None, output: str | None) -> None:
    """Run one read-only SQL query over the store's tables and views.

    The query comes from QUERY, from -f FILE, or from stdin (QUERY '-' or a pipe). Only
    queries run: INSERT, CREATE, COPY, ATTACH, SET and every other statement are refused.
    `runstore views` and `runstore schema` list what there is to query.

    Example:

    \b
        runstore sql "select run_name, max_kl_v1 from kl_health where flagged" -F json
        runstore sql "select * from kl_health where flagged" --param kl_threshold=0.02
        runstore sql 'select * from runs where run_name glob $g' --param g='math_rl/*'
        runstore sql -f question.sql -o answer.parquet --format parquet
    """
    if file is not None:
        if query is not None:
            raise click.UsageError("give the query as QUERY or with -f FILE, not both")
        query = file.read()
    elif query is None or query == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError("give a QUERY, -f FILE, or pipe the query on stdin")
        query = sys.stdin.read()
    table = _store(ctx).arrow(query, parse_params(params))
    emit(table, fmt, output)


@main.command()
@click.option("--kind", type=click.Choice(["rl", "sl", "dpo", "unknown"]),
              help="Only runs of this kind.")
@click.option("--name", metavar="GLOB", help="Only runs whose run_name matches GLOB (* matches / too).")
@click.option("--where", metavar="SQL-EXPR",
              help="Only runs for which this SQL condition over run_summary's columns holds.")
@output_options
@click.pass_context
@handle_errors
def runs(ctx: click.Context, kind: str | None, name: str | None, where: str | None,
         fmt: str | None, output: str | None) -> None:
    """List runs with their summary (the run_summary view), ordered by name.

    Example:

    \b
        runstore runs --kind rl --name 'math_rl_sweep/*'
        runstore runs --where "best_reward > 0.5 and not kl_flagged" -F csv
    """
    from .statements import runs_query

    emit(_store(ctx).arrow(*runs_query(kind=kind, name=name, where=where)), fmt, output)


@main.command()
@click.option("--dialect", type=click.Choice(["spark", "trino"]),
              help="Print every view as CREATE OR REPLACE [TEMP] VIEW for this engine instead.")
@output_options
@handle_errors
def views(dialect: str | None, fmt: str | None, output: str | None) -> None:
    """List the canned views with their descriptions and columns.

    With --dialect, print them transpiled for Spark or Trino, in dependency order, ready to
    run over tables with runstore's names. With --format, one row per view column.

    Example:

    \b
        runstore views
        runstore views --dialect spark > runstore_views.sql
    """
    from . import catalog

    if dialect is not None:
        _write_text(catalog.views_ddl(dialect), output)
    elif fmt is not None:
        emit(catalog.views_table(), fmt, output)
    else:
        _write_text(catalog.views_text(), output)


@main.command()
@click.argument("table", required=False)
@output_options
@handle_errors
def schema(table: str | None, fmt: str | None, output: str | None) -> None:
    """List the tables (or one TABLE) with their columns, types and comments.

    Example:

    \b
        runstore schema
        runstore schema metrics_raw
    """
    from . import catalog

    emit(catalog.schema_table(table), fmt, output)


def _write_text(text: str, output: str | None) -> None:
    if output:
        Path(output).write_text(text)
    else:
        click.echo(text, nl=False)


@main.command()
@click.option("--list", "list_", is_flag=True, help="Only list applied and pending migrations.")
@click.pass_context
@handle_errors
def migrate(ctx: click.Context, list_: bool) -> None:
    """Apply pending schema migrations (or list them with --list, read-only).

    Example:

        runstore migrate --list
    """
    from . import migrate as mig

    store = _store(ctx)
    manifest = store.manifest() if list_ else None
    if not list_:
        for name in store.migrate():
            click.echo(f"applied {name}")
        manifest = store.manifest()
    assert manifest is not None
    click.echo(f"schema version {manifest.schema_version}")
    for m in manifest.migrations:
        click.echo(f"  applied  {m['name']}  {m['applied_at']}  {m.get('doc', '')}")
    for m in mig.pending(manifest):
        click.echo(f"  pending  {m.name}  {m.doc}")


@main.command()
@click.option("--vacuum-hours", type=float, default=None,
              help="Also delete files unreferenced for more than this many hours.")
@click.pass_context
@handle_errors
def compact(ctx: click.Context, vacuum_hours: float | None) -> None:
    """Rewrite each table into few files and checkpoint its Delta log.

    Example:

        runstore compact --vacuum-hours 1
    """
    before = _store(ctx).compact(vacuum_hours=vacuum_hours)
    for name, n in sorted(before.items()):
        click.echo(f"{name}: {n} file{'s' if n != 1 else ''} before")


@main.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.pass_context
@handle_errors
def demo(ctx: click.Context, directory: str | None) -> None:
    """Write a realistic run tree, ingest it, and answer a few questions.

    Example:

        runstore demo /tmp/runstore-demo
    """
    from .showcase import run_demo

    base = Path(directory or "runstore-demo")
    run_demo(base, store=ctx.obj.get("store"), echo=click.echo)


if __name__ == "__main__":  # pragma: no cover
    main()
