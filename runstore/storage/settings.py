"""The store's settings: their defaults, and the one rule by which a query's settings are made.

Contract: `DEFAULT_SETTINGS` names every setting and its default (`kl_threshold`: 0.01, the
KL threshold of the `kl_steps` view and of the default health rule). A store keeps its own
values in its manifest (`Store.set_setting`); `merged(stored, params)` is what one query
sees: the defaults, then the store's values, then the query's params named like a setting
(a numeric setting refuses a value that is not a number, naming `--param`). `coerce(name,
value)` checks a value before it is stored; `bad_settings(stored)` lists stored values of the
wrong type (a damaged or hand-edited manifest: `runstore repair` drops them).
`value_parts(v)` is how a value is held in the `settings` view: as a number, or as text.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import QueryError

DEFAULT_SETTINGS: dict[str, float] = {"kl_threshold": 0.01}


def value_parts(v: Any) -> tuple[float | None, str | None]:
    """`(number, None)` for a value that reads as a number, else `(None, its text)`."""
    try:
        return float(v), None
    except (TypeError, ValueError):
        return None, str(v)


def merged(stored: Mapping[str, Any] | None,
           params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings one query sees: the defaults, the store's, then its params' overrides."""
    settings = {**DEFAULT_SETTINGS, **(stored or {})}
    for k, v in (params or {}).items():
        if k in DEFAULT_SETTINGS:
            if isinstance(DEFAULT_SETTINGS[k], float) and value_parts(v)[0] is None:
                raise QueryError(f"setting {k} must be a number, got {v!r} "
                                 f"(e.g. --param {k}={DEFAULT_SETTINGS[k]})")
            settings[k] = v
    return settings


def coerce(name: str, value: Any) -> float | str:
    """`value` as setting `name` stores it; `QueryError` for an unknown setting or a value of
    the wrong type."""
    if name not in DEFAULT_SETTINGS:
        raise QueryError(f"unknown setting {name!r}; settings: {', '.join(DEFAULT_SETTINGS)}")
    if isinstance(DEFAULT_SETTINGS[name], float):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise QueryError(f"setting {name} must be a number, got {value!r}") from None
    return value


def bad_settings(settings: Mapping[str, Any],
                 defaults: Mapping[str, Any] = DEFAULT_SETTINGS) -> list[tuple[str, Any]]:
    """(name, value) of each setting whose default is a number but whose value is not."""
    return [(k, v) for k, v in settings.items()
            if isinstance(defaults.get(k), float) and not type(v) in (int, float)]
