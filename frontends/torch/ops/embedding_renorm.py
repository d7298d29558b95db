"""``embedding_renorm_`` (``nn.Embedding(max_norm=...)``'s forward renormalizes
the rows it looks up, in place, before the lookup) as eager's CPU kernel,
on the device: no host read of the indices.

Eager's kernel (``aten/src/ATen/native/Embedding.cpp``) sorts the indices on
the host and, for each distinct row, computes ``norm = row.norm(norm_type)``
in the row's type, widened to double, and where ``norm > max_norm`` scales the
row by ``max_norm / (norm + 1e-7)`` (double; ``row *= scale`` rounds it to the
row's type, the scalar operand of a float32 ``mul``). Here the set of rows is a
mask over all rows (a scatter of the indices), every row's norm is computed
and the selected rows take the scaled value: static shapes, a row named twice
scaled once.

The norms are eager's ``norm_stub`` loops for a 1-d contiguous row
(``cpu/ReduceOpsKernel.cpp``), so a norm near ``max_norm`` decides as eager's:

- ``norm_type`` 2, float32/float64: the reduce-last-dim fast path, 32-byte
  vectors (the kernel has no AVX512 build: 8 float32 / 4 float64 lanes, also
  on AVX512 machines), ``acc += x * x`` per vector (product and sum rounded
  apart), the lanes summed one after another from lane 0, then the scalar
  tail into that sum: float64's as fused multiply-adds, float32's as
  :data:`_PLAIN_TAIL` says (measured against eager:
  the compiler's contraction of ``b += x * x`` in its unrolled loop), ``sqrt``;
- ``norm_type`` 1: ``binary_kernel_reduce``'s in-order sum of ``|x|`` (a row
  is far below ``GRAIN_SIZE``, so one thread);
- ``inf``: the largest ``|x|`` (order does not matter).

Other norm types and dtypes keep eager's kernel (a counted fallback). A row
index outside ``-rows..rows-1`` fails at the barrier with eager's
``IndexError``; a negative index names the row from the end, as eager's
``self[i]`` does (eager would scale a row named both ways twice; here once).
Width-dependent node counts: float32 ``norm_type`` 2 about ``width / 8 + 12``
nodes, ``norm_type`` 1 two per column (rare in models).
"""

from __future__ import annotations

import math

import torch

from ..lowering import apply, broadcast, const, convert, fused_multiply_add, lowers, reshape, scalar
from .indexing import checked

aten = torch.ops.aten

_VECTOR_BYTES = 32
_PLAIN_TAIL = 4
"""A float32 tail of 4 or more: its first 4 elements eager's build adds as ``b + x * x``
rounded twice, the rest fused; a shorter tail, and float64's, fused (measured
against eager: widths 1-25, 31-37, 50, 64, 100, 128, 300)."""
_ITEMSIZE = {"f32": 4, "f64": 8}


def _column(x, lo: int, hi: int):
    """Columns ``lo:hi`` of ``(rows, width)`` ``x``: ``(rows,)`` if one column."""
    rows = x.shape[0]
    part = apply("slice", x, start=[0, lo], limit=[rows, hi], strides=[1, 1])
    return reshape(part, (rows,)) if hi - lo == 1 else part


def _norm_two(w):
    rows, width = w.shape
    lanes = _VECTOR_BYTES // _ITEMSIZE[w.dtype]
    body = width - width % lanes
    total = None
    if body:
        acc = None
        for lo in range(0, body, lanes):
            v = _column(w, lo, lo + lanes)
            sq = apply("mul", v, v)
            acc = sq if acc is None else apply("add", acc, sq)  # 0 + x*x is x*x
        total = _column(acc, 0, 1)
        for j in range(1, lanes):
            total = apply("add", total, _column(acc, j, j + 1))
    plain = _PLAIN_TAIL if w.dtype == "f32" and width - body >= _PLAIN_TAIL else 0
    for k in range(body, width):
        x = _column(w, k, k + 1)
        if total is None:  # +0 + x * x, either way x * x (never -0)
            total = apply("mul", x, x)
        elif k - body < plain:
            total = apply("add", total, apply("mul", x, x))
        else:
            total = fused_multiply_add(x, x, total)
    return apply("sqrt", total)


def _norm_one(w):
    rows, width = w.shape
    total = apply("abs", _column(w, 0, 1))
    for k in range(1, width):
        total = apply("add", total, apply("abs", _column(w, k, k + 1)))
    return total


def _row_norms(w, p: float):
    if p == 2.0:
        return _norm_two(w)
    if p == 1.0:
        return _norm_one(w)
    return apply("reduce_max", apply("abs", w), dims=(1,))


@lowers(aten.embedding_renorm_.default, aten.embedding_renorm.default)
def _embedding_renorm(ctx, weight, indices, max_norm, norm_type):
    if not hasattr(weight, "shape") or not hasattr(indices, "shape"):
        return NotImplemented
    norm_type = float(norm_type)
    if weight.dtype not in _ITEMSIZE or norm_type not in (1.0, 2.0, math.inf) or len(weight.shape) != 2:
        return NotImplemented
    rows, width = weight.shape
    n = 1
    for s in indices.shape:
        n *= s
    if n == 0 or rows == 0 or width == 0:
        return weight
    dev = weight.device
    idx = reshape(convert(indices, "i64"), (n,))
    idx = checked(idx, rows, f"select(): index {{index}} out of range for tensor of size [{rows}, {width}] at "
                  "dimension 0", "IndexError", low=-rows)
    negative = apply("compare", idx, const(0, "i64", dev, (n,)), direction="LT")
    idx = apply("select", negative, apply("add", idx, const(rows, "i64", dev, (n,))), idx)
    named = apply("scatter", const(0, "i64", dev, (rows,)), reshape(idx, (n, 1)), const(1, "i64", dev, (n,)),
                  update_window_dims=(), inserted_window_dims=(0,), input_batching_dims=(),
                  scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(0,), index_vector_dim=1, mode="add")
    named = apply("compare", named, const(0, "i64", dev, (rows,)), direction="GT")
    norm = convert(_row_norms(weight, norm_type), "f64")  # eager's ``.item<double>()``
    limit = scalar(float(max_norm), "f64", dev, (rows,))
    over = apply("and", named, apply("compare", norm, limit, direction="GT"))
    scale = apply("div", limit, apply("add", norm, scalar(1e-7, "f64", dev, (rows,))))
    scale = broadcast(reshape(convert(scale, weight.dtype), (rows, 1)), (rows, width))
    return apply("select", broadcast(reshape(over, (rows, 1)), (rows, width)), apply("mul", weight, scale), weight)
