"""Small pieces the toolboxes share: a frame as a page, the x axes, one-run headers.

Contract: `page(frame, offset, limit)` is a polars frame's rows `offset..offset+limit` as an
Arrow table with the `Page` that says how many there are in all; `X` is the type of an x-axis
argument (the axes `Store.history` and `Store.compare` take); `run_header(run)` names a
resolved run as every answer does: its label and run_id; `said(value)` is an argument as an
answer's title repeats it (its repr, cut to `SAID` characters, so a long one does not crowd
the answer out of its character cap); `cut(text, most)` is how either is shortened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, Optional

from pydantic import Field

from ..answer import Page

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from ...store.questions import Run

X = Annotated[Literal["step", "time", "tokens", "cost"], Field(
    description="The x axis: `step`; `time`, wall seconds since the run's first step (summed "
                "`time/total`); `tokens` and `cost`, what the run had spent by the step "
                "(cumulative sampled + trained tokens, cumulative USD: the tokens/ and cost/ "
                "keys tinker-cookbook 0.6 logs; steps without them have no point).")]

Smooth = Annotated[Optional[float], Field(
    ge=0, lt=1, description="Smoothing weight in [0, 1): the debiased exponential moving "
                            "average TensorBoard and W&B draw (0.9 smooths heavily); omit "
                            "for raw values.", examples=[0.9])]


def page(frame: "pl.DataFrame", offset: int, limit: int) -> tuple["pa.Table", Page]:
    """Rows `offset..offset+limit` of `frame` as Arrow, and their `Page`."""
    return frame.slice(offset, limit).to_arrow(), Page(offset, limit, frame.height)


def run_header(run: "Run") -> str:
    return f"{run.label} (run_id {run.run_id})"


SAID = 80  # characters of an argument an answer's title repeats


def said(value: object) -> str:
    return cut(repr(value), SAID)


def cut(text: str, most: int) -> str:
    """`text`, or its first `most - 1` characters and `…`."""
    return text if len(text) <= most else text[:most - 1] + "…"
