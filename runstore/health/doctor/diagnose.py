"""Running the catalogue over a store: each finding that fires, its evidence, and what could
not be judged.

Contract: `diagnose(store, runs=None, *, config=True, only=None, now=None)` evaluates every
finding of the catalogue (catalogue.py) that runstore.toml leaves on (config.py), or those of
`only`, for the runs `runs` names (RUN arguments resolved as everywhere, analysis.runs: a
run_id or a prefix of one, a directory, a name or label, a GLOB; None: every run; a pattern
that matches no run is an error), and
returns a `Diagnosis`: one row per (run, finding) that fires (`ROW_COLUMNS`: the run, the
finding and its severity, first and last step, the evidence, what to try and the statement that
shows the evidence, with the values filled in), worst first (errors, warnings, infos; then by
run name and catalogue order); and, per finding, the runs it could not judge and why (a run
that logs no entropy is not judged for `entropy_collapse`: no finding invents data). Nothing
is written.

How it runs: each finding's `finding` statement, as it is in its file, `AT_ONCE` at a time
(query/session.py; each on its own cursor, so DuckDB plans and runs them at once). A statement
reads live metrics through the `metrics` view; here that name is a CTE before the statement's
own, `doctor.live_metrics` (sql/statements/doctor.sql): the view's rows of the keys the
statement reads (the keys it compares `key` with, and those its `keys` statement lists), as a
filtered scan of the live files (the view's rule as a group for the few runs whose files log a
step twice, `doctor.unplain_runs`), which costs a fraction of the view's window. The trend
findings take the rows their `runstore check` trend rule fires (health.trends: `fire` over the
same live values for drop and rise, one statement for both, `evaluate` for stale) as bound
lists; the other findings run meanwhile.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Sequence

from ...printable import printable
from ...query.rows import records
from ...query.session import AT_ONCE
from ...resources import statement
from ...storage import schema
from .catalogue import CATALOGUE, SEVERITIES, Finding, finding as find
from .config import DoctorConfig, doctor_config, trend_rule

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from ...query.reader import Reader
    from ...query.rows import Rows

ROW_COLUMNS = ("run_id", "run_name", "finding", "severity", "first_step", "last_step",
               "evidence", "to_try", "statement", "facts")
SHOWN_COLUMNS = ROW_COLUMNS[1:-1]  # what the command prints: no run_id, no facts
# The text a finding is, never cut by a format that cuts long cells (markdown): a cut
# statement does not run, a cut evidence loses its numbers.
WHOLE_COLUMNS = ("evidence", "to_try", "statement")
# The lists a trend finding reads, by rule kind: the columns of the fired rows.
TREND_LISTS = {"drop": ("run_id", "first_step", "last_step", "peak", "latest"),
               "rise": ("run_id", "first_step", "last_step", "peak", "latest"),
               "stale": ("run_id", "minutes")}


@dataclass(frozen=True)
class Diagnosis:
    """What `diagnose` found (see the module)."""

    rows: tuple[dict[str, Any], ...]  # ROW_COLUMNS, worst first
    not_evaluated: tuple[dict[str, Any], ...]  # finding, run_id, run_name, reason
    findings: tuple[Finding, ...]  # the findings evaluated, in catalogue order
    config: DoctorConfig
    runs: int  # runs in scope
    scope: tuple[str, ...] | None = None  # the RUN patterns given
    partial: dict[str, str] = field(default_factory=dict)  # finding -> what it lacked
    shown_columns: ClassVar[tuple[str, ...]] = SHOWN_COLUMNS  # what `runstore doctor` prints
    whole_columns: ClassVar[tuple[str, ...]] = WHOLE_COLUMNS  # cut by no format

    @property
    def errors(self) -> int:
        return sum(1 for r in self.rows if r["severity"] == "error")

    def frame(self) -> "pl.DataFrame":
        """The rows as a polars DataFrame (`ROW_COLUMNS`)."""
        import polars as pl

        return pl.DataFrame([[r[c] for c in ROW_COLUMNS] for r in self.rows], orient="row",
                            schema={c: (pl.Int64 if c in ("first_step", "last_step")
                                        else pl.String) for c in ROW_COLUMNS})

    def table(self, columns: Sequence[str] = SHOWN_COLUMNS) -> "Rows":
        """The rows as plain `Rows` of `columns` (what `runstore doctor` prints)."""
        from ...query.rows import Rows

        return Rows(list(columns), [c in ("first_step", "last_step") for c in columns],
                    [tuple(r[c] for c in columns) for r in self.rows])

    def arrow(self, columns: Sequence[str] = SHOWN_COLUMNS) -> "pa.Table":
        """The rows as an Arrow table of `columns` (steps as int64, the rest as text)."""
        import pyarrow as pa

        return pa.Table.from_pylist([{c: r[c] for c in columns} for r in self.rows],
                                    schema=pa.schema([(c, pa.int64() if c in ("first_step",
                                                                              "last_step")
                                                       else pa.string()) for c in columns]))

    def summary(self) -> str:
        """One line: how many findings of each severity, in how many of the runs looked at
        (the RUN patterns given shown, not obeyed: `printable`)."""
        where = f" matching {printable(' '.join(self.scope))}" if self.scope else ""
        runs = f"{self.runs} run{'s' if self.runs != 1 else ''}{where}"
        if not self.rows:
            return f"no findings in {runs} ({len(self.findings)} findings checked)"
        counts = [f"{n} {s}{'s' if n != 1 else ''}" for s in SEVERITIES
                  if (n := sum(1 for r in self.rows if r["severity"] == s))]
        hit = len({r["run_id"] for r in self.rows})
        return (f"{len(self.rows)} finding{'s' if len(self.rows) != 1 else ''} "
                f"({', '.join(counts)}) in {hit} of {runs}")

    def explain(self) -> str:
        """Each finding: its params, the runs it could not judge and why, and its SQL."""
        out = []
        for f in self.findings:
            fired = sum(1 for r in self.rows if r["finding"] == f.name)
            missing = [m for m in self.not_evaluated if m["finding"] == f.name]
            params = ", ".join(f"{k} = {_number(v)}" for k, v in self.config.params[f.name].items())
            source = ""
            if self.config.path is not None and self.config.overridden.get(f.name):
                source = f" ({', '.join(sorted(self.config.overridden[f.name]))} from {self.config.path})"
            out.append(f"## {f.name} ({f.severity}): {f.summary}")
            out.append(f"fired for {fired} of {self.runs} runs; not evaluated for {len(missing)}")
            if params:
                out.append(f"params: {params}{source}")
            if f.name in self.partial:
                out.append(f"partly evaluated: {self.partial[f.name]}")
            for m in missing:
                # One line per run, whatever its name holds (printable: shown, not obeyed).
                out.append(printable(f"  not evaluated: {m['run_name']}: {m['reason']}"))
            out.append(f"-- sql/doctor/{f.name}.sql")
            out.append(f.sql)
            out.append("")
        off = [f.name for f in CATALOGUE if f.name in self.config.disabled]
        if off:
            out.append(f"turned off by {self.config.path}: {', '.join(off)}")
        return "\n".join(out).rstrip("\n") + "\n"


def _number(v: Any) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v) if isinstance(v, float) else str(v)


def diagnose(store: "Reader", runs: Sequence[str] | str | None = None, *,
             config: "bool | str | os.PathLike[str]" = True,
             only: Iterable[str] | None = None, now: datetime | None = None) -> Diagnosis:
    """Every finding that fires for the runs in scope (see the module)."""
    cfg = doctor_config(store, config)
    chosen = _chosen(cfg, only)
    # A run is shown by its label (sql/run_labels.sql: its name, with a run_id prefix when
    # two runs share the name), the `run_name` column of every row, as `check` shows it.
    labels = records(store, "select run_id, run_name, run_label from run_labels "
                            "order by run_label, run_id")
    names = {r["run_id"]: r["run_label"] for r in labels}
    # The runs whose name no other run holds: their label is the name itself.
    unique = {r["run_id"] for r in labels if r["run_label"] == r["run_name"]}
    scope = _scope(store, runs)
    in_scope = set(names) if scope is None else set(scope)
    not_evaluated: list[dict[str, Any]] = []
    partial: dict[str, str] = {}
    runnable = []
    for f in chosen:
        lacking = [f"{t}{'.' + c if c else ''} ({src})" for t, c, src in f.needs
                   if not _has(t, c)]
        if lacking:
            reason = f"needs {', '.join(lacking)}, which this store does not hold"
            not_evaluated += [{"finding": f.name, "run_id": rid, "run_name": names[rid],
                               "reason": reason} for rid in sorted(in_scope, key=names.get)]
            continue
        absent = [(t, c, src) for t, c, src in f.optional if not _has(t, c)]
        if absent:
            partial[f.name] = "; ".join(f"without {t}.{c}: needs {src}" for t, c, src in absent)
        runnable.append(f)
    rows: list[dict[str, Any]] = []
    if runnable and in_scope:
        found, pattern_keys = _evaluate(store, runnable, cfg,
                                        sorted(in_scope) if scope is not None else None, now)
        for r in found:
            f = find(r["finding"])
            if r["missing"] is not None:
                not_evaluated.append({"finding": f.name, "run_id": r["run_id"],
                                      "run_name": names.get(r["run_id"]), "reason": r["missing"]})
            elif r["fired"]:
                rows.append(_row(f, r, names, r["run_id"] in unique, cfg,
                                 pattern_keys.get(f.name, [])))
    order = {f.name: i for i, f in enumerate(CATALOGUE)}
    rows.sort(key=lambda r: (SEVERITIES.index(r["severity"]), r["run_name"] or "",
                             order[r["finding"]]))
    not_evaluated.sort(key=lambda m: (order[m["finding"]], m["run_name"] or ""))
    patterns = None if runs is None else ((runs,) if isinstance(runs, str) else tuple(runs))
    return Diagnosis(tuple(rows), tuple(not_evaluated), tuple(chosen), cfg, len(in_scope),
                     patterns, partial)


def _chosen(cfg: DoctorConfig, only: Iterable[str] | None) -> list[Finding]:
    if only is None:
        return [f for f in CATALOGUE if f.name not in cfg.disabled]
    wanted = [only] if isinstance(only, str) else list(only)
    picked = {find(name).name for name in wanted}
    return [f for f in CATALOGUE if f.name in picked]


def _scope(store: "Reader", runs: Sequence[str] | str | None) -> list[str] | None:
    """The run_ids the RUN patterns name (analysis.runs, the one RUN resolution), None for
    all; a pattern that names no run is an error."""
    from ...analysis.runs import scope_ids

    return scope_ids(store, [runs] if isinstance(runs, str) else runs)


def _has(table: str, column: str | None) -> bool:
    """Whether this runstore's schema has the table (and column)."""
    columns = schema.TABLES.get(table)
    if columns is None:
        return False
    return column is None or any(c[0] == column for c in columns)


@lru_cache(maxsize=None)
def literal_keys(sql: str) -> frozenset[str]:
    """The metric keys a statement compares a `key` column with (`key = 'x'`, `'x' = key`,
    `key in (...)`, `key not in (...)`; `m.key` too), read from DuckDB's own parse tree
    (`query.views.syntax_tree`): no sqlglot, whose import and parse of every finding cost the
    doctor more than the rest of its start."""
    from ...query.views import syntax_tree

    keys: set[str] = set()

    def is_key(node: Any) -> bool:
        return isinstance(node, dict) and node.get("class") == "COLUMN_REF" and \
            (node.get("column_names") or [None])[-1] == "key"

    def text(node: Any) -> str | None:
        literal = node.get("literal") if isinstance(node, dict) and \
            node.get("class") == "CONSTANT" else None
        return literal.get("text") if isinstance(literal, dict) and \
            literal.get("kind") == "STRING" else None

    def visit(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item)
            return
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        if kind == "COMPARE_EQUAL":
            for a, b in ((node.get("left"), node.get("right")),
                         (node.get("right"), node.get("left"))):
                if is_key(a) and text(b) is not None:
                    keys.add(text(b))  # type: ignore[arg-type]
        elif kind == "COMPARE_IN":  # NOT IN is a NOT around one, reached below
            children = node.get("children") or []
            if children and is_key(children[0]):
                keys.update(t for t in map(text, children[1:]) if t is not None)
        for value in node.values():
            if isinstance(value, (dict, list)):
                visit(value)

    visit(syntax_tree(sql))
    return frozenset(keys)


def _evaluate(store: "Reader", findings: list[Finding], cfg: DoctorConfig,
              scope: list[str] | None, now: datetime | None
              ) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Every finding's statement over the store: every (finding, run) row, and the keys each
    pattern finding's `keys` statement listed. The statements run `AT_ONCE` at a time (each
    on its own cursor: DuckDB plans and runs them in parallel); the trend findings' after
    their rules' rows, which are worked out meanwhile."""
    from concurrent.futures import ThreadPoolExecutor

    unplain = [r["run_id"] for r in records(store, statement("doctor.unplain_runs"))]
    pattern_keys = {f.name: [r["key"] for r in records(store, f.keys_sql)]
                    for f in findings if f.keys_sql is not None}
    live = statement("doctor.live_metrics")
    set_aside = (_set_aside(store) if any("set_aside" in f.placeholders for f in findings)
                 else None)

    def run(f: Finding, trend_params: dict[str, list[Any]]) -> list[dict[str, Any]]:
        sql, params = finding_statement(f, cfg.params[f.name], live, unplain,
                                        pattern_keys.get(f.name, []),
                                        {**trend_params, "set_aside": set_aside})
        if scope is not None:
            sql = f"select * from (\n{sql}\n) as f where list_contains($scope, f.run_id)"
            params["scope"] = scope
        rows = records(store, sql, params)
        for r in rows:
            r["finding"] = f.name
        return rows

    plain = [f for f in findings if f.trend is None]
    trended = [f for f in findings if f.trend is not None]
    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        trend_rows = pool.submit(_trends, store, trended, cfg, live, unplain, scope, now)
        futures = [pool.submit(run, f, {}) for f in plain]
        trend_params = trend_rows.result()
        futures += [pool.submit(run, f, trend_params) for f in trended]
        rows = [r for fut in futures for r in fut.result()]
    return rows, pattern_keys


def finding_statement(f: Finding, params: dict[str, Any], live: str, unplain: list[str],
                      keys: list[str], extra: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """`(sql, params)` of finding `f` as the doctor runs it: its `finding` statement with
    `metrics` standing for the live values of the keys it reads (`doctor.live_metrics`), a
    column this store lacks (`@optional`) read as a typed null, and the values of every
    `$name` it uses: its params, its pattern keys (`$keys`) and `extra` (the trend rules'
    rows, the keys set aside for sweeps)."""
    from ...query.keys import family

    body = f.sql
    for table, column, _ in f.optional:
        if not _has(table, column):  # a column this store lacks reads as a typed null
            body = re.sub(rf"\b[a-z_]+\.{column}\b", "cast(null as varchar)", body)
    values = {**params, **extra, "keys": keys}
    bound = {name: values[name] for name in f.placeholders}
    wanted = set(literal_keys(f.sql)) | set(keys)
    if f.trend is not None and f.trend[1] is not None:
        wanted |= set(family(f.trend[1]))
    if re.search(r"\bfrom\s+metrics\b|\bjoin\s+metrics\b", body):
        body = _over_live(live, body)
        bound.update(live_keys=sorted(wanted), live_unplain=unplain)
    return body, bound


def _over_live(live: str, query: str) -> str:
    """`query` with `metrics` standing for the `live` statement (a CTE of that name before
    the query's own)."""
    head = f"with metrics as (\n{live}\n)"
    if query.lstrip().lower().startswith("with "):
        return f"{head},\n{query.lstrip()[len('with '):]}"
    return f"{head}\n{query}"


def _set_aside(store: "Reader") -> list[str]:
    """The config keys that do not tell sweeps apart: the learning rate and the seed-like keys
    (analysis.groups.is_seed_like, what `compare --group-by auto` sets aside)."""
    from ...analysis.groups import is_seed_like

    stored = [r["key"] for r in records(store, "select distinct key from config")]
    return sorted({"learning_rate", *(k for k in stored if is_seed_like(k))})


def _trends(store: "Reader", findings: list[Finding], cfg: DoctorConfig, live: str,
            unplain: list[str], scope: list[str] | None,
            now: datetime | None) -> dict[str, list[Any]]:
    """The fired rows of each trend finding's rule, as the lists its statement binds: the
    drop and rise rules over the live values of their families (one statement for all of
    them, `doctor.series`), the stale rule as health.trends evaluates it."""
    from ...query.keys import family
    from .. import trends

    chosen = [(f, trend_rule(f, cfg.params[f.name])) for f in findings if f.trend is not None]
    series = [(f, rule) for f, rule in chosen if f.trend and f.trend[0] != "stale"]
    # Per family (its index in `series`): (run_id, step, value) of every live point.
    points: dict[int, list[tuple[Any, ...]]] = {}
    if series:
        spellings = [(i, pref, key) for i, (f, _) in enumerate(series)
                     for pref, key in enumerate(family(f.trend[1]))]  # type: ignore[index,arg-type]
        lists = store.fetch(_over_live(live, statement("doctor.series")),
                            {"live_keys": sorted({k for _, _, k in spellings}),
                             "live_unplain": unplain, "spellings": [k for _, _, k in spellings],
                             "family": [i for i, _, _ in spellings],
                             "pref": [p for _, p, _ in spellings]},
                            convert=lambda r: r.fetchall())
        within = None if scope is None else set(scope)
        for run_id, i, steps, values in lists:  # run_id, family, steps, values
            if within is None or run_id in within:
                points.setdefault(i, []).extend(
                    (run_id, step, value) for step, value in zip(steps, values))
    out: dict[str, list[Any]] = {}
    for f, rule in chosen:
        kind = f.trend[0]  # type: ignore[index]
        assert rule is not None
        if kind == "stale":
            fired = [{"run_id": r["run_id"], "minutes": r["peak"]}
                     for r in trends.evaluate(store, [rule], runs=scope, now=now).rows.to_pylist()]
        else:
            i = next(j for j, (g, _) in enumerate(series) if g is f)
            fired, _ = trends.fire_rows(points.get(i, []), rule)
        for column in TREND_LISTS[kind]:
            out[f"{kind}_{column}"] = [r[column] for r in fired]
    return out


def _row(f: Finding, r: dict[str, Any], names: dict[str, str], unique: bool,
         cfg: DoctorConfig, keys: list[str]) -> dict[str, Any]:
    name = names.get(r["run_id"])
    return {"run_id": r["run_id"], "run_name": name, "finding": f.name,
            "severity": f.severity, "first_step": r["first_step"], "last_step": r["last_step"],
            "evidence": r["evidence"], "to_try": f.to_try,
            "statement": evidence_statement(f, r["run_id"], r["first_step"], r["last_step"],
                                            cfg.params[f.name], keys,
                                            run_name=name if unique else None),
            "facts": r["facts"]}


def evidence_statement(f: Finding, run_id: str, first_step: int | None,
                       last_step: int | None, params: dict[str, Any],
                       keys: Sequence[str] | None = None, *, run_name: str | None = None) -> str:
    """The finding's `evidence` statement for one run, its values written in (quoted by
    sqlglot), so that `runstore sql` runs it as it is. With `run_name` (a name no other run
    has), the run is picked by its name (`(select run_id from runs where run_name = '...')`),
    which reads better and stays the same wherever the tree is (a run_id is a hash of the
    run's path), when the name is printable (no tab, newline or terminal escape, which would
    not survive a command line); else by its run_id. The statement is one line as sqlglot
    writes it: its string literals are kept as they are (a name with two spaces is that
    name)."""
    import sqlglot
    from sqlglot import exp

    values: dict[str, Any] = {**params, "first_step": first_step, "last_step": last_step,
                              "keys": list(keys or [])}
    if run_name is None or not run_name.isprintable():
        values["run_id"] = run_id
    else:
        values["run_id"] = exp.Subquery(this=exp.select("run_id").from_("runs").where(
            exp.column("run_name").eq(exp.Literal.string(run_name))))

    def literal(v: Any) -> exp.Expression:
        if isinstance(v, exp.Expression):
            return v
        if v is None:
            return exp.Null()
        if isinstance(v, str):
            return exp.Literal.string(v)
        if isinstance(v, (list, tuple)):
            return exp.Array(expressions=[literal(x) for x in v])
        return exp.Literal.number(v)

    def fill(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Placeholder) and node.name in values:
            return literal(values[node.name])
        return node

    tree = sqlglot.parse_one(f.evidence_sql, read="duckdb").transform(fill)
    return tree.sql(dialect="duckdb")


def facts(row: dict[str, Any]) -> dict[str, Any]:
    """A row's `facts` as a dict (NaN and ±Infinity as floats)."""
    return json.loads(row["facts"]) if row.get("facts") else {}
