"""runstore.health."""
