"""`runstore migrate`, `repair`, `compact`: commands that look after a store."""

from __future__ import annotations

import click

from ..errors import UsageError
from ..printable import printable
from .common import handle_errors, lock_timeout_option, open_store


@click.command()
@click.option("--list", "list_", is_flag=True, help="Only list applied and pending migrations.")
@click.pass_context
@handle_errors
def migrate(ctx: click.Context, list_: bool) -> None:
    """Apply pending schema migrations (or list them with --list, read-only).

    Example:

        runstore migrate --list
    """
    store = open_store(ctx, reading=False)
    manifest = store.manifest() if list_ else None
    if not list_:
        for name in store.migrate():
            click.echo(f"applied {name}")
        manifest = store.manifest()
    assert manifest is not None
    click.echo(f"schema version {manifest.schema_version}")
    for m in manifest.migrations:
        click.echo(f"  applied  {m['name']}  {m['applied_at']}  {m.get('doc', '')}")
    for m in store.pending_migrations():
        click.echo(f"  pending  {m.name}  {m.doc}")


@click.command()
@click.option("--check", "check_only", is_flag=True,
              help="Change nothing: read every live file in full, check it against the "
              "content hash recorded when it was written, and list what is damaged (exit "
              "code 1 when anything is).")
@lock_timeout_option()
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
    report = open_store(ctx, reading=False).repair(check=check_only, lock_timeout=lock_timeout)
    for problem in report.problems if check_only else report.actions:
        click.echo(f"- {problem}")
    click.echo(report.summary())
    if check_only and report.problems:
        ctx.exit(1)


def _hours(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """--vacuum-hours checked as the library checks it (`store.inputs.vacuum_hours`)."""
    from ..store.inputs import vacuum_hours

    if value is None:
        return None
    try:
        return vacuum_hours(value, "it")
    except UsageError as e:
        raise click.BadParameter(str(e), ctx, param) from None


@click.command()
@click.option("--vacuum-hours", type=float, default=None, metavar="H", callback=_hours,
              help="Then delete the files that no kept snapshot lists and none has listed for "
              "more than H hours (fractions allowed; at least 10 minutes, for queries still "
              "reading an older snapshot).")
@lock_timeout_option()
@click.pass_context
@handle_errors
def compact(ctx: click.Context, vacuum_hours: float | None, lock_timeout: float) -> None:
    """Rewrite each table into few files and checkpoint its Delta log.

    The replaced files stay until a vacuum deletes them, after the new snapshot is published.

    Example:

        runstore compact --vacuum-hours 24
    """
    report = open_store(ctx, reading=False).compact(vacuum_hours=vacuum_hours,
                                                    lock_timeout=lock_timeout)
    for name, n in sorted(report.files_before.items()):
        click.echo(f"{name}: {n} file{'s' if n != 1 else ''} before")
    if report.vacuum is not None:
        click.echo(report.vacuum.summary())


@click.command()
@click.argument("runs", nargs=-1, metavar="RUN...")
@click.option("--eval-store", "eval_stores", multiple=True, metavar="STORE",
              help="Also forget an eval store: its id or a unique prefix, its name, its "
                   "directory, or a GLOB matching one (repeatable).")
@click.option("--missing", is_flag=True,
              help="Also forget every run whose directory was gone at the last ingest "
                   "(status missing), and every eval store whose directory is gone now.")
@click.option("--dry-run", "-n", is_flag=True,
              help="Only list the runs and eval stores that would be forgotten and their "
                   "rows; change nothing.")
@lock_timeout_option()
@click.pass_context
@handle_errors
def forget(ctx: click.Context, runs: tuple[str, ...], eval_stores: tuple[str, ...],
           missing: bool, dry_run: bool, lock_timeout: float) -> None:
    """Remove runs from the store: every row of them, from every table, in one snapshot.

    Each RUN names one run: a run_id or a unique prefix of one, a run_name, the run's
    directory, or a GLOB that matches one run. The runs' ledger entries go too, so ingesting
    the same directory again reads it afresh (a moved run: forget the old one, ingest the
    new path; a run to rename: forget it, ingest it again with --prefix). An eval store is
    forgotten with --eval-store (a moved one: ingest its new directory, then `forget
    --missing`). The files stay on disk until `runstore compact --vacuum-hours H` reclaims
    them. Like compact, it asks no confirmation: run it with --dry-run first to see what
    would go.

    Example:

    \b
        runstore forget --missing --dry-run
        runstore forget math_rl_sweep/qwen3-8b/lr_1e-4
        runstore forget --eval-store tool_rl_async/evals --dry-run
    """
    if not runs and not eval_stores and not missing:
        raise click.UsageError("name the runs to forget (RUN...) or an eval store "
                               "(--eval-store), or pass --missing")
    report = open_store(ctx, reading=False).forget(
        list(runs), eval_stores=list(eval_stores), missing=missing, dry_run=dry_run,
        lock_timeout=lock_timeout)
    for r in report.runs:
        # Names and directories are the tree's: control characters shown, never obeyed.
        click.echo(printable(f"{r['run_name']}  {r['run_id']}  {r['status']}  {r['run_path']}"))
    for e in report.eval_stores:
        click.echo(printable(f"eval store {e['name']}  {e['eval_store_id']}  {e['eval_store']}"))
    for table, n in sorted(report.rows.items()):
        click.echo(f"{table}: {n} row{'s' if n != 1 else ''}")
    click.echo(report.summary())
