"""`runstore keys`, `runstore diff` and `runstore compare`: the comparative questions of a sweep.

Each command is one `Store` call (`keys`, `diff` / `code_diff`, `compare`, all in
`runstore.analysis`) printed with the output options every row-printing command has.
"""

from __future__ import annotations

from typing import Any

import click

from .common import (RUNS_HELP, Weight, emit, handle_errors, open_store, output_options,
                     to_parquet, write_text)


@click.command()
@click.option("--runs", metavar="GLOB",
              help=RUNS_HELP)
@click.option("--like", metavar="TEXT",
              help="Only keys containing TEXT (any case); with a %, an SQL ILIKE pattern "
                   "(e.g. 'env/%/reward/total').")
@output_options
@click.pass_context
@handle_errors
def keys(ctx: click.Context, runs: str | None, like: str | None, fmt: str | None,
         output: str | None) -> None:
    """List the metric keys runs logged: one row per key.

    Columns: key, n_runs (runs with any row of it), n_points (live points: one per run and
    step, the latest write counting, as in the metrics view), first_step, last_step (of
    those points), type (number, string or both, over every write).

    Example:

    \b
        runstore keys --like reward
        runstore keys --runs 'math_rl_sweep/*' --like 'env/%/total' -F json
    """
    store = open_store(ctx)
    emit(store.keys(runs=runs, like=like).to_arrow() if to_parquet(fmt, output)
         else store.key_rows(runs=runs, like=like), fmt, output)


@click.command()
@click.argument("run_patterns", metavar="RUN RUN...", nargs=-1, required=True)
@click.option("--all", "all_keys", is_flag=True,
              help="Show every config key, with a `differs` column (default: only the keys "
                   "whose values differ).")
@click.option("--code", is_flag=True,
              help="Print a unified diff of each run's code.diff against the first run's "
                   "instead (text, whatever the --output file's extension).")
@output_options(text=True)
@click.pass_context
@handle_errors
def diff(ctx: click.Context, run_patterns: tuple[str, ...], all_keys: bool, code: bool,
         fmt: str | None, output: str | None) -> None:
    """Show what differs between runs' configs: one row per flattened config key.

    Keys are dotted paths (dataset_builder.group_size; a part that holds a dot or a comma, or
    could be misread, is a JSON string: {"a.b": 1} is the key "a.b", {"a": {"b": 1}} is a.b);
    there is one column per run, named by its run_label (its run_name, with a run_id
    prefix when two runs share it), in the order given. A cell is the
    value as JSON text (strings in quotes);
    an empty cell is a key the run's config lacks (a JSON null is the text null). Numbers are
    equal when their values are (1 and 1.0). The last row, code.diff, summarises each run's
    code.diff: the same letter means the same content. Each RUN names one run: a run_id or
    a unique prefix of one, a run_name, the run's directory, or a GLOB or name prefix that
    matches exactly one run.

    Example:

    \b
        runstore diff gsm8k_tool_rl/sweep/lr_1e-4/seed_0 gsm8k_tool_rl/sweep/lr_1e-3
        runstore diff 'math_rl_sweep/*/lr_1e-5' 'math_rl_sweep/*/lr_4e-5' --all -o diff.md
        runstore diff sl/tulu3_qwen3-8b_lr2e-4 'dpo/*' --code
    """
    store = open_store(ctx)
    if code:
        write_text(store.code_diff(list(run_patterns)), output)
        return
    emit(store.diff(list(run_patterns), all=all_keys).to_arrow() if to_parquet(fmt, output)
         else store.diff_rows(list(run_patterns), all=all_keys), fmt, output)


def _group_by(value: str | None) -> Any:
    if value is None:
        return None
    from ..store.inputs import config_keys

    keys = [k for k in config_keys(value) if k]  # a quoted key part may hold a comma
    if not keys:
        raise click.BadParameter("give config keys or run columns separated by commas, or "
                                 "auto", param_hint="'--group-by'")
    return keys[0] if keys == ["auto"] else keys


@click.command()
@click.argument("metric")
@click.option("--runs", metavar="GLOB",
              help=RUNS_HELP)
@click.option("--group-by", "group_by", metavar="KEY[,KEY...]|auto",
              help="Group runs by config keys (dotted; a key part holding a dot or a "
                   "comma is double-quoted, as `runstore diff` shows it: '\"a.b\".c') or run "
                   "columns (model_name, learning_rate, kind); auto: runs whose configs "
                   "differ only in seed-like keys form a group. Default: one group per run.")
@click.option("--smooth", type=Weight(), metavar="W",
              help="Also aggregate each run's debiased EMA with weight W in [0, 1) "
                   "(TensorBoard's smoothing; 0.9 is heavy), as plot --smooth draws it.")
@click.option("--x", "x", type=click.Choice(["step", "time", "tokens", "cost"]),
              default="step", show_default=True,
              help="x axis: the step; wall time since the run's first step (time_s, from "
                   "time/total); or what the run had spent by the step: tokens (cumulative "
                   "sampled + trained) or cost (cumulative USD), from the tokens/ and cost/ "
                   "keys tinker-cookbook 0.6 logs.")
@click.option("--bucket", type=float, metavar="WIDTH",
              help="Width of the common grid runs are aligned on when x is time, tokens or "
                   "cost (seconds, tokens or USD; default: about one step).")
@output_options
@click.pass_context
@handle_errors
def compare(ctx: click.Context, metric: str, runs: str | None, group_by: str | None,
            smooth: float | None, x: str, bucket: float | None, fmt: str | None,
            output: str | None) -> None:
    """Mean and band of METRIC per group of runs and step: one row per group and x.

    Columns: group, the group keys, step (or time_s, tokens, cost_usd: the start of a
    bucket of the common grid, each run counted with its last point in it), n (runs with a
    finite value there),
    n_nan, n_inf (runs whose value is NaN or ±Infinity: counted, never aggregated), mean,
    std (sample), min, max; with --smooth also smooth_n, smooth_mean, smooth_std,
    smooth_min, smooth_max over each run's smoothed curve. Only the latest write of a step
    counts, as in the metrics view. The table format never cuts a group label, a group key or
    a group key's header (a wide table turns into one block per row instead).

    Example:

    \b
        runstore compare env/all/reward/total --group-by learning_rate --smooth 0.9
        runstore compare env/all/reward/total --runs 'gsm8k_tool_rl/*' --group-by auto -o bands.csv
        runstore compare optim/entropy --x time -F json
        runstore compare env/all/reward/total --runs 'gsm8k_tool_rl/*' --x cost --bucket 0.05
    """
    store = open_store(ctx)
    asked = dict(runs=runs, group_by=_group_by(group_by), smooth=smooth, x=x, bucket=bucket)
    table = (store.compare(metric, **asked).to_arrow() if to_parquet(fmt, output)
             else store.compare_rows(metric, **asked))
    # The group keys sit between `group` and the x column: they tell the groups apart.
    columns = list(table.column_names)
    keys = columns[1:columns.index(store.compare_axes()[x])]
    emit(table, fmt, output, whole=keys)
    if table.num_rows == 0:  # say why, as `plot metric` does: no run in scope logs METRIC
        for note in store.key_notes([metric], runs=runs):
            click.echo(note, err=True)
