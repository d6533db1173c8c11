"""The arguments tools share, typed once: what each means, its bounds and examples.

Contract: each name here is an `Annotated` type whose pydantic `Field` carries the
description, the examples and the bounds that the tool's published input schema shows
(MCP `tools/list`) and that the SDK validates a call against. A RUN names exactly one run and
a scope any number of runs, as everywhere in runstore (`analysis.runs`, the one RUN
resolution); `Limit`, `Offset` and `MaxChars` are the bounds of every answer
(`agents.answer`); an offset is a row number, so at most an int64's largest value (what polars
and DuckDB take). Nothing here imports more than pydantic, which the MCP SDK imports anyway.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

from pydantic import Field

from ..numbers import INT64_MAX, INT64_MIN
from .answer import MAX_CHARS, MIN_CHARS

# The time limit of user SQL (the sql tool's queries, list_runs' `where`) unless a call says.
DEFAULT_TIMEOUT_S = 30.0

RUN_TEXT = ("a run_id (or a unique prefix of 4+ characters), a run_name, the run's directory, "
            "or a GLOB matching one run_name (`*` matches `/` too)")

Run = Annotated[str, Field(
    description=f"One run: {RUN_TEXT}. `list_runs` lists them.",
    examples=["gsm8k_tool_rl/sweep/lr_1e-3/seed_0", "2cf4cfc1"])]

Runs = Annotated[Optional[Union[str, list[str]]], Field(
    description="Which runs (omit for every run): a GLOB over run_name (`*` matches `/` too), "
                "a run_name, a run_id or a unique prefix of one, a run's directory, or a list "
                "of these (their union).",
    examples=["math_rl_sweep/*", ["gsm8k_tool_rl/sweep/lr_1e-3/seed_0", "sl/*"]])]

Offset = Annotated[int, Field(
    ge=0, le=INT64_MAX,
    description="Skip this many rows first. A cut answer ends with a notice saying which offset "
                "continues it.", examples=[0, 50])]

MaxChars = Annotated[Optional[int], Field(
    ge=MIN_CHARS, le=MAX_CHARS,
    description="Most characters in the answer (default: the server's, 16000 unless "
                "`runstore mcp --max-chars` says otherwise). A cut answer says where it "
                "stopped and how to ask for the rest.", examples=[8000])]

TextFormat = Annotated[Literal["markdown", "csv"], Field(
    description="Tables as markdown (six significant digits; a text cell over 200 characters "
                "cut with …) or as CSV with a header line (every digit, every character). NaN "
                "and ±Infinity are written as text either way.")]


def limit(default: int, most: int, what: str = "rows") -> object:
    """The row cap of one tool: `default` rows unless asked, at most `most`."""
    return Annotated[int, Field(ge=1, le=most,
                                description=f"Most {what} in this answer (1 to {most}).",
                                examples=[default])]


Since = Annotated[Optional[int], Field(
    ge=INT64_MIN, le=INT64_MAX, description="Ignore steps before this one.", examples=[20])]
