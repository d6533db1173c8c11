"""Discovery: walk a tree, decide what is a run, classify each of its files.

Contract: `discover(root)` yields one `RunDir` per run found at any depth below `root` (or
`root` itself), in sorted path order; `root` is a local directory or an S3 prefix (any
`Location`), walked the same way through `Location.tree()` (an S3 prefix is listed once, a
local tree with `os.scandir`). A run is a directory holding a regular file `config.json` or
`metrics.jsonl`, as upstream's registry decides; discovery never looks inside a run for more
runs, and directories that are not runs, or whose name starts with `.`, are skipped
silently. Symlinked directories are followed once, after every real one (their resolved path
identifies the run, so a run reached twice is yielded once, by its real path).
`run_holding(file)` names the run a file of a run belongs to (its directory, or the run
above its `iteration_NNNNNN` or `capture` directory). Each file of a run is classified into a
`SourceFile` with its kind, and for per-iteration artefacts its split (`train` /
`eval/<label>`) and iteration, in either layout: `iteration_NNNNNN/<base>_…` or flat
`<base>_iteration_NNNNNN_…`; the token-level capture is `capture/<kind>.jsonl`, the run's
Python log `logs.log`. A file in the middle of an atomic write (`.NAME.PID.tmp`, which
tinker-cookbook's `LocalStorage.write` renames over NAME) is never read; a leftover one is
listed in `RunDir.tmp_files` (the `runs` row notes it). The store keeps paths as UTF-8
text, so a run, an eval store or a file to read whose name is other bytes (a tree copied from
a Latin-1 file system: `os.fsdecode` keeps such bytes as lone surrogates) is not yielded or
listed: `discover` reports such a unit to its `skipped` list, `RunDir.unstorable` lists such
files, and the ingest warns of each (`unstorable_warning`).

Eval stores are found too, and are not runs: a directory holding a regular file `runs.jsonl`
and a directory `runs/` with some `runs/<id>/metadata.json` (the shape
`tinker_cookbook.stores.EvalStore` writes) is yielded as a `RunDir` of kind `eval_store`,
wherever the walk meets it (`evals/` beside runs, the root of a tree), and inside a run in
its `eval/` or `eval_store/` directory (where tinker-cookbook's `RunRegistry` looks); the
walk does not enter its `runs/` directory, but goes on into its other directories. Its files
are `runs/<id>/metadata.json`, `runs/<id>/<benchmark>/result.json` and
`runs/<id>/<benchmark>/trajectories.jsonl` (`runs.jsonl`, an index of the same runs, and
`summary.json`, a copy of the results, are not read). `source_files(run_path, run_name)`
lists a run directory's (or an eval store's) files as `runstore repair` needs them. Nothing
here reads file contents; only names and `stat` results (on S3: the listing's sizes and
change tokens; locally also ctimes and inode numbers).
"""

from __future__ import annotations

import re
import stat as stat_mod
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal

from ..numbers import int64_from_digits
from ..printable import escaped, not_utf8
from ..storage.ledger import EVAL_STORE_KIND, run_id_for
from ..storage.location import Location, Tree, location

FileKind = Literal[
    "config",
    "code_diff",
    "metrics",
    "metrics_pre_resume",
    "checkpoints",
    "timing_spans",
    "trace_events",
    "rollouts",
    "logtree",
    "capture",
    "logs",
    "eval_metadata",
    "eval_result",
    "eval_trajectories",
]
Layout = Literal["iteration_dirs", "flat", "none"]
UnitKind = Literal["run", "eval_store"]
EVAL_STORE = EVAL_STORE_KIND  # the kind of an eval store's unit (and of its ledger entry)

# Files appended to while a run trains: read from the last offset up to the last newline.
APPEND_ONLY: frozenset[str] = frozenset({"metrics", "checkpoints", "timing_spans", "trace_events",
                                         "capture", "logs", "eval_trajectories"})

ROOT_FILES: dict[str, FileKind] = {
    "config.json": "config",
    "code.diff": "code_diff",
    "metrics.jsonl": "metrics",
    "checkpoints.jsonl": "checkpoints",
    "timing_spans.jsonl": "timing_spans",
    "trace_events.jsonl": "trace_events",
    "logs.log": "logs",
}
RUN_MARKERS = ("config.json", "metrics.jsonl")  # a directory holding either is a run
CAPTURE_DIR = "capture"
CAPTURE_FILE = re.compile(r"^[^/.][^/]*\.jsonl$")  # capture/<kind>.jsonl
# tinker-cookbook's LocalStorage.write: `.<name>.<pid>.tmp`, renamed over <name> when written.
TMP_FILE = re.compile(r"^\..+\.\d+\.tmp$")
EVAL_INDEX = "runs.jsonl"  # with runs/<id>/metadata.json: an eval store
EVAL_RUNS = "runs"
EVAL_DIRS = ("eval", "eval_store")  # where a run may hold its own eval store
EVAL_FILES: dict[str, FileKind] = {"result.json": "eval_result",
                                   "trajectories.jsonl": "eval_trajectories"}
PRE_RESUME = re.compile(r"^metrics\.jsonl\.pre_resume_\d+$")
ITERATION_DIR = re.compile(r"^iteration_(\d{6,})$")
_SUFFIXES = {"_logtree.json": "logtree", "_rollout_summaries.jsonl": "rollouts"}
# `<base>` is `train` or `eval_<label>`; labels may themselves contain underscores.
IN_ITERATION_DIR = re.compile(r"^(train|eval_(.+?))(_logtree\.json|_rollout_summaries\.jsonl)$")
FLAT = re.compile(r"^(train|eval_(.+?))_iteration_(\d+)(_logtree\.json|_rollout_summaries\.jsonl)$")


@dataclass(frozen=True)
class SourceFile:
    """One file of a run that runstore reads."""

    rel_path: str  # POSIX path relative to the run directory
    kind: FileKind
    size: int
    mtime_ns: int  # on S3, the object's change token (see `location.Entry`)
    split: str | None = None
    iteration: int | None = None
    ctime_ns: int | None = None  # local files only: moves with every change, `utime` too
    ino: int | None = None  # local files only: another one when a file is renamed over it


@dataclass
class RunDir:
    """A run directory and the files in it that runstore reads."""

    path: str  # resolved absolute path (an `s3://` URI on S3)
    run_name: str  # POSIX path relative to the ingest root ("." when the root is the run)
    layout: Layout
    files: list[SourceFile] = field(default_factory=list)
    kind: UnitKind = "run"  # `eval_store`: an eval store, not a run (no `runs` row)
    tmp_files: list[str] = field(default_factory=list)  # leftover `.NAME.PID.tmp`, not read
    unstorable: list[str] = field(default_factory=list)  # files to read named by other bytes

    @property
    def run_id(self) -> str:
        return run_id_for(self.path)


def storable(path: str) -> bool:
    """Whether a path can be stored: it is UTF-8 text (no lone surrogate of `os.fsdecode`:
    `printable.not_utf8`)."""
    return not_utf8(path) is None


def unstorable_warning(path: str) -> str:
    """The warning for a unit or file skipped because its name is not `storable`."""
    return f"{escaped(path)}: skipped: its name is not UTF-8 (rename it to ingest it)"


def _split(base: str, label: str | None) -> str:
    return "train" if base == "train" else f"eval/{label}"


def _iteration(digits: str) -> int | None:
    """The iteration a file name says, None when it does not fit the int64 column (the file
    is still read; its rows get the iteration their records say, or null)."""
    return int64_from_digits(digits)


def classify(rel_path: str) -> tuple[FileKind, str | None, int | None] | None:
    """Kind, split and iteration of a file path relative to its run, or None if not read."""
    parts = rel_path.split("/")
    if len(parts) == 1:
        name = parts[0]
        if name in ROOT_FILES:
            return ROOT_FILES[name], None, None
        if PRE_RESUME.match(name):
            return "metrics_pre_resume", None, None
        m = FLAT.match(name)
        if m:
            return _SUFFIXES[m.group(4)], _split(m.group(1), m.group(2)), _iteration(m.group(3))  # type: ignore[return-value]
        return None
    if len(parts) == 2:
        if parts[0] == CAPTURE_DIR:
            return ("capture", None, None) if CAPTURE_FILE.match(parts[1]) else None
        d = ITERATION_DIR.match(parts[0])
        m = IN_ITERATION_DIR.match(parts[1])
        if d and m:
            return _SUFFIXES[m.group(3)], _split(m.group(1), m.group(2)), _iteration(d.group(1))  # type: ignore[return-value]
    return None


def classify_eval(rel_path: str) -> FileKind | None:
    """Kind of a file path relative to an eval store, or None if not read."""
    parts = rel_path.split("/")
    if len(parts) < 3 or parts[0] != EVAL_RUNS or parts[1].startswith("."):
        return None
    if len(parts) == 3:
        return "eval_metadata" if parts[2] == "metadata.json" else None
    if len(parts) == 4 and not parts[2].startswith("."):
        return EVAL_FILES.get(parts[3])
    return None


def _is_file(entry: Any) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_dir(entry: Any) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _layout(files: list[SourceFile]) -> Layout:
    """`iteration_dirs` when a rollout or logtree file lies in an iteration directory, else
    `flat` when the run has any, else `none`."""
    per_iteration = [f.rel_path for f in files if f.kind in ("rollouts", "logtree")]
    if any("/" in rel for rel in per_iteration):
        return "iteration_dirs"
    return "flat" if per_iteration else "none"


def _source_file(entry: Any, rel: str, kind: FileKind, split: str | None = None,
                 iteration: int | None = None) -> SourceFile | None:
    """A regular file's `SourceFile`, None when it cannot be stat'ed or is not regular."""
    try:
        st = entry.stat()
    except OSError:
        return None
    if not stat_mod.S_ISREG(st.st_mode):
        return None
    return SourceFile(rel, kind, st.st_size, st.st_mtime_ns, split, iteration, st.st_ctime_ns,
                      st.st_ino or None)


def _scan(tree: Tree, path: str, run_name: str, entries: list[Any]) -> RunDir:
    """Classify the files of one run directory (`entries`: what `tree.scandir(path)` gave)."""
    files: list[SourceFile] = []
    tmp: list[str] = []
    unstorable: list[str] = []

    def add(entry: Any, rel: str) -> None:
        mid_write = TMP_FILE.match(entry.name)
        found = None if mid_write else classify(rel)
        if not (mid_write or found):
            return
        if not storable(rel):
            unstorable.append(rel)
        elif mid_write:
            tmp.append(rel)  # mid-write (or left by a crash): never read
        else:
            f = _source_file(entry, rel, *found)  # type: ignore[misc]
            if f is not None:
                files.append(f)

    for entry in entries:
        if _is_dir(entry):
            if ITERATION_DIR.match(entry.name) or entry.name == CAPTURE_DIR:
                for sub in tree.scandir(entry.path):
                    if _is_file(sub):
                        add(sub, f"{entry.name}/{sub.name}")
        elif _is_file(entry):
            add(entry, entry.name)
    return RunDir(path=path, run_name=run_name, layout=_layout(files), files=files,
                  tmp_files=sorted(tmp), unstorable=sorted(unstorable))


def _is_eval_store(tree: Tree, entries: list[Any]) -> bool:
    """Whether a directory (its `entries`) has an eval store's shape: `runs.jsonl` and some
    `runs/<id>/metadata.json`."""
    if not any(e.name == EVAL_INDEX and _is_file(e) for e in entries):
        return False
    for e in entries:
        if e.name == EVAL_RUNS and _is_dir(e):
            return any(_is_dir(d) and any(f.name == "metadata.json" and _is_file(f)
                                          for f in tree.scandir(d.path))
                       for d in tree.scandir(e.path))
    return False


def _scan_eval(tree: Tree, path: str, name: str, entries: list[Any]) -> RunDir:
    """The files of the eval store at `path` (`entries`: its listing)."""
    files: list[SourceFile] = []
    unstorable: list[str] = []

    def add(entry: Any, rel: str) -> None:
        kind = classify_eval(rel)
        if kind is not None and not storable(rel):
            unstorable.append(rel)
            return
        f = _source_file(entry, rel, kind) if kind is not None else None
        if f is not None:
            files.append(f)

    for runs_dir in (e for e in entries if e.name == EVAL_RUNS and _is_dir(e)):
        for run in sorted(tree.scandir(runs_dir.path), key=lambda e: e.name):
            if not _is_dir(run):
                continue
            for entry in sorted(tree.scandir(run.path), key=lambda e: e.name):
                rel = f"{EVAL_RUNS}/{run.name}/{entry.name}"
                if _is_file(entry):
                    add(entry, rel)
                elif _is_dir(entry):
                    for sub in sorted(tree.scandir(entry.path), key=lambda e: e.name):
                        if _is_file(sub):
                            add(sub, f"{rel}/{sub.name}")
    return RunDir(path=path, run_name=name, layout="none", files=files, kind="eval_store",
                  unstorable=unstorable)


def _evals_in_run(tree: Tree, path: str, run_name: str, entries: list[Any]) -> list[RunDir]:
    """The eval stores a run keeps in its `eval/` or `eval_store/` directory."""
    found = []
    for entry in entries:
        if entry.name in EVAL_DIRS and _is_dir(entry):
            sub = tree.scandir(entry.path)
            if _is_eval_store(tree, sub):
                found.append(_scan_eval(tree, tree.realpath(entry.path),
                                        f"{run_name}/{entry.name}", sub))
    return found


def _holds_marker(entries: list[Any]) -> bool:
    return any(e.name in RUN_MARKERS and _is_file(e) for e in entries)


def scan_run(path: str, run_name: str) -> RunDir:
    """Classify the files of the run directory (or eval store) `path` (a local path or an
    `s3://` URI)."""
    tree = location(path).tree()
    entries = tree.scandir(path)
    if not _holds_marker(entries) and _is_eval_store(tree, entries):
        return _scan_eval(tree, path, run_name, entries)
    return _scan(tree, path, run_name, entries)


def source_files(run_path: str, run_name: str) -> list[tuple[str, str]]:
    """(rel_path, kind) of each source file the run directory (or eval store) holds now."""
    return [(f.rel_path, f.kind) for f in scan_run(run_path, run_name).files]


def is_run(where: Location) -> bool:
    """Whether the directory `where` is a run (holds `config.json` or `metrics.jsonl`)."""
    return any((where / n).is_file() for n in RUN_MARKERS)


def run_holding(file: Location) -> Location | None:
    """The run directory a file lies in (its directory, or the run above the
    `iteration_NNNNNN` or `capture` directory holding it), None when it is not a file of a
    run."""
    parent = file.resolved().parent
    if is_run(parent):
        return parent
    if (ITERATION_DIR.match(parent.name) or parent.name == CAPTURE_DIR) and is_run(parent.parent):
        return parent.parent
    return None


def _storable(rd: RunDir, walked: str, skipped: list[str] | None) -> list[RunDir]:
    """[rd] when its path and name can be stored, else [] with its name noted in `skipped`
    (the path walked when the bytes are above the name, in the path given)."""
    if storable(rd.path) and storable(rd.run_name):
        return [rd]
    if skipped is not None:
        skipped.append(walked if storable(rd.run_name) else rd.run_name)
    return []


def discover(root: Any, skipped: list[str] | None = None) -> Iterator[RunDir]:
    """Every run and eval store at any depth under `root` (a path, an `s3://` URI or a
    `Location`), in sorted path order (a run's own eval stores right after it); one whose
    path is not `storable` is appended to `skipped` instead."""
    tree = location(root).tree()
    top = tree.top
    seen: set[str] = set()
    stack = [top]
    # Symlinked directories are walked only after every real one, so a run reachable both
    # directly and through a link is named by its real path, whatever the names sort as.
    linked: list[str] = []
    while stack or linked:
        if not stack:
            stack.append(linked.pop(0))
        current = stack.pop()
        resolved = tree.realpath(current)
        if resolved in seen:
            continue
        seen.add(resolved)
        entries = tree.scandir(current)
        name = tree.relpath(current, top)
        if _holds_marker(entries):
            for rd in [_scan(tree, resolved, name, entries),
                       *_evals_in_run(tree, resolved, name, entries)]:
                yield from _storable(rd, current, skipped)
            continue
        evals = _is_eval_store(tree, entries)
        if evals:
            yield from _storable(_scan_eval(tree, resolved, name, entries), current, skipped)
        subdirs = []
        for e in entries:
            if _is_dir(e) and not e.name.startswith(".") and not (evals and e.name == EVAL_RUNS):
                (linked if e.is_symlink() else subdirs).append(e.path)
        stack.extend(reversed(subdirs))
