"""Typed access to the fields of one decoded record, for the normalizers of JSON artifacts.

Contract: a `Fields` reads one record's fields as the column types need them and collects the
ones it cannot use (`problems`, `where=value` texts), so that a normalizer reports all of a
line's problems in one warning and stores each such field as null. A missing field (absent,
or JSON null) is None without a problem. What counts as usable, everywhere:

* `int`: a JSON integer that fits int64, or a float with an integral value (the unambiguous
  spelling `20.0`); never a bool.
* `float`: any JSON number (not a bool), as the double nearest to it (±inf past the largest;
  NaN and ±Infinity kept).
* `bool`: true/false, or the integers 0 and 1.
* `str`: a JSON string (lone surrogates replaced, `base.clean_str`).
* `time`: a number of seconds since the epoch, finite and within the years 1-9999, as a UTC
  datetime.
* `ints`: a list of JSON integers that fit int64 (a float, a bool or a string in it makes the
  whole list unusable: token ids are integers).
* `numbers`: a list of JSON numbers (NaN and ±Infinity kept, integers as their doubles).
* `json`: any value, as JSON text (`base.json_text`).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from ...numbers import fits_int64
from .base import clean_str, finite, json_text, to_float

_MIN_TS = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()
_MAX_TS = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()


_INT, _FLOAT, _NUMBER = {int}, {float}, {int, float}  # `bool` is a type of its own here


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Fields:
    """Typed field access for one record; collects the names of unusable fields."""

    __slots__ = ("problems",)

    def __init__(self) -> None:
        self.problems: list[str] = []

    def bad(self, where: str, value: Any) -> None:
        self.problems.append(f"{where}={json.dumps(value, allow_nan=True, default=str)[:40]}")

    def int(self, obj: dict, key: str, where: str | None = None) -> int | None:
        value = obj.get(key)
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and fits_int64(value):
            return value
        if isinstance(value, float) and value.is_integer() and fits_int64(int(value)):
            return int(value)
        self.bad(where or key, value)
        return None

    def float(self, obj: dict, key: str, where: str | None = None) -> float | None:
        value = obj.get(key)
        if value is None:
            return None
        if _number(value):
            return to_float(value)
        self.bad(where or key, value)
        return None

    def bool(self, obj: dict, key: str, where: str | None = None) -> bool | None:
        value = obj.get(key)
        if value is None:
            return None
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        self.bad(where or key, value)
        return None

    def str(self, obj: dict, key: str, where: str | None = None) -> str | None:
        value = obj.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            return clean_str(value)
        self.bad(where or key, value)
        return None

    def time(self, obj: dict, key: str, where: str | None = None) -> datetime | None:
        value = obj.get(key)
        if value is None:
            return None
        # `finite`: an integer past a double's range is no time (math.isfinite would raise).
        if finite(value) and _MIN_TS <= value <= _MAX_TS:
            return datetime.fromtimestamp(value, timezone.utc)
        self.bad(where or key, value)
        return None

    # The list checks look at the set of element types and at the extremes, which Python
    # computes in C: token lists are most of what a capture file holds.
    def ints(self, value: Any, where: str) -> list[int] | None:
        if value is None:
            return None
        if isinstance(value, list) and (not value or (
                set(map(type, value)) == _INT and fits_int64(min(value))
                and fits_int64(max(value)))):
            return value
        self.bad(where, value)
        return None

    def numbers(self, value: Any, where: str) -> list[float] | None:
        if value is None:
            return None
        if isinstance(value, list):
            types = set(map(type, value))
            if types <= _FLOAT:
                return value
            if types <= _NUMBER:
                return [x if type(x) is float else to_float(x) for x in value]
        self.bad(where, value)
        return None

    @staticmethod
    def json(value: Any) -> str | None:
        return None if value is None else json_text(value)
