"""The summaries of `metrics_raw` kept at ingest: each read's rows through the statements of
sql/statements/summaries.sql, and the bookkeeping that joins a read to the reads before it.

Contract: `of_read(rows, state, fresh)` takes the `metrics_raw` rows one read of one metrics
file produced (a chunk: the whole file, or the lines appended since the last read; `fresh`:
it starts the file) and returns the chunk's rows of each summary table, by table name, or
None when the file must be read whole again instead. The rows are what the statements
`summaries.metric_keys`, `summaries.metric_steps` and `summaries.metric_kl` answer over the
chunk (ingest/statements.py, one DuckDB call): they are the one definition of what each
summary says, the same text the query layer runs over all of `metrics_raw` for a snapshot
written before the ingest kept them. A statement summarises what it is given as a whole;
what Python adds here is only what a chunk does not know of the reads before it:

* `metric_keys.steps_exact`: a key's distinct steps add up over reads when each read's steps
  of the key all come after the key's last step before it (a log only grows). A row is
  exact unless the chunk logs its key at a step not after the key's last step so far (an
  old resume logging steps again), or the file was read before the per-key state existed
  (an append without it). Readers recount the pairs that are not (`query.keys`).
* `metric_steps.n_steps` counts the chunk's steps that are new to the file: the line that
  repeats the file's largest step so far (an evaluation logged after its training line) is
  counted once, and a chunk with steps below it is not exact (readers recount the file).
* `metric_kl` must hold one row per live step, the merge of all the file's writes of it:
  a chunk that writes a key the merge reads (a number or a string; `keys_read`) at a step at
  or before the last step an earlier read wrote one at cannot be merged alone, so the file
  is read whole again (`Output.reread`, ingest/process.py).

`state` is the metrics file's ledger state, read and updated in place: `key_last` maps each
key seen to its last step (None: step-less only), about 4 KB for a file of 100 keys;
`max_step`, the largest step of any key, is the caller's (it fills `runs.last_step`) and is
only read here, before the caller moves it on. A ledger entry older than `key_last` has
`max_step` alone, which then stands for the last KL step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..storage import schema
from . import statements

if TYPE_CHECKING:
    import pyarrow as pa

TABLES = ("metric_keys", "metric_steps", "metric_kl")
STATEMENTS = tuple(f"summaries.{t}" for t in TABLES)
KL = "summaries.metric_kl"
KEY_LAST = "key_last"
MAX_STEP = "max_step"


def of_read(rows: "pa.Table", state: dict[str, Any], fresh: bool
            ) -> dict[str, "pa.Table"] | None:
    """The summary rows of one chunk of `metrics_raw` rows, or None when the file must be
    read whole (see the module)."""
    answers = statements.run_all(STATEMENTS, {"metrics_raw": rows})
    keys, steps, kl = (a.select(schema.schema(t).names).cast(schema.schema(t))
                       for a, t in zip(answers, TABLES))
    if not fresh and _kl_overlaps(keys, state):
        return None
    return {"metric_keys": _keys_exact(keys, state, fresh),
            "metric_steps": _steps_exact(steps, state, fresh),
            "metric_kl": kl}


def _kl_overlaps(keys: "pa.Table", state: dict[str, Any]) -> bool:
    """Whether a chunk that continues the file writes a key the KL merge reads at a step at
    or before the last one an earlier read wrote such a key at (or that step is unknown)."""
    kl_keys = statements.keys_read(KL, "metrics_raw", keys.column("key").to_pylist())
    firsts = [s for k, s in zip(keys.column("key").to_pylist(),
                                keys.column("first_step").to_pylist())
              if k in kl_keys and s is not None]
    if not firsts:
        return False
    known = state.get(KEY_LAST)
    if isinstance(known, dict):
        seen = statements.keys_read(KL, "metrics_raw", known)
        last = max((s for k, s in known.items() if k in seen and s is not None), default=None)
    elif MAX_STEP in state:
        last = state[MAX_STEP]
    else:
        return True  # read before any step was kept: nothing says the steps are new
    return last is not None and min(firsts) <= last


def _keys_exact(keys: "pa.Table", state: dict[str, Any], fresh: bool) -> "pa.Table":
    """The chunk's `metric_keys` rows with `steps_exact` said against the reads before, and
    `state[KEY_LAST]` moved on to include the chunk."""
    import pyarrow as pa

    known = state.get(KEY_LAST)
    if fresh or not isinstance(known, dict):
        # A file read from its start has seen nothing before; an append to a file read
        # before the per-key state existed has none: every step may be a repeat.
        known = {} if fresh else None
    last_seen = dict(known or {})
    exact = []
    for key, first, last in zip(keys.column("key").to_pylist(),
                                keys.column("first_step").to_pylist(),
                                keys.column("last_step").to_pylist()):
        before = None if known is None else known.get(key)
        exact.append(first is None or (known is not None and (before is None or first > before)))
        if last is not None:
            prev = last_seen.get(key)
            last_seen[key] = last if prev is None else max(prev, last)
        else:
            last_seen.setdefault(key, None)
    if known is not None:
        state[KEY_LAST] = last_seen
    at = keys.schema.get_field_index("steps_exact")
    return keys.set_column(at, "steps_exact", pa.array(exact, pa.bool_()))


def _steps_exact(steps: "pa.Table", state: dict[str, Any], fresh: bool) -> "pa.Table":
    """The chunk's `metric_steps` row counting only the steps new to the file (see the
    module); `state` is read, not changed."""
    import pyarrow as pa

    before = None if fresh else state.get(MAX_STEP)
    counts, exact = [], []
    for n, first in zip(steps.column("n_steps").to_pylist(),
                        steps.column("first_step").to_pylist()):
        if first is None or before is None or first > before:
            counts.append(n), exact.append(True)
        elif first == before:  # the file's largest step so far, logged again: counted
            counts.append(n - 1), exact.append(True)
        else:
            counts.append(n), exact.append(False)
    return (steps.set_column(steps.schema.get_field_index("n_steps"), "n_steps",
                             pa.array(counts, pa.int64()))
            .set_column(steps.schema.get_field_index("steps_exact"), "steps_exact",
                        pa.array(exact, pa.bool_())))
