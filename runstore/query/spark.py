"""Spark: the store's tables and canned views on a SparkSession.

Contract: `register(spark, store)` makes every public table of the store's newest snapshot a
temporary view on `spark`, read from exactly the Parquet files the snapshot lists (never a
directory glob: files a compaction replaced stay on disk until vacuum), then a `settings` view
holding the store's settings (`kl_threshold`), then every canned view of `sql/`, transpiled
from DuckDB SQL to Spark SQL by sqlglot, in dependency order. It returns the names registered.
Works for any SparkSession (local, a cluster, Databricks) that can read the store's paths.

    from pyspark.sql import SparkSession
    import runstore, runstore.spark
    spark = SparkSession.builder.master("local[2]").getOrCreate()
    runstore.spark.register(spark, runstore.open("/data/store"))
    spark.sql("select run_name, max_kl_v1 from kl_health where flagged").show()
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from . import connect as query, guard as sqlcheck
from ..storage import schema, writer as tables
from ..store import Store

_SPARK_TYPES = {
    pa.string(): "STRING", pa.int64(): "BIGINT", pa.int32(): "INT", pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN", pa.timestamp("us", tz="UTC"): "TIMESTAMP",
    pa.list_(pa.string()): "ARRAY<STRING>",
}


def spark_ddl(table: str) -> str:
    """The table's columns as a Spark DDL schema string (for empty tables)."""
    return ", ".join(f"`{f.name}` {_SPARK_TYPES[f.type]}" for f in schema.schema(table))


def register(spark: Any, store: Store | str) -> list[str]:
    st = store if isinstance(store, Store) else Store(store)
    manifest = st.manifest()
    names: list[str] = []
    for name in schema.TABLES:
        files = tables.table_files(st.path, manifest, name)
        reader = spark.read.schema(spark_ddl(name))
        df = reader.parquet(*files) if files else spark.createDataFrame([], spark_ddl(name))
        df.createOrReplaceTempView(name)
        names.append(name)
    settings = {**query.DEFAULT_SETTINGS, **(manifest.settings or {})}
    rows = [(k, *query.setting_value(v)) for k, v in settings.items()]
    spark.createDataFrame(rows, "name STRING, value_num DOUBLE, value_str STRING") \
        .createOrReplaceTempView("settings")
    names.append("settings")
    for view in query.views():
        spark.sql(sqlcheck.view_ddl(view.name, view.body, "spark").rstrip(";"))
        names.append(view.name)
    return names
