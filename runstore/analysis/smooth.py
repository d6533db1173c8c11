"""Smoothing as TensorBoard and W&B draw it: the debiased exponential moving average.

Contract: for a weight `W` in [0, 1) and one run's points x_1, x_2, ... in step order, the
smoothed value at point t is

    s_t = sum_{i<=t} W^(k_t - k_i) x_i / sum_{i<=t} W^(k_t - k_i)    over the finite x_i only,

where k_i counts the finite points up to i. That is TensorBoard's smoothing
(`last = W*last + (1-W)*x; s = last / (1 - W^k)`, k the finite points so far): W = 0 gives
the raw values, W = 0.9 smooths heavily (a point's weight halves every ~6.6 points), and the
first value is the first finite point itself (the debiasing). It equals polars'
`ewm_mean(alpha=1 - W, adjust=True, ignore_nulls=True)` over the finite values with nulls in
place of the others: with `adjust=True` polars weights point i by (1 - alpha)^(t-i) = W^(t-i)
and divides by the sum of the weights; `ignore_nulls=True` counts only non-null points in the
exponent, as TensorBoard counts only finite ones.

The smoothed value is finite whenever the points are: it is a weighted average of them, and
it is computed so that no step of it overflows (`[1.7e308, -1.7e308, ...]` smooths to
finite values, so `drop` rules keep judging such a run). Non-finite points (NaN, ±Infinity,
null) neither move the average nor count in its exponent. The smoothed value at such a point is the last smoothed value (carried), and null
before the run's first finite point. (TensorBoard draws the raw non-finite value there, a gap
in the smoothed line; carrying it keeps a run inside a smoothed band at a step where it logged
NaN, while the raw band leaves that run out and counts it.) Steps the run did not log do not
exist for it: the average runs over the points logged, whatever the steps between them (as in
TensorBoard and W&B's default EMA).

`smoothed(values, weight)` is the one computation, over one run's values as plain Python
floats, step for step as polars' `ewm_mean(alpha=1 - W, adjust=True)` computes the same
average (the mean moves by the new point's share of `x - mean`; values of 2^1022 or more,
where `x - mean` could overflow, are averaged at a quarter, exact, and scaled back, the
average held within the largest value).
What reads rows it already fetched (trend rules, `runstore check`) calls it and imports no
polars. `ema(column, weight)` is the same computation as a polars expression (it runs
`smoothed` over each group's values: use `.over(run)` on a frame sorted by run then step);
`smooth_frame(frame, weight, by=...)` sorts and adds the column. `check_weight` validates a
weight (the one check of `compare`, `plot … --smooth`, the UI and trend rules: a whole number
of steps, what `plot --smooth N` once took, is refused with the weight to write instead,
`steps_weight(N)`). This is runstore's one smoothing: every chart, band and rule that smooths
calls `smoothed`, through `ema` where it holds a polars frame. polars is imported inside the
functions. (polars' own `ewm_mean(alpha=1 - W, adjust=True, ignore_nulls=True)` over the
finite values gives the same numbers, to the bit: tests/analysis/test_analysis_smooth.py holds
`smoothed`, `ema`, that call, TensorBoard's loop and the closed formula to one another.)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..errors import UsageError

if TYPE_CHECKING:
    import polars as pl


def check_weight(weight: Any, what: str = "smooth") -> float:
    """`weight` as a float in [0, 1); `UsageError` naming `what` otherwise. A whole number of
    1 or more is what `--smooth N` (an N-step average) used to take: the error says which
    weight is about the same average, (N - 1) / (N + 1).

    >>> check_weight(0.9), check_weight(0)
    (0.9, 0.0)
    >>> check_weight(10)
    Traceback (most recent call last):
    ...
    runstore.errors.UsageError: smooth is a smoothing weight in [0, 1) (0 keeps the raw values, 0.9 smooths heavily), got 10: a number of steps is no longer taken; for about a 10-step average write 0.82 ((N - 1) / (N + 1))
    """
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) \
            or not math.isfinite(weight) or not 0 <= weight < 1:
        hint = ""
        if not isinstance(weight, bool) and isinstance(weight, (int, float)) \
                and math.isfinite(weight) and weight >= 1 and float(weight).is_integer():
            steps = int(weight)
            hint = (f": a number of steps is no longer taken; for about a {steps}-step "
                    f"average write {steps_weight(steps):g} ((N - 1) / (N + 1))")
        raise UsageError(f"{what} is a smoothing weight in [0, 1) (0 keeps the raw values, "
                         f"0.9 smooths heavily), got {weight!r}{hint}")
    return float(weight)


def steps_weight(steps: int) -> float:
    """The weight whose EMA averages about as many points as an N-step EMA (alpha = 2 / (N +
    1), so W = 1 - alpha), rounded to two decimals.

    >>> steps_weight(10), steps_weight(1), steps_weight(20)
    (0.82, 0.0, 0.9)
    """
    return round((steps - 1) / (steps + 1), 2)


def smoothed(values: Iterable[float | None], weight: float) -> list[float | None]:
    """The smoothed value (see the module) at each of one run's points, in their order: None
    before the first finite point, the last smoothed value carried over a non-finite one.

    >>> [round(v, 6) for v in smoothed([1.0, 3.0, float("nan"), 5.0], 0.5)]
    [1.0, 2.333333, 2.333333, 3.857143]

    ((0.5*1 + 3) / 1.5, carried over the NaN, then (0.25*1 + 0.5*3 + 5) / 1.75.)
    >>> smoothed([None, float("inf"), 2.0], 0.9)
    [None, None, 2.0]
    """
    w = check_weight(weight)
    xs = list(values)
    inf = math.inf
    finite = [x for x in xs if x is not None and -inf < x < inf]
    largest = max(max(finite), -min(finite)) if finite else 0.0
    # Values this large are averaged at a quarter (exact: a power of two) and scaled back.
    scale = 0.25 if largest >= 2.0 ** 1022 else 1.0
    bound = largest * scale
    # polars' ewm_mean(alpha=1 - W, adjust=True) step by step: the weight of the points
    # before is `old` (decayed by 1 - alpha), the new point's 1, and the mean moves by the new
    # point's share of (x - mean): the same numbers as that call, to the bit.
    decay = 1.0 - (1.0 - w)
    old, mean, current = 1.0, 0.0, None
    out: list[float | None] = []
    append = out.append
    for x in xs:
        if x is not None and -inf < x < inf:  # finite (NaN compares false)
            x *= scale
            if current is None:
                mean = x
            else:
                old *= decay
                if mean != x:
                    mean = mean + (x - mean) * (1.0 / (old + 1.0))
                old += 1.0
            # An average is no larger than the largest value; held there (rounding can pass
            # it by an ulp), it stays finite when scaled back.
            current = (bound if mean > bound else -bound if mean < -bound else mean) / scale
        append(current)
    return out


def ema(column: "str | pl.Expr", weight: float) -> "pl.Expr":
    """`smoothed` of `column` as a polars expression, over the rows in their order.

    Apply it per run: `ema("value", 0.9).over("run_id")` on a frame sorted by run, then step.
    """
    import polars as pl

    weight = check_weight(weight)
    col = pl.col(column) if isinstance(column, str) else column

    def run(values: "pl.Series") -> "pl.Series":
        return pl.Series(values.name, smoothed(values.to_list(), weight), dtype=pl.Float64)

    return col.cast(pl.Float64).map_batches(run, return_dtype=pl.Float64)


def smooth_frame(frame: "pl.DataFrame", weight: float, *, by: str | Sequence[str] = "run_id",
                 order: str = "step", column: str = "value",
                 name: str = "smoothed") -> "pl.DataFrame":
    """`frame` sorted by `by` then `order`, with the smoothed `column` (per `by`) as `name`.

    >>> import polars as pl
    >>> df = pl.DataFrame({"run_id": ["a", "a", "a"], "step": [2, 0, 1],
    ...                    "value": [3.0, 1.0, float("nan")]})
    >>> [round(v, 6) for v in smooth_frame(df, 0.5)["smoothed"]]  # (0.5*1 + 3) / 1.5 at step 2
    [1.0, 1.0, 2.333333]
    """
    keys = [by] if isinstance(by, str) else list(by)
    df = frame.sort([*keys, order])
    return df.with_columns(ema(column, weight).over(keys).alias(name))
