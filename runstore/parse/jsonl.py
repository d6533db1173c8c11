"""Tolerant JSON-lines reading.

Contract:

* `read_span(path, start, complete_lines)` returns the bytes of a file from `start` to its end,
  or — for append-only files — only up to and including the last `\\n`, so a line still being
  written is left for the next read. Sources are opened read-only; nothing is written to them.
* `records(data, first_line, ctx)` yields `(line_number, object)` for every line that decodes
  as JSON (Python's decoder: bare `NaN`, `Infinity`, `-Infinity` accepted; a UTF-8 BOM and CRLF
  endings tolerated; blank lines skipped). Any other line — invalid UTF-8, invalid JSON, a cut
  line, absurd nesting — is reported once as `file:line` through `ctx.warn` and skipped.
* `fast_table(data)` tries pyarrow's multithreaded JSON reader on the whole buffer and returns
  None when it refuses it (type changes inside a column, duplicate keys, a bad line, a line
  longer than a block); callers then fall back to `records`.
"""

from __future__ import annotations

import io
import json
from typing import Any, Iterator

import pyarrow as pa

from ..normalize import Context

_decoder = json.JSONDecoder()
BLOCK = 8 << 20


def read_span(path: str, start: int, *, complete_lines: bool) -> bytes:
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read()
    if complete_lines:
        cut = data.rfind(b"\n")
        data = data[: cut + 1] if cut >= 0 else b""
    return data


def read_tail(path: str, end: int, n: int) -> bytes:
    """The `n` bytes just before `end` (to check an append-only file was not rewritten)."""
    start = max(0, end - n)
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(end - start)


def decode_line(raw: bytes) -> Any:
    """One line → a JSON value; raises ValueError (UnicodeDecodeError, JSONDecodeError, …)."""
    text = raw.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    return json.loads(text)


def records(data: bytes, first_line: int, ctx: Context) -> Iterator[tuple[int, Any]]:
    lineno = first_line - 1
    for raw in data.split(b"\n"):
        lineno += 1
        if not raw.strip():
            continue
        try:
            yield lineno, decode_line(raw)
        except RecursionError:
            ctx.warn(lineno, "skipped: JSON nested too deeply")
        except UnicodeDecodeError as e:
            ctx.warn(lineno, f"skipped: not valid UTF-8 ({e.reason} at byte {e.start})")
        except ValueError as e:
            ctx.warn(lineno, f"skipped: not valid JSON ({_short(e)})")


def count_lines(data: bytes) -> int:
    """Complete lines in a buffer read by `read_span`."""
    return data.count(b"\n")


def fast_table(data: bytes, schema: pa.Schema | None = None) -> pa.Table | None:
    import pyarrow.json as pj

    if not data or data.isspace():
        return None
    if data.startswith(b"\xef\xbb\xbf") or b"\r" in data[:4096]:
        return None  # BOM / CRLF: leave it to the line decoder
    try:
        opts = pj.ReadOptions(block_size=BLOCK, use_threads=True)
        parse = (pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
                 if schema is not None else None)
        return pj.read_json(io.BytesIO(data), read_options=opts, parse_options=parse)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowException):
        return None


def _short(e: Exception) -> str:
    text = str(e)
    return text if len(text) <= 120 else text[:117] + "..."
