"""Run files edited behind the ingest's back, and a run's metric rows read two ways.

For the ingest tests (tests/ingest) and the same cases on object storage (tests/storage):
`jsonl_lines` / `write_lines` read and write a JSON-lines file's complete lines; `edit_early`
changes one number on line 1 of one of the small tree's append-only files, keeping the size
and the last 64 bytes, so only the ingest's fingerprint can notice; `big_metrics` makes a
metrics file past `changes.PREFIX_HASH_MAX`, and `loss_digit` / `changed_digit` find and change
one digit of it inside or outside the sampled blocks. `metric_rows_in_store` is a run's live
`metrics_raw` rows as the store holds them, `oracle_metric_rows` the same read from the file by
`oracle`, both sorted alike.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import oracle
import runstore
from runstore.ingest import changes


def metric_rows_in_store(store: runstore.Store, rid: str) -> list[tuple[Any, str, Any, int]]:
    """(step, key, value, seq) of a run's live-file rows (not pre_resume), sorted."""
    rows = store.arrow("select step, key, value, value_str, seq from metrics_raw "
                       "where run_id = $rid and not pre_resume", {"rid": rid}).to_pylist()
    return sorted(((r["step"], r["key"], r["value_str"] if r["value"] is None else r["value"],
                    r["seq"]) for r in rows), key=_sort_key)


def oracle_metric_rows(path: Path) -> list[tuple[Any, str, Any, int]]:
    out = []
    for step, key, v, line in oracle.metric_rows(path):
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, (int, float)):
            v = float(v)
        out.append((step, key, v, line))
    return sorted(out, key=_sort_key)


def _sort_key(r: tuple[Any, str, Any, int]) -> tuple[int, str]:
    return (r[3], r[1])


def jsonl_lines(path: Path) -> list[bytes]:
    """Complete lines (without their newline) of a JSON-lines file."""
    data = path.read_bytes()
    return data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]


def write_lines(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


RUN = "a/rl_dirs"
# A number on line 1 of each append-only file of the small tree's traced run, and the key
# it belongs to: its last digit is what the edit changes.
EDITED_KEY = {"metrics.jsonl": None, "timing_spans.jsonl": "duration",
              "trace_events.jsonl": "ts", "checkpoints.jsonl": "batch"}


def edit_line(line: bytes, key: str | None) -> bytes:
    """`line` with the last digit of one number changed: same length, another value."""
    pattern = rb'"[^"]*": -?\d+\.\d+' if key is None else rb'"' + key.encode() + rb'": -?\d+(\.\d+)?'
    m = re.search(pattern, line)
    assert m, line
    end = m.end() - 1
    digit = line[end] - 0x30
    return line[:end] + bytes([0x30 + (digit + 1) % 10]) + line[end + 1:]


def edit_early(path: Path) -> bytes:
    """Edit line 1 of `path` in place (same size, same last 64 bytes); the old bytes."""
    old = path.read_bytes()
    lines = jsonl_lines(path)
    lines[0] = edit_line(lines[0], EDITED_KEY[path.name])
    write_lines(path, lines)
    new = path.read_bytes()
    assert len(new) == len(old) and new[-64:] == old[-64:] and new != old
    return old


def big_metrics(path: Path) -> None:
    """Make `path` a metrics file well past `PREFIX_HASH_MAX`."""
    lines = [json.dumps({"step": i, "loss": 1.0 / (i + 1), "pad": "x" * 900}).encode()
             for i in range(1400)]
    write_lines(path, lines)
    assert path.stat().st_size > changes.PREFIX_HASH_MAX


def loss_digit(data: bytes, inside: bool, ranges: list[tuple[int, int]],
               tail_from: int) -> int:
    """Where the first decimal of a `"loss": d.ddd` value lies wholly inside one of `ranges`
    (`inside`), or outside all of them and before `tail_from`: changing that digit changes
    the value, not the length."""
    for m in re.finditer(rb'"loss": (\d\.\d+)', data):
        lo, hi = m.span(1)
        hit = any(s <= lo and hi <= e for s, e in ranges)
        clear = all(hi <= s or lo >= e for s, e in ranges) and hi <= tail_from
        if (hit if inside else clear):
            return lo + 2
    raise AssertionError("no such value")


def changed_digit(b: int) -> bytes:
    return bytes([0x30 + (b - 0x30 + 1) % 10])
