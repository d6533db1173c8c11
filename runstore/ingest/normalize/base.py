"""The normalizer contract: what every artifact's normalizer takes, gives and may rely on.

Contract: a normalizer (the `Normalizer` protocol) names the file kinds it reads (`kinds`,
from `discover.FileKind`) and the store tables it writes (`tables`), and has one method,
`normalize(batch) -> Output`, for JSON-lines and whole-file artifacts alike. A `Batch` is
what one read of one file gives: its bytes (`data`: for append-only files, the complete lines
added since the last read; for the others, the whole file), the number of the first line in
it (`first_line`), the `Context` (which run and source file, where warnings go), the file's
kind, and the file's ledger state (`state`, a JSON-ready dict carried between reads, which
the normalizer updates in place: the largest step seen, a trace's open events, ...).
`batch.records()` decodes JSON lines tolerantly (`parse.records`: bad lines are reported and
skipped); whole-file artifacts parse `data` themselves, tolerantly. The `Output` holds the
rows to append per table (Arrow tables, or row dicts keyed by the column names of
`storage.schema.TABLES`, which `Output.rows` turns into Arrow; `run_id` and `source_id` come
from the `Context`) and the stored rows to delete first (`Output.delete`: a resumed run
logging steps again, trace events that were still open). A normalizer that cannot normalize
an append alone sets `Output.reread`, and the file is read again from its first line, its
earlier rows replaced (the metrics file whose append logs KL at steps logged before).

Nothing raises on bad input: a record that cannot be used is reported with
`ctx.warn(line, message)` and skipped; the rest of the file is still normalized. Integers go
to int64 columns only when they fit (`numbers.fits_int64`); JSON has no bound, and a value
Arrow cannot hold is bad input like any other. In float columns a number is the double
nearest to it (`to_float`): past the largest double, ±inf. Text is cleaned of lone
surrogates (`clean_str`), which Arrow and UTF-8 cannot hold; nested values are stored as JSON
text (`json_text`).

Adding an artifact is one module here with a class implementing `Normalizer`, and one line in
`registry.NORMALIZERS` (docs/architecture.md).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

from ...storage import schema
from .. import parse

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlglot import exp

    from ..discover import FileKind

# Control characters as their escapes (`\n` as the two characters `\` `n`), for warnings.
_ESCAPES = {c: repr(chr(c))[1:-1] for c in (*range(0x20), 0x7F)}

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_str(text: str) -> str:
    """`text` with each lone UTF-16 surrogate (JSON's `"\\ud800"` decodes to one; Arrow and
    UTF-8 cannot hold it) replaced by U+FFFD; a no-op (one fast encode) for ordinary text."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)


def json_text(value: Any) -> str:
    """A value as the JSON text the tables store: readable (non-ASCII kept), the NaN and
    ±Infinity tokens kept as Python writes them, lone surrogates cleaned."""
    return clean_str(json.dumps(value, ensure_ascii=False, allow_nan=True))


def to_float(value: int | float) -> float:
    """A JSON number as a double: an integer as the nearest one (as `float` rounds it), ±inf
    past the largest, where `float` raises."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def finite(value: Any) -> bool:
    """A JSON number (not a bool) with a finite float value (huge integers are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a double
        return False


def holds_negative_zero(values: "pa.Array | pa.ChunkedArray") -> bool:
    """Whether a column of floats holds a -0.0 (its bits, the int64 minimum, are those of no
    other double). After parsing, `-0` and `-0.0` cannot be told apart, so the fast paths
    leave such a (rare) buffer to the line decoder."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ...numbers import INT64_MIN

    bits = pa.scalar(INT64_MIN, pa.int64())
    col = values.cast(pa.float64())
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    return any(pc.any(pc.equal(chunk.view(pa.int64()), bits)).as_py() for chunk in chunks)


@dataclass
class Context:
    """Where the records come from, and where to report trouble."""

    run_id: str
    source_id: int
    rel_path: str  # the source file's path as warnings name it: `<run name>/<path in the run>`
    split: str | None = None  # `train` / `eval/<label>` for per-iteration artefacts
    iteration: int | None = None
    warnings: list[str] = field(default_factory=list)
    on_warning: Callable[[str], None] | None = None
    file: str | None = None  # the file's path in its run (or eval store), POSIX
    run_path: str | None = None  # the run's (or eval store's) directory

    def warn(self, line: int | None, message: str) -> None:
        """Report one problem as one line `file:line: message`: a message that quotes the
        input (a value with a newline, an escape sequence) gets its control characters
        escaped, so it cannot break the line or the terminal."""
        where = self.rel_path if line is None else f"{self.rel_path}:{line}"
        text = f"{where}: {message.translate(_ESCAPES)}"
        self.warnings.append(text)
        if self.on_warning is not None:
            self.on_warning(text)

    def base(self) -> dict:
        return {"run_id": self.run_id, "source_id": self.source_id}


@dataclass
class Batch:
    """What one read of one file hands its normalizer (see the module docstring)."""

    data: bytes
    first_line: int
    ctx: Context
    kind: "FileKind"
    state: dict[str, Any] = field(default_factory=dict)

    def records(self) -> Iterator[tuple[int, Any]]:
        """`(line_number, object)` for every line of `data` that decodes as JSON."""
        return parse.records(self.data, self.first_line, self.ctx)


@dataclass
class Output:
    """What a normalizer gives back: rows to append per table, stored rows to delete first."""

    appends: dict[str, list["pa.Table"]] = field(default_factory=dict)
    deletes: list[tuple[str, "exp.Condition"]] = field(default_factory=list)
    # True: this read of an append-only file cannot be normalized alone (what it logs
    # depends on rows read before); the caller reads the whole file again instead.
    reread: bool = False

    def add(self, table: str, data: "pa.Table") -> None:
        """Append an Arrow table of `table`'s schema (nothing when it has no rows)."""
        if data.num_rows:
            self.appends.setdefault(table, []).append(data)

    def rows(self, out: dict[str, list[dict[str, Any]]]) -> None:
        """Append row dicts, per table (tables with no rows add nothing)."""
        for table, rows in out.items():
            if rows:
                self.add(table, schema.to_arrow(table, rows))

    def delete(self, table: str, condition: "exp.Condition") -> None:
        """Delete the stored rows of `table` that `condition` selects (`writer.rows_where`)
        before this batch's rows are appended."""
        self.deletes.append((table, condition))


class Normalizer(Protocol):
    """One artifact's normalizer (see the module docstring)."""

    kinds: tuple["FileKind", ...]
    tables: tuple[str, ...]

    def normalize(self, batch: Batch) -> Output: ...
