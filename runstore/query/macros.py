"""DuckDB macros: the rules that SQL and Python share, each defined once, in SQL.

Contract: the macros are the statements of `sql/statements/macros.sql` (`MACROS` names them);
`over_threshold(value, op, threshold)` is the one home of "over the threshold" (NaN never,
+Infinity always for `>`). `create(con)` creates every macro on a DuckDB connection (query
connections do, right after DuckDB's sandbox confines them: `connect.Database`, so every
view and statement may call them). `expand(tree)` replaces each call of a macro in a sqlglot
tree by the macro's body, its parameters replaced by the call's arguments, for an engine that
has no such macro (`dialects.transpile`: Spark, Trino). `over_threshold(values, op,
threshold)` evaluates the macro of that name over values Python holds (a chart's points: a
list, a numpy array, an Arrow array), in a private in-memory DuckDB with external access off
that reads only them, and returns one bool per value (a numpy array), so Python code never
restates the rule; it costs one small DuckDB query (tests/query/test_kl_steps.py holds it to the
views). `private_cursor()` is a new cursor on that DuckDB (every macro created), for any other
statement Python runs over values it holds (`compare`'s bands over the points it placed);
the caller registers what it reads and closes it.
"""

from __future__ import annotations

import threading
from typing import Any

from ..resources import create_macros, sql_dir, statements

FILE = "macros"
_con: Any = None
_lock = threading.Lock()


def names() -> list[str]:
    """The name of every macro, in file order."""
    return list(statements(FILE))


def create(con: Any) -> None:
    """Create every macro on the DuckDB connection `con` (`resources.create_macros`)."""
    create_macros(con)


def described() -> dict[str, str]:
    """Each macro's documentation: the comment lines after its `-- name:` line, joined."""
    import re

    text = (sql_dir() / "statements" / f"{FILE}.sql").read_text()
    out = {}
    for m in re.finditer(r"^--\s*name:\s*(\w+)\s*\n((?:--.*\n)*)", text, re.M):
        out[m.group(1)] = " ".join(line[2:].strip() for line in m.group(2).splitlines())
    return out


def definitions() -> dict[str, tuple[list[str], Any]]:
    """Each macro's parameter names and body, as sqlglot reads the statement."""
    import sqlglot

    out = {}
    for name, text in statements(FILE).items():
        create_ = sqlglot.parse_one(text, read="duckdb")
        params = [p.name for p in create_.this.expressions]
        out[name] = (params, create_.expression)
    return out


def expand(tree: Any, found: dict[str, tuple[list[str], Any]] | None = None) -> Any:
    """`tree` with every call of a macro replaced by its body (see the module), the calls a
    macro's body makes of another macro too."""
    from sqlglot import exp

    found = definitions() if found is None else found

    def replace(node: Any) -> Any:
        if isinstance(node, exp.Anonymous) and node.name.lower() in found:
            params, body = found[node.name.lower()]
            if len(node.expressions) != len(params):
                return node  # not a call of the macro: DuckDB would refuse it, so may others
            args = dict(zip(params, node.expressions))
            return exp.paren(expand(body.copy().transform(
                lambda n: args[n.name].copy()
                if isinstance(n, exp.Column) and not n.table and n.name in args else n), found))
        return node

    return tree.transform(replace)


def private_cursor() -> Any:
    """A new cursor on the private in-memory DuckDB (external access off, every macro
    created), made on first use; the caller closes it."""
    import duckdb

    global _con
    with _lock:
        if _con is None:
            con = duckdb.connect(":memory:", config={"enable_external_access": False})
            create(con)
            _con = con
        return _con.cursor()


def over_threshold(values: Any, op: str, threshold: float) -> Any:
    """Whether each of `values` is over `threshold` by `op`: the macro (see the module)."""
    import numpy as np
    import pyarrow as pa

    column = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else \
        pa.array(np.asarray(values, dtype=float), pa.float64())
    cur = private_cursor()
    try:
        cur.register("over_values", pa.table({"value": column}))
        out = cur.execute("select over_threshold(value, $op, $threshold) as over "
                          "from over_values", {"op": op, "threshold": float(threshold)})
        return out.fetchnumpy()["over"].astype(bool)
    finally:
        cur.close()
