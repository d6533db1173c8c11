"""What every command shares: error handling, the output options and writing rows, params.

Contract: `handle_errors` turns a `RunstoreError` into `Error: …` on stderr and its exit code
(1; 2 for usage errors), Ctrl-C into exit 130 (an interrupted ingest says what it kept), and
any other exception into one `Error: unexpected …` line and exit 1 (click's own exceptions
pass through); `--debug` (on the group) shows the traceback instead. `output_options` is the one decorator
for commands that print rows (`--format` from `present.render.FORMATS`, `--output`,
`--wide`); `Seconds` is the click type of a time limit (a number of seconds above 0);
`emit(table, fmt, output)` writes rows in the format asked for, or the one the
`--output` extension names, else a table on a terminal and CSV elsewhere. `parse_params`
reads `--param NAME=VALUE` (numbers become numbers). `open_store(ctx)` is the `Store` of the
group's `--store`. `notify_option` is `--notify URL` (repeatable, `$RUNSTORE_NOTIFY`) of the
commands that report firing rules, and `notifier(store, urls, warn)` the `health.notify.Notifier`
for those URLs and runstore.toml's `[check] notify` (None when there are none).
"""

from __future__ import annotations

import functools
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

import click

from ..errors import RunstoreError, one_line
from ..present.render import FORMATS, format_for
from ..storage.location import is_remote


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
        except (click.exceptions.ClickException, click.exceptions.Exit,
                click.exceptions.Abort):
            raise  # click's own: usage errors and exits say what they have to
        except Exception as e:
            # Anything else is a fault of runstore's (or of the machine: a full disk, say):
            # one line naming it, the traceback only when asked for.
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"Error: unexpected {type(e).__name__}: {one_line(e)} (a runstore bug, or "
                       "a fault of the machine; run again with --debug for the traceback and "
                       "report it)", err=True)
            ctx.exit(1)

    return wrapper


class Seconds(click.ParamType):
    """A time limit in seconds: a finite number above 0 (`query.deadline.checked`), else a
    usage error (exit 2)."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float | None:
        from ..errors import UsageError
        from ..query.deadline import checked

        try:
            return checked(float(value))
        except (TypeError, ValueError, UsageError):
            self.fail(f"{value!r} is not a number of seconds above 0 (e.g. 30 or 2.5)",
                      param, ctx)


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


def notify_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--notify", "notify", multiple=True, metavar="URL", envvar="RUNSTORE_NOTIFY",
        help="POST each (run, rule) that starts firing, once, as JSON with a Slack/Mattermost "
             "`text` field to this webhook URL (repeatable; also $RUNSTORE_NOTIFY, URLs "
             "separated by spaces, and runstore.toml's [check] notify list). A slow or "
             "failing URL never stops the command: a few retries, then a warning.")(fn)


def notifier(store: Any, given: tuple[str, ...], warn: Callable[[str], None]) -> Any:
    """The Notifier for `given` URLs plus runstore.toml's, or None when there are none."""
    from ..health.config import store_config

    configured = store_config(store).notify
    if not given and not configured:
        return None  # the webhook client is not even imported (~8 ms of a quick check)
    from ..health.notify import Notifier, urls

    chosen = urls(given, config=configured)
    if not chosen:
        return None
    return Notifier(chosen, store=str(store.path), on_warning=warn)


def output_format(fmt: str | None, output: str | None) -> str | None:
    """The format asked for: --format, else the one --output's extension names, else None."""
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
    write_text(out.render(table, fmt, width=width, wide=wide), output)


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


def existing(path: str) -> str:
    """A local path that exists, or an s3:// URI (checked when the query reads it)."""
    if not is_remote(path) and not Path(path).expanduser().exists():
        raise click.BadParameter(f"{path!r} does not exist", param_hint="'--allow-read'")
    return path


def open_store(ctx: click.Context) -> Any:
    from ..store import Store

    return Store(ctx.obj.get("store"))

def write_text(text: str, output: str | None) -> None:
    if output:
        Path(output).write_text(text)
    else:
        click.echo(text, nl=False)



class Progress:
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



RUNS_GLOB = click.option("--runs", metavar="GLOB",
                          help="Only runs whose run_name matches GLOB (* matches / too).")
HTML_OUT = click.option("--output", "-o", "output", required=True,
                         type=click.Path(dir_okay=False), help="HTML file to write.")


def wrote(path: Any) -> None:
    size = Path(path).stat().st_size
    shown = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB"
    click.echo(f"wrote {path} ({shown})", err=True)


def write_chart(fig: Any, output: str) -> None:
    from ..present.charts import write_html

    wrote(write_html(fig, output))


def lock_timeout_option(holder: str = "an ingest") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--lock-timeout SECONDS` of every command that takes the store's write lock."""
    return click.option("--lock-timeout", type=float, default=60.0, show_default=True,
                        help=f"Seconds to wait for {holder} holding the store.")
