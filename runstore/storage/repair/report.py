"""What a repair did or a check found (`RepairReport`), and what it needs to know of the sources.

`Sources` is given by the caller (`Store`, from the ingest package, which owns discovery and
the normalizer registry): storage knows which tables a store has, not which source files
feed them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..manifest import LEDGERS, MANIFESTS
from ..vacuum import RETIRED

QUARANTINE = "_runstore/quarantine"
# Places of the store that must be directories when they exist.
DIRECTORIES = ("tables", MANIFESTS, LEDGERS, RETIRED)


@dataclass(frozen=True)
class Sources:
    """What repair asks of the ingest: `writers(table)`, the file kinds whose rows a table
    holds (the sources of a lost file's rows are among them); `files(run_path, run_name)`,
    the (rel_path, kind) of the source files a run directory holds now."""

    writers: Callable[[str], set[str]]
    files: Callable[[str, str], list[tuple[str, str]]]


@dataclass
class RepairReport:
    """What `repair` did (or `check` found)."""

    actions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # damage found, one line each
    sources_to_reread: int = 0
    snapshot: int | None = None  # the manifest published, None when nothing was wrong
    checked_files: int = 0
    checked_bytes: int = 0
    check: bool = False

    def summary(self) -> str:
        if self.check:
            if self.problems:
                n = len(self.problems)
                return (f"{n} problem{'s' if n != 1 else ''} found; run `runstore repair` to "
                        "mend the store")
            return (f"the store is healthy: {self.checked_files} live file"
                    f"{'s' if self.checked_files != 1 else ''} "
                    f"({self.checked_bytes / 1e6:.1f} MB) read whole, each matching the "
                    "content hash recorded for it")
        if not self.actions:
            return "the store is healthy: nothing to repair"
        tail = (f"; the next `runstore ingest` re-reads {self.sources_to_reread} source file"
                f"{'s' if self.sources_to_reread != 1 else ''}" if self.sources_to_reread
                else "")
        return f"repaired (snapshot {self.snapshot}){tail}"


@dataclass
class Lost:
    """A live file dropped from a table, and what its Delta statistics say it held."""

    table: str
    rel: str
    why: str
    bounds: tuple[Any, Any] | None  # (min, max) of source_id (run_id for `runs`), if known
