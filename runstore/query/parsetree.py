"""What a statement is, read from DuckDB's own parse tree (`json_serialize_sql`), without sqlglot.

Contract: `serialized(con, sql)` is DuckDB's parse tree of one statement as JSON text, asked
through the connection `con` (None when DuckDB cannot parse or serialize it).
`references_each(con, sqls)` names the tables and views each of several statements reads (CTEs
left out), parsed in one call; a body DuckDB cannot parse, or one nested too deeply to read, is
a `QueryError`. `read_tables(tree)` is the same reading of a tree already serialized (None when
it nests too deeply), which the guard uses for the queries it checks; `STRING` (a JSON string
in the tree's text, its content the first group) and `unescape` are what the guard scans the
text with too. `defined(tree)` names the CTEs the statement's own WITH defines (lower-cased;
None when it nests too deeply to read). The views (what each reads) and the guard (what a query
may do) both read statements so.

The tree is scanned as text where it can be, without building it: a query nested 999 levels
deep is a JSON document nested thousands deep, beyond what `json.loads` recurses through. A
key such as `"table_name":"` cannot occur inside a JSON string (every quote there is
escaped), so each match is a key of the tree.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from ..errors import QueryError

STRING = r'"((?:[^"\\]|\\.)*)"'
_TABLE = re.compile(r'"table_name":' + STRING)


def unescape(text: str) -> str:
    """The content of a JSON string as the tree's text holds it (escapes undone)."""
    return json.loads(f'"{text}"')


def serialized(con: Any, query: str) -> str | None:
    """DuckDB's parse tree of `query` as JSON text, None when it cannot serialize it."""
    [(text,)] = con.execute("select json_serialize_sql($q)", {"q": query}).fetchall()
    return None if text.startswith('{"error":true') else text


@functools.lru_cache(maxsize=2)
def _loaded(tree: str) -> Any:
    """`json.loads(tree)`, kept for the next reading of the same tree (the guard reads a
    query's tables, then its CTEs); the caller does not change it."""
    return json.loads(tree)


def read_tables(tree: str) -> frozenset[str] | None:
    """The tables and views a serialized statement names that no CTE in scope defines
    (`_tables`); None when it nests too deeply to read."""
    if '"cte_map":{"map":[{' not in tree:  # no CTE anywhere: every name is a read
        return frozenset(n for n in map(unescape, _TABLE.findall(tree)) if n)
    try:
        found: set[str] = set()
        _tables(_loaded(tree), frozenset(), found)
    except RecursionError:
        return None
    return frozenset(found)


def defined(tree: str) -> frozenset[str] | None:
    """The names of the CTEs the serialized statement's own (outermost) WITH defines,
    lower-cased; None when it nests too deeply to read."""
    if '"cte_map":{"map":[{' not in tree:
        return frozenset()
    try:
        node = _loaded(tree)["statements"][0]["node"]
    except RecursionError:
        return None
    return frozenset(_cte_name(entry) for entry in _ctes(node))


def _ctes(node: dict[str, Any]) -> list[Any]:
    """The entries (`key`: a name, `value`: its query) of the WITH a tree node holds."""
    ctes = node.get("cte_map")
    return ctes.get("map", []) if isinstance(ctes, dict) else []


def _cte_name(entry: Any) -> str:
    return str(entry.get("key", "")).lower()


def _tables(node: Any, hidden: frozenset[str], found: set[str]) -> None:
    """Into `found`, the tables `node` (a part of DuckDB's serialized parse tree) names that
    no CTE in scope defines (`hidden`, lower-cased). A CTE covers its query and the CTEs after
    it, not itself nor anything outside its query: in `select ... from kl_health, (with
    kl_health as (...) select ...)` the first `kl_health` is the view; in `with runs as
    (select ... from runs) ...` the inner `runs` is the table."""
    if isinstance(node, list):
        for item in node:
            _tables(item, hidden, found)
        return
    if not isinstance(node, dict):
        return
    for entry in _ctes(node):
        _tables(entry.get("value"), hidden, found)
        hidden = hidden | {_cte_name(entry)}
    name = node.get("table_name")  # a table, or what a SHOW names (`show tables`: all)
    if isinstance(name, str) and name and name.lower() not in hidden:
        found.add(name)
    for key, value in node.items():
        if key != "cte_map" and isinstance(value, (dict, list)):
            _tables(value, hidden, found)


def references_each(con: Any, sqls: list[str]) -> list[frozenset[str]]:
    """The tables and views each of `sqls` (view bodies) reads, by DuckDB's parser (CTEs left
    out), from one call of it (one query per view costs `runstore views` more than parsing
    them)."""
    [(trees,)] = con.execute("select list_transform($q, lambda s: json_serialize_sql(s))",
                             {"q": sqls}).fetchall()
    out = []
    for sql, tree in zip(sqls, trees):
        if tree.startswith('{"error":true'):
            raise QueryError(f"DuckDB cannot parse this view body: {sql[:80]}")
        names = read_tables(tree)
        if names is None:
            raise QueryError(f"this view body nests too deeply to read: {sql[:80]}")
        out.append(names)
    return out
