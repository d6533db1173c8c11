"""Tools about runs: `list_runs`, `describe_run`, `compare_runs`.

Contract: `list_runs` is `runstore runs` (`run_summary`, filtered by a scope, kind, status and
a `--where` condition, the columns chosen; a condition is user SQL, so it runs in the capped
worker process of the sql tool) with `run_id` always shown;
`describe_run` is one run's summary row, config, checkpoints, files, the rules of `check`
firing for it and the doctor's findings; `compare_runs` is
`runstore diff` of the runs in a scope and, given a metric, a summary of `runstore compare`'s
grouped curves (per group: runs, first and last step, the mean at the last step, the largest
and smallest mean and where). Every answer is bounded (`agents.answer`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, Optional, Union

from pydantic import Field

from ...errors import UsageError
from ...kinds import RUN_KINDS
from ..answer import UNPAGED
from ..args import DEFAULT_TIMEOUT_S, MaxChars, Offset, Run, Runs, TextFormat, limit
from .base import Toolbox, tool
from .common import Smooth, X, page, run_header, said

if TYPE_CHECKING:
    import polars as pl

RunLimit = limit(50, 1000, "runs")
DiffLimit = limit(100, 2000, "config keys")
CONFIG_SHOWN = 40  # config keys `describe_run` shows (the rest: sql on `config`)
CHECKPOINTS_SHOWN = 5
MOST_COMPARED = 20  # runs `compare_runs` puts side by side (one column each)
_SQL_REST = ("for the rest, call sql with query \"select {columns} from {table} where run_id = $run "
             "order by {order}\" and params {{\"run\": \"{run_id}\"}}")

Kind = Annotated[Optional[Literal[RUN_KINDS]], Field(
    description="Only runs of this kind.")]
Status = Annotated[Optional[Literal["completed", "running", "idle", "missing"]], Field(
    description="Only runs with this status (run_status: completed when the final checkpoint "
                "or progress/done_frac >= 1; running while its files changed in the last "
                "120 s; idle otherwise; missing when its directory is gone).")]
Where = Annotated[Optional[str], Field(
    description="A SQL condition over run_summary's columns, as `runstore runs --where` (a "
                "plain expression: no statements or subqueries).",
    examples=["best_reward > 0.5 and not kl_flagged", "learning_rate >= 3e-4"])]
Columns = Annotated[Optional[list[str]], Field(
    description="run_summary columns to show, in order (run_id is always first). Default: "
                "every column but run_name (run_label shows it). The `views` tool with "
                "name='run_summary' documents each.",
    examples=[["run_label", "status", "learning_rate", "max_kl", "kl_flagged"]])]
GroupBy = Annotated[Optional[Union[str, list[str]]], Field(
    description="Group runs by these config keys (dotted) or run columns (model_name, "
                "learning_rate, kind), or `auto` (runs that differ only by seed); omit for one "
                "group per run.", examples=["learning_rate", ["model_name", "learning_rate"],
                                            "auto"])]


class RunTools(Toolbox):
    """list_runs, describe_run, compare_runs."""

    @tool("List runs")
    def list_runs(self, runs: Runs = None, kind: Kind = None, status: Status = None,
                  where: Where = None, columns: Columns = None, limit: RunLimit = 50,
                  offset: Offset = 0, format: TextFormat = "markdown",
                  max_chars: MaxChars = None) -> str:
        """List runs with their summary (the run_summary view, as `runstore runs`): kind,
        model, learning rate, status, steps, rewards, KL, checkpoints. Filter by a scope
        (GLOB, name, run_id), kind, status or a SQL condition; start here to find runs."""
        import polars as pl

        store = self.store
        wanted = list(columns) if columns else [c for c in store.run_columns() if c != "run_name"]
        asked = ["run_id", *[c for c in wanted if c != "run_id"]]
        extra = ["status"] if status and "status" not in asked else []
        # A `where` is user SQL: it runs as the sql tool's queries run (a capped worker, the
        # sql tool's default time limit).
        user = where is not None
        frame = pl.from_arrow(store.arrow(*store.runs_query(
            kind=kind, runs=runs, where=where, columns=[*asked, *extra]),
            isolated=user, timeout=DEFAULT_TIMEOUT_S if user else None))
        assert isinstance(frame, pl.DataFrame)
        if status:
            frame = frame.filter(pl.col("status") == status).select(asked)
        table, shown = page(frame, offset, limit)
        what = ", ".join(f"{k}={said(v)}" for k, v in (("runs", runs), ("kind", kind),
                                                    ("status", status), ("where", where)) if v)
        out = self.answer(max_chars)
        out.line(f"{frame.height} run{'s' if frame.height != 1 else ''}"
                 + (f" matching {what}" if what else "") + ":")
        return out.table(table, shown, fmt=format, what="runs").render()

    @tool("Describe one run")
    def describe_run(self, run: Run, max_chars: MaxChars = None) -> str:
        """Everything about one run at a glance: its summary (status, steps, rewards, KL),
        config (first keys), latest checkpoints, source files by kind, the rules of `check`
        that fire for it and the doctor's findings. Use it after list_runs or check names a run."""
        import polars as pl

        store = self.store
        found = store.resolve([run])[0]
        out = self.answer(max_chars).line(f"# {run_header(found)}").line(f"directory: {found.path}")
        summary = store.runs(name=found.run_id)
        out.line("## summary")
        out.table(_vertical(summary), _whole(len(summary.columns)), what="fields", more=UNPAGED)
        config = store.run_config(found.run_id)
        out.line(f"## config ({config.height} keys)")
        out.table(*page(config, 0, CONFIG_SHOWN), what="config keys",
                  more=_SQL_REST.format(table="config", columns="key, value", order="key",
                                        run_id=found.run_id))
        checkpoints = store.run_checkpoints(found.run_id)
        out.line(f"## checkpoints ({checkpoints.height}, newest first)")
        out.table(*page(checkpoints.select("name", "batch", "final", "rolling", "state_path"),
                        0, CHECKPOINTS_SHOWN), what="checkpoints",
                  more=_SQL_REST.format(table="checkpoints", columns="*", order="seq desc",
                                        run_id=found.run_id))
        files = store.run_files(found.run_id)
        by_kind = (files.group_by("kind").agg(files=pl.len(), bytes=pl.col("bytes").sum(),
                                              example=pl.col("rel_path").first())
                   .sort("kind"))
        out.line(f"## source files ({files.height}, by kind)")
        out.table(*page(by_kind, 0, by_kind.height), what="kinds", more=UNPAGED)
        fired = store.check(runs=found.run_id)
        out.line(f"## rules of `check` firing ({fired.height})")
        out.table(*page(fired.drop("run_name"), 0, fired.height), what="rules", more=UNPAGED)
        from .health import findings_of

        findings = findings_of(store, found.run_id)
        out.line(f"## doctor's findings ({findings.height}; the doctor tool gives their SQL)")
        out.table(*page(findings, 0, findings.height), what="findings", more=UNPAGED)
        return out.render()

    @tool("Compare runs")
    def compare_runs(self, runs: Runs, metric: Annotated[Optional[str], Field(
                         description="Also summarise this metric's grouped curves (per group: "
                                     "mean at the last step, largest and smallest mean and "
                                     "where); `metric_keys` lists the keys.",
                         examples=["env/all/reward/total"])] = None,
                     group_by: GroupBy = None, smooth: Smooth = None, x: X = "step",
                     all_config: Annotated[bool, Field(
                         description="Show every config key, not only those that differ.")]
                     = False,
                     limit: DiffLimit = 100, offset: Offset = 0, format: TextFormat = "markdown",
                     max_chars: MaxChars = None) -> str:
        """Put runs side by side: their config differences (`runstore diff`: one column per
        run, a last `code.diff` row) and, with `metric`, a per-group summary of its curves
        (`runstore compare`, grouped by config keys or seeds)."""
        store = self.store
        ids: list[str] = []  # in the order given, each GLOB's runs by label
        for pattern in [] if runs is None else [runs] if isinstance(runs, str) else runs:
            for run_id in store.runs(name=pattern, columns=["run_id"])["run_id"].to_list():
                if run_id not in ids:
                    ids.append(run_id)
        if len(ids) < 2:
            raise UsageError("compare_runs compares two or more runs: give runs as a GLOB that "
                             "matches several, or a list of runs")
        if len(ids) > MOST_COMPARED:
            raise UsageError(f"{runs!r} matches {len(ids)} runs; compare_runs puts at most "
                             f"{MOST_COMPARED} side by side: narrow the GLOB, or give metric "
                             "with group_by to summarise more as groups")
        out = self.answer(max_chars)
        diff = store.diff(ids, all=all_config)
        table, shown = page(diff, offset, limit)
        out.line(f"## config {'of' if all_config else 'differences between'} {len(ids)} runs "
                 f"({diff.height} keys)")
        out.table(table, shown, fmt=format, what="config keys")
        if metric is not None:
            curves = store.compare(metric, runs=ids, group_by=group_by, smooth=smooth, x=x)
            members = store.groups(runs=ids, group_by=group_by)
            summary = _curve_summary(curves, members, smooth is not None)
            out.line(f"## {metric} by group (x={x}"
                     + (f", smoothed {smooth}" if smooth is not None else "") + ")")
            out.table(*page(summary, 0, summary.height), fmt=format, what="groups",
                      more=UNPAGED)
        return out.render()


def _vertical(frame: "pl.DataFrame") -> "object":
    """A one-row frame as `field, value` rows (values as the markdown table writes them)."""
    import pyarrow as pa

    from ...present.render import cell_text

    rows = frame.to_dicts()
    values = [cell_text(v) for v in rows[0].values()] if rows else []
    return pa.table({"field": frame.columns[:len(values)], "value": values})


def _whole(n: int) -> "object":
    from ..answer import Page

    return Page(0, max(n, 1), n)


def _curve_summary(curves: "pl.DataFrame", members: "pl.DataFrame",
                   smoothed: bool) -> "pl.DataFrame":
    """Per group of a `compare` answer: runs, x range, the mean at the last x, the largest and
    smallest mean and where (the first x where it was reached)."""
    import polars as pl

    xcol = curves.columns[curves.columns.index("n") - 1]  # compare's x column precedes `n`
    runs = members.group_by("group", maintain_order=True).agg(runs=pl.len())
    mean = pl.col("mean")
    aggs = [pl.col(xcol).min().alias(f"first_{xcol}"), pl.col(xcol).max().alias(f"last_{xcol}"),
            mean.last().alias("last_mean"), pl.col("n").last().alias("last_n"),
            mean.max().alias("max_mean"), pl.col(xcol).filter(mean == mean.max()).first()
            .alias("max_at"), mean.min().alias("min_mean"),
            pl.col(xcol).filter(mean == mean.min()).first().alias("min_at")]
    if smoothed:
        aggs.append(pl.col("smooth_mean").last().alias("last_smooth_mean"))
    summary = curves.sort(xcol).group_by("group", maintain_order=True).agg(aggs)
    return runs.join(summary, on="group", how="left", maintain_order="left")
