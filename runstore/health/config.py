"""Which rules a check runs: `runstore.toml`'s `[check]` section, the store's setting, the caller's.

Contract: `config_path(store_path)` is the runstore.toml in force: the one beside the store
(local stores only), else the working directory's. `load_config(path)` reads its `[check]`
table (`threshold`, `default_rules`, `notify`, `[[check.rule]]` tables: threshold rules, or
trend rules with a `trend` key, trends.py) into a `CheckConfig`; anything it does not know
is a `UsageError` naming the file and the key. Rule text (`--rule`) is a trend rule when it
reads as one (`drop(...)`, `rise(...)`, `stale`), else a threshold rule. `resolve_rules(...)` orders
the rules: the default KL rule (its threshold: the argument, else the config's, else the
store's `kl_threshold` setting, else `DEFAULT_KL_THRESHOLD`), then the config's, then the
caller's, without duplicates; `choose_rules(store, ...)` is that with the store's
runstore.toml and setting (what `runstore check` and `ingest --watch` run).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, cast

from ..errors import StoreNotFound, UsageError
from ..storage.location import is_remote
from .rules import DEFAULT_KL_THRESHOLD, Rule, RuleLike, kl_rule, parse_rule

if TYPE_CHECKING:
    from ..query.reader import Reader
    from .trends import TrendRule

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
    (only the latter for a store on S3)."""
    candidates = []
    if store_path is not None and not is_remote(store_path):
        candidates.append(Path(store_path).absolute().parent / CONFIG_FILE)
    candidates.append(Path(cwd if cwd is not None else os.getcwd()).absolute() / CONFIG_FILE)
    return next((p for p in candidates if p.is_file()), None)


def load_config(path: str | os.PathLike[str] | None) -> CheckConfig:
    """Read `[check]` and its `[[check.rule]]` tables from a runstore.toml.

    ```toml
    [check]
    threshold = 0.02          # the default KL rule's threshold
    default_rules = true      # false: only the rules below

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
    ```

    `notify = ["https://hooks.slack.com/services/..."]` in `[check]` lists webhooks.
    """
    import tomllib

    if path is None:
        return CheckConfig()
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from e
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{path} is not valid TOML: {e}") from e
    section = data.get("check", {})
    if not isinstance(section, dict):
        raise UsageError(f"{path}: `check` must be a table ([check])")
    unknown = sorted(set(section) - {"rule", "threshold", "default_rules", "notify"})
    if unknown:
        raise UsageError(f"{path}: unknown key check.{unknown[0]}; [check] takes threshold, "
                         "default_rules, notify and [[check.rule]] tables")
    threshold = section.get("threshold")
    if threshold is not None and (isinstance(threshold, bool)
                                  or not isinstance(threshold, (int, float))):
        raise UsageError(f"{path}: check.threshold must be a number, got {threshold!r}")
    default_rules = section.get("default_rules")
    if default_rules is not None and not isinstance(default_rules, bool):
        raise UsageError(f"{path}: check.default_rules must be true or false")
    entries = section.get("rule", [])
    if not isinstance(entries, list):
        raise UsageError(f"{path}: rules are written as [[check.rule]] tables")
    rules = tuple(_toml_rule(path, i, entry) for i, entry in enumerate(entries, start=1))
    from .notify import config_urls

    return CheckConfig(rules, None if threshold is None else float(threshold), default_rules,
                       path, tuple(config_urls(section, str(path))))


def _toml_rule(path: Path, index: int, entry: Any) -> "Rule | TrendRule":
    from .trends import toml_trend

    where = f"{path}: rule {index}"
    if not isinstance(entry, dict):
        raise UsageError(f"{where} must be a [[check.rule]] table")
    trend = toml_trend(where, entry)
    if trend is not None:
        return trend
    unknown = sorted(set(entry) - {"metric", "op", "value", "name"})
    missing = [k for k in ("metric", "op", "value") if k not in entry]
    if unknown or missing:
        problem = f"unknown key {unknown[0]!r}" if unknown else f"no {missing[0]!r}"
        raise UsageError(f"{where} has {problem}; a rule has metric, op, value and an optional "
                         'name, e.g. metric = "optim/entropy", op = "<", value = 0.05')
    metric = entry["metric"]
    metrics = [metric] if isinstance(metric, str) else metric
    if not isinstance(metrics, list) or not metrics or \
            not all(isinstance(m, str) for m in metrics):
        raise UsageError(f"{where}: metric must be a name or a list of names")
    name = entry.get("name", "")
    if not isinstance(name, str):
        raise UsageError(f"{where}: name must be a string")
    try:
        return Rule(tuple(metrics), entry["op"], entry["value"], name=name)
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
    from .trends import TrendRule, parse_trend

    config = config or CheckConfig()
    use_default = default_rules if default_rules is not None else (
        config.default_rules if config.default_rules is not None else True)
    chosen: "list[Rule | TrendRule]" = []
    if use_default:
        t = next(v for v in (threshold, config.threshold, store_threshold, DEFAULT_KL_THRESHOLD)
                 if v is not None)
        chosen.append(kl_rule(t))
    elif threshold is not None:
        raise UsageError("--threshold sets the default KL rule's threshold, which "
                         "--no-default-rules leaves out; give a --rule instead")
    for r in [*config.rules, *(rules or [])]:
        if isinstance(r, str):
            r = parse_trend(r) or parse_rule(r)
        elif not isinstance(r, (Rule, TrendRule)):
            raise UsageError(f"rules are Rule or TrendRule objects or text like "
                             f"\"optim/entropy < 0.05\" or \"drop(env/all/reward/total) > 0.2\", "
                             f"got {r!r}")
        if r not in chosen:
            chosen.append(r)
    names = [r.name for r in chosen]
    clash = next((n for n in names if names.count(n) > 1), None)
    if clash is not None:
        raise UsageError(f"two different rules are named {clash!r}; give them distinct names")
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
