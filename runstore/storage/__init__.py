"""Storage: the store on disk or S3 — Delta tables, numbered manifests, the ledger, the lock.

`location/` (one interface over local disk and S3; they differ only in how a file is published
once and in the lock) → `schema.py` (every table's columns and types) → `layout.py` (row order,
Parquet page settings) → `writer.py` (exclusive write access, staging, publishing one snapshot
by writing the next manifest) with `lock.py`, `integrity.py` (content hashes) and `failures.py`
→ `manifest.py` / `snapshot.py` (reading a snapshot back) → `vacuum.py` (retention),
`versions.py` + `migrate.py` (schema migrations), `settings.py`, `ledger.py` (what the ingest
has read, as the store keeps it) and `repair/`. Nothing here knows about source files or SQL
views: the ingest and the query layer stand on it.
"""
