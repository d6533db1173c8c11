"""A run is itself in `runstore doctor` too: two trees of one layout in one store never merge.

The attack (as tests/reliability/test_identity.py makes it for the other commands): two trees
with the same run names — tree A plants findings (demo.problem_specs), tree B holds the same
names, some planted again with other values (another seed), some healthy — ingested into one
store, where every run name is held twice. Each run's findings in the combined store must be
its findings in a store holding its tree alone, matched by the run's directory (`run_path`),
and what the oracle reads in its own tree's files; a row names its run by its label (name and
run_id prefix) and its statement picks the run by run_id. The Health page and the watch of
`ingest --doctor` key findings by run_id: two runs sharing a name and a finding are two rows,
reported twice.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import doctor_oracle as do
import runstore
from runstore import demo
from runstore.health.doctor import diagnose

# Healthy in tree B (so a finding of tree A's run of that name must not reach B's run).
HEALED = ("kl_spike", "crashed", "reward_stuck")
KEPT = (*HEALED, "rollout_errors", "no_signal", "healthy/rl_dirs")
ROW = ("finding", "severity", "first_step", "last_step", "evidence", "to_try")


def specs(heal: bool) -> list[demo.RunSpec]:
    out = []
    for spec in demo.problem_specs():
        short = spec.name.removeprefix("problems/")
        if short not in KEPT:
            continue
        if heal and short in HEALED:
            spec = dataclasses.replace(spec, problem=None, kl_spike_at=None,
                                       final_checkpoint=True)
        out.append(spec)
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("doctor_identity")
    trees = {"a": base / "cluster-a" / "runs", "b": base / "cluster-b" / "runs"}
    demo.generate_tree(trees["a"], specs(heal=False), seed=5)
    demo.generate_tree(trees["b"], specs(heal=True), seed=6)
    alone = {}
    for which, tree in trees.items():
        alone[which] = runstore.open(base / f"store-{which}")
        alone[which].ingest([tree])
    both = runstore.open(base / "store-both")
    both.ingest([trees["a"]])
    both.ingest([trees["b"]])
    return {"trees": trees, "alone": alone, "both": both}


def by_path(store: runstore.Store, rows: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """(run_path, finding) -> the row's own columns and facts."""
    paths = dict(store.sql("select run_id, run_path from runs").rows())
    out = {}
    for r in rows:
        key = (paths[r["run_id"]], r["finding"])
        assert key not in out, key  # one row per run and finding
        out[key] = {**{c: r[c] for c in ROW}, "facts": json.loads(r["facts"])}
    return out


def without_age(rows: dict[tuple[str, str], dict[str, Any]]) -> dict[Any, Any]:
    """`crashed` counts minutes up to now: compare it without them."""
    return {k: {**v, "evidence": None if k[1] == "crashed" else v["evidence"],
                "facts": {f: x for f, x in v["facts"].items() if f != "minutes"}}
            for k, v in rows.items()}


def test_each_run_has_its_own_findings(world: dict[str, Any]) -> None:
    both = world["both"]
    combined = by_path(both, diagnose(both, config=False).rows)
    separate: dict[tuple[str, str], dict[str, Any]] = {}
    for store in world["alone"].values():
        separate.update(by_path(store, diagnose(store, config=False).rows))
    assert without_age(combined) == without_age(separate)
    # The oracle, over each tree's own files: the same (run, finding) pairs and steps.
    want = {}
    for tree in world["trees"].values():
        # (exact borderline numbers: the reward stuck at exactly 0 has a trend of 0)
        for (name, finding), v in do.fired(tree, strict=False).items():
            want[(str(tree / name), finding)] = (v.first_step, v.last_step)
    got = {k: (v["first_step"], v["last_step"]) for k, v in combined.items()}
    resolved = {(str(Path(p).resolve()), f): s for (p, f), s in got.items()}
    assert resolved == {(str(Path(p).resolve()), f): s for (p, f), s in want.items()}
    # Both trees' runs of one name fire some findings, and only tree A's fire the healed ones.
    names = {Path(p).name for p, _ in combined}
    assert names
    shared = {f for (p, f) in combined if "cluster-a" in p} & \
        {f for (p, f) in combined if "cluster-b" in p}
    assert "rollout_errors" in shared
    for finding in HEALED:
        fired = [p for (p, f) in combined if f == finding]
        assert fired and all("cluster-a" in p for p in fired), (finding, fired)


def test_rows_name_the_run_by_label_and_run_id(world: dict[str, Any]) -> None:
    both = world["both"]
    labels = dict(both.sql("select run_id, run_label from run_labels").rows())
    rows = diagnose(both, config=False).rows
    assert rows
    for r in rows:
        assert r["run_name"] == labels[r["run_id"]] and r["run_id"][:8] in r["run_name"]
        assert r["run_id"] in r["statement"]  # never the name two runs hold
        shown = both.sql(r["statement"])
        assert shown.height > 0, r["statement"]
    # A RUN that names two runs looks at both; a run_id at one.
    name = "problems/rollout_errors"
    ids = both.sql("select run_id from runs where run_name = $n order by run_id",
                   {"n": name})["run_id"].to_list()
    assert len(ids) == 2
    assert diagnose(both, name, config=False, only=["rollout_errors"]).runs == 2
    one = diagnose(both, ids[0], config=False, only=["rollout_errors"])
    assert one.runs == 1 and {r["run_id"] for r in one.rows} <= {ids[0]}


def test_health_page_and_watch_key_findings_by_run_id(world: dict[str, Any],
                                                      tmp_path: Path) -> None:
    from runstore.health.watch import watch
    from runstore.ui.health import health

    both = world["both"]
    rows = diagnose(both, config=False).rows
    pairs = sorted((r["run_id"], r["finding"]) for r in rows)
    answer = health(both)
    assert sorted((r["run_id"], r["finding"]) for r in answer["findings"]["rows"]) == pairs
    overview = {r["run_id"]: set(r["findings"]) for r in answer["runs"]}
    assert len(overview) == both.sql("select count(*) from runs").item()
    for run_id, finding in pairs:
        assert finding in overview[run_id]
    # The watch reports each (run, finding) once: a finding two same-named runs share, twice.
    seen: list[tuple[str, str]] = []
    watch(both, [world["trees"]["a"], world["trees"]["b"]], interval=0.05, check=False,
          max_passes=2, on_finding=lambda row: seen.append((row["run_id"], row["finding"])))
    assert sorted(seen) == pairs
