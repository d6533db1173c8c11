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

    def fetch(self, sql: str, params: dict[str, Any] | None = None, *, convert: Any) -> Any:
        return convert(self.con.sql(sql, params=params or None))

    def tables(self) -> list[str]:
        return self.names


SPEND_KEYS = {"tokens": ("tokens/cumulative/sampled", "tokens/cumulative/trained"),
              "cost": ("cost/cumulative_usd",)}


def spend(run: Path, x: str) -> dict[int, float]:
    """step -> what the run had spent by it on axis `x`: the sum of the live finite values of
    the axis' cumulative keys at that step (steps with none left out)."""
    out: dict[int, float] = {}
    for key in SPEND_KEYS[x]:
        for step, value in series(run, key).items():
            if finite(value):
                out[step] = out.get(step, 0.0) + value
    return out


def curves(runs_: dict[str, Path], key: str, group_of: dict[str, Any], *,
           w: float | None = None, x: str = "step",
           bucket: float | None = None) -> dict[tuple[Any, float], dict[str, Any]]:
    """(group, x) -> the stats `compare` promises, from the files (see analysis.compare)."""
    per_run: dict[str, list[tuple[float, float, float | None]]] = {}  # run -> (x, raw, smoothed)
    medians = []
    for name, run in runs_.items():
        if name not in group_of:
            continue
        pts = sorted(series(run, key).items())
        if not pts:
            continue
        smoothed = ema([v for _, v in pts], w) if w is not None else [None] * len(pts)
        if x == "step":
            per_run[name] = [(float(s), v, sm) for (s, v), sm in zip(pts, smoothed)]
            continue
        if x in SPEND_KEYS:
            spent = spend(run, x)
            rises = [b - a for (_, a), (_, b) in zip(sorted(spent.items()),
                                                     sorted(spent.items())[1:]) if b > a]
            if rises:
                medians.append(statistics.median(rises))
            per_run[name] = [(spent[s], v, sm) for (s, v), sm in zip(pts, smoothed) if s in spent]
            continue
        durations = sorted((s, d) for s, d in series(run, TIME_KEY).items() if finite(d))
        if not durations:
            continue
        medians.append(statistics.median(d for _, d in durations))
        elapsed, total = {}, 0.0
        for s, d in durations:
            total += d
            elapsed[s] = total - durations[0][1]
        per_run[name] = [(elapsed[s], v, sm) for (s, v), sm in zip(pts, smoothed) if s in elapsed]
    if x != "step":
        if bucket is None:
            bucket = statistics.median(medians)
        for name, pts in per_run.items():
            last: dict[float, tuple[float, float, float | None]] = {}
            for e, v, sm in pts:  # in step order: the last point of a bucket wins
                start = math.floor(e / bucket) * bucket
                last[start] = (start, v, sm)
            per_run[name] = list(last.values())
    cells: dict[tuple[Any, float], list[tuple[float, float | None]]] = {}
    for name, pts in per_run.items():
        for xv, v, sm in pts:
            cells.setdefault((group_of[name], round(xv, 6)), []).append((v, sm))
    out = {}
    for cell, vals in cells.items():
        raw = [v for v, _ in vals]
        stats = band(raw)
        stats["n_nan"] = sum(math.isnan(v) for v in raw)
        stats["n_inf"] = sum(math.isinf(v) for v in raw)
        if w is not None:
            sm = band([s for _, s in vals if s is not None])
            stats.update({f"smooth_{k}": v for k, v in sm.items()})
        out[cell] = stats
    return out
