"""The `runstore` click group: global options after the command too, and one exit scheme.

Contract: `RunstoreGroup` is the class of the `runstore` group. Every command added to it
(and every command of a subgroup such as `plot`) also accepts the global options `--store`
(`-s`) and `--debug` after its own name (`runstore sql "…" --store X`), hidden from its help;
given there, they win over the same option before the command. What happens outside a
command (parsing arguments, printing `--help`) follows the same endings as a command
(`failures`): a reader that went away ends the process as SIGPIPE does, Ctrl-C prints
`interrupted` and exits 130; an argument that is not UTF-8 text is a usage error naming it
(exit 2), whatever the command. The `runstore` command's own process ends as soon as the
command has (`startup.finished`). `exit_status_help()` is the exit-status table `runstore
--help` ends with, rendered from `errors.EXIT_CODES`.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from ..crashpoints import pause_point
from ..errors import EXIT_CODES, INTERRUPTED
from ..startup import finished, started
from .common import shown, utf8
from .failures import broken_pipe, is_broken_pipe, say

GLOBAL_HELP = ("Global options (--store, --debug) may also follow the command: "
               "`runstore sql \"select 1\" --store runs.store`.")


def exit_status_help() -> str:
    """The exit statuses, one per line, for `runstore --help` (click keeps `\\b` blocks)."""
    lines = ["Exit status:", "", "\b"]
    lines += [f"  {code:>3}  {meaning}" for code, meaning in EXIT_CODES.items()]
    return "\n".join(lines)


def _remember(key: str) -> Any:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value not in (None, False):
            root = ctx.find_root()
            root.ensure_object(dict)
            root.obj[key] = value
        return value

    return callback


def accept_global_options(command: click.Command) -> None:
    """Give `command` (and a group's subcommands) the hidden `--store` and `--debug`."""
    names = {opt for p in command.params for opt in p.opts}
    if not names & {"--store", "-s"}:
        command.params.append(click.Option(
            ["--store", "-s"], default=None, hidden=True, expose_value=False,
            callback=_remember("store"), help="The store (as `runstore --store`)."))
    if "--debug" not in names:
        command.params.append(click.Option(
            ["--debug"], is_flag=True, default=False, hidden=True, expose_value=False,
            callback=_remember("debug"), help="Show tracebacks (as `runstore --debug`)."))
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            accept_global_options(sub)


def _outside_a_command(e: BaseException) -> None:
    """The endings `failures.handle_errors` gives inside a command, for what happens outside
    one (click would say `Aborted!` with status 1, or exit 1 on a broken pipe)."""
    if is_broken_pipe(e):
        broken_pipe()
    if isinstance(e, KeyboardInterrupt):
        say("interrupted")
        sys.exit(INTERRUPTED)


class RunstoreGroup(click.Group):
    """The `runstore` group (see the module docstring)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        outermost = kwargs.get("standalone_mode", True)  # the call that is the whole command
        try:
            try:
                started()  # from here Ctrl-C is handled as above, not as while Python imported us
                pause_point("started")
                return super().main(*args, **kwargs)
            except KeyboardInterrupt as e:
                # Click reads its program name and any shell-completion request before its own
                # `try` (which makes a Ctrl-C "Aborted!"): one that lands there is ours to end.
                if not outermost:
                    raise
                _outside_a_command(e)
                raise
        except SystemExit as done:
            # Its own process ends here, without the teardown (which, with the early database
            # still being made on its thread, aborts: "FATAL: exception not rethrown").
            if outermost:
                finished(done.code)
            raise

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        accept_global_options(cmd)
        super().add_command(cmd, name)

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            for arg in args:  # every value runstore stores or queries is UTF-8 text
                utf8(arg, f"argument {shown(arg)}",
                     "give it in UTF-8 (a file or directory it names: rename it)")
            return super().make_context(info_name, args, parent=parent, **extra)
        except BaseException as e:
            _outside_a_command(e)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BaseException as e:
            _outside_a_command(e)
            raise
