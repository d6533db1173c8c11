"""Which rules a check runs: `runstore.toml`'s `[check]` section, the store's setting, the caller's.

Contract: `config_path(store_path)` is the runstore.toml in force: the one beside the store
(local stores only), else the working directory's; `read_toml(path)` reads it (a `UsageError`
naming the file when it is not TOML, or holds a table besides `[check]` and `[doctor.*]`:
`TABLES`). `load_config(path)` reads its `[check]`
table (`threshold`, `default_rules`, `notify`, `[[check.rule]]` tables: threshold rules, or
trend rules with a `trend` key) into a `CheckConfig`, against one schema (`SECTION`, `FORMS`:
which keys each table takes, which it needs, what each holds); anything else is a
`UsageError` naming the file and the key (`check.notify[2]`, `rule 3`). The values a rule is
made of are judged by the rule's model (rules.py), whichever way it was written. Rule text
(`--rule`) is read by `rules.parse_rule` (the one grammar: a trend rule when it reads as one,
`drop(...)`, `rise(...)`, `stale`, else a threshold rule). `resolve_rules(...)` orders the
rules: the default KL rule (its threshold: the argument, else the config's, else the store's `kl_threshold` setting, else `DEFAULT_KL_THRESHOLD`), then the
config's, then the caller's, without duplicates; `choose_rules(store, ...)` is that with the
store's runstore.toml and setting (what `runstore check` and `ingest --watch` run).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, cast

from ..errors import StoreNotFound, UsageError
from ..storage.location import is_remote
from .rules import DEFAULT_KL_THRESHOLD, Rule, RuleLike, TrendRule, kl_rule, parse_rule

if TYPE_CHECKING:
    from ..query.reader import Reader

CONFIG_FILE = "runstore.toml"


@dataclass(frozen=True)
class CheckConfig:
    """The `[check]` part of a runstore.toml (empty when there is none)."""

    rules: "tuple[Rule | TrendRule, ...]" = ()
    threshold: float | None = None
    default_rules: bool | None = None
    path: Path | None = None
    notify: tuple[str, ...] = ()  # webhook URLs (notify.py)


def config_path(store_path: str | os.PathLike[str] | None,
                cwd: str | os.PathLike[str] | None = None) -> Path | None:
    """The runstore.toml in force: the one beside the store, else the working directory's
    (only the latter for a store on S3). A name that is there but no file (a directory, a
    dangling or looping link) is the one in force too, and reading it fails naming it: a
    check must not gate on another file's rules, or none, in its place."""
    candidates = []
    if store_path is not None and not is_remote(store_path):
        candidates.append(Path(store_path).absolute().parent / CONFIG_FILE)
    candidates.append(Path(cwd if cwd is not None else os.getcwd()).absolute() / CONFIG_FILE)
    return next((p for p in candidates if p.is_symlink() or p.exists()), None)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_names(v: Any) -> bool:
    names = [v] if isinstance(v, str) else v
    return isinstance(names, list) and bool(names) and all(isinstance(m, str) for m in names)


# The one schema of runstore.toml's `[check]` table: each key, the test of its value and what
# the value must be (a `[[check.rule]]` table is read by `toml_rule`).
SECTION: dict[str, tuple[Callable[[Any], bool], str]] = {
    "threshold": (lambda v: v is None or (_is_number(v) and math.isfinite(v)),
                  "must be a number (not NaN or ±Infinity)"),
    "default_rules": (lambda v: v is None or isinstance(v, bool), "must be true or false"),
    "notify": (lambda v: isinstance(v, (str, list)), "is a list of webhook URLs"),
    "rule": (lambda v: isinstance(v, list), "rules are written as [[check.rule]] tables"),
}


@dataclass(frozen=True)
class Form:
    """One form of `[[check.rule]]` table: its keys, the keys it needs, what `metric` holds."""

    keys: tuple[str, ...]
    needed: tuple[str, ...]
    metric: tuple[Callable[[Any], bool], str]  # the test of `metric` and what it must be
    described: str  # for messages: what such a table has


# ... and of a `[[check.rule]]` table: a threshold rule, or a trend rule (a `trend` key). The
# values are the rule's model's to judge (rules.Rule, rules.TrendRule), as for rule text.
FORMS = {
    "threshold": Form(("metric", "op", "value", "name"), ("metric", "op", "value"),
                      (_is_names, "metric must be a name or a list of names"),
                      'a rule has metric, op, value and an optional name, e.g. metric = '
                      '"optim/entropy", op = "<", value = 0.05'),
    "trend": Form(("trend", "metric", "op", "value", "smooth", "name"),
                  ("trend", "metric", "op", "value"),
                  (lambda v: v is None or isinstance(v, str),
                   "a trend rule's metric is one name"),
                  "a trend rule has trend (drop, rise or stale), metric (not for stale), op, "
                  "value, and optional smooth and name"),
}


def load_config(path: str | os.PathLike[str] | None) -> CheckConfig:
    """Read `[check]` and its `[[check.rule]]` tables from a runstore.toml.

    ```toml
    [check]
    threshold = 0.02          # the default KL rule's threshold
    default_rules = true      # false: only the rules below
    notify = ["https://hooks.slack.com/services/..."]   # webhooks (notify.py)

    [[check.rule]]
    metric = "optim/entropy"  # or a list: any of them
    op = "<"
    value = 0.05
    name = "entropy collapse" # optional

    [[check.rule]]
    trend = "drop"            # a trend rule: drop | rise | stale (trends.py)
    metric = "env/all/reward/total"
    op = ">"
    value = 0.2
    smooth = 0.9              # optional (drop, rise)
    ```
    """
    if path is None:
        return CheckConfig()
    path = Path(path)
    data = read_toml(path)
    section = data.get("check", {})
    if not isinstance(section, dict):
        raise UsageError(f"{path}: `check` must be a table ([check])")
    unknown = sorted(set(section) - set(SECTION))
    if unknown:
        raise UsageError(f"{path}: unknown key check.{unknown[0]}; [check] takes threshold, "
                         "default_rules, notify and [[check.rule]] tables")
    for key, (valid, must) in SECTION.items():
        if key in section and not valid(section[key]):
            raise UsageError(f"{path}: check.{key} {must}, got {section[key]!r}"
                             if key != "rule" else f"{path}: {must}")
    from .urls import config_urls

    threshold = section.get("threshold")
    return CheckConfig(
        tuple(toml_rule(f"{path}: rule {i}", entry)
              for i, entry in enumerate(section.get("rule", []), start=1)),
        None if threshold is None else float(threshold), section.get("default_rules"), path,
        tuple(config_urls(section, str(path))))


# The tables a runstore.toml holds: `[check]` (load_config) and `[doctor.NAME]` (health.doctor).
TABLES = ("check", "doctor")


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The tables of a runstore.toml; a `UsageError` naming the file when it cannot be read,
    is not TOML, or holds a key or table besides `TABLES` (`[check]` is `load_config`'s,
    `[doctor.*]` the doctor's: health.doctor): a misspelt table would be ignored, and a
    check would gate on less than the file says."""
    import difflib
    import tomllib

    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # a BOM is not TOML
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from e
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{path} is not valid TOML: {e}") from e
    for key in sorted(set(data) - set(TABLES)):
        if not isinstance(data[key], (dict, list)):
            raise UsageError(f"{path}: unknown key {key} outside any table; [check] takes "
                             "threshold, default_rules, notify and [[check.rule]] tables")
        close = difflib.get_close_matches(key, TABLES, n=1)
        hint = (f"did you mean [{close[0]}]?" if close else
                "runstore.toml takes [check] (rules are [[check.rule]] tables) and "
                "[doctor.NAME] tables")
        raise UsageError(f"{path}: unknown table [{key}]; {hint}")
    return data


def toml_rule(where: str, entry: Any) -> "Rule | TrendRule":
    """A `[[check.rule]]` table as the rule it writes (see `FORMS`); `where` names the file
    and the rule for errors."""
    if not isinstance(entry, dict):
        raise UsageError(f"{where} must be a [[check.rule]] table")
    kind = "trend" if "trend" in entry else "threshold"
    form = FORMS[kind]
    unknown = sorted(set(entry) - set(form.keys))
    missing = [k for k in form.needed if k not in entry
               and not (k == "metric" and entry.get("trend") == "stale")]
    if unknown or missing:
        problem = f"unknown key {unknown[0]!r}" if unknown else f"no {missing[0]!r}"
        raise UsageError(f"{where} has {problem}; {form.described}")
    valid, must = form.metric
    if not valid(entry.get("metric")):
        raise UsageError(f"{where}: {must}")
    name = entry.get("name", "")
    if not isinstance(name, str):
        raise UsageError(f"{where}: name must be a string")
    try:
        if kind == "threshold":
            metric = entry["metric"]
            return Rule(tuple([metric] if isinstance(metric, str) else metric), entry["op"],
                        entry["value"], name=name)
        return TrendRule(entry["trend"], entry.get("metric"), entry["op"], entry["value"],
                         weight=entry.get("smooth"), name=name)
    except UsageError as e:
        raise UsageError(f"{where}: {e}") from None


def resolve_rules(*, threshold: float | None = None, rules: Iterable[RuleLike] | None = None,
                  default_rules: bool | None = None, config: CheckConfig | None = None,
                  store_threshold: float | None = None) -> "list[Rule | TrendRule]":
    """The rules to evaluate, in order: the default KL rule, the config's, the caller's.

    The KL threshold is `threshold`, else the config's, else the store's `kl_threshold`
    setting, else 0.01. `default_rules=False` (or the config's `default_rules = false`)
    leaves the KL rule out; an argument beats the config. Duplicates are dropped; two
    different rules with one name are an error.
    """
    config = config or CheckConfig()
    use_default = default_rules if default_rules is not None else (
        config.default_rules if config.default_rules is not None else True)
    chosen: "list[Rule | TrendRule]" = []
    origins: list[str] = []  # where each chosen rule was written, for a clash of names
    if use_default:
        t = next(v for v in (threshold, config.threshold, store_threshold, DEFAULT_KL_THRESHOLD)
                 if v is not None)
        chosen.append(kl_rule(t))
        origins.append("the default KL rule")
    elif threshold is not None:
        raise UsageError("--threshold sets the default KL rule's threshold, which "
                         "--no-default-rules leaves out; give a --rule instead")
    if isinstance(rules, (str, Rule, TrendRule)):
        rules = [rules]
    elif rules is not None and not isinstance(rules, Iterable):
        raise UsageError(f"rules is a rule or a list of rules (text like \"optim/entropy < "
                         f"0.05\", Rule or TrendRule objects), got {rules!r}")
    given = [(r, f"{config.path}: rule {i}") for i, r in enumerate(config.rules, start=1)]
    given += [(r, "--rule") for r in rules or []]
    for r, origin in given:
        if isinstance(r, str):
            r = parse_rule(r)
        elif not isinstance(r, (Rule, TrendRule)):
            raise UsageError(f"rules are Rule or TrendRule objects or text like "
                             f"\"optim/entropy < 0.05\" or \"drop(env/all/reward/total) > 0.2\", "
                             f"got {r!r}")
        if r not in chosen:
            chosen.append(r)
            origins.append(origin)
    names = [r.name for r in chosen]
    clash = next((n for n in names if names.count(n) > 1), None)
    if clash is not None:
        first, second = (o for o, n in zip(origins, names) if n == clash)
        raise UsageError(f"two different rules are named {clash!r} ({first} and {second}); "
                         "give them distinct names (`name = ...` in a [[check.rule]] table)")
    if not chosen:
        raise UsageError("no rules to check: drop --no-default-rules, add --rule "
                         "\"METRIC OP NUMBER\", or add [[check.rule]] to runstore.toml")
    return chosen


def choose_rules(store: "Reader", *, threshold: float | None = None,
                 rules: Iterable[RuleLike] | None = None, default_rules: bool | None = None,
                 config: "bool | str | os.PathLike[str] | CheckConfig" = True
                 ) -> "list[Rule | TrendRule]":
    """`resolve_rules` with the store's runstore.toml and `kl_threshold` setting."""
    cfg = store_config(store, config)
    try:
        setting = store.settings().get("kl_threshold")
    except StoreNotFound:
        setting = None
    store_threshold = float(setting) if isinstance(setting, (int, float)) else None
    return resolve_rules(threshold=threshold, rules=rules, default_rules=default_rules,
                         config=cfg, store_threshold=store_threshold)


def store_config(store: "Reader", config: "bool | str | os.PathLike[str] | CheckConfig" = True
                 ) -> CheckConfig:
    """The `CheckConfig` a check of `store` uses: `True` the runstore.toml in force (beside
    the store, else the working directory's), `False` none, a path that file."""
    if isinstance(config, CheckConfig):
        return config
    if config is True:
        return load_config(config_path(store.path))
    if config is False:
        return CheckConfig()
    return load_config(cast("str | os.PathLike[str]", config))
