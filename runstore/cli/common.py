"""What every command shares: error handling, the output options and writing rows, params.

Contract: `handle_errors` (failures.py) is how every command ends: an error's line and its
exit status, Ctrl-C, a closed pipe. `output_options` is the one decorator
for commands that print rows (`--format` from `present.render.FORMATS`, `--output`,
`--wide`); `Seconds` is the click type of a duration (a time limit, a watch interval, a lock
timeout: finite seconds, above 0 unless `zero=True`), `Size` that of a memory limit (`4GB`,
`25%`);
`emit(table, fmt, output)` writes rows in the format asked for, or the one the
`--output` extension names, else a table on a terminal and CSV elsewhere. `parse_params`
reads `--param NAME=VALUE` (numbers become numbers). `Weight` is the click type of
`--smooth`, runstore's one smoothing weight. `open_store(ctx)` is the `Store` of the
group's `--store`. `notify_option` is `--notify URL` (repeatable, `$RUNSTORE_NOTIFY`) and
`--renotify` of the commands that report firing rules (`Store.notifier` sends to those URLs
and runstore.toml's `[check] notify`). The library is reached through `runstore.store` (and
`present` for rendering) only.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import click

from ..errors import IOFailure, RunstoreError, UsageError, one_line
from ..present.render import EXTENSIONS, FORMATS, format_for, shorten
from ..printable import escaped, not_utf8
from ..startup import is_the_command
from ..store.inputs import is_remote
from .failures import handle_errors  # noqa: F401 - the command modules take it from here


class Size(click.ParamType):
    """A memory limit: bytes, a size such as 4GB, or a share of the machine's memory such as
    25% (`store.inputs.memory_size`), else a usage error (exit 2)."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        from ..store.inputs import memory_size

        try:
            return memory_size(int(value) if isinstance(value, str) and value.isdigit() else value)
        except UsageError as e:
            self.fail(str(e), param, ctx)


class Seconds(click.ParamType):
    """A duration in seconds as the library takes one (`numbers.seconds`: a finite number
    above 0, or 0 or above with `zero=True`, no longer than Python can wait,
    `threading.TIMEOUT_MAX`, centuries), else a usage error (exit 2) saying which rule."""

    name = "seconds"

    def __init__(self, *, zero: bool = False):
        self.zero = zero

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float | None:
        import math
        import threading

        from ..numbers import seconds

        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if math.isfinite(number) and number > threading.TIMEOUT_MAX:
            self.fail(f"{value!r} is longer than runstore can wait (at most "
                      f"{threading.TIMEOUT_MAX:.0f} seconds)", param, ctx)
        checked = seconds(number, zero=self.zero)
        if checked is None:
            least = "0 or above" if self.zero else "above 0"
            self.fail(f"{value!r} is not a number of seconds {least} (e.g. 30 or 2.5)",
                      param, ctx)
        return checked


class Weight(click.ParamType):
    """A smoothing weight: a number in [0, 1) (`store.inputs.smoothing_weight`, which says what
    to write instead of the old `--smooth N`), else a usage error (exit 2)."""

    name = "weight"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        from ..store.inputs import smoothing_weight

        try:
            number = float(value)
            return smoothing_weight(int(number) if number.is_integer() and number >= 1 else number,
                                "--smooth")
        except UsageError as e:
            self.fail(str(e), param, ctx)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number: --smooth is a smoothing weight in [0, 1) "
                      "(0.9 smooths heavily)", param, ctx)


def _remember_wide(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    ctx.meta["runstore.wide"] = value
    return value


def output_options(fn: Callable[..., Any] | None = None, *, text: bool = False) -> Any:
    """--format, --output and --wide of a command that prints rows. An --output whose
    directory does not exist, or (unless --format is given) whose extension names no format,
    is a usage error before the command does any work; `text=True` for a command that writes
    text of its own when no format is asked for (views, diff --code), which checks the
    extension only when it writes rows."""
    if fn is None:
        return functools.partial(output_options, text=text)
    if not text:
        command = fn

        @functools.wraps(command)
        def checked(*args: Any, **kwargs: Any) -> Any:
            output_format(kwargs.get("fmt"), kwargs.get("output"))  # before any work
            return command(*args, **kwargs)

        fn = checked
    # --wide reaches `emit` through the context, so commands need no parameter for it.
    fn = click.option("--wide", is_flag=True, expose_value=False, callback=_remember_wide,
                      help="Table format: cut nothing, one line per row however wide "
                           "(default: fit the terminal or $COLUMNS, cutting other text but "
                           "never run names or keys, and one block per row when that is not "
                           "enough).")(fn)
    fn = click.option("--output", "-o", "output", type=click.Path(dir_okay=False),
                      callback=checked_output,
                      help="Write to FILE instead of standard output (its directory must "
                           "exist; `-` is standard output).")(fn)
    fn = click.option("--format", "-F", "fmt", type=click.Choice(FORMATS),
                      help="Output format (default: from the --output extension: "
                           f"{' '.join(EXTENSIONS)}; else table on a terminal, else "
                           "csv).")(fn)
    return fn


def checked_output(ctx: click.Context | None, param: click.Parameter | None,
                   path: str | None) -> str | None:
    """An --output FILE in a directory that exists (checked before the command runs); `-`
    is standard output, as for most command-line tools (None: no file)."""
    if path is None or path == "-":
        return None
    if not path:  # names no file (and is not "no --output": that would write to stdout)
        raise click.BadParameter("is empty; give the name of the file to write", ctx, param)
    parent = Path(path).parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise click.BadParameter(f"cannot write {path}: the directory {parent} {what}; "
                                 "create it first or choose another file", ctx, param)
    return path


def notify_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option(
        "--renotify", is_flag=True,
        help="Post every firing again, even one the store says was posted already.")(fn)
    return click.option(
        "--notify", "notify", multiple=True, metavar="URL", envvar="RUNSTORE_NOTIFY",
        help="POST each firing of a rule (a run, a rule, the step where it started) once as "
             "JSON with a Slack/Mattermost `text` field to this webhook URL, whichever "
             "command sees it first: the store keeps what was posted (repeatable; also "
             "$RUNSTORE_NOTIFY, URLs separated by spaces, and runstore.toml's [check] notify "
             "list). A slow or failing URL never stops the command: a few retries, a "
             "warning, and the next command tries again.")(fn)


def output_format(fmt: str | None, output: str | None) -> str | None:
    """The format asked for: --format, else the one --output's extension names, else None
    (standard output). An --output whose extension names no format is a usage error listing
    the extensions, unless --format decides."""
    if fmt or not output:
        return fmt
    found = format_for(output)
    if found is None:
        ext = os.path.splitext(output)[1]
        raise click.BadParameter(
            f"{output}: {'the extension ' + ext if ext else 'a name without an extension'} "
            f"names no output format; name the file {', '.join(EXTENSIONS)}, or give "
            f"--format ({', '.join(FORMATS)})", param_hint="'--output'")
    return found


def to_parquet(fmt: str | None, output: str | None) -> bool:
    """Whether the rows go to a Parquet file, which needs them typed as an Arrow table; every
    other format prints plain rows (`query.rows.Rows`) alike, without importing pyarrow."""
    return output_format(fmt, output) == "parquet"


def emit(table: Any, fmt: str | None, output: str | None, *, whole: Any = ()) -> None:
    """Write rows (see the module docstring); `whole` names more identifying columns, whose
    values and headers the table format never cuts (`present.render`)."""
    from ..present import render as out

    fmt = output_format(fmt, output)
    if fmt is None:
        fmt = "table" if (output is None and sys.stdout.isatty()) else "csv"
    if fmt == "parquet":
        if not output:
            raise click.UsageError("--format parquet needs --output FILE")
        with writing_output(output):
            out.write_parquet(table, output)
        return
    wide = bool(click.get_current_context().meta.get("runstore.wide"))
    # shutil reads $COLUMNS first, then asks the terminal; a file has no width to fit.
    width = shutil.get_terminal_size((100, 24)).columns if output is None else 10_000
    write_text(out.render(table, fmt, width=width, wide=wide, whole=whole), output)


def utf8(text: str, what: str, hint: str = "give it in UTF-8") -> str:
    """`text`, or a usage error naming `what` (an argument, a query's file) and saying `hint`
    when it is not UTF-8 text (`printable.not_utf8`: bytes that are not, which Python holds as
    lone surrogates and no store value or DuckDB string can hold)."""
    at = not_utf8(text)
    if at is not None:
        char = ord(text[at])
        byte = f"byte 0x{char - 0xDC00:02x}" if 0xDC80 <= char <= 0xDCFF else f"U+{char:04X}"
        raise click.UsageError(f"{what} is not UTF-8 text ({byte} at character {at}): {hint}")
    return text


def shown(text: str) -> str:
    """`text` for a message, in quotes, bytes that are not UTF-8 as `\\xNN`."""
    return f"'{escaped(text)}'"


# A --param VALUE that is a number as people write one; any other text stays text, so that
# `007`, `1_000`, ` 5` and `nan` reach the query as written (Python's int() and float() would
# take each as a number).
_INTEGER = re.compile(r"[+-]?(?:0|[1-9][0-9]*)")
_DECIMAL = re.compile(r"[+-]?(?:(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                      r"|[0-9]+[eE][+-]?[0-9]+)")


def parse_params(values: tuple[str, ...]) -> dict[str, Any]:
    """`--param NAME=VALUE` values: VALUE an int or a float when written as one (`42`, `-0.5`,
    `1e-3`), else the text itself."""
    params: dict[str, Any] = {}
    for item in values:
        if "=" not in item:
            raise click.UsageError(f"--param expects name=value, got {item!r}")
        name, value = item.split("=", 1)
        params[name.strip()] = _typed(value)
    return params


def _typed(value: str) -> Any:
    if _INTEGER.fullmatch(value):
        return int(value)
    if _DECIMAL.fullmatch(value):
        return float(value)
    return value


def existing(path: str) -> str:
    """A local path that exists, or an s3:// URI (checked when the query reads it)."""
    if not is_remote(path) and not Path(path).expanduser().exists():
        raise click.BadParameter(f"{path!r} does not exist", param_hint="'--allow-read'")
    return path


def open_store(ctx: click.Context, *, reading: bool = True, **options: Any) -> Any:
    """The `Store` of the group's `--store`; `options` go to `Store` (`memory_limit=`). A
    command runs a statement or few: its queries read the views they need inlined
    (`inline_views`, unless `options` say otherwise), each bound once rather than also when
    created. A reading command reads one snapshot from its first read to its end
    (`Store.one_snapshot`), so the parts of its answer agree; a command that writes, or
    serves, and must see the snapshots it or others publish passes `reading=False`. In the
    command's own process the view is not closed: the process ends with the command
    (`startup.finished`), and closing its database would only make it wait."""
    from ..store import Store

    store = Store(ctx.obj.get("store"), **{"inline_views": True, **options})
    if not reading:
        return store
    view = store.one_snapshot()
    return view.__enter__() if is_the_command() else ctx.with_resource(view)

def write_text(text: str, output: str | None) -> None:
    """`text` into the file `output` (errors about it say so), or on stdout."""
    if output:
        from ..present.outfile import replace

        with writing_output(output):
            replace(output, [text.encode("utf-8")])
    else:
        write_stdout(text)


def write_stdout(text: str) -> None:
    """`text` on stdout, all of it or an error. A pipe whose reader has gone takes the first
    part of a big write without an error (CPython's buffered writer returns the short count,
    which its text layer drops): so the bytes are written until none are left, and the write
    after a short one raises BrokenPipeError, which ends the command as SIGPIPE would."""
    out = sys.stdout
    out.flush()
    data = memoryview(text.encode(out.encoding or "utf-8", getattr(out, "errors", None)
                                  or "strict"))
    while data:
        written = out.buffer.write(data)
        data = data[written if written is not None else len(data):]
    out.buffer.flush()


@contextmanager
def writing_output(path: str) -> Iterator[None]:
    """Write the file `path` the user named: a failure names it and says what to do (a usage
    mistake, exit 2; a full disk or a failing device, exit 6), never "a runstore bug"."""
    try:
        yield
    except OSError as e:
        if e.filename is not None and os.path.abspath(e.filename) != os.path.abspath(path):
            raise  # not the output file: another file's failure says what it is
        raise output_error(path, e) from e


def output_error(path: str, e: OSError) -> RunstoreError:
    """What a failure to write the output file `path` says."""
    why = e.strerror or one_line(e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
        return IOFailure(f"cannot write {path}: {why}. Free some space (or fix the device) "
                         "and run the command again, or write elsewhere with -o.")
    directory = os.path.dirname(path) or "."
    if e.errno == errno.ENOENT and not os.path.isdir(directory):
        why = f"the directory {directory} does not exist"
    return UsageError(f"cannot write {path}: {why}. Choose another file with -o (or create "
                      "its directory first).")



class Progress:
    """A one-line progress bar on stderr (runs, bytes, the run being read), only when stderr
    is a terminal, never wider than the terminal: a line that wraps is not rewritten by `\r`,
    and each update would stack another line. (Kept hand-written, not `click.progressbar`:
    click hides the cursor while its bar is drawn and shows it again only when the bar ends,
    which a second Ctrl-C, `os._exit`, skips; docs/architecture.md, "Libraries".)"""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.last = 0.0
        self.shown = 0  # the length of the line drawn last, cleared by the next one
        self.drawn = False  # a bar is on the line, not yet ended by a newline

    def __call__(self, done: int, total: int, nbytes: int, name: str) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.1 and done < total):
            return
        self.last = now
        # $COLUMNS, else the terminal's width (shutil asks stdout's; 80 when it is a file);
        # the last column is left free, since writing it wraps on some terminals.
        fits = shutil.get_terminal_size((80, 24)).columns - 1
        width = 24
        filled = int(width * done / total) if total else width
        bar = "#" * filled + "-" * (width - filled)
        line = f"[{bar}] {done}/{total} runs, {nbytes / 1e6:.1f} MB"
        room = fits - len(line) - 2
        if name and room >= 8:
            line += "  " + shorten(name, room)
        line = line[:fits]
        click.echo("\r" + line.ljust(self.shown)[:fits], err=True, nl=False)
        self.shown = len(line)
        self.drawn = done < total
        if done == total:
            click.echo("", err=True)
            self.shown = 0

    def end_line(self) -> None:
        """End a bar left unfinished (the ingest stopped before its last run)."""
        if self.drawn:
            click.echo("", err=True)
            self.drawn = False
            self.shown = 0



# What a `--runs` scope accepts: runstore.analysis.runs, the one RUN resolution.
RUNS_HELP = ("Only these runs: a GLOB over run_name (* matches / too), a run_name, a run_id "
             "or a unique prefix of one, or a run's directory.")
RUNS_GLOB = click.option("--runs", metavar="GLOB", help=RUNS_HELP)


def checked_html(ctx: click.Context | None, param: click.Parameter | None,
                 path: str) -> str:
    """An HTML --output FILE: as `checked_output`, but a page is always a file (`-`, standard
    output elsewhere, is refused rather than written as a file named `-`)."""
    if path == "-":
        raise click.BadParameter("the page is written to a file, not to standard output: "
                                 "give a file name such as report.html", ctx, param)
    return checked_output(ctx, param, path)  # type: ignore[return-value]


HTML_OUT = click.option("--output", "-o", "output", required=True,
                         type=click.Path(dir_okay=False), callback=checked_html,
                         help="HTML file to write (its directory must exist).")


def wrote(path: Any) -> None:
    size = Path(path).stat().st_size
    shown = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB"
    click.echo(f"wrote {path} ({shown})", err=True)


def write_chart(fig: Any, output: str) -> None:
    from ..present.charts import write_html

    with writing_output(output):
        wrote(write_html(fig, output))


def lock_timeout_option(holder: str = "an ingest") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--lock-timeout SECONDS` of every command that takes the store's write lock."""
    return click.option("--lock-timeout", type=Seconds(zero=True), default=60.0,
                        show_default=True,
                        help=f"Seconds to wait for {holder} holding the store.")
