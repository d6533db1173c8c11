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

from ..errors import RunstoreError

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
        except KeyboardInterrupt as e:
            # An ingest's says what it kept (it carries the report); others were just stopped.
            click.echo(str(e) if hasattr(e, "report") else "interrupted", err=True)
            ctx.exit(130)

    return wrapper


def _remember_wide(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    ctx.meta["runstore.wide"] = value
    return value


def output_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    # --wide reaches `emit` through the context, so commands need no parameter for it.
    fn = click.option("--wide", is_flag=True, expose_value=False, callback=_remember_wide,
                      help="Table format: cut nothing, one line per row however wide "
                           "(default: fit the terminal or $COLUMNS, cutting other text but "
                           "never run names or keys, and one block per row when that is not "
                           "enough).")(fn)
    fn = click.option("--output", "-o", "output", type=click.Path(dir_okay=False),
                      help="Write to FILE instead of standard output.")(fn)
    fn = click.option("--format", "-F", "fmt", type=click.Choice(FORMATS),
                      help="Output format (default: from the --output extension: .json "
                           ".jsonl .csv .md .parquet; else table on a terminal, else csv).")(fn)
    return fn


def output_format(fmt: str | None, output: str | None) -> str | None:
    """The format asked for: --format, else the one --output's extension names, else None."""
    from ..present.render import format_for

    return fmt or format_for(output)


def emit(table: Any, fmt: str | None, output: str | None) -> None:
    from ..present import render as out

    fmt = output_format(fmt, output)
    if fmt is None:
        fmt = "table" if (output is None and sys.stdout.isatty()) else "csv"
    if fmt == "parquet":
        if not output:
            raise click.UsageError("--format parquet needs --output FILE")
        out.write_parquet(table, output)
        return
    wide = bool(click.get_current_context().meta.get("runstore.wide"))
    # shutil reads $COLUMNS first, then asks the terminal; a file has no width to fit.
    width = shutil.get_terminal_size((100, 24)).columns if output is None else 10_000
    _write_text(out.render(table, fmt, width=width, wide=wide), output)


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


def _existing(path: str) -> str:
    """A local path that exists, or an s3:// URI (checked when the query reads it)."""
    from ..storage.location import is_remote

    if not is_remote(path) and not Path(path).expanduser().exists():
        raise click.BadParameter(f"{path!r} does not exist", param_hint="'--allow-read'")
    return path


def _store(ctx: click.Context) -> Any:
    from ..store import Store

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

    Commands that print rows share --format, --output and --wide. Tables (the default on a
    terminal) fit its width ($COLUMNS if set) without cutting numbers or identifying columns
    (run_name, run_id, key, metric, name, rule, split, evaluator, conversation_id, table,
    column, view): other text is cut in the middle first, and a table that still does not fit
    prints one block of `column  value` lines per row. -o FILE picks the format from the
    extension (.json .jsonl .csv .md .parquet) unless --format is given.

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
        self.drawn = False  # a bar is on the line, not yet ended by a newline

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
        self.drawn = done < total
        if done == total:
            click.echo("", err=True)

    def end_line(self) -> None:
        """End a bar left unfinished (the ingest stopped before its last run)."""
        if self.drawn:
            click.echo("", err=True)
            self.drawn = False


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

    Ctrl-C (or SIGTERM) stops at the next whole file: what was read is published, the
    command says how much was kept and exits 130, and running it again continues from there.
    A second Ctrl-C stops at once (the store keeps its last snapshot).

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
        from ..ingest.interrupts import Interrupts

        # Ctrl-C or SIGTERM: publish what was read whole, then exit 130 saying what was kept;
        # a second one exits at once.
        with Interrupts(("SIGINT", "SIGTERM"), exit_at_once=True) as interrupts:
            try:
                report = store.ingest(list(paths), progress=progress, on_warning=warn,
                                      lock_timeout=lock_timeout, interrupts=interrupts)
            except KeyboardInterrupt:
                progress.end_line()  # the message goes below the bar, not after it
                raise
        if summary:
            summary(report)
        return
    from ..health.watch import watch as watch_runs

    watch_runs(store, list(paths), interval=watch, check=check is not False,
               on_alert=lambda alert: click.echo(alert.text()), on_report=summary,
               on_warning=warn, progress=progress, lock_timeout=lock_timeout)


@main.command()
@click.argument("query", required=False)
@click.option("--file", "-f", "file", type=click.File("r"), help="Read the query from FILE ('-' for stdin).")
@click.option("--param", "-p", "params", multiple=True, metavar="NAME=VALUE",
              help="Bind $NAME to VALUE (repeatable); never pasted into the SQL text. A NAME "
                   "that is a setting (kl_threshold) overrides it for this query.")
@click.option("--allow-read", "allow_read", multiple=True, metavar="PATH",
              callback=lambda ctx, param, values: tuple(_existing(v) for v in values),
              help="Also let the query read this file, or the files under this directory, "
                   "or this s3:// object (repeatable). Without it a query reads only the "
                   "store's own files.")
@output_options
@click.pass_context
@handle_errors
def sql(ctx: click.Context, query: str | None, file: Any, params: tuple[str, ...],
        allow_read: tuple[str, ...], fmt: str | None, output: str | None) -> None:
    """Run one read-only SQL query over the store's tables and views.

    The query comes from QUERY, from -f FILE, or from stdin (QUERY '-' or a pipe). Only
    queries run: INSERT, CREATE, COPY, ATTACH, SET and every other statement are refused.
    The query reads only the store's own files (DuckDB's sandbox): to join a file of your
    own, name it with --allow-read. `runstore views` and `runstore schema` list what there is
    to query.

    Example:

    \b
        runstore sql "select run_name, max_kl_v1 from kl_health where flagged" -F json
        runstore sql "select * from kl_health where flagged" --param kl_threshold=0.02
        runstore sql 'select * from runs where run_name glob $g' --param g='math_rl/*'
        runstore sql -f question.sql -o answer.parquet --format parquet
        runstore sql "from runs join read_csv('teams.csv') using (run_name)" \\
            --allow-read teams.csv
    """
    if file is not None:
        if query is not None:
            raise click.UsageError("give the query as QUERY or with -f FILE, not both")
        query = file.read()
    elif query is None or query == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError("give a QUERY, -f FILE, or pipe the query on stdin")
        query = sys.stdin.read()
    from ..present import render as out

    # Plain rows where they print the same as Arrow, so most answers need no pyarrow; a
    # Parquet file needs the Arrow table.
    parquet = output_format(fmt, output) == "parquet"
    table = _store(ctx).fetch(query, parse_params(params), allow_read=list(allow_read) or None,
                              convert=(lambda rel: rel.to_arrow_table()) if parquet
                              else out.from_relation)
    emit(table, fmt, output)


@main.command()
@click.option("--kind", type=click.Choice(["rl", "sl", "dpo", "unknown"]),
              help="Only runs of this kind.")
@click.option("--name", metavar="GLOB", help="Only runs whose run_name matches GLOB (* matches / too).")
@click.option("--where", metavar="SQL-EXPR",
              help="Only runs for which this SQL condition over run_summary's columns holds.")
@click.option("--columns", "-c", metavar="COL,...",
              help="Show these run_summary columns, in this order (default: every column but "
                   "run_id; `all`: every column).")
@output_options
@click.pass_context
@handle_errors
def runs(ctx: click.Context, kind: str | None, name: str | None, where: str | None,
         columns: str | None, fmt: str | None, output: str | None) -> None:
    """List runs with their summary (the run_summary view), ordered by name.

    run_id is left out unless asked for (`--columns all`, or name it in --columns): it is
    for joins, and run_name already tells the runs apart.

    Example:

    \b
        runstore runs --kind rl --name 'math_rl_sweep/*'
        runstore runs --where "best_reward > 0.5 and not kl_flagged" -F csv
        runstore runs --columns run_name,status,last_step,max_kl
    """
    from ..query.statements import runs_query, summary_columns

    if columns is None:
        chosen: list[str] | None = [c for c in summary_columns() if c != "run_id"]
    elif columns.strip().lower() == "all":
        chosen = None
    else:
        chosen = [c.strip() for c in columns.split(",") if c.strip()]
    emit(_store(ctx).arrow(*runs_query(kind=kind, name=name, where=where, columns=chosen)),
         fmt, output)


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

    A rule naming a metric that no run in the store has logged is an error that names the
    closest logged keys (a misspelt rule would never fire). Fired or not, one line on stderr
    says how many runs each rule fired for and how many it checked, e.g.
    `kl_sample_train_v1|v2 > 0.01 fired for 0 of 23 runs (21 checked, 2 without KL)`; with
    --format markdown and nothing fired, that line is the output.

    Exit status: 0 when nothing fired, 1 when a rule fired, 2 for a usage or store error
    (an unknown metric too).

    Example:

    \b
        runstore ingest runs/ && runstore check          # gate a CI job
        runstore check --threshold 0.02 --rule "optim/entropy < 0.05" -F json
        runstore check --runs 'math_rl_sweep/*' --since-step 100
    """
    from ..health import evaluate as checks

    try:
        result = checks.check(_store(ctx), threshold=threshold, rules=rules, runs=runs,
                              since_step=since_step, default_rules=default_rules)
    except RunstoreError as e:
        e.exit_code = 2  # 1 means "a rule fired", so every error here is a 2
        raise
    if output_format(fmt, output) == "markdown" and not result.table.num_rows:
        # For $GITHUB_STEP_SUMMARY: the verdict, not a table with a header and no rows.
        _write_text(result.summary() + "\n", output)
    else:
        emit(result.table, fmt, output)
    click.echo(result.summary(), err=True)
    if result.table.num_rows:
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
    from ..query import catalog

    if dialect is not None:
        _write_text(catalog.views_ddl(dialect), output)
    elif output_format(fmt, output) is not None:
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
    from ..query import catalog

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
    from ..storage import migrate as mig

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
@click.option("--check", "check_only", is_flag=True,
              help="Change nothing: read every live file in full, check it against the "
              "content hash recorded when it was written, and list what is damaged (exit "
              "code 1 when anything is).")
@click.option("--lock-timeout", type=float, default=60.0, show_default=True,
              help="Seconds to wait for an ingest holding the store.")
@click.pass_context
@handle_errors
def repair(ctx: click.Context, check_only: bool, lock_timeout: float) -> None:
    """Mend a damaged store: lost or rotten files, Delta logs, manifests, ledger, lock.

    Missing, unreadable or bit-rotten data files (their bytes no longer match the content hash
    recorded when they were written), broken Delta logs, invalid manifests, ledger or lock.
    What cannot be read is set aside under _runstore/quarantine/; the sources whose rows were
    lost are read again by the next ingest. With --check, only report (by file name) what
    repair would mend. See docs/reliability.md.

    Example:

        runstore repair --check || (runstore repair && runstore ingest runs/)
    """
    report = _store(ctx).repair(check=check_only, lock_timeout=lock_timeout)
    for problem in report.problems if check_only else report.actions:
        click.echo(f"- {problem}")
    click.echo(report.summary())
    if check_only and report.problems:
        ctx.exit(1)


@main.command()
@click.option("--vacuum-hours", type=click.FloatRange(min=0), default=None, metavar="H",
              help="Then delete the files that no kept snapshot lists and none has listed for "
              "more than H hours (fractions allowed; at least 10 minutes, for queries still "
              "reading an older snapshot).")
@click.option("--lock-timeout", type=float, default=60.0, show_default=True,
              help="Seconds to wait for an ingest holding the store.")
@click.pass_context
@handle_errors
def compact(ctx: click.Context, vacuum_hours: float | None, lock_timeout: float) -> None:
    """Rewrite each table into few files and checkpoint its Delta log.

    The replaced files stay until a vacuum deletes them, after the new snapshot is published.

    Example:

        runstore compact --vacuum-hours 24
    """
    report = _store(ctx).compact(vacuum_hours=vacuum_hours, lock_timeout=lock_timeout)
    for name, n in sorted(report.files_before.items()):
        click.echo(f"{name}: {n} file{'s' if n != 1 else ''} before")
    if report.vacuum is not None:
        click.echo(report.vacuum.summary())


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
    from ..present.charts import write_html

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

    A KEY that no run in the store has logged is an error naming the closest logged keys; a
    KEY that only some runs log gets a note on stderr saying how many.

    Example:

    \b
        runstore plot metric env/all/reward/total --runs 'math_rl_sweep/*' \\
            --color-by learning_rate --smooth 10 -o reward.html
    """
    from ..query.keys import coverage

    store = _store(ctx)
    _write_chart(store.plot_metric(list(keys), runs=runs, color_by=color_by, smooth=smooth),
                 output)
    for note in coverage(store, list(dict.fromkeys(keys)), runs=runs).notes():
        click.echo(note, err=True)


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
    from ..present.trace_export import dumps

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
    from ..ui.server import serve

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
    from ..demo.showcase import run_demo

    base = Path(directory or "runstore-demo")
    run_demo(base, store=ctx.obj.get("store"), echo=click.echo)


if __name__ == "__main__":  # pragma: no cover
    main()
