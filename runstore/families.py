"""Metric families: `optim/X` and `X` are one metric, and which stored keys hold KL.

Contract: the one home of two rules every layer needs (the ingest's KL summary, the query
side's views and statements, health rules, charts, the UI):

* `family(name)`: the stored keys a metric name stands for, `optim/X` then `X` (older
  releases log KL and entropy without the prefix; FORMATS.md), in both directions and
  whatever X holds: `family("optim/" + X) == family(X)`. One `optim/` is taken off or put
  on, so every name is in its own family; the `optim/` spelling is first, the one used where
  a step logs both. `query.keys.family` is this function.
* The KL families: `KL_METRICS` names them by their `optim/` spelling (v1, then v2), and
  `KL_KEYS` is every stored spelling as `(key, family, pref)` rows: `family` `v1` or `v2`,
  `pref` 0 for the `optim/` spelling, 1 for the other. SQL reads the same rows as the
  relation `kl_keys` (`KL_KEYS_QUERY`, its values bound from `KL_KEYS`), which query
  connections create beside `settings`, and the ingest gives its KL merge
  (`summaries.metric_kl`) as Arrow (`kl_keys_table()`): the spellings are written here and
  nowhere else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

PREFIX = "optim/"


def family(metric: str) -> tuple[str, ...]:
    """The stored keys that `metric` stands for (see the module), the `optim/` spelling first.

    >>> family("optim/entropy"), family("entropy")
    (('optim/entropy', 'entropy'), ('optim/entropy', 'entropy'))
    >>> family("a/b") == family("optim/a/b") == ('optim/a/b', 'a/b')
    True
    """
    base = metric[len(PREFIX):] if metric.startswith(PREFIX) and len(metric) > len(PREFIX) \
        else metric
    return PREFIX + base, base


# The KL between the sampling and the training policy, two estimators: v1, v2.
KL_METRICS = ("optim/kl_sample_train_v1", "optim/kl_sample_train_v2")
KL_COLUMNS = ("v1", "v2")  # the family each of KL_METRICS is (metric_kl's columns)
KL_KEYS: tuple[tuple[str, str, int], ...] = tuple(
    (key, column, pref) for metric, column in zip(KL_METRICS, KL_COLUMNS)
    for pref, key in enumerate(family(metric)))
# `kl_keys` as SQL reads it: one row per stored KL spelling, from bound lists of KL_KEYS.
KL_KEYS_QUERY = ("select unnest($runstore_kl_key) as key, unnest($runstore_kl_family) as family, "
                 "cast(unnest($runstore_kl_pref) as integer) as pref")


def kl_keys_params() -> dict[str, list[object]]:
    """The bound values of `KL_KEYS_QUERY`."""
    return {"runstore_kl_key": [k for k, _, _ in KL_KEYS],
            "runstore_kl_family": [f for _, f, _ in KL_KEYS],
            "runstore_kl_pref": [p for _, _, p in KL_KEYS]}


def kl_keys_table() -> "pa.Table":
    """`kl_keys` as an Arrow table, for a DuckDB given its tables as Arrow (the ingest's)."""
    import pyarrow as pa

    return pa.table({"key": [k for k, _, _ in KL_KEYS], "family": [f for _, f, _ in KL_KEYS],
                     "pref": pa.array([p for _, _, p in KL_KEYS], pa.int32())})
