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
`timeout=SECONDS` stops one still running then (`query.deadline`); `memory_limit` bounds
DuckDB's memory, and `isolated=True` runs a query in a worker process capped at it
(`query.memory`, `query.workers`). Queries are read-only (`query.guard`) and take values only
as bound parameters; a parameter that the query does not
use and that names no setting is an error (a typo in `kl_threshold` must not pass silently).
Comparing runs (`keys`, `diff`, `code_diff`, `compare`, `groups`, `step_times`) is
`runstore.analysis`; checks (`check`, `check_result`, `notifier`, `watch`) and the doctor's
findings (`doctor`, `diagnosis`) `runstore.health`. Results are polars DataFrames (`sql`,
`metrics`, `runs`, `check`, `doctor`, `keys`, `diff`, `compare`, `groups`), a LazyFrame
(`table`, `sql(lazy=True)`), Arrow (`arrow`), plain rows (`rows`), whole results
(`check_result`: a `CheckResult`; `diagnosis`: a `Diagnosis`), plotly
figures (`plot_*`, from `present.charts`) or whatever `fetch`'s `convert` makes of DuckDB's
result; polars and pyarrow are imported only when a method needs them, so importing runstore
stays cheap. Used as a context manager, a `Store` closes its cached DuckDB database (and ends
its worker processes) on exit.

The class is put together from one part per group of methods: `base` (the location, the
snapshot, queries), `writing`, `questions` (metrics, runs, keys, comparisons), `checks`
(health rules, notifications, watching), `doctor` (what went wrong in each run),
`pictures` and `browsing` (one run in detail: files, config, rollouts, transcripts, spans; a
metric's downsampled history; pages of a transcript search). `inputs` checks what callers hand `Store` before a store is opened (durations,
memory sizes, smoothing weights, config key lists, request bodies, paths), and `catalog`
answers what any store holds without opening one (the views, the schema).

`runstore.store` is the front door: `cli/`, `ui/`, `agents/` and `demo/` import it, `present`
and `errors` and nothing else of the library (an import-linter contract in pyproject.toml),
so every caller gets whole results from here.
"""

from __future__ import annotations

import os

from .base import DEFAULT_STORE, StoreBase, resolve
from .browsing import Browsing
from .checks import Checks
from .doctor import Doctor
from .pictures import Pictures
from .questions import Questions
from .writing import Writing

__all__ = ["DEFAULT_STORE", "Store", "StoreBase", "open", "resolve"]


class Store(Writing, Questions, Checks, Doctor, Pictures, Browsing):
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


def open(path: str | os.PathLike[str] | None = None, *,  # noqa: A001 - the public name
         memory_limit: int | str | None = None) -> Store:
    """Open the store at `path` (else $RUNSTORE_STORE, else ./.runstore). `memory_limit`
    (bytes, or text such as `4GB` or `25%`; else $RUNSTORE_MEMORY_LIMIT, else a quarter of
    the machine's memory) is what one query may use (see `Store.sql`)."""
    return Store(path, memory_limit=memory_limit)
