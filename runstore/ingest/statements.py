"""The project's named statements run over Arrow tables, and which metric keys a statement reads.

Contract: `run(name, tables)` runs the statement `name` (`resources.statement`, e.g.
`summaries.metric_kl`) with each Arrow table of `tables` visible under its key (the table
names the statement reads; `kl_keys`, the KL spellings of `runstore.families`, is always
there) and returns the result as Arrow; `run_all(names, tables)` runs several over the same
tables. They run in `storage.arrow_sql`'s DuckDB, which reads the rows
it is given and nothing else. The ingest keeps its summaries with them: the very text the
query layer runs over stored tables, so there is one text and one answer.

`keys_read(name, table, keys, also=())` says which of `keys` the statement reads from the
`key` column of `table`: what the ingest's bookkeeping needs to know of a rule without
writing the rule down a second time (which writes a KL key, for the KL merge; which key
holds a run's progress). It is asked of the statement itself: the statement runs over one
row per key, each row alone in a run of its own (`run_id` is the key's position) and with a
value any reader takes in every other column (numbers 1, flags false, texts empty), with the
tables in `also` empty; a run it answers for names a key it reads. The answer for a key
depends on the statement's text only, so it is kept for the life of the process.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Iterable, Sequence

from ..resources import statement
from ..storage import arrow_sql, schema

if TYPE_CHECKING:
    import pyarrow as pa

_read: dict[tuple[str, str], bool] = {}  # (statement, key) -> whether it reads the key
_read_lock = threading.Lock()
# The value a probe row holds in a column of each type (`run_id` and `key` excepted).
_PROBE = {"string": "", "int64": 1, "int32": 1, "float64": 1.0, "bool": False}
_families: dict[str, "pa.Table"] | None = None


def run_all(names: Sequence[str], tables: dict[str, "pa.Table"]) -> list["pa.Table"]:
    """The statements `names` over `tables` (see the module), as Arrow, in order."""
    return arrow_sql.run_all([statement(n) for n in names], {**_given(), **tables})


def _given() -> dict[str, "pa.Table"]:
    """The relations every statement may read besides the ones a caller passes: `kl_keys`,
    the KL spellings (runstore.families, their one home), as the query layer has them too."""
    global _families
    if _families is None:
        from ..families import kl_keys_table

        _families = {"kl_keys": kl_keys_table()}
    return _families


def run(name: str, tables: dict[str, "pa.Table"]) -> "pa.Table":
    """The statement `name` over `tables` (see the module), as Arrow."""
    return run_all([name], tables)[0]


def keys_read(name: str, table: str, keys: Iterable[str], also: Sequence[str] = ()
              ) -> frozenset[str]:
    """Which of `keys` the statement `name` reads from table `table` (see the module)."""
    keys = set(keys)
    with _read_lock:
        todo = sorted(k for k in keys if (name, k) not in _read)
    if todo:
        types = {c: t for c, t, _ in schema.TABLES[table]}
        rows = [{**{c: _PROBE.get(t) for c, t in types.items()}, "run_id": str(i), "key": k}
                for i, k in enumerate(todo)]
        tables = {table: schema.to_arrow(table, rows), **{t: schema.empty(t) for t in also}}
        answered = set(run(name, tables).column("run_id").to_pylist())
        with _read_lock:
            for i, k in enumerate(todo):
                _read[(name, k)] = str(i) in answered
    return frozenset(k for k in keys if _read[(name, k)])
