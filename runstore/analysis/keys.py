"""Every metric key a store holds, with how much of it there is: `runstore keys`.

Contract: `keys(store, runs=None, like=None)` returns one row per metric key that some run in
scope logged (any row of `metrics_raw`: live, superseded, step-less or in a
`metrics.jsonl.pre_resume_*` copy — the keys `query.keys.logged_keys` knows), ordered by
key, with

* `n_runs`: runs in scope with any row of the key;
* `n_points`: live points, the rows the `metrics` view has for the key (one per run and step
  whose live file logs the key; what `compare` and the charts plot, strings included);
* `first_step`, `last_step`: smallest and largest step of those points (null when none: a key
  only step-less rows or pre_resume copies hold);
* `type`: `number`, `string` or `both`, over every write of the key (strings and booleans are
  `string`; NaN and ±Infinity are numbers).

`runs` is a GLOB over `run_name` or a list of names (analysis.runs); `like` keeps the keys that
contain it, case-insensitively, or, when it holds a `%`, that match it as an SQL `ILIKE`
pattern (`env/%/reward/total`).

Source: `metric_keys`, the per-key summary the ingest keeps (ingest/normalize/metric_keys.py),
read exactly through `query.keys.per_source` — the same table `query.keys.logged_keys` (the
"has any run logged KEY?" check of every command) reads, so the two never disagree. It holds
~100 rows per metrics file, so the answer takes milliseconds where a scan of `metrics_raw`
takes seconds on the 100-run benchmark store (12M rows).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .runs import Scope, scope_condition

if TYPE_CHECKING:
    import polars as pl

    from . import Queryable

COLUMNS = ("key", "n_runs", "n_points", "first_step", "last_step", "type")


def keys(store: "Queryable", *, runs: Scope = None, like: str | None = None) -> "pl.DataFrame":
    """One row per metric key logged by a run in scope (see the module docstring).

    Example:
        >>> keys(store, like="reward/total", runs="math_rl_sweep/*").rows()
        [('env/all/reward/total', 4, 160, 0, 39, 'number'), ('test/env/all/reward/total', 4, 20, 0, 40, 'number')]
    """
    import polars as pl

    from .runs import scoped_runs

    if runs is not None:
        scoped_runs(store, runs)  # an empty GLOB or an unknown name is an error, not no keys
    summary = _summary(store, runs, like)
    live = pl.col("pre_resume").not_()
    numbers, strings = pl.col("n_numbers").sum() > 0, pl.col("n_strings").sum() > 0
    out = (summary.group_by("key").agg(
        n_runs=pl.col("run_id").n_unique(),
        n_points=pl.col("n_points").filter(live).sum(),
        first_step=pl.col("first_step").filter(live).min(),
        last_step=pl.col("last_step").filter(live).max(),
        type=pl.when(numbers & strings).then(pl.lit("both"))
        .when(numbers).then(pl.lit("number")).otherwise(pl.lit("string")))
        .sort("key"))
    return out.select(
        pl.col("key"), pl.col("n_runs").cast(pl.Int64), pl.col("n_points").cast(pl.Int64),
        pl.col("first_step").cast(pl.Int64), pl.col("last_step").cast(pl.Int64), pl.col("type"))


def _summary(store: "Queryable", runs: Scope, like: str | None) -> "pl.DataFrame":
    """The exact per-(run, source, key) summary rows in scope (query.keys.per_source)."""
    import polars as pl
    from sqlglot import exp

    from ..query.keys import per_source

    conditions, params = [], {}
    cond, scope_params = scope_condition(runs, "run_id")
    if cond is not None:
        conditions.append(cond)
        params.update(scope_params)
    if like is not None:
        conditions.append(like_condition(like))
        params["like"] = like
    where = exp.and_(*conditions) if conditions else None
    df = pl.from_arrow(per_source(store, where, params))  # type: ignore[arg-type]
    assert isinstance(df, pl.DataFrame)
    return df


def like_condition(like: str) -> Any:
    """`key` contains `like` (any case), or matches it with ILIKE when it holds a `%`.

    >>> like_condition("Reward").sql(dialect="duckdb")
    'CONTAINS(LOWER(key), LOWER($like))'
    >>> like_condition("env/%/total").sql(dialect="duckdb")
    'key ILIKE $like'
    """
    from sqlglot import exp

    from ..errors import UsageError

    if not isinstance(like, str) or not like:
        raise UsageError(f"like is some text a key contains (or an ILIKE pattern with %), "
                         f"got {like!r}")
    if "%" in like:
        return exp.ILike(this=exp.column("key"), expression=exp.Placeholder(this="like"))
    return exp.func("contains", exp.Lower(this=exp.column("key")),
                    exp.Lower(this=exp.Placeholder(this="like")))
