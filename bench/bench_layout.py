"""`metrics_raw`'s Parquet layout against one-key questions over the `metrics` view.

    python bench/bench_layout.py --store DIR [--rows 131072,32768] [--sort-runs]
                                 [--repeat 9]

What does the row-group size of `metrics_raw`'s files cost a one-key question? The store is
only read: each live `metrics_raw` file of its newest snapshot is written again, its rows in
the order they are (the ingest's, grouped by key; `--sort-runs`: sorted by (key, run_id)),
under a temporary directory by deltalake's writer with the ingest's page settings (Snappy,
pages of at most `layout.PAGE_ROWS` rows), in row groups of each `--rows` size. The store's
own files are the reference layout. On one connection over the store
(`connect(allow_read=...)`), each layout gets its table and the `metrics` view of
sql/metrics.sql over it; bench_view.py's questions are timed over each bare table and each
view, in interleaved rounds (best of `--repeat`), in wall time and in CPU time (every DuckDB
thread of this process: it moves less with the machine's load). Prints each figure as a
ratio to the reference layout's bare scan, and each layout's bytes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_view import QUESTIONS, RAW_LIVE  # noqa: E402 - beside this file


def relayout(files: list[str], out: Path, rows: int, sort_runs: bool) -> list[str]:
    """`files` written again under `out` in row groups of `rows` (`sort_runs`: their rows
    sorted by (key, run_id))."""
    import pyarrow.parquet as pq
    from deltalake import WriterProperties, write_deltalake

    from runstore.storage.layout import PAGE_ROWS

    props = WriterProperties(compression="SNAPPY", data_page_row_count_limit=PAGE_ROWS,
                             max_row_group_size=rows)
    for f in files:
        data = pq.read_table(f)
        if sort_runs:
            data = data.sort_by([("key", "ascending"), ("run_id", "ascending")])
        write_deltalake(str(out), data, mode="append", writer_properties=props)
    return sorted(str(p) for p in out.glob("*.parquet"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True)
    ap.add_argument("--rows", default="131072,32768",
                    help="row-group sizes to write, comma-separated")
    ap.add_argument("--sort-runs", action="store_true",
                    help="also sort each file's rows by (key, run_id)")
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    import runstore
    from runstore.storage.snapshot import table_files

    store = runstore.open(args.store)
    files = table_files(store.path, store.manifest(), "metrics_raw")
    view = "\n".join(line for line in (HERE.parent / "sql" / "metrics.sql").read_text()
                     .splitlines() if not line.startswith("--"))
    with tempfile.TemporaryDirectory(prefix="runstore-layout-") as tmp:
        layouts = {"store's files": files}
        for rows in [int(r) for r in args.rows.split(",")]:
            layouts[f"row groups of {rows}"] = relayout(files, Path(tmp) / str(rows), rows,
                                                        args.sort_runs)
        con = store.connect(allow_read=[tmp])
        tables: dict[str, tuple[str, bool]] = {}  # label -> (table, is the bare scan)
        for i, (name, fs) in enumerate(layouts.items()):
            con.execute(f"create view raw_{i} as select * from read_parquet("
                        f"[{', '.join(repr(f) for f in fs)}], union_by_name = true, "
                        f"can_have_nan = true)")
            con.execute(f"create view view_{i} as {view.replace('metrics_raw', f'raw_{i}')}")
            tables[f"{name}: scan"] = (f"raw_{i}", True)
            tables[f"{name}: metrics"] = (f"view_{i}", False)
        clocks = {"wall": time.perf_counter, "CPU": time.process_time}
        times: dict[tuple[str, str, str], float] = {}
        for _ in range(args.repeat):
            for q, sql in QUESTIONS.items():
                for label, (t, bare) in tables.items():
                    text = sql.format(t=t, live=RAW_LIVE if bare else "")
                    start = {c: clock() for c, clock in clocks.items()}
                    con.execute(text).fetchall()
                    for c, clock in clocks.items():
                        took = clock() - start[c]
                        times[(c, q, label)] = min(times.get((c, q, label), took), took)
        print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        for name, fs in layouts.items():
            print(f"{name}: {sum(os.path.getsize(f) for f in fs) / 1e6:.1f} MB")
        for c in clocks:
            print(f"\n{c} time\n\n| question | " + " | ".join(tables) + " |")
            print("|---|" + "---|" * len(tables))
            for q in QUESTIONS:
                scan = times[(c, q, next(iter(tables)))]
                print(f"| {q} | " + " | ".join(f"{times[(c, q, label)] * 1000:.1f} ms "
                                                f"({times[(c, q, label)] / scan:.1f}×)"
                                                for label in tables) + " |")


if __name__ == "__main__":
    main()
