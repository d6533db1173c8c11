"""A command prints plain rows and writes Parquet from Arrow: both say the same thing.

Read commands print `query.rows.Rows` (no pyarrow at start-up) and build an Arrow table only
for a Parquet file (`cli.common.to_parquet`). Each command here writes its answer both ways
from the demo store, and the two must hold the same columns and values: the Parquet file read
back with pyarrow against the JSON printed from plain rows (`runs -o FILE.parquet` once
failed here: plain rows have no Arrow schema).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from runstore.cli import main

RUN = "gsm8k_tool_rl/sweep/lr_1e-3/seed_0"
OTHER = "gsm8k_tool_rl/sweep/lr_3e-4/seed_0"


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


@pytest.mark.parametrize("args", [
    ["runs"],
    ["runs", "--columns", "all"],
    ["keys"],
    ["keys", "--like", "reward", "--runs", "math_rl_sweep/*"],
    ["diff", RUN, OTHER],
    ["diff", RUN, OTHER, "dpo/*", "--all"],
    ["diff", "dpo/*", "--all"],
], ids=" ".join)
def test_parquet_and_printed_rows_agree(shared_demo_store: Path, tmp_path: Path,
                                        args: list[str]) -> None:
    base = ["--store", str(shared_demo_store), *args]
    printed = CliRunner().invoke(main, [*base, "-F", "json"])
    assert printed.exit_code == 0, printed.output
    target = tmp_path / "out.parquet"
    written = CliRunner().invoke(main, [*base, "-o", str(target)])
    assert written.exit_code == 0, written.output
    table = pq.read_table(target)
    rows = json.loads(printed.stdout)
    assert rows, args
    assert table.num_rows == len(rows)
    assert table.column_names == list(rows[0])
    for got, want in zip(table.to_pylist(), rows):
        assert all(same(got[c], want[c]) for c in table.column_names), (got, want)

