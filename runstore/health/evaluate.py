"""Health checks: rules over live metrics that say which runs went wrong, when, and how badly.

Contract: a `Rule` is a metric family (one or more metric names), a comparison (`>`, `>=`,
`<`, `<=`) and a finite number. `evaluate(store, rules)` runs every rule over the `metrics`
view (live values only: the latest write of each step, no `pre_resume` copies), KL families
over the `kl_steps` view that holds their rules, in one query and returns one row per (run,
rule) that fires: `run_name, rule, first_step, last_step, steps_over, longest_streak, peak,
latest, status` (plus `run_id` for callers that track runs; `status` is `run_status`'s, as of
the query). `check(store, ...)` is `runstore check`: it also refuses a rule whose metric no
run in the store has logged (`keys.UnknownKey`, naming the closest logged keys; the default
KL rule excepted) and returns a `CheckResult` whose `summary()` is one line saying how many
runs each rule fired for and how many it checked.

Semantics, the same as the `kl_health` view's for KL (a test holds the two together):

* A metric name and its spelling with or without `optim/` are one family
  (`optim/entropy` = `entropy`); when a step logs both, the `optim/` one is used.
* A step is over when any metric of the rule compares true with the rule's value. NaN never
  compares true, for any op; `+Infinity` is greater than every number, `-Infinity` smaller.
* Steps are the steps that log a numeric value of the rule's metrics (NaN included): a
  logged step that is not over ends a streak, a step that logs none of them does not.
* `peak` is the most extreme value over the threshold (largest for `>`/`>=`, smallest for
  `<`/`<=`); `latest` is the rule's value at the last step that logs it (NaN when that step
  has only NaN), so it shows whether a run has recovered.

The default rule is `kl_rule(threshold)`: KL v1 or v2 (either spelling) `> 0.01`. Rules come
from the caller (`parse_rule` reads `--rule "optim/entropy < 0.05"` with sqlglot) and from
`runstore.toml` (`load_config`): beside the store first, else in the working directory.
Metric names and thresholds only ever reach SQL as bound parameters; the query text is
fixed apart from the optional filters, which are built as sqlglot expressions.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Literal, Sequence, Union, cast, get_args

import pyarrow as pa

from ..errors import StoreNotFound, UsageError
from ..storage.location import is_remote

if TYPE_CHECKING:
    from ..store import Store

Op = Literal[">", ">=", "<", "<="]
OPS: tuple[str, ...] = get_args(Op)
DEFAULT_KL_THRESHOLD = 0.01
KL_METRICS = ("optim/kl_sample_train_v1", "optim/kl_sample_train_v2")
CONFIG_FILE = "runstore.toml"
COLUMNS = ("run_name", "rule", "first_step", "last_step", "steps_over", "longest_streak",
           "peak", "latest", "status")
PREFIX = "optim/"


def family(metric: str) -> tuple[str, ...]:
    """The stored keys that `metric` stands for, preferred spelling first.

    `optim/X` and `X` are one family (older releases log KL and entropy without the prefix);
    other names with a `/` stand for themselves.

    >>> family("optim/entropy"), family("entropy"), family("env/all/reward/total")
    (('optim/entropy', 'entropy'), ('optim/entropy', 'entropy'), ('env/all/reward/total',))
    """
    if metric.startswith(PREFIX) and len(metric) > len(PREFIX):
        return metric, metric[len(PREFIX):]
    if "/" not in metric:
        return PREFIX + metric, metric
    return (metric,)


def _number(value: float) -> str:
    """A threshold as people write it: 5, 0.01, 1e-05."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


@dataclass(frozen=True)
class Rule:
    """One health rule: fires for a run when any of `metrics` compares true at some step.

    `metrics` is one name or several (several: any of them, e.g. KL v1 or v2); each name also
    covers its spelling with or without `optim/`. `name` defaults to the rule as written.

    >>> Rule("optim/entropy", "<", 0.05).name
    'optim/entropy < 0.05'
    """

    metrics: tuple[str, ...] | str
    op: Op
    value: float
    name: str = ""
    families: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        metrics = (self.metrics,) if isinstance(self.metrics, str) else tuple(self.metrics)
        if not metrics or not all(isinstance(m, str) and m.strip() for m in metrics):
            raise UsageError(f"a rule needs one or more metric names, got {self.metrics!r}")
        if self.op not in OPS:
            raise UsageError(f"rule op must be one of {' '.join(OPS)}, got {self.op!r}")
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            raise UsageError(f"rule value must be a number, got {self.value!r}")
        if not math.isfinite(self.value):
            raise UsageError(f"rule value must be a finite number, got {self.value!r}")
        # Two names of one family (optim/entropy, entropy) are one series, not two.
        families: list[tuple[str, ...]] = []
        for m in metrics:
            if family(m) not in families:
                families.append(family(m))
        object.__setattr__(self, "metrics", metrics)
        object.__setattr__(self, "value", float(self.value))
        object.__setattr__(self, "families", tuple(families))
        if not self.name:
            object.__setattr__(self, "name",
                               f"{'|'.join(metrics)} {self.op} {_number(self.value)}")


def kl_rule(threshold: float = DEFAULT_KL_THRESHOLD) -> Rule:
    """The default rule: KL v1 or v2, with or without `optim/`, strictly above `threshold`.

    >>> kl_rule().name
    'kl_sample_train_v1|v2 > 0.01'
    """
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise UsageError(f"the KL threshold must be a number, got {threshold!r}")
    return Rule(KL_METRICS, ">", threshold,
                name=f"kl_sample_train_v1|v2 > {_number(float(threshold))}")


# ---------------------------------------------------------------------------------------------
# Parsing `--rule` text

_RULE_HINT = ('a rule is METRIC OP NUMBER with OP one of > >= < <=, e.g. "optim/entropy < 0.05"; '
              'double-quote a metric name that holds spaces, quotes, brackets or commas')


def parse_rule(text: str) -> Rule:
    """`--rule` text (`optim/entropy < 0.05`) as a Rule; UsageError saying why not otherwise.

    sqlglot's tokenizer finds the one comparison; the metric is the text on one side, bare
    (`time/sample_async:total`: no spaces, quotes, brackets or commas) or quoted (`"a b"`,
    `'a b'`), and the other side must be a number (`0.05`, `-1e-3`, `(2)`). A number on the
    left reads the other way round (`0.05 > entropy` is `entropy < 0.05`).

    >>> rule = parse_rule("time/sample_async:total >= 30")
    >>> rule.metrics, rule.op, rule.value
    (('time/sample_async:total',), '>=', 30.0)
    >>> parse_rule("0.05 > entropy").name
    'entropy < 0.05'
    """
    from sqlglot.dialects.duckdb import DuckDB
    from sqlglot.errors import TokenError
    from sqlglot.tokens import TokenType

    from ..query.guard import syntax_message

    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"empty rule: {_RULE_HINT}")

    def fail(why: str) -> UsageError:
        return UsageError(f"cannot read rule {text!r}: {why}. {_RULE_HINT}")

    try:
        tokens = DuckDB().tokenize(text)
    except TokenError as e:
        raise UsageError(f"cannot read rule {text!r}: {syntax_message(e, text)}\n"
                         f"{_RULE_HINT}") from e
    allowed = {TokenType.GT: ">", TokenType.GTE: ">=", TokenType.LT: "<", TokenType.LTE: "<="}
    other = {TokenType.EQ, TokenType.NEQ, TokenType.NULLSAFE_EQ, TokenType.FARROW,
             TokenType.LIKE, TokenType.ILIKE, TokenType.GLOB, TokenType.IN,
             TokenType.BETWEEN, TokenType.IS}
    if any(t.token_type == TokenType.SEMICOLON for t in tokens):
        raise fail("one rule per --rule, without ';'")
    ops = [t for t in tokens if t.token_type in allowed or t.token_type in other]
    if not ops:
        raise fail("there is no comparison")
    if len(ops) > 1:
        raise fail(f"there are {len(ops)} comparisons; give each rule its own --rule")
    cmp = ops[0]
    if cmp.token_type not in allowed:
        raise fail(f"{cmp.text!r} is not one of > >= < <=")
    op = allowed[cmp.token_type]
    left = [t for t in tokens if t.end < cmp.start]
    right = [t for t in tokens if t.start > cmp.end]
    left_text, right_text = text[:cmp.start].strip(), text[cmp.end + 1:].strip()
    if not left_text or not right_text:
        raise fail(f"{op} needs a metric on one side and a number on the other")
    metric_tokens, metric_text, number_text = left, left_text, right_text
    if _parse_number(right_text) is not None and _parse_number(left_text) is not None:
        raise fail("both sides are numbers; one side must name a metric")
    if _parse_number(right_text) is None and _parse_number(left_text) is not None:
        # `0.05 > entropy` reads as `entropy < 0.05`.
        metric_tokens, metric_text, number_text = right, right_text, left_text
        op = {">": "<", ">=": "<=", "<": ">", "<=": ">="}[op]
    value = _parse_number(number_text)
    if value is None:
        raise fail(f"{number_text!r} is not a number")
    if not math.isfinite(value):
        raise fail("the value must be a finite number")
    metric = _metric(metric_tokens, metric_text)
    if metric is None:
        raise fail(f"{metric_text!r} is not a metric name")
    return Rule(metric, cast(Op, op), value)


def _parse_number(text: str) -> float | None:
    """`text` as a number if sqlglot reads it as one (`0.05`, `-1e-3`, `(2)`), else None."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    from ..query.guard import _quiet_sqlglot

    try:
        with _quiet_sqlglot():
            node = sqlglot.parse_one(text, read="duckdb")
    except (ParseError, TokenError):
        return None
    except RecursionError as e:  # e.g. a number inside 50 pairs of parentheses
        raise UsageError(f"cannot read {text[:40]!r}…: it nests too deeply for runstore to "
                         f"check; write the number plainly. {_RULE_HINT}") from e
    sign = 1.0
    while isinstance(node, (exp.Neg, exp.Paren)):
        if isinstance(node, exp.Neg):
            sign = -sign
        node = node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return sign * float(node.this)
        except ValueError:
            return None
    return None


_NOT_BARE = frozenset("\"'`()[]{},;")


def _metric(tokens: list[Any], text: str) -> str | None:
    """A metric name: one quoted token, or bare text with no spaces or quotes in it.

    Bare names are taken as written rather than parsed: to SQL, `optim/entropy` is a division
    and `time/sample_async:total` is not an expression at all.
    """
    from sqlglot.tokens import TokenType

    if len(tokens) == 1 and tokens[0].token_type in (TokenType.IDENTIFIER, TokenType.STRING):
        return tokens[0].text or None
    if any(c.isspace() or c in _NOT_BARE for c in text):
        return None  # e.g. `abs(x)`: a function call is not a metric; quote it if it is one
    return text


# ---------------------------------------------------------------------------------------------
# runstore.toml


@dataclass(frozen=True)
class CheckConfig:
    """The `[check]` part of a runstore.toml (empty when there is none)."""

    rules: tuple[Rule, ...] = ()
    threshold: float | None = None
    default_rules: bool | None = None
    path: Path | None = None


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
    ```
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
    unknown = sorted(set(section) - {"rule", "threshold", "default_rules"})
    if unknown:
        raise UsageError(f"{path}: unknown key check.{unknown[0]}; [check] takes threshold, "
                         "default_rules and [[check.rule]] tables")
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
    return CheckConfig(rules, None if threshold is None else float(threshold), default_rules,
                       path)


def _toml_rule(path: Path, index: int, entry: Any) -> Rule:
    where = f"{path}: rule {index}"
    if not isinstance(entry, dict):
        raise UsageError(f"{where} must be a [[check.rule]] table")
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


# ---------------------------------------------------------------------------------------------
# Choosing the rules

RuleLike = Union[Rule, str]


def resolve_rules(*, threshold: float | None = None, rules: Iterable[RuleLike] | None = None,
                  default_rules: bool | None = None, config: CheckConfig | None = None,
                  store_threshold: float | None = None) -> list[Rule]:
    """The rules to evaluate, in order: the default KL rule, the config's, the caller's.

    The KL threshold is `threshold`, else the config's, else the store's `kl_threshold`
    setting, else 0.01. `default_rules=False` (or the config's `default_rules = false`)
    leaves the KL rule out; an argument beats the config. Duplicates are dropped; two
    different rules with one name are an error.
    """
    config = config or CheckConfig()
    use_default = default_rules if default_rules is not None else (
        config.default_rules if config.default_rules is not None else True)
    chosen: list[Rule] = []
    if use_default:
        t = next(v for v in (threshold, config.threshold, store_threshold, DEFAULT_KL_THRESHOLD)
                 if v is not None)
        chosen.append(kl_rule(t))
    elif threshold is not None:
        raise UsageError("--threshold sets the default KL rule's threshold, which "
                         "--no-default-rules leaves out; give a --rule instead")
    for r in [*config.rules, *(rules or [])]:
        if isinstance(r, str):
            r = parse_rule(r)
        elif not isinstance(r, Rule):
            raise UsageError(f"rules are Rule objects or text like \"optim/entropy < 0.05\", "
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


# ---------------------------------------------------------------------------------------------
# Evaluating

# The fixed part of the query. Rules travel as bound lists (unnested into the `rules`,
# `rule_keys` and `kl_series` relations), so no name or number from a user is ever part of
# this text. A series of a KL family is read from the `kl_steps` view, the one home of the KL
# merge rules (which spelling counts, latest write wins, strings supersede numbers); every
# other series from `metrics`. `check_query` drops the branch of `picked` a rule set does not use.
_QUERY = """
with rules as (
    select unnest($rule_idx) as rule_idx, unnest($rule_name) as rule,
           unnest($rule_op) as op, unnest($rule_value) as threshold
),
rule_keys as (
    -- Which stored keys feed which rule: `series` numbers the rule's metrics, `pref` orders the
    -- spellings of one family (0 is `optim/...`, the one used when a step logs both).
    select unnest($key_rule) as rule_idx, unnest($key_series) as series,
           unnest($key_name) as key, unnest($key_pref) as pref
),
kl_series as (
    -- The rules' series that are a KL family, and which `kl_steps` column holds it.
    select unnest($kl_rule) as rule_idx, unnest($kl_series) as series,
           unnest($kl_column) as kl_column
),
metric_values as (
    -- One value per (run, step, rule, series): the preferred spelling's live value, NaN kept.
    -- Strings and booleans have no numeric value and are not compared.
    select m.run_id, m.step, k.rule_idx, k.series, arg_min(m.value, k.pref) as value
    from metrics as m
    join rule_keys as k on k.key = m.key
    where m.value is not null and list_contains($keys, m.key)
    group by m.run_id, m.step, k.rule_idx, k.series
),
kl_values as (
    select s.rule_idx, s.series, k.run_id, k.step,
           case s.kl_column when 'v1' then k.v1 else k.v2 end as value
    from kl_steps as k
    cross join kl_series as s
    where (case s.kl_column when 'v1' then k.v1 else k.v2 end) is not null
),
picked as (
    select run_id, step, rule_idx, series, value from metric_values
    union all
    select run_id, step, rule_idx, series, value from kl_values
),
steps as (
    -- One row per (run, rule, step that logs the rule's metrics). NaN > x is true in DuckDB
    -- (NaN sorts above every number), so NaN is set aside before any comparison: it never
    -- fires, for any op. +Infinity compares as the largest number and fires `>`.
    select p.run_id, p.rule_idx, p.step,
           bool_or(not isnan(p.value) and case r.op
                       when '>' then p.value > r.threshold
                       when '>=' then p.value >= r.threshold
                       when '<' then p.value < r.threshold
                       when '<=' then p.value <= r.threshold end) as is_over,
           -- The rule's value at this step: its most extreme non-NaN series in the direction
           -- of the comparison (null when every series is NaN).
           case when r.op in ('>', '>=') then max(p.value) filter (where not isnan(p.value))
                else min(p.value) filter (where not isnan(p.value)) end as value
    from picked as p
    join rules as r on r.rule_idx = p.rule_idx
    group by p.run_id, p.rule_idx, p.step, r.op
),
islands as (
    -- Gaps and islands: consecutive over-steps share one difference of row numbers.
    select run_id, rule_idx, is_over,
           row_number() over (partition by run_id, rule_idx order by step)
           - row_number() over (partition by run_id, rule_idx, is_over order by step) as island
    from steps
),
streaks as (
    select run_id, rule_idx, max(n) as longest_streak
    from (select run_id, rule_idx, island, count(*) as n
          from islands where is_over
          group by run_id, rule_idx, island) as s
    group by run_id, rule_idx
),
outcome as (
    -- One row per (run, rule) whose metrics the run logs, fired or not: a green check still
    -- says how many runs it looked at.
    select s.run_id, s.rule_idx,
           bool_or(s.is_over) as fired,
           min(s.step) filter (where s.is_over) as first_step,
           max(s.step) filter (where s.is_over) as last_step,
           count(*) filter (where s.is_over) as steps_over,
           case when r.op in ('>', '>=') then max(s.value) filter (where s.is_over)
                else min(s.value) filter (where s.is_over) end as peak,
           arg_max(coalesce(s.value, 'NaN'::double), s.step) as latest
    from steps as s
    join rules as r on r.rule_idx = s.rule_idx
    group by s.run_id, s.rule_idx, r.op
),
scope as (
    -- The runs the check covers (the --runs filter is added here too).
    select count(*) as n from runs
),
kl_keys as (
    -- The stored keys of each KL series (for `kl_logged`).
    select unnest($klk_rule) as rule_idx, unnest($klk_name) as key
),
kl_logged as (
    -- The runs each KL series was checked on: every run with a numeric live-file KL write of
    -- the series' family. `kl_values` may read only the runs with a KL write over the
    -- threshold (the fast path), so the count cannot come from it; this cheap scan gives the
    -- same count on both paths. (It counts a run whose every KL number was superseded by a
    -- string, which `kl_steps` leaves out: "checked" means "logged a KL number".)
    select distinct k.rule_idx, m.run_id
    from metrics_raw as m
    join kl_keys as k on k.key = m.key
    where list_contains($kl_keys, m.key) and m.step is not null and m.value is not null
      and not coalesce(m.pre_resume, false)
),
seen as (
    -- One row per (rule, run) the rule was checked on.
    select rule_idx, run_id from outcome
    union
    select rule_idx, run_id from kl_logged
),
answer as (
    -- Part 0: one row per (run, rule) that fired. Part 1: one row per rule with its counts.
    -- The parts come in that order, so the fired rows are a prefix of the result and callers
    -- slice instead of filtering (pyarrow's filter imports pandas: ~1 s in a fresh process).
    select 0 as part, f.run_id, u.run_name, r.rule, f.first_step, f.last_step, f.steps_over,
           t.longest_streak, f.peak, f.latest, st.status, f.rule_idx,
           null::bigint as checked, null::bigint as fired_runs, null::bigint as scope_runs
    from outcome as f
    join rules as r on r.rule_idx = f.rule_idx
    left join streaks as t on t.run_id = f.run_id and t.rule_idx = f.rule_idx
    left join runs as u on u.run_id = f.run_id
    left join run_status as st on st.run_id = f.run_id
    where f.fired
    union all
    select 1, null, null, r.rule, null, null, null, null, null, null, null, r.rule_idx,
           count(s.run_id), count(s.run_id) filter (where f.fired), (select n from scope)
    from rules as r
    left join seen as s on s.rule_idx = r.rule_idx
    left join outcome as f on f.rule_idx = s.rule_idx and f.run_id = s.run_id
    group by r.rule_idx, r.rule
)
select * exclude (part) from answer
order by part, run_name, rule_idx
"""

# The KL families and the `kl_steps` column that holds each.
KL_COLUMNS = {family("optim/kl_sample_train_v1"): "v1", family("optim/kl_sample_train_v2"): "v2"}


def _over_runs_only(rules: Sequence[Rule], kl_threshold: float | None) -> bool:
    """Whether every run that can fire a KL rule has `kl_steps.run_writes_over`, so the KL
    values may be read for those runs alone (the filter prunes the scan; see kl_steps.sql).

    True when each rule that reads a KL family reads only KL families and fires only above a
    value no lower than the store's `kl_threshold`: a step over it then has a KL value above
    the threshold, a write of the run above it.
    """
    if kl_threshold is None:
        return False
    for r in rules:
        kl = [f in KL_COLUMNS for f in r.families]
        if not any(kl):
            continue
        if not all(kl) or not ((r.op == ">" and r.value >= kl_threshold)
                               or (r.op == ">=" and r.value > kl_threshold)):
            return False
    return True


def check_query(rules: Sequence[Rule], *, runs: str | None = None,
                since_step: int | None = None,
                kl_threshold: float | None = None) -> tuple[str, dict[str, Any]]:
    """`(sql, params)` evaluating every rule in one statement (for `Store.arrow`).

    `kl_threshold` is the `kl_threshold` setting the query will see; when given, rule sets
    that only fire above it read the KL values of the runs with a KL write above it alone.
    """
    if not rules:
        raise UsageError("no rules to check")
    params: dict[str, Any] = {
        "rule_idx": list(range(len(rules))),
        "rule_name": [r.name for r in rules],
        "rule_op": [r.op for r in rules],
        "rule_value": [r.value for r in rules],
        "key_rule": [], "key_series": [], "key_name": [], "key_pref": [],
        "kl_rule": [], "kl_series": [], "kl_column": [], "klk_rule": [], "klk_name": [],
    }
    for i, r in enumerate(rules):
        for s, keys in enumerate(r.families):
            if keys in KL_COLUMNS:
                params["kl_rule"].append(i)
                params["kl_series"].append(s)
                params["kl_column"].append(KL_COLUMNS[keys])
                params["klk_rule"] += [i] * len(keys)
                params["klk_name"] += list(keys)
                continue
            for pref, key in enumerate(keys):
                params["key_rule"].append(i)
                params["key_series"].append(s)
                params["key_name"].append(key)
                params["key_pref"].append(pref)
    # The key list again as one filter on `metrics.key`: a filter on a partition column of the
    # view's window, which DuckDB pushes below the window (a join alone would not be).
    params["keys"] = sorted(set(params["key_name"]))
    if since_step is not None:
        if isinstance(since_step, bool) or not isinstance(since_step, int):
            raise UsageError(f"since_step must be a whole step number, got {since_step!r}")
        params["since_step"] = since_step
    if runs is not None:
        params["runs"] = runs
    metrics_used, kl_used = bool(params["key_name"]), bool(params["kl_rule"])
    unused = [] if metrics_used else ["key_rule", "key_series", "key_name", "key_pref", "keys"]
    unused += [] if kl_used else ["kl_rule", "kl_series", "kl_column"]
    over_runs_only = kl_used and _over_runs_only(rules, kl_threshold)
    if kl_used:
        params["kl_keys"] = sorted(set(params["klk_name"]))
    else:
        unused += ["klk_rule", "klk_name"]
    for name in unused:  # their relations are left out of the statement
        del params[name]
    sql = _query_text(metrics_used, kl_used, since_step is not None, runs is not None,
                      over_runs_only)
    return sql, params


@lru_cache(maxsize=64)
def _query_text(metrics_used: bool, kl_used: bool, since_step: bool, runs: bool,
                over_runs_only: bool) -> str:
    """The statement for one shape of rule set (its values are all params): generated once."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(_QUERY, read="duckdb")
    ctes = {c.alias: c for c in tree.find_all(exp.CTE)}
    # Only the branches of `picked` that some rule reads, with their relations: an unused
    # branch would still scan its table.
    used = {"metric_values": metrics_used, "kl_values": kl_used}
    inputs = {"metric_values": "rule_keys", "kl_values": "kl_series"}
    selects = [exp.select("run_id", "step", "rule_idx", "series", "value").from_(name)
               for name, is_used in used.items() if is_used]
    ctes["picked"].set("this", selects[0] if len(selects) == 1
                       else exp.union(*selects, distinct=False))
    for name, is_used in used.items():
        if not is_used:
            ctes[name].pop()
            ctes[inputs[name]].pop()
    m = lambda name: exp.column(name, table="m")  # noqa: E731 - a local shorthand
    k = lambda name: exp.column(name, table="k")  # noqa: E731
    branches = [(ctes[n].this, col) for n, col in (("metric_values", m), ("kl_values", k))
                if used[n]]
    for select, col in branches:
        if since_step:
            select.where(col("step") >= exp.Placeholder(this="since_step"), copy=False)
        if runs:
            named = (exp.select("run_id").from_("runs")
                     .where(exp.Glob(this=exp.column("run_name"),
                                     expression=exp.Placeholder(this="runs"))))
            select.where(col("run_id").isin(query=named), copy=False)
    logged = ctes["kl_logged"].this
    if since_step:
        logged.where(m("step") >= exp.Placeholder(this="since_step"), copy=False)
    if runs:
        glob = exp.Glob(this=exp.column("run_name"), expression=exp.Placeholder(this="runs"))
        logged.where(m("run_id").isin(query=exp.select("run_id").from_("runs").where(glob)),
                     copy=False)
        ctes["scope"].this.where(glob.copy(), copy=False)
    if over_runs_only:
        ctes["kl_values"].this.where(k("run_writes_over"), copy=False)
    if not kl_used:  # no KL series: `outcome` alone says which runs were checked
        seen = ctes["seen"].this
        ctes["seen"].set("this", seen.this.copy())
        ctes["kl_logged"].pop()
        ctes["kl_keys"].pop()
    return tree.sql(dialect="duckdb")


def _answer(store: "Store", rules: Sequence[Rule], runs: str | None,
            since_step: int | None) -> tuple[pa.Table, list[dict[str, Any]]]:
    """The check query's two parts: the fired rows (`run_id`, the `COLUMNS`, `rule_idx`) and
    one dict per rule (`rule_idx`, `checked`, `fired_runs`, `scope_runs`)."""
    try:
        setting = store.settings().get("kl_threshold")
    except StoreNotFound:
        setting = None
    kl_threshold = float(setting) if isinstance(setting, (int, float)) else None
    table = store.arrow(*check_query(rules, runs=runs, since_step=since_step,
                                     kl_threshold=kl_threshold))
    n_fired = table.num_rows - len(rules)
    counts = table.slice(n_fired).select(["rule_idx", "checked", "fired_runs", "scope_runs"])
    return table.slice(0, n_fired).select(["run_id", *COLUMNS, "rule_idx"]), counts.to_pylist()


def evaluate(store: "Store", rules: Sequence[Rule], *, runs: str | None = None,
             since_step: int | None = None) -> pa.Table:
    """Every (run, rule) that fires, as Arrow: `run_id` then the `COLUMNS`, by run name."""
    return _answer(store, rules, runs, since_step)[0].select(["run_id", *COLUMNS])


@dataclass(frozen=True)
class CheckResult:
    """What `runstore check` found: the rows that fired and how many runs each rule saw.

    `checked[i]` counts the runs (in scope) that log a value of `rules[i]`'s metrics (at
    `since_step` or later), `fired[i]` those it fired for; `runs` counts every run in scope
    (matching the `--runs` GLOB `scope`, when given).
    """

    table: pa.Table  # exactly the COLUMNS, one row per (run, rule) that fired
    rules: tuple[Rule, ...]
    runs: int
    checked: tuple[int, ...]
    fired: tuple[int, ...]
    scope: str | None = None
    since_step: int | None = None

    def summary(self) -> str:
        """One line for people (and CI summaries), fired or not, e.g.
        `kl_sample_train_v1|v2 > 0.01 fired for 0 of 23 runs (21 checked, 2 without KL)`."""
        where = f" matching {self.scope!r}" if self.scope is not None else ""
        since = f" from step {self.since_step}" if self.since_step is not None else ""
        total = f"{self.runs} run{'s' if self.runs != 1 else ''}{where}"

        def seen(i: int) -> str:
            missing = self.runs - self.checked[i]
            lacking = f", {missing} without {_what(self.rules[i])}" if missing else ""
            return f"({self.checked[i]} checked{lacking})"

        if len(self.rules) == 1:
            return f"{self.rules[0].name} fired for {self.fired[0]} of {total}{since} {seen(0)}"
        hit = len(set(self.table.column("run_name").to_pylist()))
        parts = "; ".join(f"{r.name} fired for {self.fired[i]} {seen(i)}"
                          for i, r in enumerate(self.rules))
        return f"{hit} of {total} fired a rule{since}: {parts}"


def _what(rule: Rule) -> str:
    """How the summary names a rule's metrics: `KL` for the default rule's."""
    return "KL" if rule.metrics == KL_METRICS else "|".join(rule.metrics)


def _is_default(rule: Rule) -> bool:
    return rule == kl_rule(rule.value)


def require_metrics(store: "Store", rules: Sequence[Rule]) -> None:
    """`keys.UnknownKey` when a rule names a metric that no run in the store has logged (a
    misspelt rule would otherwise never fire, and a CI gate would pass forever). The default
    KL rule is exempt: a store of SL runs logs no KL, and its check is simply green."""
    from ..query import keys

    named: dict[str, str] = {}  # metric -> the first rule naming it, for the message
    for rule in rules:
        if not _is_default(rule):
            for m in rule.metrics:
                named.setdefault(m, rule.name)
    if named:
        keys.require(store, list(named), families=True,
                     what=lambda m: f"{m} (rule {named[m]!r})")


def check(store: "Store", *, threshold: float | None = None,
          rules: Iterable[RuleLike] | None = None, runs: str | None = None,
          since_step: int | None = None, default_rules: bool | None = None,
          config: bool | str | os.PathLike[str] = True) -> CheckResult:
    """`runstore check`: choose the rules (arguments, runstore.toml, store setting), make sure
    each names logged metrics (`require_metrics`), evaluate them, and count what was seen.

    `config=True` reads the runstore.toml beside the store or in the working directory,
    `False` none, a path that file.
    """
    chosen = choose_rules(store, threshold=threshold, rules=rules,
                          default_rules=default_rules, config=config)
    require_metrics(store, chosen)
    fired, counts = _answer(store, chosen, runs, since_step)
    by_rule = sorted(counts, key=lambda c: c["rule_idx"])
    return CheckResult(
        table=fired.select(list(COLUMNS)), rules=tuple(chosen),
        runs=int(by_rule[0]["scope_runs"]),
        checked=tuple(int(c["checked"]) for c in by_rule),
        fired=tuple(int(c["fired_runs"]) for c in by_rule),
        scope=runs, since_step=since_step)


def run_check(store: "Store", **options: Any) -> pa.Table:
    """`check(store, **options).table`: the rows that fired, exactly the `COLUMNS`."""
    return check(store, **options).table


def choose_rules(store: "Store", *, threshold: float | None = None,
                 rules: Iterable[RuleLike] | None = None, default_rules: bool | None = None,
                 config: bool | str | os.PathLike[str] = True) -> list[Rule]:
    """`resolve_rules` with the store's runstore.toml and `kl_threshold` setting."""
    if config is True:
        cfg = load_config(config_path(store.path))
    elif config is False:
        cfg = CheckConfig()
    else:
        cfg = load_config(cast("str | os.PathLike[str]", config))
    try:
        setting = store.settings().get("kl_threshold")
    except StoreNotFound:
        setting = None
    store_threshold = float(setting) if isinstance(setting, (int, float)) else None
    return resolve_rules(threshold=threshold, rules=rules, default_rules=default_rules,
                         config=cfg, store_threshold=store_threshold)
