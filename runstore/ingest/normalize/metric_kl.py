"""The KL values that count, merged at ingest (`metric_kl`): what the `kl_steps` view reads
instead of merging every KL write of `metrics_raw` at query time.

Contract: `summarize(rows, state, fresh)` takes the `metrics_raw` rows one read of one live
metrics file produced (a chunk: the whole file, or the lines appended since the last read)
and returns the chunk's `metric_kl` rows, one per step of the chunk that logs a KL number:

    run_id, source_id, step, v1, v2

or None when the chunk cannot be merged alone: it writes a KL key (a number or a string) at a
step at or before the last step an earlier read of the file wrote one at. An earlier write
may then win over a later one (a prefixed number over a later unprefixed one), so the caller
reads the whole file again (`Output.reread`, ingest/process.py). So each step of a live file
is in one `metric_kl` row, and that row is the merge of all the file's writes of that step.

The merge is the statement `summaries.metric_kl` (sql/statements/summaries.sql), run by
DuckDB over the chunk's KL rows: the very text the query layer runs over all of
`metrics_raw` for a snapshot written before this table existed, so the rules have one home.
It runs in the ingest's in-memory DuckDB with external access off (ingest/statements.py): it
reads the Arrow rows it is given and nothing else.

The last KL step so far is read from `state` before `metric_keys.summarize` updates it:
`key_last` (each key's last step, kept by metric_keys.py) where the ledger has it, else the
file's largest step of any key (`max_step`, older ledger entries); a chunk that is not the
file's first (`fresh` false) with neither is read whole again. A `pre_resume` copy has no
rows here (only live files count).

`summarize_files(paths, read)` computes the rows from stored `metrics_raw` files (the
migration that adds the table): each file's KL rows, then the merge over all of them at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    import pyarrow as pa

TABLE = "metric_kl"
STATEMENT = "summaries.metric_kl"
# The KL spellings the statement merges (filtered here first: the statement then reads a
# few thousand rows of a read, not every key's).
KEYS = ("optim/kl_sample_train_v1", "optim/kl_sample_train_v2",
        "kl_sample_train_v1", "kl_sample_train_v2")
COLUMNS = ("run_id", "source_id", "key", "step", "value", "seq", "pre_resume")


def _kl_rows(rows: "pa.Table") -> "pa.Table":
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = rows.select(list(COLUMNS))
    return rows.filter(pc.is_in(rows.column("key"), pa.array(KEYS)))


def _merge(kl: "pa.Table") -> "pa.Table":
    """The statement over these KL rows, as a `metric_kl` table."""
    from ...storage import schema
    from .. import statements

    return statements.run(STATEMENT, {"metrics_raw": kl}).cast(schema.schema(TABLE))


def _last_kl_step(state: dict[str, Any]) -> tuple[bool, int | None]:
    """(known, step): the last step an earlier read wrote a KL key at (None: none did)."""
    if "key_last" in state:
        steps = [s for k in KEYS if (s := state["key_last"].get(k)) is not None]
        return True, max(steps) if steps else None
    if "max_step" in state:
        return True, state["max_step"]
    return False, None


def summarize(rows: "pa.Table", state: dict[str, Any], fresh: bool) -> "pa.Table | None":
    """The `metric_kl` rows of one chunk of a live metrics file, or None when the file must
    be read whole (see the module)."""
    import pyarrow.compute as pc

    kl = _kl_rows(rows)
    if not fresh:
        first = pc.min(kl.column("step")).as_py() if kl.num_rows else None
        if first is not None:
            known, last = _last_kl_step(state)
            if not known or (last is not None and first <= last):
                return None
    return _merge(kl)


def summarize_files(paths: Iterable[str], read: Any) -> "pa.Table":
    """`metric_kl` rows computed from stored `metrics_raw` files (`read(path)` gives one
    file's rows, with the columns the merge reads); see the module."""
    import pyarrow as pa

    from ...storage import schema

    parts = [_kl_rows(read(path)) for path in paths]
    if not parts:
        return pa.Table.from_batches([], schema=schema.schema(TABLE))
    return _merge(pa.concat_tables(parts))
