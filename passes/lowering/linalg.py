"""Lowerings of the linalg family."""
