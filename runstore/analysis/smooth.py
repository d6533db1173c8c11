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
exponent, as TensorBoard counts only finite ones (tests/test_analysis_smooth.py holds polars
to a direct implementation of the formula and to TensorBoard's loop).

Non-finite points (NaN, ±Infinity, null) neither move the average nor count in its
exponent. The smoothed value at such a point is the last smoothed value (carried), and null
before the run's first finite point. (TensorBoard draws the raw non-finite value there, a gap
in the smoothed line; carrying it keeps a run inside a smoothed band at a step where it logged
NaN, while the raw band leaves that run out and counts it.) Steps the run did not log do not
exist for it: the average runs over the points logged, whatever the steps between them (as in
TensorBoard and W&B's default EMA).

`ema(column, weight)` is that expression (use `.over(run)` on a frame sorted by run then step);
`smooth_frame(frame, weight, by=...)` sorts and adds the column; `check_weight` validates a
weight. polars is imported inside the functions.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import UsageError

if TYPE_CHECKING:
    import polars as pl


def check_weight(weight: Any, what: str = "smooth") -> float:
    """`weight` as a float in [0, 1); `UsageError` naming `what` otherwise.

    >>> check_weight(0.9), check_weight(0)
    (0.9, 0.0)
    """
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) \
            or not math.isfinite(weight) or not 0 <= weight < 1:
        raise UsageError(f"{what} is a smoothing weight in [0, 1) (0 keeps the raw values, "
                         f"0.9 smooths heavily), got {weight!r}")
    return float(weight)


def ema(column: "str | pl.Expr", weight: float) -> "pl.Expr":
    """The smoothed value of `column` (see the module), over the rows in their order.

    Apply it per run: `ema("value", 0.9).over("run_id")` on a frame sorted by run, then step.
    """
    import polars as pl

    weight = check_weight(weight)
    col = pl.col(column) if isinstance(column, str) else column
    finite = pl.when(col.is_finite()).then(col).otherwise(None)
    return finite.ewm_mean(alpha=1.0 - weight, adjust=True, ignore_nulls=True).forward_fill()


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
