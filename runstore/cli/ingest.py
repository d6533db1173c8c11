"""`runstore ingest` (and `--watch`) and `runstore demo`: commands that bring runs into a store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from .common import (Progress, handle_errors, lock_timeout_option, notifier, notify_option,
                     open_store)


@click.command()
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
@lock_timeout_option("another ingest")
@notify_option
@click.pass_context
@handle_errors
def ingest(ctx: click.Context, paths: tuple[str, ...], quiet: bool, watch: float | None,
           check: bool | None, lock_timeout: float, notify: tuple[str, ...]) -> None:
    """Ingest every run found under PATHS (at any depth), incrementally.

    A path may be a directory or an s3://bucket/prefix (read with the AWS environment's
    credentials and endpoint; objects are re-read when their size or ETag changes).

    Ctrl-C (or SIGTERM) stops at the next whole file: what was read is published, the
    command says how much was kept and exits 130, and running it again continues from there.
    A second Ctrl-C stops at once (the store keeps its last snapshot).

    With --watch, keep ingesting every SECONDS until Ctrl-C (or SIGTERM), which ends it
    cleanly. Paths and runs may appear and vanish meanwhile. Each (run, rule) that starts
    firing is printed once on stdout (also with --quiet) as
    `FIRED run: rule since step N (...)`, and POSTed once to each --notify webhook.

    Example:

    \b
        runstore ingest runs/            # first time: everything
        runstore ingest runs/            # again: only what changed
        runstore ingest runs/ --watch 30 # live runs: ingest and check every 30 s
        runstore ingest runs/ --watch 60 --notify https://hooks.slack.com/services/...
        runstore --store s3://team-logs/runstore ingest s3://team-logs/runs/
    """
    store = open_store(ctx)
    progress = Progress(not quiet and sys.stderr.isatty())
    warn = None if quiet else (lambda text: click.echo(f"warning: {text}", err=True))
    summary = None if quiet else (lambda report: click.echo(report.summary(), err=True))
    if watch is None and not check:
        if notify:
            raise click.UsageError("--notify reports firing rules: use it with --watch or "
                                   "--check")
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

    alerts = notifier(store, notify, lambda text: click.echo(f"warning: {text}", err=True)) \
        if check is not False else None

    def on_alert(alert: Any) -> None:
        click.echo(alert.text())
        if alerts is not None:
            alerts.notify(alert)

    try:
        watch_runs(store, list(paths), interval=watch, check=check is not False,
                   on_alert=on_alert, on_report=summary, on_warning=warn, progress=progress,
                   lock_timeout=lock_timeout)
    finally:
        if alerts is not None:
            alerts.close()



@click.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.pass_context
@handle_errors
def demo(ctx: click.Context, directory: str | None) -> None:
    """Write a realistic run tree, ingest it, and answer a few questions.

    Example:

    \b
        runstore demo     # writes ./runstore-demo/runs and ./runstore-demo/store
        cd runstore-demo && export RUNSTORE_STORE=$PWD/store   # the docs' examples run here
    """
    from ..demo.showcase import run_demo

    base = Path(directory or "runstore-demo")
    run_demo(base, store=ctx.obj.get("store"), echo=click.echo)
