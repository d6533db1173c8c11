"""runstore.analysis.compare and .groups: grouped curves with bands, against the run files.

Every expected number comes from metrics.jsonl and config.json read with plain json
(tests/analysis_oracle.py): the live value of a step is the file's last write of it, the EMA
is its definition, the band is statistics' mean/stdev over the finite values.
"""

from __future__ import annotations

import doctest
import json
import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import analysis_oracle as ao
import runstore
from runstore import demo
from runstore.analysis import compare as compare_mod
from runstore.analysis import groups as groups_mod
from runstore.demo import RunSpec
from runstore.errors import QueryError, UnknownKey, UsageError
from conftest import examples

REWARD = "env/all/reward/total"
KL = "optim/kl_sample_train_v1"


@pytest.fixture(scope="module")
def demo_store(_demo_template: Path, shared_demo_store: Path) -> tuple[Path, runstore.Store]:
    return _demo_template, runstore.open(shared_demo_store)


@pytest.fixture(scope="module")
def awkward_store(_awkward_template: Path, shared_awkward_store: Path
                  ) -> tuple[Path, runstore.Store]:
    return _awkward_template, runstore.open(shared_awkward_store)


def got_cells(df: pl.DataFrame, group_col: str, x: str) -> dict[tuple[Any, float], dict]:
    out = {}
    for r in df.iter_rows(named=True):
        out[(r[group_col], round(r[x], 6))] = r
    assert len(out) == df.height  # one row per (group, x)
    return out


def assert_matches(df: pl.DataFrame, want: dict, group_col: str, x: str = "step") -> None:
    got = got_cells(df, group_col, x)
    assert set(got) == set(want)
    for cell, stats in want.items():
        for k, v in stats.items():
            assert ao.close(got[cell][k], v, rel=1e-9), (cell, k, got[cell][k], v)


def config_value(run: Path, key: str) -> Any:
    cfg = ao.config(run) or {}
    return cfg.get(key)


@pytest.mark.parametrize("w", [None, 0.0, 0.6, 0.9])
def test_grouped_by_learning_rate(demo_store: tuple[Path, runstore.Store], w: float | None) -> None:
    root, store = demo_store
    runs = ao.runs(root)
    group_of = {n: config_value(r, "learning_rate") for n, r in runs.items()}
    df = compare_mod.compare(store, REWARD, group_by="learning_rate", smooth=w)
    assert df.columns == ["group", "learning_rate", "step", *compare_mod.STATS,
                          *(compare_mod.SMOOTH_STATS if w is not None else ())]
    assert_matches(df, ao.curves(runs, REWARD, group_of, w=w), "learning_rate")
    # Groups are ordered by value, steps within a group ascending.
    lrs = df["learning_rate"].unique(maintain_order=True).to_list()
    assert lrs == sorted(lrs)
    for lr in lrs:
        steps = df.filter(pl.col("learning_rate") == lr)["step"].to_list()
        assert steps == sorted(steps)
    two = df.filter((pl.col("learning_rate") == 1e-4) & (pl.col("step") == 5))
    assert two["n"].item() == 3 and two["group"].item() == "learning_rate=0.0001"


def test_one_group_per_run_without_group_by(demo_store: tuple[Path, runstore.Store]) -> None:
    root, store = demo_store
    runs = {n: r for n, r in ao.runs(root).items() if n.startswith("math_rl_sweep/")}
    df = compare_mod.compare(store, REWARD, runs="math_rl_sweep/*", smooth=0.8)
    assert df.columns[:2] == ["group", "step"]
    assert_matches(df, ao.curves(runs, REWARD, {n: n for n in runs}, w=0.8), "group")
    assert set(df["n"].to_list()) == {1} and df["std"].null_count() == df.height
    # Latest write per step: the pre-0.6 resumed run's second writes count, its first do not.
    resumed = df.filter(pl.col("group") == "math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5")
    live = ao.series(runs["math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5"], REWARD)
    assert dict(zip(resumed["step"].to_list(), resumed["mean"].to_list())) == live


def test_grouped_by_config_keys(demo_store: tuple[Path, runstore.Store]) -> None:
    root, store = demo_store
    runs = ao.runs(root)
    keys = ["model_name", "dataset_builder.group_size"]
    df = compare_mod.compare(store, REWARD, group_by=keys, smooth=0.5)
    assert df.columns[:4] == ["group", *keys, "step"]
    assert df.schema["dataset_builder.group_size"] == pl.Float64

    def size(v: Any) -> float | None:
        return None if v is None else float(v)

    group_of = {n: (config_value(r, "model_name"), size(config_value(r, "dataset_builder.group_size")))
                for n, r in runs.items()}
    got = {((r["model_name"], r["dataset_builder.group_size"]), r["step"]): r
           for r in df.iter_rows(named=True)}
    want = ao.curves(runs, REWARD, group_of, w=0.5)
    assert set(got) == set(want)
    for cell, stats in want.items():
        for k, v in stats.items():
            assert ao.close(got[cell][k], v), (cell, k)
    labels = set(df["group"].to_list())
    assert "model_name=Qwen/Qwen3-8B, dataset_builder.group_size=4" in labels
    # The SL run has no group_size (and logs no reward, so it has no rows above).
    members = groups_mod.groups(store, group_by=keys)
    sl = members.filter(pl.col("run_name") == "sl/tulu3_qwen3-8b_lr2e-4")
    assert sl["group"].item() == "model_name=Qwen/Qwen3-8B, dataset_builder.group_size=(missing)"
    assert sl["dataset_builder.group_size"].item() is None
    assert members["run_name"].to_list()[-1] in ("dpo/hh_llama-3.1-8b_beta0.1",
                                                  "sl/tulu3_qwen3-8b_lr2e-4")  # missing: last


def test_nan_and_infinity_are_counted_not_aggregated(
        awkward_store: tuple[Path, runstore.Store]) -> None:
    root, store = awkward_store
    runs = {n: r for n, r in ao.runs(root).items() if n.startswith("awkward/kl/")}
    df = compare_mod.compare(store, KL, runs="awkward/kl/*", smooth=0.9)
    assert_matches(df, ao.curves(runs, KL, {n: n for n in runs}, w=0.9), "group")
    nan_only = df.filter(pl.col("group") == "awkward/kl/nan_only")
    assert nan_only.height and (nan_only["n_nan"] == 1).all() and (nan_only["n"] == 0).all()
    assert nan_only["mean"].null_count() == nan_only.height
    assert nan_only["smooth_n"].sum() == 0  # nothing finite to smooth
    inf = df.filter(pl.col("group") == "awkward/kl/infinity")
    assert inf["n_inf"].sum() == 2 and inf["max"].is_finite().all()
    # The EMA is carried over the infinite steps: the run stays in the smoothed band.
    assert (inf["smooth_n"] == 1).all()


def test_all_runs_in_one_group_bands(awkward_store: tuple[Path, runstore.Store]) -> None:
    root, store = awkward_store
    runs = {n: r for n, r in ao.runs(root).items() if n.startswith("awkward/kl/")}
    df = compare_mod.compare(store, KL, runs="awkward/kl/*", group_by="kind", smooth=0.3)
    assert_matches(df, ao.curves(runs, KL, {n: "rl" for n in runs}, w=0.3), "kind")
    assert (df["n"] + df["n_nan"] + df["n_inf"]).max() == len(
        [r for r in runs.values() if ao.series(r, KL)])


@pytest.mark.parametrize("bucket", [None, 7.5])
def test_time_axis(demo_store: tuple[Path, runstore.Store], bucket: float | None) -> None:
    root, store = demo_store
    runs = {n: r for n, r in ao.runs(root).items() if n.startswith("gsm8k_tool_rl/")}
    group_of = {n: config_value(r, "learning_rate") for n, r in runs.items()}
    df = compare_mod.compare(store, REWARD, runs="gsm8k_tool_rl/*", group_by="learning_rate",
                             smooth=0.9, x="time", bucket=bucket)
    assert df.columns[:3] == ["group", "learning_rate", "time_s"]
    want = ao.curves(runs, REWARD, group_of, w=0.9, x="time", bucket=bucket)
    assert_matches(df, want, "learning_rate", "time_s")
    assert df["time_s"].min() == 0.0
    if bucket is not None:
        assert all(math.isclose(t / bucket, round(t / bucket)) for t in df["time_s"])


@pytest.mark.parametrize("x,bucket", [("tokens", None), ("tokens", 50_000.0), ("cost", None),
                                      ("cost", 0.1)])
def test_spend_axes(demo_store: tuple[Path, runstore.Store], x: str,
                    bucket: float | None) -> None:
    """x=tokens|cost: each step at the run's cumulative sampled + trained tokens (or USD)
    there, runs on a common grid of buckets (about one step by default): the oracle's curves
    from the files."""
    root, store = demo_store
    runs = {n: r for n, r in ao.runs(root).items() if n.startswith(("gsm8k_tool_rl/",
                                                                     "tool_rl_async/"))}
    group_of = {n: config_value(r, "learning_rate") for n, r in runs.items()}
    df = compare_mod.compare(store, REWARD, runs="*_rl*/*", group_by="learning_rate",
                             smooth=0.9, x=x, bucket=bucket)
    xcol = {"tokens": "tokens", "cost": "cost_usd"}[x]
    assert df.columns[:3] == ["group", "learning_rate", xcol]
    want = ao.curves(runs, REWARD, group_of, w=0.9, x=x, bucket=bucket)
    assert_matches(df, want, "learning_rate", xcol)
    assert df["learning_rate"].n_unique() == 5


def test_spend_axes_need_the_cumulative_keys(demo_store: tuple[Path, runstore.Store]) -> None:
    _, store = demo_store
    with pytest.raises(QueryError, match="cost/cumulative_usd"):
        compare_mod.compare(store, REWARD, runs="math_rl_sweep/*", x="cost")


def test_time_axis_needs_time_total(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "untimed"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": i, REWARD: i / 10}) + "\n"
                                               for i in range(5)))
    store = runstore.open(tmp_path / "store")
    store.ingest([tmp_path / "runs"])
    assert compare_mod.compare(store, REWARD)["n"].sum() == 5
    with pytest.raises(QueryError, match="none of these runs logs time/total"):
        compare_mod.compare(store, REWARD, x="time")


def test_errors(demo_store: tuple[Path, runstore.Store]) -> None:
    store = demo_store[1]
    with pytest.raises(UnknownKey, match="did you mean env/all/reward/total"):
        compare_mod.compare(store, "env/all/rewrd/total")
    with pytest.raises(QueryError, match="no run matches --runs 'nope/\\*'"):
        compare_mod.compare(store, REWARD, runs="nope/*")
    with pytest.raises(UsageError, match="smoothing weight"):
        compare_mod.compare(store, REWARD, smooth=1.0)
    with pytest.raises(UsageError, match="x is one of step, time, tokens, cost"):
        compare_mod.compare(store, REWARD, x="wall")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="bucket"):
        compare_mod.compare(store, REWARD, x="time", bucket=0)
    # The step axis has no grid: a bucket there was silently ignored.
    with pytest.raises(UsageError, match="on the step axis every step is its own point"):
        compare_mod.compare(store, REWARD, bucket=10.0)
    with pytest.raises(UsageError, match=r"no run has config key 'lerning_rate'.*did you mean "
                                         r"learning_rate"):
        compare_mod.compare(store, REWARD, group_by="lerning_rate")
    with pytest.raises(UsageError, match="cannot group by 'mean'"):
        compare_mod.compare(store, REWARD, group_by="mean")
    with pytest.raises(UsageError, match="give it alone"):
        compare_mod.compare(store, REWARD, group_by=["auto", "kind"])
    # Logged somewhere, not by the runs in scope: an empty answer with the columns.
    empty = compare_mod.compare(store, "train_mean_nll", runs="gsm8k_tool_rl/*", smooth=0.5)
    assert empty.height == 0 and empty.columns == [
        "group", "step", *compare_mod.STATS, *compare_mod.SMOOTH_STATS]


def test_doctests(demo_store: tuple[Path, runstore.Store]) -> None:
    for mod in (compare_mod, groups_mod):
        result = doctest.testmod(mod, extraglobs={"store": demo_store[1]})
        assert result.attempted >= 1 and result.failed == 0


# ---------------------------------------------------------------------------------------------
# auto: seeds set aside


def seed_like(key: str) -> bool:
    last = key.rsplit(".", 1)[-1].lower()
    return last == "seed" or last.endswith("_seed") or last in (
        "log_path", "log_dir", "wandb_name", "run_name", "session_name")


def partition(root: Path, names: list[str]) -> set[frozenset[str]]:
    runs = ao.runs(root)
    by_sig: dict[str, set[str]] = {}
    for n in names:
        cfg = ao.config(runs[n]) or {}
        sig = json.dumps(sorted((k, v) for k, v in cfg.items() if not seed_like(k)),
                         default=str)
        by_sig.setdefault(sig, set()).add(n)
    return {frozenset(v) for v in by_sig.values()}


def test_auto_groups_match_configs_without_seeds(demo_store: tuple[Path, runstore.Store]) -> None:
    root, store = demo_store
    df = groups_mod.groups(store, group_by="auto")
    got: dict[str, set[str]] = {}
    for r in df.iter_rows(named=True):
        got.setdefault(r["group"], set()).add(r["run_name"])
    assert {frozenset(v) for v in got.values()} == partition(root, list(ao.runs(root)))
    assert len(got) == len(set(df["group"]))  # labels tell the groups apart


@pytest.fixture(scope="module")
def seeds_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runstore.Store]:
    """A sweep of 2 learning rates x 3 seeds whose configs differ in seed-like keys only, and
    one run that also differs in wandb_project (a real difference)."""
    base = tmp_path_factory.mktemp("seeds")
    root = base / "runs"
    specs = [RunSpec(f"sweep/lr_{lr}/seed_{s}", steps=12, learning_rate=lr, eval_every=0,
                     save_every=0, logtree=False)
             for lr in (1e-4, 3e-4) for s in range(3)]
    specs.append(RunSpec("sweep/other_project", steps=12, learning_rate=1e-4, eval_every=0,
                         save_every=0, logtree=False))
    demo.generate_tree(root, specs, seed=5)
    for i, run in enumerate(sorted(p for p in root.rglob("config.json"))):
        cfg = json.loads(run.read_text())
        cfg["seed"] = i
        cfg["dataset_builder"]["shuffle_seed"] = i * 7
        cfg["wandb_name"] = f"run-{i}"
        if "other_project" in str(run):
            cfg["wandb_project"] = "elsewhere"
        run.write_text(json.dumps(cfg))
    store = runstore.open(base / "store")
    store.ingest([root])
    return root, store


def test_auto_groups_seeds_and_bands_over_them(seeds_store: tuple[Path, runstore.Store]) -> None:
    root, store = seeds_store
    members = groups_mod.groups(store, group_by="auto")
    got: dict[str, set[str]] = {}
    for r in members.iter_rows(named=True):
        got.setdefault(r["group"], set()).add(r["run_name"])
    assert got == {
        "learning_rate=0.0001, wandb_project=null": {f"sweep/lr_0.0001/seed_{s}" for s in range(3)},
        "learning_rate=0.0003, wandb_project=null": {f"sweep/lr_0.0003/seed_{s}" for s in range(3)},
        "learning_rate=0.0001, wandb_project=elsewhere": {"sweep/other_project"},
    }
    runs = ao.runs(root)
    group_of = {n: g for g, names in got.items() for n in names}
    df = compare_mod.compare(store, REWARD, group_by="auto", smooth=0.9)
    assert_matches(df, ao.curves(runs, REWARD, group_of, w=0.9), "group")
    assert sorted(df.filter(pl.col("step") == 3)["n"].to_list()) == [1, 3, 3]
    one = groups_mod.groups(store, group_by="auto", runs="sweep/lr_0.0001/*")
    assert set(one["group"]) == {"all runs"}


# ---------------------------------------------------------------------------------------------
# Random run trees: compare against the oracle on files written by the test itself.

values = st.one_of(st.floats(-100, 100, allow_nan=False), st.just(math.nan),
                   st.just(math.inf), st.just(-math.inf), st.just("a string"))
lines = st.lists(st.tuples(st.integers(0, 12), values, st.floats(0.1, 10)), max_size=25)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from([1e-4, 3e-4]), lines), min_size=1, max_size=4),
       st.sampled_from([None, 0.0, 0.9]), st.sampled_from(["step", "time"]))
def test_random_trees_match_the_oracle(tmp_path_factory: pytest.TempPathFactory,
                                       runs_spec: list, w: float | None, x: str) -> None:
    base = tmp_path_factory.mktemp("random")
    root = base / "runs"
    for i, (lr, rows) in enumerate(runs_spec):
        run = root / f"r{i}"
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"learning_rate": lr, "seed": i,
                                                      "log_path": str(run)}))
        with open(run / "metrics.jsonl", "w") as f:
            for step, v, dur in rows:  # steps repeat and go back: the last write wins
                f.write(json.dumps({"step": step, REWARD: v, "time/total": dur}) + "\n")
    store = runstore.open(base / "store")
    store.ingest([root])
    runs = ao.runs(root)
    if not any(ao.series(r, REWARD) for r in runs.values()):
        logged = any(rows for _, rows in runs_spec)
        if logged:  # logged, only as strings: no numeric point anywhere
            assert compare_mod.compare(store, REWARD, smooth=w, x=x).height == 0  # type: ignore[arg-type]
        else:
            with pytest.raises(UnknownKey):
                compare_mod.compare(store, REWARD, smooth=w, x=x)  # type: ignore[arg-type]
        return
    df = compare_mod.compare(store, REWARD, group_by="learning_rate", smooth=w, x=x)  # type: ignore[arg-type]
    group_of = {n: config_value(r, "learning_rate") for n, r in runs.items()}
    xcol = "step" if x == "step" else "time_s"
    assert_matches(df, ao.curves(runs, REWARD, group_of, w=w, x=x), "learning_rate", xcol)
    # What `runstore compare` prints: the same rows, read without polars on the step axis.
    rows = compare_mod.compare_rows(store, REWARD, group_by="learning_rate", smooth=w, x=x)  # type: ignore[arg-type]
    assert rows.column_names == df.columns and rows.data == df.rows()
    # The runs differ only in seed and log_path besides the learning rate: auto finds the same
    # groups, with the same labels (or `all runs` for a single learning rate).
    auto = compare_mod.compare(store, REWARD, group_by="auto", smooth=w, x=x)  # type: ignore[arg-type]
    assert auto.drop("group").equals(df.drop("group", "learning_rate"))
    lrs = {lr for lr, _ in runs_spec}
    if len(lrs) == 1:
        assert set(auto["group"]) == {"all runs"}
    else:
        assert auto["group"].to_list() == df["group"].to_list()


def same_value(v: Any) -> tuple[str, Any]:
    """What makes two JSON config values one group: numbers by value, anything else by its
    JSON text (true is not 1)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return ("n", "nan" if math.isnan(v) else float(v))
    return ("t", json.dumps(v))


def test_numbers_group_by_value_beside_other_types(tmp_path: Path) -> None:
    # k holds numbers written two ways (1 and 1.0), a string and a boolean: the column cannot
    # be numeric, yet 1 and 1.0 stay one group, as `auto` and `diff` see them.
    values = {"one": 1, "one_float": 1.0, "text": "x", "flag": True, "nan_a": math.nan,
              "nan_b": math.nan, "two": 2}
    root = tmp_path / "runs"
    for name, v in values.items():
        run = root / name
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"model_name": "m", "k": v}))
        (run / "metrics.jsonl").write_text(json.dumps({"step": 0, REWARD: 0.5}) + "\n")
    store = runstore.open(tmp_path / "store")
    store.ingest([root], on_warning=lambda text: None)
    want: dict[tuple[str, Any], set[str]] = {}
    for name, v in values.items():
        want.setdefault(same_value(v), set()).add(name)
    for group_by in ("k", "auto"):
        got: dict[str, set[str]] = {}
        for r in groups_mod.groups(store, group_by=group_by).iter_rows(named=True):
            got.setdefault(r["group"], set()).add(r["run_name"])
        assert sorted(map(sorted, got.values())) == sorted(map(sorted, want.values())), group_by


def test_threads_comparing_at_once_each_get_their_own_bands(
        demo_store: tuple[Path, runstore.Store]) -> None:
    """Bands over points Python placed run in one private DuckDB that every thread shares
    (the web UI and the MCP server answer requests at once): each call reads its own points,
    never another's."""
    from concurrent.futures import ThreadPoolExecutor

    store = demo_store[1]

    def own(i: int) -> list[float]:
        frame = pl.DataFrame({"_g": [0] * 50, "value": [float(i)] * 50})
        return [compare_mod.group_stats(frame, ["_g"], smoothed=False)["mean"][0]
                for _ in range(20)]

    with ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(own, range(6)))
    assert got == [[float(i)] * 20 for i in range(6)]

    asked = [(m, w) for m in (REWARD, KL) for w in (0.3, 0.9)]
    alone = {a: compare_mod.compare(store, a[0], group_by="learning_rate", smooth=a[1])
             for a in asked}
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda a: compare_mod.compare(
            store, a[0], group_by="learning_rate", smooth=a[1]), asked * 3))
    for a, df in zip(asked * 3, together):
        assert df.equals(alone[a]), a


def test_the_cli_says_why_a_compare_has_no_row(demo_store: tuple[Path, runstore.Store]) -> None:
    # A metric the store holds but no run in scope logs: an empty table (an answer), and on
    # stderr the note `plot metric` gives, counted from the tree's own files.
    import oracle
    import storekit

    root, store = demo_store
    runs = {d.relative_to(root).as_posix(): d for d in oracle.run_dirs(root)}
    sl = [n for n in runs if n.startswith("sl/")]
    assert sl and not any(oracle.metric_series(runs[n], REWARD) for n in sl)
    result = storekit.cli(store, "compare", REWARD, "--runs", "sl/*", "-F", "csv")
    assert result.exit_code == 0
    assert result.stdout == "group,step,n,n_nan,n_inf,mean,std,min,max\n"
    assert result.stderr == (f"note: {REWARD} is logged by 0 of {len(sl)} "
                             f"run{'s' if len(sl) != 1 else ''}\n")
    math = [n for n in runs if n.startswith("math_rl_sweep/")]
    assert math and all(oracle.metric_series(runs[n], REWARD) for n in math)
    result = storekit.cli(store, "compare", REWARD, "--runs", "math_rl_sweep/*", "-F", "csv")
    assert result.exit_code == 0 and result.stderr == "" and result.stdout.count("\n") > 1
