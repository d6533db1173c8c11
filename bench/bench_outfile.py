"""What writing a command's output file costs: over the old file, or renamed over it.

A page the size of a chart of 100 runs (`--mb`, 8 MB by default: plotly.js and 3 MB of data)
is written `--repeat` times each way, interleaved, over a file of the same size already
there, in a temporary directory beside the store's (or `--dir`):

* in place: `open(path, "wb")` and the page written, as runstore wrote `-o` files before;
* replaced: `runstore.present.outfile.replace`, written under a temporary name and renamed
  over the old file;
* new name: the old file removed first, then the page written (a floor, for scale).

    python bench/bench_outfile.py [--mb 8] [--repeat 21] [--dir DIR]

Prints the medians (ms) and the ratio of in place to replaced, as markdown.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from runstore.present.outfile import replace


def in_place(path: Path, parts: list[bytes]) -> None:
    with open(path, "wb") as f:
        for part in parts:
            f.write(part)


def new_name(path: Path, parts: list[bytes]) -> None:
    path.unlink(missing_ok=True)
    in_place(path, parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=8.0)
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    size = int(args.mb * 2 ** 20)
    parts = [os.urandom(size // 2), os.urandom(size - size // 2)]
    ways = {"in place": in_place, "replaced": replace, "new name": new_name}
    times: dict[str, list[float]] = {w: [] for w in ways}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / "page.html"
        in_place(path, parts)
        for _ in range(args.repeat):
            for way, write in ways.items():
                in_place(path, parts)  # the old file, as large, before each write
                start = time.perf_counter()
                write(path, parts)
                times[way].append(time.perf_counter() - start)
    med = {w: statistics.median(t) * 1000 for w, t in times.items()}
    print(f"{args.mb:g} MB over a file as large, median of {args.repeat} (ms); "
          f"load {os.getloadavg()[0]:.1f}\n")
    print("| in place | replaced | new name | in place / replaced |")
    print("|---|---|---|---|")
    print(f"| {med['in place']:.1f} | {med['replaced']:.1f} | {med['new name']:.1f} | "
          f"{med['in place'] / med['replaced']:.2f} |")


if __name__ == "__main__":
    main()
