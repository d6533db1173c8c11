"""Where the KL statements' time goes: DuckDB's own profile of each, planning against running.

    python bench/bench_plan.py --store DIR [--store DIR]... [--repeat N]

For each store, runs `EXPLAIN (ANALYZE, FORMAT JSON)` of the statements bench_query.py times
side by side (the scan of the four KL keys, the KL question, `runstore check`'s statement for
the default rules, the KL chart's statement) and of a plain read of each view and table they
read, on a connection from `store.connect()` (the same sandboxed database every query uses).
Each item is the run with the smallest total of `--repeat` interleaved rounds. Prints, per
item, DuckDB's total, its binding, optimizer and physical-planning times, what is left for
running the plan, the files read, and the operators that took longest, as Markdown for
docs/benchmarks.md. DuckDB measures these itself (its `planner`, `optimizer`,
`physical_planner` and per-operator timings), so they need no clock of ours.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_query import KL_QUESTION_SQL, KL_SCAN_SQL  # noqa: E402

READS = ["runs", "checkpoints", "metric_keys", "metric_kl", "kl_steps", "run_status"]


def statements(store) -> dict[str, tuple[str, dict | None]]:
    """The statements to profile, by name: `(sql, params)`."""
    from runstore.health import evaluate
    from runstore.health.config import choose_rules
    from runstore.query.statements import named

    rules = choose_rules(store, config=False)
    out = {"scan": (KL_SCAN_SQL, None), "question": (KL_QUESTION_SQL, None),
           "check": evaluate.check_query(rules),
           "chart": (named("charts.kl_series"), {"runs": None})}
    out.update({f"read {name}": (f"select * from {name}", None) for name in READS})
    return out


def profile(con, sql: str, params: dict | None) -> dict:
    """DuckDB's profile of one run of `sql`, as the parts this report prints."""
    text = con.execute("explain (analyze, format json) " + sql, params).fetchall()[0][1]
    d = json.loads(text)
    d = d[0] if isinstance(d, list) else d
    ops: list[tuple[float, str, str]] = []
    files_read = 0

    def walk(node: dict) -> None:
        nonlocal files_read
        extra = node.get("extra_info") or {}
        what = extra.get("Function", "") if isinstance(extra, dict) else ""
        files = extra.get("Total Files Read", "") if isinstance(extra, dict) else ""
        files_read += int(files or 0)
        name = node.get("name", "")
        what = "" if what == name else what
        ops.append((node.get("timing", 0.0), name, f"{what} ({files} files)".strip()
                    if files else what))
        for child in node.get("children", []):
            walk(child)

    for node in d.get("operator", []):
        walk(node)
    planning = (d["planner"]["total_time"] + d["optimizer"]["total_time"]
                + d["physical_planner"]["total_time"])
    return {"total": d["query"]["total_time"], "bind": d["planner"]["binding_time"],
            "optimize": d["optimizer"]["total_time"],
            "physical": d["physical_planner"]["total_time"],
            "run": d["query"]["total_time"] - planning,
            "files": files_read,
            "top": [o for o in sorted(ops, reverse=True)[:3] if o[0] >= 0.0001]}


def main() -> None:
    import runstore

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, action="append", required=True)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    for path in args.store:
        store = runstore.open(path)
        items = statements(store)
        con = store.connect()
        best: dict[str, dict] = {}
        for name, (sql, params) in items.items():  # warm: footers cached, views bound once
            profile(con, sql, params)
        for _ in range(args.repeat):
            for name, (sql, params) in items.items():
                p = profile(con, sql, params)
                if name not in best or p["total"] < best[name]["total"]:
                    best[name] = p
        con.close()
        print(f"\n**{path.name}**: DuckDB's profile, best of {args.repeat} rounds (ms)\n")
        print("| statement | total | binding | optimizer | physical plan | running | files read "
              "| longest operators |")
        print("|---|---|---|---|---|---|---|---|")
        for name, p in best.items():
            top = "; ".join(f"{op} {what} {t * 1000:.1f}".replace("  ", " ").lower()
                            for t, op, what in p["top"])
            print(f"| {name} | {p['total'] * 1000:.1f} | {p['bind'] * 1000:.1f} | "
                  f"{p['optimize'] * 1000:.1f} | {p['physical'] * 1000:.1f} | "
                  f"{p['run'] * 1000:.1f} | {p['files']} | {top} |")


if __name__ == "__main__":
    main()
