"""runstore.present."""
