"""Every canned view runs on a real local Spark session and answers what DuckDB answers.

One SparkSession (local[2], UI off, bound to 127.0.0.1) for the module; the store is built from
the generated demo and awkward trees, registered with `runstore.query.dialects.register` (live file
lists, views transpiled by sqlglot), and each view's rows are compared with DuckDB's,
order-insensitively, floats with a relative tolerance.
"""

from __future__ import annotations

import math
import shutil
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import pytest

import oracle
import runstore
from runstore.query.views import views

pyspark = pytest.importorskip("pyspark", reason="pyspark is a test extra (pip install -e '.[test]')")

if shutil.which("java") is None:
    pytest.skip("Spark needs a Java runtime (java not found)", allow_module_level=True)

# One xdist worker runs the module, so one Spark session (several seconds to start) serves it.
pytestmark = pytest.mark.xdist_group("spark")


@pytest.fixture(scope="module")
def spark() -> Any:
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("runstore-test")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "4")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> runstore.Store:
    from runstore import demo

    root = tmp_path_factory.mktemp("spark")
    demo.generate_tree(root / "runs" / "demo", seed=5)
    demo.generate_tree(root / "runs" / "awkward", demo.awkward_specs(), seed=6)
    (root / "runs" / "kl_edge").mkdir()
    (root / "runs" / "kl_edge" / "metrics.jsonl").write_text(oracle.KL_EDGE_METRICS)
    st = runstore.open(root / "store")
    st.ingest([root / "runs"])
    return st


def _norm(v: Any) -> Any:
    if isinstance(v, datetime):
        return (v if v.tzinfo is None else v.astimezone(timezone.utc).replace(tzinfo=None))
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, list):
        return tuple(_norm(x) for x in v)
    return v


def _key(row: dict[str, Any]) -> tuple:
    # Floats rounded for ordering only; equality below uses a relative tolerance.
    return tuple((0, "") if v is None else (1, round(v, 6) if isinstance(v, float) else str(v))
                 for v in row.values())


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isinf(a) or math.isinf(b):
            return a == b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return a == b


@pytest.mark.slow
@pytest.mark.parametrize("view", [v.name for v in views()])
def test_view_on_spark_equals_duckdb(spark: Any, store: runstore.Store, view: str) -> None:
    from runstore.query import dialects

    if not getattr(spark, "_runstore_registered", False):
        names = dialects.register(spark, store)
        assert set(names) >= {v.name for v in views()} | {"runs", "metrics_raw", "settings"}
        spark._runstore_registered = True
    duck = store.arrow(f'select * from "{view}"')
    ours = [{k: _norm(v) for k, v in r.items()} for r in duck.to_pylist()]
    theirs = [{k: _norm(v) for k, v in r.asDict().items()}
              for r in spark.sql(f"select * from `{view}`").collect()]
    assert ours, f"{view} is empty on the fixture store: the comparison would prove nothing"
    assert len(theirs) == len(ours), (view, len(theirs), len(ours))
    assert list(theirs[0]) == duck.column_names
    for a, b in zip(sorted(ours, key=_key), sorted(theirs, key=_key)):
        bad = {k: (a[k], b[k]) for k in a if not _same(a[k], b[k])}
        assert not bad, f"{view}: DuckDB vs Spark differ: {bad}"


def test_spark_ddl_covers_every_column_type() -> None:
    from runstore.storage import schema
    from runstore.query.dialects import spark_ddl

    for table in schema.TABLES:
        ddl = spark_ddl(table)
        assert ddl.count("`") == 2 * len(schema.schema(table))
