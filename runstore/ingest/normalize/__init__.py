"""Normalizers: one module per artifact, turning parsed source records into table rows.

Contract shared by every module here:

* Input is already decoded: JSON-lines artefacts get an iterable of `(line_number, object)`
  pairs from `runstore.parse.jsonl` (bad lines were already reported and skipped there); whole
  JSON files get the raw bytes and parse them themselves, tolerantly.
* Output is `{table_name: [row, ...]}` where each row is a dict keyed by the column names of
  `runstore.schema.TABLES`. `run_id` and `source_id` are filled from the `Context`.
* Nothing raises on bad input. A record that cannot be used is reported with
  `ctx.warn(line, message)` and skipped; the rest of the file is still normalized.
* Integers go to int64 columns only when they fit (`fits_int64`); JSON has no bound, and a
  value Arrow cannot hold is bad input like any other. In float columns a number is the
  double nearest to it (`to_float`): past the largest double, ±inf.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def fits_int64(value: int) -> bool:
    """Whether an integer fits an int64 column."""
    return INT64_MIN <= value <= INT64_MAX


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


@dataclass
class Context:
    """Where the records come from, and where to report trouble."""

    run_id: str
    source_id: int
    rel_path: str  # path of the source file relative to the run directory (POSIX)
    split: str | None = None  # `train` / `eval/<label>` for per-iteration artefacts
    iteration: int | None = None
    warnings: list[str] = field(default_factory=list)
    on_warning: Callable[[str], None] | None = None

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
