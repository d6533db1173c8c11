"""The UI's JSON API: one method per endpoint, each one read-only call into `Store`.

Contract: `Api(store)` answers the endpoints listed in docs/ui.md. Every method takes the
request's parameters (`Params`: query-string values, repeated keys allowed, and the JSON body
for POSTs) and returns a JSON-ready value (dicts, lists, str, finite floats, None) or a
`Download`. Nothing here writes: results come from `Store.arrow` (the CLI's read-only guard
and connection, so whatever sandbox settings `Store` applies apply here too), `Store.runs`,
`Store.keys`, `Store.compare`, `Store.diff`, `Store.code_diff`, `Store.trace`, `Store.views`,
`Store.settings`, `Store.check_result` (ui/health.py) and `Store.groups` (which runs make
each group `compare` draws); chart lines are drawn by `present.series`. Bad input is a
`RunstoreError` whose message says what to send instead (the app turns it into HTTP 400
`{"error": ...}`). User SQL — the SQL page's queries (`sql`, `sql_download`) and the Runs
page's `where` condition — runs in the store's worker processes (`Store.workers`,
query/workers.py), each capped at the store's memory limit, so a query that needs more fails
(400, naming the limit) and the server itself never grows; and under a time limit
(`sql_timeout` seconds, `SQL_TIMEOUT_S` unless given; None: none): one still running then is
stopped and is that 400 ("query stopped after 30 s ..."). `sql` gets only the first
`SQL_ROW_LIMIT` rows (at most `SQL_PAGE_BYTES` of them) and the exact row count from the
worker; a download's rows come in batches, written to a spooled temporary file as they come
(CSV as `runstore sql -F csv` writes it, or Parquet), and the time limit holds until the
file is whole: the answer is the file, or the 400 — never a file cut short. The pages' own
queries (fixed statements with bound values) run in this process, without a limit.
`start()` starts the workers, `close()` ends them.

Answers of the read endpoints are cached per store snapshot (`cached`): the same request
against the same snapshot is answered once; a new snapshot empties the cache, and `warm()`
recomputes the Runs page's default answer right away (the server calls it when a snapshot
lands; it includes the Health answer, whose rules the Runs page shows), so the first visit
after an ingest does not pay for `run_summary` and `check`.

Tabular answers have the shape of `POST /api/sql`: `{"columns": [...], "rows": [[...]]}`,
with NaN and ±Infinity as the strings "NaN", "Infinity", "-Infinity" (JSON has no such
numbers), timestamps as ISO-8601 text and DECIMALs as numbers.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable

from ..errors import QueryError, RunstoreError
from ..families import KL_KEYS as KL_SPELLINGS
from ..present import series
from ..store.inputs import seconds
from . import health, queries
from .answers import Download, Params, json_value, plain, tabular

if TYPE_CHECKING:
    from ..store import Store

CACHE_ENTRIES = 32  # answers kept per snapshot (a chart answer is up to ~1.3 MB)
SQL_ROW_LIMIT = 5000  # rows /api/sql returns to the page; downloads carry every row
SQL_PAGE_BYTES = 32 << 20  # and at most this much of them (as Arrow), however wide
SPOOL_BYTES = 16 << 20  # a download is kept in memory up to this size, then on disk
# Seconds a query of the SQL page (or its download) may run: a runaway cross join must not
# hold a server core forever. The pages' own queries have no limit.
SQL_TIMEOUT_S = 30.0
SEARCH_LIMIT = 200  # messages /api/search sends unless asked for another number
SEARCH_MAX = 1000  # and at most this many
SNIPPET_CONTEXT = 80  # characters of a found message shown either side of the match
CODE_LIMIT = 1_000_000  # characters of one code.diff (or of their unified diff) sent to a page
# Every stored spelling of the KL metrics, `optim/` ones first (for the charts page).
KL_KEYS = tuple(key for key, _, _ in sorted(KL_SPELLINGS, key=lambda row: row[2]))


def _safe_filename(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "runstore"


class Api:
    """The endpoints (see docs/ui.md); `status_extra` adds what the server knows (watch)."""

    def __init__(self, store: "Store", status_extra: Callable[[], dict[str, Any]] | None = None,
                 *, sql_timeout: float | None = SQL_TIMEOUT_S):
        self.store = store
        self.sql_timeout = seconds(sql_timeout, "sql_timeout")
        self.status_extra = status_extra or (lambda: {})
        self._cache: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._cache_seq: int | None = None
        self._lock = threading.Lock()

    def cached(self, name: str, method: Callable[[Params], Any]) -> Callable[[Params], Any]:
        """`method` answering each (request, snapshot) once (see the module docstring)."""

        def answer(p: Params) -> Any:
            seq = self.store.snapshot()
            key = (name, tuple(p.items))
            with self._lock:
                if seq != self._cache_seq:
                    self._cache.clear()
                    self._cache_seq = seq
                if key in self._cache:
                    self._cache.move_to_end(key)
                    return self._cache[key]
            value = method(p)
            with self._lock:
                if seq == self._cache_seq:
                    self._cache[key] = value
                    while len(self._cache) > CACHE_ENTRIES:
                        self._cache.popitem(last=False)
            return value

        return answer

    def start(self) -> None:
        """Start the worker processes of user SQL (one at once; see query/workers.py)."""
        self.store.workers()

    def close(self) -> None:
        """End the worker processes."""
        self.store.workers().close()

    def warm(self) -> None:
        """Compute the Runs page's default answer for the newest snapshot (errors are left
        for the page's own request to report)."""
        try:
            self.cached("runs", self.runs)(Params())
        except Exception:  # noqa: BLE001 - warming is best effort
            pass

    # -- store-wide ---------------------------------------------------------------------
    def status(self, p: Params) -> dict[str, Any]:
        from .. import __version__

        n = self.store.arrow("select count(*) as n from runs").column("n")[0].as_py()
        return {"store": str(self.store.path), "snapshot": self.store.snapshot(),
                "runs": n, "version": __version__,
                "kl_threshold": plain(self.kl_threshold()),
                "kl_keys": list(KL_KEYS), "default_metrics": list(health.DEFAULT_PANELS),
                **self.status_extra()}

    def kl_threshold(self) -> float:
        """The threshold the KL views and chart use: the `kl_threshold` setting as a query
        sees it (storage.settings.merged: the store's value, else the default)."""
        return float(self.store.settings()["kl_threshold"])

    def runs(self, p: Params) -> dict[str, Any]:
        """run_summary (filtered by `where`, `runs --where` semantics), the rules firing for
        each run (`rules`), then the chosen config keys."""
        where = (p.get("where") or "").strip() or None
        if where is None:
            table = self.store.runs().to_arrow()
        else:
            # A condition from the request is user SQL: in a worker, under the time limit.
            table = self.store.arrow(*self.store.runs_query(where=where), timeout=self.sql_timeout,
                                     isolated=True)
        out = tabular(table)
        ids = table.column("run_id").to_pylist()
        self._add_rules(out, ids)
        keys = list(dict.fromkeys(k for k in p.all("config") if k))  # one column per key
        if keys:
            table = self.store.arrow(*queries.config_columns(keys))
            values: dict[tuple[str, str], Any] = {}
            for row in table.to_pylist():
                values[(row["run_id"], row["key"])] = json_value(row["value"])
            for key in keys:
                out["columns"].append(f"config.{key}")
                out["types"].append("config")
            for row, run_id in zip(out["rows"], ids):
                row.extend(plain(values.get((run_id, k))) for k in keys)
        out["config_keys"] = keys
        out["snapshot"] = self.store.snapshot()
        return out

    def _add_rules(self, out: dict[str, Any], ids: list[str]) -> None:
        """The `rules` column: the rules of `check` firing for each run (by run_id). A check that cannot
        run (a bad runstore.toml) leaves it null and says why in `rules_error`, so the run
        list still shows."""
        try:
            fired = health.fired_rules(self.health(Params()))
        except RunstoreError as e:
            fired, out["rules_error"] = {}, str(e)
        out["columns"].append("rules")
        out["types"].append("list<string>")
        for row, run_id in zip(out["rows"], ids):
            row.append(fired.get(run_id, []) if "rules_error" not in out else None)

    # -- health -------------------------------------------------------------------------
    def health(self, p: Params) -> dict[str, Any]:
        """kl_health and every rule of `check` (see ui/health.py); one answer per snapshot,
        shared with the Runs page's `rules` column."""
        return self.cached("health", lambda _: health.health(self.store))(Params())

    def keys(self, p: Params) -> dict[str, Any]:
        """Every metric key (`Store.keys`) of the named runs (every run when none), with
        `n_runs, n_points, first_step, last_step, type`; `like` filters as `keys --like`."""
        runs = [r for r in p.all("run") if r] or None
        like = (p.get("like") or "").strip() or None
        return tabular(self.store.keys(runs=runs, like=like).to_arrow())

    def config_keys(self, p: Params) -> dict[str, Any]:
        return tabular(self.store.arrow(queries.CONFIG_KEYS))

    def settings(self, p: Params) -> dict[str, Any]:
        return {k: plain(v) for k, v in self.store.settings().items()}

    # -- SQL console --------------------------------------------------------------------
    def _sql_text(self, p: Params) -> str:
        body = p.body if isinstance(p.body, dict) else {}
        sql = body.get("sql")
        if not isinstance(sql, str) or not sql.strip():
            raise QueryError('send {"sql": "select ..."} with a query')
        return sql

    def sql(self, p: Params) -> dict[str, Any]:
        sql = self._sql_text(p)
        started = time.perf_counter()
        table, rows = self.store.workers().head(sql, timeout=self.sql_timeout,
                                                rows=SQL_ROW_LIMIT, nbytes=SQL_PAGE_BYTES,
                                                text="print")
        out = tabular(table)
        out["row_count"], out["truncated"] = rows, table.num_rows < rows
        out["elapsed_s"] = round(time.perf_counter() - started, 4)
        return out

    def sql_download(self, p: Params) -> Download:
        import tempfile

        sql = self._sql_text(p)
        fmt = (p.body.get("format") if isinstance(p.body, dict) else None) or "csv"
        if fmt not in ("csv", "parquet"):
            raise QueryError(f"format is csv or parquet, got {fmt!r}")
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
        try:
            with self.store.workers().query(sql, timeout=self.sql_timeout,
                                            text="print" if fmt == "csv" else "file") as answer:
                (_csv if fmt == "csv" else _parquet)(answer.batches(), spool)
        except BaseException:
            spool.close()
            raise
        if fmt == "csv":
            return Download(spool, "text/csv; charset=utf-8", "query.csv")
        return Download(spool, "application/vnd.apache.parquet", "query.parquet")

    def views(self, p: Params) -> dict[str, Any]:
        views = [{"name": v.name, "description": v.description,
                  "columns": [list(c) for c in v.columns], "sql": v.body}
                 for v in self.store.views()]
        names = {v["name"] for v in views}
        tables: dict[str, list[list[str]]] = {}
        for row in self.store.arrow(queries.TABLE_COLUMNS).to_pylist():
            if row["table_name"] in names or row["table_name"] == "settings":
                continue
            tables.setdefault(row["table_name"], []).append([row["column_name"],
                                                             row["data_type"]])
        return {"views": views,
                "tables": [{"name": n, "columns": c} for n, c in sorted(tables.items())]}

    # -- charts -------------------------------------------------------------------------
    def series(self, p: Params) -> dict[str, Any]:
        """Chart lines of one metric: one per run (`lines`), or with `group_by` or an `x` but
        `step` (time, tokens, cost: runs on a common grid) one per group of `Store.compare`
        (`groups`), downsampled on the server."""
        metric = p.text("metric")
        runs = [r for r in p.all("run") if r] or None
        smooth = series.check_smooth(p.number("smooth"))
        x = p.get("x") or "step"
        if x not in self.store.compare_axes():
            raise QueryError(f"x is step, time (wall time since the run's first step), tokens "
                             f"or cost (what the run had spent by the step), got {x!r}")
        group_by = [g for g in p.all("group_by") if g]
        if group_by or x != "step":
            return self._groups(p, metric, runs, smooth, x, group_by)
        step_min, step_max = p.integer("step_min"), p.integer("step_max")
        frame = self.store.sql(*queries.series(metric, self.store.scope(runs), step_min,
                                               step_max))
        if not frame.height:  # no point: a metric no run logs is the 400 `compare` gives
            self.store.require_keys([metric])
        n_runs = frame["run_id"].n_unique() if frame.height else 0
        asked = p.integer("max_points")
        max_points = series.points_per_line(n_runs, smoothed=smooth is not None, asked=asked)
        lines = series.lines(frame, smooth=smooth, max_points=max_points,
                             over=self.kl_threshold() if metric in KL_KEYS else None)
        return {"metric": metric, "smooth": smooth, "max_points": max_points,
                "step_min": step_min, "step_max": step_max, "x": "step", "group_by": None,
                "lines": [line.to_json() for line in lines]}

    def _groups(self, p: Params, metric: str, runs: list[str] | None, smooth: float | None,
                x: str, group_by: list[str]) -> dict[str, Any]:
        import polars as pl

        band = p.get("band") or "std"
        if band not in ("std", "minmax"):
            raise QueryError(f"band is std (mean ± one standard deviation) or minmax, got {band!r}")
        by: str | list[str] | None = group_by or None
        if by == ["auto"]:
            by = "auto"
        frame = self.store.compare(metric, runs=runs, group_by=by, smooth=smooth,
                                   x=x)  # type: ignore[arg-type]
        xcol = self.store.compare_axes()[x]
        lo, hi = p.number("step_min"), p.number("step_max")
        if lo is not None:
            frame = frame.filter(pl.col(xcol) >= lo)
        if hi is not None:
            frame = frame.filter(pl.col(xcol) <= hi)
        members = self.store.groups(runs=runs, group_by=by)
        runs_of: dict[str, list[str]] = {}
        for name, label in zip(members["run_label"].to_list(), members["group"].to_list()):
            runs_of.setdefault(label, []).append(name)
        n_groups = frame["group"].n_unique() if frame.height else 0
        max_points = series.points_per_line(3 * n_groups, smoothed=smooth is not None,
                                            asked=p.integer("max_points"))
        over = self.kl_threshold() if metric in KL_KEYS else None
        lines = series.group_lines(frame, x=xcol, band=band, smoothed=smooth is not None,
                                   max_points=max_points, over=over)
        for line in lines:
            line["runs"] = runs_of.get(line["group"], [])
        out = {"metric": metric, "smooth": smooth, "max_points": max_points, "x": x,
               "group_by": by, "band": band, "step_min": lo, "step_max": hi,
               "groups": plain(lines), "lines": []}
        mark = p.integer("mark_step")
        if mark is not None and x == "time":
            out["step_marks"] = plain(self.store.step_times(mark, runs=runs).to_dicts())
        return out

    # -- compare ------------------------------------------------------------------------
    def diff(self, p: Params) -> dict[str, Any]:
        """The Compare page: `Store.diff` of the runs (differences only unless `all=1`), the
        unified diffs of their code.diffs against the first run's (`Store.code_diff`), and
        each run's code.diff (texts longer than CODE_LIMIT characters are cut, and say so)."""
        runs = [r for r in p.all("run") if r]
        if not runs:
            raise QueryError("give the runs to compare: run=NAME, repeated")
        every = p.flag("all")
        table = self.store.diff(runs, all=every)
        names = [c for c in table.columns if c not in ("key", "differs")]
        found = self.store.resolve(runs)
        unified = self.store.code_diff(runs) if len(names) > 1 else ""
        texts = {r["run_id"]: r["code_diff"] for r in
                 self.store.arrow(*queries.code_diffs([r.run_id for r in found])).to_pylist()}
        code = []
        for run in found:
            text = texts.get(run.run_id)
            code.append({"run_id": run.run_id, "run_name": run.label,
                         "text": None if text is None else text[:CODE_LIMIT],
                         "bytes": None if text is None else len(text.encode("utf-8")),
                         "lines": None if text is None else len(text.splitlines()),
                         "truncated": text is not None and len(text) > CODE_LIMIT})
        return {"runs": names, "all": every, "diff": tabular(table.to_arrow()),
                "code_diff": unified[:CODE_LIMIT], "code_diff_truncated": len(unified) > CODE_LIMIT,
                "code": code}

    # -- checkpoints --------------------------------------------------------------------
    def checkpoints(self, p: Params) -> dict[str, Any]:
        latest = tabular(self.store.arrow(queries.LATEST_CHECKPOINTS))
        best = tabular(self.store.arrow(queries.BEST_CHECKPOINTS))
        return {"latest": latest, "best": best}

    # -- timing -------------------------------------------------------------------------
    def timing_runs(self, p: Params) -> dict[str, Any]:
        return tabular(self.store.arrow(queries.TIMING_RUNS))

    def _run(self, p: Params, name: str = "run") -> str:
        """The run_id of the one run the parameter names (`Store.resolve`)."""
        return self.store.resolve([p.text(name)])[0].run_id

    def timing_steps(self, p: Params) -> dict[str, Any]:
        return tabular(self.store.run_step_times(p.text("run")).to_arrow())

    def timing_spans(self, p: Params) -> dict[str, Any]:
        step = p.integer("step")
        if step is None:
            raise QueryError("missing parameter 'step'")
        return tabular(self.store.step_spans(p.text("run"), step=step).to_arrow())

    def timing_slowest(self, p: Params) -> dict[str, Any]:
        return tabular(self.store.run_slowest_spans(p.text("run")).to_arrow())

    def timing_compare(self, p: Params) -> dict[str, Any]:
        """Which of two runs got slower: their step times, and per span name the seconds per
        step each spends, the names that cost `vs` the most extra time first."""
        run_a, run_b = self.store.resolve([p.text("run"), p.text("vs")])
        a, b = run_a.label, run_b.label
        params = {"a": run_a.run_id, "b": run_b.run_id}
        by_id = {r.pop("run_id"): r for r in
                 self.store.arrow(queries.TIMING_COMPARE_STEPS, params).to_pylist()}
        steps = {run.label: None if run.run_id not in by_id else
                 {"run_name": run.label, **by_id[run.run_id]} for run in (run_a, run_b)}
        for name in (a, b):
            if steps[name] is None:
                raise QueryError(f"run {name!r} has no timing spans; pick one that "
                                 "/api/timing/runs lists")
        # The mean, not the median: a run's time is the sum of its steps' times, and a slow
        # tail (every tenth step saving a checkpoint) leaves the median where it was.
        sa, sb = steps[a]["mean_step_s"], steps[b]["mean_step_s"]
        ratio = sb / sa if sa else None
        return {"run": a, "vs": b, "steps": {"run": plain(steps[a]), "vs": plain(steps[b])},
                "ratio": plain(ratio),
                "slower": None if sa == sb else (b if sb > sa else a),
                "spans": tabular(self.store.arrow(queries.TIMING_COMPARE_SPANS, params))}

    def trace(self, p: Params) -> Download:
        from ..present.trace_export import dumps

        run = p.text("run")
        step = p.integer("step")
        events = self.store.trace(run, step=step)
        name = _safe_filename(f"{run}_step{step}" if step is not None else run)
        return Download(dumps(events).encode(), "application/json", f"{name}.trace.json")

    # -- rollouts -----------------------------------------------------------------------
    def rollouts_runs(self, p: Params) -> dict[str, Any]:
        return tabular(self.store.arrow(queries.ROLLOUT_RUNS))

    def rollouts_index(self, p: Params) -> dict[str, Any]:
        return tabular(self.store.rollout_index(p.text("run")).to_arrow())

    @staticmethod
    def _iteration(p: Params) -> int:
        iteration = p.integer("iteration")
        if iteration is None:
            raise QueryError("missing parameter 'iteration'")
        return iteration

    def _where(self, p: Params) -> dict[str, Any]:
        iteration = self._iteration(p)
        return {"run": self._run(p), "split": p.text("split"), "iteration": iteration}

    def trajectories(self, p: Params) -> dict[str, Any]:
        """Every trajectory at the split and iteration, lowest total reward first
        (`Store.trajectories`, unpaged: the page draws their histogram)."""
        iteration = self._iteration(p)
        return tabular(self.store.trajectories(p.text("run"), iteration=iteration,
                                               split=p.text("split"), limit=None).to_arrow())

    def conversations(self, p: Params) -> dict[str, Any]:
        return tabular(self.store.arrow(queries.CONVERSATIONS, self._where(p)))

    def conversation(self, p: Params) -> dict[str, Any]:
        """Messages of one conversation (`id`), or of a trajectory's conversations
        (`split`, `iteration`, `group`, `traj`)."""
        run = self._run(p)
        ids: list[str]
        exact = True
        if p.get("id"):
            ids = [p.text("id")]
        else:
            where = self._where(p)
            group, traj = p.integer("group"), p.integer("traj")
            if group is None or traj is None:
                raise QueryError("give id=CONVERSATION, or split, iteration, group and traj")
            found = self.store.arrow(queries.TRAJECTORY_CONVERSATIONS,
                                     {**where, "group": group, "traj": traj}).to_pylist()
            exact_ids = [r["conversation_id"] for r in found if r["exact"]]
            ids = exact_ids or [r["conversation_id"] for r in found]
            exact = bool(exact_ids)
        conversations = []
        for cid in ids:
            rows = self.store.arrow(queries.MESSAGES, {"run": run, "conversation": cid}).to_pylist()
            if not rows:
                continue
            head = rows[0]
            conversations.append({
                "conversation_id": cid, "split": head["split"], "iteration": head["iteration"],
                "section": head["section"], "title": head["title"],
                "group_idx": head["group_idx"], "traj_idx": head["traj_idx"],
                "messages": [{"message_idx": r["message_idx"], "role": r["role"],
                              "name": r["name"], "content": r["content"],
                              "tool_calls": json_value(r["tool_calls"]),
                              "tool_call_id": r["tool_call_id"]} for r in rows]})
        return {"run": p.text("run"), "exact": exact, "conversations": plain(conversations)}

    def search(self, p: Params) -> dict[str, Any]:
        q = p.text("q")
        role = p.get("role") or ""
        limit = p.integer("limit", SEARCH_LIMIT)
        if limit is None or limit < 1:
            raise QueryError(f"parameter 'limit' is how many messages to send: 1 or more (at "
                             f"most {SEARCH_MAX} are), got {limit}")
        limit = min(limit, SEARCH_MAX)
        found = self.store.search(q, role=role, context=SNIPPET_CONTEXT, limit=limit)
        total = found["n_total"][0] if found.height else 0
        rows = found.drop("n_total").to_dicts()
        for r in rows:
            r["snippet"] = marked(r["snippet"], q)
        return {"q": q, "total": total, "rows": plain(rows), "truncated": total > len(rows)}


def _csv(batches: Any, out: Any) -> None:
    """The batches as `runstore sql -F csv` writes their table: the header once, then each
    batch's rows as it comes."""
    import pyarrow as pa

    from ..present import render

    header: str | None = None
    for batch in batches:
        text = render.render(pa.Table.from_batches([batch]), "csv")
        if header is None:
            header = render.render(pa.Table.from_batches([batch.slice(0, 0)]), "csv")
            out.write(header.encode())
        out.write(text[len(header):].encode())


def _parquet(batches: Any, out: Any) -> None:
    """The batches as one Parquet file, written as they come."""
    import pyarrow.parquet as pq

    writer = None
    for batch in batches:
        if writer is None:
            writer = pq.ParquetWriter(out, batch.schema)
        writer.write_batch(batch)
    if writer is not None:
        writer.close()


def marked(snippet: str, q: str) -> dict[str, Any]:
    """`Store.search`'s snippet (the text around a message's first match of `q`, as statement
    `browse.search` cuts it) split at that match: `{"before", "match", "after"}` (the page
    marks `match`; all of it `before` should Python not find the match DuckDB found)."""
    import re

    found = re.search(re.escape(q), snippet, re.IGNORECASE)
    if found is None:
        return {"before": snippet, "match": "", "after": ""}
    return {"before": snippet[:found.start()], "match": found.group(),
            "after": snippet[found.end():]}
