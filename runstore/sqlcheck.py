"""SQL through sqlglot: the read-only guard, identifier quoting, transpiling views.

Contract:

* `guard(query)` parses a user statement (DuckDB dialect) and returns the names of the
  `$name` parameters it uses, or raises `QueryError`: "runstore sql only runs queries (found
  DROP)" for anything but a single query — writes and DDL anywhere in the tree (a `DELETE`
  inside a CTE too), `COPY`, `ATTACH`, `INSTALL`, `LOAD`, `SET`, `PRAGMA`, `EXPORT`, `CALL`,
  several statements — and "syntax error at line L, column C near '…'" for what does not parse.
* `identifier(name)` quotes any metric name (`env/all/reward/total`) as a SQL identifier.
* `transpile(sql, dialect)` rewrites DuckDB SQL for another engine (Spark, Trino).
"""

from __future__ import annotations

from .errors import QueryError

# Table functions that run arbitrary SQL text or write: refused even inside a SELECT.
FORBIDDEN_FUNCTIONS = frozenset({"query", "query_table", "export_database", "checkpoint",
                                 "force_checkpoint", "set_variable"})
_QUERY_TYPES: tuple[type, ...] = ()


def _query_types() -> tuple[type, ...]:
    global _QUERY_TYPES
    if not _QUERY_TYPES:
        from sqlglot import exp

        _QUERY_TYPES = (exp.Select, exp.SetOperation, exp.Subquery, exp.Values, exp.Describe,
                        exp.Summarize, exp.Show)
    return _QUERY_TYPES


def _first_keywords(query: str) -> list[str]:
    """The first word of each statement (used to name what was refused)."""
    from sqlglot.tokens import Tokenizer, TokenType

    words: list[str] = []
    expect = True
    try:
        tokens = Tokenizer().tokenize(query)
    except Exception:  # sqlglot's tokenizer errors have no common base we can rely on
        return [query.strip().split(None, 1)[0].upper()] if query.strip() else []
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            expect = True
            continue
        if expect:
            words.append(tok.text.upper())
            expect = False
    return words


def refuse(found: str) -> QueryError:
    return QueryError(f"runstore sql only runs queries (found {found})")


def guard(query: str) -> list[str]:
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    words = _first_keywords(query)
    if len(words) > 1:
        raise refuse(f"{len(words)} statements: {', '.join(words)}")
    if not words:
        raise QueryError("empty query: give a SELECT statement")
    try:
        trees = [t for t in sqlglot.parse(query, read="duckdb") if t is not None]
    except (ParseError, TokenError) as e:
        if words[0] not in ("SELECT", "WITH", "FROM", "VALUES", "(", "TABLE", "DESCRIBE",
                            "SUMMARIZE", "SHOW"):
            raise refuse(words[0]) from e
        raise QueryError(_syntax_message(e)) from e
    if len(trees) != 1:
        raise refuse(f"{len(trees)} statements")
    tree = trees[0]
    if not isinstance(tree, _query_types()):
        raise refuse(words[0])
    for node in tree.walk():
        if isinstance(node, (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create,
                             exp.Drop, exp.Alter, exp.Copy, exp.Command, exp.Set, exp.Pragma,
                             exp.Attach, exp.Detach, exp.Install, exp.Use, exp.Transaction)):
            raise refuse(node.key.upper())
        if isinstance(node, (exp.Anonymous, exp.Func)):
            fname = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
            if fname in FORBIDDEN_FUNCTIONS:
                raise refuse(f"{fname}()")
    return sorted({p.name for p in tree.find_all(exp.Placeholder) if p.name})


def _syntax_message(e: Exception) -> str:
    errors = getattr(e, "errors", None) or []
    if errors:
        first = errors[0]
        near = (first.get("highlight") or "").strip()
        return (f"syntax error at line {first.get('line')}, column {first.get('col')} near "
                f"'{near}': {first.get('description')}")
    return f"syntax error: {e}"


def identifier(name: str) -> str:
    """`name` as a quoted DuckDB identifier (metric names contain `/`, `:` and more)."""
    from sqlglot import exp

    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


def transpile(sql: str, dialect: str) -> str:
    import sqlglot

    return sqlglot.transpile(sql, read="duckdb", write=dialect, pretty=True)[0]
