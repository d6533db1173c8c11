"""What the content hashes cost, measured in one process, side by side.

Copies the live files of some tables of an existing store (a part of it), then, `--repeat`
times, interleaved:

* write: the tables written again as a Delta table the way a commit does (`write_deltalake`
  with runstore's writer properties), then the hashes of the files written
  (`integrity.entry`): the hash is the overhead of a commit;
* read: a query DuckDB answers over the files, the hashes of those files (what verifying on
  every read would cost, and what `compact` pays before it rewrites), and the full check
  `runstore repair --check` makes (`integrity.verify`: hash and decode every page).

    python bench/bench_checksums.py --store bench/out/store --tables metrics_raw,spans

Prints one markdown table of medians (seconds) and the ratios.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

QUERIES = {
    "metrics_raw": "select key, count(*), avg(value) from read_parquet($files) group by key",
    "spans": "select name, sum(duration_s) from read_parquet($files) group by name",
}
DEFAULT_QUERY = "select count(*) from read_parquet($files)"


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import write_deltalake

    from runstore.storage import integrity
    from runstore.storage.layout import writer_properties
    from runstore.storage.manifest import read_manifest
    from runstore.storage.writer import delta_table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="an existing store (read only)")
    parser.add_argument("--tables", default="metrics_raw,spans")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-files", type=int, default=0,
                        help="copy at most this many files per table (0: all)")
    args = parser.parse_args()
    source = Path(args.store)
    manifest = read_manifest(source)
    assert manifest is not None, f"no store at {source}"
    work = Path(tempfile.mkdtemp(prefix="bench-checksums-"))
    rows = []
    try:
        for name in args.tables.split(","):
            files = manifest.tables[name]["files"]
            if args.max_files:
                files = files[: args.max_files]
            copy = work / "copy"
            for rel in files:
                (copy / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source / rel, copy / rel)
            data = pa.concat_tables([pq.read_table(copy / rel) for rel in files])
            size = sum((copy / rel).stat().st_size for rel in files)
            query = QUERIES.get(name, DEFAULT_QUERY)
            paths = [str(copy / rel) for rel in files]
            samples: dict[str, list[float]] = {k: [] for k in
                                               ("write", "hash_written", "query", "hash_read",
                                                "full_check")}
            for r in range(args.repeat):
                out = work / f"out{r}" / "tables" / name
                samples["write"].append(timed(lambda: write_deltalake(
                    str(out), data, mode="append",
                    writer_properties=writer_properties(name))))
                dt = delta_table(out)
                samples["hash_written"].append(timed(
                    lambda: integrity.entry(work / f"out{r}", dt, None)))
                con = duckdb.connect()
                samples["query"].append(timed(
                    lambda: con.execute(query, {"files": paths}).fetchall()))
                con.close()
                samples["hash_read"].append(timed(
                    lambda: [integrity.digest(copy, rel) for rel in files]))
                samples["full_check"].append(timed(
                    lambda: [integrity.verify(copy, rel, None) for rel in files]))
                shutil.rmtree(work / f"out{r}")
            med = {k: statistics.median(v) for k, v in samples.items()}
            rows.append((name, len(files), size, med))
            shutil.rmtree(copy)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| table | files | MB | write s | + hashes s (ratio) | query s | hash files s "
          "(ratio) | full check s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, n, size, m in rows:
        print(f"| {name} | {n} | {size / 1e6:.1f} | {m['write']:.3f} | {m['hash_written']:.3f} "
              f"({m['hash_written'] / m['write']:.1%}) | {m['query']:.3f} | "
              f"{m['hash_read']:.3f} ({m['hash_read'] / m['query']:.0%}) | "
              f"{m['full_check']:.3f} |")


if __name__ == "__main__":
    main()
