"""What callers hand `Store`, checked before a store is opened: durations, weights, keys, paths.

Contract: module functions, each the one definition's check of its kind of input (so a command
can refuse a bad option before it does any work, with the library's own message):
`seconds(value, name)` a time limit (`query.deadline.checked`: finite, above 0; None for none);
`vacuum_hours(value, what)` how long a vacuum keeps replaced files (finite, 0 or more);
`smoothing_weight(value, what)` runstore's one smoothing weight (`analysis.smooth`: in [0, 1),
with what to write instead of an old step count); `memory_size(value)` a memory limit
(`query.memory.parse`: bytes, `4GB`, `25%`); `json_body(data, what)` one JSON document read by
the rules the ingest reads files by (`ingest.parse.loads`: at most `MAX_NESTING` levels);
`config_keys(text)` a comma-separated list of flattened config keys as typed (`--group-by`; a
comma inside a quoted part belongs to it: `ingest.normalize.config.split_keys`);
`is_remote(path)` whether a path names object storage (`s3://`). Each raises `errors.UsageError`
for what it refuses.
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageError


def seconds(value: Any, name: str = "timeout") -> float | None:
    """`value` as a time limit in seconds (None: no limit); a UsageError for anything else."""
    from ..query.deadline import checked

    return checked(value, name)


def vacuum_hours(value: Any, what: str = "vacuum_hours") -> float:
    """`value` as how many hours a replaced file is kept before a vacuum deletes it: a finite
    number of at least 0 (not a bool); a UsageError naming `what` otherwise."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value * 3600.0) or value < 0:  # finite in seconds too
        raise UsageError(f"{what} must be a finite number of hours of at least 0, got "
                         f"{value!r}")
    return float(value)


def smoothing_weight(value: Any, what: str = "smooth") -> float:
    """`value` as a smoothing weight in [0, 1); a UsageError naming `what` otherwise."""
    from ..analysis.smooth import check_weight

    return check_weight(value, what)


def memory_size(value: Any) -> int:
    """`value` (bytes, or text such as `4GB`, `1.5GiB`, `25%`) as a memory limit in bytes; a
    UsageError saying what to write otherwise."""
    from ..query.memory import parse

    return parse(value)


def json_body(data: bytes | str, what: str = "the request body") -> Any:
    """`data` as one JSON document (NaN and ±Infinity by name accepted); a UsageError naming
    `what` when it is not valid JSON or nests deeper than the ingest's `MAX_NESTING` levels."""
    from ..ingest.parse import MAX_NESTING, loads

    try:
        return loads(data)
    except RecursionError:
        raise UsageError(f"{what} nests deeper than {MAX_NESTING} levels") from None
    except ValueError:
        raise UsageError(f"{what} is not valid JSON") from None


def config_keys(text: str) -> list[str]:
    """Comma-separated flattened config keys as typed, each stripped of surrounding spaces."""
    from ..ingest.normalize.config import split_keys

    return split_keys(text)


def is_remote(path: Any) -> bool:
    """Whether `path` names a location on S3-compatible object storage (`s3://...`)."""
    from ..storage.location import is_remote as remote

    return remote(path)
