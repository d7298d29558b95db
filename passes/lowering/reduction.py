"""Lowerings of the reduction family."""
