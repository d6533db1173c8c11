"""Hand-damaged store metadata never gives a traceback (docs/reliability.md, 7).

Every command that reads the store checks what it reads: the manifest's fields and their types,
each table entry, each file path, the ledger's columns, the settings' values, the migrations
list, the lock path. A damaged one gives one `Error:` line that names the file and the field and
says what to run; `runstore repair` mends it (or says it cannot), and the store then answers
with every row again after the next ingest.

The damage is generated with hypothesis (derandomized): the newest manifest of a copy of a
small store gets one or two mutations among: a field (top level, a table entry, a file path,
a checksum, a migration, a setting) replaced by null or a value of the wrong type or range,
removed, or joined by an unknown field; the file replaced by invalid JSON, an empty file,
non-UTF-8 bytes or a directory; the lock, the ledger or the manifests directory replaced by a
directory, a file or garbage. Then every command runs through the CLI (CliRunner):
`sql`, `runs`, `check`, `schema`, `views`, `migrate --list`, `repair --check`, `ingest`,
`compact`, `repair`, and `sql` again.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import traceback
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oracle
from conftest import copy_store, examples
import runstore
from runstore.storage.lock import LOCK
from runstore.storage.manifest import LEDGERS, MANIFESTS, manifest_paths
from runstore.errors import RunstoreError
from storekit import TABLES, cli, counts, python_m

CASES = int(os.environ.get("METADATA_CASES", examples(30)))


@pytest.fixture(scope="module")
def template(shared_small_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of the small tree with two snapshots (repair can fall back to the first)."""
    store = copy_store(shared_small_store, tmp_path_factory.mktemp("meta") / "store")
    s = runstore.open(store)
    s.set_setting("kl_threshold", 0.02)
    return store


def newest(store: Path) -> Path:
    return manifest_paths(store)[-1][1]


def node_paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path of a JSON document (dict keys and list indices), the root excluded."""
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for k, v in items:
        if isinstance(doc, list) and k > 1:
            break  # the first two elements of a list stand for the rest
        out.append(prefix + (k,))
        out.extend(node_paths(v, prefix + (k,)))
    return out


def parent(doc: Any, path: tuple) -> Any:
    for k in path[:-1]:
        doc = doc[k]
    return doc


BAD_VALUES = [None, "", "x", "1", -1, -7, 0, 1.5, 2**64, True, [], [1], {}, {"a": 1},
              float("nan"), float("inf"), "/etc/passwd", "../../../etc/passwd",
              "tables/runs/../../x.parquet", "tables/runs/missing.parquet",
              "sha256:" + "0" * 64]
BAD_TEXTS = [b"", b"{", b"[]", b"null", b'"text"', b"\xff\xfe\x00garbage", b'{"seq": ',
             b"{\"seq\": 1, \"tables\": {}}"]
PLACES = ["lock-dir", "lock-symlink", "manifest-dir", "manifests-file", "ledger-dir",
          "ledger-garbage", "ledger-columns", "ledger-state", "ledgers-file"]


def mutations(doc: dict) -> st.SearchStrategy:
    paths = node_paths(doc)
    containers = [()] + [p for p in paths if isinstance(_get(doc, p), dict)]
    return st.one_of(
        st.tuples(st.just("set"), st.sampled_from(paths), st.sampled_from(BAD_VALUES)),
        st.tuples(st.just("delete"), st.sampled_from(paths)),
        st.tuples(st.just("extra"), st.sampled_from(containers), st.text(max_size=6),
                  st.sampled_from(BAD_VALUES)),
        st.tuples(st.just("text"), st.sampled_from(BAD_TEXTS)),
        st.tuples(st.just("place"), st.sampled_from(PLACES)),
    )


def _get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def damage(store: Path, muts: list[tuple]) -> None:
    path = newest(store)
    doc: Any = json.loads(path.read_text())
    raw: bytes | None = None
    for mut in muts:
        kind = mut[0]
        if kind in ("set", "delete", "extra") and raw is None and isinstance(doc, dict):
            try:
                if kind == "set":
                    parent(doc, mut[1])[mut[1][-1]] = mut[2]
                elif kind == "delete":
                    del parent(doc, mut[1])[mut[1][-1]]
                else:
                    target = _get(doc, mut[1])
                    if isinstance(target, dict):
                        target[mut[2] or "extra"] = mut[3]
            except (KeyError, IndexError, TypeError):
                pass  # an earlier mutation removed or replaced the place
        elif kind == "text":
            raw = mut[1]
        elif kind == "place":
            place(store, mut[1])
    if path.is_file() and (raw is not None or doc != json.loads(path.read_text())):
        path.write_bytes(raw if raw is not None else json.dumps(doc).encode())


def clear(path: Path) -> None:
    """Remove whatever is at `path` (file, link or directory)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def place(store: Path, what: str) -> None:
    lock = store / LOCK
    ledger = store / LEDGERS / "00000002.parquet"  # the template's (seq 2 shares it)
    if what == "lock-dir":
        clear(lock)
        lock.mkdir()
    elif what == "lock-symlink":
        clear(lock)
        lock.symlink_to("/dev/null")
    elif what == "manifest-dir":
        paths = manifest_paths(store)
        if paths:
            clear(paths[-1][1])
            paths[-1][1].mkdir()
    elif what == "manifests-file":
        clear(store / MANIFESTS)
        (store / MANIFESTS).write_text("not a directory")
    elif what == "ledgers-file":
        clear(store / LEDGERS)
        (store / LEDGERS).write_text("not a directory")
    elif not ledger.is_file():
        return  # the ledger was already replaced by something else
    elif what == "ledger-dir":
        clear(ledger)
        ledger.mkdir()
    elif what == "ledger-garbage":
        ledger.write_bytes(b"PAR1garbagePAR1")
    elif what in ("ledger-columns", "ledger-state"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            t = pq.read_table(ledger)
        except Exception:
            return  # garbage already
        if what == "ledger-columns":
            t = t.drop_columns(["offset"]).append_column("offset", pa.array(["x"] * len(t)))
        else:
            t = t.set_column(t.schema.get_field_index("state"), "state",
                             pa.array(["[1, 2]"] * len(t)))
        pq.write_table(t, ledger)


COMMANDS: list[list[str]] = [
    ["sql", "select count(*) as n from metrics_raw", "-F", "csv"],
    ["runs", "-F", "csv"],
    ["check", "-F", "csv"],
    ["schema"],
    ["views"],
    ["migrate", "--list"],
    ["repair", "--check"],
    ["ingest", "-q", "TREE"],
    ["compact"],
]


def invoke(store: Path, args: list[str]) -> Any:
    result = cli(store, *args, catch_exceptions=True)
    where = f"{args}: exit {result.exit_code}\n{result.stdout}\n{result.stderr}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(where + "".join(traceback.format_exception(result.exception)))
    assert result.exit_code in (0, 1, 2, 3, 4, 6), where  # never 70, "a runstore bug"
    assert "Traceback" not in result.stdout + result.stderr, where
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    if result.exit_code and not (args[0] == "check" and not result.stderr) and \
            args[:2] != ["repair", "--check"]:
        assert len(errors) == 1, where  # one clear line (a flagged `check` prints none)
    if args[:2] == ["repair", "--check"] and result.exit_code == 1 and not errors:
        assert result.stdout.startswith("- "), where  # the damage, by name
    return result


def every_command_then_repair(store: Path, tree: Path) -> None:
    for args in COMMANDS:
        invoke(store, [str(tree) if a == "TREE" else a for a in args])
    repaired = invoke(store, ["repair"])
    if repaired.exit_code != 0:
        return  # it said, in one `Error:` line, why it cannot
    again = invoke(store, ["sql", "select count(*) as n from runs", "-F", "csv"])
    assert again.exit_code == 0, again.stderr
    assert invoke(store, ["repair", "--check"]).exit_code == 0
    assert invoke(store, ["ingest", "-q", str(tree)]).exit_code == 0
    assert counts(store) == oracle.expected_counts_of(tree, TABLES)


@pytest.mark.slow
@settings(max_examples=CASES, derandomize=os.environ.get("METADATA_RANDOM") is None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_manifest_never_gives_a_traceback(data: st.DataObject, template: Path,
                                                  _small_template: Path) -> None:
    doc = json.loads(newest(template).read_text())
    muts = data.draw(st.lists(mutations(doc), min_size=1, max_size=2), label="mutations")
    work = Path(tempfile.mkdtemp(prefix="meta-"))
    try:
        store = work / "store"
        shutil.copytree(template, store, symlinks=True)
        damage(store, muts)
        every_command_then_repair(store, _small_template)
    finally:
        shutil.rmtree(work, ignore_errors=True)


NAMED = {
    "tables-null": ([("set", ("tables",), None)], "tables must be an object"),
    "schema-version-string": ([("set", ("schema_version",), "1")],
                              "schema_version must be an integer"),
    "lock-directory": ([("place", "lock-dir")], "is a directory"),
    "files-null": ([("set", ("tables", "metrics_raw", "files"), None)],
                   "tables.metrics_raw.files must be a list"),
    "file-outside-the-store": ([("set", ("tables", "runs", "files", 0), "/etc/passwd")],
                               "tables.runs.files[0] must be a .parquet path inside"),
    "setting-not-a-number": ([("set", ("settings", "kl_threshold"), "high")],
                             "kl_threshold is 'high', not a number"),
    "ledger-wrong-columns": ([("place", "ledger-columns")], "a column has the wrong type"),
}


@pytest.mark.parametrize("case", sorted(NAMED))
def test_named_damage(case: str, template: Path, _small_template: Path, tmp_path: Path) -> None:
    """The damage the issue names, through a real process: the message names the manifest
    field (or the path) and `runstore repair`; repair mends it; every row comes back."""
    muts, needle = NAMED[case]
    store = tmp_path / "store"
    shutil.copytree(template, store, symlinks=True)
    damage(store, muts)
    refused = 0
    for args in (["sql", "select count(*) from runs"], ["ingest", "-q", str(_small_template)],
                 ["repair", "--check"]):
        p = python_m(store, *args)
        assert "Traceback" not in p.stderr, p.stderr
        if p.returncode:
            refused += 1
            assert p.returncode == (1 if args[0] == "repair" else 3), p.stderr
            text = p.stderr if args[0] != "repair" else p.stdout + p.stderr
            assert needle in text and "runstore repair" in text, (args, text)
            if args[0] == "sql":  # the Python API says the same
                with pytest.raises(RunstoreError, match="runstore repair") as e:
                    runstore.open(store).sql("select count(*) from runs")
                assert needle in str(e.value)
    assert refused >= 2
    p = python_m(store, "repair")
    assert p.returncode == 0, p.stderr
    assert p.stdout.rstrip().splitlines()[-1].startswith("repaired (snapshot ")
    assert python_m(store, "ingest", "-q", str(_small_template)).returncode == 0
    assert counts(store) == oracle.expected_counts_of(_small_template, TABLES)
