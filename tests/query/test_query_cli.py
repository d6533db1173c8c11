"""`runstore sql`, `runs`, `views` and `schema` through click's CliRunner.

Covers the read-only guard (every refused statement exits 1 with "Error: runstore sql only
runs queries (found X)" and leaves the store byte-identical), syntax errors with sqlglot's
position, bound parameters, output formats, the missing-store message, and that
`runstore --help` does not import polars.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

import oracle
import runstore
from runstore.query.views import views
from runstore.cli import main
from runstore.errors import UsageError
from storekit import cli as run


@pytest.fixture(scope="module")
def store_dir(shared_awkward_store: Path) -> Path:
    return shared_awkward_store



# ---------------------------------------------------------------------------------------------
# The read-only guard

REFUSED = [
    ("insert into runs (run_id) values ('x')", "INSERT"),
    ("update runs set kind = 'x'", "UPDATE"),
    ("delete from runs", "DELETE"),
    ("create table x as select 1", "CREATE"),
    ("create view v as select 1", "CREATE"),
    ("drop table runs", "DROP"),
    ("drop view kl_health", "DROP"),
    ("alter table runs add column x int", "ALTER"),
    ("copy runs to '{tmp}/out.csv'", "COPY"),
    ("copy (select 1) to '{tmp}/out.parquet' (format parquet)", "COPY"),
    ("attach '{tmp}/x.duckdb' as x", "ATTACH"),
    ("detach x", "DETACH"),
    ("install httpfs", "INSTALL"),
    ("load httpfs", "LOAD"),
    ("set threads = 1", "SET"),
    ("pragma database_size", "PRAGMA"),
    ("export database '{tmp}/export'", "EXPORT"),
    ("call pragma_version()", "CALL"),
    ("with gone as (delete from runs returning *) select * from gone", "DELETE"),
    ("select 1; drop table runs", "2 statements: SELECT, DROP"),
    ("select 1; select 2", "2 statements: SELECT, SELECT"),
    ("select * from query('drop table runs')", "query()"),
]


@pytest.mark.parametrize("statement,found", REFUSED, ids=[f for _, f in REFUSED])
def test_refused_statements_leave_the_store_unchanged(store_dir: Path, tmp_path: Path,
                                                      statement: str, found: str) -> None:
    before = oracle.tree_digest(store_dir)
    result = run(store_dir, "sql", statement.format(tmp=tmp_path))
    assert result.exit_code == 2
    assert result.stderr == f"Error: runstore sql only runs queries (found {found})\n"
    assert result.stdout == ""
    assert oracle.tree_digest(store_dir) == before
    assert list(tmp_path.iterdir()) == []  # nothing written elsewhere either


def test_queries_are_allowed(store_dir: Path) -> None:
    for q in ("select 1 as x", "with t as (select 2 as x) select * from t", "from runs limit 1",
              "describe runs", "summarize settings", "show tables",
              "select 1 union all select 2", "(select 1)"):
        result = run(store_dir, "sql", q, "-F", "csv")
        assert result.exit_code == 0, (q, result.stderr)


def test_syntax_error_shows_line_column_and_text(store_dir: Path) -> None:
    result = run(store_dir, "sql", "select run_name,\n  kind from runs where")
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: syntax error at line 2, column 22 near 'where': incomplete WHERE clause\n"
        "    kind from runs where\n"
        "                   ^^^^^\n")
    result = run(store_dir, "sql", "select (1 from runs")
    assert result.stderr.startswith("Error: syntax error at line 1, column 14 near 'from': "
                                    "expected )\n")
    result = run(store_dir, "sql", "selec * from runs")
    assert result.stderr.startswith("Error: syntax error at line 1, column 5 near 'selec'")
    result = run(store_dir, "sql", "select * from runs where run_name = 'oops")
    assert result.stderr.startswith("Error: syntax error at line 1, column 37: unterminated")
    assert "sqlglot" not in result.stderr and "<class" not in result.stderr


def test_query_errors_from_duckdb(store_dir: Path) -> None:
    result = run(store_dir, "sql", "select no_such_column from runs")
    assert result.exit_code == 2 and result.stderr.startswith("Error: Binder Error")


def test_missing_store_says_how_to_make_one(tmp_path: Path) -> None:
    for args in (["sql", "select 1"], ["runs"]):
        result = run(tmp_path / "nowhere", *args)
        assert result.exit_code == 3
        assert "runstore ingest PATH" in result.stderr and result.stderr.startswith("Error: ")
    assert not (tmp_path / "nowhere").exists()


# ---------------------------------------------------------------------------------------------
# Parameters


def test_params_are_bound_not_interpolated(store_dir: Path) -> None:
    value = "it's \"quoted\"; drop table runs --"
    result = run(store_dir, "sql", "select $v as v", "--param", f"v={value}", "-F", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [{"v": value}]
    result = run(store_dir, "sql", "select count(*) as n from runs where run_name = $n",
                 "-p", "n=o'brien", "-F", "csv")
    assert result.stdout == "n\n0\n"
    result = run(store_dir, "sql", "select $x + 1 as y", "-p", "x=41", "-F", "csv")
    assert result.stdout == "y\n42\n"
    # A number as written is a number; any other text stays text, as typed (a zero-padded id
    # was the integer 7, `1_000` was 1000, `nan` a float).
    for value, want in [("41", 41), ("-0.5", -0.5), ("1e-3", 0.001), (".5", 0.5),
                        ("007", "007"), ("1_000", "1_000"), (" 5", " 5"), ("nan", "nan"),
                        ("0x10", "0x10"), ("1e", "1e")]:
        result = run(store_dir, "sql", "select $v as v, typeof($v) as t", "-p", f"v={value}",
                     "-F", "jsonl")
        assert result.exit_code == 0, result.stderr
        row = json.loads(result.stdout)
        assert row["v"] == want and type(row["v"]) is type(want), (value, row)
        assert row["t"] == {int: "INTEGER", float: "DOUBLE", str: "VARCHAR"}[type(want)], row


def test_param_errors(store_dir: Path) -> None:
    result = run(store_dir, "sql", "select $v")
    assert result.exit_code == 2 and "--param v=VALUE" in result.stderr
    result = run(store_dir, "sql", "select 1", "--param", "kl_treshold=0.02")
    assert result.exit_code == 2 and "neither used by the query" in result.stderr
    result = run(store_dir, "sql", "select 1", "--param", "novalue")
    assert result.exit_code == 2
    result = run(store_dir, "sql", "select 1", "--param", "kl_threshold=high")
    assert result.exit_code == 2 and "must be a number" in result.stderr


def test_kl_threshold_param_changes_the_answer(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "mild"
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text("".join(
        f'{{"step": {s}, "optim/kl_sample_train_v1": {v}}}\n'
        for s, v in enumerate([0.001, 0.015, 0.018, 0.025, 0.001])))
    store = tmp_path / "store"
    runstore.open(store).ingest([tmp_path / "runs"])
    q = "select run_name, steps_over, flagged from kl_health"
    default = run(store, "sql", q, "-F", "csv")
    stricter = run(store, "sql", q, "--param", "kl_threshold=0.02", "-F", "csv")
    assert default.stdout == "run_name,steps_over,flagged\nmild,3,True\n"
    assert stricter.stdout == "run_name,steps_over,flagged\nmild,1,True\n"
    assert oracle.kl_health(tmp_path / "runs", 0.02)["mild"]["steps_over"] == 1
    higher = run(store, "sql", q, "--param", "kl_threshold=0.03", "-F", "csv")
    assert higher.stdout == "run_name,steps_over,flagged\nmild,0,False\n"


def test_kl_threshold_param_on_awkward_tree(store_dir: Path, _awkward_template: Path) -> None:
    result = run(store_dir, "sql", "select run_name from kl_health where flagged order by 1",
                 "--param", "kl_threshold=0.02", "-F", "csv")
    want = sorted(n for n, r in oracle.kl_health(_awkward_template, 0.02).items()
                  if r["flagged"])
    assert result.stdout.splitlines() == ["run_name", *want]


# ---------------------------------------------------------------------------------------------
# Output formats and query sources

Q = "select 'a,b' as s, 1.5 as x, cast('NaN' as double) as nan, null as n union all " \
    "select 'line\nbreak', 2, 'inf'::double, 1 order by x"


def test_formats(store_dir: Path, tmp_path: Path) -> None:
    out = run(store_dir, "sql", Q, "-F", "csv").stdout
    assert list(csv.reader(io.StringIO(out))) == [
        ["s", "x", "nan", "n"], ["a,b", "1.5", "NaN", ""], ["line\nbreak", "2.0", "Infinity", "1"]]
    out = run(store_dir, "sql", Q, "-F", "json").stdout
    assert out.startswith("[") and '"nan": NaN' in out and '"nan": Infinity' in out
    lines = run(store_dir, "sql", Q, "-F", "jsonl").stdout.splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["s"] == "a,b"
    md = run(store_dir, "sql", Q, "-F", "markdown").stdout.splitlines()
    assert md[:2] == ["| s | x | nan | n |", "|---|---|---|---|"] and "line⏎break" in md[3]
    table = run(store_dir, "sql", Q, "-F", "table").stdout.splitlines()
    assert table[0].split() == ["s", "x", "nan", "n"] and table[-1] == "(2 rows)"
    target = tmp_path / "out.parquet"
    result = run(store_dir, "sql", Q, "-F", "parquet", "-o", str(target))
    assert result.exit_code == 0 and pq.read_table(target).num_rows == 2
    assert run(store_dir, "sql", Q, "-F", "parquet").exit_code == 2  # needs -o
    target = tmp_path / "out.csv"
    assert run(store_dir, "sql", Q, "-F", "csv", "-o", str(target)).stdout == ""
    assert target.read_text().startswith("s,x,nan,n\n")


def test_table_format_fits_the_width(store_dir: Path) -> None:
    from runstore.present import render as output

    store = runstore.open(store_dir)
    table = store.arrow("select run_name, kind, status, n_steps from run_summary "
                        "order by run_name")
    names = table.column("run_name").to_pylist()
    width = sum(max([len(c)] + [len(str(v)) for v in table.column(c).to_pylist()])
                for c in table.column_names) + 2 * 3  # every value whole, and the gaps
    lines = output.render(table, "table", width=width).splitlines()
    assert max(len(line) for line in lines[:-1]) <= width
    assert lines[-1] == f"({table.num_rows} rows)"
    assert lines[0].split() == ["run_name", "kind", "status", "n_steps"]
    assert [line.split()[0] for line in lines[2:-1]] == names  # whole, one per line
    # Too narrow for the numbers: floats lose digits, never get cut, other text gives way.
    wide = store.arrow("select 0.123456789::double as a, 0.987654321::double as b, "
                       "repeat('y', 200) as t")
    [header, _, row, _] = output.render(wide, "table", width=30).splitlines()
    assert row.split()[:2] == ["0.123457", "0.987654"] and "…" in row and len(row) <= 30
    [header, _, row, _] = output.render(wide, "table", width=22).splitlines()
    assert row.split()[:2] == ["0.123", "0.988"] and "…" in row and len(row) <= 22
    # Narrower still: one block for the row, numbers with all 6 digits.
    lines = output.render(wide, "table", width=20).splitlines()
    assert lines[0].startswith("-[ row 1 ]") and lines[1:3] == ["a  0.123457", "b  0.987654"]
    assert lines[3].startswith("t  y") and "…" in lines[3] and len(lines[3]) <= 20
    assert output.render(wide, "csv").splitlines()[1].startswith("0.123456789,0.987654321,")


# Run names longer than any cell limit, two pairs telling apart only at their ends.
LONG_NAMES = ["math_rl_sweep/llama-3.1-8b-instruct-with-a-much-longer-name/lr_1e-5",
              "math_rl_sweep/llama-3.1-8b-instruct-with-a-much-longer-name/lr_4e-5",
              "kl_health_check_of_an_extraordinarily_long_experiment_name/seed_0",
              "kl_health_check_of_an_extraordinarily_long_experiment_name/seed_1"]


@pytest.fixture(scope="module")
def long_names(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from runstore import demo
    from runstore.demo import RunSpec

    base = tmp_path_factory.mktemp("long_names")
    specs = [RunSpec(n, layout="flat", steps=12, eval_every=0, save_every=5, logtree=False,
                     kl_spike_at=6 if i % 2 else None, model_name="meta-llama/Llama-3.1-8B-Instruct")
             for i, n in enumerate(LONG_NAMES)]
    demo.generate_tree(base / "runs", specs, seed=4)
    runstore.open(base / "store").ingest([base / "runs"])
    return base / "runs", base / "store"


def at_width(width: int, store: Path, *args: str) -> Result:
    return run(store, *args, env={"COLUMNS": str(width)})


def summary_columns_from_sql() -> list[str]:
    text = (Path(__file__).resolve().parents[2] / "sql" / "run_summary.sql").read_text()
    return [line.split()[2].rstrip(":") for line in text.splitlines()
            if line.startswith("-- @column ")]


@pytest.mark.parametrize("width", [40, 80, 120])
def test_run_names_are_never_cut(long_names: tuple[Path, Path], width: int) -> None:
    runs_dir, store = long_names
    names = sorted(oracle.run_name(runs_dir, r) for r in oracle.run_dirs(runs_dir))
    assert sorted(LONG_NAMES) == names
    for args in (["runs", "-F", "table"], ["check", "-F", "table"],
                 ["sql", "select run_name, kind, model_name from runs order by run_name",
                  "-F", "table"]):
        out = at_width(width, store, *args).stdout
        shown = [w for line in out.splitlines() for w in line.split() if "/" in w and
                 w.split("/")[0] in {n.split("/")[0] for n in names}]
        fired = names[1::2] if args[0] == "check" else names
        assert sorted(set(shown)) == sorted(fired), (args, out)
        blocks = out.splitlines()[0].startswith("-[ row 1 ]")
        if blocks:  # too wide as a table: one `column  value` block per row, all of it
            assert out.count("-[ row ") == len(fired)
            assert f"columns, {width} fit; --wide prints the table anyway)" in out
        # Only lines holding an identifying value (a run name, the rule) may be wider.
        assert all(len(line) <= width for line in out.splitlines()
                   if not line.startswith("(") and not any(n in line for n in names)
                   and "kl_sample_train_v1|v2 > 0.01" not in line), out


def test_runs_leaves_run_id_out_unless_asked(long_names: tuple[Path, Path]) -> None:
    _, store = long_names
    every = summary_columns_from_sql()
    assert every[0] == "run_id"
    header = run(store, "runs", "-F", "csv").stdout.splitlines()[0].split(",")
    assert header == [c for c in every if c not in ("run_id", "run_name")]  # run_label shows
    assert run(store, "runs", "--columns", "all", "-F", "csv").stdout.splitlines()[0] == \
        ",".join(every)
    out = run(store, "runs", "-c", "run_id, run_name", "-F", "csv").stdout.splitlines()
    assert out[0] == "run_id,run_name" and len(out[1].split(",")[0]) == 16
    bad = run(store, "runs", "--columns", "run_name,stauts")
    assert bad.exit_code == 2
    assert bad.stderr.startswith("Error: run_summary has no column 'stauts'; did you mean "
                                 "status? its columns: run_id, run_name,")
    # A table that fits keeps one line per run, whole names, at 120 columns.
    out = at_width(120, store, "runs", "-c", "run_name,status,last_step", "-F", "table").stdout
    lines = out.splitlines()
    assert lines[0].split() == ["run_name", "status", "last_step"]
    assert [line.split()[0] for line in lines[2:-1]] == sorted(LONG_NAMES)
    assert max(map(len, lines)) <= 120


def test_help_names_the_columns_never_cut() -> None:
    from runstore.present.render import IDENTIFYING

    text = " ".join(run(None, "--help").stdout.split())
    listed = text.split("identifying columns (", 1)[1].split(")", 1)[0]
    assert sorted(c.strip() for c in listed.split(",")) == sorted(IDENTIFYING)


def test_wide_cuts_nothing(long_names: tuple[Path, Path]) -> None:
    _, store = long_names
    query = ("select run_name, model_name, repeat('x', 90) as filler, run_path from runs "
             "order by run_name")
    out = at_width(40, store, "sql", query, "-F", "table", "--wide").stdout
    lines = out.splitlines()
    assert len(lines) == 2 + len(LONG_NAMES) + 1 and "…" not in out
    rows = runstore.open(store).sql(query).rows()
    for line, (name, model, filler, path) in zip(lines[2:], rows):
        assert line.split() == [name, model, filler, path]
    for command in (["runs"], ["check"], ["views"], ["schema"]):
        assert "--wide" in run(None, *command, "--help").stdout, command


def test_other_text_is_cut_in_the_middle(long_names: tuple[Path, Path]) -> None:
    from runstore.present.render import shorten

    _, store = long_names
    out = at_width(80, store, "sql", "select 'math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5' as "
                   "path, 'meta-llama/Llama-3.1-8B-Instruct' as model, "
                   "repeat('z', 30) as filler", "-F", "table").stdout
    row = out.splitlines()[2].split()
    assert row[0] == "math_rl_sweep/…/lr_4e-5"  # both ends of a path, cut at `/`
    assert row[1].startswith("meta") and row[1].endswith("Instruct") and "…" in row[1]
    assert max(len(line) for line in out.splitlines()) <= 80
    for text in ["a/b/c/d/e/f/g/h", "x" * 50, "a" * 20 + "/" + "b" * 20 + "/" + "c" * 3]:
        for limit in range(1, len(text) + 2):
            cut = shorten(text, limit)
            assert len(cut) <= limit
            if len(text) <= limit:
                assert cut == text
            elif limit >= 2:  # the two ends of the text, joined by one …
                head, _, tail = cut.partition("…")
                assert text.startswith(head) and text.endswith(tail) and cut.count("…") == 1


@pytest.mark.parametrize("name,fmt", [("k.json", "json"), ("k.jsonl", "jsonl"),
                                      ("k.csv", "csv"), ("k.md", "markdown"),
                                      ("K.JSON", "json"), ("k.parquet", "parquet")])
def test_output_format_follows_the_extension(store_dir: Path, tmp_path: Path, name: str,
                                             fmt: str) -> None:
    target = tmp_path / name
    query = "select 'a' as s, 2 as n union all select 'b', 3 order by s"
    result = run(store_dir, "sql", query, "-o", str(target))
    assert result.exit_code == 0 and result.stdout == ""
    if fmt == "parquet":
        assert pq.read_table(target).to_pylist() == [{"s": "a", "n": 2}, {"s": "b", "n": 3}]
        return
    text = target.read_text()
    expected = {"json": '[\n {\n  "s": "a",\n  "n": 2\n },\n {\n  "s": "b",\n  "n": 3\n }\n]\n',
                "jsonl": '{"s": "a", "n": 2}\n{"s": "b", "n": 3}\n',
                "csv": "s,n\na,2\nb,3\n",
                "markdown": "| s | n |\n|---|---|\n| a | 2 |\n| b | 3 |\n"}[fmt]
    assert text == expected
    # --format still wins over the extension.
    assert run(store_dir, "sql", query, "-o", str(target), "-F", "csv").exit_code == 0
    assert target.read_text() == "s,n\na,2\nb,3\n"


def test_views_output_format_follows_the_extension(tmp_path: Path) -> None:
    target = tmp_path / "views.json"
    assert run(None, "views", "-o", str(target)).exit_code == 0
    rows = json.loads(target.read_text())
    assert {(r["view"], r["column"]) for r in rows} == {
        (v.name, c) for v in views() for c, _ in v.columns}
    text = tmp_path / "views.txt"
    assert run(None, "views", "-o", str(text)).exit_code == 0
    assert text.read_text() == run(None, "views").stdout


def test_query_from_file_and_stdin(store_dir: Path, tmp_path: Path) -> None:
    f = tmp_path / "q.sql"
    f.write_text("-- how many runs\nselect count(*) as n from runs\n")
    assert run(store_dir, "sql", "-f", str(f), "-F", "csv").stdout == "n\n22\n"
    assert run(store_dir, "sql", "-F", "csv", input="select 2 as n").stdout == "n\n2\n"
    assert run(store_dir, "sql", "-", "-F", "csv", input="select 3 as n").stdout == "n\n3\n"
    assert run(store_dir, "sql", "-f", "-", "-F", "csv", input="select 4 as n").stdout == "n\n4\n"
    assert run(store_dir, "sql", "select 1", "-f", str(f)).exit_code == 2


# ---------------------------------------------------------------------------------------------
# runs, views, schema


def test_runs_command(store_dir: Path, _awkward_template: Path) -> None:
    result = run(store_dir, "runs", "-F", "csv")
    names = [r["run_label"] for r in csv.DictReader(io.StringIO(result.stdout))]
    assert names == sorted(oracle.run_name(_awkward_template, r)
                           for r in oracle.run_dirs(_awkward_template))
    result = run(store_dir, "runs", "--kind", "rl", "--name", "awkward/kl/*",
                 "--where", "kl_flagged and max_kl > 0.04", "-F", "csv")
    got = [r["run_label"] for r in csv.DictReader(io.StringIO(result.stdout))]
    want = sorted(n for n, r in oracle.run_summary(_awkward_template).items()
                  if n.startswith("awkward/kl/") and r["kind"] == "rl" and r["kl_flagged"]
                  and r["max_kl"] > 0.04)
    assert got == want and got
    # A scope that matches no run is an error naming it, bound (never pasted into SQL).
    none = run(store_dir, "runs", "--name", "it's*", "-F", "csv")
    assert none.exit_code == 2 and none.stdout == ""  # a usage mistake: errors.EXIT_CODES
    assert none.stderr.startswith("Error: no run matches --name \"it's*\"")


@pytest.mark.parametrize("where,found", [
    ("1; drop table runs", "syntax error"),
    ("run_id in (select run_id from runs)", "found a subquery"),
    ("exists (select 1)", "found a subquery"),
    ("kind = $k", "found parameter $k"),
    ("query('drop table runs') is null", "found query()"),
])
def test_runs_where_is_only_an_expression(store_dir: Path, where: str, found: str) -> None:
    before = oracle.tree_digest(store_dir)
    result = run(store_dir, "runs", "--where", where)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: --where takes one SQL condition") and found in result.stderr
    assert oracle.tree_digest(store_dir) == before


def test_views_command() -> None:
    result = run(None, "views")
    assert result.exit_code == 0
    for v in views():
        assert f"\n{v.name}\n" in "\n" + result.stdout
        for col, _ in v.columns:
            assert f"    {col} " in result.stdout or result.stdout.count(f"    {col}\n")
    rows = list(csv.DictReader(io.StringIO(run(None, "views", "-F", "csv").stdout)))
    assert {(r["view"], r["column"]) for r in rows} == {
        (v.name, c) for v in views() for c, _ in v.columns}


@pytest.mark.parametrize("dialect", ["spark", "trino"])
def test_views_dialect(dialect: str) -> None:
    import sqlglot

    result = run(None, "views", "--dialect", dialect)
    assert result.exit_code == 0
    parsed = [s for s in sqlglot.parse(result.stdout, read=dialect) if s is not None]
    assert len(parsed) == len(views()) + 1
    head = "CREATE OR REPLACE TEMP VIEW" if dialect == "spark" else "CREATE OR REPLACE VIEW"
    assert f"{head} kl_health AS" in result.stdout
    # Dependency order: each view is created after the views it reads.
    positions = {v.name: result.stdout.index(f"{head} {v.name} AS") for v in views()}
    for v in views():
        for dep in v.depends:
            if dep in positions:
                assert positions[dep] < positions[v.name]


def test_schema_command() -> None:
    from runstore.storage import schema

    rows = list(csv.DictReader(io.StringIO(run(None, "schema", "-F", "csv").stdout)))
    assert [(r["table"], r["column"]) for r in rows] == [
        (t, c) for t, cols in schema.TABLES.items() for c, _, _ in cols]
    rows = list(csv.DictReader(io.StringIO(run(None, "schema", "metrics_raw", "-F", "csv").stdout)))
    types = {r["column"]: r["type"] for r in rows}
    assert types["value"] == "DOUBLE" and types["step"] == "BIGINT" and types["key"] == "VARCHAR"
    assert all(r["comment"] for r in rows)
    result = run(None, "schema", "kl_health")
    assert result.exit_code == 2 and "runstore views" in result.stderr
    assert run(None, "schema", "nope").exit_code == 2
    # A name in any case, as SQL reads it (`select * from METRICS_RAW`): it said "no table".
    assert run(None, "schema", "Metrics_RAW", "-F", "csv").stdout == \
        run(None, "schema", "metrics_raw", "-F", "csv").stdout
    result = run(None, "schema", "KL_Health")
    assert result.exit_code == 2 and "is a view, see `runstore views`" in result.stderr


def test_schema_types_match_duckdb(store_dir: Path) -> None:
    """`runstore schema` types are the ones the tables have in queries."""
    from runstore.query import catalog

    con = runstore.open(store_dir).connect()
    try:
        for r in catalog.schema_table().to_pylist():
            [(typ,)] = con.execute(
                "select data_type from information_schema.columns "
                "where table_name = ? and column_name = ?", [r["table"], r["column"]]).fetchall()
            assert typ == r["type"], r
    finally:
        con.close()


# ---------------------------------------------------------------------------------------------
# Help


def test_every_command_has_an_example() -> None:
    for name, command in main.commands.items():
        result = run(None, name, "--help")
        assert result.exit_code == 0 and "Example:" in result.stdout, name


def test_help_does_not_import_polars() -> None:
    code = ("import sys\n"
            "from click.testing import CliRunner\n"
            "from runstore.cli import main\n"
            "for args in (['--help'], ['sql', '--help'], ['runs', '--help'], ['views', '--help']):\n"
            "    assert CliRunner().invoke(main, args).exit_code == 0\n"
            "heavy = [m for m in ('polars', 'duckdb', 'deltalake', 'plotly') if m in sys.modules]\n"
            "print(','.join(heavy) or 'none')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONWARNINGS": "error"}, check=True)
    assert out.stdout.strip() == "none"


@pytest.mark.parametrize("dialect", ["spark", "trino"])
def test_views_dialect_prints_every_view_for_that_engine(store_dir: Path, dialect: str) -> None:
    import sqlglot

    result = run(store_dir, "views", "--dialect", dialect)
    assert result.exit_code == 0, result.output
    created = {s.this.name for s in sqlglot.parse(result.output, read=dialect)
               if s is not None and s.key == "create"}
    assert {v.name for v in views()} <= created, created


def test_an_unexpected_exception_is_one_error_line_and_debug_shows_it(
        store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault that is no RunstoreError (a bug) prints one `Error:` line naming it and what
    to do, exit 70, no traceback; `--debug` lets the exception out."""
    def broken(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("deliberately broken for this test\nsecond line")

    monkeypatch.setattr(runstore.Store, "fetch", broken)
    result = CliRunner().invoke(main, ["--store", str(store_dir), "sql", "select 1"])
    assert result.exit_code == 70
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output + result.stderr
    assert lines[0].startswith("Error: unexpected RuntimeError: deliberately broken for this test")
    assert "--debug" in lines[0]
    debug = CliRunner().invoke(main, ["--debug", "--store", str(store_dir), "sql", "select 1"])
    assert isinstance(debug.exception, RuntimeError)
    # click's own errors keep their form: a usage error is exit 2 with click's message.
    usage = CliRunner().invoke(main, ["--store", str(store_dir), "sql", "--no-such-option"])
    assert usage.exit_code == 2 and "Error: unexpected" not in usage.stderr


def test_runs_of_an_unknown_kind_is_an_error_not_no_runs(store_dir: Path) -> None:
    # The CLI's --kind offers the kinds; the Python API took any text and found no run.
    store = runstore.open(store_dir)
    for bad in ("RL", "grpo", ""):
        with pytest.raises(UsageError, match="rl, sl, dpo, unknown"):
            store.runs(kind=bad)
    kinds = {k for (k,) in store.sql("select kind from runs").rows()}
    for kind in kinds:
        assert store.runs(kind=kind).height == store.sql(
            "select count(*) from runs where kind = $k", params={"k": kind}).item()


def test_python_twins_refuse_values_of_the_wrong_type(store_dir: Path) -> None:
    # The CLI can only pass text; the Python API takes any value, and a wrong one is a
    # usage error that says what it takes, never a TypeError or AttributeError.
    store = runstore.open(store_dir)
    calls = {"columns": lambda: store.runs(columns=5), "where": lambda: store.runs(where=5),
             "rules": lambda: store.check(rules=5),
             "group_by": lambda: store.compare("env/all/reward/total", group_by=5)}
    for name, call in calls.items():
        with pytest.raises(UsageError, match=name):
            call()


def test_check_takes_one_rule_as_text(store_dir: Path, _awkward_template: Path) -> None:
    # docs/checks.md: `rules` takes text; one rule as a str is that rule, not its letters.
    rule = "env/all/reward/total > 0.5"
    got = runstore.open(store_dir).check(rules=rule, default_rules=False, config=False)
    want = set()
    for run in oracle.run_dirs(_awkward_template):
        if (run / "metrics.jsonl").exists() and any(
                k == "env/all/reward/total" and v > 0.5
                for (_, k), v in oracle.live_numbers(run).items()):
            want.add(oracle.run_name(_awkward_template, run))
    assert want and set(got["run_name"]) == want
