"""Add `runs.last_error_line`, the logs.log record whose traceback gave `last_error`, which the doctor's `crashed` reads: null for the stored runs until the ingest sees a traceback set `last_error` again (an append that logs one, or the log read whole again)."""

# Frozen as it was at schema version 9 (runstore/storage/schema.py may add more columns).
RUN_COLUMNS = [("last_error_line", "int64")]


def migrate(ctx):
    ctx.add_columns("runs", RUN_COLUMNS)
