"""Other engines: the canned views transpiled for Spark and Trino, and the store on Spark.

Contract: `DIALECTS` are the engines `runstore views --dialect` writes for. `transpile(sql,
dialect)` rewrites one DuckDB statement with sqlglot: what runstore's DuckDB has built in is
written out (its macros, e.g. `over_threshold`, replaced by their bodies: query/macros.py;
the `kl_keys` relation by its rows: runstore.families), with two corrections (`arg_max_null`
as `max_by`; an exact percentile on Spark, see `transpile`); `view_ddl(name, body, dialect)`
wraps a view body in that engine's `CREATE OR REPLACE [TEMP] VIEW`; `views_ddl(dialect)` is
one script creating `settings` (the default settings) and every canned view in dependency
order, to run as is over tables with runstore's names.

`register(spark, store)` makes every public table of the store's newest snapshot a temporary
view on a SparkSession, read from exactly the Parquet files the snapshot lists (never a
directory glob: files a compaction replaced stay on disk until vacuum; a column runstore
resolves when queried, `eval_runs.run_id`, resolved there too), then `settings` (the
store's settings, as a query sees them), then every canned view transpiled to Spark SQL, in
dependency order; it returns the names registered. Works for any SparkSession (local, a
cluster, Databricks) that can read the store's paths:

    from pyspark.sql import SparkSession
    import runstore
    from runstore.query.dialects import register
    spark = SparkSession.builder.master("local[2]").getOrCreate()
    register(spark, runstore.open("/data/store"))
    spark.sql("select run_name, max_kl_v1 from kl_health where flagged").show()

sqlglot is imported inside the functions.
"""

from __future__ import annotations

import os
import textwrap
from typing import TYPE_CHECKING, Any

from ..errors import QueryError
from ..families import KL_KEYS
from ..storage import schema
from ..storage.location import location
from ..storage.settings import DEFAULT_SETTINGS, merged, value_parts
from ..storage.snapshot import current, table_files
from .connect import LINKED
from .statements import named
from .views import views

if TYPE_CHECKING:
    from .reader import Reader

# What `runstore views --dialect` offers, each with how it creates a view: Spark has
# session-scoped temporary views, Trino only persistent ones. (`databricks` is Spark SQL too.)
DIALECTS = ("spark", "trino")
CREATE_VIEW = {"spark": "CREATE OR REPLACE TEMP VIEW", "databricks": "CREATE OR REPLACE TEMP VIEW",
               "trino": "CREATE OR REPLACE VIEW"}


def transpile(sql: str, dialect: str) -> str:
    """DuckDB SQL (one statement) rewritten for `dialect`, pretty-printed.

    Two corrections to sqlglot: DuckDB's `arg_max_null` becomes `max_by` (same meaning, see
    `_max_by`), and sqlglot writes `percentile_cont(q) WITHIN GROUP (ORDER BY x)` as
    Spark's `PERCENTILE_APPROX`, which returns a nearby data value instead of the
    interpolated percentile; Spark's `PERCENTILE(x, q)` is exact and interpolates the same way
    as DuckDB, so Spark gives the same answer.
    """
    import sqlglot

    from .macros import expand

    tree = expand(sqlglot.parse_one(sql, read="duckdb")).transform(_kl_keys).transform(_max_by)
    if dialect in ("spark", "databricks"):
        tree = tree.transform(_exact_percentile)
    return tree.sql(dialect=dialect, pretty=True)


def _kl_keys(node: Any) -> Any:
    """The relation `kl_keys` (the stored KL spellings, which runstore's DuckDB creates from
    runstore.families) written out as its rows, for an engine that has no such table."""
    from sqlglot import exp

    if isinstance(node, exp.Table) and node.name.lower() == "kl_keys" and not node.db:
        rows = exp.values([tuple(row) for row in KL_KEYS], alias="k",
                          columns=["key", "family", "pref"])
        return exp.select("*").from_(rows).subquery(node.alias_or_name)
    return node


def _max_by(node: Any) -> Any:
    """DuckDB's `arg_max_null(x, y)` (x of the largest y, even when that x is null) is what
    `max_by` means in Spark and Trino; sqlglot passes the name through unchanged."""
    from sqlglot import exp

    if isinstance(node, exp.Anonymous) and node.name.lower() == "arg_max_null":
        return exp.ArgMax(this=node.expressions[0].copy(), expression=node.expressions[1].copy())
    return node


def _exact_percentile(node: Any) -> Any:
    from sqlglot import exp

    if isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileCont):
        order = node.expression
        if (isinstance(order, exp.Order) and len(order.expressions) == 1
                and not order.expressions[0].args.get("desc")):
            return exp.Quantile(this=order.expressions[0].this.copy(),
                                quantile=node.this.this.copy())
    return node




def view_ddl(name: str, body: str, dialect: str) -> str:
    """`CREATE OR REPLACE [TEMP] VIEW name AS <body transpiled>;` for `dialect`."""
    from sqlglot import exp

    if dialect not in CREATE_VIEW:
        raise QueryError(f"no view DDL for dialect {dialect!r}; choose one of "
                         f"{', '.join(sorted(CREATE_VIEW))}")
    ident = exp.to_identifier(name).sql(dialect=dialect)
    return f"{CREATE_VIEW[dialect]} {ident} AS\n{transpile(body, dialect)};"


def views_ddl(dialect: str) -> str:
    """Every canned view as `CREATE OR REPLACE [TEMP] VIEW` statements for `dialect`."""
    from sqlglot import exp

    if dialect not in DIALECTS:
        raise QueryError(f"unknown dialect {dialect!r}; choose one of {', '.join(DIALECTS)}")
    # `settings` is a table in runstore's DuckDB; elsewhere a view of the default values.
    rows = [exp.select(exp.alias_(exp.Literal.string(name), "name"),
                       exp.alias_(exp.cast(exp.Literal.number(value), "double"), "value_num"),
                       exp.alias_(exp.cast(exp.null(), "varchar"), "value_str"))
            for name, value in DEFAULT_SETTINGS.items()]
    settings: exp.Query = rows[0]
    for more in rows[1:]:
        settings = exp.union(settings, more, distinct=False)
    parts = [f"-- runstore canned views for {dialect}, in dependency order. They read tables "
             "named like runstore's\n-- (runs, metrics_raw, spans, ...) and the `settings` "
             "view below (edit kl_threshold there).\n-- eval_runs.run_id is not stored: "
             "runstore resolves it when queried (statement eval_run_links\n-- of "
             "sql/statements/evals.sql; `register` does it on Spark).",
             view_ddl("settings", settings.sql(dialect="duckdb"), dialect)]
    if dialect == "trino":
        # Trino has no exact percentile aggregate; say so rather than differ silently.
        parts[0] += ("\n-- Trino has no exact percentile: slowest_spans.p50_s/p95_s use "
                     "approx_percentile there.")
    for v in views():
        parts.append("\n".join(textwrap.wrap(v.description, 96,
                                              initial_indent="-- ", subsequent_indent="-- "))
                     + "\n" + view_ddl(v.name, v.body, dialect))
    return "\n\n".join(parts) + "\n"


def _linked(spark: Any, name: str) -> None:
    """Table `name`'s column resolved when queried (`connect.LINKED`), on Spark as in DuckDB:
    its statement transpiled, reading the stored rows (registered as `<name>__stored`) where
    DuckDB reads the table's files, and joined to them in the table's column order."""
    from sqlglot import exp

    column, statement, keys = LINKED[name]
    stored = spark.table(name)
    stored.createOrReplaceTempView(f"{name}__stored")

    def from_stored(node: Any) -> Any:
        if isinstance(node, exp.ReadParquet) or (isinstance(node, exp.Anonymous)
                                                 and node.name.lower() == "read_parquet"):
            return exp.to_table(f"{name}__stored")
        return node

    import sqlglot

    tree = sqlglot.parse_one(named(statement), read="duckdb").transform(from_stored)
    links = spark.sql(tree.sql(dialect="spark"))
    joined = stored.drop(column).join(links, on=list(keys), how="left")
    joined.select(*stored.columns).createOrReplaceTempView(name)


def spark_ddl(table: str) -> str:
    """The table's columns as a Spark DDL schema string (for empty tables)."""
    return ", ".join(f"`{name}` {schema.spark_type(typ)}" for name, typ, _ in schema.TABLES[table])


def register(spark: Any, store: "Reader | str | os.PathLike[str]") -> list[str]:
    """Register the store's tables, settings and canned views on `spark` (see the module doc);
    `store` is a `Store` or the location of one."""
    if isinstance(store, (str, os.PathLike)):
        root = location(store).resolved()
        manifest = current(root)
    else:
        root, manifest = store.path, store.manifest()
    names: list[str] = []
    for name in schema.TABLES:
        files = table_files(root, manifest, name)
        reader = spark.read.schema(spark_ddl(name))
        df = reader.parquet(*files) if files else spark.createDataFrame([], spark_ddl(name))
        df.createOrReplaceTempView(name)
        names.append(name)
    for name in LINKED:
        _linked(spark, name)
    rows = [(k, *value_parts(v)) for k, v in merged(manifest.settings).items()]
    spark.createDataFrame(rows, "name STRING, value_num DOUBLE, value_str STRING") \
        .createOrReplaceTempView("settings")
    names.append("settings")
    for view in views():
        spark.sql(view_ddl(view.name, view.body, "spark").rstrip(";"))
        names.append(view.name)
    return names
