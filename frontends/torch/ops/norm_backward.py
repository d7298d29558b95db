"""Layer norm's backward as eager's CPU kernel computes it, bit for bit.

``native_layer_norm_backward`` went to torch's decomposition (``x_hat``,
``N * g - sum(g) - x_hat * sum(g * x_hat)``, another formula and XLA's sums):
float32 ``F.layer_norm(x, (16,))``'s input gradient differed from eager in
every element. Eager's kernel (``LayerNormBackwardKernelImplInternal``,
``aten/src/ATen/native/cpu/layer_norm_kernel.cpp``) computes, per row of
``N`` elements, two sums with ``vec::map2_reduce_all``/``reduce_all``
(``at::vec``'s functional helpers), then three coefficients in scalar code,
then ``dX`` with ``vec::map2``/``map3``. The orders and the fused
multiply-adds below were probed against eager's bits (float32, rows of 5 to
64, with and without weight, random data), not read off the source alone:
the kernel's translation unit lets the compiler contract a product into the
sum that takes it, and it did so in some places and not others.

- ``ds = sum(dy * x [* w])`` and ``db = sum(dy [* w])`` over ``L`` lanes (one of
  eager's vectors: :func:`.eager_loops._lanes`, probed): a row under ``L``
  elements is summed in order; else lane ``l`` is element ``l`` plus elements
  ``l + L``, ``l + 2L``, ... of the whole vectors (rounded products, plain
  adds), the last partial vector's elements added into the first lanes with
  one fused multiply-add each (the tail's product contracted), and the lanes
  combined: float32's by halving (``VecReduceAllSIMD``: lane ``i`` with
  ``i + L/2``, ...), other types' one after another.
- ``b = fma(db, mean, -ds) * a * a * a * scale``, ``c = fma(-b, mean, -(db * a
  * scale))`` with ``a = rstd`` and ``scale = 1 / N`` rounded.
- ``dX = fma(b, x, a * dy [* w]) + c``.
- The weight's gradient: per thread's chunk of rows (``at::parallel_for`` over
  the rows, grain 1), a buffer from zero takes ``fma(dy, fma(a, x, -a * mean),
  buffer)`` row after row; the bias's takes ``+ dy``; then the buffers are
  added in thread order from zero: chains as long as a chunk's rows, built
  for chunks of :data:`CHAIN_ROWS` rows at most (longer chunks sum their
  rounded products in XLA's order, not eager's bits: a transformers step's).

Float16/bfloat16 (eager's mixed-type kernel) and rows of no elements go to the
decomposition.
"""

from __future__ import annotations

import numpy as np
import torch

from ..dtypes import lazy_dtype
from ..lowering import apply, broadcast, const, convert, lowers, reshape
from . import eager_loops
from .nn import fused_multiply_add

aten = torch.ops.aten

CHAIN_ROWS = 8
"""The most rows of one thread's chunk whose weight and bias gradients are built
as eager's chains (about ten nodes a row); above it the chunk's (rounded)
products are summed by one reduce, in XLA's order (not sequential from 8
terms), not eager's bits. The chains for a tiny GPT-2's step (2 x 32 tokens,
32 per thread: five layer norms) made it 5,656 nodes instead of 1,156, its
compile 67 s instead of 19 s and its tracing 1.5x the CPU time."""

CHAIN_VECTORS = 128
"""The most whole vectors of a row summed lane by lane in eager's order (a slice
and an add each); above it one reduce, in XLA's order."""

_NUMPY = {"f32": np.float32, "f64": np.float64}


def _cut(h, lo, hi, dim=1):
    start = [0] * len(h.shape)
    limit = list(h.shape)
    start[dim], limit[dim] = lo, hi
    return apply("slice", h, start=start, limit=limit, strides=[1] * len(h.shape))


def _column(h, j):
    """Column ``j`` of ``h`` ``(M, N)`` as ``(M,)``."""
    return reshape(_cut(h, j, j + 1), (h.shape[0],))


def _fma(a, b, c, device):
    return fused_multiply_add(a, b, c, device)


def _row_sum(values, p, q, lanes: int, halving: bool, device):
    """Eager's ``reduce_all`` of each row of ``values`` ``(M, N)`` (``p * q`` rounded,
    or plain values where ``q`` is None): see the module's docstring."""
    m, n = values.shape
    if n < lanes:
        acc = _column(values, 0)
        for j in range(1, n):
            acc = apply("add", acc, _column(values, j))
        return acc
    k = n // lanes
    if k <= CHAIN_VECTORS:
        acc = _cut(values, 0, lanes)
        for i in range(1, k):
            acc = apply("add", acc, _cut(values, i * lanes, (i + 1) * lanes))
    else:
        acc = apply("reduce_sum", reshape(_cut(values, 0, k * lanes), (m, k, lanes)), dims=(1,))
    r = n - k * lanes
    if r:
        head = _cut(acc, 0, r)
        if q is None:
            head = apply("add", head, _cut(values, k * lanes, n))
        else:
            head = _fma(_cut(p, k * lanes, n), _cut(q, k * lanes, n), head, device)
        acc = apply("concatenate", head, _cut(acc, r, lanes), dim=1)
    if halving:
        width = lanes
        while width > 1:
            width //= 2
            acc = apply("add", _cut(acc, 0, width), _cut(acc, width, 2 * width))
        return reshape(acc, (m,))
    total = _column(acc, 0)
    for j in range(1, lanes):
        total = apply("add", total, _column(acc, j))
    return total


def _chunks(m: int):
    """``at::parallel_for(0, m, 1)``'s row ranges, one a thread."""
    count = min(eager_loops.threads(), m)
    size = -(-m // count)
    return [(lo, min(m, lo + size)) for lo in range(0, m, size)]


def _column_sums(ctx, dy, h, m, n, dt):
    """The weight's (``h`` given: ``fma(dy, h, buffer)`` per row) or the bias's
    (``+ dy``) gradient over the rows of ``(M, N)``, in eager's per-thread buffers."""
    device = ctx.device
    total = None
    for lo, hi in _chunks(m):
        rows = hi - lo
        row = lambda t, i: reshape(_cut(t, i, i + 1, dim=0), (n,))  # noqa: E731
        if rows > CHAIN_ROWS:
            part = _cut(dy, lo, hi, dim=0)
            if h is not None:
                part = apply("mul", part, _cut(h, lo, hi, dim=0))
            buf = apply("reduce_sum", part, dims=(0,))
        elif h is None:
            buf = row(dy, lo)
            for i in range(lo + 1, hi):
                buf = apply("add", buf, row(dy, i))
        else:
            buf = const(0, dt, device, (n,))
            for i in range(lo, hi):
                buf = _fma(row(dy, i), row(h, i), buf, device)
        total = buf if total is None else apply("add", total, buf)
    return total


@lowers(aten.native_layer_norm_backward.default)
def _native_layer_norm_backward(ctx, grad, x, normalized_shape, mean, rstd, weight, bias, output_mask):
    dt = lazy_dtype(ctx.margs[1].dtype)
    lanes = eager_loops._lanes(ctx.margs[1].dtype)
    shape = tuple(x.shape)
    axis = len(shape) - len(normalized_shape)
    m = int(np.prod(shape[:axis], dtype=np.int64))
    n = int(np.prod(shape[axis:], dtype=np.int64))
    if dt not in _NUMPY or lanes is None or n == 0 or m == 0:
        return NotImplemented
    device = ctx.device
    X = reshape(convert(x, dt), (m, n))
    DY = reshape(convert(grad, dt), (m, n))
    mu = reshape(convert(mean, dt), (m,))
    a = reshape(convert(rstd, dt), (m,))
    w = None if weight is None else broadcast(reshape(convert(weight, dt), (1, n)), (m, n))
    outs = [None, None, None]
    if output_mask[0]:
        halving = dt == "f32"
        if w is None:
            ds = _row_sum(apply("mul", DY, X), DY, X, lanes, halving, device)
            db = _row_sum(DY, None, None, lanes, halving, device)
        else:
            dyx = apply("mul", DY, X)
            ds = _row_sum(apply("mul", dyx, w), dyx, w, lanes, halving, device)
            db = _row_sum(apply("mul", DY, w), DY, w, lanes, halving, device)
        scale = const(float(_NUMPY[dt](1) / _NUMPY[dt](n)), dt, device, (m,))
        b = _fma(db, mu, apply("neg", ds), device)
        for factor in (a, a, a, scale):
            b = apply("mul", b, factor)
        c = _fma(apply("neg", b), mu, apply("neg", apply("mul", apply("mul", db, a), scale)), device)
        t = apply("mul", broadcast(reshape(a, (m, 1)), (m, n)), DY)
        if w is not None:
            t = apply("mul", t, w)
        wide = lambda v: broadcast(reshape(v, (m, 1)), (m, n))  # noqa: E731
        dx = apply("add", _fma(wide(b), X, t, device), wide(c))
        outs[0] = dx
    if output_mask[1] and ctx.out[1] is not None:
        shift = apply("mul", apply("neg", a), mu)  # the kernel's b = -a * mean
        hx = _fma(broadcast(reshape(a, (m, 1)), (m, n)), X, broadcast(reshape(shift, (m, 1)), (m, n)), device)
        outs[1] = _column_sums(ctx, DY, hx, m, n, dt)
    if output_mask[2] and ctx.out[2] is not None:
        outs[2] = _column_sums(ctx, DY, None, m, n, dt)
    return tuple(None if o is None or h is None else convert(reshape(h, tuple(o.shape)), lazy_dtype(o.dtype))
                 for o, h in zip(ctx.out, outs))
