"""The `runstore` command: a click group of thin commands over `runstore.Store`.

Contract: every command builds the `Store` from `--store` / `$RUNSTORE_STORE` / `./.runstore`,
makes one library call and prints its result. How a command ends is one scheme
(`errors.EXIT_CODES`, shown by `runstore --help`): failures.py turns errors, Ctrl-C and a
closed pipe into a line and an exit status, and stopping.py makes Ctrl-C stop a running
query; `--debug` shows the traceback instead. The group (group.py) accepts the global options
after the command too. Commands that print rows share one set of output options (`--format`,
`--output`, `--wide`): common.py. Commands by area: ingest.py (ingest, demo), query.py (sql,
runs, check, views, schema), doctor.py (doctor), compare.py (keys, diff, compare), maintain.py (migrate, repair,
compact, forget), pictures.py (plot, report, trace), serve.py (ui), agents.py (mcp, skill).
Modules import the library inside the commands, so `runstore --help` and `runstore sql` load only what they use.
"""

from __future__ import annotations

import click

from . import agents, compare, doctor, ingest, maintain, pictures, query, serve
from .group import GLOBAL_HELP, RunstoreGroup, exit_status_help


@click.group(cls=RunstoreGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=f"{GLOBAL_HELP}\n\n{exit_status_help()}")
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
    (run_name, run_label, run_id, key, metric, name, rule, split, evaluator, conversation_id, table,
    column, view, group), compare's group keys, or their headers: other text is cut in the
    middle first (a header only as far as it stays told apart), and a table that still does not fit prints one block of `column  value`
    lines per row. -o FILE picks the format from the extension (.json .jsonl .ndjson .csv .md
    .markdown .parquet; any other needs --format) and its directory must exist.

    Example:

        runstore ingest runs/ && runstore sql "select run_name, kind from runs"
    """
    ctx.ensure_object(dict)
    ctx.obj.update(store=store, debug=debug)


for _command in (ingest.ingest, ingest.demo, query.sql, query.runs, query.check, doctor.doctor,
                 query.views, query.schema, compare.keys, compare.diff, compare.compare,
                 maintain.migrate, maintain.repair, maintain.compact, maintain.forget,
                 pictures.plot, pictures.report, pictures.trace, serve.ui, agents.mcp,
                 agents.skill):
    main.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    main()
