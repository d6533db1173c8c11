"""The per-file read-and-normalize step of an ingest, at this checkout against a base commit,
side by side in one process.

    python bench/bench_normalizers.py --tree bench/out/tree [--base HEAD] [--rounds 3]
        [--every 1]

The base commit's `runstore` package (default `HEAD`: the last commit, so a change in the
working tree is measured against it) is extracted into a temporary directory under the name
`runstore_base` (its imports rewritten; the commit's `sql/` beside it, whose statements the
ingest runs), so both versions load into this one process and each file is normalized by
both, alternately (which one goes first alternates too), from the same bytes in memory. A
base whose package predates this layout (no `runstore.ingest.process`,
`runstore.ingest.normalize.registry`, ...) cannot be compared: the script says which module it
lacks and exits. `--every N` takes every N-th run (or eval store) the tree's discovery
yields. Measured per file kind (as `ingest.discover` classifies the files), as the ingest's
read threads do it, with the cycle collector paused and pyarrow's jemalloc pool as the
ingest sets them:

* each kind: the kind's normalizer (`normalize.registry.for_kind(kind).normalize`) on a
  `Batch` of the whole file read as a first ingest reads it (append-only files up to their
  last newline), as `ingest.process._read` builds it; the file is read before the clock
  starts, so no file I/O is timed;
* append: `ingest.process.process_file` reading the last 10 lines of every append-only file
  (of more than 10 lines) as an incremental ingest does: the fingerprint check of the bytes
  before the offset, the read, the normalize, the new fingerprint; the "+10 steps" case
  without the commit. Its ledger entry is the one each side's own `process_file` stores when
  it reads a temporary copy of the file cut before those lines; the lines are then appended
  to the copy (same inode, as a training process appends), and the timed call reads them:
  this case does time its reads (of the copy, which the page cache holds).

Before the rounds, each side makes one untimed call per kind (and per append case), so what
the first call of a code path imports or builds is not charged to whichever side runs first.

Prints one line per kind (and one for append): the number of files, the CPU seconds of the
calling thread (pyarrow's reader runs in it) and the wall seconds per side, summed over the
files, the median of the rounds, and the ratio this / base; then the CPU of all kinds
(append excluded). Both sides the same code (`--base HEAD`, a clean tree): ratios near 1.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import importlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import typing
from io import BytesIO
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SIDES = ("base", "this")
PACKAGES = {"base": "runstore_base", "this": "runstore"}
APPEND_LINES = 10
# What this bench calls in each side's package: a base without one of them predates the layout.
MODULES = ("ingest.process", "ingest.discover", "ingest.normalize.registry",
           "ingest.normalize.base", "ingest.parse", "storage.ledger")
NAMES = {"ingest.process": ("process_file", "FileTask"), "ingest.discover": ("SourceFile",),
         "ingest.normalize.registry": ("for_kind",), "ingest.normalize.base": ("Batch", "Context"),
         "ingest.parse": ("read_span",), "storage.ledger": ("source_id_for",)}


def base_package(commit: str, into: Path) -> None:
    """`runstore` at `commit` as the package `runstore_base` under `into`, beside the
    commit's `sql/` and `migrations/` (the ingest runs some of its statements)."""
    paths = ["runstore"] + [d for d in ("sql", "migrations")
                            if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e",
                                               f"{commit}:{d}"], capture_output=True
                                              ).returncode == 0]
    got = subprocess.run(["git", "-C", str(ROOT), "archive", commit, *paths],
                         capture_output=True)
    if got.returncode:
        sys.exit(f"--base {commit}: git archive failed: "
                 f"{got.stderr.decode(errors='replace').strip().splitlines()[-1]}")
    with tarfile.open(fileobj=BytesIO(got.stdout)) as t:
        t.extractall(into, filter="data")
    (into / "runstore").rename(into / "runstore_base")
    for path in (into / "runstore_base").rglob("*.py"):
        text = path.read_text()
        text = re.sub(r"\bfrom runstore([. ])", r"from runstore_base\1", text)
        text = re.sub(r"\bimport runstore\b", "import runstore_base", text)
        path.write_text(text)
    for mod in MODULES:
        rel = into / "runstore_base" / Path(*mod.split("."))
        if not (rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file()):
            sys.exit(f"--base {commit}: its runstore predates this layout (no "
                     f"runstore.{mod}); give a later commit")


def side(pkg: str, commit: str) -> SimpleNamespace:
    """The modules and names this bench uses, from `pkg`."""
    ns = SimpleNamespace()
    for mod in MODULES:
        m = importlib.import_module(f"{pkg}.{mod}")
        setattr(ns, mod.rsplit(".", 1)[-1], m)
        for name in NAMES.get(mod, ()):
            if not hasattr(m, name):
                sys.exit(f"--base {commit}: its runstore predates this layout "
                         f"(runstore.{mod} has no {name}); give a later commit")
    return ns


def runs_of(tree: Path, every: int, this: SimpleNamespace) -> list[Any]:
    """Every `every`-th run (or eval store) discovery finds in `tree`."""
    return list(this.discover.discover(str(tree)))[::every]


def context(s: SimpleNamespace, rd: Any, f: Any) -> Any:
    """The `Context` `process_file` gives the normalizer of `f`, a file of the run `rd`."""
    return s.base.Context(run_id=rd.run_id,
                          source_id=s.ledger.source_id_for(rd.run_id, f.rel_path),
                          rel_path=f"{rd.run_name}/{f.rel_path}", split=f.split,
                          iteration=f.iteration, warnings=[], file=f.rel_path, run_path=rd.path)


def source_file(s: SimpleNamespace, f: Any, path: Path) -> Any:
    """`f` (this side's `SourceFile`) as `s`'s own, with the `stat` of `path` now."""
    st = path.stat()
    fields = {fld.name: getattr(f, fld.name) for fld in dataclasses.fields(s.discover.SourceFile)}
    fields.update(size=st.st_size, mtime_ns=st.st_mtime_ns, ctime_ns=st.st_ctime_ns,
                  ino=st.st_ino or None)
    return s.discover.SourceFile(**fields)


def complete_lines(data: bytes) -> bytes:
    return data[: data.rfind(b"\n") + 1]


def normalize_calls(sides: dict[str, SimpleNamespace], normalizers: dict[str, Any], rd: Any,
                    f: Any) -> dict[str, Callable[[], Any]]:
    """Per side, its normalizer of `f` (a file of the run `rd`) on a `Batch` of the bytes a
    first ingest reads, read here once for both sides."""
    this = sides["this"]
    data = this.parse.read_span(this.process.location(rd.path), f.rel_path, 0,
                                complete_lines=f.kind in this.discover.APPEND_ONLY)
    calls = {}
    for name, s in sides.items():
        batch = s.base.Batch(data, 1, context(s, rd, f), f.kind, {})
        calls[name] = (lambda n=normalizers[name], batch=batch: n.normalize(batch))
    return calls


def append_case(sides: dict[str, SimpleNamespace], rd: Any, f: Any, tmp: Path
                ) -> dict[str, Callable[[], Callable[[], Any]]] | None:
    """Per side, what makes a `process_file` call reading the last `APPEND_LINES` lines of
    `f` (a file of the run `rd`) as after an append; None when the file has no more lines."""
    data = complete_lines((Path(rd.path) / f.rel_path).read_bytes())
    lines = data.count(b"\n")
    if lines <= APPEND_LINES:
        return None
    cut = len(data)
    for _ in range(APPEND_LINES):
        cut = data.rfind(b"\n", 0, cut - 1) + 1
    run = tmp / f"run{len(os.listdir(tmp))}"
    path = run / f.rel_path
    path.parent.mkdir(parents=True)
    path.write_bytes(data[:cut])
    entries = {}
    for name, s in sides.items():  # what each side's ingest stores on reading the cut file
        task = s.process.FileTask(str(run), rd.run_id, rd.run_name, source_file(s, f, path), None)
        entries[name] = s.process.process_file(task).entry
        assert entries[name] is not None and entries[name].offset == cut, (name, path)
    with open(path, "ab") as out:  # the training process appends the last lines
        out.write(data[cut:])
    prepares = {}
    for name, s in sides.items():
        grown = source_file(s, f, path)

        def prepare(s: SimpleNamespace = s, grown: Any = grown, entry: Any = entries[name]
                    ) -> Callable[[], Any]:
            # A copy per call: a normalizer updates its state in place (`process_file`
            # copies only the top level of it).
            task = s.process.FileTask(str(run), rd.run_id, rd.run_name, grown,
                                      copy.deepcopy(entry))
            return lambda: s.process.process_file(task)
        prepares[name] = prepare
        prepare()()  # untimed: what the first call of a code path imports or builds
    return prepares


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, default=HERE / "out" / "tree")
    ap.add_argument("--base", default="HEAD",
                    help="the commit to compare against (default: HEAD, the last commit)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--every", type=int, default=1, help="take every N-th run of the tree")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="runstore-bench-normalizers-"))
    try:
        base_package(args.base, tmp)
        sys.path.insert(0, str(tmp))
        sys.path.insert(0, str(ROOT))
        sides = {name: side(PACKAGES[name], args.base) for name in SIDES}
        bench(args, sides, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench(args: argparse.Namespace, sides: dict[str, SimpleNamespace], tmp: Path) -> None:
    this = sides["this"]
    import pyarrow as pa

    try:  # as the ingest runs (ingest/run.py)
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:
        pass
    gc.disable()
    order = typing.get_args(this.discover.FileKind)
    kinds: dict[str, list[tuple[Any, Any]]] = {k: [] for k in order}
    runs = runs_of(args.tree, args.every, this)
    for rd in runs:
        for f in rd.files:
            kinds.setdefault(f.kind, []).append((rd, f))
    kinds = {k: v for k, v in kinds.items() if v}
    copies = tmp / "append"
    copies.mkdir()
    append = [c for k, v in kinds.items() if k in this.discover.APPEND_ONLY for rd, f in v
              if (c := append_case(sides, rd, f, copies)) is not None]
    gc.collect()
    width = max(len(k) for k in [*kinds, "all kinds"])
    print(f"{len(runs)} runs of {args.tree}, base {args.base}, {args.rounds} rounds", flush=True)
    results: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for kind, files in [*kinds.items(), ("append", [])]:
        results[kind] = {s: [] for s in SIDES}
        if files:
            normalizers = {s: sides[s].registry.for_kind(kind) for s in SIDES}
            for call in normalize_calls(sides, normalizers, *files[0]).values():
                call()  # untimed: what the first call of a code path imports or builds
        for r in range(args.rounds):
            cpu = {s: 0.0 for s in SIDES}
            wall = {s: 0.0 for s in SIDES}
            for i, item in enumerate(files if kind != "append" else append):
                calls = ({s: prepare() for s, prepare in item.items()} if kind == "append"
                         else normalize_calls(sides, normalizers, *item))
                for s in (SIDES if (i + r) % 2 == 0 else SIDES[::-1]):
                    call = calls[s]
                    c0, w0 = time.thread_time(), time.perf_counter()
                    call()
                    cpu[s] += time.thread_time() - c0
                    wall[s] += time.perf_counter() - w0
                del calls
                gc.collect()
            for s in SIDES:
                results[kind][s].append((cpu[s], wall[s]))
        n = len(files) if kind != "append" else len(append)
        med = {s: (statistics.median(c for c, _ in results[kind][s]),
                   statistics.median(w for _, w in results[kind][s])) for s in SIDES}
        print(f"{kind:{width}s} {n:5d} files  CPU base {med['base'][0]:7.3f} s  this "
              f"{med['this'][0]:7.3f} s  ({med['this'][0] / max(med['base'][0], 1e-9):.3f})   "
              f"wall base {med['base'][1]:7.3f} s  this {med['this'][1]:7.3f} s  "
              f"({med['this'][1] / max(med['base'][1], 1e-9):.3f})", flush=True)
    total = {s: sum(statistics.median(c for c, _ in results[k][s]) for k in results
                    if k != "append") for s in SIDES}
    print(f"{'all kinds':{width}s}              CPU base {total['base']:7.3f} s  this "
          f"{total['this']:7.3f} s  ({total['this'] / max(total['base'], 1e-9):.3f})")


if __name__ == "__main__":
    main()
