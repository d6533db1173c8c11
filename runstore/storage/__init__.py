"""runstore.storage."""
