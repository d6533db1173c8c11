"""The store's settings: their defaults, and the one rule by which a query's settings are made.

Contract: `DEFAULT_SETTINGS` names every setting and its default (`kl_threshold`: 0.01, the
KL threshold of the `kl_steps` view and of the default health rule). A store keeps its own
values in its manifest (`Store.set_setting`); `merged(stored, params)` is what one query
sees: the defaults, then the store's values, then the query's params named like a setting
(a numeric setting refuses a value that is not a finite number, naming `--param`).
`coerce(name, value)` checks a value before it is stored (`finite`: a numeric setting is a
finite number, as the manifest requires), `kl_threshold(value)` one given to a command
(`--threshold`); `bad_settings(stored)` lists stored values of the
wrong type (a damaged or hand-edited manifest: `runstore repair` drops them).
`value_parts(v)` is how a value is held in the `settings` view: as a number, or as text.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from ..errors import QueryError, UsageError

DEFAULT_SETTINGS: dict[str, float] = {"kl_threshold": 0.01}


def value_parts(v: Any) -> tuple[float | None, str | None]:
    """`(number, None)` for a value that reads as a number, else `(None, its text)`."""
    try:
        return float(v), None
    except (TypeError, ValueError):
        return None, str(v)


def finite(v: Any) -> float | None:
    """`v` as a numeric setting holds it: a finite float, else None (NaN and ±Infinity are no
    threshold, and the manifest holds only finite numbers).

    >>> finite("0.02"), finite(float("nan")), finite("high"), finite(True)
    (0.02, None, None, None)
    """
    if isinstance(v, bool):
        return None
    number = value_parts(v)[0]
    return number if number is not None and math.isfinite(number) else None


def kl_threshold(value: Any) -> float:
    """A KL threshold given to a command (`check --threshold`, `plot kl --threshold`) as a
    float; a `UsageError` naming the option when it is not a finite number."""
    number = finite(value)
    if number is None:
        raise UsageError(f"the KL threshold (--threshold) must be a number (not NaN or "
                         f"±Infinity), e.g. {DEFAULT_SETTINGS['kl_threshold']}, got {value!r}")
    return number


def merged(stored: Mapping[str, Any] | None,
           params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings one query sees: the defaults, the store's, then its params' overrides."""
    settings = {**DEFAULT_SETTINGS, **(stored or {})}
    for k, v in (params or {}).items():
        if k in DEFAULT_SETTINGS:
            if isinstance(DEFAULT_SETTINGS[k], float) and finite(v) is None:
                raise QueryError(f"setting {k} must be a number (not NaN or ±Infinity), "
                                 f"got {v!r} "
                                 f"(e.g. --param {k}={DEFAULT_SETTINGS[k]})")
            settings[k] = v
    return settings


def coerce(name: str, value: Any) -> float | str:
    """`value` as setting `name` stores it; `QueryError` for an unknown setting or a value of
    the wrong type."""
    if name not in DEFAULT_SETTINGS:
        raise QueryError(f"unknown setting {name!r}; settings: {', '.join(DEFAULT_SETTINGS)}")
    if isinstance(DEFAULT_SETTINGS[name], float):
        number = finite(value)
        if number is None:
            raise QueryError(f"setting {name} must be a number (not NaN or ±Infinity), "
                             f"got {value!r}")
        return number
    return value


def bad_settings(settings: Mapping[str, Any],
                 defaults: Mapping[str, Any] = DEFAULT_SETTINGS) -> list[tuple[str, Any]]:
    """(name, value) of each setting whose default is a number but whose value is not."""
    return [(k, v) for k, v in settings.items()
            if isinstance(defaults.get(k), float) and not type(v) in (int, float)]
