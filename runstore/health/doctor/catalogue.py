"""The doctor's catalogue: one finding per `sql/doctor/NAME.sql` file, composed in one tuple.

Contract: a finding file opens with `--` lines: `NAME: what went wrong` first, then the
finding's exact definition, then its tags:

* `@severity error|warning|info`;
* `@param NAME = DEFAULT: meaning`, one per threshold or size the statement reads as `$NAME`.
  DEFAULT is a number (written with a `.` or an exponent: any finite number; else a whole
  number >= 1) or a name `SYMBOLS` resolves: `kl_threshold` (the store's setting, what
  `runstore check`'s KL rule uses) or `trend_weight` (the trend rules' EMA weight). It may
  be followed by the values the statement can take (`Bounds`): `in [LOW, HIGH]` (a share:
  `@param part = 0.25 in [0, 1]: ...`) or `above LOW` (a divisor: `above 0`). A
  `runstore.toml` `[doctor.NAME]` table overrides them (doctor/config.py);
* `@try` the next thing to try (the logging guide's words where it has them);
* `@chart KEY, ...`: the metrics a chart of the finding draws (each standing for its `optim/`
  family; the web UI links each finding to the chart of those its run logged);
* `@trend drop METRIC`, `@trend rise METRIC` or `@trend stale`: the `runstore check` trend
  rule (health.trends, its one definition) whose fired rows the statement reads as bound
  lists (`$drop_run_id`, ... see diagnose.py), with the finding's `threshold` (or `minutes`)
  and `smooth` params;
* `@optional TABLE.COLUMN: where it comes from`: a column the store may not have yet (an
  artifact a later runstore ingests); written qualified (`r.last_error`) in the statement,
  it reads as a typed null where the schema lacks it, and the explanation says so;
* `@needs TABLE[.COLUMN]: where it comes from`: without it the finding is not evaluated.

Then named statements (`-- name: NAME`, read by `resources.parse_statements`): `finding`, one
row per run of `runs` (`FINDING_COLUMNS`: `run_id`, `missing` — why the run could not be judged,
null when it was —, `fired`, `first_step`, `last_step`, `evidence`, `facts` — the numbers, as
JSON text); `evidence`, the rows that show a finding of one run (`$run_id`, `$first_step`,
`$last_step`); and optionally `keys`, the stored keys the finding reads by pattern, bound to
the others as `$keys`. Every statement reads live metrics only through the `metrics` view.
`CATALOGUE` holds every finding, parsed once, in the order of `NAMES`; `finding(name)` finds
one (a `UsageError` naming the closest names otherwise).
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Union, get_args

from ...errors import UsageError
from ...resources import parse_statements, sql_dir

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[str, ...] = get_args(Severity)  # worst first
TRENDS = ("drop", "rise", "stale")
# Defaults a finding may name instead of a number (resolved by doctor/config.py).
SYMBOLS = ("kl_threshold", "trend_weight")
# What a `finding` statement returns, in this order.
FINDING_COLUMNS = ("run_id", "missing", "fired", "first_step", "last_step", "evidence", "facts")

# The catalogue's order: the table (docs/doctor.md follows it).
NAMES = ("kl_spike", "reward_stuck", "parse_errors", "no_improvement", "reward_collapse",
         "entropy_collapse", "length_at_limit", "no_signal", "rollout_errors", "stale_policy",
         "slow_steps", "crashed", "not_finite", "eval_gap")

Default = Union[float, int, str]


@dataclass(frozen=True)
class Bounds:
    """The values a param may take, as its `@param` line writes them: `in [LOW, HIGH]`
    (both included) or `above LOW` (LOW excluded, no upper bound)."""

    text: str  # as written: `in [0, 1]`, `above 0`
    low: float
    high: float | None = None  # None: strictly above `low`

    def holds(self, value: float) -> bool:
        if self.high is None:
            return value > self.low
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Param:
    """A threshold or size of a finding: `$name` in its statement."""

    name: str
    default: Default  # a number, or a name of SYMBOLS
    doc: str
    whole: bool  # a whole number >= 1 (a count of steps), not any finite number
    bounds: Bounds | None = None  # the values it may take, when not every finite number


@dataclass(frozen=True)
class Finding:
    """One finding of the catalogue, as its file defines it (see the module)."""

    name: str
    summary: str
    definition: str
    severity: Severity
    params: tuple[Param, ...]
    to_try: str
    path: Path
    sql: str  # the `finding` statement
    evidence_sql: str
    keys_sql: str | None = None
    trend: tuple[str, str | None] | None = None  # (kind, metric)
    optional: tuple[tuple[str, str, str], ...] = ()  # (table, column, source)
    needs: tuple[tuple[str, str | None, str], ...] = ()  # (table, column or None, source)
    placeholders: frozenset[str] = field(default_factory=frozenset)
    chart: tuple[str, ...] = ()  # the metrics a chart of the finding draws

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)


_TAG = re.compile(r"^@(\w+)\s*(.*)$")
_PARAM = re.compile(r"^([a-z_][a-z0-9_]*)\s*=\s*([^:]+?)\s*:\s*(.+)$")
_BOUNDS = re.compile(r"^(\S+)(?:\s+(in\s*\[\s*(\S+?)\s*,\s*(\S+?)\s*\]|above\s+(\S+)))?$")
_PLACEHOLDER = re.compile(r"\$([a-z_][a-z0-9_]*)")
_COMMENT = re.compile(r"--[^\n]*")


def placeholders(sql: str) -> frozenset[str]:
    """The `$name`s a statement uses (comments left out)."""
    return frozenset(_PLACEHOLDER.findall(_COMMENT.sub("", sql)))


def _default(text: str, where: str) -> tuple[Default, bool]:
    if text in SYMBOLS:
        return text, False
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where}: a default is a number or one of {SYMBOLS}, got {text!r}")
    whole = re.fullmatch(r"\d+", text) is not None
    if not math.isfinite(value) or (whole and value < 1):
        raise ValueError(f"{where}: default {text!r} is not a finite number (or a count >= 1)")
    return (int(text) if whole else value), whole


def parse(path: Path) -> Finding:
    """The finding in `path` (a `ValueError` saying what is wrong with the file)."""
    text = path.read_text(encoding="utf-8")
    header: list[str] = []
    for line in text.splitlines():
        if not line.startswith("--") or line.startswith("-- name:"):
            break
        header.append(line[2:].strip())
    if not header or ":" not in header[0]:
        raise ValueError(f"{path}: the first line is `-- NAME: what went wrong`")
    name, _, summary = header[0].partition(":")
    if name.strip() != path.stem:
        raise ValueError(f"{path}: the first line names {name.strip()!r}, not {path.stem!r}")
    prose: list[str] = []
    tags: dict[str, list[str]] = {}
    for line in header[1:]:
        m = _TAG.match(line)
        if m:
            tags.setdefault(m.group(1), []).append(m.group(2).strip())
        elif not tags:
            prose.append(line)
        else:
            raise ValueError(f"{path}: text after the tags: {line!r}")
    unknown = set(tags) - {"severity", "param", "try", "trend", "optional", "needs", "chart"}
    if unknown:
        raise ValueError(f"{path}: unknown tag @{sorted(unknown)[0]}")
    severity = (tags.get("severity") or [""])[0]
    if severity not in SEVERITIES:
        raise ValueError(f"{path}: @severity is one of {SEVERITIES}, got {severity!r}")
    params = []
    for spec in tags.get("param", []):
        m = _PARAM.match(spec)
        if not m:
            raise ValueError(f"{path}: @param is `NAME = DEFAULT: meaning`, got {spec!r}")
        where = f"{path}: @param {m.group(1)}"
        b = _BOUNDS.match(m.group(2))
        if not b:
            raise ValueError(f"{where}: after the default come `in [LOW, HIGH]` or `above LOW`,"
                             f" got {m.group(2)!r}")
        default, whole = _default(b.group(1), where)
        bounds = None
        if b.group(2):
            try:
                low = float(b.group(3) if b.group(5) is None else b.group(5))
                high = None if b.group(5) is not None else float(b.group(4))
            except ValueError:
                raise ValueError(f"{where}: bounds are numbers, got {b.group(2)!r}") from None
            bounds = Bounds(" ".join(b.group(2).split()), low, high)
            if isinstance(default, str) or not bounds.holds(default):
                raise ValueError(f"{where}: the default {default!r} is not {bounds.text}")
        params.append(Param(m.group(1), default, m.group(3), whole, bounds))
    trend = None
    if "trend" in tags:
        kind, _, metric = tags["trend"][0].partition(" ")
        if kind not in TRENDS or (kind == "stale") != (not metric.strip()):
            raise ValueError(f"{path}: @trend is `drop METRIC`, `rise METRIC` or `stale`")
        trend = (kind, metric.strip() or None)
    statements = parse_statements(text)
    if "finding" not in statements or "evidence" not in statements:
        raise ValueError(f"{path}: needs the statements `-- name: finding` and `-- name: evidence`")
    sql = statements["finding"]
    optional = tuple(_column(path, "optional", spec) for spec in tags.get("optional", []))
    for table, column, _ in optional:
        if not re.search(rf"\b[a-z_]+\.{column}\b", sql):
            raise ValueError(f"{path}: @optional {table}.{column} is read qualified (r.{column})")
    needs = tuple(_needed(path, spec) for spec in tags.get("needs", []))
    names = {p.name for p in params}
    used = placeholders(sql)
    if not names <= used:
        raise ValueError(f"{path}: @param {sorted(names - used)[0]} is not used by the finding")
    return Finding(
        name=path.stem, summary=summary.strip(), definition=" ".join(prose).strip(),
        severity=severity,  # type: ignore[arg-type]
        params=tuple(params), to_try=" ".join(tags.get("try", [])).strip(), path=path, sql=sql,
        evidence_sql=statements["evidence"], keys_sql=statements.get("keys"), trend=trend,
        optional=optional, needs=needs, placeholders=used,
        chart=tuple(k.strip() for spec in tags.get("chart", []) for k in spec.split(",")
                    if k.strip()))


def _column(path: Path, tag: str, spec: str) -> tuple[str, str, str]:
    ref, _, source = spec.partition(":")
    table, dot, column = ref.strip().partition(".")
    if not dot or not table or not column:
        raise ValueError(f"{path}: @{tag} is `TABLE.COLUMN: where it comes from`, got {spec!r}")
    return table, column, source.strip()


def _needed(path: Path, spec: str) -> tuple[str, str | None, str]:
    ref, _, source = spec.partition(":")
    table, _, column = ref.strip().partition(".")
    if not table:
        raise ValueError(f"{path}: @needs is `TABLE[.COLUMN]: where it comes from`, got {spec!r}")
    return table, column or None, source.strip()


def load(directory: Path | None = None) -> tuple[Finding, ...]:
    """Every finding of `NAMES`, parsed from `directory` (the shipped `sql/doctor/`)."""
    root = directory or sql_dir() / "doctor"
    found = {p.stem for p in root.glob("*.sql")}
    if found != set(NAMES):
        extra, lost = sorted(found - set(NAMES)), sorted(set(NAMES) - found)
        raise ValueError(f"{root}: the files and the catalogue's NAMES differ (files not in "
                         f"NAMES: {extra}; NAMES without a file: {lost})")
    return tuple(parse(root / f"{name}.sql") for name in NAMES)


CATALOGUE: tuple[Finding, ...] = load()


def finding(name: str) -> Finding:
    """The finding named `name`; a `UsageError` naming the closest otherwise."""
    for f in CATALOGUE:
        if f.name == name:
            return f
    close = difflib.get_close_matches(name, NAMES, n=3)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise UsageError(f"no finding is named {name!r}{hint} (the catalogue: {', '.join(NAMES)})")
