"""The fingerprint of the store files a writer relies on besides the manifest: is the store
still as a snapshot was published over it, without opening a Delta table or the ledger?

Contract: `of(root, manifest)` is one digest of the bytes of the snapshot's ledger file, the
table directories under `tables/`, and, for each, the part of its Delta log that Delta reads
to open it (`_last_checkpoint`, the newest checkpoint and every later entry; their names and
bytes). A writer opening the store relies on exactly these (it rolls back log entries no
snapshot covers, refuses a table whose log is damaged or gone, reads the ledger with its
page checksums), so the same fingerprint means none of that has anything to find: no
entry appended (a writer killed before publishing, a compaction by hand), none lost or
damaged, no ledger replaced or bit-rotten. It reads a few small files (the log's tail, the
ledger) and lists one directory per table (on S3, the tables' at once, in threads): no Delta
table, no Parquet decoder, no pyarrow.
Data files are not covered (an ingest with nothing to read never opens them; their content
hashes are integrity.py's).

`KEY` is where a manifest keeps it: `last_ingest[KEY]`, written by `Writer.commit(stamp=True)`
once every file the snapshot names is written, and written again by a compaction (it changes
no row and no ledger entry, only files and log entries). Any other change to the store (a
migration, a repair, a forget, damage) leaves the recorded one stale, so a caller comparing
it takes its whole path (ingest/unchanged.py).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

KEY = "store_fingerprint"
LOG = "_delta_log"
_VERSIONED = re.compile(r"^(\d{20})\.")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d+\.\d+)?\.parquet$")


def of(root: Any, manifest: Any) -> str:
    """The store's fingerprint as the snapshot `manifest` sees it (see the module).
    Raises OSError (FileNotFoundError, ...) when a file it covers cannot be read."""
    h = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        h.update(f"{label}\0{len(data)}\0".encode("utf-8", "surrogateescape"))
        h.update(data)

    add("ledger", root.read(manifest.ledger) if manifest.ledger else b"")
    tables = root.list("tables")
    add("tables", "\0".join(tables).encode("utf-8", "surrogateescape"))

    def tail(name: str) -> list[tuple[str, bytes]]:
        rel = f"tables/{name}/{LOG}"
        return [(f"{rel}/{e}", root.read(f"{rel}/{e}")) for e in _tail(root.list(rel))]

    # On S3 a round trip per listing and per file: the tables' are asked for at once (the
    # digest takes them in the same order).
    for part in root.each(tail, tables):
        for label, data in part:
            add(label, data)
    return h.hexdigest()


def holds(root: Any, manifest: Any) -> bool:
    """Whether `manifest` records a fingerprint and the store has it now (False too when a
    file it covers cannot be read)."""
    recorded = (manifest.last_ingest or {}).get(KEY)
    try:
        return recorded is not None and recorded == of(root, manifest)
    except OSError:
        return False


def _tail(names: list[str]) -> list[str]:
    """The log entries Delta reads to open a table: `_last_checkpoint`, the newest
    checkpoint and every versioned file from it on (every one when there is none)."""
    points = [int(m.group(1)) for m in map(_CHECKPOINT.match, names) if m]
    since = max(points, default=-1)
    out = [n for n in names if (m := _VERSIONED.match(n)) and int(m.group(1)) >= since]
    return (["_last_checkpoint"] if "_last_checkpoint" in names else []) + out
