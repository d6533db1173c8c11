"""`runstore sql` cannot touch a file outside the store: DuckDB's sandbox, probed as an attacker.

Every query connection is confined by DuckDB itself (external access off, only the snapshot's
files allowed, configuration locked). Probed here, each through the CLI and the Python API:
the file-writing `enable_logging(storage='file')` pointed at a new directory, the store, a
source run and an existing CSV; `enable_profiling`, `disable_logging`, `SET` through a
table function; reads of `/etc/passwd` and of a secret file with `read_csv`, `read_text`,
`read_blob`, `glob`; logging that must not outlive a query of the cached database; `setseed`
that must not reach the next query. Then every table and scalar function of this DuckDB
that takes a text argument is called with paths outside the store (a secret file, a
directory, an existing CSV, a path that does not exist yet) and with a store file, on the
confined connection directly (the guard bypassed: the sandbox alone must hold) and through
`store.sql` (the real path): nothing outside the store is created, changed or read (its
bytes never appear in a result; its atime does not move where the filesystem keeps one),
and the store stays byte-identical. Finally `--allow-read` opens exactly the path it names.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import duckdb
import pytest

import oracle
import runstore
from runstore.errors import QueryError
from sqlprobes import READS_OUTSIDE, STATE_CHANGING, logging_probe
from storekit import cli

SECRET = "runstore-sandbox-secret-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def store_dir(shared_small_store: Path) -> Path:
    return shared_small_store


@pytest.fixture
def outside(tmp_path: Path) -> dict[str, Path]:
    """Files and directories outside the store: a secret, an existing CSV, a directory, a
    path that does not exist yet (nothing may create it)."""
    base = tmp_path / "outside"
    (base / "dir").mkdir(parents=True)
    (base / "secret.txt").write_text(f"{SECRET}\n")
    (base / "existing.csv").write_text(f"a,b\n1,{SECRET}\n")
    (base / "dir" / "inner.csv").write_text(f"x\n{SECRET}\n")
    return {"base": base, "secret": base / "secret.txt", "csv": base / "existing.csv",
            "dir": base / "dir", "new": base / "new" / "x.log"}


def sql_error(store: Path, query: str, *extra: str) -> str:
    """The CLI's error line for a query that must be refused (exit 2, nothing on stdout)."""
    result = cli(store, "sql", query, *extra)
    assert result.exit_code == 2, (query, result.stdout)
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ") and "Traceback" not in result.stderr
    return result.stderr


def api_error(store: Path, query: str) -> str:
    with pytest.raises(QueryError) as e:
        runstore.open(store).sql(query)
    return str(e.value)


# ---------------------------------------------------------------------------------------------
# The probes of issue 12, one by one


def test_enable_logging_writes_nothing_anywhere(store_dir: Path, outside: dict[str, Path],
                                                small_tree: Path) -> None:
    store_before = oracle.tree_digest(store_dir)
    tree_before = oracle.tree_digest(small_tree)
    csv_before = outside["csv"].read_bytes()
    run = next(p for p in small_tree.rglob("metrics.jsonl")).parent
    for target in (outside["new"].parent, store_dir, store_dir / "tables", run, outside["csv"]):
        for message in (sql_error(store_dir, logging_probe(target)),
                        api_error(store_dir, logging_probe(target))):
            assert "enable_logging" in message, message
    # The sandbox itself refuses it, whatever the guard says.
    con = runstore.open(store_dir).connect()
    try:
        with pytest.raises(duckdb.Error, match="configuration has been locked"):
            con.execute(logging_probe(outside["new"].parent)).fetchall()
    finally:
        con.close()
    assert not outside["new"].parent.exists()
    assert outside["csv"].read_bytes() == csv_before
    assert oracle.tree_digest(store_dir) == store_before
    assert oracle.tree_digest(small_tree) == tree_before


@pytest.mark.parametrize("query", STATE_CHANGING)
def test_state_changing_table_functions_are_refused(store_dir: Path, query: str) -> None:
    for message in (sql_error(store_dir, query), api_error(store_dir, query)):
        assert message.startswith(("Error: runstore sql only runs queries (found",
                                   "runstore sql only runs queries (found")), message
    con = runstore.open(store_dir).connect()
    try:  # and DuckDB refuses each on its own: the configuration is locked
        with pytest.raises(duckdb.Error, match="configuration has been locked"):
            con.execute(query).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("query", READS_OUTSIDE)
def test_reads_outside_the_store_are_refused(store_dir: Path, outside: dict[str, Path],
                                             query: str) -> None:
    q = query.format(secret=outside["secret"], csv=outside["csv"], dir=outside["dir"],
                     store=store_dir)
    for message in (sql_error(store_dir, q), api_error(store_dir, q)):
        assert "refused: runstore sql reads only the store's files (DuckDB sandbox); pass " \
               "--allow-read PATH" in message, message
        assert SECRET not in message


@pytest.mark.parametrize("query", ["select * from duckdb_extensions()",
                                   "select * from duckdb_secrets()",
                                   "select * from which_secret('s3://b/k', 's3')"])
def test_catalog_functions_that_read_duckdbs_own_directory_say_so(store_dir: Path,
                                                                  query: str) -> None:
    """They read `~/.duckdb` (extensions, secrets): refused by the sandbox like any outside
    file, but with no advice to --allow-read a path the user never named."""
    for message in (sql_error(store_dir, query), api_error(store_dir, query)):
        assert "refused: it is DuckDB's own directory" in message, message
        assert "--allow-read" not in message


def test_settings_cannot_change_through_any_statement(store_dir: Path) -> None:
    """SET is refused by the guard; and on the connection itself, by DuckDB's lock. (Only
    `python_enable_replacements` stays settable, for `sandbox.cursor` to turn it off.)"""
    con = runstore.open(store_dir).connect()
    try:
        for stmt in ("set enable_external_access = true", "set allowed_directories = ['/']",
                     "set lock_configuration = false", "set threads = 1",
                     "pragma enable_profiling", "set profiling_output = '/tmp/x'",
                     "set temp_directory = '/tmp'", "set allowed_configs = ['threads']"):
            with pytest.raises(duckdb.Error):
                con.execute(stmt)
        [(access, locked)] = con.execute(
            "select current_setting('enable_external_access'), "
            "current_setting('lock_configuration')").fetchall()
        assert (access, locked) == (False, True)
    finally:
        con.close()


def test_logging_does_not_outlive_a_query_of_the_cached_database(store_dir: Path,
                                                                 outside: dict[str, Path]) -> None:
    store = runstore.open(store_dir)
    with pytest.raises(QueryError):
        store.sql(logging_probe(outside["new"].parent))
    for _ in range(2):  # the cached database, twice over
        row = store.sql("select current_setting('enable_logging') as on_, "
                        "(select count(*) from duckdb_logs) as logged, "
                        "current_setting('enable_external_access') as external, "
                        "current_setting('lock_configuration') as locked, "
                        "current_setting('enable_progress_bar') as bar, "
                        "current_setting('parquet_metadata_cache') as footers, "
                        "(select count(*) from runs) as runs").row(0, named=True)
        # ... and what runstore set before the lock holds on every cursor.
        assert row == {"on_": False, "logged": 0, "external": False, "locked": True,
                       "bar": False, "footers": True, "runs": 3}
    assert not outside["new"].parent.exists()


def test_setseed_does_not_reach_the_next_query(store_dir: Path) -> None:
    """Each query runs on a fresh cursor: a seed set by one is gone for the next."""
    ref = duckdb.connect()
    ref.execute("select setseed(0.5)").fetchall()
    [(seeded,)] = ref.execute("select random()").fetchall()
    ref.close()
    store = runstore.open(store_dir)
    assert store.sql("select setseed(0.5) as s").height == 1
    draws = {store.sql("select random() as r").item() for _ in range(3)}
    assert seeded not in draws and len(draws) == 3


def test_sequences_and_variables_cannot_exist(store_dir: Path) -> None:
    store = runstore.open(store_dir)
    for query in ("select nextval('s')", "select currval('s')", "select getvariable('x') as v"):
        try:
            out = store.sql(query)
        except QueryError:
            continue
        assert out.to_dicts() == [{"v": None}]


def test_views_cannot_be_written_even_past_the_guard(store_dir: Path) -> None:
    """Nothing in the catalog is a base table: DML on any name fails in DuckDB itself."""
    con = runstore.open(store_dir).connect()
    try:
        names = [n for (n,) in con.execute("select table_name from duckdb_tables()").fetchall()]
        assert names == []  # views only
        for name in ("runs", "settings", "trace_slices", "metrics"):
            with pytest.raises(duckdb.Error):
                con.execute(f"with d as (delete from {name} returning *) select count(*) from d")
            with pytest.raises(duckdb.Error):
                con.execute(f"insert into {name} select * from {name}")
    finally:
        con.close()


def test_python_objects_in_the_caller_are_not_reachable(store_dir: Path) -> None:
    import pyarrow as pa

    secret_frame = pa.table({"s": [SECRET]})  # noqa: F841 - what a replacement scan would find
    store = runstore.open(store_dir)
    with pytest.raises(QueryError) as e:
        store.sql("select * from secret_frame")
    assert SECRET not in str(e.value)


# ---------------------------------------------------------------------------------------------
# Every function of this DuckDB, called with paths


def _literal(typ: str, path: str) -> str | None:
    """An argument of type `typ`: the path for text, a plain value otherwise."""
    quoted = "'" + path.replace("'", "''") + "'"
    if typ in ("VARCHAR", "ANY", "VARIANT", "JSON"):
        return quoted
    if typ in ("VARCHAR[]", "ANY[]"):
        return f"[{quoted}]"
    simple = {"BOOLEAN": "true", "TINYINT": "1", "SMALLINT": "1", "INTEGER": "1", "BIGINT": "1",
              "UTINYINT": "1", "USMALLINT": "1", "UINTEGER": "1", "UBIGINT": "1",
              "HUGEINT": "1", "DOUBLE": "1.0", "FLOAT": "1.0", "DATE": "DATE '2024-01-01'",
              "TIMESTAMP": "TIMESTAMP '2024-01-01'", "MAP(VARCHAR, VARCHAR)":
              f"MAP {{{quoted}: {quoted}}}"}
    if typ in simple:
        return simple[typ]
    return f"NULL::{typ}" if typ and typ.isidentifier() else None


def _calls(path: str) -> list[str]:
    """Statements calling every table and scalar function with a text argument, `path`
    given for each text argument in turn (table functions: the first positionally, every
    other by name)."""
    con = duckdb.connect()
    rows = con.execute(
        "select function_name, function_type, parameters, parameter_types, varargs "
        "from duckdb_functions() where function_type in ('scalar', 'table', 'macro', "
        "'table_macro') and (list_has_any(parameter_types, ['VARCHAR', 'ANY', 'VARCHAR[]', "
        "'ANY[]', 'VARIANT']) or varargs in ('VARCHAR', 'ANY'))").fetchall()
    con.close()
    out: list[str] = []
    for name, kind, params, types, varargs in rows:
        ident = '"' + name.replace('"', '""') + '"'
        types = [t or "ANY" for t in types or []]
        if kind in ("table", "table_macro"):
            first = _literal(types[0], path) if types else None
            head = [first] if first else []
            out.append(f"select * from {ident}({', '.join(head)})")
            for pname, ptype in list(zip(params, types))[1:]:
                lit = _literal(ptype, path)
                if lit and ptype in ("VARCHAR", "ANY", "VARCHAR[]", "ANY[]", "VARIANT"):
                    out.append(f"select * from {ident}({', '.join(head + [f'{pname} := {lit}'])})")
        else:
            args = [_literal(t, path) for t in types]
            if any(a is None for a in args):
                continue
            if varargs in ("VARCHAR", "ANY"):
                args.append(_literal("VARCHAR", path) or "NULL")
            out.append(f"select {ident}({', '.join(a for a in args if a is not None)})")
    return sorted(set(out))


def _atimes(paths: list[Path]) -> dict[Path, int]:
    return {p: p.stat().st_atime_ns for p in paths}


def _age_atimes(paths: list[Path]) -> None:
    """atime a minute before mtime: with relatime, the next read of the file moves it."""
    for p in paths:
        st = p.stat()
        os.utime(p, ns=(st.st_mtime_ns - 60_000_000_000, st.st_mtime_ns))


def _fs_tracks_reads(where: Path) -> bool:
    probe = where / "atime-probe.txt"
    probe.write_text("x")
    _age_atimes([probe])
    before = probe.stat().st_atime_ns
    probe.read_bytes()
    moved = probe.stat().st_atime_ns != before
    probe.unlink()
    return moved


@pytest.mark.slow
def test_every_function_with_paths_touches_nothing_outside(
        store_dir: Path, outside: dict[str, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))  # where DuckDB keeps extensions and secrets
    monkeypatch.chdir(cwd)  # where relative paths and DuckDB's default `.tmp` would land
    store_file = next((store_dir / "tables" / "runs").glob("*.parquet"))
    targets = [str(outside["secret"]), str(outside["dir"]), str(outside["dir"]) + "/",
               str(outside["csv"]), str(outside["new"]), str(outside["new"].parent),
               str(store_file), "secret.txt"]
    secret_files = [outside["secret"], outside["csv"], outside["dir"] / "inner.csv"]
    tracks = _fs_tracks_reads(tmp_path)
    before = oracle.fingerprint(outside["base"])
    store_before = oracle.tree_digest(store_dir)
    _age_atimes(secret_files)
    atimes = _atimes(secret_files)

    store = runstore.open(store_dir)
    con = store.connect()
    counts = {"direct ran": 0, "direct failed": 0, "api ran": 0, "api refused": 0}
    try:
        calls = [c for t in targets for c in _calls(t)]
        assert len(calls) > 2000, len(calls)  # every function, not a handful
        for call in calls:
            try:  # the sandbox alone: no guard in front
                result = con.execute(call).fetchall()
                counts["direct ran"] += 1
                assert SECRET not in repr(result), call
            except duckdb.Error as e:
                counts["direct failed"] += 1
                assert SECRET not in str(e), call
            try:  # the real path: guard, cached database, cursor
                frame = store.fetch(call, convert=lambda rel: rel.fetchall())
                counts["api ran"] += 1
                assert SECRET not in repr(frame), call
            except QueryError as e:
                counts["api refused"] += 1
                assert SECRET not in str(e), call
    finally:
        con.close()
    if tracks:
        assert _atimes(secret_files) == atimes, "a file outside the store was read"
    assert oracle.fingerprint(outside["base"]) == before
    assert not outside["new"].parent.exists()
    assert list(cwd.iterdir()) == [] and list(home.iterdir()) == []
    assert oracle.tree_digest(store_dir) == store_before
    assert counts["direct ran"] > 500 and counts["api ran"] > 500, counts
    from conftest import REPORT

    REPORT["sandbox: function calls with outside paths"] = \
        f"{len(calls)} ({', '.join(f'{k} {v}' for k, v in counts.items())})"


def test_every_table_function_is_either_read_only_or_refused(store_dir: Path) -> None:
    """Holds READ_TABLE_FUNCTIONS to this DuckDB: every table function it has is either on
    the list (and passes the guard) or refused by name (and never runs)."""
    from runstore.query import guard as sqlcheck

    con = duckdb.connect()
    names = sorted({n for (n,) in con.execute(
        "select function_name from duckdb_functions() "
        "where function_type in ('table', 'table_macro')").fetchall()})
    con.close()
    store = runstore.open(store_dir)
    assert set(sqlcheck.READ_TABLE_FUNCTIONS) <= set(names), \
        set(sqlcheck.READ_TABLE_FUNCTIONS) - set(names)
    refused = []
    for name in names:
        try:
            store.fetch(f'select * from "{name}"() limit 0', convert=lambda rel: None)
        except QueryError as e:
            if str(e).startswith("runstore sql only runs queries (found"):
                assert name not in sqlcheck.READ_TABLE_FUNCTIONS, name
                assert f"{name}()" in str(e)
                refused.append(name)
                continue
        assert name in sqlcheck.READ_TABLE_FUNCTIONS, f"{name} ran but is not on the list"
    for must in ("query", "query_table", "checkpoint", "enable_logging", "enable_profiling",
                 "truncate_duckdb_logs", "register_external_resource_type", "arrow_scan",
                 "json_execute_serialized_sql", "read_duckdb"):
        assert must in refused, must


# ---------------------------------------------------------------------------------------------
# --allow-read: on purpose, and only what it names


def test_allow_read_opens_exactly_the_path_given(store_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "teams").mkdir(parents=True)
    (tmp_path / "data2").mkdir()
    labels = data / "labels.csv"
    labels.write_text("run_name,label\na/rl_dirs,baseline\nb/c/sl,sft\n")
    other = data / "other.csv"
    other.write_text(f"a\n{SECRET}\n")
    (data / "teams" / "t.csv").write_text("run_name,team\nb/c/sl,x\n")
    (tmp_path / "data2" / "t.csv").write_text(f"a\n{SECRET}\n")
    join = (f"select r.run_name, l.label from runs r join read_csv('{labels}') l "
            "using (run_name) order by 1")
    want = [{"run_name": "a/rl_dirs", "label": "baseline"},
            {"run_name": "b/c/sl", "label": "sft"}]

    # Not by default.
    assert "--allow-read PATH" in sql_error(store_dir, join)
    # The file given: the CLI and Python.
    result = cli(store_dir, "sql", join, "--allow-read", str(labels), "-F", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == want
    store = runstore.open(store_dir)
    assert store.sql(join, allow_read=[labels]).to_dicts() == want
    assert store.sql(join, allow_read=str(labels)).to_dicts() == want  # one path, bare
    # ... and nothing beside it, nor the next query without it (the cached database).
    for q in (f"select * from read_csv('{other}')", f"select * from glob('{data}/*')",
              f"select * from read_csv('{labels}/../other.csv')"):
        assert "--allow-read PATH" in sql_error(store_dir, q, "--allow-read", str(labels))
        with pytest.raises(QueryError, match="refused"):
            store.sql(q, allow_read=[labels])
    with pytest.raises(QueryError, match="refused"):
        store.sql(join)
    # A directory: what is under it, not a sibling sharing its prefix, not its parent.
    teams = f"select team from read_csv('{data}/teams/*.csv')"
    result = cli(store_dir, "sql", teams, "--allow-read", str(data / "teams"), "-F", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [{"team": "x"}]
    for q in (f"select * from read_csv('{tmp_path}/data2/t.csv')",
              f"select * from read_csv('{data}/teams/../other.csv')"):
        assert "--allow-read PATH" in sql_error(store_dir, q, "--allow-read", str(data / "teams"))
    # A relative path is relative to the working directory, as DuckDB reads it.
    old = os.getcwd()
    os.chdir(data)
    try:
        result = cli(store_dir, "sql", "select count(*) as n from read_csv('labels.csv')",
                     "--allow-read", "labels.csv", "-F", "json")
    finally:
        os.chdir(old)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [{"n": 2}]
    # Writing stays refused even into an allowed directory.
    assert "only runs queries (found COPY)" in sql_error(
        store_dir, f"copy (select 1) to '{data}/teams/w.csv'", "--allow-read", str(data / "teams"))
    assert not (data / "teams" / "w.csv").exists()
    # A path that does not exist is a usage error.
    result = cli(store_dir, "sql", "select 1", "--allow-read", str(tmp_path / "nope.csv"))
    assert result.exit_code == 2 and "does not exist" in result.stderr


def test_probes_through_a_real_process(store_dir: Path, outside: dict[str, Path]) -> None:
    """The installed entry point, not CliRunner: the same refusals, no traceback."""
    import subprocess
    import sys

    for query in (logging_probe(outside["new"].parent), f"select * from read_text('{outside['secret']}')",
                  "select * from glob('/*')"):
        proc = subprocess.run([sys.executable, "-m", "runstore", "--store", str(store_dir), "sql",
                               query], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stdout
        assert proc.stderr.startswith("Error: ") and "Traceback" not in proc.stderr
        assert SECRET not in proc.stdout + proc.stderr
    assert not outside["new"].parent.exists()
    # A pause long enough for a buffered log writer to flush, had one been started.
    time.sleep(0.2)
    assert not outside["new"].parent.exists()
