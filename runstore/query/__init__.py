"""Query: answering SQL over one published snapshot, read-only and sandboxed.

`views.py` (the canned views, one documented `sql/*.sql` file each, in dependency order) →
`connect.py` (`Database`: an in-memory DuckDB over one snapshot's live files, building only the
tables and views a statement reads, then locked by `sandbox.py`, DuckDB's own sandbox) →
`session.py` (one database per snapshot, a cursor per query). `guard.py` says what user SQL may
run; `statements/` holds every statement the library runs for itself (documented `.sql` files
or sqlglot trees, values bound); `keys.py` answers "has any run logged KEY?"; `catalog.py`
describes tables and views; `dialects.py` transpiles the views for Spark and Trino.
`reader.py` is the protocol the layers above read a store through. Nothing here writes.
"""
