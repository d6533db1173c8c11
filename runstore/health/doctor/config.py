"""The thresholds the doctor uses: each finding's defaults, and runstore.toml's `[doctor.NAME]`.

Contract: `doctor_config(store, config=True)` returns a `DoctorConfig`: per finding of the
catalogue, the value of each of its params (the file's default; a symbolic default resolved:
`kl_threshold` the store's `kl_threshold` setting, what `runstore check`'s KL rule uses,
`trend_weight` the trend rules' EMA weight), overridden by the `[doctor.NAME]` table of the
runstore.toml in force (the one `runstore check` reads: health.config's `config_path` and
`read_toml`), and the findings a table turns off (`enabled = false`):

```toml
[doctor.kl_spike]
threshold = 0.02      # any param of the finding (docs/doctor.md lists them)

[doctor.stale_policy]
enabled = false       # leave the finding out
```

A finding name the catalogue lacks, a param the finding lacks, a value that is not a finite
number (a whole number from 1 to INT64_MAX for a count such as `window`), a value outside the
param's bounds (`in [0, 1]`, `above 0`: catalogue.Bounds), a value the finding's trend rule
refuses (`trend_rule`: a smoothing weight outside [0, 1), say) or an `enabled` that is not true
or false is a `UsageError` naming the file and the key (and the closest names). `config=False`
reads no file, a path reads that file.
"""

from __future__ import annotations

import difflib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import StoreNotFound, UsageError
from ...numbers import INT64_MAX
from ..config import config_path, read_toml
from ..rules import DEFAULT_KL_THRESHOLD
from .catalogue import CATALOGUE, NAMES, Finding, Param

if TYPE_CHECKING:
    from ...query.reader import Reader
    from ..trends import TrendRule

SECTION = "doctor"


@dataclass(frozen=True)
class DoctorConfig:
    """Each finding's params, the findings turned off, and the file they came from."""

    params: dict[str, dict[str, float]]
    disabled: frozenset[str] = frozenset()
    path: Path | None = None
    overridden: dict[str, frozenset[str]] = field(default_factory=dict)  # set by the file


def defaults(store: "Reader | None" = None) -> dict[str, dict[str, float]]:
    """Every finding's params at their defaults (symbols resolved with `store`'s settings)."""
    from ..trends import DEFAULT_WEIGHT

    threshold = DEFAULT_KL_THRESHOLD
    if store is not None:
        try:
            setting = store.settings().get("kl_threshold")
        except StoreNotFound:
            setting = None
        if isinstance(setting, (int, float)) and not isinstance(setting, bool):
            threshold = float(setting)
    symbols = {"kl_threshold": threshold, "trend_weight": DEFAULT_WEIGHT}
    return {f.name: {p.name: (symbols[p.default] if isinstance(p.default, str) else p.default)
                     for p in f.params} for f in CATALOGUE}


def doctor_config(store: "Reader | None" = None,
                  config: "bool | str | os.PathLike[str]" = True) -> DoctorConfig:
    """The params and switches in force (see the module)."""
    params = defaults(store)
    if config is False:
        return DoctorConfig(params)
    path = (config_path(store.path if store is not None else None) if config is True
            else Path(config))
    if path is None:
        return DoctorConfig(params)
    section = read_toml(path).get(SECTION, {})
    if not isinstance(section, dict):
        raise UsageError(f"{path}: `{SECTION}` must be tables, one per finding "
                         f"([{SECTION}.kl_spike])")
    disabled: set[str] = set()
    overridden: dict[str, frozenset[str]] = {}
    for name, table in section.items():
        where = f"{path}: [{SECTION}.{name}]"
        if name not in NAMES:
            close = difflib.get_close_matches(name, NAMES, n=3)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise UsageError(f"{path}: no finding is named {name!r} ([{SECTION}.{name}]){hint} "
                             f"(findings: {', '.join(NAMES)})")
        if not isinstance(table, dict):
            raise UsageError(f"{where} must be a table of the finding's params")
        finding = next(f for f in CATALOGUE if f.name == name)
        for key, value in table.items():
            if key == "enabled":
                if not isinstance(value, bool):
                    raise UsageError(f"{where}: enabled must be true or false, got {value!r}")
                if not value:
                    disabled.add(name)
                continue
            params[name][key] = _value(where, finding, key, value)
        overridden[name] = frozenset(k for k in table if k != "enabled")
        try:
            trend_rule(finding, params[name])
        except UsageError as e:
            # The rule refused a value this table set (the defaults make a valid rule).
            keys = [k for k in ("threshold", "minutes", "smooth") if k in table]
            raise UsageError(f"{where}: {' and '.join(keys)}: {e}") from None
    return DoctorConfig(params, frozenset(disabled), path, overridden)


def trend_rule(finding: Finding, params: dict[str, float]) -> "TrendRule | None":
    """The `runstore check` trend rule a trend finding reads (`@trend`), with its params as
    the rule's value (`threshold`, or `minutes` for stale) and weight (`smooth`); the rule's
    own checks refuse a bad value (a `UsageError`). None for a finding without one."""
    from ..trends import TrendRule

    if finding.trend is None:
        return None
    kind, metric = finding.trend
    if kind == "stale":
        return TrendRule("stale", None, ">", params["minutes"])
    return TrendRule(kind, metric, ">", params["threshold"],  # type: ignore[arg-type]
                     weight=params["smooth"])


def _value(where: str, finding: Finding, key: str, value: Any) -> float:
    param: Param | None = next((p for p in finding.params if p.name == key), None)
    if param is None:
        known = [p.name for p in finding.params] + ["enabled"]
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise UsageError(f"{where} has no param {key!r}{hint} ({finding.name} takes "
                         f"{', '.join(known)})")
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value):
        raise UsageError(f"{where}: {key} must be a finite number, got {value!r}")
    if param.whole and (not float(value).is_integer() or not 1 <= value <= INT64_MAX):
        # Steps are int64: no count of them is larger (nor does one fit the statements).
        raise UsageError(f"{where}: {key} counts steps: a whole number from 1 to {INT64_MAX}, "
                         f"got {value!r}")
    if param.bounds is not None and not param.bounds.holds(value):
        raise UsageError(f"{where}: {key} must be {param.bounds.text}, got {value!r} "
                         f"(the default is {param.default})")
    return int(value) if param.whole else float(value)
