"""Lowerings of the shape family."""
