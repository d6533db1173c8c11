"""When two config values are equal: `runstore diff`, `compare --group-by` and `compare_runs`.

One rule (analysis.groups.comparable) decides for all three: numbers are equal when their
exact values are (1 and 1.0; never 2**60 and 2**60 + 1, which one double holds), anything
else when its JSON text is. The expected answers come from the config.json files themselves,
compared in the test with exact arithmetic (fractions.Fraction, never a float).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import runstore
import storekit
from conftest import examples
from runstore.analysis import diff as diff_mod
from runstore.analysis import groups as groups_mod

METRIC = "loss"
SEEDS = (2 ** 60, 2 ** 60 + 1)  # one double holds both


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def exact(v: int | float) -> Fraction | str:
    """A JSON number's exact value: a Fraction, or the name of a float that has none."""
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)  # 'nan', 'inf', '-inf': NaN equals NaN, as runstore's docs say
    return Fraction(v)


def same(a: Any, b: Any) -> bool:
    """Whether the config values `a` and `b` (as json.loads reads them) are equal: numbers
    (not booleans) by exact value; non-empty objects key by key (they flatten into one key
    per leaf); anything else, lists included, when the JSON texts are."""
    if is_number(a) and is_number(b):
        return exact(a) == exact(b)
    if is_number(a) or is_number(b):
        return False
    if isinstance(a, dict) and a and isinstance(b, dict) and b:
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return json.dumps(a) == json.dumps(b)


def as_float(v: int) -> float:
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


BIG = [2 ** 53, 2 ** 53 + 1, *SEEDS, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1, 2 ** 64, 2 ** 64 + 1,
       10 ** 20 + 1, 2 ** 200 + 1, 10 ** 400]
integers = st.one_of(st.integers(-2 ** 70, 2 ** 70), st.sampled_from(BIG + [-b for b in BIG]),
                     st.integers())
scalars = st.one_of(integers, st.floats(), st.booleans(), st.none(),
                    st.text(st.characters(blacklist_categories=("Cs",)), max_size=4))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from("abc"), inner, max_size=3), max_leaves=5)


def near(v: Any) -> st.SearchStrategy[Any]:
    """Values equal to `v` or nearly: a number written the other way (int or float), one
    away, one ulp away; a list or object of such values."""
    if isinstance(v, bool) or not isinstance(v, (int, float, list, dict)):
        return st.just(v)
    if isinstance(v, int):
        return st.sampled_from([v, v + 1, v - 1, as_float(v)])
    if isinstance(v, float):
        twins = [v, math.nextafter(v, math.inf), math.nextafter(v, -math.inf)]
        if math.isfinite(v) and v.is_integer():
            twins += [int(v), int(v) + 1]
        return st.sampled_from(twins)
    if isinstance(v, list):
        return st.tuples(*map(near, v)).map(list)
    return st.fixed_dictionaries({k: near(x) for k, x in v.items()})


pairs = values.flatmap(lambda a: st.tuples(st.just(a), st.one_of(near(a), values)))


def two_runs(base: Path, first: dict[str, Any], second: dict[str, Any]) -> runstore.Store:
    """A store of runs `s1` and `s2` with these configs (and one metric point each)."""
    for name, config in (("s1", first), ("s2", second)):
        run = base / "runs" / name
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps(config))
        (run / "metrics.jsonl").write_text(json.dumps({"step": 0, METRIC: 1.0}) + "\n")
    store = runstore.open(base / "store")
    store.ingest([base / "runs"], on_warning=lambda text: None)
    return store


@settings(max_examples=examples(50), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(pairs, min_size=1, max_size=12))
def test_diff_and_groups_call_values_equal_exactly_when_they_are(
        tmp_path_factory: pytest.TempPathFactory, drawn: list[tuple[Any, Any]]) -> None:
    keys = [f"k{i}" for i in range(len(drawn))]
    first, second = ({k: pair[j] for k, pair in zip(keys, drawn)} for j in (0, 1))
    store = two_runs(tmp_path_factory.mktemp("equality"), first, second)
    want = {k: not same(a, b) for k, (a, b) in zip(keys, drawn)}

    everything = diff_mod.diff_rows(store, ["s1", "s2"], all=True)
    assert everything.column_names == ["key", "s1", "s2", "differs"]
    got: dict[str, bool] = {}
    for key, _, _, differs in everything.data:
        if key != diff_mod.CODE_KEY:  # a nested object's leaves: k0.a, k0.b.c, ...
            got[key.split(".")[0]] = got.get(key.split(".")[0], False) or differs
    assert got == want
    shown = diff_mod.diff_rows(store, ["s1", "s2"]).data
    assert [row[0] for row in shown] == [row[0] for row in everything.data if row[3]]

    for key, (a, b) in zip(keys, drawn):
        if isinstance(a, dict) and a or isinstance(b, dict) and b:
            continue  # not one key: its leaves are
        members = groups_mod.group_rows(store, group_by=key).data
        label = {row[1]: row[3] for row in members}  # run_name: group
        assert (label["s1"] == label["s2"]) == same(a, b), (key, label)
        if isinstance(a, int) and not isinstance(a, bool):
            assert label["s1"] == f"{key}={a}"  # an integer as written, however large
    auto = {row[1]: row[3] for row in groups_mod.group_rows(store, group_by="auto").data}
    assert (auto["s1"] == auto["s2"]) == all(same(a, b) for a, b in drawn)


@pytest.fixture(scope="module")
def seeds_store(tmp_path_factory: pytest.TempPathFactory) -> runstore.Store:
    """The tester's report: two runs whose seeds and `big` differ past what a double holds."""
    base = tmp_path_factory.mktemp("seeds")
    return two_runs(base, {"seed": SEEDS[0], "big": 2 ** 63 - 1},
                    {"seed": SEEDS[1], "big": 2 ** 63 - 2})


def test_diff_shows_large_integers_that_differ(seeds_store: runstore.Store) -> None:
    result = storekit.cli(seeds_store, "diff", "s1", "s2", "-F", "csv")
    assert result.exit_code == 0, result.output
    assert result.stdout == ("key,s1,s2\n"
                             f"big,{2 ** 63 - 1},{2 ** 63 - 2}\n"
                             f"seed,{SEEDS[0]},{SEEDS[1]}\n")
    result = storekit.cli(seeds_store, "diff", "s1", "s2", "--all", "-F", "csv")
    assert result.stdout == ("key,s1,s2,differs\n"
                             f"big,{2 ** 63 - 1},{2 ** 63 - 2},True\n"
                             f"seed,{SEEDS[0]},{SEEDS[1]},True\n"
                             "code.diff,,,False\n")


def test_compare_groups_large_seeds_apart_labelled_exactly(seeds_store: runstore.Store) -> None:
    result = storekit.cli(seeds_store, "compare", METRIC, "--group-by", "seed", "-F", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    # Two groups, in the seeds' order; the column holds the double both seeds round to.
    assert [r["group"] for r in rows] == [f"seed={s}" for s in SEEDS]
    assert [(r["n"], r["mean"]) for r in rows] == [(1, 1.0), (1, 1.0)]
    assert [r["seed"] for r in rows] == [float(SEEDS[0])] * 2
    members = seeds_store.groups(group_by="seed")
    assert members.select("run_name", "group").rows() == [("s1", f"seed={SEEDS[0]}"),
                                                          ("s2", f"seed={SEEDS[1]}")]
    # `auto` sets the seeds aside, and names the groups by the key that tells them apart
    # (ordered by label).
    auto = seeds_store.groups(group_by="auto").select("run_name", "group").rows()
    assert auto == [("s2", f"big={2 ** 63 - 2}"), ("s1", f"big={2 ** 63 - 1}")]


def test_an_integer_and_a_float_of_one_value_are_one_group(tmp_path: Path) -> None:
    # 2**60 written as an integer and as a float is one value: one group, labelled by the
    # integer; 1 and 1.0 too. A float alone keeps its double's label.
    store = two_runs(tmp_path, {"seed": 2 ** 60, "one": 1.0, "f": 1e16},
                     {"seed": float(2 ** 60), "one": 1, "f": 1e16})
    assert diff_mod.diff_rows(store, ["s1", "s2"]).data == []
    labels = {key: set(store.groups(group_by=key)["group"]) for key in ("seed", "one", "f")}
    assert labels == {"seed": {f"seed={2 ** 60}"}, "one": {"one=1"}, "f": {"f=1e+16"}}


def test_compare_runs_tool_tells_large_seeds_apart(seeds_store: runstore.Store) -> None:
    from runstore.agents.tools import runs
    from runstore.agents.tools.base import State

    box = runs.RunTools(State(str(seeds_store.path)))
    text = box.compare_runs(["s1", "s2"], metric=METRIC, group_by="seed", format="csv")
    assert f"seed,{SEEDS[0]},{SEEDS[1]}" in text
    assert f"seed={SEEDS[0]}" in text and f"seed={SEEDS[1]}" in text
