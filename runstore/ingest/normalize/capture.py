"""capture/<kind>.jsonl (token-level capture) → `samples` and `capture_events` rows.

Contract: the files are what tinker-cookbook's `capture.JsonlFileSink` appends: raw records,
one per SDK call, in completion order (`capture/instrument.py` makes them: `kind`, `scope`,
`created_at`, and per kind the request metadata and the outcome). They are split as the
capture store's own sink splits them (`capture/store/client.py`):

* a `sample` record whose `samples` is a list holding an object gives one `samples` row per
  object in it (`sample_idx` its position; an element that is no object is reported and
  skipped): the scope's coordinates (`run_attempt`, `split`,
  `iteration`, `group_idx`, `traj_idx`, `purpose`; the scope's `run_id`, a name user code
  chose, as `capture_run_id`), `sampling_session_id`, `seq_id`, `policy_version` (the
  record's `model_path`, else `policy_version`), `created_at`, `prompt_tokens`, the
  element's `tokens` (`sampled_tokens`) and `logprobs` as list columns, its `stop_reason`,
  and `metadata`: the record's other keys, the element's `stop_reason` and the scope's
  other keys (under `scope`), as JSON text. Token lists are never expanded into rows.
  `prompt_len`, `sampled_len`, `n_logprobs` are the lists' lengths and `logprob_sum` the
  logprobs' correctly rounded sum (`logprob_sum`; views use these: SQL over list columns
  does not transpile everywhere).
* any other record — every non-`sample` kind (`train_op`), and a `sample` record without
  sequences (a cancelled or failed call; a `samples` list of no object, reported) — is one
  `capture_events` row: `kind`, `op`,
  `status`, `error`, `created_at`, `latency_s`, the scope's coordinates, `event_id` (the
  record's, else `<source_id>:<line>`, stable across re-reads) and the whole record as JSON
  text (`payload`).

Both tables' `run_id` is the run whose directory holds the file; `seq` is the line number.
A scope coordinate that is missing is null without a word (user code sets the ones it
wants). Bad input costs only itself: a line that is not a JSON object is reported and
skipped; a field of the wrong type (`fields.Fields` says what each column accepts: a token
list holding a string or a float, a coordinate that is not an integer, a `created_at` that
is no time) is reported, once per line with every such field named, and stored as null, the
rest of the record kept.

The file is normalized `CHUNK` bytes of lines at a time, each chunk's rows turned into Arrow
at once, so memory holds the decoded records of one chunk only.
"""

from __future__ import annotations

import math
from itertools import chain
from typing import Any, Iterable

from .. import parse
from .base import Batch, Context, Output, clean_str, json_text
from .fields import Fields

CHUNK = 32 << 20
SCOPE_INTS = ("run_attempt", "iteration", "group_idx", "traj_idx")
SCOPE_STRS = ("split", "purpose")
SCOPE_KEYS = ("run_id", *SCOPE_INTS, *SCOPE_STRS)
# Keys of a sample record with a column of their own (the rest goes to `metadata`), as the
# capture store's sink leaves them out of its metadata.
SAMPLE_COLUMNS = frozenset({"kind", "scope", "samples", "sampling_session_id", "seq_id",
                            "created_at", "prompt_tokens"})


def _scope(rec: dict, f: Fields) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the scope's coordinate columns, its other keys)."""
    scope = rec.get("scope")
    if scope is None:
        scope = {}
    if not isinstance(scope, dict):
        f.bad("scope", scope)
        scope = {}
    cols: dict[str, Any] = {k: f.int(scope, k, f"scope.{k}") for k in SCOPE_INTS}
    cols.update({k: f.str(scope, k, f"scope.{k}") for k in SCOPE_STRS})
    cols["capture_run_id"] = f.str(scope, "run_id", "scope.run_id")
    return cols, {k: v for k, v in scope.items() if k not in SCOPE_KEYS}


def records(recs: Iterable[tuple[int, Any]], ctx: Context
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(`samples` rows, `capture_events` rows) of decoded capture records."""
    samples: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    base = ctx.base()
    for line, rec in recs:
        if not isinstance(rec, dict):
            ctx.warn(line, f"capture record is a JSON {type(rec).__name__}, not an object; "
                           "skipped")
            continue
        f = Fields()
        scope, extra_scope = _scope(rec, f)
        common = {**base, **scope, "created_at": f.time(rec, "created_at"), "seq": line}
        kind = f.str(rec, "kind", "kind")
        seqs = rec.get("samples")
        # A sample record with at least one sequence (an object) is sample rows; one with
        # none (a cancelled or failed call, or a list of no object) is an event.
        if kind == "sample" and isinstance(seqs, list) and any(isinstance(s, dict) for s in seqs):
            meta = {k: v for k, v in rec.items() if k not in SAMPLE_COLUMNS}
            if extra_scope:
                meta["scope"] = extra_scope
            policy = rec.get("model_path") or rec.get("policy_version")
            call = {**common,
                    "sampling_session_id": f.str(rec, "sampling_session_id",
                                                 "sampling_session_id"),
                    "seq_id": f.int(rec, "seq_id", "seq_id"),
                    "policy_version": clean_str(policy) if isinstance(policy, str) else None,
                    "prompt_tokens": f.ints(rec.get("prompt_tokens"), "prompt_tokens")}
            if policy is not None and not isinstance(policy, str):
                f.bad("model_path", policy)
            for idx, seq in enumerate(seqs):
                where = f"samples[{idx}]"
                if not isinstance(seq, dict):
                    f.problems.append(f"{where} is not an object (skipped)")
                    continue
                stop = seq.get("stop_reason")
                samples.append({**call, "sample_idx": idx,
                                "sampled_tokens": f.ints(seq.get("tokens"), f"{where}.tokens"),
                                "logprobs": f.numbers(seq.get("logprobs"), f"{where}.logprobs"),
                                "stop_reason": f.str(seq, "stop_reason",
                                                     f"{where}.stop_reason"),
                                "metadata": json_text({**meta, "stop_reason": stop})})
        else:
            if seqs is not None and (not isinstance(seqs, list) or seqs):
                f.bad("samples", seqs)  # not a list, or a list of no sequence
            event_id = rec.get("event_id")
            events.append({**common, "kind": kind, "op": f.str(rec, "op", "op"),
                           "status": f.str(rec, "status", "status"),
                           "error": f.str(rec, "error", "error"),
                           "latency_s": f.float(rec, "latency_sec"),
                           "event_id": (clean_str(event_id) if isinstance(event_id, str)
                                        else f"{ctx.source_id}:{line}"),
                           "payload": json_text(rec)})
        if f.problems:
            ctx.warn(line, "capture fields of the wrong type stored as null: "
                           + ", ".join(f.problems))
    return samples, events


def _chunks(data: bytes, first_line: int) -> Iterable[tuple[bytes, int]]:
    """`data` in pieces of about `CHUNK` bytes cut after a newline, each with its first
    line's number."""
    start, line = 0, first_line
    while start < len(data):
        end = data.find(b"\n", min(start + CHUNK, len(data)) - 1)
        end = len(data) if end < 0 else end + 1
        piece = data[start:end]
        yield piece, line
        line += piece.count(b"\n")
        start = end


def logprob_sum(values: list[float]) -> float:
    """The correctly rounded sum of a sequence's logprobs (`math.fsum`: independent of the
    order of summing); NaN when one is NaN or +Infinity meets -Infinity, ±Infinity when
    they overflow."""
    try:
        return math.fsum(values)
    except (ValueError, OverflowError):
        return float(sum(values))


def _list_column(values: list[list[Any] | None], dtype: Any) -> tuple[Any, Any]:
    """(an Arrow list column of `values`, their lengths as an int64 column; nulls kept):
    built from one flat numpy array, not from a Python list per row."""
    import numpy as np
    import pyarrow as pa

    missing = np.array([v is None for v in values], dtype=bool)
    lengths = np.array([0 if v is None else len(v) for v in values], dtype=np.int64)
    offsets = np.zeros(len(values) + 1, dtype=np.int32 if lengths.sum() < 2**31 else np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.fromiter(chain.from_iterable(v for v in values if v), dtype=dtype,
                       count=int(offsets[-1]))
    kind = pa.ListArray if offsets.dtype == np.int32 else pa.LargeListArray
    column = kind.from_arrays(pa.array(offsets), pa.array(flat), mask=pa.array(missing))
    return column.cast(pa.list_(pa.from_numpy_dtype(dtype))), pa.array(lengths, mask=missing)


def _samples_table(rows: list[dict[str, Any]]) -> Any:
    """`samples` rows as an Arrow table of the table's schema."""
    import numpy as np
    import pyarrow as pa

    from ...storage import schema

    target = schema.schema("samples")
    built: dict[str, Any] = {}
    built["prompt_tokens"], built["prompt_len"] = _list_column(
        [r["prompt_tokens"] for r in rows], np.int64)
    built["sampled_tokens"], built["sampled_len"] = _list_column(
        [r["sampled_tokens"] for r in rows], np.int64)
    logprobs = [r["logprobs"] for r in rows]
    built["logprobs"], built["n_logprobs"] = _list_column(logprobs, np.float64)
    built["logprob_sum"] = pa.array([None if v is None else logprob_sum(v) for v in logprobs],
                                    pa.float64())
    plain = pa.schema([f for f in target if f.name not in built])
    table = pa.Table.from_pylist([{c: r.get(c) for c in plain.names} for r in rows],
                                 schema=plain)
    for name, column in built.items():
        table = table.append_column(name, column)
    return table.select(target.names).cast(target)


class Capture:
    """capture/<kind>.jsonl → `samples` (one row per sampled sequence) and `capture_events`
    (every other record)."""

    kinds = ("capture",)
    tables = ("samples", "capture_events")

    def normalize(self, batch: Batch) -> Output:
        out = Output()
        for piece, line in _chunks(batch.data, batch.first_line):
            samples, events = records(parse.records(piece, line, batch.ctx), batch.ctx)
            if samples:
                out.add("samples", _samples_table(samples))
            out.rows({"capture_events": events})
        return out
