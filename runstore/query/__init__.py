"""runstore.query."""
