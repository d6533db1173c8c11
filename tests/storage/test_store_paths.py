"""A store wherever its path says: names with spaces, `#`, `?`, `%`, non-ASCII letters.

The Delta library names a table's files by URL (a space is `%20`); read back as paths
undecoded, every file of a store under such a path looked missing: the first ingest failed
asking for a repair that found nothing, and a healthy store moved there was called damaged
by every writing command. Under a few characters the library cannot write a table at all;
a writer refuses those up front, with the reason, and the refused set is held here to what
the library itself does, character by character.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from runstore.storage.location.local import DELTA_REFUSES, LONGEST_INSIDE, Local
from runstore.storage.manifest import read_manifest
from runstore.storage.repair.report import QUARANTINE
from storekit import cli, counts, digest

# `lr=1e-4`: DuckDB reads a `key=value` directory as a Hive partition unless told not to,
# which would add a column `lr` to every table.
ODD_NAMES = ["my store", "hash#1", "what?", "100%", "a%zz", "ünï", "qu'ote", 'dq"x', "a,b;c=d",
             "paren(x)", "star*", "tilde~", "at@amp&", "lt<gt>", "brace{x}", "grave`",
             "lr=1e-4"]
REFUSED_NAMES = ["pct%41", "br[x]", "pipe|x", "caret^x", "back\\slash", "tab\tx", "nl\nx",
                 "del\x7fx"]


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory,
          _small_template: Path) -> tuple[Path, dict[str, list[str]]]:
    """The small tree ingested into a store at a plain path: the rows every store of it has."""
    store = tmp_path_factory.mktemp("plain") / "store"
    assert cli(store, "ingest", str(_small_template), "-q").exit_code == 0
    return store, digest(store)


@pytest.mark.parametrize("name", ODD_NAMES)
def test_a_store_under_an_odd_name_is_written_read_and_kept(
        name: str, _small_template: Path, tmp_path: Path,
        plain: tuple[Path, dict[str, list[str]]]) -> None:
    """The same rows as at a plain path (the same source tree: run ids name their sources),
    and a second ingest, a compaction and a check of every file all succeed."""
    store = tmp_path / name / "store"
    result = cli(store, "ingest", str(_small_template), "-q")
    assert result.exit_code == 0, result.output
    assert digest(store) == plain[1]
    for args in (["ingest", str(_small_template), "-q"], ["compact"], ["repair", "--check"]):
        result = cli(store, *args)
        assert result.exit_code == 0, (args, result.output)
    assert "healthy" in result.output
    assert digest(store) == plain[1]


def test_a_healthy_store_moved_under_a_space_stays_healthy(
        plain: tuple[Path, dict[str, list[str]]], tmp_path: Path) -> None:
    moved = tmp_path / "moved store #1"
    shutil.copytree(plain[0], moved, symlinks=True)
    for args in (["repair", "--check"], ["compact"]):
        result = cli(moved, *args)
        assert result.exit_code == 0, (args, result.output)
    run = runstore_run_ids(moved)[0]
    result = cli(moved, "forget", run)
    assert result.exit_code == 0, result.output
    assert counts(moved)["runs"] == counts(plain[0])["runs"] - 1
    assert "healthy" in cli(moved, "repair", "--check").output


def runstore_run_ids(store: Path) -> list[str]:
    import runstore

    return sorted(runstore.open(store).sql("select run_id from runs")["run_id"].to_list())


@pytest.mark.parametrize("name", REFUSED_NAMES)
def test_a_path_the_delta_library_cannot_write_under_is_refused_with_the_reason(
        name: str, small_tree: Path, tmp_path: Path) -> None:
    store = tmp_path / name / "store"
    result = cli(store, "ingest", str(small_tree), "-q")
    assert result.exit_code == 2, result.output
    assert "Delta Lake library cannot write" in result.output and "Traceback" not in result.output
    assert not (tmp_path / name / "store" / "tables").exists()  # nothing was begun


def _delta_writes_under(directory: Path) -> bool:
    """Whether the Delta library writes, appends to and lists a table under `directory`."""
    table = directory / "t"
    try:
        deltalake.write_deltalake(str(table), pa.table({"a": [1]}))
        deltalake.write_deltalake(str(table), pa.table({"a": [2]}), mode="append")
        files = Local(table).relative_files(deltalake.DeltaTable(str(table)).file_uris())
    except BaseException:  # noqa: BLE001 - its errors, and the panic pyo3 raises
        return False
    return len(files) == 2 and all((table / f).is_file() for f in files)


@pytest.mark.parametrize("chars", [
    "".join(chr(c) for c in range(0x20, 0x7f) if not chr(c).isalnum() and chr(c) != "/"),
    "\t\n\x01\x1f\x7f", "üé€中", ])
def test_the_refused_characters_are_the_ones_the_delta_library_fails_on(
        chars: str, tmp_path: Path) -> None:
    """Each character (and `%` before two hex digits, or not) alone in a directory name: the
    library writes a table under it exactly when the writer would not refuse the path."""
    names = [f"d{c}x" for c in chars] + (["p%41", "p%zz", "p%4"] if "%" in chars else [])
    for i, name in enumerate(names):
        directory = tmp_path / str(i) / name
        assert _delta_writes_under(directory) == (DELTA_REFUSES.search(str(directory)) is None), \
            repr(name)


def _path_of_length(base: Path, length: int) -> Path:
    """A path of exactly `length` bytes under `base`, its parents made (names of at most 200
    bytes: each fits the system's per-name limit)."""
    names, left = [], length - len(os.fsencode(str(base))) - 1
    assert left > 0
    while left > 0:
        n = min(200, left)
        if 0 < left - n - 1 < 2:  # leave room for a next name of at least two bytes
            n -= 3
        names.append("d" * n)
        left -= n + 1
    path = Path(base, *names)
    assert len(os.fsencode(str(path))) == length
    os.makedirs(path.parent, exist_ok=True)
    return path


def _path_max(directory: Path) -> int:
    return os.pathconf(directory, "PC_PATH_MAX")


def test_a_store_path_too_long_for_its_files_is_refused_before_anything_is_made(
        small_tree: Path, tmp_path: Path) -> None:
    """Its directories could be made, but not every file inside: the first writer used to
    make the tables, then fail with exit 6 and "run the command again", which never helps."""
    limit = _path_max(tmp_path)
    store = _path_of_length(tmp_path, limit - 1 - 1 - LONGEST_INSIDE + 1)  # one byte too long
    result = cli(store, "ingest", str(small_tree), "-q")
    assert result.exit_code == 2, result.output
    assert "choose a shorter --store path" in result.output and "Traceback" not in result.output
    assert not os.path.lexists(store)


def test_a_store_at_the_longest_path_allowed_takes_every_writing_command(
        small_tree: Path, tmp_path: Path) -> None:
    """`LONGEST_INSIDE` is enough: at the longest path the check allows, every writer
    (including a repair that sets a damaged data file aside, the deepest path it makes)
    writes every file it needs."""
    store = _path_of_length(tmp_path, _path_max(tmp_path) - 1 - 1 - LONGEST_INSIDE)
    for args in (["ingest", str(small_tree), "-q"], ["migrate"],
                 ["compact", "--vacuum-hours", "0"]):
        result = cli(store, *args)
        assert result.exit_code == 0, (args, result.output)
    result = cli(store, "forget", runstore_run_ids(store)[0])
    assert result.exit_code == 0, result.output
    live = [f for entry in read_manifest(store).tables.values() for f in entry["files"]]
    deepest = store / max(live, key=len)
    deepest.write_bytes(deepest.read_bytes()[:20])  # its footer gone: repair sets it aside
    result = cli(store, "repair")
    assert result.exit_code == 0, result.output
    assert any(str(deepest.relative_to(store)) in str(p)
               for p in (store / QUARANTINE).rglob("*")), result.output
    assert "healthy" in cli(store, "repair", "--check").output
    assert cli(store, "ingest", str(small_tree), "-q").exit_code == 0


def test_the_demo_refuses_a_store_path_too_long_before_writing_its_tree(tmp_path: Path) -> None:
    limit = _path_max(tmp_path)
    store = _path_of_length(tmp_path / "s", limit - 1 - 1 - LONGEST_INSIDE + 1)
    base = tmp_path / "demo"
    result = cli(store, "demo", str(base))
    assert result.exit_code == 2, result.output
    assert "choose a shorter --store path" in result.output
    assert not os.path.lexists(base / "runs") and not os.path.lexists(store)
