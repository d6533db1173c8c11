"""`runstore plot`, `report`, `trace`: commands that draw charts, write the report, export traces.

The charts are written from their plain data (`present.charts`'
`*_chart`, the charts the `Store`'s `plot_*` Figures are made of), so a command that writes
one imports no plotly Python package, pyarrow or numpy.
"""

from __future__ import annotations

import click

from .common import (HTML_OUT, RUNS_GLOB, Weight, checked_output, handle_errors, open_store,
                     write_chart, write_text, writing_output, wrote)


@click.group()
def plot() -> None:
    """Draw one chart into a self-contained HTML file (plotly.js inlined: opens offline).

    Example:

    \b
        runstore plot metric env/all/reward/total --color-by learning_rate -o reward.html
        runstore plot kl -o kl.html
    """


@plot.command("metric")
@click.argument("keys", nargs=-1, required=True)
@RUNS_GLOB
@click.option("--color-by", metavar="CONFIG_KEY",
              help="Colour runs by the value of this flattened config key (e.g. learning_rate).")
@click.option("--smooth", type=Weight(), metavar="W",
              help="Add each line smoothed: the debiased EMA with weight W in [0, 1) "
                   "(TensorBoard's smoothing, as compare --smooth and the web UI; 0.9 is "
                   "heavy, 0 draws the raw line alone); the raw line stays faint.")
@HTML_OUT
@click.pass_context
@handle_errors
def plot_metric(ctx: click.Context, keys: tuple[str, ...], runs: str | None,
                color_by: str | None, smooth: float | None, output: str) -> None:
    """One line per run and metric KEY over steps.

    A KEY that no run in the store has logged is an error naming the closest logged keys; a
    KEY that only some runs log gets a note on stderr saying how many.

    Example:

    \b
        runstore plot metric env/all/reward/total --runs 'math_rl_sweep/*' \\
            --color-by learning_rate --smooth 0.8 -o reward.html
    """
    from ..present.charts import metric_chart

    store = open_store(ctx)
    write_chart(metric_chart(store, list(keys), runs=runs, color_by=color_by,
                             smooth=smooth), output)
    for note in store.key_notes(list(keys), runs=runs):
        click.echo(note, err=True)


@plot.command("kl")
@RUNS_GLOB
@click.option("--threshold", type=float, metavar="X",
              help="KL threshold (default: the store's kl_threshold setting, 0.01).")
@HTML_OUT
@click.pass_context
@handle_errors
def plot_kl(ctx: click.Context, runs: str | None, threshold: float | None, output: str) -> None:
    """KL v1 and v2 per run, the threshold dashed, flagged runs on top and in the title.

    Example:

    \b
        runstore plot kl -o kl.html
        runstore plot kl --runs 'gsm8k_tool_rl/*' --threshold 0.005 -o kl.html
    """
    from ..present.charts import kl_chart

    write_chart(kl_chart(open_store(ctx), runs=runs, threshold=threshold), output)


@plot.command("rewards")
@RUNS_GLOB
@click.option("--color-by", metavar="CONFIG_KEY",
              help="Colour runs by the value of this flattened config key.")
@HTML_OUT
@click.pass_context
@handle_errors
def plot_rewards(ctx: click.Context, runs: str | None, color_by: str | None,
                 output: str) -> None:
    """Reward per step (faint) and its 10-step moving average (reward_trends), per run.

    Example:

    \b
        runstore plot rewards --color-by model_name -o rewards.html
    """
    from ..present.charts import reward_chart

    write_chart(reward_chart(open_store(ctx), runs=runs, color_by=color_by), output)


@plot.command("spans")
@click.argument("run")
@click.option("--step", type=int, metavar="N", help="Step of the Gantt chart (default: the last).")
@HTML_OUT
@click.pass_context
@handle_errors
def plot_spans(ctx: click.Context, run: str, step: int | None, output: str) -> None:
    """Gantt chart of one step's spans of RUN, and each span's share of step time.

    RUN names one run: a run_id or a unique prefix of one, a run_name, the run's directory,
    or a GLOB (or name prefix) that matches exactly one run.

    Example:

    \b
        runstore plot spans gsm8k_tool_rl/sweep/lr_1e-4/seed_0 --step 10 -o spans.html
    """
    from ..present.charts import spans_chart

    write_chart(spans_chart(open_store(ctx), run, step=step), output)


@click.command()
@HTML_OUT
@RUNS_GLOB
@click.pass_context
@handle_errors
def report(ctx: click.Context, output: str, runs: str | None) -> None:
    """Write one self-contained HTML report: runs, KL health, rewards, spans, checkpoints.

    The file opens with no network (plotly.js is inlined once).

    Example:

    \b
        runstore report -o report.html
        runstore report --runs 'math_rl_sweep/*' -o math.html
    """
    with writing_output(output):
        wrote(open_store(ctx).report(output, runs=runs))


@click.command()
@click.argument("run")
@click.option("--step", type=int, metavar="N",
              help="Only step N: slices tagged with it or inside its time window.")
@click.option("--segment", type=int, metavar="K",
              help="Only process session K of a resumed run (0, 1, ...).")
@click.option("--from", "source", type=click.Choice(["auto", "trace", "spans"]), default="auto",
              show_default=True,
              help="trace_events.jsonl slices, or timing spans (auto: the trace when there is one).")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False),
              callback=checked_output,
              help="Write to FILE instead of standard output (its directory must exist; `-` "
                   "is standard output).")
@click.pass_context
@handle_errors
def trace(ctx: click.Context, run: str, step: int | None, segment: int | None, source: str,
          output: str | None) -> None:
    """Export RUN's timing as a Chrome trace JSON array for Perfetto UI or chrome://tracing.

    RUN names one run: a run_id or a unique prefix of one, a run_name, the run's directory,
    or a GLOB (or name prefix) that matches exactly one run. Without trace_events.jsonl the
    run's timing spans are exported instead (one track per nesting depth, steps end to end).

    Example:

    \b
        runstore trace gsm8k_tool_rl/sweep/lr_3e-4/seed_1 --step 10 -o trace.json
        runstore trace 'sl/*' --segment 0 -o trace.json   # then open it in ui.perfetto.dev
    """
    from ..present.trace_export import dumps

    if step is not None and segment is not None:
        raise click.UsageError("give --step or --segment, not both")
    text = dumps(open_store(ctx).trace(run, step=step, segment=segment, source=source))
    write_text(text, output)
    if output:
        wrote(output)
