"""A query result as plain Python rows, for callers that need no Arrow type.

Contract: `from_relation(rel)` fetches a DuckDB result as `Rows` when every column has a type
whose Python values DuckDB (`fetchall`) and Arrow (`to_pylist`) give alike (integers, floats,
DECIMAL, booleans, text, dates and times, blobs, and lists of these), else as an Arrow table.
`Rows` answers the few questions callers ask of a table the way a pyarrow Table does
(`column_names`, `num_rows`, `to_pylist()`, `slice(offset, length)`, `select(names)`), so
code that reads a result works on either, and a result of plain types is read without
importing pyarrow (~0.1 s of a short process): `runstore sql` and `runstore check` print so.
`records(store, sql, params)` is one statement's result as a list of dicts, read that way.
`for_printing(rel)` is a result as it is printed (`Store.rows`) and `for_parquet(rel)` as it is
written to Parquet: the same, except that a value that Python (or Arrow) cannot hold as DuckDB
means it comes as DuckDB's own text of it (`as_text`: `TEXT_ONLY`, `ARROW_TEXT`), and columns
that share a name are named apart as DuckDB names a subquery's (`a`, `a_1`).
`from_polars(df)` is a polars DataFrame likewise: `Rows` when every column's type gives the
same Python values from polars (`rows()`) as from its Arrow table (`to_pylist`): integers
(up to 64 bits), floats, booleans, text and nulls; else `df.to_arrow()`. `runstore compare`
prints so, without pyarrow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

# DuckDB types whose Python values (`fetchall`) are exactly what Arrow's `to_pylist` gives for
# the same result; DECIMAL(p,s) and lists of these too. Others (HUGEINT comes back from Arrow
# as a Decimal, STRUCT, MAP, UUID, INTERVAL, ...) take the Arrow path.
INTEGERS = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT",
                      "UINTEGER", "UBIGINT"})
_PLAIN = INTEGERS | {"FLOAT", "DOUBLE", "BOOLEAN", "VARCHAR", "DATE", "TIME", "TIMESTAMP",
                     "TIMESTAMP WITH TIME ZONE", "BLOB", '"NULL"'}
DECIMAL = re.compile(r"DECIMAL\(\d+,\d+\)")


def plain_type(typ: str) -> bool:
    """Whether DuckDB and Arrow give the same Python values for a column of type `typ`."""
    if typ.endswith("[]"):
        return plain_type(typ[:-2])
    return typ in _PLAIN or bool(DECIMAL.fullmatch(typ))


@dataclass(frozen=True)
class Rows:
    """A query result as plain Python rows (see `from_relation`)."""

    column_names: list[str]
    numeric: list[bool]  # integer, floating or decimal columns
    data: list[tuple[Any, ...]]

    @property
    def num_rows(self) -> int:
        return len(self.data)

    def to_pylist(self) -> list[dict[str, Any]]:
        return [dict(zip(self.column_names, row)) for row in self.data]

    def slice(self, offset: int = 0, length: int | None = None) -> "Rows":
        """Rows `offset` to `offset + length` (to the end for None), as `pa.Table.slice`."""
        end = None if length is None else offset + length
        return Rows(self.column_names, self.numeric, self.data[offset:end])

    def select(self, names: Sequence[str]) -> "Rows":
        """These columns, in this order, as `pa.Table.select` (a missing name: KeyError)."""
        missing = [n for n in names if n not in self.column_names]
        if missing:
            raise KeyError(f"no column {missing[0]!r}")
        at = [self.column_names.index(n) for n in names]
        return Rows(list(names), [self.numeric[i] for i in at],
                    [tuple(row[i] for i in at) for row in self.data])


def from_relation(rel: Any) -> "Rows | pa.Table":
    """A DuckDB relation's result: `Rows` when every column type allows, else Arrow."""
    types = [str(t) for t in rel.types]
    if not all(plain_type(t) for t in types):
        return rel.to_arrow_table()
    numeric = [t in INTEGERS or t in ("FLOAT", "DOUBLE") or bool(DECIMAL.fullmatch(t))
               for t in types]
    return Rows(list(rel.columns), numeric, rel.fetchall())


# DuckDB types Arrow (and so Parquet) cannot hold as DuckDB means them: an interval (Parquet
# has no type for it), a bit string and a BIGNUM (exported as their internal bytes), a time's
# UTC offset (dropped), a UHUGEINT (exported as a signed 128-bit decimal: from 2^127 on it
# turns negative); and, beyond those, what Python (and so JSON and CSV) cannot: a blob's bytes
# as text, nanoseconds. `for_printing` and `for_parquet` give DuckDB's own text of them, at any
# depth of a nested type.
ARROW_TEXT = frozenset({"interval", "bit", "bignum", "varint", "time with time zone",
                        "uhugeint"})
TEXT_ONLY = ARROW_TEXT | {"blob", "timestamp_ns", "time_ns"}
NESTED = frozenset({"list", "array", "struct", "map", "union"})
# By what a result is for: printed as text, or written to a (Parquet) file.
AS_TEXT = {"print": TEXT_ONLY, "file": ARROW_TEXT}


def holds(typ: Any, kinds: frozenset[str]) -> bool:
    """Whether a DuckDB type (a `DuckDBPyType`) is or holds one of `kinds` (type ids)."""
    if typ.id in kinds:
        return True
    return typ.id in NESTED and any(hasattr(child, "id") and holds(child, kinds)
                                    for _, child in typ.children)


def as_text(rel: Any, kinds: frozenset[str]) -> Any:
    """`rel` as a result is written out: each column whose type is or holds one of `kinds`
    cast to VARCHAR (DuckDB's text of it: `1 day`, `101`, `\\xFF`, `01:02:03+05`, `[1 month]`),
    and columns that share a name (`select 1 as a, 2 as a`) named apart as DuckDB names a
    subquery's columns (`a`, `a_1`), since rows are written by column name. `rel` itself when
    neither is needed."""
    cast = [holds(t, kinds) for t in rel.types]
    names = list(rel.columns)
    unique = len({n.lower() for n in names}) == len(names)
    if unique and not any(cast):
        return rel
    from .guard import identifier

    if not unique:
        names = list(rel.project("*").columns)
    columns = ", ".join(f"{f'cast(#{i} as varchar)' if text else f'#{i}'} as {identifier(name)}"
                        for i, (name, text) in enumerate(zip(names, cast), start=1))
    return rel.project(columns)


def for_printing(rel: Any) -> "Rows | pa.Table":
    """What a result prints as text (`Store.rows`): `from_relation` of `as_text(rel,
    TEXT_ONLY)`."""
    return from_relation(as_text(rel, TEXT_ONLY))


def for_parquet(rel: Any) -> "pa.Table":
    """What a result writes to a Parquet file (`Store.rows(arrow=True)`): the Arrow table of
    `as_text(rel, ARROW_TEXT)`."""
    return as_text(rel, ARROW_TEXT).to_arrow_table()


# polars types whose values `DataFrame.rows()` gives as Arrow's `to_pylist` does (Int128 is
# a DECIMAL in Arrow; dates, times, decimals, binaries and nested types take the Arrow path).
_POLARS_INTEGERS = frozenset({"Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32",
                              "UInt64"})
_POLARS_NUMERIC = _POLARS_INTEGERS | {"Float32", "Float64"}
_POLARS_PLAIN = _POLARS_NUMERIC | {"Boolean", "String", "Null"}


def from_polars(df: "pl.DataFrame") -> "Rows | pa.Table":
    """A polars DataFrame as `Rows` when every column type allows, else as Arrow."""
    kinds = [repr(t.base_type()) for t in df.dtypes]
    if not all(k in _POLARS_PLAIN for k in kinds):
        return df.to_arrow()
    return Rows(list(df.columns), [k in _POLARS_NUMERIC for k in kinds], df.rows())


def records(store: Any, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One statement's result (over a `query.reader.Reader`) as a list of dicts, as
    `pa.Table.to_pylist` gives, read through `from_relation` (no pyarrow for plain types)."""
    return store.fetch(sql, dict(params or {}), convert=from_relation).to_pylist()
