"""Ingest behaviour: counts, idempotence, incremental reads, rewrites, discovery, status, bad input.

Every expected value is computed from the source files by `oracle` (plain Python, independent
of runstore) or written here as a literal; nothing is taken from runstore's own output.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import pytest

import oracle
from filekit import jsonl_lines, metric_rows_in_store, oracle_metric_rows, write_lines
import runstore
from storekit import DAY, age_tree, set_old_mtime
from runstore import demo
from runstore.storage.layout import GROUP_ROWS_BY, group_rows
from runstore.storage.snapshot import table_files

TABLES = ("runs", "config", "metrics_raw", "checkpoints", "trajectories", "rollout_steps",
          "conversations", "messages", "spans", "trace_slices", "samples", "capture_events",
          "run_logs")
# An eval store's tables: keyed by the store, not by a run.
EVAL_TABLES = ("eval_runs", "eval_results", "eval_trajectories")


# --------------------------------------------------------------------------- helpers


def counts(store: runstore.Store, run_id: str | None = None) -> dict[str, int]:
    """Rows per table, for the whole store or one run."""
    where = " where run_id = $rid" if run_id else ""
    tables = TABLES if run_id else TABLES + EVAL_TABLES
    q = " union all ".join(f"select '{t}' as t, count(*) as n from {t}{where}" for t in tables)
    rows = store.arrow(q, {"rid": run_id} if run_id else None).to_pylist()
    return {r["t"]: r["n"] for r in rows}


def expected(root: Path, *, one_run: bool = False) -> dict[str, int]:
    """oracle.expected_counts with a 0 for every table it has no rows for: the tables
    `counts` covers, for the whole store or (`one_run`, `counts(store, run_id)`) one run."""
    e = oracle.expected_counts(root)
    tables = TABLES if one_run else TABLES + EVAL_TABLES
    return {t: e.get(t, 0) for t in tables}


def run_id(store: runstore.Store, run_dir: Path) -> str:
    rows = store.arrow("select run_id from runs where run_path = $p",
                       {"p": str(run_dir.resolve())}).to_pylist()
    assert len(rows) == 1, f"expected one run at {run_dir}, got {rows}"
    return rows[0]["run_id"]


def runs_by_name(store: runstore.Store) -> dict[str, dict[str, Any]]:
    return {r["run_name"]: r for r in store.arrow("select * from runs").to_pylist()}


def manifests(store_path: Path) -> list[str]:
    return sorted(n for n in os.listdir(store_path / "_runstore" / "manifests")
                  if n.endswith(".json"))


def names_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in oracle.run_dirs(root)}


def same_value(want: Any, value: float | None, value_str: str | None) -> bool:
    """Does a stored (value, value_str) pair hold the JSON value `want`? NaN equals NaN."""
    if isinstance(want, bool):
        return value is None and value_str == ("true" if want else "false")
    if isinstance(want, (int, float)):
        if value_str is not None or value is None:
            return False
        want = float(want)
        return value == want or (math.isnan(want) and math.isnan(value))
    if isinstance(want, str):
        return value is None and value_str == want
    return value is None and value_str is not None and json.loads(value_str) == want


def assert_live_metrics(store: runstore.Store, root: Path) -> None:
    """The `metrics` view equals oracle.live_metrics for every run under root."""
    got: dict[tuple[str, int, str], tuple[Any, Any]] = {}
    for r in store.arrow("select r.run_path, m.step, m.key, m.value, m.value_str "
                         "from metrics m join runs r using (run_id)").to_pylist():
        got[(r["run_path"], r["step"], r["key"])] = (r["value"], r["value_str"])
    want: dict[tuple[str, int, str], Any] = {}
    for run in oracle.run_dirs(root):
        for (step, key), v in oracle.live_metrics(run).items():
            want[(str(run.resolve()), step, key)] = v
    assert got.keys() == want.keys(), (
        f"only in store: {sorted(got.keys() - want.keys())[:5]}, "
        f"only in files: {sorted(want.keys() - got.keys())[:5]}")
    bad = [(k, want[k], got[k]) for k in want if not same_value(want[k], *got[k])]
    assert not bad, f"{len(bad)} live values differ, e.g. {bad[:5]}"


def warned_files(warnings: list[str]) -> set[str]:
    """`file` or `file:line` part of each "file:line: message" warning."""
    return {w.split(": ", 1)[0] for w in warnings}


def expected_warnings(root: Path) -> set[str]:
    """Problems a reader must report, found independently: undecodable complete lines of the
    JSON-lines files (as `run/file:line`) and logtree / config files that are not JSON."""
    out: set[str] = set()
    for run in oracle.run_dirs(root):
        name = run.relative_to(root).as_posix()
        jsonl_files = [run / n for n in ("metrics.jsonl", "checkpoints.jsonl",
                                         "timing_spans.jsonl", "trace_events.jsonl")]
        jsonl_files += [f for f in oracle.per_iteration_files(run)
                        if f.name.endswith("_rollout_summaries.jsonl")]
        for f in jsonl_files:
            if not f.is_file():
                continue
            metrics = f.name == "metrics.jsonl"
            good = {line for line, o in oracle.complete_lines(f) if isinstance(o, dict)
                    and (not metrics or oracle.good_step(o))}
            for i, raw in enumerate(jsonl_lines(f), start=1):
                if raw.strip() and i not in good:
                    out.add(f"{name}/{f.relative_to(run).as_posix()}:{i}")
        whole = [f for f in oracle.per_iteration_files(run) if f.name.endswith("_logtree.json")]
        whole += [run / "config.json"] if (run / "config.json").is_file() else []
        for f in whole:
            try:
                json.loads(f.read_bytes().decode("utf-8"))
            except ValueError:
                out.add(f"{name}/{f.relative_to(run).as_posix()}")
    return out


def make_run(root: Path, name: str, files: dict[str, bytes | str]) -> Path:
    run = root / name
    for rel, content in files.items():
        p = run / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.encode() if isinstance(content, str) else content)
    age_tree(run)
    return run


RL_CONFIG = json.dumps({"loss_fn": "importance_sampling", "model_name": "Qwen/Qwen3-8B",
                        "learning_rate": 1e-4}, indent=2)

@pytest.fixture(scope="module")
def demo_ingested(tmp_path_factory: pytest.TempPathFactory, _demo_template: Path):
    base = tmp_path_factory.mktemp("demo_ingested")
    tree = base / "runs"
    shutil.copytree(_demo_template, tree, symlinks=True)
    specs = demo.default_specs()
    store = runstore.open(base / "store")
    report = store.ingest([tree])
    return tree, store, report, specs


@pytest.fixture(scope="module")
def awkward_ingested(tmp_path_factory: pytest.TempPathFactory, _awkward_template: Path):
    base = tmp_path_factory.mktemp("awkward_ingested")
    tree = base / "runs"
    shutil.copytree(_awkward_template, tree, symlinks=True)
    specs = demo.awkward_specs()
    store = runstore.open(base / "store")
    report = store.ingest([tree])
    return tree, store, report, specs


@pytest.fixture(params=["demo", "awkward"])
def ingested(request: pytest.FixtureRequest):
    return request.getfixturevalue(f"{request.param}_ingested")


# --------------------------------------------------------------------------- counts


def test_counts_equal_oracle(ingested) -> None:
    tree, store, report, _ = ingested
    assert counts(store) == expected(tree)
    assert report.runs_new == len(oracle.run_dirs(tree))
    assert report.runs_updated == report.runs_unchanged == report.runs_missing == 0


def test_rows_added_equal_oracle(ingested) -> None:
    tree, _, report, _ = ingested
    assert {t: n for t, n in report.rows_added.items() if n} == \
        {t: n for t, n in expected(tree).items() if n}


def test_counts_per_run_equal_oracle(ingested) -> None:
    tree, store, _, _ = ingested
    q = " union all ".join(f"select '{t}' as t, r.run_path, count(*) as n from {t} as x "
                           f"join runs as r on x.run_id = r.run_id group by r.run_path"
                           for t in TABLES)
    got: dict[str, dict[str, int]] = {}
    for r in store.arrow(q).to_pylist():
        got.setdefault(r["run_path"], {})[r["t"]] = r["n"]
    want = {str(run.resolve()): {t: n for t, n in expected(run, one_run=True).items() if n}
            for run in oracle.run_dirs(tree)}
    assert got == want


def test_warnings_name_exactly_the_bad_files(ingested) -> None:
    tree, _, report, _ = ingested
    assert warned_files(report.warnings) == expected_warnings(tree)


def test_awkward_tree_has_idle_runs_and_bad_logtrees(awkward_ingested) -> None:
    # Guards the tests around against a tree in which nothing is awkward.
    tree, store, report, _ = awkward_ingested
    assert len({f for f in expected_warnings(tree) if f.endswith("_logtree.json")}) == 2
    assert len(report.warnings) == len(set(report.warnings))
    assert {r["status"] for r in runs_by_name(store).values()} == {"completed", "idle"}


def test_metrics_view_equals_live_metrics(ingested) -> None:
    tree, store, _, _ = ingested
    assert_live_metrics(store, tree)


def test_metrics_raw_files_hold_rows_grouped_by_key(ingested) -> None:
    # The layout that lets a `key IN (...)` scan skip pages (GROUP_ROWS_BY).
    import pyarrow.parquet as pq

    _, store, _, _ = ingested
    files = table_files(store.path, store.manifest(), "metrics_raw")
    assert files
    for f in files:
        keys = pq.read_table(f, columns=["key"]).column("key").to_pylist()
        assert keys == sorted(keys), f


def test_metrics_raw_row_groups_hold_at_most_group_rows(small_tree: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Row groups are what DuckDB skips by min/max and splits among threads (layout.py): the
    # writer caps them at GROUP_ROWS rows (made small here, so the small tree needs several).
    import pyarrow.parquet as pq

    from runstore.storage import layout

    monkeypatch.setattr(layout, "GROUP_ROWS", 256)
    store = runstore.open(tmp_path / "store")
    store.ingest([small_tree])
    sizes = [pq.ParquetFile(f).metadata.row_group(i).num_rows
             for f in table_files(store.path, store.manifest(), "metrics_raw")
             for i in range(pq.ParquetFile(f).metadata.num_row_groups)]
    assert len(sizes) > 1 and max(sizes) <= 256, sizes
    assert_live_metrics(store, small_tree)


@pytest.mark.parametrize("keys", [["b"] * 90 + ["a"] * 80 + ["c"] * 120 + ["a"] * 95,  # runs
                                  (["b"] * 120 + [None] * 130 + ["a"] * 140) * 2,  # nulls: last
                                  ["b", "a", "c"] * 300])  # one key per row: sorted instead
def test_group_rows_is_a_stable_sort_by_the_column(keys: list[str]) -> None:
    import pyarrow as pa

    parts = [pa.table({"key": pa.array(keys[i:i + 250], pa.string()),
                       "n": list(range(i, i + len(keys[i:i + 250])))})
             for i in range(0, len(keys), 250)]
    got = group_rows(pa.concat_tables(parts), "key")
    assert got.column("key").num_chunks == 1
    assert list(zip(got["key"].to_pylist(), got["n"].to_pylist())) == \
        sorted(zip(keys, range(len(keys))), key=lambda kn: (kn[0] is None, kn[0] or ""))


def test_kind_and_layout(ingested) -> None:
    tree, store, _, _ = ingested
    got = {n: (r["kind"], r["layout"]) for n, r in runs_by_name(store).items()}
    want = {run.relative_to(tree).as_posix(): (oracle.run_kind(run), oracle.layout_of(run))
            for run in oracle.run_dirs(tree)}
    assert got == want


def test_kinds_and_layouts_cover_every_value(demo_ingested, awkward_ingested) -> None:
    seen = set()
    for _, store, _, _ in (demo_ingested, awkward_ingested):
        seen |= {(r["kind"], r["layout"]) for r in runs_by_name(store).values()}
    assert {k for k, _ in seen} == {"rl", "sl", "dpo", "unknown"}
    assert {lay for _, lay in seen} == {"iteration_dirs", "flat", "none"}


def test_status_completed_or_idle(ingested) -> None:
    tree, store, _, _ = ingested
    got = {n: r["status"] for n, r in runs_by_name(store).items()}
    want = {run.relative_to(tree).as_posix():
            "completed" if oracle.has_final_checkpoint(run) else "idle"
            for run in oracle.run_dirs(tree)}
    assert got == want


def test_runs_columns_from_config(ingested) -> None:
    tree, store, _, _ = ingested
    rows = runs_by_name(store)
    for run in oracle.run_dirs(tree):
        row = rows[run.relative_to(tree).as_posix()]
        assert row["run_path"] == str(run.resolve())
        try:
            cfg = json.loads((run / "config.json").read_text())
        except (OSError, ValueError):
            cfg = {}
        assert row["model_name"] == cfg.get("model_name")
        assert row["learning_rate"] == cfg.get("learning_rate")
        steps = [s for s, _, _, _ in oracle.metric_rows(run / "metrics.jsonl")
                 if s is not None] if (run / "metrics.jsonl").is_file() else []
        assert row["last_step"] == (max(steps) if steps else None), run


# --------------------------------------------------------------------------- idempotence


def test_second_ingest_adds_nothing(ingested) -> None:
    tree, store, _, _ = ingested
    before = counts(store)
    n_manifests = manifests(store.path)
    report = store.ingest([tree])
    assert counts(store) == before == expected(tree)
    assert not any(report.rows_added.values()), report.rows_added
    assert report.runs_unchanged == len(oracle.run_dirs(tree))
    assert report.runs_new == report.runs_updated == report.runs_missing == 0
    assert report.warnings == []  # problems are reported once, when the file is read
    assert report.bytes_read == 0
    assert manifests(store.path) == n_manifests


def all_rows(store: runstore.Store) -> dict[str, list[str]]:
    """Every row of every table (but when it was written), as sorted reprs (NaN-safe)."""
    out = {}
    for t in TABLES:
        rows = store.arrow(f"select * exclude (ingested_at) from {t}" if t == "runs"
                           else f"select * from {t}").to_pylist()
        out[t] = sorted(repr(sorted(r.items())) for r in rows)
    return out


def test_read_ahead_and_background_commits_store_what_inline_does(
        awkward_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Batches of 2,000 rows: many snapshots, each written while the next batch is staged.
    monkeypatch.setenv("RUNSTORE_BATCH_ROWS", "2000")
    seen = {}
    for threads in ("0", "2"):
        monkeypatch.setenv("RUNSTORE_READ_THREADS", threads)
        store = runstore.open(tmp_path / f"store-{threads}")
        report = store.ingest([awkward_tree])
        seen[threads] = (all_rows(store), report.warnings, report.rows_added, report.snapshots)
    assert seen["0"][3] > 3
    assert seen["2"] == seen["0"]


def test_small_tables_are_compacted_as_an_ingest_publishes(
        awkward_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ingest that publishes many snapshots leaves a table under `SMALL_TABLE_BYTES` with
    at most `SMALL_COMPACT_FILES` files, as the Delta logs themselves list them; with the size
    rule off every table keeps a file per snapshot that wrote it; both stores hold the same
    rows."""
    import pyarrow as pa
    from deltalake import DeltaTable

    from runstore.storage import writer

    monkeypatch.setenv("RUNSTORE_BATCH_ROWS", "2000")
    monkeypatch.delenv("RUNSTORE_COMPACT_FILES", raising=False)
    seen = {}
    for rule in ("on", "off"):
        if rule == "off":
            monkeypatch.setattr(writer, "SMALL_TABLE_BYTES", 0)
        store = runstore.open(tmp_path / f"store-{rule}")
        report = store.ingest([awkward_tree])
        assert report.snapshots > writer.SMALL_COMPACT_FILES + 1
        files = {}
        for name in store.manifest().tables:
            path = tmp_path / f"store-{rule}" / "tables" / name
            if (path / "_delta_log").exists():
                actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
                actions = actions.to_pydict()
                files[name] = (len(actions["path"]), sum(actions["size_bytes"]))
        seen[rule] = (all_rows(store), files)
    assert seen["on"][0] == seen["off"][0]
    small = {n for n, (_, size) in seen["off"][1].items() if size < (1 << 20)}
    assert {"runs", "metric_keys", "checkpoints"} <= small
    for name in small:
        assert seen["on"][1][name][0] <= writer.SMALL_COMPACT_FILES, name
    # Without the rule the small tables had more files than that (a file per snapshot).
    assert all(seen["off"][1][n][0] > writer.SMALL_COMPACT_FILES for n in ("runs", "metric_keys"))


def test_ingest_leaves_the_cycle_collector_as_it_found_it(small_tree: Path, store_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # The ingest pauses it (docs/benchmarks.md); a caller's setting must survive, errors too.
    import gc

    from runstore.ingest import job as job_mod

    was = gc.isenabled()
    seen: list[bool] = []
    fail = []
    real = job_mod.Job.run

    def run(self, *args):
        seen.append(gc.isenabled())
        if fail:
            raise RuntimeError("stop")
        return real(self, *args)

    monkeypatch.setattr(job_mod.Job, "run", run)
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            runstore.open(store_path).ingest([small_tree])
            assert gc.isenabled() is enabled
        gc.enable()
        fail.append(True)
        with pytest.raises(RuntimeError, match="stop"):
            runstore.open(store_path.with_name("other")).ingest([small_tree])
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert seen and not any(seen)  # paused while the runs were staged


# --------------------------------------------------------------------------- incremental


def test_append_reads_only_new_bytes(demo_tree: Path, store_path: Path) -> None:
    store = runstore.open(store_path)
    store.ingest([demo_tree])
    runs = [demo_tree / "math_rl_sweep/qwen3-8b/lr_1e-4",  # flat, older era
            demo_tree / "gsm8k_tool_rl/sweep/lr_3e-4/seed_1",  # resumed, traced
            demo_tree / "sl/tulu3_qwen3-8b_lr2e-4",
            demo_tree / "dpo/hh_llama-3.1-8b_beta0.1"]
    size_before = sum(s for _, s, _ in oracle.fingerprint(demo_tree).values())
    want_before = expected(demo_tree)
    for run in runs:
        demo.append_steps(run, 10)
    appended = sum(s for _, s, _ in oracle.fingerprint(demo_tree).values()) - size_before
    want_after = expected(demo_tree)
    assert appended > 0 and want_after["metrics_raw"] > want_before["metrics_raw"]

    report = store.ingest([demo_tree])
    assert appended <= report.bytes_read <= appended + 1024
    grown = {t: want_after[t] - want_before[t] for t in TABLES if want_after[t] != want_before[t]}
    assert {t: n for t, n in report.rows_added.items() if n and t != "runs"} == grown
    assert counts(store) == want_after
    assert report.runs_updated == len(runs)
    assert report.runs_unchanged == len(oracle.run_dirs(demo_tree)) - len(runs)
    assert report.warnings == []
    assert_live_metrics(store, demo_tree)
    rows = runs_by_name(store)
    for run in runs:
        steps = [s for s, *_ in oracle.metric_rows(run / "metrics.jsonl") if s is not None]
        assert rows[run.relative_to(demo_tree).as_posix()]["last_step"] == max(steps)


def test_cut_last_line_waits_for_its_newline(small_tree: Path, store_path: Path) -> None:
    run = small_tree / "a/rl_flat"
    metrics = run / "metrics.jsonl"
    store = runstore.open(store_path)
    store.ingest([small_tree])
    rid = run_id(store, run)
    before = counts(store, rid)["metrics_raw"]

    line = json.dumps({"step": 99, "env/all/reward/total": 0.75, "optim/lr": 1e-4,
                       "note": "done", "flag": True, "gone": None}).encode()
    half = len(line) // 2
    with open(metrics, "ab") as f:
        f.write(line[:half])
    report = store.ingest([small_tree])
    assert counts(store, rid)["metrics_raw"] == before
    assert report.warnings == []
    assert not report.rows_added.get("metrics_raw")

    with open(metrics, "ab") as f:
        f.write(line[half:] + b"\n")
    report = store.ingest([small_tree])
    assert report.warnings == []
    assert report.rows_added.get("metrics_raw") == 4  # five keys besides step, one of them null
    assert metric_rows_in_store(store, rid) == oracle_metric_rows(metrics)
    n_lines = len(jsonl_lines(metrics))
    got = store.arrow("select key, value, value_str, seq from metrics_raw "
                      "where run_id = $rid and step = 99 order by key", {"rid": rid}).to_pylist()
    assert got == [
        {"key": "env/all/reward/total", "value": 0.75, "value_str": None, "seq": n_lines},
        {"key": "flag", "value": None, "value_str": "true", "seq": n_lines},
        {"key": "note", "value": None, "value_str": "done", "seq": n_lines},
        {"key": "optim/lr", "value": 1e-4, "value_str": None, "seq": n_lines},
    ]


def test_generated_cut_line_is_not_stored(awkward_ingested) -> None:
    tree, store, report, _ = awkward_ingested
    run = tree / "awkward/cut_last_line"
    data = (run / "metrics.jsonl").read_bytes()
    assert not data.endswith(b"\n")  # the generator did cut it
    rows = metric_rows_in_store(store, run_id(store, run))
    assert rows == oracle_metric_rows(run / "metrics.jsonl")
    assert not any("cut_last_line/metrics.jsonl" in w for w in report.warnings)


def test_bad_line_in_appended_part_names_its_true_line(tmp_path: Path, store_path: Path) -> None:
    root = tmp_path / "runs"
    lines = [json.dumps({"step": i, "loss": 1.0 / (i + 1)}).encode() for i in range(5)]
    run = make_run(root, "r", {"config.json": RL_CONFIG, "metrics.jsonl": b"".join(
        line + b"\n" for line in lines)})
    store = runstore.open(store_path)
    assert store.ingest([root]).warnings == []
    with open(run / "metrics.jsonl", "ab") as f:
        f.write(b"{not json at all\n" + json.dumps({"step": 5, "loss": 0.1}).encode() + b"\n")
    report = store.ingest([root])
    assert len(report.warnings) == 1 and report.warnings[0].startswith("r/metrics.jsonl:6: ")
    rid = run_id(store, run)
    assert store.arrow("select seq from metrics_raw where run_id = $rid and step = 5",
                       {"rid": rid}).to_pylist() == [{"seq": 7}]
    assert metric_rows_in_store(store, rid) == oracle_metric_rows(run / "metrics.jsonl")


def test_trace_read_in_chunks_pairs_like_whole(small_tree: Path, store_path: Path) -> None:
    run = small_tree / "a/rl_dirs"
    trace = run / "trace_events.jsonl"
    lines = jsonl_lines(trace)
    store = runstore.open(store_path)
    cuts = [len(lines) // 3, 2 * len(lines) // 3, len(lines)]
    open_midway = 0
    write_lines(trace, lines[: cuts[0]])
    for i, cut in enumerate(cuts):
        if i:
            with open(trace, "ab") as f:
                f.write(b"".join(line + b"\n" for line in lines[cuts[i - 1]:cut]))
        store.ingest([small_tree])
        got = sorted(((r["name"], r["start_us"], r["dur_us"]) for r in store.arrow(
            "select name, start_us, dur_us from trace_slices where run_id = $rid",
            {"rid": run_id(store, run)}).to_pylist()),
            key=lambda r: (r[1], r[0], -1 if r[2] is None else r[2]))
        want = oracle.trace_slices(trace)
        assert len(got) == len(want)
        assert [(n, s, d is None) for n, s, d in got] == [(n, s, d is None) for n, s, d in want]
        assert all(d1 is None or abs(d1 - d2) < 1e-3 for (_, _, d1), (_, _, d2) in zip(got, want))
        open_midway += sum(d is None for _, _, d in want) if cut < len(lines) else 0
    assert open_midway > 0  # some B events waited for their E across reads
    assert all(d is not None for _, _, d in oracle.trace_slices(trace))


def test_repeated_timing_step_replaces_its_spans(small_tree: Path, store_path: Path) -> None:
    run = small_tree / "a/rl_flat"
    spans = run / "timing_spans.jsonl"
    store = runstore.open(store_path)
    store.ingest([small_tree])
    last = json.loads(jsonl_lines(spans)[-1])
    # A resumed run times the last step again, with fewer spans: only the later record is live.
    again = {"step": last["step"], "spans": last["spans"][:2]}
    with open(spans, "ab") as f:
        f.write(json.dumps(again).encode() + b"\n")
    store.ingest([small_tree])
    rid = run_id(store, run)
    assert counts(store, rid) == expected(run, one_run=True)
    got = store.arrow("select name, duration_s from spans where run_id = $rid and step = $s "
                      "order by span_idx", {"rid": rid, "s": last["step"]}).to_pylist()
    assert got == [{"name": x["name"], "duration_s": x["duration"]} for x in again["spans"]]


def test_appended_checkpoint(small_tree: Path, store_path: Path) -> None:
    run = small_tree / "b/c/sl"
    store = runstore.open(store_path)
    store.ingest([small_tree])
    with open(run / "checkpoints.jsonl", "ab") as f:
        f.write(json.dumps({"name": "000013", "batch": 13, "epoch": 1,
                            "state_path": "tinker://x/weights/000013",
                            "elapsed_tokens": 5}).encode() + b"\n")
    report = store.ingest([small_tree])
    assert report.rows_added.get("checkpoints") == 1
    assert counts(store) == expected(small_tree)
    got = store.arrow("select name, batch, epoch, state_path, sampler_path, extra from "
                      "checkpoints where run_id = $rid and name = '000013'",
                      {"rid": run_id(store, run)}).to_pylist()
    assert len(got) == 1 and json.loads(got[0].pop("extra")) == {"elapsed_tokens": 5}
    assert got == [{"name": "000013", "batch": 13, "epoch": 1,
                    "state_path": "tinker://x/weights/000013", "sampler_path": None}]


# --------------------------------------------------------------------------- rewritten append-only files


def test_truncated_metrics_are_reread(small_tree: Path, store_path: Path) -> None:
    run = small_tree / "a/rl_dirs"
    metrics = run / "metrics.jsonl"
    store = runstore.open(store_path)
    store.ingest([small_tree])
    # 0.6.x resume: the file is cut back to the checkpoint's step, then the new process appends.
    lines = jsonl_lines(metrics)
    k = 5
    new = lines[:k] + [json.dumps({"step": k + i, "env/all/reward/total": 0.5 + i,
                                   "optim/lr": 2e-4}).encode() for i in range(3)]
    write_lines(metrics, new)
    assert metrics.stat().st_size < sum(len(x) + 1 for x in lines)
    report = store.ingest([small_tree])
    rid = run_id(store, run)
    assert metric_rows_in_store(store, rid) == oracle_metric_rows(metrics)
    assert counts(store) == expected(small_tree)
    assert report.warnings == []
    assert_live_metrics(store, small_tree)
    # and the next append after the truncation is read incrementally, without duplicates
    with open(metrics, "ab") as f:
        f.write(json.dumps({"step": k + 3, "optim/lr": 3e-4}).encode() + b"\n")
    report = store.ingest([small_tree])
    assert report.rows_added.get("metrics_raw") == 1
    assert metric_rows_in_store(store, rid) == oracle_metric_rows(metrics)


def test_rewritten_larger_metrics_are_reread(small_tree: Path, store_path: Path) -> None:
    run = small_tree / "a/rl_flat"
    metrics = run / "metrics.jsonl"
    store = runstore.open(store_path)
    store.ingest([small_tree])
    old = metrics.read_bytes()
    lines = jsonl_lines(metrics)
    # Same steps, every line rewritten with one more key: bigger, and different before the
    # old end, so only the ledger's tail check can tell it is not an append.
    new = [line[:-1] + b', "extra/key": 1}' for line in lines]
    write_lines(metrics, new)
    data = metrics.read_bytes()
    assert len(data) > len(old) and data[len(old) - 64:len(old)] != old[-64:]
    report = store.ingest([small_tree])
    assert metric_rows_in_store(store, run_id(store, run)) == oracle_metric_rows(metrics)
    assert counts(store) == expected(small_tree)
    assert report.bytes_read >= len(data)  # read whole
    assert_live_metrics(store, small_tree)


def test_rewritten_same_size_metrics_are_reread(small_tree: Path, store_path: Path) -> None:
    """A resumed process re-logs the last step with other values of the same length: the file
    keeps its size, only its mtime and its last bytes tell it changed."""
    run = small_tree / "a/rl_flat"
    metrics = run / "metrics.jsonl"
    store = runstore.open(store_path)
    store.ingest([small_tree])
    old = metrics.read_bytes()
    mtime = metrics.stat().st_mtime_ns
    lines = jsonl_lines(metrics)
    last = json.loads(lines[-1])
    # The last finite float of the line: its bytes sit just before the old end of the file.
    key = [k for k, v in last.items() if isinstance(v, float) and math.isfinite(v)][-1]
    text = lines[-1].decode()
    old_repr = json.dumps(last[key])
    new_repr = ("9" if old_repr[0] != "9" else "8") + old_repr[1:]
    assert text.count(f'"{key}": {old_repr}') == 1
    lines[-1] = text.replace(f'"{key}": {old_repr}', f'"{key}": {new_repr}').encode()
    write_lines(metrics, lines)
    os.utime(metrics, ns=(mtime + 10**9, mtime + 10**9))
    assert len(metrics.read_bytes()) == len(old) and metrics.read_bytes() != old
    store.ingest([small_tree])
    assert metric_rows_in_store(store, run_id(store, run)) == oracle_metric_rows(metrics)
    assert_live_metrics(store, small_tree)


@pytest.mark.parametrize("name", ["checkpoints.jsonl", "timing_spans.jsonl",
                                  "trace_events.jsonl"])
def test_truncated_append_only_files_are_reread(small_tree: Path, store_path: Path,
                                                name: str) -> None:
    run = small_tree / "a/rl_dirs"
    store = runstore.open(store_path)
    store.ingest([small_tree])
    lines = jsonl_lines(run / name)
    write_lines(run / name, lines[: len(lines) // 2])
    store.ingest([small_tree])
    assert counts(store, run_id(store, run)) == expected(run, one_run=True)
    assert counts(store) == expected(small_tree)


# --------------------------------------------------------------------------- write-once files


def test_rewritten_rollouts_replace_their_rows(small_tree: Path, store_path: Path) -> None:
    run = small_tree / "a/rl_dirs"
    store = runstore.open(store_path)
    store.ingest([small_tree])
    f = run / "iteration_000003" / "train_rollout_summaries.jsonl"
    lines = jsonl_lines(f)
    assert len(lines) > 2
    write_lines(f, lines[:2])
    report = store.ingest([small_tree])
    rid = run_id(store, run)
    assert counts(store, rid) == expected(run, one_run=True)
    assert report.rows_added.get("trajectories") == 2
    got = store.arrow("select iteration, count(*) as n from trajectories where run_id = $rid "
                      "and split = 'train' group by 1 order by 1", {"rid": rid}).to_pylist()
    want: dict[int, int] = {}
    for p in oracle.per_iteration_files(run):
        if p.name == "train_rollout_summaries.jsonl":
            for _, o in oracle.complete_lines(p):
                want[o["iteration"]] = want.get(o["iteration"], 0) + 1
    assert got == [{"iteration": i, "n": n} for i, n in sorted(want.items())]


def test_rewritten_config_replaces_its_rows(small_tree: Path, store_path: Path) -> None:
    run = small_tree / "b/c/sl"
    store = runstore.open(store_path)
    store.ingest([small_tree])
    cfg = json.loads((run / "config.json").read_text())
    cfg["learning_rate"] = 0.125
    cfg["dataset_builder"] = {"new": {"nested": [1, 2]}}
    del cfg["lora_rank"]
    (run / "config.json").write_text(json.dumps(cfg, indent=2))
    set_old_mtime(run / "config.json", DAY - 60)
    store.ingest([small_tree])
    rid = run_id(store, run)
    got = {r["key"]: r["value"] for r in store.arrow(
        "select key, value from config where run_id = $rid", {"rid": rid}).to_pylist()}
    assert {k: json.loads(v) for k, v in got.items()} == oracle.flatten(cfg)
    row = store.arrow("select learning_rate, kind from runs where run_id = $rid",
                      {"rid": rid}).to_pylist()
    assert row == [{"learning_rate": 0.125, "kind": oracle.kind_of(cfg)}]
    assert counts(store) == expected(small_tree)


def test_rewritten_logtree_replaces_its_rows(small_tree: Path, store_path: Path) -> None:
    run = small_tree / "a/rl_dirs"
    store = runstore.open(store_path)
    store.ingest([small_tree])
    f = run / "iteration_000000" / "train_logtree.json"
    assert oracle.conversations_in(f) > 0
    whole = f.read_bytes()
    before = expected(run, one_run=True)
    f.write_bytes(whole[:1000])  # cut while being rewritten: nothing in it reads
    report = store.ingest([small_tree])
    # The rows of the version read before stay until the file reads again (a reader must not
    # lose rows to a file caught mid-write), and the file is named.
    assert counts(store, run_id(store, run)) == before
    assert warned_files(report.warnings) == {"a/rl_dirs/iteration_000000/train_logtree.json"}
    # Rewritten to something that reads: its rows replace the earlier ones.
    f.write_bytes(whole.replace(b'"assistant"', b'"user"'))
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    report = store.ingest([small_tree])
    assert report.warnings == []
    assert counts(store, run_id(store, run)) == expected(run, one_run=True)
    rid = run_id(store, run)
    assert store.sql("select count(*) as n from messages m join conversations c using "
                     "(conversation_id) where m.role = 'assistant' and c.split = 'train' and "
                     "c.iteration = 0 and c.run_id = $rid", params={"rid": rid})["n"][0] == 0


# --------------------------------------------------------------------------- discovery


def test_decoys_are_not_runs(ingested) -> None:
    tree, store, _, specs = ingested
    names = set(runs_by_name(store))
    assert names == names_under(tree)
    decoys = [s.name for s in specs if not s.is_run]
    assert decoys
    for d in decoys:
        assert not any(n == d or n.startswith(d + "/") for n in names), d


def test_runs_nested_two_to_four_deep(awkward_ingested, demo_ingested) -> None:
    names = set(runs_by_name(awkward_ingested[1])) | set(runs_by_name(demo_ingested[1]))
    assert {"awkward/shallow", "awkward/deep/nested/run", "math_rl_sweep/qwen3-8b/lr_1e-4",
            "gsm8k_tool_rl/sweep/lr_1e-4/seed_0"} <= names
    assert {n.count("/") + 1 for n in names} == {2, 3, 4}


def test_subdirectory_reingest_keeps_runs_and_names(demo_tree: Path, store_path: Path) -> None:
    store = runstore.open(store_path)
    store.ingest([demo_tree])
    before = store.arrow("select run_id, run_name from runs order by 1").to_pylist()
    for sub in ("gsm8k_tool_rl/sweep", "gsm8k_tool_rl/sweep/lr_1e-4/seed_0"):
        report = store.ingest([demo_tree / sub])
        assert report.runs_new == 0 and report.runs_missing == 0
        assert report.runs_unchanged == len(oracle.run_dirs(demo_tree / sub))
        assert store.arrow("select run_id, run_name from runs order by 1").to_pylist() == before
    assert counts(store) == expected(demo_tree)


def test_symlink_inside_tree_is_not_a_second_run(small_tree: Path, store_path: Path) -> None:
    # The link sorts before the real directory: the run must still be named by its real path.
    (small_tree / "0_link").symlink_to(small_tree / "b" / "c" / "sl", target_is_directory=True)
    (small_tree / "b" / "loop").symlink_to(small_tree, target_is_directory=True)
    store = runstore.open(store_path)
    store.ingest([small_tree])
    assert set(runs_by_name(store)) == names_under(small_tree) == {"a/rl_dirs", "a/rl_flat",
                                                                   "b/c/sl"}
    assert counts(store) == expected(small_tree)


def test_symlink_from_outside_is_not_a_second_run(small_tree: Path, tmp_path: Path,
                                                  store_path: Path) -> None:
    store = runstore.open(store_path)
    store.ingest([small_tree])
    link = tmp_path / "elsewhere"
    link.symlink_to(small_tree / "a", target_is_directory=True)
    report = store.ingest([link])
    assert report.runs_new == 0 and report.runs_unchanged == 2
    report = store.ingest([link / "rl_flat"])
    assert report.runs_new == 0 and report.runs_unchanged == 1
    assert set(runs_by_name(store)) == {"a/rl_dirs", "a/rl_flat", "b/c/sl"}
    assert counts(store) == expected(small_tree)


def test_run_directory_given_directly(small_tree: Path, store_path: Path) -> None:
    run = small_tree / "a" / "rl_dirs"
    store = runstore.open(store_path)
    report = store.ingest([run])
    assert report.runs_new == 1
    assert set(runs_by_name(store)) == {"rl_dirs"}  # the run's own directory name
    assert counts(store) == expected(run)


def test_several_paths_in_one_ingest(small_tree: Path, store_path: Path) -> None:
    store = runstore.open(store_path)
    report = store.ingest([small_tree / "a", small_tree / "b", small_tree / "a" / "rl_flat"])
    assert report.runs_new == 3
    assert set(runs_by_name(store)) == {"rl_dirs", "rl_flat", "c/sl"}
    assert counts(store) == expected(small_tree)


# --------------------------------------------------------------------------- status


def drop_final_checkpoint(run: Path) -> None:
    ck = run / "checkpoints.jsonl"
    write_lines(ck, [line for line in jsonl_lines(ck) if json.loads(line).get("name") != "final"])


def status_now(store: runstore.Store) -> dict[str, str]:
    """`run_status.status` (derived when queried) by run name."""
    return dict(store.sql("select run_name, status from run_status").rows())


def test_status_running_while_files_change(small_tree: Path, store_path: Path) -> None:
    run = small_tree / "b/c/sl"  # an SL run: no progress/done_frac to say it completed
    drop_final_checkpoint(run)
    age_tree(small_tree)
    store = runstore.open(store_path)
    store.ingest([small_tree])
    assert runs_by_name(store)["b/c/sl"]["status"] == "idle"
    os.utime(run / "metrics.jsonl")  # now: a trainer just wrote to it
    report = store.ingest([small_tree])
    assert report.runs_updated == 1 and report.runs_unchanged == 2
    assert runs_by_name(store)["b/c/sl"]["status"] == "running"
    assert status_now(store)["b/c/sl"] == "running"
    set_old_mtime(run / "metrics.jsonl", 3 * 60)  # quiet for three minutes
    store.ingest([small_tree])
    assert runs_by_name(store)["b/c/sl"]["status"] == "idle"
    assert counts(store) == expected(small_tree)


def test_final_checkpoint_beats_fresh_files(small_tree: Path, tmp_path: Path) -> None:
    """`cp -r` of finished runs gives every file a fresh mtime: still completed, not running."""
    copied = tmp_path / "copied"
    shutil.copytree(small_tree, copied, copy_function=shutil.copy)  # new mtimes, as cp -r
    assert all(time.time() - p.stat().st_mtime < 60 for p in copied.rglob("*.jsonl"))
    store = runstore.open(tmp_path / "copied_store")
    store.ingest([copied])
    finished = {oracle.run_name(copied, r) for r in oracle.run_dirs(copied)
                if oracle.has_final_checkpoint(r)}
    assert finished == {"a/rl_dirs", "a/rl_flat", "b/c/sl"}
    assert {n: r["status"] for n, r in runs_by_name(store).items()} == dict.fromkeys(
        finished, "completed")
    assert status_now(store) == dict.fromkeys(finished, "completed")


def test_status_derives_running_from_the_query_time(small_tree: Path, store_path: Path) -> None:
    """A run seen changing at ingest is `running` then, and `idle` once its last change is
    more than 120 s older than the query, with no ingest in between; the ingest and the view
    draw the line at the same age (one macro, `running_until`, for both)."""
    from runstore.ingest.run import ingest

    run = small_tree / "b/c/sl"
    drop_final_checkpoint(run)
    age_tree(small_tree)
    set_old_mtime(run / "metrics.jsonl", 200)
    store = runstore.open(store_path)
    ingest(store.path, [small_tree], now=time.time() - 150)  # the ingest saw a 50 s old change
    assert runs_by_name(store)["b/c/sl"]["status"] == "running"
    assert status_now(store)["b/c/sl"] == "idle"  # the query sees a 200 s old change
    assert dict(store.sql("select run_name, status from run_summary").rows())["b/c/sl"] == "idle"
    # The view's window is the ingest's: a change 110 s old is `running` to both, one 130 s
    # old `idle` to both.
    for age, want in ((110, "running"), (130, "idle")):
        set_old_mtime(run / "metrics.jsonl", age)
        ingest(store.path, [small_tree], now=time.time())
        assert runs_by_name(store)["b/c/sl"]["status"] == want, age
        assert status_now(store)["b/c/sl"] == want, age


def test_status_completed_when_done_frac_reaches_one(small_tree: Path, store_path: Path) -> None:
    rl = small_tree / "a/rl_flat"  # logs progress/done_frac, reaching 1.0 at its last step
    fracs = [v for _, k, v, _ in oracle.metric_rows(rl / "metrics.jsonl")
             if k == "progress/done_frac"]
    assert max(fracs) == 1.0
    drop_final_checkpoint(rl)
    other = small_tree / "a/rl_dirs"  # stopped early: done_frac below 1, then a NaN
    drop_final_checkpoint(other)
    lines = jsonl_lines(other / "metrics.jsonl")
    keep = [line for line in lines if json.loads(line).get("progress/done_frac", 0) < 0.5]
    write_lines(other / "metrics.jsonl",
                keep + [b'{"step": 999, "progress/done_frac": NaN}'])
    age_tree(small_tree)
    store = runstore.open(store_path)
    store.ingest([small_tree])
    # As of the ingest too: `runs.status` and `run_status` are one macro, `run_status_at`.
    assert {n: runs_by_name(store)[n]["status"] for n in ("a/rl_flat", "a/rl_dirs")} == {
        "a/rl_flat": "completed", "a/rl_dirs": "idle"}
    now = status_now(store)
    assert now["a/rl_flat"] == "completed" and now["a/rl_dirs"] == "idle"
    row = store.sql("select * from run_status where run_name = 'a/rl_flat'").to_dicts()[0]
    assert row["done_frac"] == 1.0 and row["final_checkpoint"] is False


def test_status_completed_needs_a_final_checkpoint(small_tree: Path, store_path: Path) -> None:
    run = small_tree / "b/c/sl"
    ck = run / "checkpoints.jsonl"
    lines = [line for line in jsonl_lines(ck) if json.loads(line).get("name") != "final"]
    write_lines(ck, lines)
    set_old_mtime(ck)
    store = runstore.open(store_path)
    store.ingest([small_tree])
    assert runs_by_name(store)["b/c/sl"]["status"] == "idle"
    # `final: true` without the name counts too
    with open(ck, "ab") as f:
        f.write(json.dumps({"name": "000099", "batch": 99, "final": True}).encode() + b"\n")
    set_old_mtime(ck)
    store.ingest([small_tree])
    assert runs_by_name(store)["b/c/sl"]["status"] == "completed"


def test_status_missing_keeps_rows(small_tree: Path, store_path: Path) -> None:
    store = runstore.open(store_path)
    store.ingest([small_tree])
    # An update first, so the `runs` table holds files rewritten by a Delta delete.
    with open(small_tree / "a/rl_flat/metrics.jsonl", "ab") as f:
        f.write(b'{"step": 100, "optim/lr": 0.0}\n')
    set_old_mtime(small_tree / "a/rl_flat/metrics.jsonl")
    assert store.ingest([small_tree]).runs_updated == 1
    before = counts(store)
    rid = run_id(store, small_tree / "a/rl_dirs")
    per_run = counts(store, rid)
    shutil.rmtree(small_tree / "a/rl_dirs")
    report = store.ingest([small_tree])
    assert report.runs_missing == 1
    rows = runs_by_name(store)
    assert rows["a/rl_dirs"]["status"] == "missing"
    assert rows["a/rl_flat"]["status"] == "completed"
    assert counts(store) == before and counts(store, rid) == per_run
    report = store.ingest([small_tree])  # reported once
    assert report.runs_missing == 0 and not any(report.rows_added.values())


# --------------------------------------------------------------------------- bad input


BAD_METRICS = [
    b'\xef\xbb\xbf{"step": 0, "a": 1.0, "s": "hello", "b": true, "n": null}\r',  # BOM, CRLF
    b'{"step": 1, "a": NaN, "i": Infinity, "j": -Infinity, "b": false}\r',
    b'this is garbage',  # line 3
    b'{"step": 3, "a": 2.5, "bad": "\xff\xfe"}',  # line 4: invalid UTF-8
    b'{"step": 4, "a": 3}',
    b'',
    b'{"a": 9, "note": "stepless"}',
    b'[1, 2]',  # line 8: not an object
    b'{"step": 8, "a": 4',  # line 9: cut, but followed by a newline
    b'{"step": 9, "big": 12345678901234567890, "nested": {"x": [1, 2]}}',
]


def test_bad_metrics_lines(tmp_path: Path, store_path: Path) -> None:
    root = tmp_path / "runs"
    run = make_run(root, "bad/run", {"config.json": RL_CONFIG,
                                     "metrics.jsonl": b"\n".join(BAD_METRICS) + b"\n"})
    store = runstore.open(store_path)
    report = store.ingest([root])
    assert warned_files(report.warnings) == {"bad/run/metrics.jsonl:3", "bad/run/metrics.jsonl:4",
                                             "bad/run/metrics.jsonl:8", "bad/run/metrics.jsonl:9"}
    assert warned_files(report.warnings) == expected_warnings(root)
    rid = run_id(store, run)
    assert counts(store, rid) == expected(run, one_run=True)
    got = {(r["step"], r["key"]): r for r in store.arrow(
        "select step, key, value, value_str, seq, isnan(value) as nan, isinf(value) as inf "
        "from metrics_raw where run_id = $rid", {"rid": rid}).to_pylist()}
    assert set(got) == {(0, "a"), (0, "s"), (0, "b"), (1, "a"), (1, "i"), (1, "j"), (1, "b"),
                        (4, "a"), (None, "a"), (None, "note"), (9, "big"), (9, "nested")}
    assert got[(0, "a")]["value"] == 1.0 and got[(0, "a")]["seq"] == 1
    assert (got[(0, "s")]["value"], got[(0, "s")]["value_str"]) == (None, "hello")
    assert (got[(0, "b")]["value"], got[(0, "b")]["value_str"]) == (None, "true")
    assert (got[(1, "b")]["value"], got[(1, "b")]["value_str"]) == (None, "false")
    assert got[(1, "a")]["nan"] is True and got[(1, "a")]["inf"] is False
    assert got[(1, "i")]["inf"] is True and got[(1, "i")]["value"] > 0
    assert got[(1, "j")]["inf"] is True and got[(1, "j")]["value"] < 0
    assert got[(4, "a")]["value"] == 3.0 and got[(4, "a")]["seq"] == 5
    assert got[(None, "note")]["value_str"] == "stepless" and got[(None, "a")]["seq"] == 7
    assert json.loads(got[(9, "nested")]["value_str"]) == {"x": [1, 2]}
    assert got[(9, "big")]["seq"] == 10
    # The `metrics` view leaves the step-less rows out.
    live = store.arrow("select step, key from metrics where run_id = $rid and step is null",
                       {"rid": rid}).to_pylist()
    assert live == []
    assert_live_metrics(store, root)


def test_empty_and_config_only_runs(awkward_ingested) -> None:
    tree, store, _, _ = awkward_ingested
    for name in ("awkward/config_only", "awkward/empty_metrics", "awkward/metrics_only"):
        run = tree / name
        assert counts(store, run_id(store, run)) == expected(run, one_run=True), name


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_unreadable_file_warns_and_the_rest_is_ingested(small_tree: Path, store_path: Path) -> None:
    f = small_tree / "a/rl_flat/checkpoints.jsonl"
    f.chmod(0)
    try:
        store = runstore.open(store_path)
        report = store.ingest([small_tree])
        assert any(w.startswith("a/rl_flat/checkpoints.jsonl") for w in report.warnings)
        want = expected(small_tree)
    finally:
        f.chmod(0o644)
    ck = oracle.file_rows(f)
    want["checkpoints"] -= ck
    assert counts(store) == want
    report = store.ingest([small_tree])  # readable again: picked up now
    assert report.rows_added.get("checkpoints") == ck


def test_names_that_are_not_utf8_are_skipped_by_name(small_tree: Path, store_path: Path) -> None:
    # A tree copied from a Latin-1 file system (or unpacked from such a tar) holds names that
    # are not UTF-8. The store keeps names as text, so such a run, or such a file of a good
    # run, cannot be stored: it is skipped with a warning naming it, and nothing else changes.
    store = runstore.open(store_path)
    store.ingest([small_tree])
    before = counts(store)
    bad_run = os.fsdecode(bytes(small_tree / "a") + b"/lr=\xe9")
    shutil.copytree(small_tree / "a/rl_flat", bad_run)
    capture = small_tree / "a/rl_flat/capture"
    capture.mkdir(exist_ok=True)
    line = {"kind": "train_op", "op": "optim_step", "status": "ok", "scope": {"run_attempt": 0}}
    (capture / os.fsdecode(b"s\xe9.jsonl")).write_text(json.dumps(line) + "\n")
    seen: list[str] = []
    report = store.ingest([small_tree], on_warning=seen.append)
    assert sorted(report.warnings) == [
        "a/lr=\\xe9: skipped: its name is not UTF-8 (rename it to ingest it)",
        "a/rl_flat/capture/s\\xe9.jsonl: skipped: its name is not UTF-8 (rename it to ingest it)",
    ]
    assert seen == report.warnings
    assert counts(store) == before
    assert store.arrow("select count(*) as n from runs").to_pylist() == \
        [{"n": len(oracle.run_dirs(small_tree)) - 1}]


def test_malformed_whole_files_warn(tmp_path: Path, store_path: Path) -> None:
    root = tmp_path / "runs"
    metrics = b'{"step": 0, "loss": 1.0}\n{"step": 1, "loss": 0.5}\n'
    rollout = json.dumps({"schema_version": 1, "split": "train", "iteration": 0, "group_idx": 0,
                          "traj_idx": 0, "tags": [], "sampling_client_step": 0,
                          "total_reward": 1.0, "final_reward": 0.0, "trajectory_metrics": {},
                          "steps": [{"step_idx": 0, "ob_len": 3, "ac_len": 4, "reward": 1.0,
                                     "episode_done": True, "metrics": {}, "logs": {}}],
                          "final_ob_len": 0})
    make_run(root, "x/cut_logtree", {
        "config.json": RL_CONFIG, "metrics.jsonl": metrics,
        "iteration_000000/train_logtree.json": '{"title": "RL Iteration 0", "root": {"tag": "di',
        "iteration_000000/train_rollout_summaries.jsonl": rollout + "\n",
    })
    make_run(root, "x/empty_logtree", {
        "config.json": RL_CONFIG, "metrics.jsonl": metrics,
        "train_iteration_000000_logtree.json": "",
        "train_iteration_000000_rollout_summaries.jsonl": rollout + "\n",
    })
    make_run(root, "x/list_logtree", {
        "config.json": RL_CONFIG, "metrics.jsonl": metrics,
        "iteration_000002/eval_test_logtree.json": "[1, 2, 3]",
    })
    make_run(root, "x/bad_config", {"config.json": '{"loss_fn": ', "metrics.jsonl": metrics})
    store = runstore.open(store_path)
    report = store.ingest([root])
    assert len(report.warnings) == len(set(report.warnings)), report.warnings
    assert warned_files(report.warnings) >= {
        "x/cut_logtree/iteration_000000/train_logtree.json",
        "x/empty_logtree/train_iteration_000000_logtree.json",
        "x/list_logtree/iteration_000002/eval_test_logtree.json",
        "x/bad_config/config.json",
    }
    assert counts(store) == expected(root)
    rows = runs_by_name(store)
    assert rows["x/bad_config"]["kind"] == "unknown"
    assert (rows["x/cut_logtree"]["layout"], rows["x/empty_logtree"]["layout"]) == \
        ("iteration_dirs", "flat")
    # The bad config is reported once: not again when only another file of the run changed.
    with open(root / "x/bad_config/metrics.jsonl", "ab") as f:
        f.write(b'{"step": 2, "loss": 0.25}\n')
    report = store.ingest([root])
    assert report.runs_updated == 1 and report.warnings == []


# --------------------------------------------------------------------------- sources untouched


def test_sources_unchanged_by_ingest(demo_tree: Path, store_path: Path) -> None:
    before = oracle.fingerprint(demo_tree)
    store = runstore.open(store_path)
    store.ingest([demo_tree])
    store.ingest([demo_tree])
    assert oracle.fingerprint(demo_tree) == before
    # No stray files (but the demo's own leftover of an interrupted atomic write, `.NAME.PID.tmp`).
    assert not any(p.name.startswith(".") and not p.name.endswith(".tmp")
                   for p in demo_tree.rglob("*"))


def test_ingest_of_a_read_only_tree(small_tree: Path, store_path: Path) -> None:
    before = oracle.fingerprint(small_tree)
    modes = {p: p.stat().st_mode for p in [small_tree, *small_tree.rglob("*")]}
    try:
        for p in modes:
            p.chmod(stat.S_IMODE(modes[p]) & ~0o222)
        store = runstore.open(store_path)
        report = store.ingest([small_tree])
        assert report.warnings == []
        assert counts(store) == expected(small_tree)
        assert oracle.fingerprint(small_tree) == before
    finally:
        for p, mode in modes.items():
            p.chmod(stat.S_IMODE(mode))
