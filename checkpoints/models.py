"""Models of the mirrored history (filled in by the Django site issue)."""
