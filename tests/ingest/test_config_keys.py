"""Flattened config keys are unambiguous: `{"a.b": 1, "a": {"b": 2}}` is not `{"a": {"b": 2}}`.

* The rule (docs/schema.md): a key part is written as it is unless it could be misread
  (empty, a `.`, a `,` or a control character in it, a leading `"`, spaces at its ends), and
  then as a JSON string. Hypothesis: any path of parts is written so that `split_key` reads
  the same parts back (so two paths never share a key), and a list of keys typed with commas
  (`--group-by`) is read back as those keys.
* The ingest's `config` rows equal tests/oracle.py's independent flattening, awkward keys
  included; `diff`, `compare --group-by` and the web UI's config columns (a real server)
  show `"a.b"` and `a.b` apart.
* Migration 0007 on tests/fixtures/store_v6 (a store written by runstore at schema version 6,
  before the rule): before migrating, queries answer with the old keys (the two keys read
  as one); after `runstore migrate` the rows equal a fresh ingest's, and a kill at every
  step of the migration leaves a store that answers and that the next `migrate` completes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

import oracle
import runstore
from runstore.cli import main
from runstore.ingest.normalize.config import flat_key, key_part, split_key, split_keys
from storekit import kill_at

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STORE_V6 = FIXTURES / "store_v6"
RUNS_V6 = FIXTURES / "runs_v6"

PART = st.one_of(st.text(max_size=8), st.sampled_from(
    ["", ".", "..", "a.b", ",", '"', '"x"', 'say "hi"', " x", "x ", "\t", "seed", "é.ü",
     "\\", '\\"', "\x00", "null", "1.5"]))


@given(st.lists(PART, min_size=1, max_size=5))
@settings(max_examples=400, deadline=None)
def test_a_key_reads_back_as_its_path(parts: list[str]) -> None:
    key = flat_key(parts)
    assert split_key(key) == parts
    # Each part is bare or one JSON string; a bare part has no dot, comma or leading quote.
    for part in parts:
        written = key_part(part)
        assert written == part or json.loads(written) == part
        if written == part:
            assert part and "." not in part and "," not in part and not part.startswith('"')


@given(st.lists(st.lists(PART, min_size=1, max_size=3), min_size=1, max_size=4))
@settings(max_examples=300, deadline=None)
def test_typed_key_lists_read_back(paths: list[list[str]]) -> None:
    keys = [flat_key(p) for p in paths]
    assert split_keys(", ".join(keys)) == keys
    assert split_keys(",".join(keys)) == keys


def test_the_example_of_the_issue() -> None:
    from runstore.ingest.normalize.config import flatten

    assert flatten({"a.b": 1, "a": {"b": 2}}) == [('"a.b"', 1), ("a.b", 2)]
    assert flatten({"a": {"b": 2}}) == [("a.b", 2)]
    assert oracle.flatten({"a.b": 1, "a": {"b": 2}}) == {'"a.b"': 1, "a.b": 2}


# ---------------------------------------------------------------------------------------------
# A store ingested with the rule


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture's run tree ingested now."""
    base = tmp_path_factory.mktemp("keys")
    shutil.copytree(RUNS_V6, base / "runs")
    runstore.open(base / "store").ingest([base / "runs"])
    return base / "store"


def stored_config(store: Path) -> dict[str, dict[str, Any]]:
    rows = runstore.open(store).arrow(
        "select r.run_name, c.key, c.value from config c join runs r using (run_id)")
    out: dict[str, dict[str, Any]] = {}
    for r in rows.to_pylist():
        out.setdefault(r["run_name"], {})[r["key"]] = json.loads(r["value"])
    return out


def expected_config() -> dict[str, dict[str, Any]]:
    return {f"dotted/{d.name}": oracle.flatten(json.loads((d / "config.json").read_text()))
            for d in sorted((RUNS_V6 / "dotted").iterdir())}


def test_ingested_keys_equal_the_oracle(keyed: Path) -> None:
    got = stored_config(keyed)
    assert got == expected_config()
    assert got["dotted/both"] == {'"a.b"': 1, "a.b": 2, "learning_rate": 1e-4, "model_name": "m"}


def cli(store: Path, *args: str) -> Any:
    return CliRunner().invoke(main, ["--store", str(store), *args])


def test_diff_shows_the_difference(keyed: Path) -> None:
    result = cli(keyed, "diff", "dotted/both", "dotted/nested", "-F", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"key": '"a.b"', "dotted/both": "1",
                                          "dotted/nested": None}]


def test_compare_groups_by_a_quoted_key(keyed: Path) -> None:
    result = cli(keyed, "compare", "env/all/reward/total", "--group-by", '"a.b",learning_rate',
                 "-F", "json")
    assert result.exit_code == 0, result.output
    groups = {r["group"] for r in json.loads(result.stdout)}
    assert groups == {'"a.b"=1, learning_rate=0.0001', '"a.b"=(missing), learning_rate=0.0001',
                      '"a.b"=(missing), learning_rate=0.0003'}
    result = cli(keyed, "compare", "env/all/reward/total", "--group-by", "a.b", "-F", "json")
    assert {r["group"] for r in json.loads(result.stdout)} == {"a.b=2", "a.b=(missing)"}
    result = cli(keyed, "compare", "env/all/reward/total", "--group-by", '"x,y"', "-F", "json")
    assert {r["group"] for r in json.loads(result.stdout)} == {'"x,y"=2', '"x,y"=(missing)'}


def test_the_ui_shows_both_config_columns(keyed: Path) -> None:
    from ui_harness import UiServer, http

    with UiServer(keyed) as server:
        query = urlencode({"config": ['"a.b"', "a.b"]}, doseq=True)
        r = http(server.url, "GET", "/api/runs?" + query)
        assert r.status == 200, r.text
        res = r.json()
    assert res["columns"][-2:] == ['config."a.b"', "config.a.b"]
    by_run = {row[res["columns"].index("run_name")]: row[-2:] for row in res["rows"]}
    assert by_run == {"dotted/both": [1, 2], "dotted/nested": [None, 2],
                      "dotted/odd": [None, None]}


# ---------------------------------------------------------------------------------------------
# Migration 0007


def test_a_store_from_before_the_rule_answers_then_migrates(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(STORE_V6, store)
    # Before migrating: the keys as they were written (a dotted key and a nested path are one
    # key), and every query answers.
    before = runstore.open(store).arrow(
        "select key from config c join runs r using (run_id) where run_name = 'dotted/both' "
        "order by key").column("key").to_pylist()
    assert before == ["a.b", "a.b", "learning_rate", "model_name"]
    assert cli(store, "diff", "dotted/both", "dotted/nested").exit_code == 0
    listed = cli(store, "migrate", "--list")
    assert "pending  0007_config_keys" in listed.stdout
    migrated = cli(store, "migrate")
    assert migrated.exit_code == 0 and "applied 0007_config_keys" in migrated.stdout
    assert stored_config(store) == expected_config()
    # The other columns of each row as a fresh ingest writes them.
    fresh = tmp_path / "fresh"
    runstore.open(fresh).ingest([RUNS_V6])
    cols = "r.run_name, c.key, c.value, c.value_num, c.value_str"
    q = f"select {cols} from config c join runs r using (run_id) order by all"
    assert runstore.open(store).arrow(q).to_pylist() == runstore.open(fresh).arrow(q).to_pylist()
    again = cli(store, "migrate")
    assert again.exit_code == 0 and "applied" not in again.stdout.split("schema version")[0]


@pytest.mark.slow
def test_a_killed_migration_is_completed_by_the_next(tmp_path: Path) -> None:
    want = expected_config()
    point = 1
    while True:
        store = tmp_path / f"store{point}"
        shutil.copytree(STORE_V6, store)
        cmd = [sys.executable, "-m", "runstore", "--store", str(store), "migrate"]
        paused = kill_at(cmd, dict(os.environ), f"migrate:{point}")
        # Killed (or finished): the store answers, then `migrate` completes it.
        assert runstore.open(store).arrow("select count(*) as n from config").num_rows == 1
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert stored_config(store) == want
        if not paused:
            break
        point += 1
    assert point > 1  # the migration was killed at least once on its way
