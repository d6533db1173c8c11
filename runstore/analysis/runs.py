"""RUN resolution: the one rule by which every command, `Store` method and endpoint names runs.

A run's identity is its `run_id`. A `run_name` is for people and two runs may share one (the
same layout ingested from two trees); what people are shown is the run's `run_label`, defined
once in `sql/run_labels.sql` (the name, or `name [run_id prefix]` when two runs share it).

Contract:

* A pattern (a RUN argument, a `--runs`/`runs=`/`run=` value) matches runs by the first of
  these tiers that matches any run (the precedence):

  1. `id`: it equals a run's `run_id`;
  2. `path`: it is the run's directory, `run_path` (absolute, or relative to the working
     directory; `~` expanded; symlinks followed);
  3. `name`: it equals a run's `run_name` or its `run_label` (a name two runs hold matches
     both; the label of each matches it alone);
  4. `id prefix`: it is a prefix (4 characters or more) of `run_id`s;
  5. `glob`: the GLOB matches `run_name`s (DuckDB's GLOB: `*` matches `/` too);
  6. `name prefix` (a RUN argument only, not a scope): `run_name`s start with it
     (`gsm8k_tool_rl/sweep/lr_1e-3` for `.../lr_1e-3/seed_0`).

* `resolve(store, patterns)` gives one `Run(run_id, label, path)` per pattern, in order, in
  one query (statement `runs.resolve`): the tier that decides must hold exactly one run.
  None: "no run is named or matches 'x' (...)"; several: "'x' matches 2 runs (labels, with
  paths where names are shared); give ..." saying how to pick one. `resolve_one(store,
  pattern)` is one of them.
* A `Scope` is `None` (every run), one pattern, or a sequence of patterns; its runs are the
  union of what each pattern matches (tiers 1-5: several runs allowed). `scope_ids(store,
  scope)` is that set as a sorted list of run_ids (None for every run) and raises
  `QueryError` when a pattern matches no run (a typo must not look like "no data");
  `scoped_runs(store, ids)` is the runs of such a list (`SCOPED_RUNS`) by label, as plain
  rows (statement `frames.scoped_runs_query`: fixed text, no sqlglot).
  A scope is always a set of run_ids: nothing downstream filters or groups by name.
* `resolve_eval_stores(stores, patterns)` names eval stores (for `forget --eval-store`) by the
  tiers a RUN has, over a store's list of them (`storage.forget.eval_stores`): its id, its
  directory, its name (its directory under the tree ingested), an id prefix, a GLOB of the
  name or the directory (`*` matches `/` too); each pattern must name exactly one.
"""

from __future__ import annotations

import fnmatch
import os
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence, Union

from ..errors import QueryError
from ..query.rows import from_relation
from ..query.statements import named
from ..query.statements.frames import SCOPED_RUNS, scoped_runs_query

if TYPE_CHECKING:
    from ..query.reader import Reader
    from ..query.rows import Rows

Scope = Union[str, Sequence[str], None]
HINT = "(`runstore runs` lists run names)"
TIERS = ("id", "path", "name", "id_prefix", "glob", "name_prefix")
SCOPE_TIERS = TIERS[:-1]
MIN_ID_PREFIX = 4
PICK = ("give one run_name or a narrower GLOB, or name the run by its run_id (or a unique "
        "prefix of one) or its directory")


class Run(NamedTuple):
    """One resolved run: its identity, the label people see, and its source directory."""

    run_id: str
    label: str
    path: str


def _paths(pattern: str) -> list[str]:
    """The directory spellings `pattern` may stand for: as given, absolute, and resolved."""
    out = [pattern.rstrip("/") or pattern]
    if "://" not in pattern and "\x00" not in pattern:  # no directory has a NUL in its name
        expanded = os.path.expanduser(pattern)
        out += [os.path.abspath(expanded), os.path.realpath(expanded)]
    return list(dict.fromkeys(out))


def _patterns(patterns: Scope, what: str) -> list[str]:
    """`patterns` as a non-empty list of non-empty texts; `QueryError` saying `what` they are
    for anything else (a number, a list holding one: the Python API takes any value)."""
    try:
        items = [patterns] if isinstance(patterns, str) else list(patterns or [])
    except TypeError:  # not iterable
        items = []
    if not items or not all(isinstance(p, str) and p for p in items):
        raise QueryError(f"{what}, got {patterns!r}")
    return items


def _matches(store: "Reader", items: list[str]) -> list[dict[str, dict[str, Run]]]:
    """Per pattern, per tier, the runs it matches there (by run_id), in label order."""
    paths = [_paths(p) for p in items]
    params = {"patterns": items, "idx": list(range(len(items))), "paths": paths,
              "min_prefix": MIN_ID_PREFIX}
    found: list[dict[str, dict[str, Run]]] = [{t: {} for t in TIERS} for _ in items]
    # Plain rows (text, numbers and booleans): every command that names runs asks this, and
    # it needs no pyarrow.
    for r in store.fetch(named("runs.resolve"), params, convert=from_relation).to_pylist():
        run = Run(r["run_id"], r["run_label"], r["run_path"])
        for tier in TIERS:
            if r[f"is_{tier}"]:
                found[r["i"]][tier][run.run_id] = run
    return found


def _decide(tiers: dict[str, dict[str, Run]], allowed: Sequence[str]) -> list[Run]:
    for tier in allowed:
        if tiers[tier]:
            return list(tiers[tier].values())
    return []


def candidates(runs: Sequence[Run], limit: int = 5) -> str:
    """`a, b [1234abcd] (/path/b), ...`: labels, with the path where a label carries an id."""
    shown = [f"{r.label} ({r.path})" if r.label.endswith("]") else r.label
             for r in runs[:limit]]
    return ", ".join(shown) + (", ..." if len(runs) > limit else "")


def resolve(store: "Reader", patterns: Sequence[str]) -> list[Run]:
    """One `Run` per RUN pattern, in order (see the module for the rule)."""
    items = _patterns(patterns, "give one or more runs (a run_name, run_id, directory or GLOB)")
    out = []
    for pattern, tiers in zip(items, _matches(store, items)):
        runs = _decide(tiers, TIERS)
        if len(runs) == 1:
            out.append(runs[0])
            continue
        if not runs:
            raise QueryError(f"no run is named or matches {pattern!r} {HINT}")
        raise QueryError(f"{pattern!r} matches {len(runs)} runs ({candidates(runs)}); {PICK}")
    return out


def resolve_one(store: "Reader", pattern: str) -> Run:
    """The one run `pattern` names (see `resolve`)."""
    return resolve(store, [pattern])[0]


def scope_ids(store: "Reader", scope: Scope, *, option: str = "--runs") -> list[str] | None:
    """The run_ids in `scope`, sorted (None: every run); `QueryError` for a pattern that
    matches no run, naming the command's `option` that gave a single pattern."""
    if scope is None:
        return None
    items = _patterns(scope, "runs is a run_name, run_id, directory or GLOB, or a list of them")
    ids: set[str] = set()
    for pattern, tiers in zip(items, _matches(store, items)):
        runs = _decide(tiers, SCOPE_TIERS)
        if not runs:
            if isinstance(scope, str):
                raise QueryError(f"no run matches {option} {pattern!r} (`runstore runs` lists "
                                 "them; `*` matches `/` too)")
            raise QueryError(f"no run is named {pattern!r} {HINT}")
        ids.update(r.run_id for r in runs)
    return sorted(ids)


def scoped_runs(store: "Reader", ids: list[str] | None) -> "Rows":
    """The runs `ids` (a scope `scope_ids` resolved; None: every run), `SCOPED_RUNS`, by
    `run_label`, as plain rows (`query.rows.Rows`)."""
    sql, params = scoped_runs_query(SCOPED_RUNS, ids)
    return store.fetch(sql, params, convert=from_relation)  # type: ignore[return-value]




def resolve_eval_stores(stores: Sequence[dict[str, Any]], patterns: Scope) -> list[str]:
    """The `eval_store_id` each pattern names among `stores` (`storage.forget.EVAL_COLUMNS`),
    in order (see the module); `QueryError` naming the pattern and the eval stores there are."""
    items = _patterns(patterns, "eval stores are named by id, name or directory")
    out = []
    for pattern in items:
        paths = _paths(pattern)
        tiers = (
            [s for s in stores if s["eval_store_id"] == pattern],
            [s for s in stores if s["eval_store"] in paths],
            [s for s in stores if s["name"] == pattern],
            [s for s in stores if len(pattern) >= MIN_ID_PREFIX
             and s["eval_store_id"].startswith(pattern)],
            [s for s in stores if fnmatch.fnmatchcase(s["name"], pattern)
             or fnmatch.fnmatchcase(s["eval_store"], pattern)],
        )
        found = next((tier for tier in tiers if tier), [])
        if len(found) == 1:
            out.append(found[0]["eval_store_id"])
            continue
        there = ", ".join(f"{s['name']} ({s['eval_store_id']})" for s in stores[:10]) or "none"
        if found:
            raise QueryError(f"{pattern!r} matches {len(found)} eval stores; name one (by its "
                             f"id or directory). The store holds: {there}")
        raise QueryError(f"no eval store is named or matches {pattern!r}; the store holds: "
                         f"{there}")
    return out
