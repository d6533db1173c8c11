"""Health rules: what a rule is (a threshold rule, a trend rule), the default KL rule, and
rule text made into rules.

Contract: a `Rule` is a metric family (one or more metric names, each standing for its
`optim/` family: `keys.family`), a comparison (`>`, `>=`, `<`, `<=`) and a finite number; it
fires for a run when any of its metrics compares true at some step (evaluate.py says how
steps count). A `TrendRule` is `drop`/`rise` of one metric family (with an optional EMA
weight) or `stale`, fired above a value (trends.py defines and evaluates them).
`kl_rule(threshold)` is the default rule: KL v1 or v2 (either spelling) strictly above
`threshold` (`DEFAULT_KL_THRESHOLD`, the `kl_threshold` setting's default, 0.01). A bad rule
of any kind (no metric, another operator, a value that is not a finite number, a weight
outside [0, 1)) is a `UsageError` when it is made.

`parse_rule(text)` is every rule written as text (`--rule`, `rules=`, a rule's own name):
grammar.py reads it (the one grammar), and the rule it writes is made here; a value the
model refuses is worded as an error reading that text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, Union, cast, get_args

from ..analysis.smooth import check_weight
from ..errors import UsageError
from ..families import KL_METRICS, family
from ..storage.settings import DEFAULT_SETTINGS, kl_threshold
from . import grammar
from .grammar import number, quoted

Op = Literal[">", ">=", "<", "<="]
OPS: tuple[str, ...] = get_args(Op)
Kind = Literal["drop", "rise", "stale"]
KINDS = ("drop", "rise", "stale")
TrendOp = Literal[">", ">="]
DEFAULT_WEIGHT = 0.9  # the EMA weight of drop/rise rules that give none
# The default rule's threshold is the `kl_threshold` setting's default: one number, one home.
DEFAULT_KL_THRESHOLD: float = DEFAULT_SETTINGS["kl_threshold"]


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
            # As rule text: a metric that must be quoted is (the name parses back).
            object.__setattr__(self, "name", f"{'|'.join(quoted(m) for m in metrics)} "
                                             f"{self.op} {number(self.value)}")


def kl_rule(threshold: float = DEFAULT_KL_THRESHOLD) -> Rule:
    """The default rule: KL v1 or v2, with or without `optim/`, strictly above `threshold`.

    >>> kl_rule().name
    'kl_sample_train_v1|v2 > 0.01'
    """
    if not isinstance(threshold, (int, float)):  # text is no threshold here
        raise UsageError(f"the KL threshold must be a number, got {threshold!r}")
    threshold = kl_threshold(threshold)
    return Rule(KL_METRICS, ">", threshold,
                name=f"kl_sample_train_v1|v2 > {number(float(threshold))}")


@dataclass(frozen=True)
class TrendRule:
    """One trend rule (see the module). `metric` is None for `stale`; `weight` is the EMA
    weight of drop/rise (`DEFAULT_WEIGHT` when None); `name` defaults to the rule as written.

    >>> TrendRule("drop", "env/all/reward/total", ">", 0.2).name
    'drop(env/all/reward/total) > 0.2'
    >>> TrendRule("rise", "time/total", ">", 2, weight=0.5).name
    'rise(time/total, 0.5) > 2'
    """

    kind: Kind
    metric: str | None
    op: TrendOp
    value: float
    weight: float | None = None
    name: str = ""
    families: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UsageError(f"a trend rule is one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.op not in (">", ">="):
            raise UsageError(f"trend rules fire above a value: use > or >=, not {self.op!r}")
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)) \
                or not math.isfinite(self.value):
            raise UsageError(f"a trend rule's value must be a finite number, got {self.value!r}")
        if self.kind == "stale":
            if self.metric is not None or self.weight is not None:
                raise UsageError("stale takes no metric and no weight: stale > MINUTES")
            if self.value < 0:
                raise UsageError(f"stale counts minutes, at least 0, got {self.value!r}")
        else:
            if not isinstance(self.metric, str) or not self.metric.strip():
                raise UsageError(f"{self.kind} needs a metric name: {self.kind}(METRIC) > X")
            if self.weight is not None:
                object.__setattr__(self, "weight", check_weight(self.weight, "the weight"))
            if self.kind == "drop" and self.value < 0:
                raise UsageError(f"drop is how far below its best a metric fell, at least 0; "
                                 f"got {self.value!r}")
            if self.kind == "rise" and self.value <= 0:
                raise UsageError(f"rise is a ratio to the running median, above 0; got "
                                 f"{self.value!r}")
        object.__setattr__(self, "value", float(self.value))
        object.__setattr__(self, "families",
                           () if self.metric is None else (family(self.metric),))
        if not self.name:
            object.__setattr__(self, "name", self.text())

    @property
    def smoothing(self) -> float:
        return DEFAULT_WEIGHT if self.weight is None else self.weight

    def text(self) -> str:
        """The rule as `parse_rule` reads it."""
        if self.kind == "stale":
            return f"stale {self.op} {number(self.value)}"
        metric = quoted(cast(str, self.metric))
        weight = "" if self.weight is None else f", {number(self.weight)}"
        return f"{self.kind}({metric}{weight}) {self.op} {number(self.value)}"


def parse_rule(text: str) -> "Rule | TrendRule":
    """A rule written as text: a threshold rule or a trend rule (see grammar.py); a
    `UsageError` saying why not, and where, otherwise.

    >>> rule = parse_rule("time/sample_async:total >= 30")
    >>> rule.metrics, rule.op, rule.value
    (('time/sample_async:total',), '>=', 30.0)
    >>> parse_rule("0.05 > entropy").name
    'entropy < 0.05'
    >>> parse_rule("drop(env/all/reward/total, 0.8) > 0.2").weight
    0.8
    """
    w = grammar.read(text)
    try:
        if w.kind == "threshold":
            return Rule(cast(str, w.metric), cast(Op, w.op), w.value)
        return TrendRule(cast(Kind, w.kind), w.metric, cast(TrendOp, w.op), w.value,
                         weight=w.weight)
    except UsageError as e:
        hint = grammar.THRESHOLD_HINT if w.kind == "threshold" else grammar.TREND_HINT
        raise UsageError(f"cannot read rule {text!r}: {e}. {hint}") from None


RuleLike = Union[Rule, TrendRule, str]
