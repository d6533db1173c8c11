"""`Store`: the one entry object of the library (`runstore.open(path)`).

Contract: a `Store` names a store location (`--store`, else `$RUNSTORE_STORE`, else
`./.runstore`; local or `s3://`). Each method is one call into the package that owns the work:
writing methods (`ingest` → `ingest`, `compact`/`migrate`/`set_setting` → `storage.writer`,
`repair` → `storage.repair`) take the store's write lock for their duration
(`repair(check=True)` only reads and takes none); reading methods go through
`query.session.Session`: an in-memory DuckDB over the newest snapshot (one per snapshot, kept
while no newer one is published; each query on its own cursor), so a long-lived `Store` always
sees the latest committed state and never blocks anyone. Every query connection is confined by
DuckDB's sandbox to the snapshot's files (`query.connect`, `query.sandbox`);
`allow_read=[paths]` lets one query also read those files (on a connection of its own);
`timeout=SECONDS` stops one still running then (`query.deadline`). Queries are read-only
(`query.guard`) and take values only as bound parameters; a parameter that the query does not
use and that names no setting is an error (a typo in `kl_threshold` must not pass silently).
Comparing runs (`keys`, `diff`, `code_diff`, `compare`) is `runstore.analysis`, checks
(`check`) `runstore.health`. Results are polars DataFrames (`sql`, `metrics`, `runs`, `check`,
`keys`, `diff`, `compare`), a LazyFrame (`table`, `sql(lazy=True)`), Arrow (`arrow`), plotly
figures (`plot_*`, from `present.charts`) or whatever `fetch`'s `convert` makes of DuckDB's
result; polars and pyarrow are imported only when a method needs them, so importing runstore
stays cheap. Used as a context manager, a `Store` closes its cached DuckDB database on exit.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, TypeVar

from .errors import QueryError, UsageError
from .query import connect
from .query.session import Session
from .query.statements import frames
from .query.views import View, views
from .storage import migrate as migrate_mod
from .storage import schema, settings as settings_mod, snapshot
from .storage.location import location
from .storage.manifest import Manifest, Root
from .storage.writer import CompactReport, writer

if TYPE_CHECKING:
    import plotly.graph_objects as go
    import polars as pl
    import pyarrow as pa

    from .ingest.report import IngestReport, Progress
    from .storage.repair import RepairReport

T = TypeVar("T")

DEFAULT_STORE = ".runstore"


def resolve(store: str | os.PathLike[str] | None = None) -> Root:
    """The store location: the argument, else $RUNSTORE_STORE, else ./.runstore. An
    `s3://bucket/prefix` names a store on S3-compatible object storage (see docs/scale.md)."""
    chosen = store if store not in (None, "") else os.environ.get("RUNSTORE_STORE") or DEFAULT_STORE
    return location(chosen).resolved()


class Store:
    """A runstore store. Create with `runstore.open(path)`; usable as a context manager.

    Example:
        >>> import runstore, tempfile
        >>> from runstore import demo
        >>> tmp = tempfile.mkdtemp()
        >>> _ = demo.generate_tree(tmp + "/runs")
        >>> store = runstore.open(tmp + "/store")
        >>> store.ingest([tmp + "/runs"]).runs_new > 0
        True
    """

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = resolve(path)
        # One DuckDB database per snapshot, shared by this Store's queries (and threads: the
        # web UI's request threads share one Store); see query/session.py.
        self._session = Session(self.path, self.manifest)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._session.close()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # -- writing -------------------------------------------------------------------------
    def ingest(self, paths: Iterable[str | os.PathLike[str]] | str, *,
               progress: "Progress | None" = None, on_warning: Any = None,
               lock_timeout: float = 60.0, require_runs: bool = True,
               interrupts: Any = None) -> "IngestReport":
        """Ingest every run under `paths` (incrementally); returns what was done.

        A path that is a file of a run ingests that run. Paths that hold no run raise
        `NoRuns` (and create no store), unless `require_runs=False` (watching: runs may
        appear later); one without runs beside others with runs is a warning.

        Ctrl-C (SIGINT, in the main thread) publishes what was read whole, then raises
        KeyboardInterrupt whose `report` attribute is the IngestReport of what was kept; a
        second Ctrl-C stops at once. `interrupts` replaces that handling (`ingest.interrupts`)."""
        from .ingest.run import ingest

        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        return ingest(self.path, list(paths), progress=progress, on_warning=on_warning,
                      lock_timeout=lock_timeout, require_runs=require_runs,
                      interrupts=interrupts)

    def compact(self, *, vacuum_hours: float | None = None,
                lock_timeout: float = 60.0) -> CompactReport:
        """Rewrite every table into few files and publish the snapshot; with `vacuum_hours`,
        then delete the files no kept snapshot lists and none has listed for that many hours
        (at least `vacuum.READER_GRACE_S`, for queries still reading an older snapshot).
        Returns each table's file count before (`files_before`) and what the vacuum deleted
        (`vacuum`, a `vacuum.VacuumReport`)."""
        if vacuum_hours is not None and not (
                isinstance(vacuum_hours, (int, float)) and vacuum_hours >= 0):
            raise UsageError(f"vacuum_hours must be a number of hours of at least 0, got "
                             f"{vacuum_hours!r}")
        self.manifest()
        with writer(self.path, lock_timeout=lock_timeout) as w:
            report = CompactReport(w.compact())
            if vacuum_hours is not None:
                report.vacuum = w.vacuum(float(vacuum_hours))
        return report

    def repair(self, *, check: bool = False, lock_timeout: float = 60.0) -> "RepairReport":
        """Mend a damaged store (missing, corrupt or bit-rotten files, a broken Delta log,
        manifest, ledger or lock); returns what was done. With `check=True`, change nothing:
        read every live file in full and report what is damaged (`report.problems`). See
        docs/reliability.md.

        Example:
            >>> store.repair(check=True).problems
            []
        """
        from .ingest.discover import source_files
        from .ingest.normalize.registry import kinds_writing
        from .storage.repair import Sources
        from .storage.repair import check as check_store
        from .storage.repair import repair

        sources = Sources(writers=kinds_writing, files=source_files)
        defaults = settings_mod.DEFAULT_SETTINGS
        if check:
            return check_store(self.path, sources, settings=defaults)
        return repair(self.path, sources, lock_timeout=lock_timeout, settings=defaults)

    def migrate(self, *, lock_timeout: float = 60.0) -> list[str]:
        """Apply pending schema migrations; returns their names."""
        self.manifest()
        with writer(self.path, lock_timeout=lock_timeout) as w:
            return [m.name for m in migrate_mod.apply(w)]

    def set_setting(self, name: str, value: float | str, *, lock_timeout: float = 60.0) -> None:
        """Store a setting (e.g. `kl_threshold`) that every later query sees by default.

        A query can still override it with a param of the same name. Known settings:
        `kl_threshold` (a number; 0.01 unless set).
        """
        value = settings_mod.coerce(name, value)
        self.manifest()
        with writer(self.path, lock_timeout=lock_timeout) as w:
            assert w.manifest is not None
            w.commit(ledger=None, settings={**w.manifest.settings, name: value})

    def settings(self) -> dict[str, Any]:
        """The settings queries see by default: the built-in defaults, then the store's own."""
        return settings_mod.merged(self.manifest().settings)

    # -- reading -------------------------------------------------------------------------
    def manifest(self) -> Manifest:
        """The newest snapshot, checked: a store this runstore can read, with settings of the
        right types (`storage.snapshot.current`)."""
        return snapshot.current(self.path)

    def snapshot(self) -> int | None:
        """The number of the newest published snapshot (None before the first ingest).

        Cheap (one directory listing, no file read), so callers may poll it to learn that an
        ingest committed: every commit publishes a higher number.

        Example:
            >>> store.snapshot() > 0
            True
        """
        return self._session.snapshot()

    def connect(self, params: dict[str, Any] | None = None, *,
                allow_read: Iterable[str | os.PathLike[str]] | None = None) -> Any:
        """A fresh in-memory DuckDB connection over the newest snapshot, every table and view
        created, confined by DuckDB's sandbox to the snapshot's files (and `allow_read`)."""
        return connect.connect(self.path, self.manifest(), params, allow_read=_paths(allow_read))

    def fetch(self, sql: str, params: dict[str, Any] | None = None, *,
              allow_read: Iterable[str | os.PathLike[str]] | None = None,
              convert: "Callable[[Any], T]", timeout: float | None = None) -> T:
        """Run one read-only query; `convert(result)` of its result (`query.result.Result`).

        The guard (`query.guard`) checks the query and the params first; `convert` runs
        while the query's cursor is open (e.g. `lambda r: r.fetchall()`). `arrow` and `sql`
        are this with their conversions. `timeout`: as in `sql` (it covers `convert` too).
        """
        return self._session.fetch(sql, params, allow_read=_paths(allow_read), convert=convert,
                                   timeout=timeout)

    def arrow(self, sql: str, params: dict[str, Any] | None = None, *,
              allow_read: Iterable[str | os.PathLike[str]] | None = None,
              timeout: float | None = None) -> "pa.Table":
        """Run one read-only query; the result as a pyarrow Table (`timeout` as in `sql`).

        Example:
            >>> store.arrow("select count(*) as n from runs").column("n").to_pylist()
            [11]
        """
        return self.fetch(sql, params, allow_read=allow_read,
                          convert=lambda rel: rel.to_arrow_table(), timeout=timeout)

    def sql(self, sql: str, params: dict[str, Any] | None = None, *, lazy: bool = False,
            allow_read: Iterable[str | os.PathLike[str]] | None = None,
            timeout: float | None = None) -> "pl.DataFrame | pl.LazyFrame":
        """Run one read-only query; a polars DataFrame (LazyFrame with `lazy=True`).

        Values go in `params` and are bound to the query's `$name` placeholders, never pasted
        into its text. A param named like a setting (`kl_threshold`) overrides that setting
        for this query. The query reads only the store's files (DuckDB's sandbox); list an
        outside file or directory in `allow_read` to read it as well. `timeout=SECONDS` (None:
        no limit; else above 0) stops the query if it still runs then, with a `QueryError`.

        Example:
            >>> store.sql("select run_name from kl_health where flagged")["run_name"].to_list()
            ['gsm8k_tool_rl/sweep/lr_1e-3/seed_0']
            >>> store.sql("select count(*) as n from kl_health where flagged",
            ...           params={"kl_threshold": 0.002}).item()
            3
            >>> store.sql("select run_name from runs where run_name glob $g order by 1",
            ...           params={"g": "math_rl_sweep/qwen3-8b/*"}).height
            3
            >>> store.sql("select * from metrics", lazy=True).collect_schema().names()
            ['run_id', 'step', 'key', 'value', 'value_str', 'seq']
        """
        df = self.fetch(sql, params, allow_read=allow_read, convert=_polars, timeout=timeout)
        return df.lazy() if lazy else df

    def _frame(self, sql: str, params: dict[str, Any] | None,
               allow_read: Iterable[str | os.PathLike[str]] | None = None) -> "pl.DataFrame":
        return self.fetch(sql, params, allow_read=allow_read, convert=_polars)

    def metrics(self, keys: str | Sequence[str], *, runs: str | None = None,
                wide: bool = False) -> "pl.DataFrame":
        """Live metrics of `keys` (the `metrics` view), optionally for runs matching a GLOB.

        `runs` is a GLOB over `run_name` (`*` matches `/` too). Long form (default): one row
        per run, step and key with `run_id, run_name, step, key, value, value_str`. With
        `wide=True`: one row per run and step, with `run_id, run_name, step` and one column
        per key named exactly like the key (numeric values; a step that logs only some of
        the keys has nulls in the others). A key that no run in the store has logged raises
        `UnknownKey` naming the closest logged keys; a key that only some runs log is fine
        (those runs have rows, the others none) and says nothing.

        Example:
            >>> df = store.metrics(["env/all/reward/total", "optim/kl_sample_train_v1"],
            ...                    runs="math_rl_sweep/*", wide=True)
            >>> df.columns
            ['run_id', 'run_name', 'step', 'env/all/reward/total', 'optim/kl_sample_train_v1']
            >>> df["run_name"].n_unique(), df.height
            (4, 160)
            >>> store.metrics("env/all/reward/total").columns
            ['run_id', 'run_name', 'step', 'key', 'value', 'value_str']
            >>> store.metrics("env/all/rewrd/total")
            Traceback (most recent call last):
            runstore.errors.UnknownKey: no run in the store logs metric 'env/all/rewrd/total'; did you mean env/all/reward/total? (runstore sql "select distinct key from metrics_raw order by 1" lists every key)
        """
        from .query import keys as keys_mod

        statement = frames.metrics_query(keys, runs=runs, wide=wide)
        keys_mod.require(self, frames.metric_keys(keys))
        return self._frame(*statement)

    def runs(self, *, kind: str | None = None, name: str | None = None,
             where: str | None = None, columns: Sequence[str] | None = None) -> "pl.DataFrame":
        """`run_summary` as a DataFrame, one row per run, ordered by `run_name`.

        `kind` filters on the run kind (`rl`, `sl`, `dpo`, `unknown`), `name` is a GLOB over
        `run_name`, `where` one SQL condition over run_summary's columns (checked to be a
        plain expression: no statements or subqueries). `columns` picks and orders the
        columns (default: all, `run_id` first; a name the view lacks is a `UsageError`).

        Example:
            >>> store.runs().height
            11
            >>> store.runs(kind="rl", where="best_reward > 0.5")["run_name"].to_list()[:2]
            ['gsm8k_tool_rl/sweep/lr_1e-3/seed_0', 'gsm8k_tool_rl/sweep/lr_1e-4/seed_0']
            >>> store.runs(columns=["run_name", "status"]).columns
            ['run_name', 'status']
        """
        return self._frame(*frames.runs_query(kind=kind, name=name, where=where,
                                              columns=columns))

    def check(self, *, threshold: float | None = None, rules: Iterable[Any] | None = None,
              runs: str | None = None, since_step: int | None = None,
              default_rules: bool | None = None,
              config: bool | str | os.PathLike[str] = True) -> "pl.DataFrame":
        """Health rules over live metrics: one row per (run, rule) that fires.

        Columns: `run_name, rule, first_step, last_step, steps_over, longest_streak, peak,
        latest, status`. The default rule is KL v1 or v2 (either spelling) above `threshold`
        (else runstore.toml's `[check] threshold`, else the `kl_threshold` setting, else
        0.01), with `kl_health`'s semantics. `rules` adds `health.rules.Rule`s,
        `health.trends.TrendRule`s or text such as `"optim/entropy < 0.05"` or the trend
        rules `"drop(env/all/reward/total) > 0.2"`, `"rise(time/total) > 2"`,
        `"stale > 30"`; `default_rules=False` drops the KL rule; `runs` is a GLOB
        over `run_name`; `since_step` ignores earlier steps. `config=True` also reads the
        `[[check.rule]]`s of the runstore.toml beside the store or in the working directory
        (`False`: none; a path: that file). A rule naming a metric that no run has logged
        raises `UnknownKey` (a misspelt rule would never fire); `runstore.health.evaluate.check`
        returns the same rows with per-rule counts and the CLI's one-line summary. See
        docs/checks.md.

        Example:
            >>> store.check()[["run_name", "rule", "first_step", "steps_over"]].rows()
            [('gsm8k_tool_rl/sweep/lr_1e-3/seed_0', 'kl_sample_train_v1|v2 > 0.01', 22, 8)]
            >>> store.check(since_step=100).height
            0
            >>> store.check(rules=["optim/entrpy < 0.5"])
            Traceback (most recent call last):
            runstore.errors.UnknownKey: no run in the store logs optim/entrpy (rule 'optim/entrpy < 0.5'); did you mean optim/entropy? (runstore sql "select distinct key from metrics_raw order by 1" lists every key)
        """
        from .health.evaluate import check

        return check(self, threshold=threshold, rules=rules, runs=runs, since_step=since_step,
                     default_rules=default_rules, config=config, arrow=False).frame()

    # -- comparing runs (runstore.analysis) ------------------------------------------------
    def keys(self, *, runs: "str | Sequence[str] | None" = None,
             like: str | None = None) -> "pl.DataFrame":
        """One row per metric key logged by a run in scope: `key, n_runs, n_points` (live
        points: the `metrics` view's rows), `first_step, last_step, type` (`number`, `string`
        or `both`). `runs`: a GLOB over `run_name` or a list of names; `like`: a substring
        (any case), or an ILIKE pattern when it holds a `%`. See docs/compare.md.

        Example:
            >>> store.keys(like="reward/total", runs="math_rl_sweep/*").rows()
            [('env/all/reward/total', 4, 160, 0, 39, 'number'), ('test/env/all/reward/total', 4, 20, 0, 40, 'number')]
        """
        from .analysis.keys import keys

        return keys(self, runs=runs, like=like)

    def diff(self, runs: Sequence[str], all: bool = False) -> "pl.DataFrame":  # noqa: A002
        """Config diff: one row per flattened config key (dotted path), one column per run
        (named by `run_name`, in the order given), only keys whose values differ unless
        `all=True` (which adds a `differs` column). A cell is the value's JSON text; a key a
        run lacks is null (missing, never a JSON null, which is the text `null`). A last row
        `code.diff` summarises each run's code.diff (`A: 12 lines, 3456 bytes`; same letter,
        same content). Each of `runs` is a run name, or a GLOB or prefix naming exactly one
        run. `code_diff(runs)` gives the unified diff.

        Example:
            >>> df = store.diff(["gsm8k_tool_rl/sweep/lr_1e-4/seed_0", "gsm8k_tool_rl/sweep/lr_1e-3"])
            >>> df.filter(df["key"] == "learning_rate").rows()
            [('learning_rate', '0.0001', '0.001')]
        """
        from .analysis.diff import diff

        return diff(self, runs, all=all)

    def code_diff(self, runs: Sequence[str]) -> str:
        """Unified diff of each run's code.diff against the first's (`runstore diff --code`).

        Example:
            >>> store.code_diff(["sl/tulu3_qwen3-8b_lr2e-4", "dpo/*"])
            "# dpo/hh_llama-3.1-8b_beta0.1/code.diff: identical to sl/tulu3_qwen3-8b_lr2e-4's\\n"
        """
        from .analysis.diff import code_diffs

        return code_diffs(self, runs)

    def compare(self, metric: str, *, runs: "str | Sequence[str] | None" = None,
                group_by: "str | Sequence[str] | None" = None, smooth: float | None = None,
                x: str = "step") -> "pl.DataFrame":
        """Grouped curves with bands: per group and x, `n, n_nan, n_inf, mean, std, min,
        max` of `metric`'s live values (and `smooth_n, smooth_mean, smooth_std, smooth_min,
        smooth_max` with `smooth=W`, the debiased EMA per run before grouping).

        `group_by`: config keys (dotted) or run columns (`model_name`, `learning_rate`,
        `kind`), or `"auto"` (runs whose configs differ only in seed-like keys); None: one
        group per run. `x="time"` puts points at wall time since the run's first step
        (`time_s`, from `time/total`). NaN and ±Infinity are counted in `n_nan`/`n_inf`,
        never aggregated. See docs/compare.md.

        Example:
            >>> df = store.compare("env/all/reward/total", runs="gsm8k_tool_rl/*",
            ...                    group_by="learning_rate", smooth=0.9)
            >>> df.filter(df["step"] == 0).select("group", "n").rows()
            [('learning_rate=0.0001', 2), ('learning_rate=0.0003', 2), ('learning_rate=0.001', 1)]
        """
        from .analysis.compare import compare

        return compare(self, metric, runs=runs, group_by=group_by, smooth=smooth, x=x)  # type: ignore[arg-type]

    def views(self) -> tuple[View, ...]:
        """The canned views (name, description, documented columns, SQL), in dependency order.

        Example:
            >>> [v.name for v in store.views()][:3]
            ['metrics', 'eval_metrics', 'kl_steps']
            >>> dict(next(v for v in store.views() if v.name == "kl_health").columns)["flagged"]
            'true when any step is over the threshold'
        """
        return views()

    def table(self, name: str) -> "pl.LazyFrame":
        """One table of the newest snapshot as a polars LazyFrame (scanning its live files).

        Example:
            >>> store.table("trajectories").select("split").unique().sort("split").collect()["split"].to_list()
            ['eval/aime2025', 'eval/test', 'train']
        """
        import polars as pl

        if name not in schema.TABLES:
            raise QueryError(f"no table {name!r}; tables: {', '.join(schema.TABLES)}")
        files = snapshot.table_files(self.path, self.manifest(), name)
        if not files:
            return pl.from_arrow(schema.empty(name)).lazy()  # type: ignore[union-attr]
        return pl.scan_parquet(files, missing_columns="insert", extra_columns="ignore",
                               storage_options=self.path.storage_options())

    def tables(self) -> Sequence[str]:
        """The public table names (see `runstore schema`)."""
        return list(schema.TABLES)

    # -- pictures (runstore.present: charts, report, trace_export) -------------------------
    def plot_metric(self, keys: str | Sequence[str], *, runs: str | None = None,
                    color_by: str | None = None, smooth: int | None = None) -> "go.Figure":
        """One line per run and key over steps (live values of the `metrics` view).

        `runs` is a GLOB over `run_name`; `color_by` a flattened config key (runs coloured
        by its value, with a legend); `smooth=N` adds an N-step EMA and keeps the raw line
        faint. Lines over 5,000 points keep each bucket's min and max (said in the subtitle).

        Example:
            >>> fig = store.plot_metric("env/all/reward/total", runs="math_rl_sweep/*",
            ...                         color_by="learning_rate", smooth=5)
            >>> sorted({t.meta["kind"] for t in fig.data})
            ['ema', 'raw']
        """
        from .present import charts

        return charts.plot_metric(self, keys, runs=runs, color_by=color_by, smooth=smooth)

    def plot_kl(self, *, runs: str | None = None,
                threshold: float | None = None) -> "go.Figure":
        """KL v1/v2 per run over steps, the threshold dashed, flagged runs on top and named
        in the title (threshold: the `kl_threshold` setting unless given).

        Example:
            >>> store.plot_kl().layout.title.text
            'KL sample→train — flagged: gsm8k_tool_rl/sweep/lr_1e-3/seed_0'
        """
        from .present import charts

        return charts.plot_kl(self, runs=runs, threshold=threshold)

    def plot_rewards(self, *, runs: str | None = None,
                     color_by: str | None = None) -> "go.Figure":
        """`reward_trends`: each step's reward (faint) and `reward_ma10` per run.

        Example:
            >>> len(store.plot_rewards(runs="gsm8k_tool_rl/*").data)
            10
        """
        from .present import charts

        return charts.plot_rewards(self, runs=runs, color_by=color_by)

    def plot_spans(self, run: str, *, step: int | None = None) -> "go.Figure":
        """A Gantt chart of one step's spans (default: the last step) in nesting order, over
        the share of step time of each top-level span at every step.

        Example:
            >>> fig = store.plot_spans("sl/tulu3_qwen3-8b_lr2e-4", step=3)
            >>> sorted({t.meta["kind"] for t in fig.data})
            ['gantt', 'share']
        """
        from .present import charts

        return charts.plot_spans(self, run, step=step)

    def report(self, path: str | os.PathLike[str], *, runs: str | None = None) -> Path:
        """Write the self-contained HTML report (summary, KL, rewards, spans, checkpoints).

        Example:
            >>> store.report("report.html", runs="gsm8k_tool_rl/*")  # doctest: +SKIP
            PosixPath('report.html')
        """
        from .present import report

        return report.write(self, path, runs)

    def trace(self, run: str, *, step: int | None = None, segment: int | None = None,
              source: str = "auto") -> list[dict[str, Any]]:
        """A run's timing as Chrome trace events (Perfetto UI, chrome://tracing), from
        `trace_slices`, or from `spans` when the run has no trace (`source` forces one).

        Example:
            >>> events = store.trace("sl/tulu3_qwen3-8b_lr2e-4", step=3)
            >>> sorted({e["ph"] for e in events})
            ['M', 'X']
        """
        from .present import trace_export as perfetto

        return perfetto.trace_events(self, run, step=step, segment=segment,
                                     source=source)  # type: ignore[arg-type]


def _polars(result: Any) -> "pl.DataFrame":
    """DuckDB's result as a polars DataFrame, through the Arrow C stream (no pyarrow)."""
    import polars as pl
    rel = result.relation()  # DuckDB's own errors (a refused file, say) raised as they are
    try:
        return pl.DataFrame(rel)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # polars panics (pyo3's PanicException) on types it lacks
        why = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise QueryError(f"polars cannot hold this result ({why}): cast the column (an "
                         "interval to varchar, say), or use store.arrow()") from e


def _paths(paths: Iterable[str | os.PathLike[str]] | str | None) -> list[str] | None:
    """`allow_read` as a list of strings (one path given bare is one path, not its letters)."""
    if paths is None:
        return None
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return [os.fspath(p) for p in paths]


def open(path: str | os.PathLike[str] | None = None) -> Store:  # noqa: A001 - the public name
    """Open the store at `path` (else $RUNSTORE_STORE, else ./.runstore)."""
    return Store(path)
