"""Hostile SQL shared by the tests of every user-SQL door (`runstore sql` and the API in
tests/query/test_sql_sandbox.py, the MCP `sql` tool in tests/agents/test_mcp_sandbox.py):
each must be refused the same way, touching no file outside the store.

`READS_OUTSIDE` are reads of files outside the store (`{secret}`, `{csv}`, `{dir}` and
`{store}` are filled in by the test: a secret file, an existing CSV, a directory, the store);
`STATE_CHANGING` table functions that would change DuckDB's state; `logging_probe(path)` the
file-writing `enable_logging(storage='file')` pointed at `path`.

`statement_texts()` is every SQL text runstore runs, for the tests that a rule is written in
one place only (tests/query/test_kl_steps.py, test_macros.py).
"""

from __future__ import annotations

from pathlib import Path

READS_OUTSIDE = [
    "select * from read_csv('/etc/passwd')",
    "select * from read_text('/etc/passwd')",
    "select * from read_blob('/etc/passwd')",
    "select * from glob('/*')",
    "select * from '/etc/passwd'",
    "select * from read_text('file:///etc/passwd')",
    "select * from read_text('{secret}')",
    "select * from read_csv('{csv}')",
    "select * from glob('{dir}/*')",
    "select * from read_text('{store}/tables/runs/../../_runstore/manifests/*')",
    "select * from read_parquet('{store}/tables/*/*.parquet')",
    "select * from read_text('http://127.0.0.1:9/x')",
]

STATE_CHANGING = [
    "select * from enable_profiling()",
    "select * from disable_logging()",
    "select * from disable_profiling()",
    "select * from add_grammar_extension('x')",
]


def logging_probe(path: Path | str) -> str:
    return (f"select * from enable_logging(level='trace', storage='file', storage_path='{path}', "
            "storage_buffer_size=0) union all select true from runs limit 1")


def statement_texts() -> dict[str, str]:
    """Every SQL text runstore runs, by where it is written: each view (`sql/NAME.sql`), each
    statement of `sql/statements/` and `sql/doctor/` (`statements/FILE.sql:NAME`), and the web
    UI's statement constants (`ui.queries.NAME`)."""
    from runstore.resources import parse_statements, sql_dir
    from runstore.ui import queries

    sql = sql_dir()
    texts = {f"{p.parent.name}/{p.name}": p.read_text() for p in sql.glob("*.sql")}
    for folder in ("statements", "doctor"):
        for p in (sql / folder).glob("*.sql"):
            texts.update({f"{folder}/{p.name}:{name}": text
                          for name, text in parse_statements(p.read_text()).items()})
    texts.update({f"ui.queries.{name}": text for name, text in vars(queries).items()
                  if name.isupper() and isinstance(text, str) and "select" in text.lower()})
    return texts
