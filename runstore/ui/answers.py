"""How the UI's answers travel: request parameters in, JSON-ready values out.

Contract: `Params` holds a request's query-string values (repeated keys allowed) and JSON
body, with typed getters whose bad input is a `QueryError` naming the parameter (`number`
is finite, `integer` fits an int64 column); `plain(v)`
turns one value into what JSON can carry (NaN and ±Infinity as the strings "NaN",
"Infinity", "-Infinity": `numbers.json_number`, the one rule for numbers in JSON; timestamps as ISO-8601 text, DECIMALs as numbers); `tabular(table)`
is an Arrow table as `{"columns", "types", "rows", "row_count", "truncated"}`, the shape of
`POST /api/sql`; `json_value(text)` reads a JSON-text column (config values, tool calls);
`Download` is a file answer: its bytes, or a file (a spooled temporary file the answer
owns: `chunks()` reads it from the start and closes it).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import date, datetime, time as dtime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterator, Sequence

from ..errors import QueryError
from ..numbers import INT64_MAX, INT64_MIN, int64_from_digits, json_number

if TYPE_CHECKING:
    import pyarrow as pa


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _shown(value: str | None, width: int = 60) -> str:
    """A parameter's value as an error message quotes it: cut after `width` characters."""
    text = value or ""
    return repr(text if len(text) <= width else text[:width] + "…")


class Params:
    """Request parameters: the query string (`get`, `all`) and a JSON body (`body`)."""

    def __init__(self, items: Sequence[tuple[str, str]] = (), body: Any = None):
        self.items = list(items)
        self.body = body if body is not None else {}

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.items if k == name]

    def get(self, name: str, default: str | None = None) -> str | None:
        """The one value of a parameter that takes one (`all` reads those that take
        several): given twice it is refused, not read as the last of them."""
        values = self.all(name)
        if len(values) > 1:
            raise QueryError(f"parameter {name!r} is given {len(values)} times; it takes one "
                             "value")
        return values[0] if values else default

    def flag(self, name: str) -> bool:
        """A yes/no parameter: `1`/`true`/`yes` or `0`/`false`/`no` in any case; absent or
        empty is no."""
        value = (self.get(name) or "").lower()
        if value in ("", "0", "false", "no"):
            return False
        if value in ("1", "true", "yes"):
            return True
        raise QueryError(f"parameter {name!r} is true or false, got {_shown(self.get(name))}")

    def text(self, name: str) -> str:
        value = self.get(name)
        if value is None or value == "":
            raise QueryError(f"missing parameter {name!r}")
        return value

    def integer(self, name: str, default: int | None = None) -> int | None:
        """An integer that fits the int64 columns it is compared with (steps, iterations:
        `numbers.int64_from_digits`); decimal digits with an optional sign."""
        value = self.get(name)
        if value is None or value == "":
            return default
        n = int64_from_digits(value) if _INTEGER.fullmatch(value) else None
        if n is None:
            span = "" if not _INTEGER.fullmatch(value) else f" from {INT64_MIN} to {INT64_MAX}"
            raise QueryError(f"parameter {name!r} must be an integer{span}, got {_shown(value)}")
        return n

    def number(self, name: str) -> float | None:
        """A finite float: NaN and ±Infinity (`inf`, `1e400`) bound nothing and have no JSON
        number to echo them as."""
        value = self._typed(name, float, "a finite number")
        if value is not None and not math.isfinite(value):
            raise QueryError(f"parameter {name!r} must be a finite number, got "
                             f"{_shown(self.get(name))}")
        return value

    def _typed(self, name: str, cast: Callable[[str], Any], what: str) -> Any:
        value = self.get(name)
        if value is None or value == "":
            return None
        try:
            return cast(value)
        except ValueError:
            raise QueryError(f"parameter {name!r} must be {what}, got {_shown(value)}") from None


@dataclass(frozen=True)
class Download:
    """A file answer: bytes (or a file), media type and the file name offered to the browser."""

    body: "bytes | BinaryIO"
    media_type: str
    filename: str

    def size(self) -> int:
        if isinstance(self.body, bytes):
            return len(self.body)
        self.body.seek(0, 2)
        return self.body.tell()

    def chunks(self, size: int = 1 << 20) -> Iterator[bytes]:
        """The file's bytes from its start, `size` at a time; the file is closed after."""
        assert not isinstance(self.body, bytes)
        try:
            self.body.seek(0)
            while chunk := self.body.read(size):
                yield chunk
        finally:
            self.body.close()


def plain(v: Any) -> Any:
    """One value as JSON can carry it (see the module docstring)."""
    if isinstance(v, float):
        return json_number(v)
    if isinstance(v, (datetime, date, dtime)):
        return v.isoformat()
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


def tabular(table: "pa.Table", limit: int | None = None) -> dict[str, Any]:
    """`{"columns", "types", "rows", "row_count", "truncated"}` of an Arrow table."""
    shown = table if limit is None or table.num_rows <= limit else table.slice(0, limit)
    columns = [c.to_pylist() for c in shown.columns]
    rows = [[plain(v) for v in row] for row in zip(*columns)] if columns else []
    return {"columns": table.column_names, "types": [str(t) for t in table.schema.types],
            "rows": rows, "row_count": table.num_rows, "truncated": shown.num_rows < table.num_rows}


def json_value(text: str | None) -> Any:
    """A JSON-text column as a value (config values, tool calls); text that is not JSON as is."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
