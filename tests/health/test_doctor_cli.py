"""`runstore doctor` as people use it: the command, runstore.toml's thresholds, --explain, the
findings the real sample runs show, and `Store.doctor`'s docstring (issue 33).

The demo store is the one every doc example reads (seed DEMO_SEED); what the doctor says about
it is checked against the oracle in tests/health/test_doctor.py, and here word for word where the
docs show it.
"""

from __future__ import annotations

import doctest
import fnmatch
import json
import tomllib
import shutil
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import doctor_oracle as do
import runstore
from conftest import SHARED_SAMPLES
from runstore.cli import main
from runstore.errors import UsageError
from runstore.health.doctor import CATALOGUE, NAMES, SEVERITIES, diagnose
from runstore.health.doctor.config import defaults, doctor_config

SAMPLES_061 = SHARED_SAMPLES.parent / "sample-runs-0.6.1"
KL_RUN = "gsm8k_tool_rl/sweep/lr_1e-3/seed_0"


@pytest.fixture(scope="module")
def demo_store(_demo_template: Path, tmp_path_factory: pytest.TempPathFactory
               ) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("doctor_cli")
    runstore.open(base / "store").ingest([_demo_template])
    return _demo_template, base / "store"


def run(store: Path, *args: str) -> Any:
    return CliRunner().invoke(main, ["--store", str(store), "doctor", *args],
                              catch_exceptions=False)


def expected(root: Path, **kw: Any) -> list[tuple[str, str, str]]:
    """(run, finding, severity) of every finding the oracle fires on the tree (`kw`: its
    params and the findings turned off), worst first as docs/doctor.md orders them: by
    severity, then run, then the catalogue's order. The severity is the finding's definition
    (its file's `@severity`), not an answer."""
    severity = {f.name: f.severity for f in CATALOGUE}
    rows = [(run, name, severity[name]) for run, name in do.fired(root, **kw)]
    return sorted(rows, key=lambda r: (SEVERITIES.index(r[2]), r[0], NAMES.index(r[1])))


def summary(rows: list[tuple[str, str, str]], n_runs: int) -> str:
    """The count line on stderr for these expected rows."""
    counts = [f"{n} {s}{'s' if n != 1 else ''}" for s in SEVERITIES
              if (n := sum(1 for r in rows if r[2] == s))]
    return (f"{len(rows)} finding{'s' if len(rows) != 1 else ''} ({', '.join(counts)}) in "
            f"{len({r[0] for r in rows})} of {n_runs} runs")


def shown(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(r["run_name"], r["finding"], r["severity"]) for r in rows]


# ---------------------------------------------------------------------------------------------
# The command


def test_exit_status_says_whether_an_error_finding_fired(demo_store: tuple[Path, Path]) -> None:
    root = demo_store[0]
    want = expected(root)
    assert (KL_RUN, "kl_spike", "error") in want  # the demo's KL spike: an error, so exit 1
    result = run(demo_store[1], "-F", "json")
    assert result.exit_code == 1, result.output
    rows = json.loads(result.stdout)
    assert shown(rows) == want
    assert set(rows[0]) == {"run_name", "finding", "severity", "first_step", "last_step",
                            "evidence", "to_try", "statement"}
    assert result.stderr.strip() == summary(want, len(do.runs(root)))
    # A scope the oracle finds nothing in exits 0.
    sweep = [n for n in do.runs(root) if fnmatch.fnmatchcase(n, "math_rl_sweep/*")]
    assert sweep and not [r for r in want if r[0] in sweep]
    quiet = run(demo_store[1], "math_rl_sweep/*", "-F", "json")
    assert quiet.exit_code == 0 and json.loads(quiet.stdout) == []
    assert quiet.stderr.strip() == (f"no findings in {len(sweep)} runs matching "
                                    f"math_rl_sweep/* ({len(NAMES)} findings checked)")
    # Only warnings: exit 0.
    only = run(demo_store[1], "--finding", "no_improvement", "-F", "jsonl")
    lines = [json.loads(line) for line in only.stdout.splitlines()]
    assert only.exit_code == 0 and shown(lines) == [r for r in want
                                                     if r[1] == "no_improvement"] != []


def test_runs_are_names_globs_or_run_ids(demo_store: tuple[Path, Path]) -> None:
    store = runstore.open(demo_store[1])
    run_id = store.sql("select run_id from runs where run_name = $n", {"n": KL_RUN}).item()
    by_id = run(demo_store[1], run_id, "-F", "json")
    by_name = run(demo_store[1], KL_RUN, "-F", "json")
    assert json.loads(by_id.stdout) == json.loads(by_name.stdout) != []
    assert diagnose(store, [KL_RUN, "sl/*"], config=False).runs == 2


def test_errors_are_one_line_with_exit_2(demo_store: tuple[Path, Path]) -> None:
    for args, needle in ((["no/such/run"], "no run is named 'no/such/run'"),
                         (["--finding", "kl_spik"], "did you mean kl_spike")):
        result = run(demo_store[1], *args)
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output
        assert result.stderr.startswith("Error: ") and needle in result.stderr, result.stderr


def test_a_store_error_has_the_status_every_command_gives_it(tmp_path: Path) -> None:
    """No store there is status 3 for every command (docs/cli.md, EXIT_CODES), for the
    doctor too: a cron job tells a missing store from a mistyped finding (2)."""
    missing = tmp_path / "no-store"
    doctor = run(missing)
    check = CliRunner().invoke(main, ["--store", str(missing), "check"])
    assert doctor.exit_code == check.exit_code == 3, (doctor.output, check.output)
    assert doctor.stderr.startswith("Error: no store at") and "Traceback" not in doctor.output


def test_explain_shows_sql_params_and_what_was_not_judged(demo_store: tuple[Path, Path]
                                                         ) -> None:
    result = run(demo_store[1], "-F", "table", "--explain")
    out = result.stdout
    for f in CATALOGUE:
        assert f"## {f.name} ({f.severity}): " in out
        assert f"-- sql/doctor/{f.name}.sql\n{f.sql}" in out
    assert "params: threshold = 0.01, window = 10\n" in out
    assert ("  not evaluated: sl/tulu3_qwen3-8b_lr2e-4: logs no KL (optim/kl_sample_train_v1 "
            "or v2, with or without optim/)") in out
    # This store holds every column a finding reads (runs.last_error from logs.log too):
    # nothing is partly evaluated, and no finding says it needs a file the store has.
    assert "partly evaluated" not in out and "needs logs.log" not in out
    json_out = run(demo_store[1], "-F", "json", "--explain")
    assert json.loads(json_out.stdout)  # machine output stays parseable: explain goes to stderr
    assert "## kl_spike" in json_out.stderr


def test_every_statement_runs_as_printed(demo_store: tuple[Path, Path]) -> None:
    rows = json.loads(run(demo_store[1], "-F", "json").stdout)
    for row in rows:
        shown = CliRunner().invoke(main, ["--store", str(demo_store[1]), "sql", row["statement"],
                                          "-F", "json"], catch_exceptions=False)
        assert shown.exit_code == 0 and json.loads(shown.stdout), row["statement"]


def test_markdown_cuts_no_finding_text(demo_store: tuple[Path, Path]) -> None:
    """The markdown format cuts long cells, but not a finding's evidence, what to try and
    statement: each is the json format's, whole (a cut statement does not run)."""
    rows = json.loads(run(demo_store[1], "-F", "json").stdout)
    lines = run(demo_store[1], "-F", "markdown").stdout.splitlines()
    names = [c.strip() for c in lines[0].strip("|").split(" | ")]
    cells = [dict(zip(names, (c.strip().replace("\\|", "|") for c in line[2:-2].split(" | "))))
             for line in lines[2:]]  # a cell's `|` is written `\|`
    assert len(cells) == len(rows) > 0
    long = [r for r in rows if max(len(r["statement"]), len(r["evidence"])) > 200]
    assert long, "the demo's findings hold text longer than a markdown cell"
    for row, cell in zip(rows, cells):
        for column in ("evidence", "to_try", "statement"):
            assert cell[column] == row[column], (column, cell[column])


# ---------------------------------------------------------------------------------------------
# runstore.toml


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "runstore.toml"
    path.write_text(text)
    return path


def test_thresholds_come_from_runstore_toml(demo_store: tuple[Path, Path], tmp_path: Path
                                            ) -> None:
    store = runstore.open(demo_store[1])
    path = write_toml(tmp_path, "[doctor.kl_spike]\nthreshold = 0.5\n\n"
                                "[doctor.no_improvement]\nenabled = false\n")
    result = diagnose(store, config=path)
    want = expected(demo_store[0], params={"kl_spike": {"threshold": 0.5}},
                    off=("no_improvement",))
    assert shown(list(result.rows)) == want
    assert not [r for r in want if r[1] == "kl_spike"]  # the spike peaks at 0.16
    assert "no_improvement" not in [f.name for f in result.findings]
    assert "turned off by" in result.explain()
    lower = write_toml(tmp_path, "[doctor.kl_spike]\nthreshold = 0.002\nwindow = 5\n")
    fired = {r["run_name"] for r in diagnose(store, config=lower, only=["kl_spike"]).rows}
    lowered = {n for n, v in do.kl_spike(demo_store[0], threshold=0.002).items() if v.fired}
    assert fired == lowered and len(fired) > 1
    assert doctor_config(store, lower).params["kl_spike"] == {"threshold": 0.002, "window": 5}


def test_the_kl_threshold_defaults_to_the_store_setting(tmp_path: Path,
                                                        small_tree: Path) -> None:
    store = runstore.open(tmp_path / "store")
    store.ingest([small_tree])
    assert defaults(store)["kl_spike"]["threshold"] == 0.01
    store.set_setting("kl_threshold", 0.0005)
    assert defaults(store)["kl_spike"]["threshold"] == 0.0005


@pytest.mark.parametrize("text, message", [
    ("[doctor.kl_spik]\nthreshold = 1\n", "no finding is named 'kl_spik'"),
    ("[doctor.kl_spike]\nthreshhold = 1\n", "has no param 'threshhold'; did you mean threshold?"),
    ("[doctor.kl_spike]\nthreshold = \"high\"\n", "threshold must be a finite number"),
    ("[doctor.kl_spike]\nthreshold = nan\n", "threshold must be a finite number"),
    ("[doctor.kl_spike]\nwindow = 2.5\n", "window counts steps: a whole number from 1 to"),
    ("[doctor.kl_spike]\nwindow = 0\n", "window counts steps: a whole number from 1 to"),
    # No count of int64 steps is larger than int64 (nor would it fit the statements).
    ("[doctor.kl_spike]\nwindow = 1e39\n", "window counts steps: a whole number from 1 to"),
    ("[doctor.no_improvement]\nmin_steps = 9223372036854775808.0\n", "min_steps counts steps"),
    # A value the finding's trend rule refuses names its key too.
    ("[doctor.crashed]\nminutes = -5\n", "[doctor.crashed]: minutes: "),
    ("[doctor.slow_steps]\nthreshold = -1\n", "[doctor.slow_steps]: threshold: "),
    ("[doctor.reward_collapse]\nsmooth = 1\n", "[doctor.reward_collapse]: smooth: "),
    ("[doctor.kl_spike]\nenabled = \"no\"\n", "enabled must be true or false"),
    ("[doctor]\nkl_spike = 3\n", "must be a table"),
    ("doctor = 1\n", "`doctor` must be tables"),
    ("[doctor.reward_collapse]\nsmooth = 1.5\n", "[doctor.reward_collapse]"),
    ("[doctor\n", "is not valid TOML"),
    # A share of the steps below 0 would put the first step after the last; a divisor of 0
    # makes every ratio infinite (the statements divide by near_max, stop_share, growth).
    ("[doctor.no_improvement]\npart = -1\n", "part must be in [0, 1], got -1"),
    ("[doctor.no_improvement]\npart = 1.5\n", "part must be in [0, 1], got 1.5"),
    ("[doctor.length_at_limit]\nnear_max = 0\n", "near_max must be above 0, got 0"),
    ("[doctor.length_at_limit]\nstop_share = -0.2\n", "stop_share must be above 0"),
    ("[doctor.length_at_limit]\ngrowth = 0.0\n", "growth must be above 0"),
])
def test_bad_runstore_toml_names_the_file_and_key(demo_store: tuple[Path, Path],
                                                  tmp_path: Path, text: str,
                                                  message: str) -> None:
    path = write_toml(tmp_path, text)
    with pytest.raises(UsageError) as e:
        diagnose(runstore.open(demo_store[1]), config=path)
    assert message in str(e.value) and str(path) in str(e.value), str(e.value)


@pytest.mark.parametrize("text", ["[doctor.no_improvement]\npart = 0\n",
                                  "[doctor.no_improvement]\npart = 1\n",
                                  "[doctor.length_at_limit]\nnear_max = 1e-9\n",
                                  "[doctor.kl_spike]\nwindow = 9223372036854775807\n"])
def test_params_at_the_edges_of_their_range_are_taken(demo_store: tuple[Path, Path],
                                                      tmp_path: Path, text: str) -> None:
    name, key = text.split("]")[0][len("[doctor."):], text.split("\n")[1].split(" =")[0]
    value = tomllib.loads(text)["doctor"][name][key]
    path = write_toml(tmp_path, text)
    assert doctor_config(runstore.open(demo_store[1]), path).params[name][key] == value
    # ... and the statements take it: the finding is judged with it.
    result = diagnose(runstore.open(demo_store[1]), config=path, only=[name])
    assert result.runs > 0 and result.config.params[name][key] == value


def test_the_command_reads_runstore_toml_beside_the_store(demo_store: tuple[Path, Path],
                                                          tmp_path: Path) -> None:
    shutil.copytree(demo_store[1], tmp_path / "store")
    errors = tuple(f.name for f in CATALOGUE if f.severity == "error")
    write_toml(tmp_path, "".join(f"[doctor.{name}]\nenabled = false\n" for name in errors))
    result = run(tmp_path / "store", "-F", "json")
    want = expected(demo_store[0], off=errors)
    assert want and result.exit_code == 0, result.output  # warnings only: exit 0
    assert shown(json.loads(result.stdout)) == want
    write_toml(tmp_path, "[doctor.kl_spike]\nwindow = -1\n")
    bad = run(tmp_path / "store")
    assert bad.exit_code == 2 and "window counts steps" in bad.stderr


@pytest.mark.parametrize("odd", ["directory", "dangling link", "looping link"])
def test_a_runstore_toml_that_is_no_file_is_an_error_not_skipped(
        demo_store: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        odd: str) -> None:
    """A runstore.toml beside the store that cannot be read as a file is the one in force
    and an error naming it, for doctor and check alike; the working directory's (which would
    otherwise be read in its place) is not."""
    shutil.copytree(demo_store[1], tmp_path / "store")
    beside = tmp_path / "runstore.toml"
    if odd == "directory":
        beside.mkdir()
    elif odd == "dangling link":
        beside.symlink_to(tmp_path / "nowhere.toml")
    else:
        beside.symlink_to(beside)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "runstore.toml").write_text("[check]\ndefault_rules = false\n")
    monkeypatch.chdir(cwd)
    for command in ("doctor", "check"):
        got = CliRunner().invoke(main, ["--store", str(tmp_path / "store"), command])
        assert got.exit_code == 2 and f"cannot read {beside}" in got.stderr, got.output


# ---------------------------------------------------------------------------------------------
# Evidence that needs a column this store lacks


def test_a_missing_optional_column_is_read_as_null(demo_store: tuple[Path, Path],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`crashed` reads `runs.last_error` (logs.log) when the schema has it, and says it was
    partly evaluated, reading a null, when a runstore without it runs the statement."""
    from runstore.storage import schema

    crashed = next(f for f in CATALOGUE if f.name == "crashed")
    assert crashed.optional == (("runs", "last_error",
                                 "logs.log (the last error of its traceback)"),)
    store = runstore.open(demo_store[1])
    root = demo_store[0]
    want = {run: v for (run, name), v in do.fired(root).items() if name == "crashed"}
    assert any(v.facts["last_error"] for v in want.values())  # the demo has a logged error
    result = diagnose(store, config=False, only=["crashed"])
    assert "crashed" not in result.partial
    rows = {r["run_name"]: r for r in result.rows}
    assert set(rows) == set(want)
    for run, verdict in want.items():
        error = verdict.facts["last_error"]
        assert rows[run]["evidence"].endswith(f"; last error: {error}") if error else \
            "last error" not in rows[run]["evidence"]
    # A runstore whose schema lacks the column: the statement reads a null and says so.
    monkeypatch.setitem(schema.TABLES, "runs",
                        [c for c in schema.TABLES["runs"] if c[0] != "last_error"])
    without = diagnose(store, config=False, only=["crashed"])
    assert without.partial["crashed"] == ("without runs.last_error: needs logs.log (the "
                                          "last error of its traceback)")
    assert {r["run_name"] for r in without.rows} == set(want)
    assert not any("last error" in r["evidence"] for r in without.rows)
    assert "partly evaluated: without runs.last_error: needs logs.log" in without.explain()


def test_crashed_names_the_latest_checkpoint_as_latest_checkpoints_does(
        demo_store: tuple[Path, Path], tmp_path: Path) -> None:
    """`crashed`'s evidence names the run's latest checkpoint as the view `latest_checkpoints`
    says (the last record written), even when that record has no name (the format allows it):
    then it names none, rather than an older record's name."""
    import os

    want = {run: v for (run, name), v in do.fired(demo_store[0]).items() if name == "crashed"}
    run_name = next(r for r, v in want.items() if v.facts["last_checkpoint"])
    before = next(r for r in diagnose(runstore.open(demo_store[1]), config=False,
                                      only=["crashed"]).rows if r["run_name"] == run_name)
    assert json.loads(before["facts"])["last_checkpoint"] == want[run_name].facts["last_checkpoint"]
    assert f"last checkpoint {want[run_name].facts['last_checkpoint']}" in before["evidence"]

    run = tmp_path / "runs" / run_name
    shutil.copytree(demo_store[0] / run_name, run)
    ckpt = run / "checkpoints.jsonl"
    times = ckpt.stat()
    with ckpt.open("a") as f:
        f.write(json.dumps({"batch": 4, "state_path": "tinker://x/weights/4"}) + "\n")
    os.utime(ckpt, ns=(times.st_atime_ns, times.st_mtime_ns))  # still stale
    store = runstore.open(tmp_path / "store")
    store.ingest([tmp_path / "runs"])
    (oracle_verdict,) = [v for (r, n), v in do.fired(tmp_path / "runs").items() if n == "crashed"]
    assert oracle_verdict.facts["last_checkpoint"] is None
    (row,) = diagnose(store, config=False, only=["crashed"]).rows
    assert json.loads(row["facts"])["last_checkpoint"] is None
    assert "last checkpoint" not in row["evidence"]
    assert store.sql("select latest_name, n_checkpoints from latest_checkpoints"
                     ).rows() == [(None, checkpoint_lines(demo_store[0] / run_name) + 1)]


def checkpoint_lines(run: Path) -> int:
    return sum(1 for line in (run / "checkpoints.jsonl").read_text().splitlines() if line.strip())


# ---------------------------------------------------------------------------------------------
# The real sample runs


@pytest.mark.skipif(not SHARED_SAMPLES.is_dir(), reason="needs ../shared/sample-runs")
def test_sample_runs(tmp_path: Path) -> None:
    """The five sample runs (README of sample-runs) are short, healthy runs: none fires.

    * `math_rl_sweep/.../lr_4e-5` and `lr_1e-5`, `gsm8k_tool_rl/.../seed_1`: rewards rise
      (no_improvement's t is well above 2), KL stays below 0.01, entropy and lengths stay
      where they start, no NaN; each completed with a `final` checkpoint (not crashed).
    * `sl/...` and `dpo/...`: the NLL and the DPO loss fall; they log no reward, KL or
      entropy, so the RL findings do not judge them (the not-evaluated list says so).
    """
    store = runstore.open(tmp_path / "store")
    store.ingest([SHARED_SAMPLES])
    result = diagnose(store, config=False)
    assert result.runs == 5 and result.rows == ()
    why = {(m["finding"], m["run_name"]) for m in result.not_evaluated}
    assert ("kl_spike", "sl/tulu3_qwen3-8b_lr2e-4") in why
    assert ("entropy_collapse", "dpo/hh_llama-3.1-8b_beta0.1") in why
    judged = {(f.name, name) for f in result.findings
              for name in ("math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5",)} - why
    assert ("no_improvement", "math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5") in judged


@pytest.mark.skipif(not SAMPLES_061.is_dir(), reason="needs ../shared/sample-runs-0.6.1")
def test_sample_runs_of_0_6_1(tmp_path: Path) -> None:
    """The two async runs of tinker-cookbook 0.6.1 (its README):

    * `learning_rate=8e-05` died of ENOSPC after step 2 (no final checkpoint,
      `progress/done_frac` 0.375): `crashed`, once its files are an hour old;
    * both logged failed rollouts (`rollout_errors/total` 7 against 92 episodes for 2e-05,
      3 against 48 for 8e-05: above 5%): `rollout_errors`.
    """
    store = runstore.open(tmp_path / "store")
    store.ingest([SAMPLES_061 / "sweeps"])
    newest = store.sql("select max(source_updated_at) as t from runs").item()
    later = newest.astimezone(timezone.utc) + timedelta(hours=2)
    result = diagnose(store, config=False, now=later)
    got = {(r["run_name"].split("/")[-1], r["finding"]): r for r in result.rows}
    assert set(got) == {("learning_rate=8e-05", "crashed"),
                        ("learning_rate=2e-05", "rollout_errors"),
                        ("learning_rate=8e-05", "rollout_errors")}
    assert got[("learning_rate=2e-05", "rollout_errors")]["evidence"].startswith(
        "7 rollouts failed (rollout_errors/total: RuntimeError 5, APITimeoutError 2) against "
        "92 finished episodes: 7.1%")
    assert "progress/done_frac 0.375" in got[("learning_rate=8e-05", "crashed")]["evidence"]


@pytest.mark.skipif(not SAMPLES_061.is_dir(), reason="needs ../shared/sample-runs-0.6.1")
@pytest.mark.parametrize("case", ["idle", "running", "logged_on"])
def test_a_run_whose_log_ends_in_its_error_is_crashed_once_idle(case: str,
                                                                tmp_path: Path) -> None:
    """`learning_rate=8e-05` of the 0.6.1 samples logged its ENOSPC traceback as its last
    record. With its files three minutes old (`idle`) the doctor says `crashed` at once, not
    after the stale rule's hour; with fresh files (`running`) it does not, nor once another
    record follows the error (`logged_on`: then only the stale rule can, later). The
    oracle reads the same from the files."""
    import os
    import time

    root = tmp_path / "runs"
    shutil.copytree(SAMPLES_061 / "sweeps", root)
    log = next(root.glob("*/learning_rate=8e-05/logs.log"))
    if case == "logged_on":
        with log.open("a") as f:
            f.write("tinker_cookbook.rl.train:12 [INFO] retrying after the error\n")
    then = time.time() - (0 if case == "running" else 180)  # copytree kept the old times
    for p in root.rglob("*"):
        os.utime(p, (then, then))
    store = runstore.open(tmp_path / "store")
    store.ingest([root])
    got = {r["run_name"].split("/")[-1]: r
           for r in diagnose(store, config=False, only=["crashed"]).rows}
    want = {run.split("/")[-1]: v for run, v in do.crashed(root).items() if v.fired}
    assert set(got) == set(want) == ({"learning_rate=8e-05"} if case == "idle" else set())
    if case == "idle":
        row = got["learning_rate=8e-05"]
        assert row["evidence"].startswith("not completed (no final checkpoint, progress/done_frac "
                                          "0.375; last step 2, last checkpoint 000004); its log's "
                                          "last record is an exception's traceback, and "
                                          "nothing has changed since")
        assert row["evidence"].endswith("; last error: OSError: [Errno 28] No space left on "
                                        "device")
        facts = json.loads(row["facts"])
        assert facts["log_ends_in_error"] is True and facts["minutes"] is None
        assert facts["last_error"] == want["learning_rate=8e-05"].facts["last_error"]
    if case == "logged_on":  # the stale rule still finds it when its hour is up
        newest = store.sql("select max(source_updated_at) as t from runs").item()
        later = newest.astimezone(timezone.utc) + timedelta(hours=2)
        rows = diagnose(store, config=False, only=["crashed"], now=later).rows
        [row] = [r for r in rows if r["run_name"].endswith("learning_rate=8e-05")]
        assert "an exception's traceback" not in row["evidence"]
        assert json.loads(row["facts"])["log_ends_in_error"] is False


def test_store_docstring(demo_store: tuple[Path, Path]) -> None:
    from runstore.store import doctor as module

    result = doctest.testmod(module, extraglobs={"store": runstore.open(demo_store[1])},
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def test_every_catalogue_file_is_documented() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "doctor.md").read_text()
    for f in CATALOGUE:
        assert f"## `{f.name}`" in docs, f.name
        for p in f.params:
            assert f"`{p.name}`" in docs, (f.name, p.name)
    assert tuple(NAMES) == tuple(f.name for f in CATALOGUE)


def test_docs_doctor_md_is_current() -> None:
    from gen_docs import doctor_markdown

    path = Path(__file__).resolve().parents[2] / "docs" / "doctor.md"
    assert doctor_markdown() == path.read_text(), (
        "docs/doctor.md is stale: python tools/gen_docs.py doctor -o docs/doctor.md")


# ---------------------------------------------------------------------------------------------
# ingest --doctor


def test_ingest_reports_each_new_finding_once(_demo_template: Path, tmp_path: Path) -> None:
    from runstore.health.watch import watch
    from runstore.present.findings import finding_text

    tree = tmp_path / "runs"
    shutil.copytree(_demo_template, tree)
    result = CliRunner().invoke(main, ["--store", str(tmp_path / "store"), "ingest", str(tree),
                                       "--doctor", "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    verdicts = do.fired(tree)
    want = expected(tree)
    assert len(lines) == len(want)
    for line, (run_name, name, severity) in zip(lines, want):
        v = verdicts[(run_name, name)]
        steps = (f" step {v.first_step}" if v.first_step == v.last_step
                 else f" steps {v.first_step}-{v.last_step}")
        assert line.startswith(f"FINDING {run_name}: {name} ({severity}){steps}: "), line
    # The KL spike's evidence in the oracle's numbers (docs/doctor.md shows this line).
    kl = verdicts[(KL_RUN, "kl_spike")].facts
    line = next(line for line in lines if line.startswith(f"FINDING {KL_RUN}: kl_spike"))
    assert (f"{kl['family']} peaked at {kl['peak']:.3g} at step {kl['peak_step']}; above 0.01 "
            f"at {kl['recent_over']} of the {kl['recent']} KL steps") in line
    assert (f"learning_rate {kl['learning_rate']:g} is the largest of the "
            f"{kl['sweep_rates']} in its sweep") in line and kl["lr_rank"] == 1
    assert "FIRED" not in result.stdout  # --doctor alone does not turn on the rules
    # A watch reports a finding the first time it appears, and not again on later passes.
    # (Words of a finding may change between passes: `crashed` counts the minutes since the
    # files changed; it is reported once all the same.)
    seen: list[str] = []
    store = runstore.open(tmp_path / "store")
    passes = watch(store, [tree], interval=0.05, check=False, max_passes=3,
                   on_finding=lambda row: seen.append(finding_text(row)))
    assert passes == 3 and [head(t) for t in seen] == [head(t) for t in lines]


def head(line: str) -> str:
    """`FINDING run: finding (severity) steps A-B` of a finding's line: all but the evidence."""
    return line[:line.index(": ", line.index(": ") + 2)]
