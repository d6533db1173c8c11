"""How ingest names runs: the `--prefix` rule and the warning for a name two runs share.

Contract: a run's `run_name` is its directory's path relative to the path given to `ingest`
(the directory's own name when that path is the run), POSIX-style. `check_prefix(prefix)`
validates `--prefix` (None stays None; surrounding `/` are dropped; empty, `.`/`..` parts,
control characters, or bytes that are not UTF-8 are a `UsageError`); `prefixed(prefix,
name)` is `prefix/name`. A run keeps the name of its first ingest (job.py reads it back
from the ledger), so a prefix names only runs new to the store.

`shared_names(runs, new)` is one warning per run_name that a run of `new` (run_ids this
ingest added) shares with another run of the store (`runs`: the `runs` table's rows): which
runs, their directories, how each is shown and named, and how to keep trees apart with
`--prefix`. Two runs never merge for sharing a name (the run_id is the identity); the warning
is so that people know which is which.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..errors import UsageError
from ..printable import escaped
from .discover import storable

SHOWN_ID = 8  # run_id characters of a label (sql/run_labels.sql)


def check_prefix(prefix: str | None) -> str | None:
    """`prefix` without surrounding slashes; `UsageError` for one that names no folder."""
    if prefix is None:
        return None
    if not isinstance(prefix, str):
        raise UsageError(f"--prefix is a name such as cluster-a, got {prefix!r}")
    clean = prefix.strip("/")
    if not storable(clean):
        raise UsageError(f"--prefix '{escaped(prefix)}' is not UTF-8 text: give the name in UTF-8 "
                         "characters (the store keeps names as text)")
    parts = clean.split("/")
    if not clean or any(p in ("", ".", "..") for p in parts) \
            or any(ord(c) < 32 or c == "\x7f" for c in clean):
        raise UsageError(f"--prefix {prefix!r} is not a usable name: give words separated by "
                         "/ (e.g. cluster-a or 2024-06/cluster-a), without empty, . or .. parts")
    return clean


def prefixed(prefix: str | None, name: str) -> str:
    return name if prefix is None else f"{prefix}/{name}"


def shared_names(runs: Iterable[dict[str, Any]], new: set[str]) -> list[str]:
    """One warning per name that a newly added run shares with another run (see module)."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_name.setdefault(r["run_name"], []).append(r)
    out = []
    for name, held in sorted(by_name.items()):
        if len(held) < 2 or not any(r["run_id"] in new for r in held):
            continue
        held = sorted(held, key=lambda r: r["run_id"])
        which = "; ".join(f"{r['run_path']} (run_id {r['run_id']}, shown as "
                          f"'{name} [{r['run_id'][:SHOWN_ID]}]')" for r in held)
        out.append(f"{len(held)} runs are named {name!r}: {which}. Both are kept and told "
                   "apart by run_id: name one by its run_id (or the prefix shown in brackets) "
                   "or its directory. To give each tree readable names, ingest them with "
                   "`runstore ingest PATH --prefix NAME` (a run keeps its first name: "
                   "`runstore forget RUN` it, then ingest it again, to rename it).")
    return out
