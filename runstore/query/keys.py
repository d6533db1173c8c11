"""Which metric keys a store holds: the one place that answers "has any run logged KEY?".

Contract: `logged_keys(store, keys=None, runs=None)` maps each key to the ids of the runs that
logged it (every logged key when `keys` is None; only runs whose `run_name` matches the GLOB
`runs` when given). A key counts as logged when any row of `metrics_raw` has it, live or
superseded, with or without a step. It reads `metric_keys`, the per-key summary the ingest
keeps beside `metrics_raw` (ingest/normalize/metric_keys.py: a key is in it exactly when
`metrics_raw` has a row of it), so it never scans the metric rows.

`per_source(store, where, params)` is that summary per (run, metrics file, key), exact: the
rows of a (source, key) added up, and the distinct steps of those whose summary could only
bound them (`steps_exact` false: a resume that logged steps again) recounted from
`metrics_raw`. `runstore keys` (analysis.keys) aggregates it per key.

`require(store, names)` is the check that commands and `Store` methods make before they
answer: a name that no run in the store has logged raises `UnknownKey` (a `UsageError`: exit 2
in the CLI) naming the closest logged keys (difflib). `coverage(store, names, runs=)` says how
many runs (of how many) log each name, from which the CLI prints a note for names that some
runs lack. With `families=True` a name stands for its `optim/` family, as in health rules.

`family(name)` is the one home of the `optim/` family rule: `optim/X` and `X` are one metric
(older releases log KL and entropy without the prefix), the `optim/` spelling preferred.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..errors import StoreNotFound, UnknownKey
from .rows import from_relation
from .statements.frames import count_runs_query, logged_keys_query

if TYPE_CHECKING:
    import pyarrow as pa

    from .reader import Reader

LIST_KEYS = 'runstore sql "select distinct key from metrics_raw order by 1"'
PREFIX = "optim/"


def family(metric: str) -> tuple[str, ...]:
    """The stored keys that `metric` stands for, preferred spelling first.

    `optim/X` and `X` are one family (older releases log KL and entropy without the prefix);
    other names with a `/` stand for themselves.

    >>> family("optim/entropy"), family("entropy"), family("env/all/reward/total")
    (('optim/entropy', 'entropy'), ('optim/entropy', 'entropy'), ('env/all/reward/total',))
    """
    if metric.startswith(PREFIX) and len(metric) > len(PREFIX):
        return metric, metric[len(PREFIX):]
    if "/" not in metric:
        return PREFIX + metric, metric
    return (metric,)


PER_SOURCE_FIELDS = ("run_id", "source_id", "key", "pre_resume", "n_points", "first_step",
                     "last_step", "n_numbers", "n_strings", "n_stepless")


def per_source(store: "Reader", where: Any = None, params: dict[str, Any] | None = None
               ) -> "pa.Table":
    """One row per (run_id, source_id, key) of `metric_keys` rows matching the sqlglot
    condition `where` (bound `params`), with `PER_SOURCE_FIELDS`, exact (see the module)."""
    import sqlglot
    from sqlglot import exp

    c = exp.column
    source: Any = "metric_keys" if summarised(store) else exp.alias_(
        exp.paren(sqlglot.parse_one(_SCAN, read="duckdb")), "s", table=True)
    query = (exp.select(c("run_id"), c("source_id"), c("key"),
                        exp.alias_(exp.func("bool_or", c("pre_resume")), "pre_resume"),
                        exp.alias_(exp.func("sum", c("n_points")), "n_points"),
                        exp.alias_(exp.func("min", c("first_step")), "first_step"),
                        exp.alias_(exp.func("max", c("last_step")), "last_step"),
                        exp.alias_(exp.func("sum", c("n_numbers")), "n_numbers"),
                        exp.alias_(exp.func("sum", c("n_strings")), "n_strings"),
                        exp.alias_(exp.func("sum", c("n_stepless")), "n_stepless"),
                        exp.alias_(exp.func("bool_and", c("steps_exact")), "steps_exact"))
             .from_(source).group_by("run_id", "source_id", "key"))
    if where is not None:
        query = query.where(where)
    table = store.arrow(query.sql(dialect="duckdb"), dict(params or {}))
    return _recount(store, table)


# metric_keys computed from metrics_raw, for a snapshot that has no metric_keys table yet.
_SCAN = """
select run_id, source_id, key, coalesce(bool_or(pre_resume), false) as pre_resume,
       count(distinct step) as n_points, min(step) as first_step, max(step) as last_step,
       count(value) as n_numbers, count(value_str) as n_strings,
       count(*) filter (where step is null) as n_stepless, true as steps_exact
from metrics_raw
group by run_id, source_id, key
"""


def summarised(store: "Reader") -> bool:
    """Whether the store's snapshot holds the `metric_keys` summary (see the module)."""
    manifest = getattr(store, "manifest", None)
    if manifest is None:
        return True  # a store-like object over plain tables: the summary is one of them
    try:
        return "metric_keys" in manifest().tables
    except StoreNotFound:  # no store yet: every table is empty, the summary too
        return True


_RECOUNT = ("select source_id, key, count(distinct step) as exact_points from metrics_raw "
            "where list_contains($sources, source_id) and list_contains($keys, key) "
            "group by source_id, key")


def _recount(store: "Reader", table: "pa.Table") -> "pa.Table":
    """`table` with the exact distinct-step count where `steps_exact` is false."""
    exact = table.column("steps_exact").to_pylist()
    if all(exact):
        return table.drop_columns(["steps_exact"])
    sources = table.column("source_id").to_pylist()
    keys = table.column("key").to_pylist()
    todo = [(s, k) for s, k, e in zip(sources, keys, exact) if not e]
    counts = store.arrow(_RECOUNT, {"sources": sorted({s for s, _ in todo}),
                                    "keys": sorted({k for _, k in todo})}).to_pylist()
    found = {(r["source_id"], r["key"]): r["exact_points"] for r in counts}
    points = [n if e else found.get((s, k), 0) for s, k, e, n in
              zip(sources, keys, exact, table.column("n_points").to_pylist())]
    i = table.schema.get_field_index("n_points")
    import pyarrow as pa

    table = table.set_column(i, "n_points", pa.array(points, pa.int64()))
    return table.drop_columns(["steps_exact"])


def logged_keys(store: "Reader", keys: Sequence[str] | None = None, *,
                runs: str | None = None) -> dict[str, frozenset[str]]:
    """Each key (of `keys`, else every one logged) that some run logged, with those runs' ids."""
    sql, params = logged_keys_query(keys, runs=runs, summarised=summarised(store))
    # Plain rows (two text columns): `runstore check --rule` asks this, and imports no Arrow.
    found: dict[str, set[str]] = {}
    for row in store.fetch(sql, params, convert=from_relation).to_pylist():
        found.setdefault(row["key"], set()).add(row["run_id"])
    return {k: frozenset(v) for k, v in found.items()}


@dataclass(frozen=True)
class Coverage:
    """How many runs (`logging[name]`) of how many (`runs`) log each name asked about."""

    runs: int
    logging: dict[str, int]

    def notes(self) -> list[str]:
        """One line per name that some runs in scope do not log, e.g. for stderr."""
        return [f"note: {name} is logged by {n} of {self.runs} run{'s' if self.runs != 1 else ''}"
                for name, n in self.logging.items() if n < self.runs]


def require(store: "Reader", names: Sequence[str], *, families: bool = False,
            what: Callable[[str], str] | None = None) -> None:
    """`UnknownKey` when one of `names` is logged by no run in the store (one lookup when all
    are). `what(name)` words the error's subject (e.g. the rule the name comes from);
    `families` counts every spelling of a name's `optim/` family as that name."""
    spellings = _spellings(names, families)
    everywhere = logged_keys(store, sorted({k for ks in spellings.values() for k in ks}))
    for name, ks in spellings.items():
        if not any(k in everywhere for k in ks):
            raise UnknownKey(_unknown(store, name, ks, what, families))


def coverage(store: "Reader", names: Sequence[str], *, runs: str | None = None,
             families: bool = False) -> Coverage:
    """How many of the runs matching the GLOB `runs` (all runs when None) log each name."""
    spellings = _spellings(names, families)
    scoped = logged_keys(store, sorted({k for ks in spellings.values() for k in ks}), runs=runs)
    logging = {name: len(frozenset().union(*(scoped.get(k, frozenset()) for k in ks)))
               for name, ks in spellings.items()}
    return Coverage(_count_runs(store, runs), logging)


def _spellings(names: Sequence[str], families: bool) -> dict[str, tuple[str, ...]]:
    return {n: family(n) if families else (n,) for n in names}


def _count_runs(store: "Reader", runs: str | None) -> int:
    return int(store.arrow(*count_runs_query(runs)).column(0)[0].as_py())


def closest(name: str, spellings: Sequence[str], known: Sequence[str], n: int = 3) -> list[str]:
    """Up to `n` logged keys closest to a spelling of `name` (whole, or its last `/` part, so
    `loss` finds `train/loss`), closest first; only those nearly as close as the best.

    >>> closest("optim/entrpy", ["optim/entrpy", "entrpy"], ["optim/entropy", "optim/lr", "x"])
    ['optim/entropy']
    >>> closest("loss", ["loss"], ["train/loss", "eval/loss", "optim/lr"])
    ['eval/loss', 'train/loss']
    """
    def score(s: str, k: str) -> float:
        return max(difflib.SequenceMatcher(None, s, k).ratio(),
                   difflib.SequenceMatcher(None, s, k.rsplit("/", 1)[-1]).ratio())

    scored = {k: max(score(s, k) for s in dict.fromkeys([name, *spellings])) for k in known}
    good = {k: v for k, v in scored.items() if v >= 0.6}
    if not good:
        return []
    best = max(good.values())
    return sorted((k for k, v in good.items() if v >= best - 0.1),
                  key=lambda k: (-good[k], k))[:n]


def _unknown(store: "Reader", name: str, spellings: Sequence[str],
             what: Callable[[str], str] | None, families: bool) -> str:
    known = sorted(logged_keys(store))
    subject = what(name) if what else f"metric {name!r}"
    if not known:
        return f"no run in the store logs {subject}: the store holds no metrics yet"
    close = closest(name, spellings, known)
    if families:  # `optim/entropy or entropy` is one suggestion: the spelling that ranks first
        firsts: dict[tuple[str, ...], str] = {}
        for k in close:
            firsts.setdefault(family(k), k)
        close = list(firsts.values())
    hint = (f"did you mean {' or '.join(close)}?" if close
            else f"none of the store's {len(known)} keys is close to it")
    return f"no run in the store logs {subject}; {hint} ({LIST_KEYS} lists every key)"
