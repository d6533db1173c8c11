"""The statement behind `runstore check`: `sql/statements/check.sql`, shaped for one rule set.

Contract: `check_statement(metrics_used, kl_used, since_step, runs, over_floor)` is the
check query's text for one shape of rule set (its values are all bound params, see the
file's header): the branches of `picked` that no rule reads are dropped with their relations
(an unused branch would still scan its table), the optional `since_step` and `runs` filters
are added as sqlglot expressions, and with `over_floor` the KL values are read only for the
runs with a KL write at or above `$kl_floor` (statement `check.kl_over_floor`). The runs each
KL rule was checked on come from the `metric_keys` summary, or, with `since_step`, from the
KL writes themselves (statement `check.kl_logged_since`). A rule set of KL series alone reads
one row per run, step and rule already (`metric_kl` has one row per run and live step), so
its `steps` is the same select without the grouping (`_one_row_each`), and its checked runs
are `kl_logged`'s alone (every run with a KL value logged a KL number).

`build_statement` makes that text with sqlglot; `check_statement` reads it, for each of the
`SHAPES`, from `sql/statements/check_shapes.sql`, which `python tools/gen_statements.py -o
sql/statements/check_shapes.sql` generates from `build_statement` (tests/health/test_checks.py holds
the file equal to it): a `runstore check` process then neither imports sqlglot nor parses its
~150-line statement (docs/benchmarks.md, "Command latency").
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from . import named as named_statement


def in_scope(column: Any) -> Any:
    """`frames.in_scope` (the run_id `column` is in `$runs`) as a sqlglot condition
    (tests/query/test_statement_text.py holds the two to one text)."""
    from sqlglot import exp

    return exp.func("list_contains", exp.Placeholder(this="runs"), column)


def shape_name(metrics_used: bool, kl_used: bool, since_step: bool, runs: bool,
               over_floor: bool) -> str:
    """The name of one shape's statement in check_shapes.sql, e.g. `m0_k1_s0_r0_o1`."""
    flags = (metrics_used, kl_used, since_step, runs, over_floor)
    return "_".join(f"{c}{int(f)}" for c, f in zip("mksro", flags))


# Every shape a rule set can have: some metric or KL series, the optional filters, and the
# reading over the floor only with a KL series.
SHAPES = [(m, k, s, r, o) for m in (False, True) for k in (False, True) if m or k
          for s in (False, True) for r in (False, True) for o in ((False, True) if k else (False,))]


def check_statement(metrics_used: bool, kl_used: bool, since_step: bool, runs: bool,
                    over_floor: bool) -> str:
    """The statement for one shape of rule set (its values are all params), as generated."""
    return named_statement("check_shapes." + shape_name(metrics_used, kl_used, since_step, runs,
                                                        over_floor))


@lru_cache(maxsize=64)
def build_statement(metrics_used: bool, kl_used: bool, since_step: bool, runs: bool,
                    over_floor: bool) -> str:
    """The statement for one shape of rule set, made from check.sql with sqlglot."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(named_statement("check.check"), read="duckdb")
    ctes = {c.alias: c for c in tree.find_all(exp.CTE)}
    # Only the branches of `picked` that some rule reads, with their relations: an unused
    # branch would still scan its table.
    used = {"metric_values": metrics_used, "kl_values": kl_used}
    inputs = {"metric_values": ["rule_keys"], "kl_values": ["rule_kl_keys", "keys"]}
    selects = [exp.select("run_id", "step", "rule_idx", "value").from_(name)
               for name, is_used in used.items() if is_used]
    ctes["picked"].set("this", selects[0] if len(selects) == 1
                       else exp.union(*selects, distinct=False))
    for name, is_used in used.items():
        if not is_used:
            ctes[name].pop()
            for relation in inputs[name]:
                ctes[relation].pop()
    m = lambda name: exp.column(name, table="m")  # noqa: E731 - a local shorthand
    k = lambda name: exp.column(name, table="k")  # noqa: E731
    branches = [(ctes[n].this, col) for n, col in (("metric_values", m), ("kl_values", k))
                if used[n]]
    for select, col in branches:
        if since_step:
            select.where(col("step") >= exp.Placeholder(this="since_step"), copy=False)
        if runs:
            select.where(in_scope(col("run_id")), copy=False)
    if since_step:  # the summary has no steps: the KL writes are read (see check.sql)
        ctes["kl_logged"].set("this", sqlglot.parse_one(named_statement("check.kl_logged_since"),
                                                         read="duckdb"))
        if kl_used and not over_floor:  # nothing else reads the summary
            ctes["keys"].pop()
    logged = ctes["kl_logged"].this
    if since_step:
        logged.where(m("step") >= exp.Placeholder(this="since_step"), copy=False)
    if runs:
        logged.where(in_scope(m("run_id")), copy=False)
        ctes["scope"].this.where(in_scope(exp.column("run_id")), copy=False)
    if over_floor:
        over = sqlglot.parse_one(named_statement("check.kl_over_floor"), read="duckdb")
        ctes["kl_values"].this.where(k("run_id").isin(query=over), copy=False)
    seen = ctes["seen"].this
    if not kl_used:  # no KL series: `outcome` alone says which runs were checked
        ctes["seen"].set("this", seen.this.copy())
        ctes["kl_logged"].pop()
    if not metrics_used:
        # KL series only: `kl_values` has one row per (run, step, rule) already (`metric_kl`
        # holds one row per run and live step), so `steps` needs no grouping; and every run
        # with a KL value of a rule logged a KL number, so `kl_logged` alone says which runs
        # were checked.
        _one_row_each(ctes["steps"].this)
        ctes["seen"].set("this", seen.expression.copy())
    return tree.sql(dialect="duckdb")


def _one_row_each(select: "exp.Select") -> None:
    """`select` rewritten for input with one row per group: no GROUP BY, and each aggregate
    the value of that one row (`agg(x) filter (where c)` as `case when c then x end`,
    `agg(x)` as `x`)."""
    from sqlglot import exp

    select.set("group", None)
    for node in list(select.find_all(exp.Filter)):
        node.replace(exp.Case().when(node.expression.this.copy(), node.this.this.copy()))
    for node in list(select.find_all(exp.AggFunc)):
        node.replace(node.this.copy())
