"""`runstore ingest` (and `--watch`) and `runstore demo`: commands that bring runs into a store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..present.findings import finding_text
from .common import (Progress, Seconds, handle_errors, lock_timeout_option, notify_option,
                     open_store)
from .failures import echo


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@click.option("--watch", type=Seconds(), default=None,
              metavar="SECONDS",
              help="Ingest again every SECONDS until Ctrl-C, printing each health rule "
                   "that starts firing once (see --check).")
@click.option("--check/--no-check", "check", default=None,
              help="Evaluate the health rules (as `runstore check` with no options: the KL "
                   "rule and runstore.toml's) after each pass and print newly firing ones. "
                   "On by default with --watch.")
@click.option("--prefix", metavar="NAME",
              help="Name the runs new to the store NAME/<path relative to PATH>, so trees of "
                   "the same layout (two clusters' runs/) keep apart (a run keeps the name it "
                   "was first ingested under).")
@click.option("--doctor", is_flag=True,
              help="Also run `runstore doctor` after each pass and print each finding that "
                   "appears, once, as `FINDING run: finding (severity) steps A-B: evidence` "
                   "(opt in: the doctor reads every run's history).")
@lock_timeout_option("another ingest")
@notify_option
@click.pass_context
@handle_errors
def ingest(ctx: click.Context, paths: tuple[str, ...], quiet: bool, watch: float | None,
           check: bool | None, prefix: str | None, doctor: bool, lock_timeout: float,
           notify: tuple[str, ...], renotify: bool) -> None:
    """Ingest every run found under PATHS (at any depth), incrementally.

    A path may be a directory or an s3://bucket/prefix (read with the AWS environment's
    credentials and endpoint; objects are re-read when their size or ETag changes).

    Ctrl-C (or SIGTERM) stops at the next whole file: what was read is published, the
    command says how much was kept and exits 130, and running it again continues from there.
    A second Ctrl-C stops at once (the store keeps its last snapshot).

    With --watch, keep ingesting every SECONDS until Ctrl-C (or SIGTERM), which ends it
    cleanly. Paths and runs may appear and vanish meanwhile. Each (run, rule) that starts
    firing is printed once on stdout (also with --quiet) as
    `FIRED run: rule since step N (...)`, and POSTed once to each --notify webhook: the
    store keeps what was posted, so a restarted watch (or a `runstore check --notify`) does
    not post it again; a firing that ends and starts again is posted again. With --doctor,
    each finding of `runstore doctor` that appears is printed once too (docs/doctor.md).
    Without --watch, --check and --doctor report what fires after this one pass.

    A run is named by its path relative to PATH. Two runs may share a name (two trees of
    one layout): both are kept, a warning says which they are, and they are shown as
    `name [run_id prefix]`. --prefix gives a tree's runs names of their own.

    Example:

    \b
        runstore ingest runs/            # first time: everything
        runstore ingest runs/            # again: only what changed
        runstore ingest runs/ --watch 30 # live runs: ingest and check every 30 s
        runstore ingest runs/ --watch 60 --notify https://hooks.slack.com/services/...
        runstore ingest runs/ --prefix cluster-a  # new runs: cluster-a/<path under runs/>
        runstore ingest runs/ --watch 60 --doctor   # and each new finding of the doctor
        runstore --store s3://team-logs/runstore ingest s3://team-logs/runs/
    """
    store = open_store(ctx, reading=False)
    progress = Progress(not quiet and sys.stderr.isatty())
    warn = None if quiet else (lambda text: click.echo(f"warning: {text}", err=True))
    summary = None if quiet else (lambda report: click.echo(report.summary(), err=True))
    if watch is None and not check and not doctor:
        if notify or renotify:
            raise click.UsageError("--notify and --renotify report firing rules: use them "
                                   "with --watch or --check")
        # Ctrl-C or SIGTERM: publish what was read whole, then exit 130 saying what was kept;
        # a second one exits at once.
        try:
            report = store.ingest(list(paths), progress=progress, on_warning=warn,
                                  lock_timeout=lock_timeout, prefix=prefix,
                                  signals=("SIGINT", "SIGTERM"), exit_at_once=True)
        except KeyboardInterrupt:
            progress.end_line()  # the message goes below the bar, not after it
            raise
        if summary:
            summary(report)
        return
    alerts = store.notifier(notify, renotify=renotify,
                            on_warning=lambda text: click.echo(f"warning: {text}", err=True)
                            ) if check is not False else None

    def on_alert(alert: Any) -> None:
        echo(alert.text())  # a reader that went away ends the watch, not one pass of it
        if alerts is not None:
            alerts.notify(alert)

    try:
        store.watch(list(paths), interval=watch,
                    check=check is not False and (check or watch is not None),
                    on_alert=on_alert, on_report=summary, on_warning=warn, progress=progress,
                    lock_timeout=lock_timeout, prefix=prefix,
                    on_firings=alerts.settle if alerts is not None else None,
                    on_finding=(lambda row: echo(finding_text(row))) if doctor else None)
    finally:
        if alerts is not None:
            alerts.close()



@click.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.pass_context
@handle_errors
def demo(ctx: click.Context, directory: str | None) -> None:
    """Write a realistic run tree, ingest it, and answer a few questions.

    The tree goes to DIRECTORY/runs (default ./runstore-demo), the store to DIRECTORY/store
    unless --store (or $RUNSTORE_STORE) names one; a store that already holds runs from
    elsewhere is refused, so the demo never mixes its runs into yours.

    Example:

    \b
        runstore demo     # writes ./runstore-demo/runs and ./runstore-demo/store
        cd runstore-demo && export RUNSTORE_STORE=$PWD/store   # the docs' examples run here
    """
    from ..demo.showcase import run_demo
    from ..errors import UsageError

    base = Path(directory or "runstore-demo")
    try:
        run_demo(base, store=ctx.obj.get("store"), echo=click.echo)
    except OSError as e:
        # A file of the demo's tree that cannot be written: DIRECTORY is the user's choice.
        if e.filename is None or not Path(e.filename).resolve().is_relative_to(base.resolve()):
            raise
        raise UsageError(f"cannot write the demo under {base}: {e.strerror or e} "
                         f"({e.filename}); choose another DIRECTORY") from e
