"""Comparative questions over a store: metric keys, config diffs, grouped curves, smoothing.

Contract: every function here takes a store-like object as its first argument and reads it
only through its public query methods (`arrow(sql, params)`, and `tables()` to learn whether
an optional table exists), with SQL built as sqlglot trees and every value a bound `$name`
parameter. Results are polars DataFrames (or plain values); nothing here writes.

| module | answers |
|---|---|
| `runs` | which runs a call covers (`runs=` GLOB or names) and RUN arguments resolved to one run |
| `keys` | one row per metric key: runs, live points, first/last step, value types |
| `diff` | one row per flattened config key, one column per run; `code.diff` summaries |
| `smooth` | the debiased EMA (TensorBoard's smoothing) as a polars expression |
| `compare` | per group and x: n, mean, std, min, max of a metric, raw and smoothed |

Layering: this package sits below `health` and `present` and above `query` and `ingest`; it
never imports `runstore.store` (the `Queryable` protocol below is all it needs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Sequence

if TYPE_CHECKING:
    import pyarrow as pa


class Queryable(Protocol):
    """What the analysis functions need of a store: `runstore.Store` is one."""

    def arrow(self, sql: str, params: dict[str, Any] | None = None) -> "pa.Table": ...

    def tables(self) -> Sequence[str]: ...
