"""Normalizers: one module per artifact, turning parsed source records into table rows.

Contract shared by every module here:

* Input is already decoded: JSON-lines artefacts get an iterable of `(line_number, object)`
  pairs from `runstore.parse.jsonl` (bad lines were already reported and skipped there); whole
  JSON files get the raw bytes and parse them themselves, tolerantly.
* Output is `{table_name: [row, ...]}` where each row is a dict keyed by the column names of
  `runstore.schema.TABLES`. `run_id` and `source_id` are filled from the `Context`.
* Nothing raises on bad input. A record that cannot be used is reported with
  `ctx.warn(line, message)` and skipped; the rest of the file is still normalized.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


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
        where = self.rel_path if line is None else f"{self.rel_path}:{line}"
        text = f"{where}: {message}"
        self.warnings.append(text)
        if self.on_warning is not None:
            self.on_warning(text)

    def base(self) -> dict:
        return {"run_id": self.run_id, "source_id": self.source_id}
