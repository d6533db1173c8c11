"""Tolerant reading of source files: bytes in, decoded records out, bad lines reported.

Contract:

* `read_span(where, rel, start, complete_lines)` returns the bytes of the file `rel` of the
  location `where` (a run directory, local or on S3) from `start` to its end, or — for
  append-only files — only up to and including the last `\\n`, so a line still being
  written is left for the next read. Sources are opened read-only; nothing is written to
  them.
* `records(data, first_line, ctx)` yields `(line_number, object)` for every line that decodes
  as JSON (Python's decoder: bare `NaN`, `Infinity`, `-Infinity` accepted; a UTF-8 BOM and CRLF
  endings tolerated; blank lines skipped; an integer too long for Python's int conversion limit
  (4,300 digits) becomes the float it rounds to, ±inf, like any number beyond a double). Any
  other line — invalid UTF-8, invalid JSON, a cut line, nested deeper than `MAX_NESTING` — is
  reported once through `ctx.warn(line, message)` (any object with that method: a
  normalizer's `Context`) and skipped. The nesting bound is ours, not
  the interpreter's: Python's decoder and encoder recurse, and how much of the recursion limit
  a caller has left varies, so without it the same line could pass here and overflow later
  when a value is re-encoded. `loads(data)` applies the same rules to a whole JSON file.
* `nesting(data)` is the structural depth: brackets inside strings (escapes included) do not
  count, so text never makes a valid line or file "too deep".
* `fast_table(data)` tries pyarrow's JSON reader on the whole buffer (in the calling thread)
  and returns None when it refuses it (type changes inside a column, duplicate keys, a bad
  line, a line longer than `BLOCK`), and does not even try unless every line starts with `{`,
  the buffer is valid UTF-8 and no line nests deeper than `FAST_MAX_NESTING`: pyarrow 26's
  reader kills the process (a segfault, not an error) on a first line `null` and on absurd
  nesting (it recurses once per level and overflows its thread's stack), and passes invalid
  UTF-8 through. It also returns None where pyarrow would read a line otherwise than `records`
  does: two objects on one line (pyarrow makes two rows of it), and the tokens `Inf`, `-Inf`
  and `-NaN` (pyarrow takes them, Python's decoder does not). Callers then fall back to
  `records`, which reports such lines instead.
"""

from __future__ import annotations

import io
import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterator, Protocol

from ..storage.location import Location

if TYPE_CHECKING:  # pyarrow is imported where it reads: `loads` (`--group-by`, a request's
    import pyarrow as pa  # JSON body) must not pay ~0.1 s for it

_decoder = json.JSONDecoder()
BLOCK = 8 << 20  # longest line pyarrow's reader is given
MAX_NESTING = 512  # deeper JSON is refused as "nested too deeply" (see the module docstring)
FAST_MAX_NESTING = 64  # deeper buffers skip pyarrow's reader
_NOT_OPENERS = bytes(c for c in range(256) if c not in b"[{\n")
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'"[]{}')
_NOT_LINE_STRUCTURE = bytes(c for c in range(256) if c not in b'"[]{}\n')
_SCAN_BLOCK = 1 << 20  # quotes, brackets and newlines a depth scan follows at once


@lru_cache(maxsize=1)
def _depth_steps() -> Any:
    """+1 for each opening bracket byte, -1 for each closing one, 0 for any other byte."""
    import numpy as np

    steps = np.zeros(256, dtype=np.int8)
    steps[list(b"[{")] = 1
    steps[list(b"]}")] = -1
    return steps


class Warns(Protocol):
    """Where `records` reports a line it skips."""

    def warn(self, line: int | None, message: str) -> None: ...


def read_span(where: Location, rel: str, start: int, *, complete_lines: bool) -> bytes:
    """The bytes of `where`'s file `rel` from `start` to its end, cut after the last newline
    when `complete_lines`."""
    data = where.read_range(rel, start, None)
    if complete_lines:
        cut = data.rfind(b"\n")
        data = data[: cut + 1] if cut >= 0 else b""
    return data


def decode_line(raw: bytes) -> Any:
    """One line → a JSON value; raises ValueError (UnicodeDecodeError, JSONDecodeError, …),
    or RecursionError when it nests deeper than MAX_NESTING."""
    text = raw.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    return loads(text, raw)


def _int_or_float(text: str) -> int | float:
    # Past Python's int conversion limit an integer has hundreds of digits more than a double
    # can hold: it rounds to ±inf, as pyarrow's reader and Python's own `float()` give.
    try:
        return int(text)
    except ValueError:
        return float(text)


_lenient = json.JSONDecoder(parse_int=_int_or_float)


def loads(text: str | bytes, raw: bytes | None = None) -> Any:
    """`json.loads`, refusing (RecursionError) JSON nested deeper than MAX_NESTING."""
    if raw is None:
        raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    # Counting the opening brackets (two byte counts, far faster than the scan) bounds the
    # depth: a line of a few, however long (a capture record's token lists), needs no scan.
    if raw.count(b"[") + raw.count(b"{") > MAX_NESTING and nesting(raw) > MAX_NESTING:
        raise RecursionError(f"JSON nested deeper than {MAX_NESTING} levels")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except ValueError:
        # Not a syntax error: an integer past Python's int conversion limit (4,300 digits).
        # The decoder with a custom `parse_int` is slower, so it is only the second try.
        if isinstance(text, bytes):
            text = text.decode(json.detect_encoding(text), "surrogatepass")
        return _lenient.decode(text)


def records(data: bytes, first_line: int, ctx: Warns) -> Iterator[tuple[int, Any]]:
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
    import pyarrow as pa
    import pyarrow.json as pj

    if not data or data.isspace():
        return None
    if data.startswith(b"\xef\xbb\xbf") or b"\r" in data[:4096]:
        return None  # BOM / CRLF: leave it to the line decoder
    n_lines = _objects_only(data)
    if not n_lines:
        return None  # a line that is not an object (a leading `null` crashes pyarrow)
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None  # pyarrow passes invalid UTF-8 through: let `records` report the line
    if _openers_per_line(data) > FAST_MAX_NESTING \
            and nesting(data, per_line=True) > FAST_MAX_NESTING:
        return None
    # `Inf`, `-Inf`, `-NaN`: pyarrow reads them, Python's decoder does not. (A one-byte
    # search is memchr; the longer ones only run when the byte is there.)
    if b"I" in data and data.count(b"Inf") != data.count(b"Infinity") \
            or b"N" in data and b"-NaN" in data:
        return None
    try:
        # One thread per buffer: the ingest reads several files at once, and splitting a
        # buffer into blocks for pyarrow's own threads cost ~15% more CPU (see benchmarks.md).
        opts = pj.ReadOptions(block_size=BLOCK, use_threads=False)
        parse = (pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
                 if schema is not None else None)
        table = pj.read_json(io.BytesIO(data), read_options=opts, parse_options=parse)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowException):
        return None
    # A line holding two objects (`{...}{...}`) is two rows to pyarrow and a bad line to
    # Python's decoder; every line starts with `{`, so equal counts mean one row per line.
    return table if table.num_rows == n_lines else None


def _objects_only(data: bytes) -> int:
    """The number of lines of `data` when every one starts with `{` (no blank line either),
    else 0.

    numpy rather than `bytes.count(b"\\n{")`: 4× faster, and it releases the GIL, so the
    guard of one file overlaps the work of the others (see ingest.py's read-ahead).
    """
    import numpy as np

    if not data.startswith(b"{"):
        return 0
    raw = np.frombuffer(data, dtype=np.uint8)
    after = np.flatnonzero(raw[:-1] == 0x0A) + 1  # the byte after every newline but a last one
    return len(after) + 1 if (raw[after] == 0x7B).all() else 0


def _openers_per_line(data: bytes) -> int:
    """The most `[`/`{` bytes on one line of `data`: a bound on each line's depth that costs
    one `bytes.translate` (~2 GB/s) and a pass over what it keeps (about two bytes a line in
    a metrics file)."""
    import numpy as np

    kept = np.frombuffer(data.translate(None, _NOT_OPENERS), dtype=np.uint8)
    if not len(kept):
        return 0
    ends = np.flatnonzero(kept == 0x0A)
    # openers before each newline, and the line lengths in openers between them
    before = ends - np.arange(len(ends))
    counts = np.diff(before, prepend=0)
    last = len(kept) - len(ends) - (before[-1] if len(ends) else 0)
    return int(max(counts.max(initial=0), last))


def nesting(data: bytes, *, per_line: bool = False) -> int:
    """How deep `[`/`{` nest in `data` as JSON structure, which strings are not: a bracket
    between the quotes of a string (`"\\x1b[31m"`, `"a regex ["`) does not count, an escaped
    quote (`\\"`) does not end a string, and `\\\\` is an escaped backslash. With `per_line`,
    the most any one line nests (JSON lines, each lexed on its own, as pyarrow's reader does);
    else the whole text's depth (a JSON file).

    For valid JSON the answer is its exact depth. With `per_line`, for any text: every prefix
    of a line that a JSON parser accepts is lexed the same way here (a string never spans
    lines), so no parser can recurse deeper on the line than this says before it meets an
    error. A whole text is lexed as one: Python's decoder, which is what reads those, accepts
    no raw newline inside a string either, and on any text it refuses, a wrong answer here
    costs nothing.

    The scan keeps only quotes and brackets (and newlines, per line) with `bytes.translate`,
    masks there the quotes a backslash escapes (`_escaped_quotes`, usually a handful), drops
    each pair of quotes with nothing kept between them, and follows what is left with numpy,
    `_SCAN_BLOCK` of it at a time so that memory stays bounded whatever the size.
    """
    import numpy as np

    text: bytes | bytearray = data.translate(None, _NOT_LINE_STRUCTURE if per_line
                                             else _NOT_STRUCTURE)
    if b"\\" in data:
        escaped = _escaped_quotes(data)
        if len(escaped):
            # The n-th quote of `data` is the n-th of `text`: mask the escaped ones there.
            raw = np.frombuffer(data, dtype=np.uint8)
            bounds = np.concatenate([[0], escaped])
            nth = np.cumsum([np.count_nonzero(raw[a:b] == 0x22)
                             for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())])
            text = bytearray(text)
            kept = np.frombuffer(text, dtype=np.uint8)
            kept[np.flatnonzero(kept == 0x22)[nth]] = 0x5F  # `_`: not structure
    # Two quotes in a row with nothing kept between them (most strings: no bracket inside)
    # change neither the parity nor the depth: dropped, they leave a far shorter sequence.
    kept = np.frombuffer(text.replace(b'""', b""), dtype=np.uint8)
    steps = _depth_steps()
    # Carried from block to block: inside a string or not, and the depth, both as of the
    # start of the current line (of the text when not `per_line`).
    inside, depth, deepest = 0, 0, 0
    for at in range(0, len(kept), _SCAN_BLOCK):
        s = kept[at:at + _SCAN_BLOCK]
        # Quote parity (a uint8 sum wraps at 256, which keeps the parity).
        parity = np.cumsum(s == 0x22, dtype=np.uint8) & 1
        ends = np.flatnonzero(s == 0x0A) if per_line else ()
        if len(ends):
            # Each line starts outside a string and at depth 0: per line, undo what the
            # block's running sums held where it began.
            starts = np.concatenate([[0], ends + 1])
            if starts[-1] == len(s):
                starts = starts[:-1]
            lengths = np.diff(starts, append=len(s))
            first = np.array([inside], dtype=np.uint8)
            parity ^= np.repeat(np.concatenate([first, parity[ends]])[:len(starts)], lengths)
        else:
            parity ^= inside
        level = np.cumsum(steps[s] * (parity ^ 1), dtype=np.int32)
        if len(ends):
            base = np.concatenate([np.array([-depth], np.int32), level[ends]])[:len(starts)]
            deepest = max(deepest, int((np.maximum.reduceat(level, starts) - base).max()))
            last_end = int(ends[-1])
            if last_end == len(s) - 1:
                inside, depth = 0, 0
            else:
                inside, depth = int(parity[-1]), int(level[-1] - level[last_end])
        else:
            deepest = max(deepest, depth + int(level.max()))
            inside, depth = int(parity[-1]), depth + int(level[-1])
    return deepest


def _escaped_quotes(data: bytes) -> Any:
    """Positions of the quotes in `data` that a backslash escapes: those after a run of an odd
    number of backslashes (a JSON lexer takes a run in pairs from the left, `\\\\` being one
    backslash; what is left, `\\"`, a quote inside the string)."""
    import numpy as np

    raw = np.frombuffer(data, dtype=np.uint8)
    at = np.flatnonzero(raw == 0x5C)
    breaks = np.flatnonzero(np.diff(at) != 1)  # the last backslash of each run but the last
    last = np.append(breaks, len(at) - 1)
    first = np.append(0, breaks + 1)
    after = at[last] + 1
    odd = ((last - first) & 1) == 0  # runs of 1, 3, 5, ... backslashes
    inside = after < len(raw)
    after, odd = after[inside], odd[inside]
    return after[odd & (raw[after] == 0x22)]


def _short(e: Exception) -> str:
    text = str(e)
    return text if len(text) <= 120 else text[:117] + "..."
