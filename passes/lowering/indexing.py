"""Lowerings of the indexing family."""
