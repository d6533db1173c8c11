"""What a run's `logs.log` and live `metrics.jsonl` tell its `runs` row: command, last error,
total cost and tokens.

Contract: the ledger state of a run's `logs.log` keeps its `command`, `last_error` and
`last_error_line` (the logs normalizer moves them on read by read, normalize/logs.py), and that
of its live `metrics.jsonl` keeps `run_totals`: for each cumulative key the statement
`totals.run_totals` (sql/statements/totals.sql, the one definition of which write counts and
how a token count is read) reads, the value of the `runs` column that key feeds, as that
statement answers over every read of the file so far. `note_metrics(state, rows)` moves the
state on by one read's `metrics_raw` rows: the statement runs over the read's rows of the
keys it reads and one row per key standing for the reads before (the state's value, on a
line before every line of this read: an append only adds later lines), so that the
statement alone says which write counts and what a total is. Which keys it reads and which
column each feeds are asked of the statement itself (`statements.keys_read`, `_column_of`).
A file read whole again starts from a fresh state, as its rows do. `columns(led, run_id)` is
what the `runs` row holds: `command`, `last_error`, `last_error_line` (`log_facts(state)`,
from a logs.log's state alone) and the statement's columns (`cost_usd`, `tokens_sampled`,
`tokens_trained`). `seed(led, files)` fills the `run_totals` of a ledger
written before they were kept (or kept as the last writes themselves, `totals`), by the
statement over the snapshot's stored rows (as `progress.seed` does for its states).

tinker-cookbook 0.6.x logs the cumulative totals at every step, and `DiscardedWorkLog` logs
them again in step-less rows between steps (`JsonLogger.log_summary`); the final one may sit
at `step = max_steps` after training stopped early. `metrics.jsonl.pre_resume_*` copies are
not live and are not read here. Migration 0008 computes the same from stored `metrics_raw`
rows with its own frozen statement (`TOTALS_SQL` there), and tests hold the two together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..storage import schema
from ..storage.ledger import Ledger
from . import statements

if TYPE_CHECKING:
    import pyarrow as pa

STATEMENT = "totals.run_totals"
STATE = "run_totals"  # the metrics entry's state key: {cumulative key: its column's value}
OLD_STATE = "totals"  # what an earlier runstore kept there instead (the last writes)
LOGS = "logs.log"
METRICS = "metrics.jsonl"
# The metrics_raw columns the statement may read; the rows standing for earlier reads fill them.
READ = ("run_id", "key", "value", "seq", "pre_resume")
_columns: dict[str, str | None] = {}  # cumulative key -> the runs column it feeds


def note_metrics(state: dict[str, Any], rows: "pa.Table") -> None:
    """Move a live metrics file's state on by one read's `metrics_raw` rows."""
    import pyarrow.compute as pc

    before = state.get(STATE) or {}
    read = statements.keys_read(STATEMENT, "metrics_raw",
                                pc.unique(rows.column("key")).to_pylist())
    state[STATE] = before
    if not read:
        return
    rows = rows.filter(pc.is_in(rows.column("key"), value_set=_strings(sorted(read))))
    state[STATE] = _answers(rows.select(list(READ)), before, rows.column("run_id")[0].as_py())


def _answers(rows: "pa.Table", before: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The state after `rows` (one run's rows of keys the statement reads) joined `before`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    first = pc.min(rows.column("seq")).as_py() if rows.num_rows else 0
    standing = [{"run_id": run_id, "key": k, "value": v, "seq": first - 1, "pre_resume": False}
                for k, v in before.items() if v is not None]
    if standing:
        rows = pa.concat_tables([rows, schema.to_arrow("metrics_raw", standing)
                                 .select(list(READ))])
    out = statements.run(STATEMENT, {"metrics_raw": rows}).to_pylist()
    answer = out[0] if out else {}
    keys = set(before) | set(rows.column("key").to_pylist())
    return {k: answer.get(c) for k in sorted(keys) if (c := _column_of(k)) is not None}


def _column_of(key: str) -> str | None:
    """The `runs` column the statement fills from `key` (asked of it: one write of 1)."""
    if key not in _columns:
        probe = schema.to_arrow("metrics_raw", [{"run_id": "p", "key": key, "value": 1.0,
                                                 "seq": 1, "pre_resume": False}])
        out = statements.run(STATEMENT, {"metrics_raw": probe}).to_pylist()
        fed = [c for c, v in (out[0] if out else {}).items() if c != "run_id" and v == 1]
        _columns[key] = fed[0] if len(fed) == 1 else None
    return _columns[key]


def total_columns() -> list[str]:
    """The `runs` columns the statement answers (all but `run_id`)."""
    return [f.name for f in statements.run(STATEMENT, {"metrics_raw": schema.empty(
        "metrics_raw")}).schema if f.name != "run_id"]


def seed(led: Ledger, files: list[str]) -> bool:
    """Give every live metrics entry that lacks `run_totals` (a ledger written before they
    were kept) the statement's answer over its stored rows (`files`: the snapshot's
    `metrics_raw` files, read one at a time, only the keys the statement reads), so that the
    next read of such a file adds to what its earlier reads wrote. True when any entry
    changed: the ledger must then be published."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..storage.snapshot import open_parquet

    lacking = {e.source_id: e for e in led.entries.values()
               if e.kind == "metrics" and STATE not in e.state}
    if not lacking:
        return False
    parts = []
    for path in files:
        part = open_parquet(path).read(columns=["source_id", *READ])
        part = part.filter(pc.is_in(part.column("source_id"), value_set=_ids(list(lacking))))
        read = statements.keys_read(STATEMENT, "metrics_raw",
                                    pc.unique(part.column("key")).to_pylist())
        parts.append(part.filter(pc.is_in(part.column("key"), value_set=_strings(sorted(read)))))
    rows = pa.concat_tables(parts) if parts else None
    for sid, entry in lacking.items():
        mine = (rows.filter(pc.equal(rows.column("source_id"), sid)).select(list(READ))
                if rows is not None else None)
        entry.state[STATE] = (_answers(mine, {}, entry.run_id)
                              if mine is not None and mine.num_rows else {})
        entry.state.pop(OLD_STATE, None)
    return True


def _ids(ids: list[int]) -> "pa.Array":
    import pyarrow as pa

    return pa.array(ids, pa.int64())


def _strings(values: list[str]) -> "pa.Array":
    import pyarrow as pa

    return pa.array(values, pa.string())


LOG_FACTS = ("command", "last_error", "last_error_line")


def log_facts(state: dict[str, Any]) -> dict[str, Any]:
    """The `runs` columns a logs.log's ledger state holds (normalize/logs.py moves it on):
    `LOG_FACTS`."""
    return {c: state.get(c) for c in LOG_FACTS}


def columns(led: Ledger, run_id: str) -> dict[str, Any]:
    """The `runs` row's command, last error and totals for the run's ledger entries."""
    log = led.get(run_id, LOGS)
    out = log_facts(log.state if log is not None else {})
    metrics = led.get(run_id, METRICS)
    kept = (metrics.state.get(STATE) or {}) if metrics is not None else {}
    out.update(dict.fromkeys(_total_columns()))
    out.update({c: v for k, v in kept.items() if (c := _column_of(k)) is not None})
    return out


_totals: list[str] = []


def _total_columns() -> list[str]:
    if not _totals:
        _totals.extend(total_columns())
    return _totals
