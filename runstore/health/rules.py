"""Health rules: what a rule is, the default KL rule, and reading `--rule` text.

Contract: a `Rule` is a metric family (one or more metric names, each standing for its
`optim/` family: `keys.family`), a comparison (`>`, `>=`, `<`, `<=`) and a finite number; it
fires for a run when any of its metrics compares true at some step (evaluate.py says how
steps count). `kl_rule(threshold)` is the default rule: KL v1 or v2 (either spelling)
strictly above `threshold` (`DEFAULT_KL_THRESHOLD`, the `kl_threshold` setting's default,
0.01). `parse_rule("optim/entropy < 0.05")` reads the text of `--rule` with sqlglot's
tokenizer; anything else is a `UsageError` that says what a rule looks like. A bad rule of
any kind (no metric, another operator, a value that is not a finite number) is a
`UsageError` when it is made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, Union, cast, get_args

from ..errors import UsageError
from ..query.keys import family
from ..storage.settings import DEFAULT_SETTINGS

Op = Literal[">", ">=", "<", "<="]
OPS: tuple[str, ...] = get_args(Op)
# The default rule's threshold is the `kl_threshold` setting's default: one number, one home.
DEFAULT_KL_THRESHOLD: float = DEFAULT_SETTINGS["kl_threshold"]
# The KL metrics of the default rule, by their `optim/` spelling (each stands for its family,
# `keys.family`). The `kl_steps` view holds how their values count (sql/kl_steps.sql).
KL_METRICS = ("optim/kl_sample_train_v1", "optim/kl_sample_train_v2")


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

    from ..query.guard import quiet_sqlglot

    try:
        with quiet_sqlglot():
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


RuleLike = Union[Rule, str]
