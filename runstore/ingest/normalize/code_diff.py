"""code.diff → the `code_diff` column of the run's `runs` row; no table of its own.

Contract: `text(data)` is the diff as stored: its first `TEXT_LIMIT` bytes (8 MB) decoded as
UTF-8, undecodable bytes replaced. The `runs` row is built once per run from the run's files
(`ingest.job`), so the normalizer itself writes nothing: its registry entry says which kind
this is and that no table holds rows of it.
"""

from __future__ import annotations

from .base import Batch, Output

TEXT_LIMIT = 8 << 20  # code.diff kept up to 8 MB


def text(data: bytes) -> str:
    """The diff as the `code_diff` column holds it."""
    return data[:TEXT_LIMIT].decode("utf-8", errors="replace")


class CodeDiff:
    """code.diff: read for the `runs` row; no rows of its own."""

    kinds = ("code_diff",)
    tables: tuple[str, ...] = ()

    def normalize(self, batch: Batch) -> Output:
        return Output()
