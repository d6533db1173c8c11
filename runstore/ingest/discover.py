"""Discovery: walk a tree, decide what is a run, classify each of its files.

Contract: `discover(root)` yields one `RunDir` per run found at any depth below `root` (or
`root` itself). A run is a directory holding a regular file `config.json` or `metrics.jsonl`,
as upstream's registry decides; discovery never looks inside a run for more runs, and
directories that are not runs are skipped silently. Symlinked directories are followed once
(their resolved path identifies the run, so a run reached twice is yielded once).
`run_holding(file)` (and `run_prefix_holding` on S3) names the run a file of a run belongs
to. Each file of a run is classified into a `SourceFile` with its kind, and for
per-iteration artefacts its split (`train` / `eval/<label>`) and iteration, in either layout:
`iteration_NNNNNN/<base>_…` or flat `<base>_iteration_NNNNNN_…`. Nothing here reads file
contents; only names and `stat` results.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat as stat_mod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Literal

if TYPE_CHECKING:
    from ..storage.location import S3

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
]
Layout = Literal["iteration_dirs", "flat", "none"]

# Files appended to while a run trains: read from the last offset up to the last newline.
APPEND_ONLY: frozenset[str] = frozenset({"metrics", "checkpoints", "timing_spans", "trace_events"})

ROOT_FILES: dict[str, FileKind] = {
    "config.json": "config",
    "code.diff": "code_diff",
    "metrics.jsonl": "metrics",
    "checkpoints.jsonl": "checkpoints",
    "timing_spans.jsonl": "timing_spans",
    "trace_events.jsonl": "trace_events",
}
RUN_MARKERS = ("config.json", "metrics.jsonl")  # a directory holding either is a run
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
    mtime_ns: int  # on S3, the object's change token (see `fs.Entry`)
    split: str | None = None
    iteration: int | None = None
    ctime_ns: int | None = None  # local files only: moves with every change, `utime` too


@dataclass
class RunDir:
    """A run directory and the files in it that runstore reads."""

    path: str  # resolved absolute path
    run_name: str  # POSIX path relative to the ingest root ("." when the root is the run)
    layout: Layout
    files: list[SourceFile] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return run_id_for(self.path)


def run_id_for(resolved_path: str) -> str:
    """Stable run id: the same directory gets the same id whatever path reached it."""
    return hashlib.sha1(resolved_path.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def source_id_for(run_id: str, rel_path: str) -> int:
    """Stable 63-bit id of one source file of one run."""
    digest = hashlib.sha1(f"{run_id}/{rel_path}".encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _split(base: str, label: str | None) -> str:
    return "train" if base == "train" else f"eval/{label}"


def _iteration(digits: str) -> int | None:
    """The iteration a file name says, None when it does not fit the int64 column (the file
    is still read; its rows get the iteration their records say, or null)."""
    number = int(digits) if len(digits.lstrip("0")) <= 19 else None  # int() stops at 4,300
    return number if number is not None and number < 2 ** 63 else None


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
        d = ITERATION_DIR.match(parts[0])
        m = IN_ITERATION_DIR.match(parts[1])
        if d and m:
            return _SUFFIXES[m.group(3)], _split(m.group(1), m.group(2)), _iteration(d.group(1))  # type: ignore[return-value]
    return None


def _entries(path: str) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError:
        return []


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_dir(entry: os.DirEntry) -> bool:
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


def scan_run(path: str, run_name: str) -> RunDir:
    """Classify the files of one run directory."""
    files: list[SourceFile] = []

    def add(entry: os.DirEntry, rel: str) -> None:
        found = classify(rel)
        if found is None:
            return
        try:
            st = entry.stat()
        except OSError:
            return
        if not stat_mod.S_ISREG(st.st_mode):
            return
        kind, split, iteration = found
        files.append(SourceFile(rel, kind, st.st_size, st.st_mtime_ns, split, iteration,
                                st.st_ctime_ns))

    for entry in _entries(path):
        if _is_dir(entry):
            if ITERATION_DIR.match(entry.name):
                for sub in _entries(entry.path):
                    if _is_file(sub):
                        add(sub, f"{entry.name}/{sub.name}")
        elif _is_file(entry):
            add(entry, entry.name)
    return RunDir(path=path, run_name=run_name, layout=_layout(files), files=files)


def is_run(path: str) -> bool:
    return any(os.path.isfile(os.path.join(path, n)) for n in RUN_MARKERS)


def run_holding(file: str) -> str | None:
    """The run directory a file lies in (its directory, or the run above the
    `iteration_NNNNNN` directory holding it), None when it is not a file of a run."""
    parent = os.path.dirname(os.path.abspath(file))
    if is_run(parent):
        return parent
    if ITERATION_DIR.match(os.path.basename(parent)) and is_run(os.path.dirname(parent)):
        return os.path.dirname(parent)
    return None


def run_prefix_holding(rel: str) -> str | None:
    """As `run_holding` for an S3 object, by name alone (a listing decides whether a run is
    there): the prefix of the run that `rel` would be a file of, None when no run reads it.

    >>> run_prefix_holding("runs/a/metrics.jsonl"), run_prefix_holding("runs/a/notes.txt")
    ('runs/a', None)
    >>> run_prefix_holding("runs/a/iteration_000010/train_logtree.json")
    'runs/a'
    """
    parts = rel.strip("/").split("/")
    if classify(parts[-1]) is not None:
        return "/".join(parts[:-1])
    if len(parts) >= 2 and classify("/".join(parts[-2:])) is not None:
        return "/".join(parts[:-2])
    return None


def discover(root: str | os.PathLike[str]) -> Iterator[RunDir]:
    """Every run at any depth under `root`, in sorted path order."""
    top = os.path.abspath(root)
    seen: set[str] = set()
    stack = [top]
    # Symlinked directories are walked only after every real one, so a run reachable both
    # directly and through a link is named by its real path, whatever the names sort as.
    linked: list[str] = []
    while stack or linked:
        if not stack:
            stack.append(linked.pop(0))
        current = stack.pop()
        resolved = os.path.realpath(current)
        if resolved in seen:
            continue
        seen.add(resolved)
        if is_run(current):
            rel = Path(os.path.relpath(current, top)).as_posix()
            yield scan_run(resolved, rel)
            continue
        subdirs = []
        for e in _entries(current):
            if _is_dir(e) and not e.name.startswith("."):
                (linked if e.is_symlink() else subdirs).append(e.path)
        stack.extend(reversed(subdirs))


def discover_remote(top: "S3") -> Iterator[RunDir]:
    """Every run under an S3 prefix, in sorted path order, from one listing.

    The same rules as `discover`: a run is a prefix holding `config.json` or `metrics.jsonl`,
    nothing inside a run is taken for another run, prefixes starting with `.` are skipped.
    A file's `mtime_ns` is the object's change token (see `fs.Entry`).
    """
    entries = list(top.walk())
    marked = {_parent(e.rel) for e in entries if e.rel.rsplit("/", 1)[-1] in RUN_MARKERS}
    runs: set[str] = set()
    for r in sorted(marked):  # sorted: a run's enclosing run, if any, comes first
        if not any(part.startswith(".") for part in r.split("/") if part) \
                and not any(a in runs for a in _ancestors(r)):
            runs.add(r)
    files: dict[str, list[SourceFile]] = {r: [] for r in runs}
    for e in entries:
        # A file a run reads lies in the run or one `iteration_NNNNNN/` below it.
        parent = _parent(e.rel)
        owner = parent if parent in runs else _parent(parent) if parent else None
        if owner not in runs:
            continue
        rel = e.rel[len(owner) + 1:] if owner else e.rel
        found = classify(rel)
        if found is not None:
            kind, split, iteration = found
            files[owner].append(SourceFile(rel, kind, e.size, e.mtime_ns, split, iteration))
    for r in sorted(runs):
        yield RunDir(path=top.uri(r), run_name=r or ".", layout=_layout(files[r]), files=files[r])


def _parent(rel: str) -> str:
    return rel.rsplit("/", 1)[0] if "/" in rel else ""


def _ancestors(rel: str) -> Iterator[str]:
    """The enclosing prefixes of `rel`, the root ("") first."""
    if rel:
        yield ""
        parts = rel.split("/")
        for i in range(1, len(parts)):
            yield "/".join(parts[:i])
