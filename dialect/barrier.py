"""``optimization_barrier``: values that the compiler may not see through.

Its results are its operands, unchanged. What it prevents is the compiler
reasoning across it: an op computed from a result is not the same op as one
computed from the operand (so neither lazycore's hash-consed graph nor MLIR's
CSE nor XLA merges the two), and XLA does not move work across it (every
result is available only once every operand is). Activation checkpointing
takes the inputs of the recomputation through one, as ``jax.checkpoint`` and
PyTorch/XLA do, so that the recomputation stays a recomputation.
"""

from __future__ import annotations

from .spec import op
from .types import ShapeError, TensorType

# The MLIR op declares this many optional operands and results (lazycore.dialect.build's
# MIXED_GROUPS: IRDL has no variadic group of several types); a frontend
# with more values uses several barriers.
MAX_OPERANDS = 16


@op("optimization_barrier", ("operands*",), results=("results*",), padding="own",
    summary="its operands unchanged, opaque to CSE and to code motion (stablehlo.optimization_barrier)")
def _optimization_barrier(operands: list[TensorType]):
    """Between 1 and 16 operands, of any types; the results have the operands' types, one per operand."""
    if not 1 <= len(operands) <= MAX_OPERANDS:
        raise ShapeError(f"takes 1 to {MAX_OPERANDS} operands, got {len(operands)}")
    return tuple(operands)
