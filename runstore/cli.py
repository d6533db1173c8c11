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
              help="Store directory, or s3://bucket/prefix for a store on S3 (default: "
              "$RUNSTORE_STORE, else ./.runstore).")
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
@click.option("--watch", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="SECONDS",
              help="Ingest again every SECONDS until Ctrl-C, printing each health rule "
                   "that starts firing once (see --check).")
@click.option("--check/--no-check", "check", default=None,
              help="Evaluate the health rules (as `runstore check` with no options: the KL "
                   "rule and runstore.toml's) after each pass and print newly firing ones. "
                   "On by default with --watch.")
@click.option("--lock-timeout", type=float, default=60.0, show_default=True,
              help="Seconds to wait for another ingest holding the store.")
@click.pass_context
@handle_errors
def ingest(ctx: click.Context, paths: tuple[str, ...], quiet: bool, watch: float | None,
           check: bool | None, lock_timeout: float) -> None:
    """Ingest every run found under PATHS (at any depth), incrementally.

    A path may be a directory or an s3://bucket/prefix (read with the AWS environment's
    credentials and endpoint; objects are re-read when their size or ETag changes).

    With --watch, keep ingesting every SECONDS until Ctrl-C (or SIGTERM), which ends it
    cleanly. Paths and runs may appear and vanish meanwhile. Each (run, rule) that starts
    firing is printed once on stdout (also with --quiet) as
    `FIRED run: rule since step N (...)`.

    Example:

    \b
        runstore ingest runs/            # first time: everything
        runstore ingest runs/            # again: only what changed
        runstore ingest runs/ --watch 30 # live runs: ingest and check every 30 s
        runstore --store s3://team-logs/runstore ingest s3://team-logs/runs/
    """
    store = _store(ctx)
    progress = _Progress(not quiet and sys.stderr.isatty())
    warn = None if quiet else (lambda text: click.echo(f"warning: {text}", err=True))
    summary = None if quiet else (lambda report: click.echo(report.summary(), err=True))
    if watch is None and not check:
        report = store.ingest(list(paths), progress=progress, on_warning=warn,
                              lock_timeout=lock_timeout)
        if summary:
            summary(report)
        return
    from .watch import watch as watch_runs

    watch_runs(store, list(paths), interval=watch, check=check is not False,
               on_alert=lambda alert: click.echo(alert.text()), on_report=summary,
               on_warning=warn, progress=progress, lock_timeout=lock_timeout)


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
@click.option("--threshold", type=float, default=None, metavar="X",
              help="Threshold of the default KL rule (default: runstore.toml's [check] "
                   "threshold, else the store's kl_threshold setting, else 0.01).")
@click.option("--rule", "rules", multiple=True, metavar="EXPR",
              help='Also check METRIC OP NUMBER, e.g. "optim/entropy < 0.05" (OP: > >= < <=; '
                   "repeatable; double-quote a name with spaces, quotes, brackets or "
                   "commas).")
@click.option("--default-rules/--no-default-rules", "default_rules", default=None,
              help="Include the default KL rule (default: yes, unless runstore.toml says "
                   "default_rules = false).")
@click.option("--runs", metavar="GLOB",
              help="Only runs whose run_name matches GLOB (* matches / too).")
@click.option("--since-step", type=int, metavar="N", help="Ignore steps before N.")
@output_options
@click.pass_context
@handle_errors
def check(ctx: click.Context, threshold: float | None, rules: tuple[str, ...],
          default_rules: bool | None, runs: str | None, since_step: int | None,
          fmt: str | None, output: str | None) -> None:
    """Flag runs whose health rules fire: one row per (run, rule) that fires.

    The default rule is KL (optim/kl_sample_train_v1 or v2, with or without optim/)
    strictly above 0.01 at some step, with kl_health's semantics: only the latest write of a
    step counts, NaN never fires, +Infinity does. More rules come from --rule and from
    [[check.rule]] in a runstore.toml beside the store or in the working directory.

    Exit status: 0 when nothing fired, 1 when a rule fired, 2 for a usage or store error.

    Example:

    \b
        runstore ingest runs/ && runstore check          # gate a CI job
        runstore check --threshold 0.02 --rule "optim/entropy < 0.05" -F json
        runstore check --runs 'math_rl_sweep/*' --since-step 100
    """
    from . import checks

    try:
        table = checks.run_check(_store(ctx), threshold=threshold, rules=rules, runs=runs,
                                 since_step=since_step, default_rules=default_rules)
    except RunstoreError as e:
        e.exit_code = 2  # 1 means "a rule fired", so every error here is a 2
        raise
    emit(table, fmt, output)
    if table.num_rows:
        ctx.exit(1)


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
@click.option("--lock-timeout", type=float, default=60.0, show_default=True,
              help="Seconds to wait for an ingest holding the store.")
@click.pass_context
@handle_errors
def repair(ctx: click.Context, lock_timeout: float) -> None:
    """Mend a damaged store: missing or corrupt files, a broken Delta log, manifest or ledger.

    What cannot be read is set aside under _runstore/quarantine/; the sources whose rows were
    lost are read again by the next ingest. See docs/reliability.md.

    Example:

        runstore repair && runstore ingest runs/
    """
    report = _store(ctx).repair(lock_timeout=lock_timeout)
    for action in report.actions:
        click.echo(f"- {action}")
    click.echo(report.summary())


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


# -- pictures: plot, report, trace (runstore.charts / report / perfetto) ----------------------

_RUNS_GLOB = click.option("--runs", metavar="GLOB",
                          help="Only runs whose run_name matches GLOB (* matches / too).")
_HTML_OUT = click.option("--output", "-o", "output", required=True,
                         type=click.Path(dir_okay=False), help="HTML file to write.")


def _wrote(path: Any) -> None:
    size = Path(path).stat().st_size
    shown = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB"
    click.echo(f"wrote {path} ({shown})", err=True)


def _write_chart(fig: Any, output: str) -> None:
    from .charts import write_html

    _wrote(write_html(fig, output))


@main.group()
def plot() -> None:
    """Draw one chart into a self-contained HTML file (plotly.js inlined: opens offline).

    Example:

    \b
        runstore plot metric env/all/reward/total --color-by learning_rate -o reward.html
        runstore plot kl -o kl.html
    """


@plot.command("metric")
@click.argument("keys", nargs=-1, required=True)
@_RUNS_GLOB
@click.option("--color-by", metavar="CONFIG_KEY",
              help="Colour runs by the value of this flattened config key (e.g. learning_rate).")
@click.option("--smooth", type=click.IntRange(min=1), metavar="N",
              help="Add an N-step exponential moving average; the raw line stays faint.")
@_HTML_OUT
@click.pass_context
@handle_errors
def plot_metric(ctx: click.Context, keys: tuple[str, ...], runs: str | None,
                color_by: str | None, smooth: int | None, output: str) -> None:
    """One line per run and metric KEY over steps.

    Example:

    \b
        runstore plot metric env/all/reward/total --runs 'math_rl_sweep/*' \\
            --color-by learning_rate --smooth 10 -o reward.html
    """
    _write_chart(_store(ctx).plot_metric(list(keys), runs=runs, color_by=color_by,
                                         smooth=smooth), output)


@plot.command("kl")
@_RUNS_GLOB
@click.option("--threshold", type=float, metavar="X",
              help="KL threshold (default: the store's kl_threshold setting, 0.01).")
@_HTML_OUT
@click.pass_context
@handle_errors
def plot_kl(ctx: click.Context, runs: str | None, threshold: float | None, output: str) -> None:
    """KL v1 and v2 per run, the threshold dashed, flagged runs on top and in the title.

    Example:

    \b
        runstore plot kl -o kl.html
        runstore plot kl --runs 'gsm8k_tool_rl/*' --threshold 0.005 -o kl.html
    """
    _write_chart(_store(ctx).plot_kl(runs=runs, threshold=threshold), output)


@plot.command("rewards")
@_RUNS_GLOB
@click.option("--color-by", metavar="CONFIG_KEY",
              help="Colour runs by the value of this flattened config key.")
@_HTML_OUT
@click.pass_context
@handle_errors
def plot_rewards(ctx: click.Context, runs: str | None, color_by: str | None,
                 output: str) -> None:
    """Reward per step (faint) and its 10-step moving average (reward_trends), per run.

    Example:

    \b
        runstore plot rewards --color-by model_name -o rewards.html
    """
    _write_chart(_store(ctx).plot_rewards(runs=runs, color_by=color_by), output)


@plot.command("spans")
@click.argument("run")
@click.option("--step", type=int, metavar="N", help="Step of the Gantt chart (default: the last).")
@_HTML_OUT
@click.pass_context
@handle_errors
def plot_spans(ctx: click.Context, run: str, step: int | None, output: str) -> None:
    """Gantt chart of one step's spans of RUN, and each span's share of step time.

    RUN is a run_name, or a GLOB that matches exactly one run.

    Example:

    \b
        runstore plot spans gsm8k_tool_rl/sweep/lr_1e-4/seed_0 --step 10 -o spans.html
    """
    _write_chart(_store(ctx).plot_spans(run, step=step), output)


@main.command()
@_HTML_OUT
@_RUNS_GLOB
@click.pass_context
@handle_errors
def report(ctx: click.Context, output: str, runs: str | None) -> None:
    """Write one self-contained HTML report: runs, KL health, rewards, spans, checkpoints.

    The file opens with no network (plotly.js is inlined once).

    Example:

    \b
        runstore report -o report.html
        runstore report --runs 'math_rl_sweep/*' -o math.html
    """
    _wrote(_store(ctx).report(output, runs=runs))


@main.command()
@click.argument("run")
@click.option("--step", type=int, metavar="N",
              help="Only step N: slices tagged with it or inside its time window.")
@click.option("--segment", type=int, metavar="K",
              help="Only process session K of a resumed run (0, 1, ...).")
@click.option("--from", "source", type=click.Choice(["auto", "trace", "spans"]), default="auto",
              show_default=True,
              help="trace_events.jsonl slices, or timing spans (auto: the trace when there is one).")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False),
              help="Write to FILE instead of standard output.")
@click.pass_context
@handle_errors
def trace(ctx: click.Context, run: str, step: int | None, segment: int | None, source: str,
          output: str | None) -> None:
    """Export RUN's timing as a Chrome trace JSON array for Perfetto UI or chrome://tracing.

    RUN is a run_name, or a GLOB that matches exactly one run. Without trace_events.jsonl the
    run's timing spans are exported instead (one track per nesting depth, steps end to end).

    Example:

    \b
        runstore trace gsm8k_tool_rl/sweep/lr_3e-4/seed_1 --step 10 -o trace.json
        runstore trace 'sl/*' --segment 0 -o trace.json   # then open it in ui.perfetto.dev
    """
    from .perfetto import dumps

    if step is not None and segment is not None:
        raise click.UsageError("give --step or --segment, not both")
    text = dumps(_store(ctx).trace(run, step=step, segment=segment, source=source))
    _write_text(text, output)
    if output:
        _wrote(output)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--watch", type=click.FloatRange(min=0, min_open=True), default=None,
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
@click.pass_context
@handle_errors
def ui(ctx: click.Context, paths: tuple[str, ...], watch: float | None, host: str, port: int,
       token: str | None) -> None:
    """Serve the store as a local web app: runs, charts, SQL, checkpoints, timing, rollouts.

    Prints the URL to open and serves until Ctrl-C; it opens no browser and reads no
    network. PATHS are ingested once before serving (with --watch: every SECONDS). Nothing
    else the app does writes the store or the run directories. See docs/ui.md.

    Example:

    \b
        runstore ui                              # http://127.0.0.1:8765
        runstore ui runs/ --watch 30             # live: ingest runs/ every 30 s
        runstore ui --host 0.0.0.0 --port 9000   # prints a URL with ?token=...
    """
    from .ui.server import serve

    serve(_store(ctx), paths=list(paths), watch=watch, host=host, port=port, token=token)


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
