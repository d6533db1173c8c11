"""`runstore sql`, `runs`, `check`, `views`, `schema`: commands that answer questions."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..errors import RunstoreError
from ..query.dialects import DIALECTS
from .common import (Seconds, emit, existing, handle_errors, notifier, notify_option,
                     open_store, output_format, output_options, parse_params, write_text)


@click.command()
@click.argument("query", required=False)
@click.option("--file", "-f", "file", type=click.File("r"), help="Read the query from FILE ('-' for stdin).")
@click.option("--param", "-p", "params", multiple=True, metavar="NAME=VALUE",
              help="Bind $NAME to VALUE (repeatable); never pasted into the SQL text. A NAME "
                   "that is a setting (kl_threshold) overrides it for this query.")
@click.option("--allow-read", "allow_read", multiple=True, metavar="PATH",
              callback=lambda ctx, param, values: tuple(existing(v) for v in values),
              help="Also let the query read this file, or the files under this directory, "
                   "or this s3:// object (repeatable). Without it a query reads only the "
                   "store's own files.")
@click.option("--timeout", type=Seconds(), default=None,
              metavar="SECONDS",
              help="Stop the query if it still runs after SECONDS (an error, exit 1; "
                   "default: no limit).")
@output_options
@click.pass_context
@handle_errors
def sql(ctx: click.Context, query: str | None, file: Any, params: tuple[str, ...],
        allow_read: tuple[str, ...], timeout: float | None, fmt: str | None,
        output: str | None) -> None:
    """Run one read-only SQL query over the store's tables and views.

    The query comes from QUERY, from -f FILE, or from stdin (QUERY '-' or a pipe). Only
    queries run: INSERT, CREATE, COPY, ATTACH, SET and every other statement are refused.
    The query reads only the store's own files (DuckDB's sandbox): to join a file of your
    own, name it with --allow-read. `runstore views` and `runstore schema` list what there is
    to query. With --timeout, a query still running after that many seconds is stopped
    (DuckDB's own interrupt) and the command fails with an error saying so.

    Example:

    \b
        runstore sql "select run_name, max_kl_v1 from kl_health where flagged" -F json
        runstore sql "select * from kl_health where flagged" --param kl_threshold=0.02
        runstore sql 'select * from runs where run_name glob $g' --param g='math_rl_sweep/*'
        runstore sql -f question.sql -o answer.parquet --format parquet
        runstore sql --timeout 60 "select key, count(*) from metrics_raw group by key"
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
    from ..query.rows import from_relation

    # Plain rows where they print the same as Arrow, so most answers need no pyarrow; a
    # Parquet file needs the Arrow table.
    parquet = output_format(fmt, output) == "parquet"
    table = open_store(ctx).fetch(query, parse_params(params), allow_read=list(allow_read) or None,
                              convert=(lambda rel: rel.to_arrow_table()) if parquet
                              else from_relation, timeout=timeout)
    emit(table, fmt, output)


@click.command()
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
    from ..query.statements.frames import runs_query, summary_columns

    if columns is None:
        chosen: list[str] | None = [c for c in summary_columns() if c != "run_id"]
    elif columns.strip().lower() == "all":
        chosen = None
    else:
        chosen = [c.strip() for c in columns.split(",") if c.strip()]
    emit(open_store(ctx).arrow(*runs_query(kind=kind, name=name, where=where, columns=chosen)),
         fmt, output)


@click.command()
@click.option("--threshold", type=float, default=None, metavar="X",
              help="Threshold of the default KL rule (default: runstore.toml's [check] "
                   "threshold, else the store's kl_threshold setting, else 0.01).")
@click.option("--rule", "rules", multiple=True, metavar="EXPR",
              help='Also check METRIC OP NUMBER, e.g. "optim/entropy < 0.05" (OP: > >= < <=), '
                   'or a trend rule: "drop(METRIC) > X", "rise(METRIC) > X", "stale > '
                   'MINUTES" (repeatable; double-quote a name with spaces, quotes, brackets '
                   "or commas; see docs/checks.md).")
@click.option("--default-rules/--no-default-rules", "default_rules", default=None,
              help="Include the default KL rule (default: yes, unless runstore.toml says "
                   "default_rules = false).")
@click.option("--runs", metavar="GLOB",
              help="Only runs whose run_name matches GLOB (* matches / too).")
@click.option("--since-step", type=int, metavar="N", help="Ignore steps before N.")
@notify_option
@output_options
@click.pass_context
@handle_errors
def check(ctx: click.Context, threshold: float | None, rules: tuple[str, ...],
          default_rules: bool | None, runs: str | None, since_step: int | None,
          notify: tuple[str, ...], fmt: str | None, output: str | None) -> None:
    """Flag runs whose health rules fire: one row per (run, rule) that fires.

    The default rule is KL (optim/kl_sample_train_v1 or v2, with or without optim/)
    strictly above 0.01 at some step, with kl_health's semantics: only the latest write of a
    step counts, NaN never fires, +Infinity does. More rules come from --rule and from
    [[check.rule]] in a runstore.toml beside the store or in the working directory.

    Trend rules: drop(METRIC) > X fires where the smoothed metric (debiased EMA, weight 0.9
    unless drop(METRIC, W)) fell more than X below its best so far; rise(METRIC) > X where
    it is above X times the running median of the earlier values (rise(time/total) > 2: step
    time doubled); stale > MINUTES for a run not completed whose files have not changed for
    MINUTES (as of the last ingest). Each fired (run, rule) is also POSTed to every --notify
    URL.

    A rule naming a metric that no run in the store has logged is an error that names the
    closest logged keys (a misspelt rule would never fire). Fired or not, one line on stderr
    says how many runs each rule fired for and how many it checked, e.g.
    `kl_sample_train_v1|v2 > 0.01 fired for 0 of 23 runs (21 checked, 2 without KL)`; with
    --format markdown and nothing fired, that line is the output.

    Exit status: 0 when nothing fired, 1 when a rule fired, 2 for a usage or store error
    (an unknown metric too).

    Example:

    \b
        runstore ingest runs/ && runstore check   # gate a CI job: exit 1 when a rule fires
        runstore check --threshold 0.02 --rule "optim/entropy < 0.05" -F json  # exit 1
        runstore check --runs 'math_rl_sweep/*' --since-step 20
        runstore check --rule "drop(env/all/reward/total) > 0.2" --rule "stale > 30"  # exit 1
    """
    from ..health import evaluate

    store = open_store(ctx)
    try:
        alerts = notifier(store, notify, lambda text: click.echo(f"warning: {text}", err=True))
        # Plain rows unless a Parquet file is asked for: a check of threshold rules then
        # imports no pyarrow (a CI gate runs it after every ingest).
        result = evaluate.check(store, threshold=threshold, rules=rules, runs=runs,
                                since_step=since_step, default_rules=default_rules,
                                arrow=output_format(fmt, output) == "parquet")
    except RunstoreError as e:
        e.exit_code = 2  # 1 means "a rule fired", so every error here is a 2
        raise
    if alerts is not None:
        from ..health.watch import Alert

        # Every row is a firing of this check; the webhook gets them while the table prints.
        for run_id, row in zip(result.run_ids, result.rows.to_pylist()):
            alerts.notify(Alert(run_id=run_id, **row))
    if output_format(fmt, output) == "markdown" and not result.rows.num_rows:
        # For $GITHUB_STEP_SUMMARY: the verdict, not a table with a header and no rows.
        write_text(result.summary() + "\n", output)
    else:
        emit(result.rows, fmt, output)
    click.echo(result.summary(), err=True)
    if alerts is not None:
        alerts.close()
    if result.rows.num_rows:
        ctx.exit(1)


@click.command()
@click.option("--dialect", type=click.Choice(DIALECTS),
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
    from ..query import catalog, dialects

    if dialect is not None:
        write_text(dialects.views_ddl(dialect), output)
    elif output_format(fmt, output) is not None:
        emit(catalog.views_table(), fmt, output)
    else:
        write_text(catalog.views_text(), output)


@click.command()
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
