"""Every metric key a store holds, with how much of it there is: `runstore keys`.

Contract: `keys(store, runs=None, like=None)` returns one row per metric key that some run in
scope logged (any row of `metrics_raw`: live, superseded, step-less or in a
`metrics.jsonl.pre_resume_*` copy — the keys `runstore.keys.logged_keys` knows), ordered by
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

Speed: a scan of `metrics_raw` cannot answer in 50 ms (measured on the 100-run, 12M-row
benchmark store: ~0.2 s for distinct (key, run) pairs, ~4 s with distinct steps per key and
run), so the answer is meant to come from a per-key summary kept at ingest: the `metric_keys`
table, one row per (metrics source file, key) — `SUMMARY_FIELDS` — which holds ~100 rows per
run. `summarize(rows)` computes a source's summary from a chunk of its `metrics_raw` rows,
`merge(earlier, chunk)` adds a later chunk of the same file (an incremental read), and
`summary_table(...)` makes the table's rows. A chunk that logs a key at a step not after the
last step already summarised (a pre-0.6 resume logging steps again) cannot know whether those
steps were already counted: its `n_points` is then an upper bound and `steps_exact` false, and
`keys` recounts those (source, key) pairs from `metrics_raw`. Until the store has the table
(see INTEGRATION below), `keys` computes the same summary from `metrics_raw` at query time
(`SCAN`): the same answer, slower.

INTEGRATION (after the package restructuring; nothing here is wired yet):
1. `summarize`/`merge`/`summary_table` move to `runstore/ingest/normalize/metric_keys.py`
   (ingest sits below analysis and may not import it); this module imports them from there.
2. schema.py gains the `metric_keys` table (`SUMMARY_FIELDS`, types as in `summary_schema`);
   the metrics normalizer entry of the registry (today work.KIND_TABLES["metrics"] and
   ["metrics_pre_resume"]) declares it, so a re-read file's summary rows are deleted with its
   `metrics_raw` rows by the existing `source_id` delete.
3. In work._normalize's metrics branch, after `metrics.normalize(...)`:
   `state = merge(entry.state.get("keys"), summarize(table))`; `entry.state["keys"] = state`;
   `result.deletes.append(("metric_keys", <source_id = sid>))`;
   `_add(result, "metric_keys", summary_table(ctx.run_id, sid, pre_resume, state))`.
   A re-read (`plan.replace`) starts from a fresh Entry, so the state starts empty with it.
   process_file stays pure: the earlier summary travels in the ledger entry's state (~4 KB
   per metrics file), not in a read of the store.
4. A migration creates the table and fills it (and each metrics entry's `state["keys"]`) from
   `SCAN` grouped per source, so an existing store answers fast without a re-read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from .runs import Scope, scope_condition

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from . import Queryable

TABLE = "metric_keys"
# Per (source file, key): the summary kept at ingest. `n_points` counts distinct steps.
SUMMARY_FIELDS = ("run_id", "source_id", "key", "pre_resume", "n_points", "first_step",
                  "last_step", "n_numbers", "n_strings", "n_stepless", "steps_exact")
COLUMNS = ("key", "n_runs", "n_points", "first_step", "last_step", "type")
# One key's state in a ledger entry: [n_points, first_step, last_step, n_numbers, n_strings,
# n_stepless, steps_exact]; steps are None when the key has only step-less rows.
Stats = list

# The summary computed from `metrics_raw` itself, one row per (source, key): what the
# `metric_keys` table holds, for stores that do not have it yet (and for the migration).
SCAN = """
select run_id, source_id, key,
       coalesce(bool_or(pre_resume), false) as pre_resume,
       count(distinct step) as n_points,
       min(step) as first_step, max(step) as last_step,
       count(value) as n_numbers, count(value_str) as n_strings,
       count(*) filter (where step is null) as n_stepless,
       true as steps_exact
from metrics_raw
group by run_id, source_id, key
"""


def summary_schema() -> "pa.Schema":
    """Arrow schema of the `metric_keys` table."""
    import pyarrow as pa

    i64 = pa.int64()
    return pa.schema([("run_id", pa.string()), ("source_id", i64), ("key", pa.string()),
                      ("pre_resume", pa.bool_()), ("n_points", i64), ("first_step", i64),
                      ("last_step", i64), ("n_numbers", i64), ("n_strings", i64),
                      ("n_stepless", i64), ("steps_exact", pa.bool_())])


def summarize(rows: "pa.Table") -> dict[str, Stats]:
    """Each key's stats over some `metrics_raw` rows of one source (pyarrow only: it runs in
    the ingest).

    >>> import pyarrow as pa
    >>> rows = pa.table({"step": [0, 1, 1, None], "key": ["a", "a", "a", "a"],
    ...                  "value": [1.0, None, 2.0, 3.0], "value_str": [None, "x", None, None]})
    >>> summarize(rows)
    {'a': [2, 0, 1, 3, 1, 1, True]}
    """
    import pyarrow.compute as pc

    if rows.num_rows == 0:
        return {}
    table = rows.select(["key", "step", "value", "value_str"]).append_column(
        "stepless", pc.is_null(rows.column("step")))
    grouped = table.group_by("key").aggregate([
        ("step", "count_distinct"), ("step", "min"), ("step", "max"), ("value", "count"),
        ("value_str", "count"), ("stepless", "sum")])
    out: dict[str, Stats] = {}
    for r in grouped.to_pylist():
        out[r["key"]] = [r["step_count_distinct"], r["step_min"], r["step_max"],
                         r["value_count"], r["value_str_count"], int(r["stepless_sum"] or 0),
                         True]
    return dict(sorted(out.items()))


def merge(earlier: dict[str, Stats] | None, chunk: dict[str, Stats]) -> dict[str, Stats]:
    """The stats of a source after a later chunk of it (`chunk`) was read after `earlier`.

    Counts add up. Distinct steps add up exactly when the chunk's steps of a key all come
    after the last step summarised before; otherwise (a pre-0.6 resume logs steps again) the
    sum is an upper bound and `steps_exact` turns false.

    >>> merge({"a": [2, 0, 1, 2, 0, 0, True]}, {"a": [1, 2, 2, 1, 0, 0, True]})["a"]
    [3, 0, 2, 3, 0, 0, True]
    >>> merge({"a": [2, 0, 1, 2, 0, 0, True]}, {"a": [1, 1, 1, 1, 0, 0, True]})["a"]
    [3, 0, 1, 3, 0, 0, False]
    """
    out = {k: list(v) for k, v in (earlier or {}).items()}
    for key, new in chunk.items():
        old = out.get(key)
        if old is None:
            out[key] = list(new)
            continue
        n, first, last, nums, strs, stepless, exact = old
        n2, first2, last2, nums2, strs2, stepless2, exact2 = new
        overlap = last is not None and first2 is not None and first2 <= last
        out[key] = [n + n2, _min(first, first2), _max(last, last2), nums + nums2,
                    strs + strs2, stepless + stepless2, bool(exact and exact2 and not overlap)]
    return dict(sorted(out.items()))


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def summary_table(run_id: str, source_id: int, pre_resume: bool,
                  stats: dict[str, Stats]) -> "pa.Table":
    """The `metric_keys` rows of one source from its stats."""
    import pyarrow as pa

    keys = list(stats)
    cols: dict[str, list[Any]] = {
        "run_id": [run_id] * len(keys), "source_id": [source_id] * len(keys), "key": keys,
        "pre_resume": [pre_resume] * len(keys)}
    for i, name in enumerate(SUMMARY_FIELDS[4:]):
        cols[name] = [stats[k][i] for k in keys]
    return pa.table(cols, schema=summary_schema())


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
    summary = _recount(store, summary)
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
    """The summary rows in scope: from the `metric_keys` table when the store has one, else
    computed from `metrics_raw` (`SCAN`)."""
    import polars as pl
    import sqlglot
    from sqlglot import exp

    if TABLE in store.tables():
        query = exp.select(*SUMMARY_FIELDS).from_(TABLE)
    else:
        query = exp.select(*SUMMARY_FIELDS).from_(
            exp.alias_(exp.paren(sqlglot.parse_one(SCAN, read="duckdb")), "s", table=True))
    cond, params = scope_condition(runs, "run_id")
    if cond is not None:
        query = query.where(cond)
    if like is not None:
        query = query.where(like_condition(like))
        params["like"] = like
    df = pl.from_arrow(store.arrow(query.sql(dialect="duckdb"), params))
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


def _recount(store: "Queryable", summary: "pl.DataFrame") -> "pl.DataFrame":
    """`summary` with the exact distinct-step count of each (source, key) whose summary could
    only bound it (`steps_exact` false), recounted from `metrics_raw`."""
    import polars as pl

    inexact = summary.filter(~pl.col("steps_exact"))
    if inexact.height == 0:
        return summary
    sql = ("select source_id, key, count(distinct step) as exact_points from metrics_raw "
           "where list_contains($sources, source_id) and list_contains($keys, key) "
           "group by source_id, key")
    counts = pl.from_arrow(store.arrow(sql, {
        "sources": inexact["source_id"].unique().to_list(),
        "keys": inexact["key"].unique().to_list()}))
    assert isinstance(counts, pl.DataFrame)
    return (summary.join(counts, on=["source_id", "key"], how="left")
            .with_columns(n_points=pl.when(pl.col("steps_exact")).then(pl.col("n_points"))
                          .otherwise(pl.col("exact_points").fill_null(0)))
            .drop("exact_points"))
