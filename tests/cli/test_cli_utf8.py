"""Bytes that are not UTF-8, in an argument, a query's file or pipe, or a run's directory name.

A shell passes an argument's bytes as they are; Python holds those that are not UTF-8 as
lone surrogates (`\\udcff`), which no stored value or DuckDB string can hold. These once
stopped `runstore sql $'select \\xff'` and a piped query with "unexpected TypeError" (exit
70), a query file in UTF-16 with "unexpected UnicodeDecodeError", other commands with
DuckDB's "Python Conversion Failure" naming no argument, and the ingest of a tree holding a
directory named in another encoding with "unexpected UnicodeEncodeError": no run of the
tree was ingested. Now an argument or a query is a usage error naming it (exit 2), and such
a directory is left out with a warning naming it, the tree's other runs ingested.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import runstore
import storekit

BAD = "\udcff"  # how Python holds the byte 0xFF of an argument that is not UTF-8


@pytest.mark.parametrize("args", [
    ["sql", f"select 1 as x{BAD}"],
    ["sql", "select $x as x", "--param", f"x=a{BAD}"],
    ["runs", "--name", f"run{BAD}"],
    ["keys", "--like", BAD],
    ["check", "--rule", f"reward{BAD} > 1"],
    ["doctor", BAD],
    ["diff", BAD, "x"],
    ["compare", f"env/all/reward/total{BAD}"],
    ["plot", "metric", BAD, "-o", "p.html"],
    ["trace", BAD, "-o", "t.json"],
    ["ingest", f"runs{BAD}"],
    ["sql", "select 1", "--store", f"store{BAD}"],
])
def test_an_argument_that_is_not_utf8_is_named(shared_demo_store: Path, args: list[str]) -> None:
    r = storekit.cli(shared_demo_store, *args)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    (line,) = [x for x in r.output.splitlines() if x.startswith("Error: ")]
    bad = next(a for a in args if BAD in a)
    assert f"argument '{bad.replace(BAD, chr(92) + 'xff')}' is not UTF-8 text (byte 0xff" \
        in line, line


def test_a_real_process_given_the_bytes(shared_demo_store: Path) -> None:
    """The bytes as a shell passes them, through the interpreter's own decoding of argv."""
    r = subprocess.run([sys.executable, "-m", "runstore", "--store", str(shared_demo_store),
                        "sql", b"select 1 as \xff"], capture_output=True, timeout=120)
    assert r.returncode == 2, r.stderr
    storekit.assert_clear_error(r.stderr.decode(), "argument 'select 1 as \\xff'",
                                "not UTF-8 text (byte 0xff at character 12)")


def test_a_query_piped_or_in_a_file_that_is_not_utf8(shared_demo_store: Path,
                                                     tmp_path: Path) -> None:
    env = {**os.environ, "LC_ALL": "C"}  # stdin decoded with surrogateescape, as in a job
    r = subprocess.run([sys.executable, "-m", "runstore", "--store", str(shared_demo_store),
                        "sql"], input=b"select 1 as \xff", capture_output=True, timeout=120,
                       env=env)
    assert r.returncode == 2, r.stderr
    storekit.assert_clear_error(r.stderr.decode(), "the query on stdin is not UTF-8 text",
                                "byte 0xff", "save it as UTF-8")
    utf16 = tmp_path / "q.sql"
    utf16.write_bytes("select 1 as x".encode("utf-16"))
    r = storekit.cli(shared_demo_store, "sql", "-f", str(utf16))
    assert r.exit_code == 2, r.output
    assert f"the query in '{utf16}' is not UTF-8 text (byte 0xff at byte 0)" in r.output
    # A UTF-8 file still reads, with its BOM and CRLF.
    good = tmp_path / "good.sql"
    good.write_bytes(b"\xef\xbb\xbfselect 'caf\xc3\xa9' as x\r\n")
    r = storekit.cli(shared_demo_store, "sql", "-f", str(good), "-F", "jsonl")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"x": "café"}


def test_a_run_directory_named_in_another_encoding_is_left_out(small_tree: Path,
                                                               tmp_path: Path) -> None:
    runs = sorted(p.parent for p in small_tree.rglob("config.json"))
    assert len(runs) == 3
    store = tmp_path / "store"
    assert storekit.cli(store, "ingest", "-q", str(small_tree)).exit_code == 0
    before = runstore.open(store).arrow("select run_id, count(*) as n from metrics_raw "
                                        "group by 1 order by 1").to_pylist()
    # A fourth run, a copy of the first, under a directory whose name is Latin-1 bytes.
    odd = os.path.join(os.fsencode(small_tree), b"caf\xe9")
    os.makedirs(odd)
    shutil.copytree(os.fsencode(runs[0]), os.path.join(odd, b"run"))
    shown = "caf\\xe9/run"  # the run's name, relative to the tree given
    for _ in range(2):  # warned again by the next ingest, which changes nothing else
        warnings: list[str] = []
        report = runstore.open(store).ingest([small_tree], on_warning=warnings.append)
        assert [w for w in warnings if "not UTF-8" in w] == [
            f"{shown}: skipped: its name is not UTF-8 (rename it to ingest it)"], warnings
        assert report.runs_new == 0
    after = runstore.open(store).arrow("select run_id, count(*) as n from metrics_raw "
                                       "group by 1 order by 1").to_pylist()
    assert after == before and len(after) == 3
    # The command says the same, exit 0.
    r = storekit.cli(store, "ingest", str(small_tree))
    assert r.exit_code == 0, r.output
    assert f"warning: {shown}: skipped: its name is not UTF-8" in r.output
