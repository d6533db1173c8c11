"""runstore.ingest."""
