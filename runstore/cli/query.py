"""`runstore sql`, `runs`, `check`, `views`, `schema`: commands that answer questions."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..present.render import format_for
from ..kinds import RUN_KINDS
from ..store.catalog import DIALECTS
from .common import (RUNS_HELP, Seconds, Size, emit, existing, handle_errors, notify_option,
                     open_store, output_format, output_options, parse_params, shown,
                     to_parquet, utf8, write_text)


@click.command()
@click.argument("query", required=False)
@click.option("--file", "-f", "file", type=click.File("r"), help="Read the query from FILE ('-' for stdin).")
@click.option("--param", "-p", "params", multiple=True, metavar="NAME=VALUE",
              help="Bind $NAME to VALUE (repeatable); never pasted into the SQL text. VALUE "
                   "is a number when written as one (42, -0.5, 1e-3), else text (007, 1_000 "
                   "and nan stay text). A NAME that is a setting (kl_threshold) overrides it "
                   "for this query.")
@click.option("--allow-read", "allow_read", multiple=True, metavar="PATH",
              callback=lambda ctx, param, values: tuple(existing(v) for v in values),
              help="Also let the query read this file, or the files under this directory, "
                   "or this s3:// object (repeatable). Without it a query reads only the "
                   "store's own files.")
@click.option("--timeout", type=Seconds(), default=None,
              metavar="SECONDS",
              help="Stop the query if it still runs after SECONDS (an error, exit 1; "
                   "default: no limit).")
@click.option("--memory-limit", "memory_limit", type=Size(), default=None, metavar="SIZE",
              help="Stop the query (an error, exit 1) if it needs more than SIZE of memory, "
                   "e.g. 4GB, 512MB or 50% (default: $RUNSTORE_MEMORY_LIMIT, else a quarter "
                   "of the machine's memory).")
@output_options
@click.pass_context
@handle_errors
def sql(ctx: click.Context, query: str | None, file: Any, params: tuple[str, ...],
        allow_read: tuple[str, ...], timeout: float | None, memory_limit: int | None,
        fmt: str | None, output: str | None) -> None:
    """Run one read-only SQL query over the store's tables and views.

    The query comes from QUERY, from -f FILE, or from stdin (QUERY '-' or a pipe). Only
    queries run: INSERT, CREATE, COPY, ATTACH, SET and every other statement are refused.
    The query reads only the store's own files (DuckDB's sandbox): to join a file of your
    own, name it with --allow-read. `runstore views` and `runstore schema` list what there is
    to query. With --timeout, a query still running after that many seconds is stopped
    (DuckDB's own interrupt) and the command fails with an error saying so. The command's
    memory is capped at --memory-limit (beyond what it holds when it starts): a query that
    needs more fails with an error naming the limit, instead of taking the machine's memory.
    A value a format cannot hold as DuckDB means it (an interval, a bit string, a blob, a
    BIGNUM, nanoseconds, a time's offset) is written as DuckDB's text of it, and columns
    that share a name are named apart as in a subquery (a, a_1).

    Example:

    \b
        runstore sql "select run_name, max_kl_v1 from kl_health where flagged" -F json
        runstore sql "select * from kl_health where flagged" --param kl_threshold=0.02
        runstore sql 'select * from runs where run_name glob $g' --param g='math_rl_sweep/*'
        runstore sql -f question.sql -o answer.parquet --format parquet
        runstore sql --timeout 60 "select key, count(*) from metrics_raw group by key"
        runstore sql --memory-limit 8GB "select run_id, list(value) from metrics_raw group by 1"
        runstore sql "from runs join read_csv('teams.csv') using (run_name)" \\
            --allow-read teams.csv
    """
    if file is not None:
        if query is not None:
            raise click.UsageError("give the query as QUERY or with -f FILE, not both")
        query = _read(file, f"the query in {shown(file.name)}")
    elif query is None or query == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError("give a QUERY, -f FILE, or pipe the query on stdin")
        query = _read(sys.stdin, "the query on stdin")
    # Plain rows where they print the same as Arrow, so most answers need no pyarrow; a
    # Parquet file needs the Arrow table.
    store = open_store(ctx, memory_limit=memory_limit)
    # This process is runstore's own: it is capped, so that what the query allocates (in
    # DuckDB, or writing its rows) stops at the limit with an error rather than growing until
    # the kernel ends something (DuckDB's own limit alone does not hold it: query/memory.py).
    with store.bounded():
        table = store.rows(query, parse_params(params), allow_read=list(allow_read) or None,
                           timeout=timeout, arrow=to_parquet(fmt, output))
        emit(table, fmt, output)


def _read(stream: Any, what: str) -> str:
    """A query's text from a file or stdin; not UTF-8: a usage error naming `what`."""
    try:
        return utf8(stream.read(), what, "save it as UTF-8")
    except UnicodeDecodeError as e:
        raise click.UsageError(f"{what} is not UTF-8 text (byte 0x{e.object[e.start]:02x} at "
                               f"byte {e.start}): save it as UTF-8") from None


@click.command()
@click.option("--kind", type=click.Choice(RUN_KINDS),
              help="Only runs of this kind.")
@click.option("--name", metavar="RUN", help=RUNS_HELP)
@click.option("--where", metavar="SQL-EXPR",
              help="Only runs for which this SQL condition over run_summary's columns holds "
                   "(the command's memory is capped as runstore sql's: "
                   "$RUNSTORE_MEMORY_LIMIT, else a quarter of the machine's memory).")
@click.option("--columns", "-c", metavar="COL,...",
              help="Show these run_summary columns, in this order (default: every column but "
                   "run_id and run_name; `all`: every column).")
@output_options
@click.pass_context
@handle_errors
def runs(ctx: click.Context, kind: str | None, name: str | None, where: str | None,
         columns: str | None, fmt: str | None, output: str | None) -> None:
    """List runs with their summary (the run_summary view), ordered by run_label.

    run_id and run_name are left out unless asked for (`--columns all`, or name them in
    --columns): run_label tells the runs apart, the run_name itself unless two runs share
    it (two trees of one layout), then `run_name [run_id prefix]`.

    Example:

    \b
        runstore runs --kind rl --name 'math_rl_sweep/*'
        runstore runs --where "best_reward > 0.5 and not kl_flagged" -F csv
        runstore runs --columns run_name,status,last_step,max_kl
    """
    store = open_store(ctx)
    if columns is None:
        chosen: list[str] | None = [c for c in store.run_columns()
                                    if c not in ("run_id", "run_name")]
    elif columns.strip().lower() == "all":
        chosen = None
    else:
        chosen = [c.strip() for c in columns.split(",") if c.strip()]
    # A --where condition is user SQL: capped as `runstore sql` is ($RUNSTORE_MEMORY_LIMIT).
    with store.bounded():
        emit(store.rows(*store.runs_query(kind=kind, name=name, where=where, columns=chosen),
                        arrow=to_parquet(fmt, output)), fmt, output)


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
              help=RUNS_HELP)
@click.option("--since-step", type=int, metavar="N", help="Ignore steps before N.")
@notify_option
@output_options
@click.pass_context
@handle_errors
def check(ctx: click.Context, threshold: float | None, rules: tuple[str, ...],
          default_rules: bool | None, runs: str | None, since_step: int | None,
          notify: tuple[str, ...], renotify: bool, fmt: str | None,
          output: str | None) -> None:
    """Flag runs whose health rules fire: one row per (run, rule) that fires.

    The default rule is KL (optim/kl_sample_train_v1 or v2, with or without optim/)
    strictly above 0.01 at some step, with kl_health's semantics: only the latest write of a
    step counts, NaN never fires, +Infinity does. More rules come from --rule and from
    [[check.rule]] in a runstore.toml beside the store or in the working directory.

    Trend rules: drop(METRIC) > X fires where the smoothed metric (debiased EMA, weight 0.9
    unless drop(METRIC, W)) fell more than X below its best so far; rise(METRIC) > X where
    it is above X times the running median of the earlier values (rise(time/total) > 2: step
    time doubled); stale > MINUTES for a run not completed whose files have not changed for
    MINUTES (as of the last ingest). Each firing (a run, a rule, the step where it started)
    is also POSTed to every --notify URL, once: the store keeps what was posted, so a check
    run again (from cron, say), or a watch, posts only firings not posted before, and a
    firing again only after it ended and started again (--renotify: post them all again).

    A rule naming a metric that no run in the store has logged is an error that names the
    closest logged keys (a misspelt rule would never fire). Fired or not, one line on stderr
    says how many runs each rule fired for and how many it checked, e.g.
    `kl_sample_train_v1|v2 > 0.01 fired for 0 of 23 runs (21 checked, 2 without KL)`; with
    --format markdown and nothing fired, that line is the output.

    Exit status: 0 when nothing fired, 1 when a rule fired; an error has its own status
    (`runstore --help`: 2 for a usage mistake such as an unknown metric, 3 and above for the
    store or the machine), never 1.

    Example:

    \b
        runstore ingest runs/ && runstore check   # gate a CI job: exit 1 when a rule fires
        runstore check --threshold 0.02 --rule "optim/entropy < 0.05" -F json  # exit 1
        runstore check --runs 'math_rl_sweep/*' --since-step 20
        runstore check --rule "drop(env/all/reward/total) > 0.2" --rule "stale > 30"  # exit 1
    """
    store = open_store(ctx)
    alerts = store.notifier(notify, renotify=renotify,
                            on_warning=lambda text: click.echo(f"warning: {text}", err=True))
    # Plain rows unless a Parquet file is asked for: a check of threshold rules then imports
    # no pyarrow (a CI gate runs it after every ingest).
    result = store.check_result(threshold=threshold, rules=rules, runs=runs,
                                since_step=since_step, default_rules=default_rules,
                                arrow=to_parquet(fmt, output))
    try:
        if alerts is not None:
            # Every row is a firing; the webhook gets those not posted before while the
            # table prints. A check of every run and step also says which firings ended.
            firing = result.alerts()
            for alert in firing:
                alerts.notify(alert)
            if runs is None and since_step is None:
                alerts.settle(firing, [r.name for r in result.rules])
        if output_format(fmt, output) == "markdown" and not result.rows.num_rows:
            # For $GITHUB_STEP_SUMMARY: the verdict, not a table with a header and no rows.
            write_text(result.summary() + "\n", output)
        else:
            emit(result.rows, fmt, output)
        click.echo(result.summary(), err=True)
    finally:  # the webhooks get every firing, also when the output's reader went away
        if alerts is not None:
            alerts.close()
    if result.rows.num_rows:
        ctx.exit(1)


@click.command()
@click.option("--dialect", type=click.Choice(DIALECTS),
              help="Print every view as CREATE OR REPLACE [TEMP] VIEW for this engine instead.")
@output_options(text=True)
@handle_errors
def views(dialect: str | None, fmt: str | None, output: str | None) -> None:
    """List the canned views with their descriptions and columns.

    With --dialect, print them transpiled for Spark or Trino, in dependency order, ready to
    run over tables with runstore's names. With --format (or an -o FILE whose extension
    names a format), one row per view column; else the listing as text, whatever the file's
    extension.

    Example:

    \b
        runstore views
        runstore views --dialect spark > runstore_views.sql
    """
    from ..store import catalog

    if dialect is not None:
        write_text(catalog.views_ddl(dialect), output)
    elif fmt is not None or format_for(output) is not None:
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
    from ..store import catalog

    emit(catalog.schema_table(table), fmt, output)
