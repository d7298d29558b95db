"""Row reductions in eager's CPU vector-lane order: sums and Welford moments.

Each reduces the last dimension lane by lane across its vectors (``at::vec``),
as eager's CPU kernels add, one node whatever the row's length. XLA's ``reduce`` adds in an order of its own (a tree, not a sequence), so a float
row sum or a row's moments differ from eager's in the last bits; lowered as a
frontend's slices and adds, eager's order cost a node pair per vector (a 256x768
layer norm forward and backward: 510 nodes instead of 63). Each op here is one
node; its lowering (``passes/lowering/lanes.py``) expands to the sequence.

- ``lane_sum(lhs, rhs)``: per row, ``vec::map2_reduce_all``'s sum of ``lhs * rhs``
  with ``lanes`` lanes: a row under ``lanes`` elements summed in order; else the
  whole vectors' rounded products added lane-wise from the first vector, the
  last partial vector's products fused into the first lanes, and the lanes
  combined by halving (``halving``: float32's ``vec_reduce_all``) or in order;
  ``fused``: each vector's products contracted into the running sum (a chain of
  fused multiply-adds, as eager's ``map3`` accumulations into a buffer), so
  ``lanes=1`` with ``fused`` is an in-order ``fma`` chain along the row.
- ``lane_moments(operand)``: per row, ``RowwiseMoments``' mean and biased
  variance: Welford over chunks of 16 vectors, the chunks' moments merged in a
  cascade, the scalar tail's Welford, then the lanes merged into it in order.
- ``cascade_sum(operand)``: per row, ``nll_loss``'s cascade of ``levels``
  partial sums from zero: element ``b`` is added to level 0, then each level
  ``j`` with ``b`` divisible by ``step**(j + 1)`` is added into level ``j + 1``
  and cleared; the levels are added in order from zero. The flushes depend on
  an element's index, never on the row's length, so zeros appended to a row
  leave its sum as it is (shape-bucket padding masks a padded row with zeros).
- ``vector_sum(operand)``: per row, ``torch.sum``'s CPU kernel (ATen's
  ``cascade_sum``, ``SumKernel.cpp``): a row of ``lanes`` or more elements as
  vectors of ``lanes`` (the rest, the tail, as scalars), the vectors taken four
  at a time into four partial sums, each a cascade of levels flushed every
  ``2**max(4, ceil(log2(groups)) / 4)`` groups, the vectors left over added
  into the first, the four added in order, then the tail in order from zero
  and the lanes in order after it; a shorter row as scalars four at a time
  the same way. ``threads`` above 1 (a whole tensor summed to one number by
  several threads, ``two_pass_reduction``): a row of ``GRAIN`` (32,768)
  elements or more cut into ``at::parallel_for``'s chunks, each summed so,
  the ``threads`` results (unused ones zero) summed so again.
- ``norm_squares(operand)``: per row, the sum of squares of eager's 2-norm kernel
  (``norm_kernel_tensor_iterator_impl``): whole vectors of ``lanes`` squared
  (rounded) and added lane by lane from zero, the lanes added in order, then
  the tail: its whole groups of ``tail_group`` squares rounded and added in
  order, the rest fused multiply-adds.
- ``column_sum(operand)``: per column of the last dimension, the sum over the
  second-to-last (the rows), as ``torch.sum``'s CPU kernel sums leading
  dimensions (``vectorized_outer_sum``, ``scalar_outer_sum``): the first
  columns in blocks of four vectors of ``lanes`` (four columns where there are
  fewer than ``lanes``), each column one cascade of levels down its rows; the
  columns after them each as ``row_sum`` takes a row, four rows at a time.
- ``buffer_sum(lhs, rhs, owner)``: per column, the sum over the rows as eager's
  kernels that give each thread a buffer (layer norm's weight and bias
  gradients): ``threads`` buffers from ``+0``, row ``r``'s products
  ``lhs[r] * rhs[..., r, :]`` fused into buffer ``owner[r]`` in row order
  (``buf = fma(lhs, rhs, buf)``), then the buffers added to ``+0`` in
  thread order. An owner outside ``[0, threads)`` takes its row nowhere.
"""

from __future__ import annotations

from .spec import op
from .types import ShapeError, TensorType

GRAIN = 32768
"""``at::internal::GRAIN_SIZE``: ``vector_sum``'s row of this many elements or
more is cut among ``threads`` (fewer run on one thread)."""


def ceil_log2(x: int) -> int:
    """``at::native::utils::CeilLog2``."""
    return 1 if x <= 2 else (x - 1).bit_length()


def level_step(rows: int) -> int:
    """``multi_row_sum``'s run length for ``rows`` rows (``vector_sum``, ``column_sum``):
    each level is flushed into the next after this many values."""
    return 1 << max(4, ceil_log2(rows) // 4)


def _row(x: TensorType, what: str) -> tuple[int, ...]:
    if x.dtype not in ("f32", "f64"):  # (eager's half types accumulate in float32: their frontends convert)
        raise ShapeError(f"{what} must have element type f32 or f64, got {x.dtype}")
    if x.rank == 0:
        raise ShapeError(f"{what} needs rank 1 or more (rows along the last dimension), got {x}")
    return x.shape[:-1]


def _lanes(lanes: int):
    if lanes < 1:
        raise ShapeError(f"lanes must be positive, got {lanes}")


@op("lane_sum", ("lhs", "rhs"), attrs={"lanes": "i64", "halving": "bool", "fused": "bool"}, padding="own",
    summary="per row of the last dimension, the sum of lhs * rhs in eager's vector-lane order")
def _lane_sum(lhs: TensorType, rhs: TensorType, *, lanes, halving, fused):
    """Both operands have one type, f32 or f64, and one shape of rank 1 or more;
    ``lanes`` is positive. The result is the operands' shape without its last
    dimension, of their type."""
    kept = _row(lhs, "lhs")
    if rhs != lhs:
        raise ShapeError(f"lhs and rhs must have one type, got {lhs} and {rhs}")
    _lanes(lanes)
    return TensorType(kept, lhs.dtype)


@op("lane_moments", ("operand",), attrs={"lanes": "i64"}, results=("mean", "variance"), padding="own",
    summary="per row of the last dimension, eager's Welford mean and biased variance (RowwiseMoments)")
def _lane_moments(x: TensorType, *, lanes):
    """The operand has type f32 or f64 and rank 1 or more; ``lanes`` is positive.
    Both results are the operand's shape without its last dimension, of its type."""
    kept = _row(x, "operand")
    _lanes(lanes)
    return TensorType(kept, x.dtype), TensorType(kept, x.dtype)


@op("cascade_sum", ("operand",), attrs={"step": "i64", "levels": "i64"}, padding="own",
    summary="per row of the last dimension, eager's cascade of partial sums flushed every step**j elements")
def _cascade_sum(x: TensorType, *, step, levels):
    """The operand has type f32 or f64 and rank 1 or more; ``step`` is 2 or
    more and ``levels`` positive. The result is the operand's shape without
    its last dimension, of its type."""
    kept = _row(x, "operand")
    if step < 2 or levels < 1:
        raise ShapeError(f"step must be 2 or more and levels positive, got step {step}, levels {levels}")
    return TensorType(kept, x.dtype)


@op("norm_squares", ("operand",), attrs={"lanes": "i64", "tail_group": "i64"}, padding="own",
    summary="per row of the last dimension, the sum of squares in eager's 2-norm kernel's order")
def _norm_squares(x: TensorType, *, lanes, tail_group):
    """The operand has type f32 or f64 and rank 1 or more; ``lanes`` and
    ``tail_group`` are positive. The result is the operand's shape without its
    last dimension, of its type."""
    kept = _row(x, "operand")
    _lanes(lanes)
    _lanes(tail_group)
    return TensorType(kept, x.dtype)


@op("vector_sum", ("operand",), attrs={"lanes": "i64", "threads": "i64"}, padding="own",
    summary="per row of the last dimension, torch.sum's CPU cascade over vectors of lanes (SumKernel.cpp)")
def _vector_sum(x: TensorType, *, lanes, threads):
    """The operand has type f32 or f64 and rank 1 or more; ``lanes`` and
    ``threads`` are positive. The result is the operand's shape without its
    last dimension, of its type."""
    kept = _row(x, "operand")
    _lanes(lanes)
    if threads < 1:
        raise ShapeError(f"threads must be positive, got {threads}")
    return TensorType(kept, x.dtype)


@op("column_sum", ("operand",), attrs={"lanes": "i64"}, padding="own",
    summary="per column of the last dimension, torch.sum's CPU cascade down the rows (SumKernel.cpp's outer sums)")
def _column_sum(x: TensorType, *, lanes):
    """The operand has type f32 or f64 and rank 2 or more; ``lanes`` is
    positive. The result is the operand's shape without its second-to-last
    dimension, of its type."""
    _row(x, "operand")
    if x.rank < 2:
        raise ShapeError(f"operand needs rank 2 or more (rows, then columns), got {x}")
    _lanes(lanes)
    return TensorType(x.shape[:-2] + x.shape[-1:], x.dtype)


@op("buffer_sum", ("lhs", "rhs", "owner"), attrs={"threads": "i64"}, padding="own",
    summary="per column, the rows' products chained into per-thread buffers by owner, added in thread order")
def _buffer_sum(lhs: TensorType, rhs: TensorType, owner: TensorType, *, threads):
    """``lhs`` has type f32 or f64 and rank 2 (rows, columns); ``rhs`` its
    element type, rank 2 or more, and ``lhs``'s shape as its last two
    dimensions; ``owner`` is a rank-1 integer tensor of one element per row;
    ``threads`` is positive. The result is ``rhs``'s shape without its
    second-to-last dimension, of its type."""
    _row(lhs, "lhs")
    if lhs.rank != 2:
        raise ShapeError(f"lhs must have rank 2 (rows, columns), got {lhs}")
    if rhs.dtype != lhs.dtype or rhs.rank < 2 or rhs.shape[-2:] != lhs.shape:
        raise ShapeError(f"rhs must have lhs's element type and end in its shape, got {lhs} and {rhs}")
    if owner.rank != 1 or owner.shape[0] != lhs.shape[0] or owner.dtype not in ("i32", "i64"):
        raise ShapeError(f"owner must be an i32 or i64 vector of one element per row, got {owner} for {lhs}")
    if threads < 1:
        raise ShapeError(f"threads must be positive, got {threads}")
    return TensorType(rhs.shape[:-2] + rhs.shape[-1:], rhs.dtype)
