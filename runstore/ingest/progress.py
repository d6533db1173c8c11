"""How far a run got, kept at ingest for its `runs` row: a final checkpoint, the largest done_frac.

Contract: the ledger state of a run's `checkpoints.jsonl` keeps `final` (whether any record
read so far is a final checkpoint: `final` true or the name `final`), and that of its live
`metrics.jsonl` keeps `done_frac` (the largest non-NaN `progress/done_frac` of every read so
far, any write counting, +Infinity kept; None when none). A file read whole again starts from
a fresh state, as its rows do, so each state is always that of the file's stored rows.
`note_checkpoints(state, rows)` and `note_metrics(state, keys)` move a state on by one read
(the checkpoint records, the read's `metric_keys` rows); the normalizers call them.
`columns(led, run_id)` is what the `runs` row holds: `final_checkpoint`, `done_frac`.

The rules are those of the statement `summaries.run_progress` (sql/statements/summaries.sql),
which `from_tables(checkpoints, metric_keys)` runs over stored rows (tests hold the two
together): migration 0006 fills the columns with it for the rows stored before them, and
`seed(led, read_table)` fills the states of a ledger written before they were kept, from the
snapshot's rows, so that the next read of such a file adds to what its earlier reads found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable

from ..storage.ledger import Ledger

if TYPE_CHECKING:
    import pyarrow as pa

FINAL = "final"
DONE_FRAC = "done_frac"
DONE_KEY = "progress/done_frac"
STATEMENT = "summaries.run_progress"
# The ledger entry each state lives in: (file kind, path in the run, state key).
CHECKPOINTS = ("checkpoints", "checkpoints.jsonl", FINAL)
METRICS = ("metrics", "metrics.jsonl", DONE_FRAC)


def note_checkpoints(state: dict[str, Any], rows: Iterable[dict[str, Any]]) -> None:
    """Move a checkpoints file's state on by one read's normalized records."""
    final = any(r["final"] is True or r["name"] == "final" for r in rows)
    state[FINAL] = bool(state.get(FINAL)) or final


def note_metrics(state: dict[str, Any], keys: "pa.Table") -> None:
    """Move a live metrics file's state on by one read's `metric_keys` rows (whose
    `max_value` is the read's largest non-NaN value of each key)."""
    found = [v for k, v in zip(keys.column("key").to_pylist(),
                               keys.column("max_value").to_pylist()) if k == DONE_KEY]
    state[DONE_FRAC] = max((v for v in (*found, state.get(DONE_FRAC)) if v is not None),
                           default=None)


def columns(led: Ledger, run_id: str) -> dict[str, Any]:
    """The `runs` row's `final_checkpoint` and `done_frac` for the run's ledger entries."""
    ck = led.get(run_id, CHECKPOINTS[1])
    metrics = led.get(run_id, METRICS[1])
    return {"final_checkpoint": bool(ck is not None and ck.state.get(FINAL)),
            "done_frac": metrics.state.get(DONE_FRAC) if metrics is not None else None}


def from_tables(checkpoints: "pa.Table", metric_keys: "pa.Table"
                ) -> dict[str, tuple[bool, float | None]]:
    """Per run, (final_checkpoint, done_frac) of these stored rows, by the statement."""
    from . import statements

    out = statements.run(STATEMENT, {"checkpoints": checkpoints, "metric_keys": metric_keys})
    return {r["run_id"]: (bool(r["final_checkpoint"]), r["done_frac"])
            for r in out.to_pylist()}


def seed(led: Ledger, read_table: Callable[[str], "pa.Table"]) -> bool:
    """Give every checkpoints and live metrics entry that lacks its state (a ledger written
    before they were kept) the value of the stored rows (`read_table(name)` gives a table of
    the snapshot the ledger belongs to). True when any entry changed: the ledger must then
    be published, or every ingest would seed again."""
    lacking = [(e, key) for e in led.entries.values()
               for kind, _, key in (CHECKPOINTS, METRICS)
               if e.kind == kind and key not in e.state]
    if not lacking:
        return False
    facts = from_tables(read_table("checkpoints"), read_table("metric_keys"))
    for e, key in lacking:
        final, done_frac = facts.get(e.run_id, (False, None))
        e.state[key] = final if key == FINAL else done_frac
    return True
