"""Smoothing as TensorBoard and W&B draw it: the debiased exponential moving average.

Contract: for a weight `W` in [0, 1) and one run's points x_1, x_2, ... in step order, the
smoothed value at point t is

    s_t = sum_{i<=t} W^(k_t - k_i) x_i / sum_{i<=t} W^(k_t - k_i)    over the finite x_i only,

where k_i counts the finite points up to i. That is TensorBoard's smoothing
(`last = W*last + (1-W)*x; s = last / (1 - W^k)`, k the finite points so far): W = 0 gives
the raw values, W = 0.9 smooths heavily (a point's weight halves every ~6.6 points), and the
first value is the first finite point itself (the debiasing). It is exactly polars'
`ewm_mean(alpha=1 - W, adjust=True, ignore_nulls=True)` over the finite values with nulls in
place of the others: with `adjust=True` polars weights point i by (1 - alpha)^(t-i) = W^(t-i)
and divides by the sum of the weights; `ignore_nulls=True` counts only non-null points in the
exponent, as TensorBoard counts only finite ones (tests/analysis/test_analysis_smooth.py holds polars
to a direct implementation of the formula and to TensorBoard's loop).

The smoothed value is finite whenever the points are: it is a weighted average of them, and
it is computed so that no step of it overflows (`[1.7e308, -1.7e308, ...]` smooths to
finite values, so `drop` rules keep judging such a run). Non-finite points (NaN, ±Infinity,
null) neither move the average nor count in its exponent. The smoothed value at such a point is the last smoothed value (carried), and null
before the run's first finite point. (TensorBoard draws the raw non-finite value there, a gap
in the smoothed line; carrying it keeps a run inside a smoothed band at a step where it logged
NaN, while the raw band leaves that run out and counts it.) Steps the run did not log do not
exist for it: the average runs over the points logged, whatever the steps between them (as in
TensorBoard and W&B's default EMA).

`ema(column, weight)` is that expression (use `.over(run)` on a frame sorted by run then step);
`smooth_frame(frame, weight, by=...)` sorts and adds the column; `check_weight` validates a
weight (the one check of `compare`, `plot … --smooth`, the UI and trend rules: a whole number
of steps, what `plot --smooth N` once took, is refused with the weight to write instead,
`steps_weight(N)`). This is runstore's one smoothing: every chart, band and rule that smooths
calls `ema`. polars is imported inside the functions.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

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


def ema(column: "str | pl.Expr", weight: float) -> "pl.Expr":
    """The smoothed value of `column` (see the module), over the rows in their order.

    Apply it per run: `ema("value", 0.9).over("run_id")` on a frame sorted by run, then step.
    """
    import polars as pl

    weight = check_weight(weight)
    col = pl.col(column) if isinstance(column, str) else column
    finite = pl.when(col.is_finite()).then(col).otherwise(None)
    # polars updates the average as m + (x - m) * a, and x - m of 1.7e308 and -1.7e308
    # overflows: values that large are averaged at a quarter (exact: a power of two) and
    # scaled back. An average is no larger than the largest value; held there (polars'
    # rounding can pass it by an ulp), it stays finite when scaled back.
    largest = finite.abs().max()
    scale = pl.when(largest >= 2.0 ** 1022).then(0.25).otherwise(1.0)
    smoothed = (finite * scale).ewm_mean(alpha=1.0 - weight, adjust=True, ignore_nulls=True)
    bound = largest * scale
    return (smoothed.clip(-bound, bound) / scale).forward_fill()


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
