"""shape ops of the lazy dialect (filled in by the op-family work)."""
