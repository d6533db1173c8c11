"""What an ingest reports: counts, warnings and timings (`IngestReport`), and its progress callback.

Contract: `IngestReport` is what `Store.ingest` returns (and what an interrupted ingest's
`KeyboardInterrupt` carries as `report`): runs new, updated, unchanged and missing, the eval
stores found (not runs), rows
added per table, the warnings (`file:line: message`), bytes read, seconds, snapshots
published, the paths given that held no run, and for an interrupted ingest the signal and how
much was kept (`kept()`). `summary()` is the one line the CLI prints; `to_dict()` what the
manifest's `last_ingest` records. `Progress` is the callback an ingest reports progress to:
`(runs done, runs total, bytes read, run name)`, called after each run (an eval store is
not a run: it moves no count, and its bytes show in the next call). `NO_RUNS_HINT` says what a run is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

NO_RUNS_HINT = "a run is a directory holding metrics.jsonl or config.json"

Progress = Callable[[int, int, int, str], None]  # (runs done, runs total, bytes read, run name)


@dataclass
class IngestReport:
    """What one ingest did."""

    runs_new: int = 0
    runs_updated: int = 0
    runs_unchanged: int = 0
    runs_missing: int = 0
    rows_added: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    bytes_read: int = 0
    snapshots: int = 0
    empty_paths: list[str] = field(default_factory=list)  # paths given that held no run
    runs_total: int = 0  # runs discovered
    interrupted: str | None = None  # the signal that stopped the ingest (then see `kept`)
    complete: bool = False  # every run was staged and published (also when interrupted late)
    partial: tuple[str, int, int] | None = None  # (run name, files kept, files) of a run cut short
    partial_run: bool = True  # what was cut short is a run (else an eval store: not counted)
    eval_stores: int = 0  # eval stores discovered (not runs: they have no `runs` row)
    eval_stores_read: int = 0  # eval stores staged (one cut short included: see `partial`)

    @property
    def mb_per_s(self) -> float:
        return self.bytes_read / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def kept(self) -> str:
        """How much of the runs (and, apart, of the eval stores: they are not runs, as in
        `summary`) an interrupted ingest kept, in words."""
        if self.complete:
            evals = f"; eval stores: {self.eval_stores}" if self.eval_stores else ""
            return f"everything was kept ({self.runs_total} runs{evals})"
        cut = self.partial is not None
        whole = (self.runs_new + self.runs_updated + self.runs_unchanged
                 - (cut and self.partial_run))
        whole_evals = self.eval_stores_read - (cut and not self.partial_run)
        if not whole and not whole_evals and not cut:
            return "nothing new was kept (the store is as it was)"
        text = f"kept {whole} of {self.runs_total} runs whole"
        if self.partial is not None:
            name, done, total = self.partial
            text += f" and {done} of {total} files of {name}"
        if self.eval_stores:
            text += f" (eval stores: {whole_evals} of {self.eval_stores} whole)"
        return text

    def summary(self) -> str:
        rows = ", ".join(f"{k} +{v}" for k, v in sorted(self.rows_added.items()) if v) or "no rows"
        if self.interrupted:
            kept = self.kept()
            again = ("" if self.complete else "; run the same command again to continue"
                     + ("" if kept.startswith("nothing") else ": it reads only what was not kept"))
            return (f"interrupted by {self.interrupted}: {kept}, in "
                    f"{self.snapshots} snapshot{'s' if self.snapshots != 1 else ''}; rows: "
                    f"{rows}; {self.seconds:.2f} s{again}")
        evals = f"; eval stores: {self.eval_stores}" if self.eval_stores else ""
        return (
            f"runs: {self.runs_new} new, {self.runs_updated} updated, {self.runs_unchanged} "
            f"unchanged, {self.runs_missing} missing{evals}; rows: {rows}; {len(self.warnings)} "
            f"warning{'s' if len(self.warnings) != 1 else ''}; {self.seconds:.2f} s, "
            f"{self.bytes_read / 1e6:.1f} MB read at {self.mb_per_s:.1f} MB/s"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs_new": self.runs_new, "runs_updated": self.runs_updated,
            "runs_unchanged": self.runs_unchanged, "runs_missing": self.runs_missing,
            "rows_added": dict(self.rows_added), "warnings": len(self.warnings),
            "seconds": round(self.seconds, 3), "bytes_read": self.bytes_read,
            **({"interrupted": self.interrupted} if self.interrupted else {}),
        }
