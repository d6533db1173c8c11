"""What DuckDB's parser answered for runstore's own SQL, recorded beside that SQL.

Contract: a JSON file in `sql/` keeps, for each of runstore's own SQL texts, the SHA-256 of
the text (`digest`) and what DuckDB's parser answered for it: `view_reads.json` what each
canned view reads (`views.recorded_reads`), `statement_verdicts.json` the guard's verdict on
each named statement of `sql/statements/` and on each text of the builders with a few shapes
(`statements.frames.fixed_shapes`) (`verdict`). `tools/gen_docs.py` writes both, always by
asking the parser, and tests hold the committed files equal to its output. `load(path)` reads such a
file once per process as `{entry: {digest: answer}}` (empty when it is missing or damaged).
An answer is a function of the text alone, so it is used only for the very text it was
recorded for: a text edited since is parsed again, and a stale or damaged record costs a
parse, never a wrong answer. `verdict(text)` is the recorded verdict for `text` (`params`,
`tables`, `defines`, as the guard's `Checked` holds them), or None: every other text, a
user's included, is parsed; `entry(...)` is a verdict as the record keeps it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any, Iterable

from ..resources import sql_dir

# The file, in `sql/`, of the guard's verdict on each named statement when it was generated.
VERDICT_FILE = "statement_verdicts.json"

# A verdict: the params a text uses, what it reads (None: any), the CTEs its WITH defines.
Verdict = tuple[tuple[str, ...], "frozenset[str] | None", "frozenset[str] | None"]

_LOADED: dict[Path, dict[str, dict[str, Any]]] = {}
_BY_DIGEST: dict[Path, dict[str, Verdict]] = {}
_LOCK = threading.Lock()


def digest(text: str) -> str:
    """The digest a text's answer is recorded under (SHA-256 of the text)."""
    return hashlib.sha256(text.encode()).hexdigest()


def load(path: Path) -> dict[str, dict[str, Any]]:
    """`{entry: {digest of its text: answer}}` from the record `path`, read once per process;
    empty when there is none or it is not such a record (every text is then parsed)."""
    with _LOCK:
        if path not in _LOADED:
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                record = {}
            _LOADED[path] = ({k: v for k, v in record.items() if isinstance(v, dict)}
                             if isinstance(record, dict) else {})
        return _LOADED[path]


def entry(params: Iterable[str], tables: Iterable[str] | None,
          defines: Iterable[str] | None) -> dict[str, Any]:
    """A verdict as the record keeps it (what `verdict` reads back): the guard's `Checked`
    fields, the sets sorted."""
    return {"params": list(params), "tables": None if tables is None else sorted(tables),
            "defines": None if defines is None else sorted(defines)}


def verdict(text: str) -> Verdict | None:
    """The guard's recorded verdict for `text` when it is one of the texts recorded (a named
    statement or a builder's fixed shape) as it was recorded, else None: `(params, tables,
    defines)` as the guard's `Checked` holds them. An entry not of `entry`'s form is not
    used."""
    path = sql_dir() / VERDICT_FILE
    with _LOCK:
        index = _BY_DIGEST.get(path)
    if index is None:
        index = {d: _read(answer) for kept in load(path).values()
                 for d, answer in kept.items() if _well_formed(answer)}
        with _LOCK:
            _BY_DIGEST[path] = index
    return index.get(digest(text)) if index else None


def _read(answer: dict[str, Any]) -> Verdict:
    def names(v: list[str] | None) -> frozenset[str] | None:
        return None if v is None else frozenset(v)

    return tuple(answer["params"]), names(answer["tables"]), names(answer["defines"])


def _well_formed(answer: Any) -> bool:
    def names(v: Any) -> bool:
        return isinstance(v, list) and all(isinstance(n, str) for n in v)

    return (isinstance(answer, dict) and set(answer) == {"params", "tables", "defines"}
            and names(answer["params"]) and (answer["tables"] is None or names(answer["tables"]))
            and (answer["defines"] is None or names(answer["defines"])))
