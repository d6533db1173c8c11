"""Add `runs.last_error_line`, the logs.log record whose traceback gave `last_error`, which the doctor's `crashed` reads: null for the stored runs until their logs.log is read again (the ingest finds it as it reads)."""

# Frozen as it was at schema version 9 (runstore/storage/schema.py may add more columns).
RUN_COLUMNS = [("last_error_line", "int64")]


def migrate(ctx):
    ctx.add_columns("runs", RUN_COLUMNS)
