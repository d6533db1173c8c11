"""checkpoints.jsonl records → `checkpoints` rows, one per record.

Contract: `normalize(records, ctx) -> {"checkpoints": rows}` where `records` yields
`(line_number, decoded_object)` pairs. Known keys map to columns: `name` (str), `batch` and
`epoch` (int), `final` and `rolling` (bool), `state_path` and `sampler_path` (str). Every other
key goes, in file order, into `extra` as one JSON object text (null when there is none). `seq` is
the line number, so "the latest checkpoint" is the one with the largest `seq`.

Tolerance: a record that is not an object is reported and skipped. A known key with an unusable
value is reported (once per line, listing the fields) and stored as null; values that are
unambiguous spellings of the right type are coerced silently (an integral float `20.0` or a digit
string `"20"` for an int, an int `50` for the name). A missing key is simply null: upstream omits
known keys whose value is None, and a record may lack `name`.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from ...numbers import fits_int64, int64_from_digits
from ...storage import schema
from .. import progress
from .base import Batch, Context, Output, clean_str as _clean_str, json_text as _json_text

__all__ = ["Checkpoints", "normalize", "KNOWN_KEYS"]

KNOWN_KEYS = ("name", "batch", "epoch", "final", "state_path", "sampler_path", "rolling")


_BAD = object()  # sentinel: present but unusable


def _as_int(value: Any) -> Any:
    if isinstance(value, bool):
        return _BAD
    if isinstance(value, float):
        value = int(value) if value.is_integer() else _BAD
    elif isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text[:1] in ("+", "-") else text
        if not (digits.isascii() and digits.isdigit()):
            return _BAD
        value = int64_from_digits(text)
        return _BAD if value is None else value
    return value if isinstance(value, int) and fits_int64(value) else _BAD


def _as_bool(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return _BAD


def _as_str(value: Any) -> Any:
    if isinstance(value, str):
        return _clean_str(value)
    return _BAD


def _as_name(value: Any) -> Any:
    # A step number written as an int is still a usable name; anything else is not.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _as_str(value)


_COERCE = {
    "name": _as_name,
    "batch": _as_int,
    "epoch": _as_int,
    "final": _as_bool,
    "state_path": _as_str,
    "sampler_path": _as_str,
    "rolling": _as_bool,
}


def normalize(records: Iterable[tuple[int, Any]], ctx: Context) -> dict[str, list[dict]]:
    base = ctx.base()
    rows: list[dict] = []
    for line, rec in records:
        if not isinstance(rec, dict):
            ctx.warn(line, f"checkpoint record is a JSON {type(rec).__name__}, not an object; skipped")
            continue
        row: dict[str, Any] = {**base, "seq": line}
        bad: list[str] = []
        for key in KNOWN_KEYS:
            value = rec.get(key)
            if value is None:
                row[key] = None
                continue
            coerced = _COERCE[key](value)
            if coerced is _BAD:
                bad.append(f"{key}={json.dumps(value, allow_nan=True)[:60]}")
                coerced = None
            row[key] = coerced
        extra = {k: v for k, v in rec.items() if k not in _COERCE}
        row["extra"] = _json_text(extra) if extra else None
        if bad:
            ctx.warn(line, "checkpoint fields of the wrong type stored as null: " + ", ".join(bad))
        rows.append(row)
    return {"checkpoints": rows}


class Checkpoints:
    """checkpoints.jsonl → `checkpoints`; the ledger state remembers a final checkpoint
    (`final`, ingest/progress.py: the run's status is `completed`)."""

    kinds = ("checkpoints",)
    tables = ("checkpoints",)

    def normalize(self, batch: Batch) -> Output:
        out = Output()
        rows = schema.to_arrow("checkpoints", normalize(batch.records(), batch.ctx)["checkpoints"])
        out.add("checkpoints", rows)
        progress.note_checkpoints(batch.state, rows, batch.ctx.run_id)
        return out
