"""Numbers at runstore's edges: which integers an int64 column holds, and how the floats that
no text format spells (NaN, ±Infinity) are written as text.

Contract:

* `INT64_MIN`/`INT64_MAX` bound every integer column (Arrow's and DuckDB's int64). JSON has
  no bound, so each integer read from a source is checked before it reaches a column:
  `fits_int64(n)` for an integer, `is_int64(value)` for any JSON value (a bool is not an
  integer here), `int64_from_digits(text)` for digits in text (a file name's iteration, a
  checkpoint's batch written as a string). Beyond the range a value is bad input, never an
  overflow.
* `nonfinite_name(x)` is the one spelling of a non-finite float as text: `NaN`, `Infinity`,
  `-Infinity`, the tokens Python's JSON writer and the source files use. Every rendering
  (tables, CSV, alerts, the HTML report, trace args, the UI's JSON) writes these.
* `json_number(v)` is the one rule for a number in JSON, which has no NaN or Infinity: a
  finite float as itself, a non-finite one as the string `nonfinite_name` gives (`"NaN"`,
  `"Infinity"`, `"-Infinity"`), anything else unchanged. Webhook payloads (health.notify)
  and every UI answer (ui/answers.py's tables, present/series.py's chart lines) write numbers
  through it; `json_numbers(values)` is it over a list, at C speed when all are finite.
* `seconds(value, zero=False)` is a duration handed to the library (a lock wait, a watch's
  interval) as a float: a finite number, not a bool, above 0 (`zero`: 0 or above) and no
  longer than Python can wait (`threading.TIMEOUT_MAX`); None for anything else.
"""

from __future__ import annotations

import math
from typing import Any

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
INT64_DIGITS = 19  # significant digits of the largest int64


def fits_int64(value: int) -> bool:
    """Whether an integer fits an int64 column."""
    return INT64_MIN <= value <= INT64_MAX


def is_int64(value: Any) -> bool:
    """Whether a decoded JSON value is an integer (not a bool) that fits an int64 column."""
    return isinstance(value, int) and not isinstance(value, bool) and fits_int64(value)


def int64_from_digits(text: str) -> int | None:
    """The integer that decimal digits (an optional sign first) spell, None when it does not
    fit an int64 column. At most `INT64_DIGITS` significant digits are converted, which also
    keeps `int()` below Python's conversion limit (4,300 digits), past which it raises.

    >>> int64_from_digits("000123"), int64_from_digits("-9223372036854775808")
    (123, -9223372036854775808)
    >>> int64_from_digits("9223372036854775808"), int64_from_digits("1" * 5000)
    (None, None)
    """
    digits = text[1:] if text[:1] in ("+", "-") else text
    if len(digits.lstrip("0")) > INT64_DIGITS:
        return None
    value = int(text)
    return value if fits_int64(value) else None


def nonfinite_name(value: float) -> str:
    """`NaN`, `Infinity` or `-Infinity` for a float that is not finite.

    >>> nonfinite_name(float("nan")), nonfinite_name(float("inf")), nonfinite_name(-math.inf)
    ('NaN', 'Infinity', '-Infinity')
    """
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def json_number(value: Any) -> Any:
    """`value` as JSON carries it (see the module): non-finite floats by name.

    >>> json_number(0.5), json_number(float("inf")), json_number(float("nan")), json_number(3)
    (0.5, 'Infinity', 'NaN', 3)
    """
    if isinstance(value, float) and not math.isfinite(value):
        return nonfinite_name(value)
    return value


def json_numbers(values: list[Any]) -> list[Any]:
    """`json_number` of each value: `values` itself when they are all finite numbers (one
    sum in C tells: a non-finite value or an overflow makes it non-finite or fail, and so does
    a null or a string), else a new list.

    >>> json_numbers([1.0, 2.5]), json_numbers([1.0, None, float("-inf")])
    ([1.0, 2.5], [1.0, None, '-Infinity'])
    """
    try:
        if math.isfinite(math.fsum(values)):
            return values
    except (TypeError, OverflowError, ValueError):  # a null or a string; an overflow; inf - inf
        pass
    return [json_number(v) for v in values]


def seconds(value: Any, *, zero: bool = False) -> float | None:
    """`value` as a duration to wait, or None when it is none (see the module doc).

    >>> seconds(2), seconds(0), seconds(0, zero=True), seconds(float("nan")), seconds(True)
    (2.0, None, 0.0, None, None)
    """
    import threading

    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value > threading.TIMEOUT_MAX:
        return None
    return float(value) if value > 0 or (zero and value == 0) else None
