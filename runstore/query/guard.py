"""The read-only guard: what user SQL may run, and the messages for what it may not.

Contract:

* `guard(query, con)` checks that a user statement is one read-only query and returns a
  `Checked`: the `$name` parameters it uses and the tables and views it reads (None when it
  may read any: catalog introspection, a file, a statement only sqlglot could analyse). It
  raises `QueryError` — "runstore sql only runs queries (found DROP)" — for anything else:
  writes and DDL anywhere in the tree (a `DELETE` inside a CTE too), `COPY`, `ATTACH`,
  `DETACH`, `INSTALL`, `LOAD`, `SET`, `PRAGMA`, `EXPORT`, `CALL`, several statements, table
  functions that do more than read (`query`, `checkpoint`, `enable_logging`, ...; only those
  in `READ_TABLE_FUNCTIONS` pass) and the functions in `FORBIDDEN_FUNCTIONS`; for what does
  not parse, "syntax error at line L, column C near '…': <short reason>" followed by the
  offending line with carets under the token (line and column are sqlglot's: the column is
  where the offending token ends); for what nests deeper than DuckDB parses, a plain error,
  given before DuckDB's parser sees a text that nests more than `MAX_NESTING` levels
  (`nests_deeper_than`: the parser's memory grows with the square of the depth of a mistake).
  The fast path asks DuckDB's own parser, through `con` (statement classification,
  `extract_statements`; the parse tree, `json_serialize_sql`), so it needs no sqlglot and
  takes any depth DuckDB takes; sqlglot is the slow path, for the messages of statements
  DuckDB cannot parse and for the few it parses but cannot serialize (`PIVOT` without `IN`).
  The guard gives clear messages; the guarantee is the sandbox (`sandbox.py`). A verdict
  that lets a query through depends on its text alone and is kept per text (the last
  `VERDICTS` of them): a process asking the same question again (the web UI, `runstore
  check` in a loop, a notebook) does not parse it again (~6 ms for `check`'s statement).
* `condition(text, what)` parses one SQL condition (a `--where` filter) into a sqlglot
  expression, refusing anything that is not a plain expression (statements, subqueries,
  parameters, forbidden functions) and what nests too deeply for sqlglot.
* `identifier(name)` quotes any metric name (`env/all/reward/total`) as a SQL identifier.
* `syntax_message(e, text)` is how every parse error shows: sqlglot's line and column, a
  short reason, the offending line with carets; `quiet_sqlglot()` silences sqlglot's own
  warnings while the guard parses.

sqlglot is imported inside the functions: `runstore --help` and `runstore sql` on the fast
path must not pay for it.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from ..errors import QueryError
from .parsetree import STRING, defined, read_tables, serialized, unescape

# Functions that run SQL text given as data or change state: refused even inside a SELECT.
# (`json_execute_serialized_sql` runs a serialized statement; the others write: a checkpoint,
# the log, a sequence, a variable, an external resource.)
FORBIDDEN_FUNCTIONS = frozenset({"query", "query_table", "json_execute_serialized_sql",
                                 "export_database", "checkpoint", "force_checkpoint",
                                 "set_variable", "setval", "nextval", "write_log",
                                 "truncate_duckdb_logs", "create_external_resource"})

# First words of statements that are not queries. A statement that does not parse and starts
# with one of these is refused by name; any other unparsable text is a syntax error (so a
# typo such as `selec` is reported as one, not as a refused statement).
NON_QUERY_KEYWORDS = frozenset({
    "INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT", "REPLACE", "TRUNCATE", "CREATE", "DROP",
    "ALTER", "COMMENT", "COPY", "ATTACH", "DETACH", "INSTALL", "FORCE", "LOAD", "SET", "RESET",
    "PRAGMA", "EXPORT", "IMPORT", "CALL", "USE", "BEGIN", "START", "COMMIT", "END", "ROLLBACK",
    "ABORT", "CHECKPOINT", "VACUUM", "ANALYZE", "EXPLAIN", "PREPARE", "EXECUTE", "DEALLOCATE",
    "GRANT", "REVOKE", "UPDATE_EXTENSIONS",
})
QUERY_KEYWORDS = frozenset({"SELECT", "WITH", "FROM", "VALUES", "(", "TABLE", "DESCRIBE",
                            "SUMMARIZE", "SHOW", "PIVOT", "UNPIVOT"})

# Table functions a query may call: they read files (through the sandbox), generate rows, or
# describe the catalog, and change nothing. Every other table function DuckDB has is refused,
# including any a later DuckDB adds, until it is looked at: they run SQL given as text
# (`query`, `query_table`, `json_execute_serialized_sql`, `destroy_external_resource`), change
# the database's state for later queries (`checkpoint`, `truncate_duckdb_logs`, the external
# resource registry, grammar extensions, logging, profiling), scan raw memory pointers
# (`arrow_scan`, `pandas_scan`, `python_map_function`, ...) or open a DuckDB database file
# (`read_duckdb`). tests/query/test_sql_guard.py enumerates `duckdb_functions()` to hold this to
# the DuckDB in use.
READ_TABLE_FUNCTIONS = frozenset({
    # files, through the sandbox: only the store's files unless allowed
    "read_csv", "read_csv_auto", "read_json", "read_json_auto", "read_json_objects",
    "read_json_objects_auto", "read_ndjson", "read_ndjson_auto", "read_ndjson_objects",
    "read_parquet", "parquet_scan", "read_text", "read_blob", "glob", "sniff_csv",
    "parquet_metadata", "parquet_file_metadata", "parquet_full_metadata", "parquet_kv_metadata",
    "parquet_schema", "parquet_page_index", "parquet_bloom_probe",
    # rows from values
    "range", "generate_series", "unnest", "repeat", "repeat_row", "json_each", "json_tree",
    "summary", "histogram", "histogram_values", "test_all_types", "test_vector_types",
    "icu_calendar_names", "pg_timezone_names",
    # the catalog and the engine, read-only
    "duckdb_columns", "duckdb_constraints", "duckdb_databases", "duckdb_dependencies",
    "duckdb_functions", "duckdb_indexes", "duckdb_keywords", "duckdb_schemas",
    "duckdb_sequences", "duckdb_settings", "duckdb_tables", "duckdb_types", "duckdb_views",
    "duckdb_extensions", "duckdb_memory", "duckdb_optimizers", "duckdb_temporary_files",
    "duckdb_variables", "duckdb_logs", "duckdb_logs_parsed", "duckdb_log_contexts",
    "duckdb_secrets", "duckdb_secret_types", "duckdb_secret_type_parameters", "which_secret",
    "duckdb_approx_database_count", "duckdb_connection_count", "duckdb_available_metrics",
    "duckdb_coordinate_systems", "duckdb_dialects", "duckdb_eviction_queues",
    "duckdb_extension_repositories", "duckdb_external_file_cache", "duckdb_grammar_extensions",
    "duckdb_live_query_metrics", "duckdb_prepared_statements", "duckdb_profiling_settings",
    "duckdb_table_sample", "duckdb_triggers",
    "pragma_collations", "pragma_database_size", "pragma_metadata_info", "pragma_platform",
    "pragma_show", "pragma_storage_info", "pragma_table_info", "pragma_user_agent",
    "pragma_version",
})

# Parse-tree nodes of a read-only query; any other (`DELETE_QUERY_NODE` in a CTE, ...) is a
# write.
_READ_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"})


@dataclass(frozen=True)
class Checked:
    """What the guard found in a query it lets through."""

    params: tuple[str, ...]  # names of the $name parameters it uses
    tables: frozenset[str] | None  # tables and views it reads; None: any may be needed
    defines: frozenset[str] | None = frozenset()  # its outermost WITH's CTEs; None: unknown


_QUERY_TYPES: tuple[type, ...] = ()


def _query_types() -> tuple[type, ...]:
    global _QUERY_TYPES
    if not _QUERY_TYPES:
        from sqlglot import exp

        _QUERY_TYPES = (exp.Select, exp.SetOperation, exp.Subquery, exp.Values, exp.Describe,
                        exp.Summarize, exp.Show, exp.Pivot)
    return _QUERY_TYPES


def _write_types() -> tuple[Any, ...]:
    from sqlglot import exp

    return (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create, exp.Drop, exp.Alter,
            exp.Copy, exp.Command, exp.Set, exp.Pragma, exp.Attach, exp.Detach, exp.Install,
            exp.Use, exp.Transaction, exp.Commit, exp.Rollback, exp.TruncateTable)


@contextmanager
def quiet_sqlglot() -> Iterator[None]:
    """sqlglot logs a warning when it falls back to an opaque `Command` (`LOAD x`, `CALL f()`);
    the guard reports those itself, so the log line would only be noise on stderr."""
    import logging

    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _first_tokens(query: str) -> list[tuple[str, int, int]]:
    """(first word, line, end column) of each statement (used to name what was refused)."""
    from sqlglot.tokens import Tokenizer, TokenType

    words: list[tuple[str, int, int]] = []
    expect = True
    try:
        tokens = Tokenizer().tokenize(query)
    except Exception:  # sqlglot's tokenizer errors have no common base we can rely on
        word = query.strip().split(None, 1)[0] if query.strip() else ""
        return [(word.upper(), 1, len(word))] if word else []
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            expect = True
            continue
        if expect:
            words.append((tok.text.upper(), tok.line, tok.col))
            expect = False
    return words


def refuse(found: str) -> QueryError:
    return QueryError(f"runstore sql only runs queries (found {found})")


VERDICTS = 256
_verdicts: OrderedDict[str, Checked] = OrderedDict()
_verdicts_lock = threading.Lock()


def guard(query: str, con: Any) -> Checked:
    """Check that `query` is one read-only query, with DuckDB's parser (through `con`) first;
    a query let through before gets the same verdict again without being parsed."""
    with _verdicts_lock:
        found = _verdicts.get(query)
        if found is not None:
            _verdicts.move_to_end(query)
            return found
    checked = _guard(query, con)  # raises for what may not run: refusals are not kept
    with _verdicts_lock:
        _verdicts[query] = checked
        while len(_verdicts) > VERDICTS:
            _verdicts.popitem(last=False)
    return checked


def _guard(query: str, con: Any) -> Checked:
    import duckdb

    if nests_deeper_than(query, MAX_NESTING):
        raise nests_too_deep()
    try:
        statements = con.extract_statements(query)
    except duckdb.Error as e:
        return _unparsed(query, e)
    if not statements:
        raise QueryError("empty query: give a SELECT statement")
    # The first words name what is refused; a query let through never needs them (DuckDB's
    # tokenizer costs a fresh process a few ms on its first call).
    if len(statements) > 1:
        words = [_first_word(s.query) for s in statements]
        raise refuse(f"{len(words)} statements: {', '.join(words)}")
    kind = statements[0].type.name
    if kind == "MULTI":  # DuckDB runs it as several statements (PIVOT without IN): sqlglot
        return Checked(tuple(_guard_sqlglot(query)), None)
    if kind != "SELECT":
        word = _first_word(statements[0].query)
        raise refuse(word if word in NON_QUERY_KEYWORDS else kind)
    tree = serialized(con, query)
    if tree is None:
        return Checked(tuple(_guard_sqlglot(query)), None)
    found = _offence(tree)
    if found:
        raise refuse(found)
    return Checked(tuple(sorted(statements[0].named_parameters)), _reads(tree), defined(tree))


def too_deep(what: str) -> QueryError:
    return QueryError(f"the {what} nests too deeply for runstore to check; write it with "
                      "fewer levels of parentheses, subqueries or function calls")


def depth_error(e: BaseException) -> QueryError | None:
    """DuckDB's parser or binder giving up on a query nested beyond its limit, as a plain
    error (DuckDB's own hint, to SET a higher limit, does not apply: settings are locked)."""
    if "max expression depth" not in str(e).lower():
        return None
    return nests_too_deep()


def nests_too_deep() -> QueryError:
    return QueryError(f"the query nests more than {MAX_NESTING} levels deep (DuckDB's "
                      "max_expression_depth, views included); write it with fewer levels of "
                      "parentheses, subqueries or function calls")


def nests_deeper_than(query: str, limit: int) -> bool:
    """Whether `query` nests more than `limit` levels deep where it nests most, as DuckDB's
    parser meets it: the parentheses open there plus the operators in a row that lead to it
    (`- - - 1`), read with DuckDB's own tokenizer (a string, a quoted name or a comment holds
    no nesting). A text with no more operator characters than `limit` cannot: it is not
    tokenized (every operator token holds one)."""
    import duckdb

    if sum(map(query.count, _OPERATOR_CHARS)) <= limit:
        return False
    try:
        tokens = _tokens(query)
    except duckdb.Error:  # DuckDB's parser says what is wrong with the text
        return False
    depth = run = 0
    for kind, text in tokens:
        if kind != "operator":
            run = 0  # an operand ends a run of prefix operators
            continue
        opened = text.count("(") - text.count(")")
        if opened:
            depth = max(0, depth + opened)
        elif text not in (",", ";"):
            run += 1
        if depth + run > limit:
            return True
    return False


def _unparsed(query: str, e: Exception) -> Checked:
    """`query` that DuckDB cannot parse: sqlglot says where and why, for a clear message."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    deep = depth_error(e)
    if deep is not None:
        raise deep from e
    try:
        _guard_sqlglot(query)
    except QueryError as refused:
        if refused.__cause__ is not None and isinstance(refused.__cause__, RecursionError):
            raise QueryError(first) from e
        raise
    # sqlglot reads it, DuckDB cannot: DuckDB's own message is the one that applies.
    raise QueryError(first) from e


def _first_word(statement: str) -> str:
    """The first keyword of one statement, comments skipped, in upper case."""
    for _, word in _tokens(statement):
        return (word.split(None, 1)[0] if word else "").upper()
    return ""


def _tokens(text: str) -> list[tuple[str, str]]:
    """DuckDB's tokens of `text`, comments left out: (kind, the token's text) in order."""
    import duckdb

    found = duckdb.tokenize(text)
    ends = [offset for offset, _ in found[1:]] + [len(text)]
    return [(kind.name, text[offset:end].strip())
            for (offset, kind), end in zip(found, ends) if kind.name != "comment"]


# DuckDB's parser needs memory and time that grow with the square of how deep it is where it
# meets a syntax error (a few thousand unclosed parentheses take gigabytes and seconds), and
# no setting bounds it (`memory_limit` does not count the parser). A text nested more than
# `MAX_NESTING` levels is refused before DuckDB parses it: DuckDB's `max_expression_depth`,
# past which an expression fails anyway (only subqueries nested in FROM went deeper).
MAX_NESTING = 1000
# Every operator token of DuckDB's tokenizer holds one of these (PostgreSQL's lexer, which
# DuckDB's follows: its `self` and `op_chars` characters).
_OPERATOR_CHARS = "~!@#^&|`?+-*/%<>=()[].;:,"

# The parse tree is scanned as text (see `parsetree`): each match below is a key of the tree.
_NODE = re.compile(r'"type":"([A-Z_]+_NODE)"')
_FUNCTION = re.compile(r'"function_name":' + STRING)
# A table function's name is the first function name after its TABLE_FUNCTION reference
# (its alias, sample and query location come first; none holds a function).
_TABLE_FUNCTION = re.compile(r'"type":"TABLE_FUNCTION".*?"function_name":' + STRING, re.S)
# A table named with its schema or catalog (`main.kl_health`): only a created view has one.
_QUALIFIED = re.compile(r'"(?:schema|catalog)_name":"(?!")')


def _offence(tree: str) -> str | None:
    """The first thing in the parse tree that a read-only query may not hold, named."""
    found: list[tuple[int, str]] = []
    for m in _NODE.finditer(tree):
        if m.group(1) not in _READ_NODES:
            found.append((m.start(), m.group(1).removesuffix("_NODE").removesuffix("_QUERY")))
    for m in _TABLE_FUNCTION.finditer(tree):
        name = unescape(m.group(1)).lower()
        if name not in READ_TABLE_FUNCTIONS:
            found.append((m.start(), f"{name}()"))
    if tree.count('"type":"TABLE_FUNCTION"') != len(_TABLE_FUNCTION.findall(tree)):
        found.append((0, "a table function runstore cannot name"))
    for m in _FUNCTION.finditer(tree):
        name = unescape(m.group(1)).lower()
        if name in FORBIDDEN_FUNCTIONS:
            found.append((m.start(), f"{name}()"))
    return min(found)[1] if found else None


def _reads(tree: str) -> frozenset[str] | None:
    """The tables and views the query reads (`parsetree.read_tables`); None when it may read others
    (catalog functions, files, system views) or names a table with its schema or catalog
    (`main.kl_health`, which a CTE cannot stand for): the caller then creates every table."""
    functions = {unescape(f).lower() for f in _FUNCTION.findall(tree)}
    if any(f.startswith(("duckdb_", "pragma_")) for f in functions) or _QUALIFIED.search(tree):
        return None
    return read_tables(tree)


def _guard_sqlglot(query: str) -> list[str]:
    """The slow path of `guard`: sqlglot's parse of `query`; the `$name` parameters it uses."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    first = _first_tokens(query)
    words = [w for w, _, _ in first]
    if len(words) > 1:
        raise refuse(f"{len(words)} statements: {', '.join(words)}")
    if not words:
        raise QueryError("empty query: give a SELECT statement")
    try:
        with quiet_sqlglot():
            trees = [t for t in sqlglot.parse(query, read="duckdb") if t is not None]
    except RecursionError as e:
        raise too_deep("query") from e
    except (ParseError, TokenError) as e:
        if words[0] in NON_QUERY_KEYWORDS:
            raise refuse(words[0]) from e
        if words[0] not in QUERY_KEYWORDS:
            # sqlglot would read `selec * from t` as an expression and blame a later token.
            _, line, col = first[0]
            raise QueryError(
                f"syntax error at line {line}, column {col} near '{words[0].lower()}': a query "
                "starts with SELECT, WITH, FROM, VALUES, DESCRIBE, SUMMARIZE or SHOW"
                + _pointer(query, line, col, len(words[0]))) from e
        raise QueryError(syntax_message(e, query)) from e
    # A comment after the last `;` comes back as a bare Semicolon node: not a statement.
    trees = [t for t in trees if not isinstance(t, exp.Semicolon)]
    if len(trees) != 1:
        raise refuse(f"{len(trees)} statements")
    tree = trees[0]
    if not isinstance(tree, _query_types()):
        raise refuse(words[0] if words[0] not in QUERY_KEYWORDS else tree.key.upper())
    try:
        _check_nodes(tree, refuse)
        return sorted({p.name for p in tree.find_all(exp.Placeholder) if p.name})
    except RecursionError as e:
        raise too_deep("query") from e


def _check_nodes(tree: Any, fail: Any) -> None:
    """Refuse writes and DDL anywhere in `tree` (a DELETE in a CTE too) and forbidden functions."""
    from sqlglot import exp

    writes = _write_types()
    for node in tree.walk():
        if isinstance(node, writes):
            raise fail(node.key.upper())
        if isinstance(node, (exp.Anonymous, exp.Func)):
            fname = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
            if fname in FORBIDDEN_FUNCTIONS:
                raise fail(f"{fname}()")


def condition(text: str, what: str = "--where") -> Any:
    """`text` parsed as one SQL condition (a sqlglot expression), or `QueryError`.

    Only expressions are accepted: no statements, subqueries, `$params` or forbidden
    functions, so the condition can be placed in a WHERE clause built with sqlglot.
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    hint = f"{what} takes one SQL condition, e.g. \"kind = 'rl' and best_reward > 0.5\""
    if not text.strip():
        raise QueryError(f"{hint}; got an empty string")
    try:
        with quiet_sqlglot():
            tree = sqlglot.parse_one(text, read="duckdb", into=exp.Condition)
    except RecursionError as e:
        raise too_deep(f"{what} condition") from e
    except (ParseError, TokenError) as e:
        raise QueryError(f"{hint}: {syntax_message(e, text)}") from e

    def fail(found: str) -> QueryError:
        return QueryError(f"{hint} (found {found})")

    try:
        _check_nodes(tree, fail)
        for node in tree.walk():
            if isinstance(node, (exp.Query, exp.Subquery, exp.Exists)):
                raise fail("a subquery")
            if isinstance(node, exp.Placeholder):
                raise fail(f"parameter {node.sql(dialect='duckdb')}")
            if isinstance(node, exp.Star):
                raise fail("*")
        tree.sql(dialect="duckdb")  # what the caller will do with it: it must not recurse out
    except RecursionError as e:
        raise too_deep(f"{what} condition") from e
    return tree


# ---------------------------------------------------------------------------------------------
# Syntax errors: sqlglot's position and token, a short reason, the line with carets.

_CLASS = re.compile(r"<class '(?:[\w]+\.)*(\w+)'>")
_REQUIRED = re.compile(r"^Required keyword: '\w+' missing for <class '(?:[\w]+\.)*(\w+)'>$")
_CLAUSES = {"Where": "WHERE clause", "Limit": "LIMIT clause", "Offset": "OFFSET clause",
            "Having": "HAVING clause", "Group": "GROUP BY", "Order": "ORDER BY",
            "From": "FROM clause", "Join": "JOIN", "Select": "SELECT", "Paren": "parentheses",
            "Cast": "CAST", "Case": "CASE expression", "Alias": "alias", "In": "IN list",
            "Between": "BETWEEN", "Like": "LIKE", "Not": "NOT"}


def _short(description: str) -> str:
    """sqlglot's description, shortened (its class names mean nothing to a user)."""
    m = _REQUIRED.match(description)
    if m:
        name = m.group(1)
        if name in _CLAUSES:
            return f"incomplete {_CLAUSES[name]}"
        return "an operator is missing its right-hand side"
    if description.startswith("Invalid expression / Unexpected token"):
        return "unexpected token"
    if description.startswith("Expecting "):
        return "expected " + description[len("Expecting "):]
    return _CLASS.sub(lambda c: c.group(1), description)


def _pointer(query: str, line: int, col: int, width: int) -> str:
    """The offending line and a row of carets under the token that ends at `col`."""
    lines = query.splitlines() or [""]
    if not 1 <= line <= len(lines):
        return ""
    text = lines[line - 1].expandtabs(1)
    start = max(col - width, 0)
    return f"\n  {text}\n  {' ' * start}{'^' * max(width, 1)}"


def syntax_message(e: Exception, query: str) -> str:
    """A one-line reason with sqlglot's line/column and token, then the line with carets."""
    errors = getattr(e, "errors", None) or []
    if errors:
        first = errors[0]
        near = (first.get("highlight") or "").strip()
        line, col = first.get("line") or 1, first.get("col") or 1
        head = (f"syntax error at line {line}, column {col} near '{near}': "
                f"{_short(str(first.get('description') or ''))}")
        return head + _pointer(query, line, col, len(near))
    # TokenError (e.g. an unterminated string): sqlglot gives only the text it had read.
    end = getattr(e, "end", None)
    if isinstance(end, int) and 0 <= end <= len(query):
        # Point at the opening quote of the string that never ends (0-based offset `pos`).
        pos = max(query.rfind("'", 0, end), query.rfind('"', 0, end))
        pos = pos if pos >= 0 else max(end - 1, 0)
        line = query.count("\n", 0, pos) + 1
        col = pos - (query.rfind("\n", 0, pos) + 1) + 1
        return (f"syntax error at line {line}, column {col}: unterminated string or quoted name"
                + _pointer(query, line, col, 1))
    return f"syntax error: {e}"


# ---------------------------------------------------------------------------------------------
# Identifiers


def identifier(name: str) -> str:
    """`name` as a quoted DuckDB identifier (metric names contain `/`, `:` and more): in
    double quotes, a double quote doubled, as sqlglot writes it (a test holds the two
    together) but without importing sqlglot, which building a connection must not pay for."""
    return '"' + name.replace('"', '""') + '"'
