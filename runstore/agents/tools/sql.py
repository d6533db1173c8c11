"""Tools for SQL: `sql` and `views`.

Contract: `sql` runs one query on the path of user SQL: `Store.workers()` (as the web UI's
SQL console), a worker process capped at the store's memory limit (`runstore mcp
--memory-limit`, else $RUNSTORE_MEMORY_LIMIT, else a quarter of the machine's), where the
query goes through `Session.fetch` exactly as `runstore sql`'s does: the read-only guard,
bound params, DuckDB's sandbox (no file outside the store read or written, no setting
changed) and a time limit (`timeout`, `DEFAULT_TIMEOUT_S` unless asked). Values go in
`params`, bound to `$name`, never pasted. It answers one page: the worker sends only `limit`
rows after the first `offset` (and at most `PAGE_BYTES` of Arrow) and counts the rest, so a
huge result costs the server nothing; each page runs the query again, so a paged answer to
a query without an ORDER BY says its pages may repeat or skip rows. On request (`docs`) it
also returns the documentation of the views and tables named, so an agent can write correct
SQL. An error says what DuckDB
or the guard said, and where to read the views' columns. `views` lists the canned views
(name, purpose, columns) and the tables, or documents one of them (columns with their
comments, the view's SQL on request); a name is found in any case, as SQL finds it.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Annotated, Any, Optional, Union

from pydantic import Field

from ...errors import QueryError
from ...store.catalog import spelled
from ..answer import UNPAGED, Page
from ..args import DEFAULT_TIMEOUT_S, MaxChars, Offset, TextFormat, limit
from .base import Toolbox, tool
from .common import cut

if TYPE_CHECKING:
    from ...store.base import View

RowLimit = limit(100, 10000, "rows")
PAGE_BYTES = 8 << 20  # Arrow bytes of one page at most, however wide its rows
DESCRIPTION_SHOWN = 240  # characters of a view's purpose in the list of views
SEE_VIEWS = ("this tool reads the store's own tables and views only: `views` lists them, "
             "and `sql` with docs=[\"<name>\"] gives their columns")

Query = Annotated[Optional[str], Field(
    description="One read-only query in DuckDB SQL over the store's tables and canned views "
                "(SELECT/WITH; anything that writes, attaches, sets or reads other files is "
                "refused). Put values in params as $name.",
    examples=["select run_label, max_kl_v1 from kl_health where flagged",
              "select step, value from metrics where run_name = $run and key = $key "
              "order by step"])]
Params = Annotated[Optional[dict[str, Union[str, int, float, bool, None, list[str]]]], Field(
    description="Values bound to the query's $name placeholders (never pasted into its text). "
                "A name that is a setting (kl_threshold) overrides it for this query.",
    examples=[{"run": "gsm8k_tool_rl/sweep/lr_1e-3/seed_0", "key": "optim/kl_sample_train_v1"}])]
Docs = Annotated[Optional[list[str]], Field(
    description="Also return the documentation (purpose, columns) of these views or tables; "
                "[\"*\"] for every view. Without a query, only the documentation.",
    examples=[["kl_health", "metrics"], ["*"]])]
Timeout = Annotated[float, Field(
    gt=0, le=600, description="Stop the query if it still runs after this many seconds.")]


class SqlTools(Toolbox):
    """sql, views."""

    @tool("Run read-only SQL")
    def sql(self, query: Query = None, params: Params = None, docs: Docs = None,
            limit: RowLimit = 100, offset: Offset = 0, format: TextFormat = "markdown",
            timeout: Timeout = DEFAULT_TIMEOUT_S, max_chars: MaxChars = None) -> str:
        """Run one read-only SQL query (DuckDB) over the store's tables and canned views, as
        `runstore sql` does: sandboxed, time-limited, values bound as $name params. Ask for
        `docs` of the views first when unsure of their columns."""
        if not query and not docs:
            raise QueryError("give a query, or docs=[\"<view>\", ...] (or [\"*\"]) for the "
                             "views' documentation")
        out = self.answer(max_chars)
        if docs:
            out.text(_docs(self.store, docs), more="ask for fewer names in docs")
        if not query:
            return out.render()
        try:
            table, total = self.store.workers().head(query, dict(params or {}),
                                                     timeout=timeout, rows=limit,
                                                     nbytes=PAGE_BYTES, skip=offset,
                                                     text="print")
        except QueryError as e:
            raise QueryError(f"{e} ({SEE_VIEWS})") from e
        out.table(table, Page(offset, limit, total), fmt=format)
        shown = table.num_rows
        paged = shown > 0 and (offset > 0 or (total is not None and total > offset + shown))
        if paged and not _ordered(query):
            out.note("(the query has no ORDER BY: each page runs it again, and DuckDB may "
                     "return its rows in another order each time, so pages may repeat or "
                     "skip rows; order by columns that tell rows apart to page through it)")
        return out.render()

    @tool("List views and tables")
    def views(self, name: Annotated[Optional[str], Field(
                  description="A view or table to document (columns and their meaning); omit "
                              "to list every view and table.", examples=["kl_health"])] = None,
              include_sql: Annotated[bool, Field(
                  description="With a view's name, also its SQL.")] = False,
              max_chars: MaxChars = None) -> str:
        """The canned views (name, purpose, columns) and tables you can query with `sql`; or,
        with `name`, one view's or table's columns with what each means."""
        import pyarrow as pa

        store = self.store
        out = self.answer(max_chars)
        views = {v.name: v for v in store.views()}
        if name is None:
            rows = [{"view": v.name, "purpose": cut(v.description, DESCRIPTION_SHOWN),
                     "columns": ", ".join(c for c, _ in v.columns)} for v in views.values()]
            out.line(f"## {len(rows)} canned views (`views` with name=... documents one)")
            out.table(pa.Table.from_pylist(rows), Page(0, len(rows), len(rows)), what="views",
                      more=UNPAGED)
            tables = _table_list(store.schema())
            out.line(f"## {tables.num_rows} tables")
            return out.table(tables, Page(0, tables.num_rows, tables.num_rows),
                             what="tables", more=UNPAGED).render()
        name = spelled(name, [*views, *store.tables()])
        if name in views:
            out.text(_view_doc(views[name], include_sql))
            return out.render()
        if name in store.tables():
            doc = store.schema(name).drop("table").to_arrow()
            out.line(f"## table {name}")
            return out.table(doc, Page(0, doc.num_rows, doc.num_rows), what="columns",
                             more=UNPAGED).render()
        known = [*views, *store.tables()]
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise QueryError(f"no view or table {name!r}; {hint}(`views` without a name lists them)")


def _ordered(query: str) -> bool:
    """Whether the query's result is ordered (an ORDER BY on its outermost query); True for
    a query sqlglot cannot read (it ran: there is nothing sure to say of it)."""
    import sqlglot
    from sqlglot.errors import ErrorLevel

    try:
        tree = sqlglot.parse_one(query, read="duckdb", error_level=ErrorLevel.IGNORE)
    except Exception:  # noqa: BLE001 - any failure to read it: say nothing
        return True
    return tree is None or tree.args.get("order") is not None


def _view_doc(view: "View", include_sql: bool) -> str:
    lines = [f"## view {view.name}", view.description, "", "| column | meaning |", "|---|---|"]
    lines += [f"| {c} | {comment.replace('|', chr(92) + '|')} |" for c, comment in view.columns]
    if include_sql:
        lines += ["", "```sql", view.body.strip(), "```"]
    return "\n".join(lines)


def _table_list(schema: Any) -> Any:
    """One row per table: its name and its columns, comma-separated."""
    import pyarrow as pa

    tables: dict[str, list[str]] = {}
    for row in schema.iter_rows(named=True):
        tables.setdefault(row["table"], []).append(row["column"])
    return pa.Table.from_pylist([{"table": t, "columns": ", ".join(c)} for t, c in tables.items()])


def _docs(store: Any, names: list[str]) -> str:
    """The documentation of the views and tables named (`*`: every view)."""
    views = {v.name: v for v in store.views()}
    chosen = list(views) if names == ["*"] else names
    parts = []
    for name in (spelled(n, [*views, *store.tables()]) for n in chosen):
        if name in views:
            parts.append(_view_doc(views[name], include_sql=False))
        elif name in store.tables():
            rows = store.schema(name).iter_rows(named=True)
            parts.append("\n".join([f"## table {name}", "| column | type | meaning |",
                                    "|---|---|---|"] + [f"| {r['column']} | {r['type']} | "
                                                        f"{r['comment']} |" for r in rows]))
        else:
            close = difflib.get_close_matches(name, [*views, *store.tables()], n=3, cutoff=0.5)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise QueryError(f"docs names no view or table {name!r}{hint} (`views` lists "
                                "them)")
    return "\n\n".join(parts)
