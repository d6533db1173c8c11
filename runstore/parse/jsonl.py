"""Tolerant JSON-lines reading.

Contract:

* `read_span(path, start, complete_lines)` returns the bytes of a file from `start` to its end,
  or — for append-only files — only up to and including the last `\\n`, so a line still being
  written is left for the next read. Sources are opened read-only; nothing is written to them.
* `records(data, first_line, ctx)` yields `(line_number, object)` for every line that decodes
  as JSON (Python's decoder: bare `NaN`, `Infinity`, `-Infinity` accepted; a UTF-8 BOM and CRLF
  endings tolerated; blank lines skipped). Any other line — invalid UTF-8, invalid JSON, a cut
  line, brackets nested deeper than `MAX_NESTING` — is reported once as `file:line` through
  `ctx.warn` and skipped. The nesting bound is ours, not the interpreter's: Python's decoder
  and encoder recurse, and how much of the recursion limit a caller has left varies, so
  without it the same line could pass here and overflow later when a value is re-encoded.
  `loads(data)` applies the same rule to a whole JSON file.
* `fast_table(data)` tries pyarrow's JSON reader on the whole buffer (in the calling thread)
  and returns None when it refuses it (type changes inside a column, duplicate keys, a bad
  line, a line longer than `BLOCK`), and does not even try unless every line starts with `{`,
  the buffer is valid UTF-8 and no line nests deeper than `FAST_MAX_NESTING`: pyarrow 26's
  reader kills the process (a segfault, not an error) on a first line `null` and on absurd
  nesting (it recurses once per level and overflows its thread's stack), and passes invalid
  UTF-8 through. Callers then fall back to `records`, which reports such lines instead.
"""

from __future__ import annotations

import io
import json
from functools import lru_cache
from typing import Any, Iterator

import pyarrow as pa

from ..fs import S3, is_remote
from ..normalize import Context

_decoder = json.JSONDecoder()
BLOCK = 8 << 20  # longest line pyarrow's reader is given
MAX_NESTING = 512  # deeper JSON is refused as "nested too deeply" (see the module docstring)
FAST_MAX_NESTING = 64  # deeper buffers skip pyarrow's reader
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_BRACKET_LIMIT = 32 << 20  # a buffer with more bracket bytes skips pyarrow's reader too
_SHORT = 4096  # `loads` counts the brackets of shorter texts before measuring their nesting


@lru_cache(maxsize=1)
def _depth_steps() -> Any:
    """+1 for each opening bracket byte, -1 for each closing one, 0 for any other byte."""
    import numpy as np

    steps = np.zeros(256, dtype=np.int8)
    steps[list(b"[{")] = 1
    steps[list(b"]}")] = -1
    return steps


def read_span(path: str, start: int, *, complete_lines: bool) -> bytes:
    """The bytes of `path` (a local path or an `s3://` URI) from `start` to its end, cut
    after the last newline when `complete_lines`."""
    if is_remote(path):
        data = _s3_range(path, start, None)
    else:
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
    if is_remote(path):
        return _s3_range(path, start, end)
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(end - start)


def _s3_range(uri: str, start: int, end: int | None) -> bytes:
    return S3(uri).read_range("", start, end)


def decode_line(raw: bytes) -> Any:
    """One line → a JSON value; raises ValueError (UnicodeDecodeError, JSONDecodeError, …),
    or RecursionError when it nests deeper than MAX_NESTING."""
    text = raw.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    return loads(text, raw)


def loads(text: str | bytes, raw: bytes | None = None) -> Any:
    """`json.loads`, refusing (RecursionError) JSON nested deeper than MAX_NESTING."""
    if raw is None:
        raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    # Counting brackets first is a cheap way out for a short line; a whole file (a logtree)
    # has more than MAX_NESTING of them anyway, so it goes straight to `nesting`.
    if (len(raw) > _SHORT or raw.count(b"[") + raw.count(b"{") > MAX_NESTING) \
            and not 0 <= nesting(raw) <= MAX_NESTING:
        raise RecursionError(f"JSON nested deeper than {MAX_NESTING} levels")
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
    """Complete lines in a buffer read by `read_span`.

    numpy rather than `bytes.count`: faster, and it releases the GIL (see `_objects_only`).
    """
    import numpy as np

    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == 0x0A))


def fast_table(data: bytes, schema: pa.Schema | None = None) -> pa.Table | None:
    """`data` (complete JSON lines) parsed by pyarrow in one go, or None when the buffer needs
    the line decoder: a line that is not an object (a blank line too, so line numbers hold),
    a BOM or CRLF, invalid UTF-8, deep nesting, or anything pyarrow refuses."""
    import pyarrow.json as pj

    if not data or data.isspace():
        return None
    if data.startswith(b"\xef\xbb\xbf") or b"\r" in data[:4096]:
        return None  # BOM / CRLF: leave it to the line decoder
    if not _objects_only(data):
        return None  # a line that is not an object (a leading `null` crashes pyarrow)
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None  # pyarrow passes invalid UTF-8 through: let `records` report the line
    if not 0 <= nesting(data) <= FAST_MAX_NESTING:
        return None
    try:
        # One thread per buffer: the ingest reads several files at once, and splitting a
        # buffer into blocks for pyarrow's own threads cost ~15% more CPU (see benchmarks.md).
        opts = pj.ReadOptions(block_size=BLOCK, use_threads=False)
        parse = (pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
                 if schema is not None else None)
        return pj.read_json(io.BytesIO(data), read_options=opts, parse_options=parse)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowException):
        return None


def _objects_only(data: bytes) -> bool:
    """Whether every line of `data` starts with `{` (no blank line either).

    numpy rather than `bytes.count(b"\\n{")`: 4× faster, and it releases the GIL, so the
    guard of one file overlaps the work of the others (see ingest.py's read-ahead).
    """
    import numpy as np

    if not data.startswith(b"{"):
        return False
    raw = np.frombuffer(data, dtype=np.uint8)
    after = np.flatnonzero(raw[:-1] == 0x0A) + 1  # the byte after every newline but a last one
    return bool((raw[after] == 0x7B).all())


def nesting(data: bytes) -> int:
    """How deep `[`/`{` brackets nest in `data`, at most (brackets inside strings count too).

    Only the bracket bytes are kept (`bytes.translate`, ~2 GB/s) and their running depth is
    computed with numpy; -1 when there are too many of them to bother (over `_BRACKET_LIMIT`).
    """
    import numpy as np

    brackets = data.translate(None, _NOT_BRACKETS)
    if len(brackets) > _BRACKET_LIMIT:
        return -1
    depth = np.cumsum(_depth_steps()[np.frombuffer(brackets, dtype=np.uint8)], dtype=np.int32)
    return int(depth.max(initial=0))


def _short(e: Exception) -> str:
    text = str(e)
    return text if len(text) <= 120 else text[:117] + "..."
