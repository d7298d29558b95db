"""searchsorted: eager's binary search (``aten/src/ATen/native/Bucketization.cpp``,
``cus_lower_bound`` / ``cus_upper_bound``), run for every value at once.

``n.bit_length()`` halving steps, each a gather of the middle element: the
same steps give eager's position wherever the order is not total (a NaN in
the sequence), where a count of the smaller elements would not. A lowering,
not a decomposition on lazy tensors: the middle positions are in range by
construction, and a gather through ``index_select`` would add a value check
per step to the program (and its message beside the user's own index's).
"""

from __future__ import annotations

import math

import torch

from ..dtypes import lazy_dtype
from ..lowering import apply, const, convert, lowers, operand, reshape

aten = torch.ops.aten


def _gather(flat, at):
    """``flat`` (1-D) at the positions ``at`` (any shape, int64, in range)."""
    k = math.prod(at.shape)
    g = apply("gather", flat, reshape(at, (k, 1)), offset_dims=(), collapsed_slice_dims=(0,),
              operand_batching_dims=(), start_indices_batching_dims=(), start_index_map=(0,), index_vector_dim=1,
              slice_sizes=(1,), indices_are_sorted=False)
    return reshape(g, at.shape)


@lowers(aten.searchsorted.Tensor, aten.searchsorted.Scalar)
def _searchsorted(ctx, seq, values, out_int32=False, right=False, side=None, sorter=None):
    right = right or side == "right"
    dev = ctx.device
    common = lazy_dtype(torch.result_type(ctx.margs[0], ctx.margs[1]))
    shape = ctx.shape
    n = seq.shape[-1]
    if n == 0 or math.prod(shape) == 0:
        return const(0, ctx.dtype, dev, shape)
    vals = operand(values, common, shape, dev)
    flat_seq = reshape(convert(seq, common), (math.prod(seq.shape),))
    flat_sorter = None if sorter is None else reshape(convert(sorter, "i64"), (math.prod(sorter.shape),))
    if len(seq.shape) == 1:
        row = None
    else:  # row r of the sequence serves row r of the values: its first element's place
        rows = math.prod(seq.shape[:-1])
        row = reshape(apply("iota", dim=0, shape=(rows, shape[-1]), dtype="i64", device=dev), shape)
        row = apply("mul", row, const(n, "i64", dev, shape))
    start = const(0, "i64", dev, shape)
    end = const(n, "i64", dev, shape)
    one, last = const(1, "i64", dev, shape), const(n - 1, "i64", dev, shape)
    for _ in range(n.bit_length()):
        mid = apply("add", start, apply("div", apply("sub", end, start), const(2, "i64", dev, shape)))
        at = apply("minimum", mid, last)
        if row is not None:
            at = apply("add", at, row)
        if flat_sorter is not None:
            at = _gather(flat_sorter, at)
            if row is not None:
                at = apply("add", at, row)
        middle = _gather(flat_seq, at)
        # eager's comparisons, negated as it writes them: a NaN moves start right
        go_right = apply("not", apply("compare", middle, vals, direction="GT" if right else "GE"))
        active = apply("compare", start, end, direction="LT")
        start = apply("select", apply("and", active, go_right), apply("add", mid, one), start)
        end = apply("select", apply("and", active, apply("not", go_right)), mid, end)
    return convert(start, ctx.dtype) if ctx.dtype != "i64" else start
