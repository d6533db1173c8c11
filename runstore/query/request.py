"""What a caller hands to a query, checked for its types before anything runs.

Contract: `checked(sql, params)` returns `params` as a dict once `sql` is text and `params` a
mapping or None; anything else is a `QueryError` saying what to give (the Python API takes any
value: bytes, a list of values, None as the query). The names and values in the mapping are
the guard's (`guard.py`: every `$name` given, none unused) and DuckDB's to judge. Both ways a
query runs, in this process (`session.py`) and in a worker (`workers.py`), call it first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import QueryError


def checked(sql: Any, params: Any) -> dict[str, Any]:
    """`params` as a dict, once `sql` is text and `params` a mapping or None."""
    if not isinstance(sql, str):
        raise QueryError(f"a query is text (a str), got {type(sql).__name__}"
                         + (": decode it first" if isinstance(sql, (bytes, bytearray)) else ""))
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise QueryError("params is a mapping of names to values, bound as $name "
                         f"(e.g. {{'run': 'sl/run-1'}}), got {type(params).__name__}")
    return dict(params)
