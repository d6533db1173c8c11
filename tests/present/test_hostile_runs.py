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


def strict_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The export as a viewer reads it: strict JSON (no NaN or Infinity token)."""
    def refuse(token: str) -> Any:
        raise ValueError(f"not JSON: {token}")

    return json.loads(perfetto.dumps(events), parse_constant=refuse)


def test_spans_export_leaves_out_spans_without_finite_wall_times(tmp_path: Path) -> None:
    """A span whose wall_start or wall_end is NaN has no place on the timeline: it is left out
    (and counted), and never makes a step's slice empty or a `ts` a string."""
    nan = math.nan
    run = write_run(tmp_path / "runs" / "nan_walls",
                    [{"step": s, "time/total": 2.0} for s in (0, 1)], [
        {"step": 0, "spans": [
            {"name": "end_nan", "duration": 0.5, "wall_start": 0.0, "wall_end": nan},
            {"name": "start_nan", "duration": 0.5, "wall_start": nan, "wall_end": 0.5},
            {"name": "ok", "duration": 2.0, "wall_start": 0.0, "wall_end": 2.0}]},
        {"step": 1, "spans": [
            {"name": "ok1", "duration": 1.0, "wall_start": 0.25, "wall_end": 1.25}]}])
    store = ingested(tmp_path / "runs", tmp_path / "store")
    events = strict_events(store.trace("nan_walls"))
    body = [e for e in events if e["ph"] != "M"]
    assert all(isinstance(e["ts"], float | int) and isinstance(e["dur"], float | int)
               for e in body)
    # From the file: the finite spans, steps laid end to end by their finite extent.
    offset, want_steps, want_spans, left_out = 0.0, [], [], 0
    for step, spans in sorted(span_file(run).items()):
        placed = [s for s in spans
                  if math.isfinite(s["wall_start"]) and math.isfinite(s["wall_end"])]
        left_out += len(spans) - len(placed)
        extent = max([0.0] + [s["wall_end"] for s in placed]) * 1e6
        want_steps.append((f"step {step}", offset, extent))
        want_spans += [(s["name"], offset + s["wall_start"] * 1e6,
                        (s["wall_end"] - s["wall_start"]) * 1e6) for s in placed]
        offset += extent
    got_steps = sorted((e["name"], e["ts"], e["dur"]) for e in body if e["tid"] == 1)
    got_spans = sorted((e["name"], e["ts"], e["dur"]) for e in body if e["tid"] != 1)
    assert got_steps == sorted(want_steps)
    assert got_spans == sorted(want_spans)
    (process,) = [e["args"]["name"] for e in events if e["name"] == "process_name"]
    assert f"{left_out} spans without a finite wall time left out" in process


def test_spans_with_the_same_interval_take_lanes_in_the_order_the_record_lists_them(
        tmp_path: Path) -> None:
    """Concurrent calls of one span (one name, so neither nests in the other) over the same
    interval cannot share a lane: the call the timing record lists first takes the first
    lane, in every export. Their recorded durations tell them apart."""
    orders = {"first_long": [1.0, 0.9], "first_short": [0.9, 1.0]}
    for run, durations in orders.items():
        write_run(tmp_path / "runs" / run, [{"step": 0, "time/total": 1.0}],
                  [{"step": 0, "spans": [{"name": "policy_sample", "duration": d,
                                          "wall_start": 0.0, "wall_end": 1.0}
                                         for d in durations]}])
    store = ingested(tmp_path / "runs", tmp_path / "store")
    for run, durations in orders.items():
        events = store.trace(run)
        threads = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
        lanes = {threads[e["tid"]]: e["args"]["duration_s"]
                 for e in events if e["name"] == "policy_sample"}
        assert lanes == {"depth 0": durations[0], "depth 0 (lane 2)": durations[1]}, run


def test_trace_slice_that_ends_before_it_begins_has_no_negative_duration(tmp_path: Path) -> None:
    """An E event written with a smaller ts than its B (a clock that stepped back) pairs into a
    slice of negative length. The export writes it with `dur` 0 and keeps the recorded
    E - B in its args; every other slice keeps its recorded `ts` and `dur`."""
    def event(name: str, ph: str, ts: float, track: str) -> dict[str, Any]:
        return {"name": name, "ph": ph, "pid": 0, "tid": 7, "ts": ts,
                "args": {"track": track, "thread": "MainThread"}, "cat": "async"}

    run = write_run(tmp_path / "runs" / "backwards", [{"step": 0, "time/total": 1.0}], trace=[
        event("fine", "B", 100.0, "Task-1"), event("fine", "E", 140.0, "Task-1"),
        event("backwards", "B", 300.0, "Task-2"), event("backwards", "E", 250.5, "Task-2")])
    store = ingested(tmp_path / "runs", tmp_path / "store")
    events = strict_events(store.trace("backwards"))
    recorded: dict[str, list[float]] = {}
    for line in (run / "trace_events.jsonl").read_text().splitlines():
        e = json.loads(line)
        recorded.setdefault(e["name"], []).append(e["ts"])
    slices = {e["name"]: e for e in events if e["ph"] == "X"}
    assert set(slices) == set(recorded)
    assert all(e["dur"] >= 0 for e in slices.values())
    begin, end = recorded["fine"]
    assert (slices["fine"]["ts"], slices["fine"]["dur"]) == (begin, end - begin)
    assert "recorded_dur_us" not in slices["fine"].get("args", {})
    begin, end = recorded["backwards"]
    assert (slices["backwards"]["ts"], slices["backwards"]["dur"]) == (begin, 0)
    assert slices["backwards"]["args"]["recorded_dur_us"] == end - begin


def test_share_bars_of_steps_that_all_lack_a_duration_are_gaps(tmp_path: Path) -> None:
    """Averaged bars (past MAX_BARS span steps) over steps whose durations are all NaN are
    gaps, without a warning (the test suite turns warnings into errors); the others average
    the finite shares of their steps."""
    n = charts.MAX_BARS * 2
    run = write_run(
        tmp_path / "runs" / "nan_bars", [{"step": s, "time/total": 1.0} for s in range(n)],
        [{"step": s, "spans": [{"name": "a", "duration": math.nan if s < 10 or s == 11 else 0.5,
                                "wall_start": 0.0, "wall_end": 0.5}]} for s in range(n)])
    store = ingested(tmp_path / "runs", tmp_path / "store")
    (bars,) = [t for t in store.plot_spans("nan_bars").data if t.meta["kind"] == "share"]
    per_step = sorted((s, spans[0]["duration"]) for s, spans in span_file(run).items())
    width = math.ceil(len(per_step) / charts.MAX_BARS)
    want = []
    for i in range(0, len(per_step), width):
        finite = [v for _, v in per_step[i:i + width] if not math.isnan(v)]
        want.append(sum(finite) / len(finite) if finite else math.nan)
    got = [float(y) for y in bars.y]
    assert len(got) == len(want)
    assert [math.isnan(v) for v in got] == [math.isnan(v) for v in want]
    assert [round(v, 12) for v in got if not math.isnan(v)] == \
        [round(v, 12) for v in want if not math.isnan(v)]


def test_color_by_orders_numbers_by_value_with_nan_last(tmp_path: Path) -> None:
    """`color_by` over numbers puts them on the ordered scale in value order (legend order and
    viridis), whatever the order of the run names; a NaN value is not between two numbers but
    after them all."""
    values = {"a": 3e-4, "b": math.nan, "c": 1e-4, "d": 2e-4, "e": -math.inf}
    for name, lr in values.items():
        run = write_run(tmp_path / "runs" / name, [{"step": 0, "env/all/reward/total": 1.0}])
        (run / "config.json").write_text(json.dumps({"learning_rate": lr}, indent=2))
    store = ingested(tmp_path / "runs", tmp_path / "store")
    fig = store.plot_metric("env/all/reward/total", color_by="learning_rate")
    from_files = {name: json.loads((tmp_path / "runs" / name / "config.json").read_text())
                  ["learning_rate"] for name in values}
    want = sorted(from_files, key=lambda n: (math.isnan(from_files[n]), from_files[n]))
    got = sorted(fig.data, key=lambda t: t.legendrank)
    assert [t.meta["run_name"] for t in got] == want
    # The scale's colours run from viridis' dark end to its bright end in that order.
    brightness = [sum(int(c) for c in t.line.color[4:-1].split(",")) for t in got]
    assert brightness[0] < brightness[-2] and got[0].line.color == "rgb(68, 1, 84)"


def test_trace_step_window_is_found_past_a_span_without_finite_times(tmp_path: Path) -> None:
    """`trace(run, step=N)` finds step N's window from its timing spans; a span of the step
    whose duration and wall_end are NaN takes no part in the matching (it would make the
    anchor or the window's end NaN), so the step's slices are still found."""
    def pair(name: str, ts: float, dur: float) -> list[dict[str, Any]]:
        args = {"track": "Task-1", "thread": "MainThread"}
        return [{"name": name, "ph": ph, "pid": 0, "tid": 7, "ts": t, "args": args,
                 "cat": "async"} for ph, t in (("B", ts), ("E", ts + dur))]

    t0, t1 = 5_000_000.0, 20_000_000.0  # µs: where steps 0 and 1 start in the trace's clock
    trace = sorted(pair("train_step", t0, 2e6) + pair("forward", t0 + 5e5, 5e5)
                   + pair("train_step", t1, 3e6) + pair("forward", t1 + 1e6, 4e5),
                   key=lambda e: e["ts"])  # as written: in time order (a drop is a restart)
    nan = math.nan
    run = write_run(tmp_path / "runs" / "stepped",
                    [{"step": s, "time/total": 2.0} for s in (0, 1)], [
        {"step": 0, "spans": [
            {"name": "lost_clock", "duration": nan, "wall_start": 0.0, "wall_end": nan},
            {"name": "forward", "duration": 0.5, "wall_start": 0.5, "wall_end": 1.0},
            {"name": "train_step", "duration": 2.0, "wall_start": 0.0, "wall_end": 2.0}]},
        {"step": 1, "spans": [
            {"name": "forward", "duration": 0.4, "wall_start": 1.0, "wall_end": 1.4},
            {"name": "train_step", "duration": 3.0, "wall_start": 0.0, "wall_end": 3.0}]}],
        trace=trace)
    store = ingested(tmp_path / "runs", tmp_path / "store")
    events = strict_events(store.trace("stepped", step=0))
    begins = [json.loads(line) for line in (run / "trace_events.jsonl").read_text().splitlines()]
    want = sorted((e["name"], e["ts"]) for e in begins if e["ph"] == "B" and e["ts"] < t1)
    assert sorted((e["name"], e["ts"]) for e in events if e["ph"] == "X") == want


def test_report_takes_a_list_of_run_patterns_as_every_picture_does(tmp_path: Path) -> None:
    """`runs=` is a scope (a pattern or a list of them) for the report as for the charts: the
    report of two runs lists those two and names both patterns in its title."""
    import html
    import re

    for name, reward in (("a/x", 1.0), ("b/y", 2.0), ("c/z", 3.0)):
        write_run(tmp_path / "runs" / name, [{"step": 0, "env/all/reward/total": reward}])
    store = ingested(tmp_path / "runs", tmp_path / "store")
    text = store.report(tmp_path / "report.html", runs=["a/*", "c/z"]).read_text()
    runs_section = text.split('<section id="runs">', 1)[1].split("</section>", 1)[0]
    listed = [html.unescape(r) for r in re.findall(r'<tr data-run="([^"]*)"', runs_section)]
    on_disk = sorted(str(p.parent.relative_to(tmp_path / "runs"))
                     for p in (tmp_path / "runs").glob("*/*/metrics.jsonl"))
    assert listed == [n for n in on_disk if n.startswith("a/") or n == "c/z"]
    title = re.search(r"<title>(.*?)</title>", text).group(1)
    assert "a/*" in title and "c/z" in title


def test_an_empty_output_path_is_a_usage_error_naming_the_option(tmp_path: Path) -> None:
    """`-o ''` names no file: every picture command refuses it (exit 2, naming --output),
    rather than failing with "Is a directory" or writing to stdout instead."""
    from storekit import cli

    write_run(tmp_path / "runs" / "r", [{"step": s, "env/all/reward/total": 1.0,
                                         "optim/kl_sample_train_v1": 0.1} for s in range(3)],
              [{"step": 0, "spans": [{"name": "a", "duration": 1.0, "wall_start": 0.0,
                                      "wall_end": 1.0}]}])
    store = ingested(tmp_path / "runs", tmp_path / "store")
    for args in (["plot", "kl"], ["plot", "metric", "env/all/reward/total"],
                 ["plot", "rewards"], ["plot", "spans", "r"], ["report"], ["trace", "r"]):
        result = cli(store, *args, "-o", "")
        assert result.exit_code == 2, (args, result.output)
        assert "'--output'" in result.output and "empty" in result.output, result.output
        assert '"ph"' not in result.output  # nothing exported to stdout


def test_metric_keys_that_name_no_key_are_refused_alike_by_charts_and_history(
        tmp_path: Path) -> None:
    """`plot_metric` and `history` take keys by one rule: a key or a list of keys, each a
    string. None, a number or an empty list is a QueryError saying what a key is, never a
    TypeError; the key "" (a metrics.jsonl can log it) is looked up like any other."""
    import pytest

    from runstore.errors import QueryError, UnknownKey

    write_run(tmp_path / "runs" / "r", [{"step": 0, "loss": 1.0}, {"step": 1, "": 2.0}])
    store = ingested(tmp_path / "runs", tmp_path / "store")
    for bad in (None, 5, [], ["loss", None]):
        for draw in (store.plot_metric, store.history):
            with pytest.raises(QueryError, match="metric key") as caught:
                draw(bad)
            assert type(caught.value) is QueryError, (bad, draw, caught.value)
    for draw in (store.plot_metric, store.history):
        with pytest.raises(UnknownKey):
            draw("no such key")
        with pytest.raises(UnknownKey, match="no such key"):  # beside a key that has points
            draw(["loss", "no such key"])
    assert list(store.plot_metric("").data[0].y) == [2.0]
    assert store.history("")["value"].to_list() == [2.0]
