"""Comparative questions over a store: metric keys, config diffs, grouped curves, smoothing.

Contract: every function here takes a store as its first argument and reads it only through
`query.reader.Reader` (a `Store` is one; in practice `fetch(sql, params, convert=)`), with
SQL from fixed statement text (`query.statements`; no sqlglot, which costs a short command
more to import than its answer) and every value a bound `$name` parameter. Results are polars DataFrames (or
plain values); nothing here writes.

| module | answers |
|---|---|
| `runs` | the one RUN resolution: a scope's run_ids, each RUN argument's one run |
| `keys` | one row per metric key: runs, live points, first/last step, value types |
| `diff` | one row per flattened config key, one column per run; `code.diff` summaries |
| `smooth` | the debiased EMA (TensorBoard's smoothing) as a polars expression |
| `compare` | per group and x: n, mean, std, min, max of a metric, raw and smoothed |

Layering: this package sits below `health` and `present` and above `query` and `ingest`; it
never imports `runstore.store` (the `Reader` protocol is all it needs).
"""
