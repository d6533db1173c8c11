"""How far a run got, kept at ingest for its `runs` row: a final checkpoint, the largest done_frac.

Contract: the ledger state of a run's `checkpoints.jsonl` keeps `final` and that of its live
`metrics.jsonl` keeps `done_frac`: the `final_checkpoint` and `done_frac` that the statement
`summaries.run_progress` (sql/statements/summaries.sql, their one definition) answers over
every read of the file so far. `note_checkpoints(state, rows)` and `note_metrics(state,
keys)` move a state on by one read (its `checkpoints` rows; its `metric_keys` rows): the
statement runs over the read's rows and one row standing for the reads before (a
checkpoint record whose `final` is the state's; a `metric_keys` row of a key the statement
reads whose `max_value` is the state's), so that the statement alone says which records
and values count and how reads add up. A read that logs no key the statement reads leaves
`done_frac` as it was (`statements.keys_read`). A file read whole again starts from a fresh
state, as its rows do, so each state is always that of the file's stored rows.
`columns(led, run_id)` is what the `runs` row holds: `final_checkpoint`, `done_frac`.

`from_tables(checkpoints, metric_keys)` runs the statement over stored rows: `seed(led,
read_table)` fills the states of a ledger written before they were kept, from the
snapshot's rows, so that the next read of such a file adds to what its earlier reads found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..storage import schema
from ..storage.ledger import Ledger
from . import statements

if TYPE_CHECKING:
    import pyarrow as pa

FINAL = "final"
DONE_FRAC = "done_frac"
STATEMENT = "summaries.run_progress"
# The ledger entry each state lives in: (file kind, path in the run, state key).
CHECKPOINTS = ("checkpoints", "checkpoints.jsonl", FINAL)
METRICS = ("metrics", "metrics.jsonl", DONE_FRAC)


def note_checkpoints(state: dict[str, Any], rows: "pa.Table", run_id: str) -> None:
    """Move a checkpoints file's state on by one read's `checkpoints` rows."""
    import pyarrow as pa

    if state.get(FINAL):
        rows = pa.concat_tables([rows, schema.to_arrow("checkpoints", [
            {"run_id": run_id, "final": True}])])
    state[FINAL] = from_tables(rows, schema.empty("metric_keys")).get(run_id, (False, None))[0]


def note_metrics(state: dict[str, Any], keys: "pa.Table") -> None:
    """Move a live metrics file's state on by one read's `metric_keys` rows."""
    import pyarrow as pa

    state.setdefault(DONE_FRAC, None)
    read = statements.keys_read(STATEMENT, "metric_keys", keys.column("key").to_pylist(),
                                also=("checkpoints",))
    if not read:
        return
    run_id = keys.column("run_id")[0].as_py()
    if state[DONE_FRAC] is not None:
        keys = pa.concat_tables([keys, schema.to_arrow("metric_keys", [
            {"run_id": run_id, "key": min(read), "pre_resume": False,
             "max_value": state[DONE_FRAC]}])])
    state[DONE_FRAC] = from_tables(schema.empty("checkpoints"), keys).get(run_id, (False, None))[1]


def columns(led: Ledger, run_id: str) -> dict[str, Any]:
    """The `runs` row's `final_checkpoint` and `done_frac` for the run's ledger entries."""
    ck = led.get(run_id, CHECKPOINTS[1])
    metrics = led.get(run_id, METRICS[1])
    return {"final_checkpoint": bool(ck is not None and ck.state.get(FINAL)),
            "done_frac": metrics.state.get(DONE_FRAC) if metrics is not None else None}


def from_tables(checkpoints: "pa.Table", metric_keys: "pa.Table"
                ) -> dict[str, tuple[bool, float | None]]:
    """Per run, (final_checkpoint, done_frac) of these rows, by the statement."""
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
