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

`runs` is a scope (analysis.runs: a GLOB, name, run_id, directory, or a list); `like` keeps
the keys that contain it, case-insensitively, or, when it holds a `%`, that match it as an
SQL `ILIKE` pattern (`env/%/reward/total`).

Source: `metric_keys`, the per-key summary the ingest keeps (ingest/summaries.py),
read exactly through `query.keys.per_source` — the same table `query.keys.logged_keys` (the
"has any run logged KEY?" check of every command) reads, so the two never disagree. It holds
~100 rows per metrics file, so the answer takes milliseconds where a scan of `metrics_raw`
takes seconds on the 100-run benchmark store (12M rows).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .runs import Scope, scope_ids

if TYPE_CHECKING:
    import polars as pl

    from ..query.rows import Rows

    from ..query.reader import Reader

COLUMNS = ("key", "n_runs", "n_points", "first_step", "last_step", "type")


def keys(store: "Reader", *, runs: Scope = None, like: str | None = None) -> "pl.DataFrame":
    """One row per metric key logged by a run in scope (see the module docstring), as a
    polars DataFrame: `key_rows`'s rows, typed.

    Example:
        >>> keys(store, like="reward/total", runs="math_rl_sweep/*").rows()
        [('env/all/reward/total', 4, 160, 0, 39, 'number'), ('test/env/all/reward/total', 4, 20, 0, 40, 'number')]
    """
    import polars as pl

    return pl.DataFrame(key_rows(store, runs=runs, like=like).data, orient="row",
                        schema={c: pl.String if c in ("key", "type") else pl.Int64
                                for c in COLUMNS})


def key_rows(store: "Reader", *, runs: Scope = None, like: str | None = None) -> "Rows":
    """The rows of `keys` as plain Python rows (`query.rows.Rows`), ordered by key: what
    `runstore keys` prints, without polars or pyarrow (the one definition of the answer)."""
    from ..query.rows import Rows

    by_key: dict[str, list[dict[str, Any]]] = {}
    for row in _summary(store, runs, like):
        by_key.setdefault(row["key"], []).append(row)
    data = []
    for key in sorted(by_key):
        rows = by_key[key]
        live = [r for r in rows if not r["pre_resume"]]
        firsts = [r["first_step"] for r in live if r["first_step"] is not None]
        lasts = [r["last_step"] for r in live if r["last_step"] is not None]
        numbers = sum(r["n_numbers"] or 0 for r in rows) > 0
        strings = sum(r["n_strings"] or 0 for r in rows) > 0
        data.append((key, len({r["run_id"] for r in rows}),
                     sum(r["n_points"] or 0 for r in live),
                     min(firsts) if firsts else None, max(lasts) if lasts else None,
                     "both" if numbers and strings else "number" if numbers else "string"))
    return Rows(list(COLUMNS), [c not in ("key", "type") for c in COLUMNS], data)


def _summary(store: "Reader", runs: Scope, like: str | None) -> list[dict[str, Any]]:
    """The exact per-(run, source, key) summary rows in scope (query.keys.per_source)."""
    from ..query.keys import per_source
    from ..query.statements.frames import in_scope

    conditions, params = [], {}
    ids = scope_ids(store, runs)
    if ids is not None:
        conditions.append(in_scope("run_id"))
        params["runs"] = ids
    if like is not None:
        conditions.append(like_condition(like))
        params["like"] = like
    return per_source(store, " and ".join(conditions) or None, params)


def like_condition(like: str) -> str:
    """`key` contains `like` (any case), or matches it with ILIKE when it holds a `%`, as SQL
    text over the bound `$like`.

    >>> like_condition("Reward")
    'contains(lower(key), lower($like))'
    >>> like_condition("env/%/total")
    'key ILIKE $like'
    """
    from ..errors import UsageError

    if not isinstance(like, str) or not like:
        raise UsageError(f"like is some text a key contains (or an ILIKE pattern with %), "
                         f"got {like!r}")
    if "%" in like:
        return "key ILIKE $like"
    return "contains(lower(key), lower($like))"
