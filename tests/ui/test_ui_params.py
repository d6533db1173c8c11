"""Hostile query parameters against a real `runstore ui` server on 127.0.0.1: each answer is a
4xx JSON error naming the parameter, or the answer the Python API (`runstore.open`) gives for
the same question, never a 500 or a DuckDB message."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

import runstore
from ui_harness import UiServer, http

REWARD = "env/all/reward/total"
RUN = "math_rl_sweep/qwen3-8b/lr_1e-5"


def answer(ui_server: UiServer, path: str, params: Any) -> tuple[int, Any]:
    r = http(ui_server.url, "GET", "/api/" + path + "?" + urlencode(params, doseq=True))
    assert r.headers["content-type"].startswith("application/json"), (r.status, r.text)
    return r.status, r.json()


@pytest.mark.parametrize("x", ["time", "step"])
@pytest.mark.parametrize("name", ["step_min", "step_max"])
@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity", "1e400"])
def test_a_bound_that_is_not_a_finite_number_is_a_400(ui_server: UiServer, x: str, name: str,
                                                        value: str) -> None:
    status, body = answer(ui_server, "series", {"metric": REWARD, "run": RUN, "x": x,
                                                name: value})
    assert status == 400, body
    assert name in body["error"] and ("finite" in body["error"] or "integer" in body["error"])


def test_a_finite_time_bound_cuts_the_runs_wall_time(ui_server: UiServer,
                                                     ui_demo: tuple[Path, Path]) -> None:
    with runstore.open(ui_demo[1]) as store:
        times = store.compare(REWARD, runs=RUN, x="time")["time_s"].to_list()
    status, body = answer(ui_server, "series", {"metric": REWARD, "run": RUN, "x": "time",
                                                "step_min": "-1e308", "step_max": times[3]})
    assert status == 200, body
    assert body["groups"][0]["x"] == pytest.approx(times[:4])


BEYOND = [str(2 ** 63), str(-(2 ** 63) - 1), "1" + "0" * 45, "9" * 5000]


@pytest.mark.parametrize("path, params, name", [
    ("series", {"metric": REWARD, "run": RUN}, "step_min"),
    ("series", {"metric": REWARD, "run": RUN, "x": "time"}, "mark_step"),
    ("timing/spans", {"run": RUN}, "step"),
    ("trace", {"run": RUN}, "step"),
    ("rollouts/trajectories", {"run": RUN, "split": "train"}, "iteration"),
    ("rollouts/conversation", {"run": RUN, "split": "train", "iteration": 0, "traj": 0},
     "group"),
])
@pytest.mark.parametrize("value", BEYOND, ids=["2**63", "-2**63-1", "10**45", "5000 digits"])
def test_an_integer_beyond_int64_is_a_400_naming_it(ui_server: UiServer, path: str,
                                                   params: dict[str, Any], name: str,
                                                   value: str) -> None:
    status, body = answer(ui_server, path, {**params, name: value})
    assert status == 400, body
    assert name in body["error"] and "Error:" not in body["error"], body
    assert len(body["error"]) < 300  # the 5,000 digits are not echoed back


def test_the_largest_int64_is_a_step_like_any_other(ui_server: UiServer,
                                                   ui_demo: tuple[Path, Path]) -> None:
    with runstore.open(ui_demo[1]) as store:
        steps = store.metrics(REWARD, runs=RUN)["step"].to_list()
    status, body = answer(ui_server, "series", {"metric": REWARD, "run": RUN,
                                                "step_min": str(-(2 ** 63)),
                                                "step_max": str(2 ** 63 - 1)})
    assert status == 200, body
    assert body["lines"][0]["steps"] == sorted(steps)


@pytest.mark.parametrize("limit", ["0", "-1", str(-(2 ** 63))])
def test_a_search_limit_below_one_is_a_400(ui_server: UiServer, limit: str) -> None:
    status, body = answer(ui_server, "search", {"q": "the", "limit": limit})
    assert status == 400, body
    assert "limit" in body["error"] and "Error:" not in body["error"]


def test_a_search_limit_keeps_the_first_rows(ui_server: UiServer,
                                             ui_demo: tuple[Path, Path]) -> None:
    with runstore.open(ui_demo[1]) as store:
        n = store.sql("select count(*) as n from transcripts "
                      "where contains(lower(content), 'the')")["n"][0]
    _, every = answer(ui_server, "search", {"q": "the", "limit": "1000"})
    assert every["total"] == n and len(every["rows"]) == min(n, 1000)
    _, three = answer(ui_server, "search", {"q": "the", "limit": "3"})
    assert three["rows"] == every["rows"][:3] and three["truncated"]


def test_search_answers_what_store_search_does(ui_server: UiServer,
                                              ui_demo: tuple[Path, Path]) -> None:
    """/api/search is `Store.search` (statement `browse.search`: which messages match, their
    order, the text around the match), its snippet split at the match for the page to mark."""
    with runstore.open(ui_demo[1]) as store:
        want = store.search("Boxed", context=80, limit=1000).to_dicts()
    _, got = answer(ui_server, "search", {"q": "Boxed", "limit": "1000"})
    assert want and got["total"] == want[0]["n_total"] and len(got["rows"]) == len(want)
    for g, w in zip(got["rows"], want):
        cut = g["snippet"]
        assert cut["before"] + cut["match"] + cut["after"] == w["snippet"]
        assert cut["match"].lower() == "boxed" and not cut["before"].lower().count("boxed")
        assert (g["run_id"], g["conversation_id"], g["message_idx"]) == (
            w["run_id"], w["conversation_id"], w["message_idx"])


@pytest.mark.parametrize("x", ["step", "time"])
@pytest.mark.parametrize("metric", ["env/all/rewrd/total", "env/all/reward/total ", "a\"b'c"])
def test_a_metric_no_run_logs_is_the_apis_400_on_every_axis(ui_server: UiServer,
                                                           ui_demo: tuple[Path, Path],
                                                           metric: str, x: str) -> None:
    with runstore.open(ui_demo[1]) as store, pytest.raises(runstore.RunstoreError) as refused:
        store.metrics(metric, runs=RUN)
    status, body = answer(ui_server, "series", {"metric": metric, "run": RUN, "x": x})
    assert status == 400 and body["error"] == str(refused.value)


def test_a_metric_only_other_runs_log_is_no_line(ui_server: UiServer,
                                                 ui_demo: tuple[Path, Path]) -> None:
    with runstore.open(ui_demo[1]) as store:
        assert store.metrics("accuracy", runs=RUN).height == 0
    status, body = answer(ui_server, "series", {"metric": "accuracy", "run": RUN})
    assert status == 200 and body["lines"] == []


def test_a_config_key_asked_twice_is_one_column(ui_server: UiServer,
                                                ui_demo: tuple[Path, Path]) -> None:
    key = "dataset_builder.group_size"
    status, body = answer(ui_server, "runs", {"config": [key, "learning_rate", key]})
    assert status == 200, body
    assert body["columns"][-2:] == [f"config.{key}", "config.learning_rate"]
    assert body["config_keys"] == [key, "learning_rate"]
    assert len(set(body["columns"])) == len(body["columns"])
    with runstore.open(ui_demo[1]) as store:
        assert len(body["rows"]) == store.runs().height
    assert all(len(row) == len(body["columns"]) for row in body["rows"])


def test_head_of_the_event_stream_is_its_head_and_ends(ui_server: UiServer) -> None:
    """A HEAD asks for the head alone: the answer ends (the server closes a `Connection:
    close` request) instead of holding the connection for a stream it never sends."""
    import socket

    with socket.create_connection(("127.0.0.1", ui_server.port), timeout=30) as sock:
        sock.sendall(b"HEAD /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Connection: close\r\n\r\n")
        got = b""
        while chunk := sock.recv(65536):  # a socket.timeout here is the hang
            got += chunk
    head, _, rest = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"text/event-stream" in head.lower()
    assert rest == b""


@pytest.mark.parametrize("path, params, name", [
    ("series", {"run": RUN}, "metric"),
    ("series", {"metric": REWARD, "run": RUN}, "x"),
    ("rollouts/trajectories", {"run": RUN, "split": "train"}, "iteration"),
    ("timing/spans", {"run": RUN}, "step"),
])
def test_a_one_value_parameter_given_twice_is_a_400(ui_server: UiServer, path: str,
                                                    params: dict[str, Any], name: str) -> None:
    # It was read as the last of them: `metric=A&metric=B` charted B alone, saying nothing.
    first = {"metric": REWARD, "x": "step", "iteration": "0", "step": "0"}[name]
    second = {"metric": "optim/kl_sample_train_v1", "x": "time", "iteration": "10",
              "step": "1"}[name]
    status, body = answer(ui_server, path, {**params, name: [first, second]})
    assert status == 400, body
    assert f"'{name}' is given 2 times" in body["error"], body


@pytest.mark.parametrize("value, every", [("1", True), ("TRUE", True), ("yes", True),
                                          ("0", False), ("False", False), ("", False)])
def test_diff_all_reads_true_and_false_in_any_case(ui_server: UiServer, ui_demo: tuple[Path, Path],
                                                   value: str, every: bool) -> None:
    other = "gsm8k_tool_rl/sweep/lr_3e-4/seed_0"
    status, body = answer(ui_server, "diff", {"run": [RUN, other], "all": value})
    assert status == 200, body
    with runstore.open(ui_demo[1]) as store:
        want = store.diff([RUN, other], all=every)
    assert len(body["diff"]["rows"]) == want.height


def test_diff_all_that_is_no_yes_or_no_is_a_400(ui_server: UiServer) -> None:
    status, body = answer(ui_server, "diff", {"run": [RUN, RUN], "all": "maybe"})
    assert status == 400 and "'all' is true or false" in body["error"], body
