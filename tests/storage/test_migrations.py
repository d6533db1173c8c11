"""Schema migrations: a store from the first schema version upgrades and keeps every row; a
store from a newer runstore is refused, untouched.

`tests/fixtures/store_v1/` was written by runstore at schema version 1 (see the README there);
every test copies it first, since opening a store may migrate it. The upgrade path is proven
twice: with the migrations that ship (the fixture must open and take new ingests with today's
code), and with a later additive migration placed beside `0001_initial.py` in a temporary
migrations directory (pending before, applied by `migrate`, recorded with its time, every
row kept).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import oracle
import runstore
from runstore.storage import versions
from runstore.storage.manifest import manifest_paths, read_manifest
from runstore.storage.snapshot import read_table
from runstore import resources
from runstore.cli import main

FIXTURE = Path(__file__).parents[1] / "fixtures" / "store_v1"
# What the fixture holds (counted when it was written).
V1_COUNTS = {"runs": 2, "config": 83, "metrics_raw": 321, "checkpoints": 4, "trajectories": 12,
             "rollout_steps": 12, "conversations": 20, "messages": 30, "spans": 100,
             "trace_slices": 86}
V1_RUNS = ["sft_tiny", "sweep/rl_tiny"]


def counts(store: runstore.Store) -> dict[str, int]:
    q = " union all ".join(f"select '{t}' as t, count(*) as n from {t}" for t in V1_COUNTS)
    return {r["t"]: r["n"] for r in store.arrow(q).to_pylist()}


# Columns a shipped migration fills for the rows stored before it (checked on their own).
FILLED = {"spans": {"wall_add_s"}}


def table_digest(store: runstore.Store) -> dict[str, list]:
    """Every row of every table of the fixture (sorted, as text), for before/after equality,
    without the columns that migrations fill in."""
    out = {}
    for t in V1_COUNTS:
        cols = [c for c in store.sql(f"select * from {t} limit 0").columns
                if c not in FILLED.get(t, ())]
        rows = store.arrow(f"select {', '.join(cols)} from {t}").to_pylist()
        out[t] = sorted(repr(sorted(r.items())) for r in rows)
    return out


@pytest.fixture
def v1(tmp_path: Path) -> Path:
    dst = tmp_path / "store_v1"
    shutil.copytree(FIXTURE, dst)
    return dst



def test_fixture_is_schema_version_1() -> None:
    m = read_manifest(FIXTURE)
    assert m is not None and m.schema_version == 1
    assert [x["name"] for x in m.migrations] == ["0001_initial"]


def test_v1_store_opens_and_keeps_every_row(v1: Path, small_tree: Path) -> None:
    store = runstore.open(v1)
    assert counts(store) == V1_COUNTS
    assert store.sql("select run_name from runs order by 1")["run_name"].to_list() == V1_RUNS
    before = table_digest(store)
    # The views work over it too.
    assert store.sql("select count(*) as n from run_summary")["n"][0] == 2

    # Whatever migrations this runstore ships are applied by `migrate` (and by ingest).
    applied = store.migrate()
    m = store.manifest()
    assert m.schema_version == versions.latest_version()
    assert [x["name"] for x in m.migrations] == ["0001_initial", *applied]
    assert table_digest(store) == before

    # New runs go in beside the old ones; the old rows stay (their sources are gone, so the
    # runs are marked missing, nothing else changes).
    gone = sum(not Path(p).exists() for p in store.sql("select run_path from runs")["run_path"])
    report = store.ingest([small_tree])
    assert report.runs_new == 3 and report.runs_missing == gone
    want = oracle.expected_counts(small_tree)
    got = counts(store)
    assert got == {t: V1_COUNTS[t] + want.get(t, 0) for t in V1_COUNTS}
    if gone == 2:
        assert set(store.sql("select status from runs where run_name in ('sft_tiny', "
                             "'sweep/rl_tiny')")["status"]) == {"missing"}
    after = table_digest(store)
    for t in V1_COUNTS:
        if t != "runs":
            assert set(before[t]) <= set(after[t]), t


def test_migration_fills_wall_add_s_of_stored_spans(v1: Path) -> None:
    """0003 computes `spans.wall_add_s` for the rows of a store written before it: summed per
    (run, step, name) it is the union of the stored intervals (the oracle's island merge),
    and `slowest_spans.wall_s`, null before, is then that sum over steps."""
    store = runstore.open(v1)
    assert store.sql("select count(wall_add_s) as n from spans")["n"][0] == 0
    assert all(v is None for v in store.sql("select wall_s from slowest_spans")["wall_s"])
    assert "0003_span_wall" in store.migrate()
    spans = store.arrow("select run_id, step, name, wall_start_s, wall_end_s, wall_add_s "
                        "from spans").to_pylist()
    want: dict[tuple, list] = {}
    for r in spans:
        want.setdefault((r["run_id"], r["step"], r["name"]), []).append(r)
    assert len(spans) == V1_COUNTS["spans"] and len(want) > 10
    timed = 0
    for key, group in want.items():
        ivs = [(r["wall_start_s"], r["wall_end_s"]) for r in group
               if r["wall_start_s"] is not None and r["wall_end_s"] is not None]
        adds = [r["wall_add_s"] for r in group if r["wall_add_s"] is not None]
        assert len(adds) == len(ivs), key  # null exactly where a wall time is missing
        if ivs:
            timed += 1
            assert sum(adds) == pytest.approx(oracle.union_length(ivs), rel=1e-12, abs=1e-12)
            assert all(a >= 0 for a in adds)
    assert timed > 10
    per_name: dict[tuple, float] = {}
    for (run, _, name), group in want.items():
        for r in group:
            if r["wall_add_s"] is not None:
                per_name[(run, name)] = per_name.get((run, name), 0.0) + r["wall_add_s"]
    got = {(r["run_id"], r["name"]): r["wall_s"]
           for r in store.arrow("select run_id, name, wall_s from slowest_spans").to_pylist()}
    assert {k: v for k, v in got.items() if v is not None} == pytest.approx(per_name)


def test_migrate_list_on_v1_store(v1: Path) -> None:
    before = oracle.tree_digest(v1)
    result = CliRunner().invoke(main, ["--store", str(v1), "migrate", "--list"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "schema version 1"
    assert "applied  0001_initial" in result.stdout
    assert oracle.tree_digest(v1) == before  # --list writes nothing


LATER_MIGRATION = '''"""Add `runs.note`, a free-text note per run (test-only migration)."""


def migrate(ctx):
    ctx.add_columns("runs", [("note", "string")])
'''


@pytest.fixture
def later_migrations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A migrations directory holding the shipped migrations plus a later one, runs_note."""
    d = tmp_path / "migrations"
    shutil.copytree(resources.migrations_dir(), d)
    (d / f"{versions.latest_version() + 1:04d}_runs_note.py").write_text(LATER_MIGRATION)
    monkeypatch.setattr(versions, "migrations_dir", lambda: d)
    return d


def test_v1_store_upgrades_through_a_later_migration(v1: Path, later_migrations: Path) -> None:
    from deltalake import DeltaTable

    store = runstore.open(v1)
    before = table_digest(store)
    m = store.manifest()
    last = versions.latest_version()
    note = f"{last:04d}_runs_note"
    shipped = [x.name for x in versions.pending(m.schema_version)][:-1]  # 0002_metric_keys, ...
    assert [x.name for x in versions.pending(m.schema_version)] == [*shipped, note]
    assert versions.pending(m.schema_version)[-1].doc.startswith("Add `runs.note`")

    assert store.migrate() == [*shipped, note]
    m = store.manifest()
    assert m.schema_version == last
    assert [x["name"] for x in m.migrations] == ["0001_initial", *shipped, note]
    assert m.migrations[-1]["applied_at"] > m.migrations[0]["applied_at"]
    assert versions.pending(m.schema_version) == []
    assert "note" in DeltaTable(str(v1 / "tables" / "runs")).schema().to_arrow().names
    assert table_digest(store) == before
    assert store.migrate() == []  # applied once


def test_a_new_store_has_the_tables_an_upgraded_one_has(v1: Path, tmp_path: Path) -> None:
    """A new store's tables are each made in one Delta commit with the columns they end with
    (storage/migrate.py); the fixture upgraded from schema version 1 reaches its tables by
    adding columns commit by commit. Both give every table the same Delta schema."""
    from deltalake import DeltaTable

    from runstore.storage import migrate
    from runstore.storage.location import location
    from runstore.storage.writer import writer

    runstore.open(v1).migrate()
    with writer(location(tmp_path / "new")) as w:  # what a first ingest does first
        assert migrate.apply(w) == versions.pending(0)
    tables = sorted(p.name for p in (v1 / "tables").iterdir())
    assert tables == sorted(p.name for p in (tmp_path / "new" / "tables").iterdir())
    for name in tables:
        new = DeltaTable(str(tmp_path / "new" / "tables" / name))
        old = DeltaTable(str(v1 / "tables" / name))
        assert new.schema() == old.schema(), name
        assert new.version() == 0 and new.file_uris() == [], name


def test_a_new_stores_migrations_computed_give_no_row(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A new store's fills and rewrites are not computed (storage/migrate.py: a snapshot with
    no live file gives no row to compute from). Computed all the same, every one of them gives
    no row, and the store is the same: each table with the same Delta schema and no file, and
    the same migrations recorded."""
    from deltalake import DeltaTable

    from runstore.storage import migrate
    from runstore.storage.location import location
    from runstore.storage.writer import writer

    with writer(location(tmp_path / "new")) as w:
        assert migrate.apply(w) == versions.pending(0)
    monkeypatch.setattr(migrate, "holds_rows", lambda manifest: True)  # compute each one
    with writer(location(tmp_path / "computed")) as w:
        assert migrate.apply(w) == versions.pending(0)
    new, computed = (read_manifest(tmp_path / d) for d in ("new", "computed"))
    assert sorted(new.tables) == sorted(computed.tables)
    assert [m["name"] for m in new.migrations] == [m["name"] for m in computed.migrations]
    assert new.schema_version == computed.schema_version == versions.latest_version()
    for name in new.tables:
        made = DeltaTable(str(tmp_path / "computed" / "tables" / name))
        assert made.file_uris() == [], name
        assert made.schema() == DeltaTable(str(tmp_path / "new" / "tables" / name)).schema()


BAD_REWRITE = '''"""Rewrite a table with rows that have a column it lacks (test-only migration)."""
import pyarrow as pa


def migrate(ctx):
    ctx.create_table("scratch", [("a", "int64")])
    ctx.rewrite_table({table!r}, lambda ctx: pa.table({{"b": pa.array([], pa.string())}}))
'''


@pytest.mark.parametrize("table", ["scratch", "runs"])
def test_a_rewrite_with_a_column_the_table_lacks_publishes_nothing(
        v1: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str) -> None:
    """Rows with a column the table lacks are refused whether the table is on disk (`runs` of
    the fixture) or made by the same run and still in memory (`scratch`: no row before, none
    after): the store keeps its snapshot and its rows, and migrates later all the same."""
    d = tmp_path / "migrations"
    shutil.copytree(resources.migrations_dir(), d)
    bad = d / f"{versions.latest_version() + 1:04d}_bad_rewrite.py"
    bad.write_text(BAD_REWRITE.format(table=table))
    monkeypatch.setattr(versions, "migrations_dir", lambda: d)
    store = runstore.open(v1)
    before, seq = table_digest(store), store.manifest().seq
    lacks = f"rows for table {table} have columns it lacks: \\['b'\\]"
    with pytest.raises(Exception, match=lacks):
        store.migrate()
    assert store.manifest().seq == seq and store.manifest().schema_version == 1
    assert table_digest(store) == before
    bad.unlink()  # what the failed run left does not stand in the way of the next one
    assert store.migrate() == [m.name for m in versions.pending(1)]
    assert table_digest(store) == before


def test_newer_store_is_refused_untouched(v1: Path, small_tree: Path) -> None:
    paths = manifest_paths(v1)
    newest = paths[-1][1]
    data = json.loads(newest.read_text())
    data["schema_version"] = 999
    newest.write_text(json.dumps(data))
    before = oracle.tree_digest(v1)
    for args in (["sql", "select 1"], ["runs"], ["ingest", str(small_tree)], ["compact"],
                 ["migrate"], ["migrate", "--list"], ["repair"]):
        p = subprocess.run([sys.executable, "-m", "runstore", "--store", str(v1), *args],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 3, (args, p.stdout, p.stderr)
        assert p.stderr.startswith("Error: this store has schema version 999"), (args, p.stderr)
        assert "upgrade runstore" in p.stderr and "Traceback" not in p.stderr
        assert oracle.tree_digest(v1) == before, args


def test_columns_no_file_has_yet_read_as_nulls(v1: Path, later_migrations: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """After a migration adds a column (and schema.py lists it), queries see it as nulls
    until an ingest writes it: the v1 files were all written before it existed."""
    from runstore.storage import schema as schema_mod

    store = runstore.open(v1)
    store.migrate()
    monkeypatch.setitem(schema_mod.TABLES, "runs",
                        [*schema_mod.TABLES["runs"], ("note", schema_mod.STR, "a note")])
    rows = store.sql("select note, count(*) as n from runs group by note").rows()
    n_runs = len(read_table(v1, store.manifest(), "runs"))
    assert rows == [(None, n_runs)] and n_runs > 0
    assert store.arrow("select note from runs limit 1").schema.field("note").type == pa.string()


def test_every_column_reads_with_its_schema_type_and_place_in_old_and_empty_stores(
        v1: Path, tmp_path: Path) -> None:
    """Columns no live file has (the v1 files predate most of them) and tables with no file
    at all (a new store that ingested nothing) read as nulls of the type schema.py states,
    as DuckDB names types, each in the place schema.py gives it (the columns the query layer
    computes for an old store, such as `runs.done_frac`, among them)."""
    from runstore.storage import migrate, schema as schema_mod
    from runstore.storage.location import location
    from runstore.storage.writer import writer

    empty = tmp_path / "empty"
    with writer(location(empty)) as w:  # what a first ingest does first
        migrate.apply(w)
    for path in (v1, empty):
        store = runstore.open(path)
        store.migrate()
        for table in schema_mod.TABLES:
            got = store.sql(f"describe {table}").rows()
            assert [(r[0], r[1]) for r in got] == schema_mod.duckdb_columns(table), (path, table)


# ---------------------------------------------------------------------------------------------
# Migrations are frozen: they import nothing of the live ingest


def _imported_names(tree: "ast.AST") -> list[str]:
    """Every module a migration's source names for import: `import x`, `from x import y`
    (as `x` and `x.y`), and the text given to `importlib.import_module` / `__import__`."""
    import ast

    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ("." * node.level) + (node.module or "")
            names += [base] + [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Call) and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
                and ast.unparse(node.func) in ("importlib.import_module", "import_module",
                                               "__import__"):
            names.append(node.args[0].value)
    return names


def _reaches_ingest(name: str) -> bool:
    return name == "runstore.ingest" or name.startswith("runstore.ingest.")


def test_no_migration_imports_the_live_ingest() -> None:
    """A migration does what it did for the stores at its version: it keeps a frozen copy of
    the statement it runs (`ctx.query`), never the live ingest's code, which later changes
    would change under it. import-linter does not see `migrations/` (not a package), so each
    file's imports are read here with Python's own parser."""
    import ast

    migrations = sorted(resources.migrations_dir().glob("[0-9][0-9][0-9][0-9]_*.py"))
    assert len(migrations) >= 6
    for path in migrations:
        names = _imported_names(ast.parse(path.read_text(), str(path)))
        assert not [n for n in names if _reaches_ingest(n)], f"{path.name} imports {names}"


def test_the_import_check_sees_every_spelling() -> None:
    """The check above fails on each way a migration could reach the live ingest."""
    import ast

    for source in ("from runstore.ingest.normalize import metric_keys",
                   "import runstore.ingest.progress",
                   "from runstore import ingest",
                   "def migrate(ctx):\n    from runstore.ingest import statements",
                   "import importlib\nimportlib.import_module('runstore.ingest.summaries')",
                   "__import__('runstore.ingest')"):
        assert any(_reaches_ingest(n) for n in _imported_names(ast.parse(source))), source
    assert not any(_reaches_ingest(n) for n in _imported_names(ast.parse(
        "from runstore.storage.schema import arrow_type\nimport pyarrow as pa")))


BLOCK_INGEST = r"""
import sys
from importlib.abc import MetaPathFinder

class NoIngest(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "runstore.ingest" or name.startswith("runstore.ingest."):
            raise ImportError(f"a migration imported {name}")
        return None

sys.meta_path.insert(0, NoIngest())
from runstore.storage import migrate
from runstore.storage.location import location
from runstore.storage.writer import writer

with writer(location(sys.argv[1])) as w:
    done = migrate.apply(w)
assert not [m for m in sys.modules if m.startswith("runstore.ingest")]
print(" ".join(m.name for m in done))
"""


def test_migrations_run_without_the_ingest_package(v1: Path, tmp_path: Path) -> None:
    """Every shipped migration upgrades the version-1 fixture in a process where importing
    `runstore.ingest` fails (an import hook). What they fill from their frozen statements is
    what the live statements answer over the same rows: the fixture unmigrated, whose
    summaries a query computes with sql/statements/summaries.sql (one stored file a table,
    so every row is exact either way)."""
    proc = subprocess.run([sys.executable, "-c", BLOCK_INGEST, str(v1)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == [m.name for m in versions.available()][1:]
    unmigrated = tmp_path / "unmigrated"
    shutil.copytree(FIXTURE, unmigrated)
    before, after = runstore.open(unmigrated), runstore.open(v1)
    assert after.manifest().schema_version == versions.available()[-1].number
    assert "metric_keys" not in before.manifest().tables
    for query in ("select * from metric_keys order by all", "select * from metric_steps order by all",
                  "select * from metric_kl order by all",
                  "select run_id, final_checkpoint, done_frac from runs order by all"):
        want = before.sql(query)
        assert want.height > 0 and after.sql(query).equals(want), query
