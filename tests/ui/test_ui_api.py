"""`runstore ui`'s JSON API, served by a real server process on 127.0.0.1, checked against an
independent reading of the demo tree's source files (tests/oracle.py), not against runstore's
own queries."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest

import oracle
from ui_harness import UiServer, http

REWARD = "env/all/reward/total"
KL = "optim/kl_sample_train_v1"


def get(ui_server: UiServer, path: str, params: Any = None, status: int = 200) -> Any:
    q = ("?" + urlencode(params, doseq=True)) if params else ""
    r = http(ui_server.url, "GET", "/api/" + path + q)
    assert r.status == status, (r.status, r.text)
    assert r.headers["content-type"].startswith("application/json")
    return r.json()


def post(ui_server: UiServer, path: str, body: Any, status: int = 200) -> Any:
    r = http(ui_server.url, "POST", "/api/" + path, body=body)
    assert r.status == status, (r.status, r.text)
    return r.json() if r.headers["content-type"].startswith("application/json") else r


def records(t: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(t["columns"], row)) for row in t["rows"]]


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return a == b


# -- runs ----------------------------------------------------------------------------------

def test_runs_are_the_run_summary_of_the_source_files(ui_server: UiServer, ui_tree: Path) -> None:
    want = oracle.run_summary(ui_tree)
    got = {r["run_name"]: r for r in records(get(ui_server, "runs"))}
    assert set(got) == set(want)
    for name, exp in want.items():
        for col, value in exp.items():
            assert same(got[name][col], value), (name, col, got[name][col], value)


def test_runs_where_has_runs_where_semantics(ui_server: UiServer, ui_tree: Path) -> None:
    want = oracle.run_summary(ui_tree)
    res = get(ui_server, "runs", {"where": "best_reward > 0.5 and not kl_flagged"})
    expected = {n for n, r in want.items()
                if r["best_reward"] is not None and r["best_reward"] > 0.5
                and r["kl_flagged"] is False}
    assert {r["run_name"] for r in records(res)} == expected and expected


@pytest.mark.parametrize("where", ["1; drop table runs", "(select 1) = 1", "nosuchcolumn > 1",
                                   "best_reward >"])
def test_a_bad_where_is_a_400_with_a_message_and_no_traceback(ui_server: UiServer, where: str) -> None:
    res = get(ui_server, "runs", {"where": where}, status=400)
    assert res["error"] and "Traceback" not in res["error"] and 'File "' not in res["error"]


def test_config_columns_come_from_config_json(ui_server: UiServer, ui_tree: Path) -> None:
    keys = ["dataset_builder.group_size", "learning_rate", "no.such.key"]
    res = get(ui_server, "runs", {"config": keys})
    assert res["columns"][-3:] == [f"config.{k}" for k in keys]
    for row in records(res):
        run = ui_tree / row["run_name"]
        flat = oracle.flatten(json.loads((run / "config.json").read_text()))
        for k in keys:
            assert same(row[f"config.{k}"], flat.get(k)), (row["run_name"], k)


def test_config_keys_count_runs(ui_server: UiServer, ui_tree: Path) -> None:
    counts: dict[str, int] = {}
    for run in oracle.run_dirs(ui_tree):
        for k in oracle.flatten(json.loads((run / "config.json").read_text())):
            counts[k] = counts.get(k, 0) + 1
    got = {k: n for k, n in get(ui_server, "config-keys")["rows"]}
    assert got == counts


# -- SQL ------------------------------------------------------------------------------------

def test_sql_answers_columns_and_rows(ui_server: UiServer, ui_tree: Path) -> None:
    res = post(ui_server, "sql", {"sql": "select run_name, last_step from run_summary order by 1"})
    assert res["columns"] == ["run_name", "last_step"]
    want = oracle.run_summary(ui_tree)
    assert res["rows"] == [[n, want[n]["last_step"]] for n in sorted(want)]
    assert res["row_count"] == len(want) and res["truncated"] is False


def test_sql_nan_and_infinity_survive_as_text(ui_server: UiServer) -> None:
    res = post(ui_server, "sql", {"sql": "select 'nan'::double as a, 'inf'::double as b, "
                                      "'-inf'::double as c, 1.5 as d"})
    assert res["rows"] == [["NaN", "Infinity", "-Infinity", 1.5]]


def test_sql_rows_are_capped_but_counted(ui_server: UiServer) -> None:
    res = post(ui_server, "sql", {"sql": "select * from range(12000)"})
    assert res["row_count"] == 12000 and res["truncated"] is True and len(res["rows"]) == 5000


@pytest.mark.parametrize("sql, fragment", [
    ("drop table runs", "only runs queries"),
    ("insert into runs select * from runs", "only runs queries"),
    ("selec 1", "syntax error"),
    ("select * from no_such_table", "no_such_table"),
])
def test_sql_refusals_are_400_json(ui_server: UiServer, sql: str, fragment: str) -> None:
    res = post(ui_server, "sql", {"sql": sql}, status=400)
    assert fragment in res["error"] and "Traceback" not in res["error"]


@pytest.mark.parametrize("body", [{}, {"sql": ""}, {"sql": 5}, [1, 2]])
def test_sql_without_a_query_is_400(ui_server: UiServer, body: Any) -> None:
    assert "sql" in post(ui_server, "sql", body, status=400)["error"]


def test_sql_body_that_is_not_json_is_400(ui_server: UiServer) -> None:
    r = http(ui_server.url, "POST", "/api/sql", body=b"{not json",
             headers={"Content-Type": "application/json"})
    assert r.status == 400 and "not valid JSON" in r.json()["error"]


def test_sql_downloads_csv_and_parquet(ui_server: UiServer, ui_tree: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sql = "select run_name, kind, learning_rate from run_summary order by run_name"
    want = oracle.run_summary(ui_tree)
    r = http(ui_server.url, "POST", "/api/sql/download", body={"sql": sql, "format": "csv"})
    assert r.status == 200 and 'filename="query.csv"' in r.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [row["run_name"] for row in rows] == sorted(want)
    for row in rows:
        lr = want[row["run_name"]]["learning_rate"]
        assert row["kind"] == want[row["run_name"]]["kind"]
        assert (row["learning_rate"] == "") if lr is None else math.isclose(float(row["learning_rate"]), lr)
    r = http(ui_server.url, "POST", "/api/sql/download", body={"sql": sql, "format": "parquet"})
    assert r.status == 200
    table = pq.read_table(pa.BufferReader(r.body))
    assert table.column("run_name").to_pylist() == sorted(want)
    bad = http(ui_server.url, "POST", "/api/sql/download", body={"sql": sql, "format": "xlsx"})
    assert bad.status == 400


def test_views_are_documented_with_their_columns(ui_server: UiServer) -> None:
    res = get(ui_server, "views")
    sql_dir = Path(__file__).resolve().parents[2] / "sql"
    assert {v["name"] for v in res["views"]} == {p.stem for p in sql_dir.glob("*.sql")}
    for v in res["views"]:
        text = (sql_dir / f"{v['name']}.sql").read_text()
        assert v["description"] and v["columns"]
        for col, doc in v["columns"]:
            assert f"@column {col}" in text
    tables = {t["name"]: [c for c, _ in t["columns"]] for t in res["tables"]}
    assert "run_id" in tables["runs"] and "metrics_raw" in tables and "settings" not in tables


# -- series ----------------------------------------------------------------------------------

def test_series_are_the_live_metrics(ui_server: UiServer, ui_tree: Path) -> None:
    runs = ["math_rl_sweep/qwen3-8b/lr_1e-5", "gsm8k_tool_rl/sweep/lr_1e-3/seed_0"]
    res = get(ui_server, "series", {"metric": KL, "run": runs})
    assert sorted(line["run_label"] for line in res["lines"]) == sorted(runs)
    for line in res["lines"]:
        live = oracle.live_metrics(ui_tree / line["run_label"])
        want = sorted((s, float(v)) for (s, k), v in live.items() if k == KL)
        assert line["steps"] == [s for s, _ in want]
        assert line["n_points"] == len(want)
        for got, (_, exp) in zip(line["values"], want):
            assert got == pytest.approx(exp, rel=1e-6)


def test_kl_series_mark_the_points_over_the_threshold(ui_server: UiServer, ui_tree: Path) -> None:
    """Each KL line carries its points over `kl_threshold` (what the page marks): the points
    whose value, read from the files, is above 0.01 (NaN never, +Infinity always); a line of
    another metric carries none."""
    runs = ["gsm8k_tool_rl/sweep/lr_1e-3/seed_0", "math_rl_sweep/qwen3-8b/lr_1e-5"]
    res = get(ui_server, "series", {"metric": KL, "run": runs})
    marked = 0
    for line in res["lines"]:
        live = oracle.live_metrics(ui_tree / line["run_label"])
        want = sorted((s, float(v)) for (s, k), v in live.items()
                      if k == KL and not math.isnan(float(v)) and float(v) > 0.01)
        assert line["over_steps"] == [s for s, _ in want]
        assert line["over_values"] == pytest.approx([v for _, v in want], rel=1e-6)
        marked += len(want)
    assert marked > 0  # the run that fires the KL rule has points over
    reward = get(ui_server, "series", {"metric": REWARD, "run": runs})
    assert all("over_steps" not in line for line in reward["lines"])


def test_series_smoothing_is_the_debiased_ema_of_the_source_values(ui_server: UiServer, ui_tree: Path) -> None:
    run = "math_rl_sweep/qwen3-8b/lr_3e-5"
    res = get(ui_server, "series", {"metric": REWARD, "run": run, "smooth": "0.8"})
    (line,) = res["lines"]
    live = oracle.live_metrics(ui_tree / run)
    values = [float(v) for (s, k), v in sorted(live.items()) if k == REWARD]
    num = den = 0.0
    for got, x in zip(line["smoothed"], values):
        num, den = 0.8 * num + x, 0.8 * den + 1
        assert got == pytest.approx(num / den, rel=1e-6)
    assert res["smooth"] == 0.8


def test_series_every_run_when_none_named_and_step_range(ui_server: UiServer, ui_tree: Path) -> None:
    res = get(ui_server, "series", {"metric": REWARD, "step_min": 5, "step_max": 9})
    # Every run that logged the metric at a step in the range (a run that ended before step 5,
    # as the async sweep's crashed one did, has no point there).
    steps = {oracle.run_name(ui_tree, r): sorted(s for s, k in oracle.live_metrics(r)
                                                  if k == REWARD and 5 <= s <= 9)
             for r in oracle.run_dirs(ui_tree)}
    want = {name for name, got in steps.items() if got}
    assert {line["run_label"] for line in res["lines"]} == want
    assert all(line["steps"] == steps[line["run_label"]] for line in res["lines"])
    assert any(got == [5, 6, 7, 8, 9] for got in steps.values())


@pytest.mark.parametrize("params, fragment", [
    ({}, "metric"), ({"metric": REWARD, "smooth": "1"}, "[0, 1)"),
    ({"metric": REWARD, "smooth": "x"}, "number"), ({"metric": REWARD, "step_min": "a"}, "integer"),
])
def test_series_bad_parameters(ui_server: UiServer, params: dict[str, str], fragment: str) -> None:
    assert fragment in get(ui_server, "series", params, status=400)["error"]


# -- checkpoints -----------------------------------------------------------------------------

def test_checkpoints_latest_and_best(ui_server: UiServer, ui_tree: Path) -> None:
    res = get(ui_server, "checkpoints")
    want = oracle.latest_checkpoints(ui_tree)
    latest = {r["run_name"]: r for r in records(res["latest"])}
    assert set(latest) == set(want)
    for name, exp in want.items():
        for col, value in exp.items():
            assert same(latest[name][col], value), (name, col)
    trends = oracle.reward_trends(ui_tree)
    best: dict[str, tuple[float, str]] = {}
    for run in oracle.run_dirs(ui_tree):
        name = oracle.run_name(ui_tree, run)
        steps = sorted((s, t[1]) for (n, s), t in trends.items() if n == name)
        for seq, rec in enumerate(oracle.checkpoint_records(run)):
            before = [ma for s, ma in steps if s < rec["batch"] and ma is not None]
            if before and (name not in best or before[-1] >= best[name][0]):
                best[name] = (before[-1], rec["name"])
    got = {r["run_label"]: r for r in records(res["best"])}
    assert set(got) == set(best)
    for name, (ma, ckpt) in best.items():
        assert got[name]["best_name"] == ckpt and got[name]["best_reward_ma10"] == pytest.approx(ma)


# -- timing ----------------------------------------------------------------------------------

def test_timing_steps_spans_and_slowest(ui_server: UiServer, ui_tree: Path) -> None:
    run = "gsm8k_tool_rl/sweep/lr_1e-4/seed_0"
    live = oracle.live_spans(ui_tree / run)
    steps = records(get(ui_server, "timing/steps", {"run": run}))
    assert [s["step"] for s in steps] == sorted(live)
    for s in steps:
        assert s["n_spans"] == len(live[s["step"]])
    spans = records(get(ui_server, "timing/spans", {"run": run, "step": 12}))
    assert sorted((x["name"], round(x["duration_s"], 9)) for x in spans) == \
        sorted((x["name"], round(x["duration"], 9)) for x in live[12])
    slow = {r["name"]: r for r in records(get(ui_server, "timing/slowest", {"run": run}))}
    want = {name: v for (n, name), v in oracle.slowest_spans(ui_tree).items() if n == run}
    assert set(slow) == set(want)
    for name, exp in want.items():
        assert slow[name]["calls"] == exp["calls"]
        assert slow[name]["total_s"] == pytest.approx(exp["total_s"])
    assert set(get(ui_server, "timing/runs")["rows"][i][1] for i in range(3)) <= {
        oracle.run_name(ui_tree, r) for r in oracle.run_dirs(ui_tree) if oracle.live_spans(r)}


def test_trace_download_is_the_steps_spans_as_chrome_events(ui_server: UiServer, ui_tree: Path) -> None:
    # A run without trace_events.jsonl: the export is its timing spans.
    run = next(oracle.run_name(ui_tree, r) for r in oracle.run_dirs(ui_tree)
               if 3 in oracle.live_spans(r) and not (r / "trace_events.jsonl").exists())
    r = http(ui_server.url, "GET", "/api/trace?" + urlencode({"run": run, "step": 3}))
    assert r.status == 200 and r.headers["content-disposition"].endswith('.trace.json"')
    events = json.loads(r.body)
    slices = sorted((e["name"], round(e["dur"])) for e in events if e["ph"] == "X")
    want = sorted((s["name"], round(s["duration"] * 1e6)) for s in oracle.live_spans(ui_tree / run)[3])
    assert want
    # Plus one slice spanning the step itself.
    assert [x for x in slices if x[0] != "step 3"] == want
    assert [x[0] for x in slices].count("step 3") == 1


def test_timing_of_an_unknown_run_and_a_missing_step_are_400(ui_server: UiServer) -> None:
    # A run no RUN resolution finds is a 400 naming it (it was an empty table, which looked
    # like a run without spans).
    assert "no run is named or matches 'no/such/run'" in get(
        ui_server, "timing/steps", {"run": "no/such/run"}, status=400)["error"]
    assert "step" in get(ui_server, "timing/spans", {"run": "x"}, status=400)["error"]
    assert get(ui_server, "trace", {"run": "no/such/run"}, status=400)["error"]


# -- rollouts --------------------------------------------------------------------------------

def test_rollout_index_and_trajectories_sorted_by_reward(ui_server: UiServer, ui_tree: Path) -> None:
    run = "math_rl_sweep/qwen3-8b/lr_1e-5"
    rewards = {k[1:]: v for k, v in oracle.rollout_rewards(ui_tree).items() if k[0] == run}
    index = records(get(ui_server, "rollouts/index", {"run": run}))
    counts: dict[tuple[str, int], int] = {}
    for split, it, _, _ in rewards:
        counts[(split, it)] = counts.get((split, it), 0) + 1
    assert {(r["split"], r["iteration"]): r["n_trajectories"] for r in index
            if r["n_trajectories"]} == counts
    traj = records(get(ui_server, "rollouts/trajectories",
                       {"run": run, "split": "eval/test", "iteration": 0}))
    want = sorted(v for (s, it, _, _), v in rewards.items() if (s, it) == ("eval/test", 0))
    assert [t["total_reward"] for t in traj] == want


def test_conversation_messages_are_the_logtrees(ui_server: UiServer, ui_tree: Path) -> None:
    run = "math_rl_sweep/qwen3-8b/lr_1e-5"
    convs = records(get(ui_server, "rollouts/conversations",
                        {"run": run, "split": "eval/test", "iteration": 0}))
    want = [c for c in oracle.logtree_conversations(ui_tree)
            if (c["run_name"], c["split"], c["iteration"]) == (run, "eval/test", 0)]
    assert len(convs) == len(want) > 0
    for c in convs:
        index = int(c["conversation_id"].rsplit(":", 1)[1])
        res = get(ui_server, "rollouts/conversation", {"run": run, "id": c["conversation_id"]})
        (got,) = res["conversations"]
        assert [(m["role"], m["content"]) for m in got["messages"]] == want[index]["messages"]


def test_trajectory_conversations_are_the_ones_of_that_trajectory(ui_server: UiServer, ui_tree: Path) -> None:
    run = "math_rl_sweep/qwen3-8b/lr_1e-5"
    convs = records(get(ui_server, "rollouts/conversations",
                        {"run": run, "split": "eval/test", "iteration": 0}))
    tied = [c for c in convs if c["traj_idx"] is not None]
    assert tied
    for c in tied:
        res = get(ui_server, "rollouts/conversation", {"run": run, "split": "eval/test",
                                                    "iteration": 0, "group": c["group_idx"],
                                                    "traj": c["traj_idx"]})
        assert res["exact"] is True
        assert c["conversation_id"] in [x["conversation_id"] for x in res["conversations"]]
        assert all(x["traj_idx"] == c["traj_idx"] for x in res["conversations"])


def test_search_counts_every_matching_message(ui_server: UiServer, ui_tree: Path) -> None:
    convs = oracle.logtree_conversations(ui_tree)
    for q in ["boxed", "BOXED", "calculator", "zzz-nothing"]:
        want = sum(1 for c in convs for _, text in c["messages"] if q.lower() in (text or "").lower())
        res = get(ui_server, "search", {"q": q})
        assert res["total"] == want, q
        for row in res["rows"]:
            assert row["snippet"]["match"].lower() == q.lower()
    want_user = sum(1 for c in convs for role, text in c["messages"]
                    if role == "user" and "train" in (text or "").lower())
    assert get(ui_server, "search", {"q": "train", "role": "user"})["total"] == want_user


def test_search_text_is_a_value_not_sql(ui_server: UiServer) -> None:
    for q in ["'; drop table runs; --", "%", "_", "$q"]:
        res = get(ui_server, "search", {"q": q})
        assert res["total"] >= 0


# -- status and errors -----------------------------------------------------------------------

def test_status(ui_server: UiServer, ui_tree: Path) -> None:
    res = get(ui_server, "status")
    assert res["runs"] == len(oracle.run_dirs(ui_tree)) and res["snapshot"] >= 1
    assert res["kl_threshold"] == 0.01 and KL in res["kl_keys"]
    assert res["default_metrics"] == [REWARD, KL]
    assert get(ui_server, "settings") == {"kl_threshold": 0.01}


def test_unknown_endpoint_and_method(ui_server: UiServer) -> None:
    r = http(ui_server.url, "GET", "/api/nope")
    assert r.status == 404 and "no endpoint" in r.json()["error"]
    r = http(ui_server.url, "GET", "/api/sql")
    assert r.status == 405 and r.json()["error"]


def test_pages_are_the_app_shell(ui_server: UiServer) -> None:
    for page in ["/", "/runs", "/charts", "/sql", "/checkpoints", "/timing", "/rollouts"]:
        r = http(ui_server.url, "GET", page + "?run=" + quote("a/b", safe=""))
        assert r.status == 200 and b'src="/static/js/main.js"' in r.body
    r = http(ui_server.url, "GET", "/static/vendor/plotly.min.js", headers={"Accept-Encoding": "gzip"})
    assert r.status == 200 and r.headers["content-encoding"] == "gzip"
    again = http(ui_server.url, "GET", "/static/vendor/plotly.min.js",
                 headers={"If-None-Match": r.headers["etag"]})
    assert again.status == 304


def test_answers_are_cached_per_snapshot() -> None:
    from runstore.ui.api import Api, Params

    class Counting:
        seq = 1

        def snapshot(self) -> int:
            return self.seq

    store = Counting()
    api = Api(store)  # type: ignore[arg-type]
    calls: list[Any] = []

    def method(p: Params) -> Any:
        calls.append(p.items)
        return {"n": len(calls)}

    answer = api.cached("x", method)
    assert answer(Params([("a", "1")])) == {"n": 1}
    assert answer(Params([("a", "1")])) == {"n": 1}  # same request, same snapshot
    assert answer(Params([("a", "2")])) == {"n": 2}  # another request
    store.seq = 2
    assert answer(Params([("a", "1")])) == {"n": 3}  # a new snapshot answers afresh
    assert len(calls) == 3


def test_docs_list_every_endpoint(ui_demo: tuple[Path, Path]) -> None:
    import re

    import runstore
    from runstore.ui.app import create_app
    from runstore.ui.security import Policy

    app = create_app(runstore.open(ui_demo[1]), Policy("127.0.0.1", 8765))
    while not hasattr(app, "routes"):  # inside the middlewares (transport.Limits, security.Guard)
        app = app.app
    served = {r.path for r in app.routes if r.path.startswith("/api/")}
    text = (Path(__file__).resolve().parents[2] / "docs" / "ui.md").read_text()
    documented = set(re.findall(r"^\| `(?:GET|POST) (/api/[a-z/-]+)", text, re.M))
    assert documented == served


def test_trajectory_transcript_counts_are_the_conversations_listed(ui_server: UiServer) -> None:
    # The page's "transcripts" column: conversations tied to the trajectory, else to its
    # group (`conversations_of`), as the iteration's conversation list says.
    seen = set()
    for run in ("math_rl_sweep/qwen3-8b/lr_1e-5", "gsm8k_tool_rl/sweep/lr_1e-4/seed_0"):
        for r in records(get(ui_server, "rollouts/index", {"run": run})):
            if not (r["n_trajectories"] and r["n_conversations"]):
                continue
            where = {"run": run, "split": r["split"], "iteration": r["iteration"]}
            convs = records(get(ui_server, "rollouts/conversations", where))
            traj = records(get(ui_server, "rollouts/trajectories", where))
            assert len(traj) == r["n_trajectories"]
            for t in traj:
                exact = sum(c["group_idx"] == t["group_idx"] and c["traj_idx"] == t["traj_idx"]
                            for c in convs)
                group = sum(c["group_idx"] == t["group_idx"] and c["traj_idx"] is None
                            for c in convs)
                want = ("trajectory", exact) if exact else ("group", group) if group else (None, 0)
                assert (t["conversations_of"], t["n_conversations"]) == want, (where, t)
                seen.add(want[0])
    assert {"trajectory", "group"} <= seen  # both kinds were met
