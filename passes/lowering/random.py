"""Lowerings of the random family."""
