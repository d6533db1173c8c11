"""Which metric keys a store holds: the one place that answers "has any run logged KEY?".

Contract: `logged_keys(store, keys=None, runs=None)` maps each key to the ids of the runs that
logged it (every logged key when `keys` is None; only the runs whose run_ids are `runs` when
given: a scope that `runstore.analysis.runs` resolved). A key counts as logged when any row of `metrics_raw` has it, live or
superseded, with or without a step. It reads `metric_keys`, the per-key summary the ingest
keeps beside `metrics_raw` (ingest/summaries.py: a key is in it exactly when
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

`family(name)` is the `optim/` family rule (`optim/X` and `X` are one metric, in both
directions, the `optim/` spelling preferred), whose one home is `runstore.families`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ..errors import StoreNotFound, UnknownKey
from ..families import family
from .rows import from_relation
from .statements.frames import count_runs_query, logged_keys_query

if TYPE_CHECKING:
    from .reader import Reader

LIST_KEYS = 'runstore sql "select distinct key from metrics_raw order by 1"'
__all__ = ["Coverage", "LIST_KEYS", "closest", "coverage", "family", "logged_keys", "per_source",
           "require", "summarised"]

PER_SOURCE_FIELDS = ("run_id", "source_id", "key", "pre_resume", "n_points", "first_step",
                     "last_step", "n_numbers", "n_strings", "n_stepless")


def per_source(store: "Reader", where: str | None = None,
               params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per (run_id, source_id, key) of `metric_keys` rows matching the SQL condition
    `where` (text over the summary's columns, values bound as `params`), with
    `PER_SOURCE_FIELDS`, exact (see the module). Plain rows: `runstore keys` reads them
    without pyarrow."""
    source = "metric_keys" if summarised(store) else f"({_SCAN}) as s"
    condition = f" where {where}" if where else ""
    sql = _PER_SOURCE.format(source=source, where=condition)
    rows = store.fetch(sql, dict(params or {}), convert=from_relation).to_pylist()
    return _recount(store, rows)


# The summary's rows of one (run, source, key) added up (as BIGINT: a row count, and plain
# Python ints without Arrow): `steps_exact` is false when one of them could only bound its
# distinct steps (`_recount`).
_PER_SOURCE = """
select run_id, source_id, key, bool_or(pre_resume) as pre_resume,
       sum(n_points)::bigint as n_points, min(first_step) as first_step,
       max(last_step) as last_step, sum(n_numbers)::bigint as n_numbers,
       sum(n_strings)::bigint as n_strings, sum(n_stepless)::bigint as n_stepless,
       bool_and(steps_exact) as steps_exact
from {source}{where}
group by run_id, source_id, key
"""

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


def _recount(store: "Reader", rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` with the exact distinct-step count where `steps_exact` is false (and without
    that column)."""
    todo = [(r["source_id"], r["key"]) for r in rows if not r["steps_exact"]]
    found: dict[tuple[Any, Any], int] = {}
    if todo:
        counts = store.fetch(_RECOUNT, {"sources": sorted({s for s, _ in todo}),
                                        "keys": sorted({k for _, k in todo})},
                             convert=from_relation).to_pylist()
        found = {(r["source_id"], r["key"]): r["exact_points"] for r in counts}
    out = []
    for r in rows:
        exact = r.pop("steps_exact")
        if not exact:
            r["n_points"] = found.get((r["source_id"], r["key"]), 0)
        out.append(r)
    return out


def logged_keys(store: "Reader", keys: Sequence[str] | None = None, *,
                runs: Sequence[str] | None = None) -> dict[str, frozenset[str]]:
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
            what: Callable[[str], str] | None = None, answered: Iterable[str] = ()) -> None:
    """`UnknownKey` when one of `names` is logged by no run in the store (one lookup when all
    are; none when there is no name to look up). `what(name)` words the error's subject (e.g.
    the rule the name comes from); `families` counts every spelling of a name's `optim/`
    family as that name. `answered` are the names the caller's own answer has rows of: a run
    logs each, so they are not looked up (a chart asks only for the keys that drew nothing)."""
    have = set(answered)
    names = [n for n in names if n not in have]
    if not names:
        return
    spellings = _spellings(names, families)
    everywhere = logged_keys(store, sorted({k for ks in spellings.values() for k in ks}))
    for name, ks in spellings.items():
        if not any(k in everywhere for k in ks):
            raise UnknownKey(_unknown(store, name, ks, what, families))


def coverage(store: "Reader", names: Sequence[str], *, runs: Sequence[str] | None = None,
             families: bool = False) -> Coverage:
    """How many of the runs `runs` (run_ids; all runs when None) log each name."""
    spellings = _spellings(names, families)
    scoped = logged_keys(store, sorted({k for ks in spellings.values() for k in ks}), runs=runs)
    logging = {name: len(frozenset().union(*(scoped.get(k, frozenset()) for k in ks)))
               for name, ks in spellings.items()}
    return Coverage(_count_runs(store, runs), logging)


def _spellings(names: Sequence[str], families: bool) -> dict[str, tuple[str, ...]]:
    return {n: family(n) if families else (n,) for n in names}


def _count_runs(store: "Reader", runs: Sequence[str] | None) -> int:
    sql, params = count_runs_query(runs)
    return int(store.fetch(sql, params, convert=from_relation).to_pylist()[0]["n"])


def closest(name: str, spellings: Sequence[str], known: Sequence[str], n: int = 3) -> list[str]:
    """Up to `n` logged keys closest to a spelling of `name` (whole, or its last `/` part, so
    `loss` finds `train/loss`), closest first; only those nearly as close as the best. Case
    is ignored in the likeness (keys are case-sensitive, and a key typed in another case is
    the likeliest slip: its logged spellings come first).

    >>> closest("optim/entrpy", ["optim/entrpy", "entrpy"], ["optim/entropy", "optim/lr", "x"])
    ['optim/entropy']
    >>> closest("loss", ["loss"], ["train/loss", "eval/loss", "optim/lr"])
    ['eval/loss', 'train/loss']
    >>> closest("CASE", ["CASE"], ["Case", "case", "optim/lr"])
    ['Case', 'case']
    """
    import difflib  # only for a key not logged

    def likeness(a: str, b: str) -> float:
        # Only a pair whose lengths allow a ratio of 0.6 is compared: a name far longer
        # than every key (a pasted blob) costs one length check a key, not a diff.
        m = difflib.SequenceMatcher(None, a, b)
        return m.ratio() if m.real_quick_ratio() >= 0.6 else 0.0

    lowered = [s.lower() for s in dict.fromkeys([name, *spellings])]
    forms = {k: (k.lower(), k.lower().rsplit("/", 1)[-1]) for k in known}  # whole, last part
    scored = {k: max(likeness(s, form) for s in lowered for form in forms[k]) for k in known}
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
