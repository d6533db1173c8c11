"""Independent answers for the analysis tests (keys, diff, compare, trends), from the run files.

Nothing here imports runstore: metrics.jsonl, config.json and code.diff are read with plain
`json` (through oracle.py's line reader, which also never imports runstore), and every
statistic is computed in plain Python, so the tests compare two implementations.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import duckdb

import oracle

TIME_KEY = "time/total"


def runs(root: Path) -> dict[str, Path]:
    """run_name -> run directory, as ingest names them (relative to the tree root)."""
    return {oracle.run_name(root, r): r for r in oracle.run_dirs(root)}


def metric_files(run: Path) -> list[tuple[Path, bool]]:
    """(file, is_live) for metrics.jsonl and its pre_resume copies."""
    out = []
    for f in sorted(run.iterdir()):
        if f.name == "metrics.jsonl":
            out.append((f, True))
        elif f.name.startswith("metrics.jsonl.pre_resume_") and f.name[25:].isdigit():
            out.append((f, False))
    return out


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def keys(root: Path, names: set[str] | None = None) -> dict[str, tuple]:
    """key -> (n_runs, n_points, first_step, last_step, type) as `runstore keys` defines them."""
    runs_of: dict[str, set[str]] = {}
    steps: dict[str, dict[str, set[int]]] = {}
    kinds: dict[str, set[str]] = {}
    for name, run in runs(root).items():
        if names is not None and name not in names:
            continue
        for f, live in metric_files(run):
            for step, key, value, _ in oracle.metric_rows(f):
                runs_of.setdefault(key, set()).add(name)
                kinds.setdefault(key, set()).add("number" if is_number(value) else "string")
                if live and step is not None:
                    steps.setdefault(key, {}).setdefault(name, set()).add(step)
    out = {}
    for key in runs_of:
        per = steps.get(key, {})
        every = set().union(*per.values()) if per else set()
        kind = kinds[key]
        out[key] = (len(runs_of[key]), sum(len(s) for s in per.values()),
                    min(every) if every else None, max(every) if every else None,
                    "both" if len(kind) == 2 else next(iter(kind)))
    return out


def series(run: Path, key: str) -> dict[int, float]:
    """step -> live numeric value of `key` (the last write of the step; a step whose last write
    is a string has none)."""
    return {s: float(v) for (s, k), v in oracle.live_metrics(run).items()
            if k == key and is_number(v)}


def config(run: Path) -> dict[str, Any] | None:
    """The flattened config.json (dotted keys), None when the run has no readable one."""
    try:
        cfg = json.loads((run / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return oracle.flatten(cfg) if isinstance(cfg, dict) else None


def finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def ema(values: list[float], w: float) -> list[float | None]:
    """The debiased EMA over the finite values, carried over the others (definition)."""
    out: list[float | None] = []
    seen: list[float] = []
    for v in values:
        if finite(v):
            seen.append(v)
        if not seen:
            out.append(None)
            continue
        k = len(seen)
        out.append(sum(w ** (k - 1 - j) * x for j, x in enumerate(seen))
                   / sum(w ** (k - 1 - j) for j in range(k)))
    return out


def band(values: list[float]) -> dict[str, Any]:
    """n, mean, sample std (None below two values), min, max of finite values."""
    xs = [v for v in values if finite(v)]
    return {"n": len(xs), "mean": statistics.fmean(xs) if xs else None,
            "std": statistics.stdev(xs) if len(xs) > 1 else None,
            "min": min(xs) if xs else None, "max": max(xs) if xs else None}


def close(a: Any, b: Any, rel: float = 1e-9) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)
    return a == b


class SqlStore:
    """A store-like object over a plain in-memory DuckDB holding the given Arrow tables, for
    tables the real store does not have yet (the `metric_keys` summary)."""

    def __init__(self, tables: dict[str, Any]):
        self.con = duckdb.connect()
        self.names = list(tables)
        for name, table in tables.items():
            self.con.register(f"_{name}", table)
            self.con.execute(f"create table {name} as select * from _{name}")
        # The `metrics` view, as sql/metrics.sql defines it.
        sql = (Path(__file__).resolve().parents[1] / "sql" / "metrics.sql").read_text()
        body = "\n".join(l for l in sql.splitlines() if not l.lstrip().startswith("--"))
        if "metrics_raw" in tables:
            self.con.execute(f"create view metrics as {body}")

    def arrow(self, sql: str, params: dict[str, Any] | None = None) -> Any:
        return self.con.sql(sql, params=params or None).to_arrow_table()

    def tables(self) -> list[str]:
        return self.names
