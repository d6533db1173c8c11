"""Charts and the trace export over run trees written by hand with awkward content.

Each test writes the source files it needs (FORMATS.md's layout) and checks the chart or the
export against the values read back from those files here, never from the chart code: span
steps that are sparse, wall times that are not finite, trace slices that end before they
begin.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import runstore
from runstore.present import charts, trace_export as perfetto


def write_run(run: Path, metrics: list[dict[str, Any]], spans: list[dict[str, Any]] | None = None,
              trace: list[dict[str, Any]] | None = None) -> Path:
    """A run directory as the trainer writes it (json.dumps: NaN as a bare token)."""
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"learning_rate": 1e-4}, indent=2))
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
    if spans is not None:
        (run / "timing_spans.jsonl").write_text("".join(json.dumps(s) + "\n" for s in spans))
    if trace is not None:
        (run / "trace_events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in trace))
    return run


def ingested(root: Path, where: Path) -> runstore.Store:
    store = runstore.open(where)
    store.ingest([root], on_warning=lambda text: None)
    return store


def span_file(run: Path) -> dict[int, list[dict[str, Any]]]:
    """step → spans, read back from timing_spans.jsonl."""
    out: dict[int, list[dict[str, Any]]] = {}
    for line in (run / "timing_spans.jsonl").read_text().splitlines():
        row = json.loads(line)
        out[row["step"]] = row["spans"]
    return out


def test_share_bars_average_consecutive_span_steps_when_steps_are_sparse(tmp_path: Path) -> None:
    """Spans logged every 10th step, 1,001 times: past MAX_BARS span steps the bars average
    consecutive *span steps* (by position), as the subtitle says, whatever the step numbers."""
    steps = list(range(0, 10_010, 10))
    run = write_run(
        tmp_path / "runs" / "sparse",
        [{"step": s, "time/total": 1.0} for s in range(steps[-1] + 1)],
        [{"step": s, "spans": [{"name": "work", "duration": 0.75 if i % 2 else 0.25,
                                "wall_start": 0.0, "wall_end": 0.5}]}
         for i, s in enumerate(steps)])
    store = ingested(tmp_path / "runs", tmp_path / "store")
    fig = store.plot_spans("sparse")
    per_step = sorted((s, spans[0]["duration"] / 1.0) for s, spans in span_file(run).items())
    width = math.ceil(len(per_step) / charts.MAX_BARS)
    want = [(per_step[i][0], sum(v for _, v in per_step[i:i + width])
             / len(per_step[i:i + width])) for i in range(0, len(per_step), width)]
    (bars,) = [t for t in fig.data if t.meta["kind"] == "share"]
    assert len(bars.x) <= charts.MAX_BARS
    assert [int(x) for x in bars.x] == [s for s, _ in want]
    assert [round(float(y), 12) for y in bars.y] == [round(v, 12) for _, v in want]
    assert f"bars average every {width} consecutive steps" in fig.layout.title.subtitle.text
