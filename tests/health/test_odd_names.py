"""Health answers for runs whose names hold what names rarely hold: runs of spaces, tabs,
newlines, quotes, commas and terminal escapes (a run directory may be named anything).

What each answer says is held to the run files (oracle.py's KL reading): the statement a
doctor finding prints selects the run's own rows, and lines for people (`FIRED`, `FINDING`,
the doctor's blocks) stay one line each, with no control character reaching a terminal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import oracle
from storekit import cli
import runstore
from runstore.health.doctor import diagnose

# Each name's run logs KL over 0.01 at steps 0-2 (kl_spike fires, the default rule fires).
ODD_NAMES = ("two  spaces", "tab\there", "line\nbreak", "esc\x1b[31mred", 'q"u\'o,te', "plain")


def write_run(run: Path, lines: list[dict[str, Any]]) -> None:
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"learning_rate": 1e-4}))
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.fixture(scope="module")
def odd(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runstore.Store]:
    root = tmp_path_factory.mktemp("odd") / "runs"
    for name in ODD_NAMES:
        write_run(root / name, [{"step": s, "optim/kl_sample_train_v1": 0.05 if s < 3 else 0.001}
                                for s in range(6)])
    store = runstore.open(root.parent / "store")
    store.ingest([root])
    return root, store


def test_each_doctor_statement_selects_its_own_run(odd: tuple[Path, runstore.Store]) -> None:
    """The `show:` statement of a kl_spike finding returns the KL steps over the threshold of
    its run, as the files hold them, whatever the run's name holds; and it is one line."""
    root, store = odd
    rows = {r["run_name"]: r for r in diagnose(store, config=False, only=["kl_spike"]).rows}
    assert set(rows) == set(ODD_NAMES)
    kl = oracle.kl_steps(root)
    for name, row in rows.items():
        statement = row["statement"]
        assert statement.isprintable(), repr(statement)
        shown = store.sql(statement)
        want = sorted(s for (n, s), r in kl.items() if n == name and r["is_over"])
        assert shown["step"].to_list() == want, (name, statement)


def controls(text: str) -> set[str]:
    """The control characters of `text` other than the newlines that end its lines."""
    return {c for c in text if c != "\n" and not c.isprintable()}


def test_lines_for_people_stay_one_line_without_control_characters(
        odd: tuple[Path, runstore.Store], tmp_path: Path) -> None:
    """`FIRED` lines (ingest --check), `FINDING` lines (ingest --doctor) and the doctor's
    blocks: one line per firing or finding, as many as the files give, and no tab, newline or
    terminal escape of a run name reaches the terminal (it would split a line that a
    `while read` loop reads, or recolour the terminal)."""
    root, _ = odd
    flagged = {n for n, row in oracle.kl_health(root).items() if row["flagged"]}
    assert flagged == set(ODD_NAMES)
    ingest = cli(tmp_path / "store", "ingest", str(root), "--check", "--doctor", "--quiet")
    assert ingest.exit_code == 0, ingest.output
    assert not controls(ingest.stdout), repr(ingest.stdout)
    lines = ingest.stdout.splitlines()
    assert sum(line.startswith("FIRED ") for line in lines) == len(flagged)
    assert sum(line.startswith("FINDING ") for line in lines) == len(flagged)
    assert len(lines) == 2 * len(flagged), lines
    doctor = cli(tmp_path / "store", "doctor", "--finding", "kl_spike", "-F", "table")
    assert doctor.exit_code == 1, doctor.output
    assert not controls(doctor.stdout), repr(doctor.stdout)
    heads = [line for line in doctor.stdout.splitlines() if line.startswith("ERROR ")]
    assert len(heads) == len(flagged) and all("kl_spike" in h for h in heads), heads


def test_explain_names_each_run_on_one_line(odd: tuple[Path, runstore.Store],
                                            tmp_path: Path) -> None:
    """`--explain` lists each run a finding could not judge on a line of its own (no run logs
    a reward here: reward_stuck judges none of them), with the names' control characters
    shown, not obeyed."""
    root, store = odd
    rewarded = {n for n in (oracle.run_name(root, r) for r in oracle.run_dirs(root))
                if any(k == "env/all/reward/total" for _, k in oracle.live_numbers(root / n))}
    assert not rewarded
    got = cli(store, "doctor", "--finding", "reward_stuck", "--explain", "-F", "table")
    assert got.exit_code == 0, got.output
    assert not controls(got.output), repr(got.output)
    lines = [line for line in got.output.splitlines() if "not evaluated: " in line]
    assert len(lines) == len(ODD_NAMES), lines


def test_summary_lines_show_what_names_and_patterns_hold(odd: tuple[Path, runstore.Store],
                                                        tmp_path: Path) -> None:
    """The one line on stderr that counts what `doctor` found or `check` fired stays one
    line, with no control character obeyed, whatever the RUN patterns given or a rule's name
    in runstore.toml hold."""
    root, _ = odd
    store = tmp_path / "store"
    assert cli(store, "ingest", str(root), "--quiet").exit_code == 0
    doctor = cli(store, "doctor", "--finding", "kl_spike", "-F", "csv", *ODD_NAMES)
    assert doctor.exit_code == 1, doctor.output
    assert not controls(doctor.stderr) and len(doctor.stderr.splitlines()) == 1, doctor.stderr
    assert f"in {len(ODD_NAMES)} of {len(ODD_NAMES)} runs matching" in doctor.stderr
    (tmp_path / "runstore.toml").write_text(
        '[check]\ndefault_rules = false\n\n[[check.rule]]\nmetric = "optim/kl_sample_train_v1"\n'
        'op = ">"\nvalue = 0.01\nname = "k\\u0000l \\u001b[31mred \\r\\n line"\n')
    check = cli(store, "check", "-F", "csv")
    assert check.exit_code == 1, check.output
    assert not controls(check.stderr) and len(check.stderr.splitlines()) == 1, check.stderr
    assert f"fired for {len(ODD_NAMES)} of {len(ODD_NAMES)} runs" in check.stderr


def test_a_show_line_pasted_at_any_width_runs_as_printed(odd: tuple[Path, runstore.Store]
                                                         ) -> None:
    """The doctor's `show:` command line, wrapped to any terminal width and pasted as it is
    (its lines joined by newlines), is the same command: a POSIX shell's words (shlex) are
    `runstore sql STATEMENT`, the statement whole (a break inside a quoted run name would
    put a newline in the name)."""
    import shlex

    import duckdb

    from runstore.present.findings import render_findings

    rows = diagnose(odd[1], config=False, only=["kl_spike"]).rows
    assert any("  " in r["statement"] for r in rows)  # "two  spaces" is named in one
    for width in range(40, 121):
        lines = render_findings(rows, width).splitlines()
        starts = [i for i, line in enumerate(lines) if line.startswith("  show: ")]
        assert len(starts) == len(rows)
        for row, i in zip(rows, starts):
            block = [lines[i][len("  show: "):]]
            for line in lines[i + 1:]:
                if not line.startswith(" " * len("  show: ")):
                    break
                block.append(line.strip())
            words = shlex.split("\n".join(block))
            assert words[:2] == ["runstore", "sql"] and len(words) == 3, (width, words)
            # A break inside the shell's quotes is a newline in the SQL: the same statement
            # only where it is whitespace between the tokens of DuckDB, which runs it (a
            # token's text runs from its offset to the next one's, whitespace after it left
            # out), in no string or name.
            sql = words[2]
            starts = [offset for offset, _ in duckdb.tokenize(sql)] + [len(sql)]
            assert not any("\n" in sql[a:b].rstrip() for a, b in zip(starts, starts[1:])), \
                (width, sql)
            assert sql.replace("\n", " ") == row["statement"], width
