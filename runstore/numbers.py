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
