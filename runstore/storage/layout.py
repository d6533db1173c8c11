"""Parquet layout of the store's files: row order and page settings of what the writer writes.

Contract: `writer_properties(table)` are the Parquet settings of a table's new files (Snappy,
deltalake's default codec; no dictionary for float columns of nearly unique values; for the
tables in `GROUP_ROWS_BY`, pages of at most `PAGE_ROWS` rows in row groups of at most
`GROUP_ROWS` rows). `group_rows(data, column)`
orders a table's rows by one column before it is written, so that a scan for a few values of
it reads few pages. Neither changes a value: only where rows and pages lie.

Why: new files of the tables in `GROUP_ROWS_BY` hold their rows grouped by one column, so a
scan for a few values of it (`key IN (...)`) reads few Parquet pages: DuckDB skips the others
by the min/max statistics of the page index that deltalake writes. Compaction interleaves the
merged files' rows in 8192-row batches; pages of at most PAGE_ROWS rows keep their min/max
narrow there too (the default, 20,000 rows, made a `key IN` scan ~3x slower after compact).
Row groups of GROUP_ROWS rows, not deltalake's ~1 M: a row group is DuckDB's unit of skipping
by min/max and of work for a thread, and with a million rows each of a file's few row groups
holds a third of its keys or more: a one-key question reads the key column of a million rows
in every file, and DuckDB's threads share a handful of groups (bench/bench_layout.py; docs/benchmarks.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
else:  # imported on first use: opening a snapshot for a query needs none of it
    from ..lazy import pyarrow as pa

GROUP_ROWS_BY = {"metrics_raw": "key"}
PAGE_ROWS = 8192
GROUP_ROWS = 131072


def group_rows(data: pa.Table, column: str) -> pa.Table:
    """`data` stably sorted by `column`, as one chunk (deltalake writes a many-chunk table as
    8192-row batches in parallel and interleaves them; one chunk keeps the order).

    Normalized metrics arrive as long runs of one key (a run's buffer is unpivoted column by
    column), so the runs of each batch are found in place and reordered by slicing: the one
    copy made is the final single chunk, without the per-row gather of a sort.
    """
    import numpy as np
    import pyarrow.compute as pc

    if data.num_rows < 2:
        return data.combine_chunks()
    segments: list[tuple[bool, str, int, pa.RecordBatch]] = []  # sort key, then position
    for batch in data.to_batches():
        n = batch.num_rows
        if not n:
            continue
        values = batch.column(column)
        changed = pc.fill_null(pc.not_equal(values.slice(1), values.slice(0, n - 1)), True)
        starts = np.concatenate([[0], np.flatnonzero(changed.to_numpy(zero_copy_only=False)) + 1])
        ends = np.append(starts[1:], n)
        for value, a, b in zip(values.take(pa.array(starts)).to_pylist(), starts, ends):
            segments.append((value is None, value or "", len(segments),
                             batch.slice(int(a), int(b - a))))
        if len(segments) > data.num_rows // 64:  # values interleave row by row (line-by-line
            return _sort_rows(data, column)      # buffers): a sort is faster than slices
    segments.sort(key=lambda seg: seg[:3])
    return pa.Table.from_batches([seg[3] for seg in segments], schema=data.schema).combine_chunks()


def _sort_rows(data: pa.Table, column: str) -> pa.Table:
    """`group_rows` by a sort: ranks of the dictionary codes (~10x faster than the strings)."""
    import pyarrow.compute as pc

    data = data.combine_chunks()
    coded = data.column(column).chunk(0).dictionary_encode()
    ranks = pc.take(pc.rank(coded.dictionary, "ascending"), coded.indices)
    return data.take(pc.sort_indices(ranks))


# Float columns of (nearly) unique values: a dictionary page would only be built to be
# dropped (measured on the bench spans: 12% less CPU to write, 5% smaller files without it).
_NO_DICTIONARY = {"spans": ("duration_s", "wall_start_s", "wall_end_s")}


def writer_properties(table: str) -> Any:
    """Parquet settings for a table's new files (Snappy, deltalake's default codec)."""
    from deltalake import ColumnProperties, WriterProperties

    plain = {c: ColumnProperties(dictionary_enabled=False) for c in _NO_DICTIONARY.get(table, ())}
    # Without a compression WriterProperties writes uncompressed files.
    grouped = table in GROUP_ROWS_BY
    return WriterProperties(compression="SNAPPY", column_properties=plain or None,
                            data_page_row_count_limit=PAGE_ROWS if grouped else None,
                            max_row_group_size=GROUP_ROWS if grouped else None)
