"""Rule text: the one grammar of every health rule written as text, read by one scanner.

Contract: `read(text)` reads one rule written as

    METRIC OP NUMBER   or   NUMBER OP METRIC       a threshold rule, OP one of > >= < <=
    drop(METRIC) OP NUMBER                         trend rules, OP one of > >=; an optional
    rise(METRIC) OP NUMBER                         second argument is the smoothing weight:
    stale OP NUMBER                                drop(METRIC, 0.8) > 0.2

and returns what is written (`Written`: kind, metric, weight, op, value), without judging the
values (rules.py's models do: a weight in [0, 1), a positive ratio, ...). A number on the left
of a threshold rule reads the other way round (`0.05 > entropy` is `entropy < 0.05`).
Anything else is a `UsageError`: `cannot read rule '…' at column N: why. HINT`, with the
column (1-based) of the mistake and the hint of the rule's kind (`THRESHOLD_HINT`,
`TREND_HINT`). Text is a trend rule when it starts with `drop(` or `rise(` (any case), or is
`stale` followed by a comparison (`is_trend`); a metric named `drop`, `rise` or `stale` is
written in quotes.

METRIC is bare — a run of characters other than whitespace, quotes, brackets, braces,
commas, semicolons and `<>=!` (`time/sample_async:total`, `env/all/reward/total`) — or
quoted, `"a b"` or `'a b'` with a quote doubled inside. NUMBER is a decimal number, with any
signs and parentheses around it (`0.05`, `-1e-3`, `.5`, `(2)`, `-(2)`). `quoted(metric)`
writes a metric back as rule text, bare when it reads back as itself; `number(value)` a value as people
write it (`5`, `0.01`, `1e-05`).

One scanner rather than a parser generator or SQL's tokenizer: the rules are one line of a
handful of tokens, and the messages name the mistake in the rule's own terms; lark costs
more to import than a check of threshold rules spends in all (docs/architecture.md,
docs/benchmarks.md), and sqlglot's DuckDB tokenizer, which this replaces, more still.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from ..errors import UsageError

Kind = Literal["threshold", "drop", "rise", "stale"]
THRESHOLD_OPS = (">", ">=", "<", "<=")
TREND_OPS = (">", ">=")
THRESHOLD_HINT = ('a rule is METRIC OP NUMBER with OP one of > >= < <=, e.g. "optim/entropy < '
                  '0.05"; double-quote a metric name that holds spaces, quotes, brackets or '
                  'commas')
TREND_HINT = ("trend rules are drop(METRIC) > X, rise(METRIC) > X (optionally with a smoothing "
              "weight: drop(METRIC, 0.8) > X) and stale > MINUTES")
NOT_BARE = frozenset("\"'`()[]{},;<>=!")
MAX_NESTING = 64  # parentheses around a number

# One token per match: whitespace, a quoted name (closed or not), a comparison, one of
# ( ) , ; or another bracket, or a bare run.
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<quoted>"(?:[^"]|"")*"|'(?:[^']|'')*')
  | (?P<open_quote>["'])
  | (?P<op>[<>=!]+)
  | (?P<lparen>\()
  | (?P<rparen>\))
  | (?P<comma>,)
  | (?P<semi>;)
  | (?P<other>[\[\]{}`])
  | (?P<word>[^\s"'`()\[\]{},;<>=!]+)
""", re.VERBOSE)
# ASCII digits only: Python's \d and float() also read other scripts' digits ("١" is 1).
_DECIMAL = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)


@dataclass(frozen=True)
class Token:
    kind: str  # a group name of _TOKEN
    text: str
    start: int  # offset in the rule text


@dataclass(frozen=True)
class Written:
    """A rule as written: `metric` is None for `stale`, `weight` None when not written."""

    kind: Kind
    metric: str | None
    op: str
    value: float
    weight: float | None = None


def tokens(text: str) -> list[Token]:
    """The tokens of `text` (whitespace left out); an unclosed quote is one `open_quote`
    token, after which nothing is read."""
    out = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or "other"
        if kind != "space":
            out.append(Token(kind, m.group(), m.start()))
        if kind == "open_quote":
            break
    return out


def is_trend(text: str) -> bool:
    """Whether `text` is written as a trend rule (see the module)."""
    return _trend_word(tokens(text)) is not None


def _trend_word(toks: list[Token]) -> str | None:
    if len(toks) < 2 or toks[0].kind != "word":
        return None
    word = toks[0].text.lower()
    if word in ("drop", "rise") and toks[1].kind == "lparen":
        return word
    if word == "stale" and toks[1].kind == "op":
        return word
    return None


class _Reader:
    """Reads one rule's text; `fail` words an error at a column."""

    def __init__(self, text: str):
        self.text = text
        self.toks = tokens(text)
        self.word = _trend_word(self.toks)
        # `stale` alone, or `drop x`, may be either kind: both hints.
        first = self.toks[0].text.lower() if self.toks and self.toks[0].kind == "word" else ""
        self.hint = (TREND_HINT if self.word else
                     f"{THRESHOLD_HINT}; {TREND_HINT}" if first in ("drop", "rise", "stale")
                     else THRESHOLD_HINT)

    def fail(self, why: str, at: int | None = None) -> UsageError:
        where = f" at column {at + 1}" if at is not None else ""
        return UsageError(f"cannot read rule {self.text!r}{where}: {why}. {self.hint}")

    def check_tokens(self) -> None:
        for t in self.toks:
            if t.kind == "open_quote":
                raise self.fail(f"unterminated string: the quote {t.text} is never closed",
                                t.start)
            if t.kind == "semi":
                raise self.fail("one rule per --rule, without ';'", t.start)

    def span(self, start: int, end: int) -> str:
        return self.text[start:end].strip()

    def number(self, start: int, end: int) -> float:
        """The number written in text[start:end]; an error naming it when it is not one."""
        value = self.number_or_none(start, end)
        if value is None and not self.span(start, end):
            raise self.fail("the number is missing", start)
        if value is None:
            raise self.fail(f"{self.span(start, end)!r} is not a number",
                            _first_visible(self.text, start, end))
        return value

    def number_or_none(self, start: int, end: int) -> float | None:
        try:
            return number_in(self.text[start:end])
        except UsageError as e:
            raise self.fail(str(e), _first_visible(self.text, start, end)) from None

    def metric(self, toks: list[Token], start: int, end: int, *,
               quote_hint: bool = False) -> str:
        """The metric written by `toks` (text[start:end]): one bare or quoted name."""
        if len(toks) == 1 and toks[0].kind == "word":
            return toks[0].text
        if len(toks) == 1 and toks[0].kind == "quoted" and len(toks[0].text) > 2:
            t = toks[0].text
            return t[1:-1].replace(t[0] * 2, t[0])
        hint = (" (quote a name that holds spaces, quotes, brackets or commas)"
                if quote_hint else "")
        raise self.fail(f"{self.span(start, end)!r} is not a metric name{hint}",
                        _first_visible(self.text, start, end))


def _first_visible(text: str, start: int, end: int) -> int:
    """The offset of the first non-space character of text[start:end] (start if none)."""
    stripped = len(text[start:end]) - len(text[start:end].lstrip())
    return start + stripped if start + stripped < end else start


def number_in(text: str) -> float | None:
    """The number `text` writes (signs and parentheses around a decimal), else None.
    `UsageError` when more than `MAX_NESTING` parentheses enclose it (as the SQL that a
    `--where` condition is read as: nothing that deep is a mistake worth reading).

    >>> number_in(" -(2) "), number_in("1e-3"), number_in(".5"), number_in("nan")
    (-2.0, 0.001, 0.5, None)
    """
    t, sign, depth = text.strip(), 1.0, 0
    while t:
        if t[0] in "+-":
            sign, t = (-sign if t[0] == "-" else sign), t[1:].strip()
        elif t[0] == "(" and t[-1] == ")":
            t, depth = t[1:-1].strip(), depth + 1
            if depth > MAX_NESTING:
                raise UsageError(f"the number nests too deeply (more than {MAX_NESTING} "
                                 "parentheses); write it plainly")
        else:
            break
    return sign * float(t) if _DECIMAL.fullmatch(t) else None


def read(text: str) -> Written:
    """`text` as the rule it writes (see the module); `UsageError` saying where it is not."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"empty rule: {THRESHOLD_HINT}")
    r = _Reader(text)
    r.check_tokens()
    written = _trend(r) if r.word else _threshold(r)
    if not math.isfinite(written.value):
        raise r.fail("the value must be a finite number")
    return written


def _threshold(r: _Reader) -> Written:
    ops = [t for t in r.toks if t.kind == "op"]
    if not ops:
        raise r.fail("there is no comparison")
    if len(ops) > 1:
        raise r.fail(f"there are {len(ops)} comparisons; give each rule its own --rule",
                     ops[1].start)
    cmp = ops[0]
    if cmp.text not in THRESHOLD_OPS:
        raise r.fail(f"{cmp.text!r} is not one of {' '.join(THRESHOLD_OPS)}", cmp.start)
    end = cmp.start + len(cmp.text)
    sides = [(0, cmp.start), (end, len(r.text))]
    if not all(r.span(*s) for s in sides):
        raise r.fail(f"{cmp.text} needs a metric on one side and a number on the other",
                     cmp.start)
    op = cmp.text
    numbers = [r.number_or_none(a, b) is not None for a, b in sides]
    if all(numbers):
        raise r.fail("both sides are numbers; one side must name a metric")
    metric_side, number_side = sides
    if numbers[0]:  # `0.05 > entropy` reads as `entropy < 0.05`
        metric_side, number_side = number_side, metric_side
        op = {">": "<", ">=": "<=", "<": ">", "<=": ">="}[op]
    value = r.number(*number_side)
    a, b = metric_side
    metric = r.metric([t for t in r.toks if a <= t.start < b], a, b)
    return Written("threshold", metric, op, value)


def _trend(r: _Reader) -> Written:
    toks, word = r.toks, r.word
    if word == "stale":
        return Written("stale", None, _trend_op(r, toks[1]), _value_after(r, toks[1]))
    depth, comma, close = 0, None, None
    for i, t in enumerate(toks[1:], start=1):
        if t.kind == "lparen":
            depth += 1
        elif t.kind == "rparen":
            depth -= 1
            if depth == 0:
                close = i
                break
        elif t.kind == "comma" and depth == 1 and comma is None:
            comma = i
    if close is None:
        raise r.fail(f"{word}( has no closing parenthesis", toks[1].start)
    inner_end = comma if comma is not None else close
    start, stop = toks[1].start + 1, toks[inner_end].start
    metric = r.metric(toks[2:inner_end], start, stop, quote_hint=True)
    weight = None
    if comma is not None:
        weight = r.number_or_none(toks[comma].start + 1, toks[close].start)
        if weight is None:
            raise r.fail("the second argument is the smoothing weight, a number in [0, 1)",
                         toks[comma].start + 1)
    if close + 1 >= len(toks) or toks[close + 1].kind != "op":
        at = toks[close + 1].start if close + 1 < len(toks) else len(r.text)
        raise r.fail(f"{word}(...) must be followed by > or >= and a number", at)
    cmp = toks[close + 1]
    return Written(word, metric, _trend_op(r, cmp), _value_after(r, cmp),  # type: ignore[arg-type]
                   weight)


def _trend_op(r: _Reader, cmp: Token) -> str:
    if cmp.text not in TREND_OPS:
        raise r.fail(f"{cmp.text!r}: trend rules fire above a value, so they take > or >=",
                     cmp.start)
    return cmp.text


def _value_after(r: _Reader, cmp: Token) -> float:
    return r.number(cmp.start + len(cmp.text), len(r.text))


def quoted(metric: str) -> str:
    """A metric as rule text: bare when it can be, else in double quotes.

    >>> quoted("env/all/reward/total"), quoted('a "b" c'), quoted("stale"), quoted("1e5")
    ('env/all/reward/total', '"a ""b"" c"', '"stale"', '"1e5"')
    """
    bare = (metric and not any(c.isspace() or c in NOT_BARE for c in metric)
            and metric.lower() != "stale" and number_in(metric) is None)
    return metric if bare else '"' + metric.replace('"', '""') + '"'


def number(value: float) -> str:
    """A value as people write it: 5, 0.01, 1e-05."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)
