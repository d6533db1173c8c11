"""Query connections: a sandboxed in-memory DuckDB over one snapshot's tables and views.

Contract: `Database(root, manifest, params, allow_read, memory_limit)` is an in-memory DuckDB
connection that DuckDB's own sandbox (`sandbox.confine`) restricts, before anything is
registered on it, to reading the snapshot's live Parquet files (and the paths in `allow_read`),
with its configuration locked and, given a `memory_limit` (bytes), DuckDB's own limit set from
it (`memory.duckdb_setting`). `ensure(names)` then creates what a query reads (every table and
view for None), each once (`statement(sql, names, inline=True)` puts what a query starting with
SELECT or WITH reads in front of it as CTEs instead: the canned views, and each table,
`settings` and `kl_keys` whose view would be one fixed statement, its values bound as params of
the query; it creates the rest): a public table is a view over exactly the Parquet files the
snapshot lists (DuckDB's own Parquet scan, never a directory glob, NaN never ruled out by a
file's statistics; columns a later migration added read as typed nulls, and a table with no
file yet is a typed view of no rows; a summary the ingest keeps beside `metrics_raw`
(`DERIVED`) that the snapshot lacks, or lacks columns of, is a view computing it from
`metrics_raw`: sql/statements/summaries.sql), `runs` stored before the ingest kept each run's
final checkpoint and largest `progress/done_frac` joined with the statement computing them
(`PROGRESS`), and likewise for its total cost and tokens (`TOTALS`), `eval_runs.run_id`
resolved through the `checkpoints` table when queried (`LINKED`), `settings` a view of the
settings this query sees (`storage.settings.merged`: a param named like a setting overrides
it), `kl_keys` a view of the stored KL spellings (`runstore.families`, their one home), and
every canned view (`views.py`) after what it depends on; the macros (`macros.py`, e.g.
`over_threshold`) are created with the connection, before any view. Everything is a view,
nothing a base table, so no statement can change what a later query sees. `cursor()` gives one
query its own cursor (`sandbox.cursor`). `connect()` returns such a connection with everything
created. No DuckDB database file is ever opened, so readers never block writers or each other.
In the `runstore` command's process the first one is the in-memory DuckDB the command started
while it imported (`startup.early_database`), confined as any new one is.

No SQL text is built here but the quoted names of CTEs and columns: a table is one fixed
statement (the Parquet scan) whose file list is bound, shaped with DuckDB's expression API;
`settings` one whose values are bound; a canned view or a computed summary is its `.sql` file's
body under its quoted name. Building a connection imports neither pyarrow nor sqlglot
(`runstore sql` pays for neither; tests/query/test_fast_path.py holds it).
"""

from __future__ import annotations

import re
import threading
from typing import Any, Iterable

from ..errors import StoreCorrupt, one_line
from ..families import KL_KEYS_QUERY, kl_keys_params
from ..resources import sql_dir
from ..startup import early_database
from ..storage import schema as schema_mod
from ..storage.location import location
from ..storage.manifest import Manifest, Root
from ..storage.settings import merged, value_parts
from ..storage.snapshot import damaged_file, table_files
from . import macros, memory, sandbox
from .guard import identifier
from .statements import named
from .views import View, parsed, parsed_each, view_files

SETTINGS = "settings"
KL_KEYS = "kl_keys"  # the stored KL spellings (runstore.families.KL_KEYS)
# The `runs` columns the ingest keeps from a run's checkpoints and per-key summary, and the
# statement computing them for a snapshot written before it kept them.
PROGRESS = ("final_checkpoint", "done_frac")
PROGRESS_STATEMENT = "summaries.run_progress"
# The `runs` columns the ingest keeps from a run's live metrics file (its total cost and
# tokens), and the statement computing them for a snapshot written before it kept them.
TOTALS = ("cost_usd", "tokens_sampled", "tokens_trained")
TOTALS_STATEMENT = "totals.run_totals"
# Tables with a column resolved when queried, not stored: (column, the statement giving it per
# key, the key columns). `eval_runs.run_id` is the training run whose checkpoint an eval
# evaluated, found through the `checkpoints` table (which may be ingested later).
LINKED = {"eval_runs": ("run_id", "evals.eval_run_links", ("eval_store_id", "eval_run_id"))}
# Summaries of `metrics_raw` kept at ingest, and the statement computing each for a snapshot
# written before (some of) it was kept.
DERIVED = {"metric_keys": "summaries.metric_keys", "metric_steps": "summaries.metric_steps",
           "metric_kl": "summaries.metric_kl"}
# The params runstore binds in a statement besides the caller's own (`Database.statement`):
# their names start so, and a statement whose own params do too gets no such CTE.
OWN_PARAMS = "runstore_"
# The `settings` view: one row per setting, its value as a number or as text.
SETTINGS_QUERY = ("select unnest($runstore_setting_names) as name, "
                  "cast(unnest($runstore_setting_numbers) as double) as value_num, "
                  "cast(unnest($runstore_setting_texts) as varchar) as value_str")
# A table: DuckDB's Parquet scan of the listed files (bound as `$runstore_files_TABLE`), its
# columns (`*`, or the schema's, quoted, in the schema's order).
# `can_have_nan`: Parquet's min/max leave NaN out, and without it DuckDB takes a float column
# chunk with no null for NaN-free, so `isnan(x)` folds to false and `x > 0.01` holds for a NaN
# (duckdb issues 7803, 25521). `hive_partitioning` off: DuckDB would otherwise read a
# `key=value` directory above the store (`runs/lr=1e-4/.runstore`) as a column of every table.
TABLE_QUERY = ("select {columns} from read_parquet(${param}, union_by_name = true, "
               "can_have_nan = true, hive_partitioning = false)")
# A statement `Database.statement` may put its views' CTEs in front of: one that starts with
# SELECT, or with a WITH (not RECURSIVE) whose list they can head (the guard has checked it is
# one read-only query).
_SELECT = re.compile(r"\s*select\b", re.I)
_WITH = re.compile(r"\s*(with)\s(?!\s*recursive\b)", re.I)


class Database:
    """One sandboxed in-memory DuckDB over one snapshot; tables and views made on demand."""

    def __init__(self, root: Root, manifest: Manifest,
                 params: dict[str, Any] | None = None, *, allow_read: Iterable[str] | None = None,
                 memory_limit: int | None = None):
        import duckdb

        root = location(root)  # a plain path or URI too
        self.root, self.manifest = root, manifest
        self.settings = merged(manifest.settings, params)
        self.files = {name: table_files(root, manifest, name) for name in schema_mod.TABLES}
        extra_files, extra_dirs = sandbox.allowances(allow_read)
        # The one the `runstore` command started while it imported, if any (startup.py).
        self.con = early_database() or duckdb.connect(":memory:")
        try:
            root.duckdb_register(self.con)
            sandbox.confine(self.con, [f for fs in self.files.values() for f in fs] + extra_files,
                            extra_dirs, memory_limit=None if memory_limit is None
                            else memory.duckdb_setting(memory_limit))
            macros.create(self.con)
        except BaseException:
            self.con.close()
            raise
        self._view_files = view_files(str(sql_dir()))
        self._made: set[str] = set()
        self._columns: dict[str, list[str]] = {}  # a file's top-level columns (`_plain`)
        self._lock = threading.Lock()

    def close(self) -> None:
        self.con.close()

    def cursor(self) -> Any:
        return sandbox.cursor(self.con)

    def view(self, name: str) -> View:
        return parsed(self._view_files[name], self.con)

    def needs(self, names: Iterable[str] | None) -> list[str]:
        """What reading `names` needs created, in creation order (everything for None or
        for a name that is none of ours: a system view, a file, ...)."""
        known = self._known()
        wanted = None if names is None else {n.lower() for n in names}
        if wanted is None or not wanted <= known:
            wanted = known
        self._parse(wanted)
        todo: list[str] = []

        def visit(name: str, trail: tuple[str, ...]) -> None:
            if name in todo or name not in known:
                return
            if name in trail:
                raise ValueError(f"views depend on each other in a cycle: "
                                 f"{' -> '.join(trail + (name,))}")
            for dep in self.view(name).depends if name in self._view_files else ():
                visit(dep, trail + (name,))
            todo.append(name)

        for name in [*self.files, SETTINGS, KL_KEYS, *self._view_files]:  # a stable order
            if name in wanted:
                visit(name, ())
        return todo

    def _parse(self, names: set[str]) -> None:
        """Parse the views `names` read, directly or not, one call of the parser for each
        level of that tree (a view, then what it reads, ...) rather than one per view."""
        level, seen = {n for n in names if n in self._view_files}, set()
        while level:
            seen |= level
            read = parsed_each([self._view_files[n] for n in sorted(level)], self.con)
            level = {d for v in read for d in v.depends if d in self._view_files} - seen

    def ensure(self, names: Iterable[str] | None = None) -> None:
        """Create the tables and views reading `names` needs (all for None)."""
        with self._lock:
            for name in self.needs(names):
                self._make(name)

    def statement(self, sql: str, names: Iterable[str] | None, *, inline: bool = False,
                  params: Iterable[str] = (), defines: Iterable[str] | None = ()
                  ) -> tuple[str, int, dict[str, Any]]:
        """`sql` ready to run here, how many lines were put in front of it, and the values
        of the params those lines use: what it reads (`names`, as `ensure` takes them)
        created; with `inline`, a statement starting with SELECT reads each canned view it
        needs that is not created yet as a CTE of the view's own body instead, `NOT
        MATERIALIZED` (inlined where it is read, as a view is), put in front of it in
        dependency order, and likewise `settings`, `kl_keys` and each table whose files hold
        the schema's columns between them (`_plain`): the fixed statement its view would
        hold, its values bound as params named `OWN_PARAMS...` (unless the statement's own
        `params` are named so too). A statement starting with WITH gets them at the head of
        its list, its `with` blanked where it stood, when none of its own CTEs (`defines`,
        None: unknown) has one's name. Creating a view binds its body (and those of what it
        reads) once more than running the statement does: a process that runs one statement
        binds each once, when it runs. Any other statement (DESCRIBE, ...), or one that may
        read what is not ours (`names` None, a file), gets what it reads created
        (`ensure`)."""
        wanted = None if names is None else {n.lower() for n in names}
        head = _SELECT.match(sql) or _WITH.match(sql)
        if (not inline or wanted is None or head is None or defines is None
                or not wanted <= self._known()):
            self.ensure(names)
            return sql, 0, {}
        own = not any(p.lower().startswith(OWN_PARAMS) for p in params)
        ctes: list[tuple[str, str, dict[str, Any]]] = []
        with self._lock:
            todo = self.needs(wanted)
            if {d.lower() for d in defines} & set(todo):  # one of its CTEs has one's name
                for name in todo:
                    self._make(name)
                return sql, 0, {}
            plain = (self._plain([n for n in todo if n in self.files and n not in self._made])
                     if own else set())
            for name in todo:
                if name in self._view_files or name in self._made:
                    continue
                source = self._source(name, plain) if own else None
                if source is None:
                    self._make(name)
                else:
                    ctes.append((name, *source))
            ctes += [(n, self.view(n).body, {}) for n in todo
                     if n in self._view_files and n not in self._made]
            # A table made for another's sake (a computed summary reads `metrics_raw`) is
            # read as made.
            ctes = [cte for cte in ctes if cte[0] not in self._made]
        if not ctes:
            return sql, 0, {}
        listed = ",\n".join(f"{identifier(n)} as not materialized (\n{body}\n)"
                             for n, body, _ in ctes)
        bound = {k: v for *_, b in ctes for k, v in b.items()}
        if head.re is _WITH:  # theirs follow ours, their `with` made spaces (columns kept)
            prefix = f"with {listed},\n"
            rest = sql[:head.start(1)] + " " * len(head.group(1)) + sql[head.end(1):]
        else:
            prefix, rest = f"with {listed}\n", sql
        return prefix + rest, prefix.count("\n"), bound

    def _source(self, name: str, plain: set[str]) -> tuple[str, dict[str, Any]] | None:
        """The SELECT and bound values of the view `_make` would create for `name` (not a
        canned view), when it is that fixed statement alone; None when it must be made."""
        if name in (SETTINGS, KL_KEYS):
            return self._fixed(name)
        if name in plain:
            param = f"{OWN_PARAMS}files_{name}"
            columns = ", ".join(identifier(c) for c, _ in schema_mod.duckdb_columns(name))
            return TABLE_QUERY.format(columns=columns, param=param), {param: self.files[name]}
        return None

    def _plain(self, names: list[str]) -> set[str]:
        """Of the tables `names`, those the Parquet scan of the schema's columns reads as
        their view would: stored (not a summary to compute or a linked table), with files
        that hold between them the schema's columns and no other (the top-level columns of
        each file's footer, one query for all; a file that lacks some reads them as nulls,
        as the view's scan does). A file's columns are read once per database."""
        candidates = {n: schema_mod.duckdb_columns(n) for n in names
                      if self.files[n] and n not in LINKED
                      and not (n in DERIVED and n not in self.manifest.tables)}
        unread = [f for n in candidates for f in self.files[n] if f not in self._columns]
        if unread:
            try:
                rows = self.con.execute("select file_name, name, num_children "
                                        "from parquet_schema($files)", {"files": unread}
                                        ).fetchall()
            except Exception:  # a damaged file: made the usual way, which names it
                return set()
            self._columns.update(_top_level(rows))
        columns = self._columns
        return {n for n, want in candidates.items()
                if {c for f in self.files[n] for c in columns.get(f, ())} == {c for c, _ in want}}

    def _known(self) -> set[str]:
        return {*self.files, SETTINGS, KL_KEYS, *self._view_files}

    def _make(self, name: str) -> None:
        """Create `name` (a table, `settings`, `kl_keys` or a view) once (under the lock)."""
        if name in self._made:
            return
        if name in self.files:
            self._table(name)
        elif name in (SETTINGS, KL_KEYS):
            # Values travel as bound parameters; DuckDB folds them into the view as constants.
            query, params = self._fixed(name)
            self.con.sql(query, params=params).create_view(name)
        else:
            # DDL around the view file's own body (a relation's view would wrap the body in a
            # subquery; the view is exactly the documented SELECT).
            self.con.execute(f"create view {identifier(name)} as {self.view(name).body}")
        self._made.add(name)

    def _typed_nulls(self, columns: list[tuple[str, str]]) -> list[Any]:
        """`cast(null as TYPE) as name` for each (name, DuckDB type of the schema), as DuckDB
        expressions. The type is written as SQL text: `duckdb.sqltype` costs 15-30 ms the
        first time a process calls it, which every command on a store whose files predate a
        migration's new column would pay."""
        import duckdb

        return [duckdb.SQLExpression(f"cast(null as {t})").alias(c) for c, t in columns]

    def _table(self, name: str) -> None:
        import duckdb

        files = self.files[name]
        if name in DERIVED and name not in self.manifest.tables:
            self._derived(name)
            return
        if not files:
            # A view of no rows, not a table: a base table could be written to.
            (self.con.sql("select 1").project(*self._typed_nulls(schema_mod.duckdb_columns(name)))
             .limit(0).create_view(name))
            return
        try:
            rel = self.con.sql(TABLE_QUERY.format(columns="*", param="files"),
                               params={"files": files})
            want = schema_mod.duckdb_columns(name)
            missing = [(c, t) for c, t in want if c not in rel.columns]
            if missing and name in DERIVED:
                self._derived(name)  # a summary column no stored row has: computed
                return
            if name == "runs" and {c for c, _ in missing} >= set(PROGRESS):
                rel = self._with_progress(rel)
                missing = [(c, t) for c, t in missing if c not in PROGRESS]
            if name == "runs" and {c for c, _ in missing} >= set(TOTALS):
                rel = self._with_totals(rel)
                missing = [(c, t) for c, t in missing if c not in TOTALS]
            if rel.columns != [c for c, _ in want]:
                # Columns a later migration added, which no live file has yet: nulls of the
                # column's type; and every column where the schema puts it (the ones computed
                # above would come last): queries see the current schema, as a new store's.
                have, known = set(rel.columns), {c for c, _ in want}
                nulls = dict(zip([c for c, _ in missing], self._typed_nulls(missing)))
                rel = rel.project(*[duckdb.ColumnExpression(c) if c in have else nulls[c]
                                    for c, _ in want],
                                  *[duckdb.ColumnExpression(c) for c in rel.columns
                                    if c not in known])
            if name in LINKED:
                rel = self._linked(name, rel, files)
            rel.create_view(name)
        except Exception as e:  # duckdb's errors: name the damaged file and what to do
            damaged = damaged_file(self.root, self.manifest, [name]) or StoreCorrupt(
                f"reading table {name} of the store failed: {one_line(e)}. If it "
                "happens again, run `runstore repair --check`.")
            raise damaged from e

    def _inputs(self, *names: str) -> None:
        """What a computed table reads, made first (under `ensure`'s lock)."""
        for name in names:
            self._make(name)

    def _with_progress(self, runs: Any) -> Any:
        # `runs` rows stored before the ingest kept a run's progress: the columns computed
        # from the run's checkpoints and per-key summary, as the ingest keeps them
        # (statement `summaries.run_progress`), so `run_status` reads the same either way.
        import duckdb

        self._inputs("checkpoints", "metric_keys")
        joined = runs.join(self.con.sql(named(PROGRESS_STATEMENT)), "run_id", how="left")
        final = duckdb.CoalesceOperator(duckdb.ColumnExpression("final_checkpoint"),
                                        duckdb.ConstantExpression(False))
        return joined.project(*[duckdb.ColumnExpression(c) for c in runs.columns],
                              final.alias("final_checkpoint"),
                              duckdb.ColumnExpression("done_frac"))

    def _with_totals(self, runs: Any) -> Any:
        # `runs` rows stored before the ingest kept a run's total cost and tokens: the columns
        # computed from its metrics rows as the ingest keeps them (statement
        # `totals.run_totals`).
        import duckdb

        self._inputs("metrics_raw")
        joined = runs.join(self.con.sql(named(TOTALS_STATEMENT)), "run_id", how="left")
        return joined.project(*[duckdb.ColumnExpression(c) for c in (*runs.columns, *TOTALS)])

    def _linked(self, name: str, stored: Any, files: list[str]) -> Any:
        # The column resolved when queried (`LINKED`), joined in place of the stored one,
        # the columns kept in the table's order.
        import duckdb

        column, statement, keys = LINKED[name]
        self._inputs("checkpoints")
        links = self.con.sql(named(statement), params={"stored": files}).set_alias("l")
        joined = stored.set_alias("s").join(
            links, " and ".join(f"s.{k} = l.{k}" for k in keys), how="left")
        return joined.project(*[duckdb.ColumnExpression("l" if c == column else "s", c)
                                for c in stored.columns])

    def _derived(self, name: str) -> None:
        # A summary this snapshot does not hold (whole): computed from `metrics_raw`, as the
        # ingest would have kept it (sql/statements/summaries.sql).
        self._inputs("metrics_raw", KL_KEYS)
        self.con.execute(f"create view {identifier(name)} as {named(DERIVED[name])}")

    def _fixed(self, name: str) -> tuple[str, dict[str, Any]]:
        """`settings` or `kl_keys`: the one statement its view is, and its bound values."""
        if name == KL_KEYS:
            return KL_KEYS_QUERY, kl_keys_params()
        parts = [value_parts(v) for v in self.settings.values()]
        return SETTINGS_QUERY, {"runstore_setting_names": list(self.settings),
                                "runstore_setting_numbers": [n for n, _ in parts],
                                "runstore_setting_texts": [t for _, t in parts]}


def _top_level(rows: Iterable[tuple[str, str, int | None]]) -> dict[str, list[str]]:
    """Each file's top-level columns, from DuckDB's `parquet_schema` rows (file, name,
    number of children) in the order it gives them: each file's schema depth first, its root
    first, so a row is a top-level column when only the root's count of children is open."""
    columns: dict[str, list[str]] = {}
    pending: dict[str, list[int]] = {}  # per file: children left at each open level
    for file, column, children in rows:
        left = pending.setdefault(file, [])
        if not left:  # the root
            columns[file] = []
        else:
            if len(left) == 1:
                columns[file].append(column)
            left[-1] -= 1
        left.append(children or 0)
        while len(left) > 1 and left[-1] == 0:
            left.pop()
    return columns


def connect(root: Root, manifest: Manifest, params: dict[str, Any] | None = None,
            *, allow_read: Iterable[str] | None = None, memory_limit: int | None = None) -> Any:
    """A confined DuckDB connection with every table and view of the snapshot created."""
    db = Database(root, manifest, params, allow_read=allow_read, memory_limit=memory_limit)
    try:
        db.ensure(None)
    except BaseException:
        db.close()
        raise
    return db.con
