"""`runstore doctor`: what went wrong in each run, with the evidence and what to try."""

from __future__ import annotations

import shutil
import sys

import click

from .common import emit, handle_errors, open_store, output_format, output_options, write_text


@click.command()
@click.argument("runs", nargs=-1, metavar="[RUN]...")
@click.option("--explain", is_flag=True,
              help="Also print each finding's SQL, its thresholds, and which runs it could not "
                   "judge and why (after the findings; on stderr for csv, json, jsonl and "
                   "parquet output).")
@click.option("--finding", "only", multiple=True, metavar="NAME",
              help="Only this finding of the catalogue (repeatable; default: every finding "
                   "runstore.toml leaves on).")
@output_options
@click.pass_context
@handle_errors
def doctor(ctx: click.Context, runs: tuple[str, ...], explain: bool, only: tuple[str, ...],
           fmt: str | None, output: str | None) -> None:
    """Say what went wrong in each run: findings with their evidence, worst first.

    Each finding of the catalogue (docs/doctor.md: kl_spike, reward_stuck, parse_errors,
    no_improvement, reward_collapse, entropy_collapse, length_at_limit, no_signal,
    rollout_errors, stale_policy, slow_steps, crashed, not_finite, eval_gap) is one SQL
    statement over the store's views. A row says which run, which finding and how bad
    (error, warning, info), from which step to which, the evidence in numbers, the next thing
    to try, and a statement to run with `runstore sql` that shows the evidence; on a terminal
    (or --format table) each finding is a block of lines, nothing cut (--wide prints the
    table every command prints). RUN is a run
    name, a run_id or a GLOB over run names (`*` matches `/` too); none: every run.
    Thresholds come from runstore.toml's [doctor.NAME] tables. A finding never invents data:
    a run that lacks its evidence (no entropy logged, say) is not judged, and --explain says
    which runs and why. One line on stderr counts the findings.

    Exit status: 0 when no finding is an error, 1 when one is, 2 for a usage error, 3 and
    above for the store or the machine, as for every command (an error is never 1).

    Example:

    \b
        runstore doctor                          # exit 1: every run, worst first
        runstore doctor 'gsm8k_tool_rl/*' -F json   # exit 1: the KL spike is an error
        runstore doctor gsm8k_tool_rl/sweep/lr_1e-3/seed_0 --explain   # exit 1
        runstore doctor --finding no_improvement --finding reward_stuck -F jsonl
    """
    store = open_store(ctx)
    # An error keeps its own status (errors.EXIT_CODES: none is 1, the status of a finding).
    found = store.diagnosis(list(runs) or None, only=list(only) or None)
    chosen = output_format(fmt, output)
    people = chosen == "table" or (chosen is None and output is None and sys.stdout.isatty())
    if people and not ctx.meta.get("runstore.wide"):
        # For people: a block per finding, nothing cut (--wide: the table of every command).
        from ..present.findings import render_findings

        width = shutil.get_terminal_size((100, 24)).columns if output is None else 100
        write_text(render_findings(found.rows, width), output)
    else:
        emit(found.arrow() if chosen == "parquet" else found.table(), fmt, output,
             whole=found.whole_columns)
    click.echo(found.summary(), err=True)
    if explain:
        text = found.explain()
        if (people or chosen == "markdown") and output is None:
            write_text("\n" + text, None)
        else:
            click.echo(text, err=True, nl=False)
    if found.errors:
        ctx.exit(1)
