"""``torch.linalg.vector_norm(x)`` (2-norm) as eager's CPU kernel computes it
(``aten/src/ATen/native/cpu/ReduceOpsKernel.cpp``, ``norm_kernel_tensor_iterator_impl``'s
vectorized path), one ``lazycore::norm_two_rows`` a call.

Every transformers training loop clips with ``clip_grad_norm_``, which takes the
2-norm of each gradient and then of the norms: the clipping factor scales every
update, so a norm's last bit is every parameter's. Eager's kernel takes a
contiguous float32 or float64 input reduced over its trailing dimensions row by
row (``binary_kernel_reduce_lastdim``: one thread a row):

- the row's whole vectors of ``lanes`` elements squared (rounded) and added lane
  by lane from zero, the lanes then added in order (``lazy.norm_squares``, one node);
- the tail after the last whole vector, ``buffer[0] += x * x`` in a scalar loop,
  which the compiler vectorizes by :data:`TAIL_GROUP`: the first whole groups'
  squares rounded and added in order, the rest fused multiply-adds;
- the square root.

Probed bit for bit on this machine (float32 and float64 rows of 1 to 3,000;
1,500 random lengths each: 0 off, against 6 of 1,500 with every tail square
fused and 4 of 1,500 with groups of 2). Which vectors the kernel runs is asked
of eager once per type, on rows with every kind of tail (:func:`lanes`); where
no candidate matches (another build), torch._decomp's decomposition runs, as it
did before (:mod:`.sum_kernel`: its sum stays one ``lazy.reduce_sum``). Other
orders, types, dimensions or layouts reach eager's generic reduction, not
modelled, and take that decomposition too.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch

from lazycore.ir.context import TRACE
from lazycore.ir.memo import Memo

from ..lowering import apply, lowers
from . import sum_kernel

aten = torch.ops.aten

TAIL_GROUP = 4
"""The tail's squares in whole groups of this many are rounded and added in order;
the ones after the last group are fused multiply-adds."""

_LANES = Memo("torch.norm_kernel_lanes", 4)
"""dtype -> the lanes of eager's 2-norm kernel's vectors, 0 where none matched."""


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once (float32: the product and sum in float64, whose
    rounding twice differs only at a float32 midpoint; float64: exact rationals)."""
    t = c.dtype.type
    if t is np.float32:
        return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)
    return np.array([float(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
                     for x, y, z in zip(a, b, c)], np.float64)


def reference(rows: np.ndarray, lanes: int) -> np.ndarray:
    """Eager's 2-norm of each row of the 2-d float ``rows`` with vectors of ``lanes``."""
    return np.sqrt(squares(rows, lanes))


def squares(rows: np.ndarray, lanes: int) -> np.ndarray:
    """The sum of squares eager's 2-norm kernel roots, per row of the 2-d float ``rows``
    (``lazy.norm_squares`` with ``lanes`` and :data:`TAIL_GROUP`)."""
    t = rows.dtype.type
    n = rows.shape[1]
    whole = n - n % lanes
    acc = np.zeros((rows.shape[0], lanes), t)
    for d in range(0, whole, lanes):
        v = rows[:, d:d + lanes]
        acc = acc + v * v
    total = acc[:, 0]
    for j in range(1, lanes):
        total = total + acc[:, j]
    grouped = whole + TAIL_GROUP * ((n - whole) // TAIL_GROUP)
    for i in range(whole, n):
        x = rows[:, i]
        total = total + x * x if i < grouped else _fma(x, x, total)
    return total


def lanes(dtype: torch.dtype) -> int | None:
    """The lanes of eager's 2-norm kernel's vectors for ``dtype`` (float32, float64), or None."""
    # 64 rows a length: tails of 0 to 7 elements after 0 to 137 vectors (a fused
    # square differs from a rounded one's sum in a few rows of each)
    return sum_kernel.probed_lanes(_LANES, dtype, [(64, n) for n in (3, 7, 13, 22, 31, 100, 1100)],
                                   lambda t: torch.linalg.vector_norm(t, dim=-1), reference)


_LIB = torch.library.Library("lazycore", "FRAGMENT")
_LIB.define("norm_two_rows(Tensor self) -> Tensor")


def _rows_meta(x):
    return x.new_empty(x.shape[:-1])


def _rows_eager(x):
    # (a materialized call: eager's own kernel)
    return torch.linalg.vector_norm(x, 2, dim=-1)


_LIB.impl("norm_two_rows", _rows_meta, "Meta")
_LIB.impl("norm_two_rows", _rows_eager, "CPU")


@lowers(torch.ops.lazycore.norm_two_rows.default)
def _norm_two_rows(ctx, x):
    # one node whatever the row's length: a dimension padded by shape buckets is summed
    # at the bucket's length, one program for the bucket (as torch.sum's vector_sum)
    count = lanes(torch.float64 if ctx.dtype == "f64" else torch.float32)
    return apply("sqrt", apply("norm_squares", x, lanes=count, tail_group=TAIL_GROUP))


def _trailing(x, dim) -> int | None:
    """How many trailing dimensions of ``x`` ``dim`` names (all of them for None), or
    None where it names others too (or none)."""
    rank = x.dim()
    if dim is None:
        return rank
    named = [dim] if isinstance(dim, int) else list(dim)
    if not named:
        return None
    found = sorted({d % rank for d in named})
    return rank - found[0] if found == list(range(found[0], rank)) else None


def decomposition(func):
    """For ``linalg_vector_norm``: eager's kernel where its vectorized path runs and
    is modelled (:func:`lanes`), else :mod:`.sum_kernel`'s decomposition; else None."""
    if func is not aten.linalg_vector_norm.default:
        return None
    other = sum_kernel.decomposition(func)

    def norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
        k = None
        if (type(ord) in (int, float) and ord == 2 and (dtype is None or dtype == x.dtype) and x.dim()
                and x.numel() and not TRACE.symbolic and x.is_contiguous() and lanes(x.dtype) is not None):
            k = _trailing(x, dim)
        if k is None:
            return other(x, ord, dim, keepdim, dtype=dtype)
        lead = tuple(x.shape[:x.dim() - k])
        out = torch.ops.lazycore.norm_two_rows(x.reshape(lead + (-1,)))
        return out.reshape(lead + (1,) * k) if keepdim else out

    return norm
