"""Bit rot and stray writes inside data pages are found and mended (docs/reliability.md, 7).

A few bytes flipped inside a data page of a Parquet file can leave it decoding fine, to other
values: queries then answer wrongly and nothing notices. The store records a content hash of
every data file when it writes it; these tests flip bytes (at a place where the file still
decodes, to different values: `storekit.flip_silently`) and check that

* `runstore repair --check` (and `store.repair(check=True)`) names the file and exits 1;
* `runstore repair` sets it aside, and the next ingest restores every row as it was;
* a compaction, or a Delta delete that rewrites the file, refuses instead of baking the damage
  into new files that the store would vouch for;
* the ingest ledger (written with pyarrow) carries page checksums that reading verifies.

Two facts about the libraries, which the design rests on, are pinned too: the deltalake writer
writes no page checksums, and DuckDB 2.0.1 does not verify them.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import oracle
import runstore
from runstore.storage.manifest import read_manifest
from storekit import TABLES, assert_clear_error, cli, counts, digest, flip_silently


@pytest.fixture
def rotten(small_tree: Path, tmp_path: Path) -> tuple[Path, str, dict]:
    """A store of the small tree whose metrics_raw file has two bytes flipped in a data page
    of its `value` column; (store, the file, every row as it was before)."""
    store = tmp_path / "store"
    runstore.open(store).ingest([small_tree])
    whole = digest(store)
    m = read_manifest(store)
    (rel,) = m.tables["metrics_raw"]["files"]
    flip_silently(store / rel, "value")
    assert digest(store, ("metrics_raw",)) != {"metrics_raw": whole["metrics_raw"]}
    return store, rel, whole


def test_check_names_the_damaged_file(rotten: tuple[Path, str, dict]) -> None:
    store, rel, _ = rotten
    result = cli(store, "repair", "--check")
    assert result.exit_code == 1, result.stdout
    assert f"table metrics_raw: {rel} is damaged: its bytes no longer match" in result.stdout
    assert "1 problem found" in result.stdout
    report = runstore.open(store).repair(check=True)
    assert len(report.problems) == 1 and rel in report.problems[0]
    assert (store / rel).is_file()  # the check changed nothing


def test_repair_sets_the_file_aside_and_ingest_restores_it(
        rotten: tuple[Path, str, dict], small_tree: Path) -> None:
    store, rel, whole = rotten
    result = cli(store, "repair")
    assert result.exit_code == 0, result.stderr
    assert f"dropped {rel} (damaged: its bytes no longer match" in result.stdout
    assert not (store / rel).exists()
    assert list((store / "_runstore" / "quarantine").glob(f"*/{rel}"))
    assert cli(store, "repair", "--check").exit_code == 0
    assert cli(store, "ingest", "-q", str(small_tree)).exit_code == 0
    assert digest(store) == whole
    assert counts(store) == oracle.expected_counts_of(small_tree, TABLES)


def test_compaction_refuses_damaged_input(rotten: tuple[Path, str, dict]) -> None:
    store, rel, _ = rotten
    before = digest(store)
    result = cli(store, "compact")
    assert result.exit_code == 3
    assert_clear_error(result.stderr, rel, "is damaged", "runstore repair")
    assert digest(store) == before
    assert read_manifest(store).tables["metrics_raw"]["files"] == [rel]


def test_a_rewrite_that_reads_damaged_bytes_publishes_nothing(
        rotten: tuple[Path, str, dict], small_tree: Path) -> None:
    """A re-read source replaces its rows with a Delta delete, which rewrites the damaged
    file: the commit stops before publishing, naming it."""
    store, rel, _ = rotten
    metrics = small_tree / "a" / "rl_flat" / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.write_text("".join(lines[:-3]))  # shorter: read again whole, old rows deleted
    seq = read_manifest(store).seq
    before = digest(store)
    result = cli(store, "ingest", "-q", str(small_tree))
    assert result.exit_code == 3
    assert_clear_error(result.stderr, rel, "is damaged", "runstore repair")
    assert read_manifest(store).seq == seq and digest(store) == before
    assert cli(store, "repair").exit_code == 0
    assert cli(store, "ingest", "-q", str(small_tree)).exit_code == 0
    assert counts(store) == oracle.expected_counts_of(small_tree, TABLES)


def test_the_ledger_has_page_checksums(_small_template: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    runstore.open(store).ingest([_small_template])
    ledger = store / read_manifest(store).ledger
    flip_silently(ledger)  # decodes (without verification) to other values
    with pytest.raises(OSError, match="CRC"):
        pq.ParquetFile(ledger, page_checksum_verification=True).read()
    result = cli(store, "ingest", "-q", str(_small_template))
    assert result.exit_code == 3
    assert_clear_error(result.stderr, "ingest ledger", "runstore repair")
    assert cli(store, "repair").exit_code == 0
    assert cli(store, "ingest", "-q", str(_small_template)).exit_code == 0
    assert counts(store) == oracle.expected_counts_of(_small_template, TABLES)


def test_what_the_libraries_do_not_check(rotten: tuple[Path, str, dict], tmp_path: Path) -> None:
    """Why content hashes: deltalake writes Parquet without page CRCs (pyarrow's verification
    then passes a damaged page), and DuckDB does not verify CRCs even where a file has them."""
    import duckdb
    import pyarrow as pa

    store, rel, _ = rotten
    pq.ParquetFile(store / rel, page_checksum_verification=True).read()  # no error
    path = tmp_path / "with_crc.parquet"
    original = pa.table({"v": [float(i) for i in range(20000)]})
    pq.write_table(original, path, write_page_checksum=True, compression="none")
    flip_silently(path)
    with pytest.raises(OSError, match="CRC"):
        pq.ParquetFile(path, page_checksum_verification=True).read()
    got = duckdb.sql(f"select sum(v) from read_parquet('{path}')").fetchall()[0][0]
    assert got != sum(original.column("v").to_pylist())
