"""A run is itself (issue 29 item 1): two trees of one layout in one store never merge.

The attack: two trees with identical layouts and different values (two clusters' `runs/`, a
copy of last week's sweep) ingested into one store, where every run name is held twice. For
every command, `Store` method and UI endpoint that takes or shows runs, each run's answer in
the combined store must equal its answer in a store holding its tree alone, matched by the
run's directory (`run_path`), not by its name. The reference is a second store, and for the
issue's own scenario (`runstore demo`'s runs beside a copy of shared/sample-runs) the oracle's
reading of the source files. Also here: the one RUN resolution and its precedence, attacked
with a run named like another run's run_id prefix; `ingest --prefix` and its ledger rule; the
duplicate-name warning.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import oracle
import runstore
from runstore import demo
from runstore.analysis import runs as runs_mod
from runstore.demo import RunSpec
from runstore.errors import QueryError, UsageError
from runstore.present import charts
from runstore.query.statements import named
from runstore.storage.ledger import run_id_for
from runstore.ui.answers import Params
from runstore.ui.api import Api
from storekit import cli

SPECS = [
    RunSpec("sweep/rl_dirs", steps=12, eval_every=5, save_every=5, logtree_every=10,
            groups_to_log=1, trace=True),
    RunSpec("sweep/rl_flat", layout="flat", steps=14, eval_every=5, save_every=5, logtree=False),
    RunSpec("sl/run", kind="sl", steps=10, eval_every=5, save_every=5),
]
REWARD = "env/all/reward/total"
KL = "optim/kl_sample_train_v1"
LEAVE_OUT = {"run_label", "ingested_at"}  # the label differs by design; ingest time by clock


def plain(v: Any) -> Any:
    """A value comparable with ==: NaN as text, floats to 12 significant digits (DuckDB sums in
    parallel, in an order that varies from query to query: the last bits of a sum may differ
    even between two runs of one query on one store), containers recursively."""
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else float(f"{v:.12g}")
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


class World:
    """Tree A and tree B (one layout, different seeds), each alone in a store, and both in
    one store."""

    def __init__(self, base: Path):
        self.a, self.b = base / "cluster-a" / "runs", base / "cluster-b" / "runs"
        demo.generate_tree(self.a, SPECS, seed=1)
        demo.generate_tree(self.b, SPECS, seed=2)
        self.alone = {"a": runstore.open(base / "store-a"), "b": runstore.open(base / "store-b")}
        self.alone["a"].ingest([self.a])
        self.alone["b"].ingest([self.b])
        self.both = runstore.open(base / "store-both")
        self.both.ingest([self.a])
        self.warnings: list[str] = []
        self.both.ingest([self.b], on_warning=self.warnings.append)

    def tree(self, which: str) -> Path:
        return self.a if which == "a" else self.b

    def paths(self, which: str) -> list[str]:
        """The run directories of one tree, as `runs.run_path` holds them."""
        return sorted(str(r.resolve()) for r in oracle.run_dirs(self.tree(which)))

    @staticmethod
    def path_of(store: runstore.Store) -> dict[str, str]:
        return {r["run_id"]: r["run_path"]
                for r in store.arrow("select run_id, run_path from runs").to_pylist()}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World(tmp_path_factory.mktemp("identity"))


def per_run(store: runstore.Store, rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Rows by their run's directory, each without run_id and the LEAVE_OUT columns, sorted."""
    path_of = World.path_of(store)
    out: dict[str, list[Any]] = {}
    for r in rows:
        path = path_of[r["run_id"]]
        kept = {k: plain(v) for k, v in r.items() if k not in LEAVE_OUT and k != "run_id"}
        out.setdefault(path, []).append(kept)
    return {p: sorted(v, key=repr) for p, v in out.items()}


def test_the_setup_really_shares_every_name(world: World) -> None:
    names = world.both.arrow("select run_name, count(*) as n from runs group by 1").to_pylist()
    assert len(names) == len(SPECS) and all(r["n"] == 2 for r in names)
    labels = world.both.arrow("select run_label from run_labels")["run_label"].to_pylist()
    assert len(set(labels)) == 2 * len(SPECS)
    # The values do differ: a store that merged the runs could not pass the comparisons below.
    a = world.alone["a"].metrics(REWARD)["value"].to_list()
    b = world.alone["b"].metrics(REWARD)["value"].to_list()
    assert a != b


def test_every_table_and_view_answers_per_run_as_each_tree_alone(world: World) -> None:
    tables = [t for t in world.both.tables()
              if "run_id" in world.both.sql(f"select * from {t} limit 0").columns]
    views = [v.name for v in world.both.views()]
    assert {"runs", "metrics_raw", "spans", "trace_slices", "messages"} <= set(tables)
    for name in tables + views:
        got = per_run(world.both, world.both.arrow(f"select * from {name}").to_pylist())
        for which in ("a", "b"):
            alone = world.alone[which]
            want = per_run(alone, alone.arrow(f"select * from {name}").to_pylist())
            mine = {p: rows for p, rows in got.items() if p in set(world.paths(which))}
            assert mine == want, name


def test_store_methods_answer_per_run_as_each_tree_alone(world: World) -> None:
    for which in ("a", "b"):
        alone = world.alone[which]
        for path in world.paths(which):
            assert per_run(world.both, world.both.metrics([REWARD, KL], runs=path).to_dicts()) \
                == per_run(alone, alone.metrics([REWARD, KL], runs=path).to_dicts())
            assert per_run(world.both, world.both.runs(name=path).to_dicts()) \
                == per_run(alone, alone.runs(name=path).to_dicts())
            assert world.both.keys(runs=path).rows() == alone.keys(runs=path).rows()
            for x in ("step", "time"):
                mine = world.both.compare(REWARD, runs=path, x=x, smooth=0.5)
                theirs = alone.compare(REWARD, runs=path, x=x, smooth=0.5)
                assert plain(mine.drop("group").rows()) == plain(theirs.drop("group").rows())
                assert mine["n"].max() in (1, None)  # one run: never two runs as one group
        # A scope of a whole tree, grouped by a config key: the groups of that tree alone.
        scope = world.paths(which)
        mine = world.both.compare(REWARD, runs=scope, group_by="learning_rate")
        theirs = alone.compare(REWARD, runs=scope, group_by="learning_rate")
        assert plain(mine.rows()) == plain(theirs.rows())
        both_dirs = [p for p in scope if "sweep" in p]
        assert world.both.diff(both_dirs, all=True).rows() == alone.diff(both_dirs, all=True).rows()


def test_check_counts_and_rows_per_run(world: World) -> None:
    from runstore.health.evaluate import check

    rules = [f"{REWARD} > -1e9", "drop(env/all/reward/total) > 0.0001"]
    got = check(world.both, threshold=0.0, rules=rules, config=False)
    parts = {w: check(world.alone[w], threshold=0.0, rules=rules, config=False) for w in "ab"}
    assert got.runs == sum(p.runs for p in parts.values())
    assert list(got.checked) == [sum(x) for x in zip(*(p.checked for p in parts.values()))]
    assert list(got.fired) == [sum(x) for x in zip(*(p.fired for p in parts.values()))]

    def rows(result: Any, store: runstore.Store) -> dict[str, list[Any]]:
        table = [{"run_id": i, **{k: v for k, v in r.items() if k != "run_name"}}
                 for i, r in zip(result.run_ids, result.table.to_pylist())]
        return per_run(store, table)

    mine = rows(got, world.both)
    assert mine == {**rows(parts["a"], world.alone["a"]), **rows(parts["b"], world.alone["b"])}
    assert sum(len(v) for v in mine.values()) >= 2 * len(SPECS)  # the rules fired: not vacuous
    # Shown disambiguated: each fired row names its run by its label.
    labels = {r["run_id"]: r["run_label"] for r in
              world.both.arrow("select run_id, run_label from run_labels").to_pylist()}
    for run_id, row in zip(got.run_ids, got.table.to_pylist()):
        assert row["run_name"] == labels[run_id] and "[" in row["run_name"]


def test_charts_report_and_trace_data_per_run(world: World) -> None:
    for which in ("a", "b"):
        alone = world.alone[which]
        for path in world.paths(which):
            for series in (lambda s: charts.metric_series(s, [REWARD, KL], path),
                           lambda s: charts.kl_series(s, path),
                           lambda s: charts.reward_series(s, path)):
                assert per_run(world.both, series(world.both).to_pylist()) \
                    == per_run(alone, series(alone).to_pylist())
            for section in ("summary", "kl", "checkpoints"):
                answers = [per_run(s, s.arrow(named(f"report.{section}"),
                                              {"runs": s.scope(path)}).to_pylist())
                           for s in (world.both, alone)]
                assert answers[0] == answers[1], section
            if (Path(path) / "timing_spans.jsonl").exists():
                assert world.both.trace(path) != [] and \
                    _events(world.both.trace(path)) == _events(alone.trace(path))
                figs = [s.plot_spans(path) for s in (world.both, alone)]
                assert [[plain(_xy(t)) for t in f.data] for f in figs][0] == \
                    [[plain(_xy(t)) for t in f.data] for f in figs][1]
    # Legends and titles: every line of a chart over both trees is named by a distinct label.
    fig = world.both.plot_metric(REWARD)
    names = [t.name for t in fig.data]
    assert len(names) == len(set(names)) == world.both.runs().height - _without(world.both, REWARD)


def _xy(trace: Any) -> tuple[Any, Any]:
    return (None if trace.x is None else list(trace.x), None if trace.y is None else list(trace.y))


def _without(store: runstore.Store, key: str) -> int:
    return store.arrow("select count(*) as n from runs where run_id not in "
                       "(select run_id from metrics where key = $k)", {"k": key})["n"][0].as_py()


def _events(events: list[dict[str, Any]]) -> list[Any]:
    """Trace events without the process names, which carry the run's label."""
    return sorted((json.dumps({k: v for k, v in e.items() if k != "args" or e.get("ph") != "M"},
                              sort_keys=True) for e in events))


def test_ui_endpoints_answer_per_run(world: World) -> None:
    for which in ("a", "b"):
        apis = {s: Api(s) for s in (world.both, world.alone[which])}
        for path in world.paths(which):
            def same(method: str, **params: Any) -> None:
                items = [("run", path), *[(k, str(v)) for k, v in params.items()]]
                answers = [plain(_drop(getattr(api, method)(Params(items))))
                           for api in apis.values()]
                assert answers[0] == answers[1], (method, path)

            same("series", metric=REWARD)
            same("series", metric=REWARD, smooth=0.6)
            same("keys")
            if (Path(path) / "timing_spans.jsonl").exists():
                same("timing_steps")
                same("timing_slowest")
                steps = apis[world.both].timing_steps(Params([("run", path)]))["rows"]
                same("timing_spans", step=steps[-1][0])
            if any(Path(path).glob("iteration_*")):
                same("rollouts_index")
                index = apis[world.both].rollouts_index(Params([("run", path)]))
                if index["rows"]:
                    split, iteration = index["rows"][0][0], index["rows"][0][1]
                    same("trajectories", split=split, iteration=iteration)
                    same("conversations", split=split, iteration=iteration)
        # Runs page and Health page: every row of this tree's runs, matched by run_id.
        for store, api in apis.items():
            runs = api.runs(Params())
            assert len({r[runs["columns"].index("run_id")] for r in runs["rows"]}) \
                == store.runs().height
        health_rows = {}
        for store, api in apis.items():
            h = api.health(Params())
            path_of = World.path_of(store)
            health_rows[store] = sorted(
                (path_of[r["run_id"]], r["status"], r["kl_flagged"], tuple(r["rules"]))
                for r in h["runs"] if path_of[r["run_id"]] in world.paths(which))
        assert health_rows[world.both] == health_rows[world.alone[which]]


def _drop(answer: Any) -> Any:
    """An answer without what names a run (its id and label differ by design)."""
    if isinstance(answer, dict):
        if "columns" in answer and "rows" in answer:
            keep = [i for i, c in enumerate(answer["columns"])
                    if c not in ("run_id", "run_label", "run_name")]
            return {**answer, "columns": [answer["columns"][i] for i in keep],
                    "rows": [[r[i] for i in keep] for r in answer["rows"]]}
        return {k: _drop(v) for k, v in answer.items()
                if k not in ("run_id", "run_label", "run_name", "run")}
    if isinstance(answer, list):
        return [_drop(x) for x in answer]
    return answer


# -- the issue's scenario: runstore demo's runs and a copy of shared/sample-runs -------------

@pytest.fixture(scope="module")
def demo_and_samples(_demo_template: Path,
                     tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Any, list[str]]:
    from conftest import SHARED_SAMPLES

    if not SHARED_SAMPLES.is_dir():
        pytest.skip("shared/sample-runs is not beside the checkout")
    base = tmp_path_factory.mktemp("scenario")
    demo_runs, samples = base / "runstore-demo" / "runs", base / "samples"
    shutil.copytree(_demo_template, demo_runs)
    shutil.copytree(SHARED_SAMPLES, samples)
    store = runstore.open(base / "store")
    store.ingest([demo_runs])
    warnings: list[str] = []
    store.ingest([samples], on_warning=warnings.append)
    return demo_runs, samples, store, warnings


def test_the_issue_scenario(demo_and_samples: tuple[Path, Path, Any, list[str]]) -> None:
    demo_runs, samples, store, warnings = demo_and_samples
    name = "math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5"
    dirs = [demo_runs / name, samples / name]
    # runs: the name twice, each shown with its own label; the warning names both paths.
    listed = store.runs(columns=["run_name", "run_label"]).to_dicts()
    assert [r["run_name"] for r in listed].count(name) == 2
    labels = [r["run_label"] for r in listed]
    assert len(labels) == len(set(labels))
    warning = next(w for w in warnings if repr(name) in w)
    assert all(str(d.resolve()) in warning for d in dirs) and "--prefix" in warning
    # compare: two groups of one run each, never one group of n=2 (40 + 100 points).
    cmp = store.compare(REWARD, runs="math_rl_sweep/llama*4e-5")
    assert cmp["group"].n_unique() == 2 and cmp["n"].max() == 1
    lengths = sorted(cmp.group_by("group").len()["len"].to_list())
    want = sorted(sum(1 for (_, k) in oracle.live_metrics(d) if k == REWARD) for d in dirs)
    assert lengths == want and want[0] != want[1]
    # The UI's series: two lines with each run's own points, as the files hold them.
    res = Api(store).series(Params([("metric", REWARD), ("run", name)]))
    assert sorted(line["n_points"] for line in res["lines"]) == want
    assert len({line["run_label"] for line in res["lines"]}) == 2
    # diff NAME OTHER: the ambiguity is explained, with each run's path and how to pick one.
    with pytest.raises(QueryError) as e:
        store.diff([name, "sl/tulu3_qwen3-8b_lr2e-4"])
    assert all(str(d.resolve()) in str(e.value) for d in dirs) and "run_id" in str(e.value)
    # ... and the run can be named: by run_id, a prefix of it, its label, its directory.
    a, b = (run_id_for(str(d.resolve())) for d in dirs)
    label_b = next(r["run_label"] for r in listed if r["run_name"] == name and b[:8] in r["run_label"])
    for ra, rb in ((a, b), (a[:6], b[:6]), (str(dirs[0]), label_b)):
        df = store.diff([ra, rb], all=True)
        assert df.height > 0 and len(df.columns) == 4  # key, two runs, differs
    r = cli(store.path, "diff", a[:8], str(dirs[1]))
    assert r.exit_code == 0, r.output


def test_scenario_through_the_cli_and_a_real_ui_server(
        demo_and_samples: tuple[Path, Path, Any, list[str]]) -> None:
    from urllib.parse import urlencode

    from ui_harness import UiServer, http

    _, _, store, _ = demo_and_samples
    name = "math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5"
    r = cli(store.path, "compare", REWARD, "--runs", "math_rl_sweep/llama*4e-5", "-F", "csv")
    assert r.exit_code == 0, r.output
    groups = {line.split(",")[0] for line in r.output.splitlines()[1:]}
    assert len(groups) == 2 and all(g.startswith(name + " [") for g in groups)
    r = cli(store.path, "check", "--threshold", "0", "-F", "csv")
    shown = [line.split(",")[0] for line in r.output.splitlines()[1:] if "fired for" not in line]
    assert len(shown) == len(set(shown)) > 0
    with UiServer(store.path) as server:
        q = urlencode({"metric": REWARD, "run": name})
        reply = http(server.url, "GET", f"/api/series?{q}")
        assert reply.status == 200, reply.text
        assert len(reply.json()["lines"]) == 2


# -- the one RUN resolution ----------------------------------------------------------------

@pytest.fixture(scope="module")
def tricky(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runstore.Store, str]:
    """A store where a run's *name* is another run's run_id prefix: `name` must win."""
    base = tmp_path_factory.mktemp("tricky")
    root = base / "runs"
    demo.generate_tree(root, SPECS[:2], seed=4)
    target = run_id_for(str((root / "sweep" / "rl_flat").resolve()))
    impostor = root / target[:6]
    impostor.mkdir()
    (impostor / "metrics.jsonl").write_text('{"step": 0, "env/all/reward/total": 1.0}\n')
    store = runstore.open(base / "store")
    store.ingest([root])
    return root, store, target


def test_resolution_precedence(tricky: tuple[Path, runstore.Store, str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    root, store, target = tricky
    impostor = run_id_for(str((root / target[:6]).resolve()))
    # 1 id, 3 name before 4 id prefix: the run *named* like a prefix is the one meant.
    assert store.resolve([target])[0].run_id == target
    assert store.resolve([target[:6]])[0].run_id == impostor
    assert store.resolve([target[:7]])[0].run_id == target
    # 2 path: absolute, relative to the working directory, with a trailing slash.
    flat = root / "sweep" / "rl_flat"
    assert store.resolve([str(flat)])[0].run_id == target
    monkeypatch.chdir(root / "sweep")
    assert [r.run_id for r in store.resolve(["rl_flat", "./rl_flat/"])] == [target, target]
    # 5 glob, 6 name prefix (one RUN only), and the errors.
    assert store.resolve(["sweep/*flat"])[0].run_id == target
    assert store.resolve(["sweep/rl_f"])[0].run_id == target
    with pytest.raises(QueryError, match="'sweep/\\*' matches 2 runs"):
        store.resolve(["sweep/*"])
    with pytest.raises(QueryError, match="no run is named or matches 'nope'"):
        store.resolve(["nope"])
    # A prefix shorter than 4 characters is no id prefix (it would name runs by accident).
    assert runs_mod.MIN_ID_PREFIX == 4
    with pytest.raises(QueryError, match="no run matches"):
        store.scope(impostor[:3])
    # Scopes: the same tiers, several runs allowed, and a miss is an error.
    assert store.scope("sweep/*") == sorted(runstore.open(store.path).scope(["sweep/rl_dirs",
                                                                             target]))
    with pytest.raises(QueryError, match="no run matches --runs 'zzz/\\*'"):
        store.scope("zzz/*")


def test_resolution_is_bound_not_pasted(tricky: tuple[Path, runstore.Store, str]) -> None:
    _, store, _ = tricky
    for hostile in ("x' or '1'='1", "*') or true --", "%", "\\", "[", "a\x00b"):
        with pytest.raises(QueryError, match="no run"):
            store.resolve([hostile])


# -- ingest --prefix and the ledger ----------------------------------------------------------

def test_prefix_names_each_tree_and_the_first_name_sticks(world: World, tmp_path: Path) -> None:
    store = runstore.open(tmp_path / "store")
    warnings: list[str] = []
    store.ingest([world.a], prefix="cluster-a", on_warning=warnings.append)
    r = cli(tmp_path / "store", "ingest", str(world.b), "--prefix", "/cluster-b/")
    assert r.exit_code == 0 and "warning:" not in r.output, r.output
    names = sorted(store.runs(columns=["run_name"])["run_name"].to_list())
    assert names == sorted(f"{p}/{s.name}" for p in ("cluster-a", "cluster-b") for s in SPECS)
    assert warnings == []
    # Re-ingesting the same path, with or without a prefix, renames nothing and adds nothing.
    for prefix in (None, "other"):
        report = store.ingest([world.a], prefix=prefix)
        assert report.runs_new == 0
        assert sorted(store.runs(columns=["run_name"])["run_name"].to_list()) == names
    # To rename: forget, then ingest again with the new prefix.
    store.forget([str(d) for d in world.paths("a")])
    store.ingest([world.a], prefix="renamed")
    assert sum(n.startswith("renamed/") for n in store.runs()["run_name"].to_list()) == len(SPECS)
    for bad in ("", "/", "a//b", "../x", "a/./b", "x\ny"):
        with pytest.raises(UsageError, match="--prefix"):
            store.ingest([world.a], prefix=bad)


def test_a_prefix_that_is_not_utf8_is_a_usage_error(world: World, tmp_path: Path) -> None:
    # A shell hands argument bytes over as they are (`--prefix $'cluster-\\xe9'` typed in a
    # Latin-1 terminal): Python sees a lone surrogate, which no stored name can hold.
    store_path = tmp_path / "store"
    r = cli(store_path, "ingest", str(world.a), "--prefix", os.fsdecode(b"cluster-\xe9"))
    assert r.exit_code == UsageError.exit_code, r.output
    assert "argument 'cluster-\\xe9' is not UTF-8 text (byte 0xe9" in r.output  # as any
    assert not store_path.exists()
    # From Python, the prefix itself is checked.
    with pytest.raises(UsageError) as e:
        runstore.open(store_path).ingest([world.a], prefix=os.fsdecode(b"cluster-\xe9"))
    assert str(e.value) == ("--prefix 'cluster-\\xe9' is not UTF-8 text: give the name in "
                            "UTF-8 characters (the store keeps names as text)")
    assert not store_path.exists()


def test_a_shared_name_is_warned_about_once(world: World, tmp_path: Path) -> None:
    assert len(world.warnings) == len(SPECS)
    for w in world.warnings:
        assert "runs are named" in w and "--prefix" in w and "run_id" in w
    # An ingest that adds no run says nothing again (watch mode would repeat it forever).
    again: list[str] = []
    world.both.ingest([world.b], on_warning=again.append)
    assert again == []


def test_a_run_named_like_a_label_gets_a_label_of_its_own(world: World, tmp_path: Path) -> None:
    """A third tree holds a run named as another run's label is (`sl/run [3f2a9c01]`, the
    name of the first tree's `sl/run` with its run_id prefix): a chart's legend, a table and
    the UI tell runs apart by label, so it must not be the other run's. Its label is followed
    by its own run_id prefix, and the labels the store had stay as they were."""
    store = runstore.open(tmp_path / "store")
    shutil.copytree(world.both.path, store.path)
    before = {r["run_id"]: r["run_label"]
              for r in store.arrow("select run_id, run_label from run_labels").to_pylist()}
    taken = before[run_id_for(str((world.a / "sl" / "run").resolve()))]
    assert taken.startswith("sl/run [") and len(taken) == len("sl/run [12345678]")
    # Near misses of a label's ending keep their names.
    plain_names = {"run [1234567]", "run [123456789]", "run[12345678]", "run [12345678] "}
    tree = tmp_path / "c" / "runs"
    demo.generate_tree(tree, [RunSpec(taken, kind="sl", steps=6),
                              *(RunSpec(f"x/{n}", kind="sl", steps=6) for n in plain_names)],
                       seed=3)
    store.ingest([tree])
    rows = store.arrow("select run_id, run_name, run_label from run_labels").to_pylist()
    labels = [r["run_label"] for r in rows]
    assert len(set(labels)) == len(labels), sorted(labels)
    assert {r["run_id"]: r["run_label"] for r in rows if r["run_id"] in before} == before
    crafted = run_id_for(str((tree / taken).resolve()))
    assert [r["run_label"] for r in rows if r["run_id"] == crafted] == [
        f"{taken} [{crafted[:8]}]"]
    assert {r["run_label"] for r in rows if r["run_name"].startswith("x/")} == {
        f"x/{n}" for n in plain_names}
