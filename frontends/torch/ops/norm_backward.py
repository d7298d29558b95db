"""Layer norm as eager's CPU kernels compute it, bit for bit in float32 and
float64 (``aten/src/ATen/native/cpu/layer_norm_kernel.cpp``), its row sums one
node each (:mod:`.lane_sums`) whatever the row's length.

Forward (:func:`forward`, which ``native_layer_norm``'s lowering tries first):
mean and biased variance by ``RowwiseMoments`` (Welford in eager's vector
lanes, ``lazy.lane_moments``), ``rstd = 1 / sqrt(var + eps)``, and
``y = fma((x - mean) * rstd, weight, bias)`` (probed: the normalized value
rounded, its product with the weight contracted into the bias; without a
weight ``fma(x - mean, rstd, bias)``, without a bias ``((x - mean) * rstd) * weight``).

Backward (``native_layer_norm_backward``, which went to torch's
decomposition: another formula and XLA's sums), per row of ``N`` elements,
probed against eager's bits:

- ``ds = sum(dy * x [* w])``, ``db = sum(dy [* w])`` by ``vec::map2_reduce_all``
  (``lazy.lane_sum``: whole vectors' rounded products lane-wise, the tail's
  fused into the first lanes, float32's lanes halved, float64's in order);
- ``b = fma(db, mean, -ds) * a * a * a * (1 / N)``, ``c = fma(-b, mean, -(db * a * (1 / N)))``
  with ``a = rstd``; ``dX = fma(b, x, a * dy [* w]) + c``;
- the weight's gradient sums ``dy * fma(a, x, -a * mean)`` over the rows and the
  bias's ``dy``, in eager's per-thread buffers (:func:`_thread_sums`): each of
  ``min(threads, rows)`` threads chains its ``ceil(rows / tasks)`` rows into a
  buffer (``buf = fma(dy, h, buf)``), and the buffers are added to ``+0`` in
  thread order.

Half types (eager's mixed-type kernel), rows of no elements, and rows longer
than :data:`.lane_sums.MAX_VECTORS` vectors keep the decomposition's formula.
"""

from __future__ import annotations

import numpy as np
import torch

from ..dtypes import lazy_dtype
from .. import lowering
from ..lowering import apply, broadcast, const, convert, fused_multiply_add, lowers, reshape, scalar
from . import eager_loops, lane_sums

aten = torch.ops.aten

_NUMPY = {"f32": np.float32, "f64": np.float64}


def _split(shape, normalized_shape):
    axis = len(shape) - len(normalized_shape)
    m = int(np.prod(shape[:axis], dtype=np.int64))
    n = int(np.prod(shape[axis:], dtype=np.int64))
    return axis, m, n


def forward(ctx, x, normalized_shape, weight, bias, eps):
    """``native_layer_norm``'s (out, mean, rstd) as eager's CPU kernel, or None where
    it does not apply (not the CPU, a half type, an empty or too long row)."""
    if ctx.device.platform != "cpu":
        return None
    shape = tuple(x.shape)
    axis, m, n = _split(shape, normalized_shape)
    count = lane_sums.lanes(ctx.margs[0].dtype, n)
    if count is None or m == 0:
        return None
    dt, device = x.dtype, ctx.device
    kept = shape[:axis] + (1,) * (len(shape) - axis)
    mean, var = lane_sums.row_moments(reshape(x, shape[:axis] + (n,)), count)
    rstd = apply("div", const(1, dt, device, shape[:axis]),
                 apply("sqrt", apply("add", var, scalar(eps, dt, device, shape[:axis]))))
    wide = lambda v: broadcast(reshape(v, kept), shape)  # noqa: E731
    centered = apply("sub", x, wide(mean))
    w = None if weight is None else broadcast(reshape(convert(weight, dt), shape[axis:]), shape)
    b = None if bias is None else broadcast(reshape(convert(bias, dt), shape[axis:]), shape)
    if w is None and b is not None:  # (the scalar loop's ((x - mean) * rstd) * 1 + bias: one fused multiply-add)
        out = fused_multiply_add(centered, wide(rstd), b)
    else:
        out = apply("mul", centered, wide(rstd))
        if w is not None:
            out = apply("mul", out, w) if b is None else fused_multiply_add(out, w, b)
    out_t, mean_t, rstd_t = ctx.out
    return tuple(convert(reshape(v, tuple(t.shape)), lazy_dtype(t.dtype))
                 for v, t in ((out, out_t), (mean, mean_t), (rstd, rstd_t)))


def _wrap_forward():
    """``native_layer_norm``'s lowering: :func:`forward` on the CPU, else the one
    ``nn.py`` registered (the decomposition's formula; this module imports ``nn``,
    not the other way)."""
    op = aten.native_layer_norm.default
    other = lowering.LOWERINGS[op]

    def layer_norm(ctx, x, normalized_shape, weight, bias, eps):
        eager = forward(ctx, x, normalized_shape, weight, bias, eps)
        return other(ctx, x, normalized_shape, weight, bias, eps) if eager is None else eager

    lowering.register(op, layer_norm)


_wrap_forward()


@lowers(aten.native_layer_norm_backward.default)
def _native_layer_norm_backward(ctx, grad, x, normalized_shape, mean, rstd, weight, bias, output_mask):
    dt = lazy_dtype(ctx.margs[1].dtype)
    shape = tuple(x.shape)
    axis, m, n = _split(shape, normalized_shape)
    count = lane_sums.lanes(ctx.margs[1].dtype, n)
    if dt not in _NUMPY or count is None or m == 0 or ctx.device.platform != "cpu":
        return NotImplemented
    device = ctx.device
    # the leading dims kept as they are (not merged into one of rows): shape-bucket
    # padding pads them, row by row
    lead = shape[:axis]
    rows = lead + (n,)
    X = reshape(convert(x, dt), rows)
    DY = reshape(convert(grad, dt), rows)
    mu = reshape(convert(mean, dt), lead)
    a = reshape(convert(rstd, dt), lead)
    w = None if weight is None else broadcast(reshape(convert(weight, dt), (n,)), rows)
    wide = lambda v: broadcast(reshape(v, lead + (1,)), rows)  # noqa: E731
    outs = [None, None, None]
    if output_mask[0]:
        if w is None:
            ds = lane_sums.row_sum(DY, X, count)
            db = lane_sums.row_sum(DY, const(1, dt, device, rows), count)
        else:
            ds = lane_sums.row_sum(apply("mul", DY, X), w, count)
            db = lane_sums.row_sum(DY, w, count)
        scale = const(float(_NUMPY[dt](1) / _NUMPY[dt](n)), dt, device, lead)
        b = fused_multiply_add(db, mu, apply("neg", ds))
        for factor in (a, a, a, scale):
            b = apply("mul", b, factor)
        c = fused_multiply_add(apply("neg", b), mu, apply("neg", apply("mul", apply("mul", db, a), scale)))
        t = apply("mul", wide(a), DY)
        if w is not None:
            t = apply("mul", t, w)
        outs[0] = apply("add", fused_multiply_add(wide(b), X, t), wide(c))
    sums = []  # the weight's and bias's factors of dy, summed over the rows together
    if output_mask[1] and ctx.out[1] is not None:
        shift = apply("mul", apply("neg", a), mu)  # the kernel's b = -a * mean
        sums.append((1, fused_multiply_add(wide(a), X, wide(shift))))
    if output_mask[2] and ctx.out[2] is not None:
        sums.append((2, None))
    if sums and _buffered(lead):
        for (i, _), total in zip(sums, _thread_sums(DY, [q for _, q in sums], lead, n)):
            outs[i] = total
    else:  # XLA's sums over the rows (its padding rule masks padded ones)
        for i, q in sums:
            outs[i] = apply("reduce_sum", DY if q is None else apply("mul", DY, q), dims=tuple(range(len(lead))))
    return tuple(None if o is None or g is None else convert(reshape(g, tuple(o.shape)), lazy_dtype(o.dtype))
                 for o, g in zip(ctx.out, outs))


BUFFER_ROWS = 512
"""The most rows (at their buckets) whose weight and bias gradients
:func:`_thread_sums` makes in eager's order; more are XLA's sums. The buffers
are a loop over the rows, a row an iteration, which costs XLA's CPU program
2 to 4 microseconds an iteration whatever the row's width: a layer norm's
forward and backward 9.2 -> 11.2 ms at 4 x 128 x 768 (GPT-2 small's batch:
25 of them, +1.5% of its 3.2 s step; loaded machine), but benchmark 7's GPT
(1,024 rows of 128, 9 layer norms) had its program 7% slower, so it keeps
XLA's sums. The per-op-bound tiny models (at most 128 rows) take eager's."""


def _buffered(lead) -> bool:
    """Whether the rows ``lead`` take eager's buffers: by the rows' buckets
    (:func:`.eager_loops._padded`), so that every size of a bucket decides alike."""
    return int(np.prod([eager_loops._padded(d) for d in lead], dtype=np.int64)) <= BUFFER_ROWS


def _thread_sums(p, qs, lead, n):
    """``sum(p * q)`` over the rows for each ``q`` of ``qs`` (None: ones), as eager's
    backward kernel builds the weight's and bias's gradients: ``at::parallel_for(0,
    rows, 1)`` gives each of ``tasks = min(threads, rows)`` threads the rows
    ``[t * chunk, (t + 1) * chunk)`` (``chunk = ceil(rows / tasks)``), which it
    chains into its zeroed buffer (``buf = fma(p, q, buf)``, row after row); the
    buffers are then added to ``+0`` in thread order: one ``lazy.buffer_sum``
    for all of ``qs``, each row's owner computed from the leading sizes (so
    shape-bucket padding reads a padded one as its valid size: every size of
    a bucket is one program, its split that size's)."""
    device, dt = p.device, p.dtype
    m, k = int(np.prod(lead, dtype=np.int64)), len(qs)
    count = eager_loops.threads() if m > 1 else 1  # (one row: the other threads' buffers stay +0)
    rows = tuple(lead) + (n,)
    q = [reshape(const(1, dt, device, rows) if v is None else v, (1, m, n)) for v in qs]
    q = q[0] if k == 1 else apply("concatenate", *q, dim=0)
    owner = _thread_of_rows(lead, m, count, device) if count > 1 else const(np.int64(0), "i64", device, (m,))
    total = apply("buffer_sum", reshape(p, (m, n)), q, owner, threads=count)  # (k, n)
    if k == 1:
        return [reshape(total, (n,))]
    return [reshape(apply("slice", total, start=(i, 0), limit=(i + 1, n), strides=(1, 1)), (n,)) for i in range(k)]


def _thread_of_rows(lead, m: int, count: int, device):
    """``(m,)``: the thread that takes each of the ``m`` rows, ``r // chunk`` for row ``r``
    (its number among the valid rows, flat over ``lead``) and ``chunk =
    ceil(rows / min(count, rows)) = ceil(rows / count)`` (rows >= 1). The
    sizes are constants, which a padded dimension's padding reads as its
    valid size."""
    size = lambda v: const(np.int64(v), "i64", device)  # noqa: E731
    lead = tuple(lead)
    total, row = None, None
    for d, length in enumerate(lead):
        index = apply("iota", dim=d, shape=lead, dtype="i64", device=device)
        length = size(length)
        row = index if row is None else apply("add", apply("mul", row, broadcast(length, lead)), index)
        total = length if total is None else apply("mul", total, length)
    chunk = apply("div", apply("add", total, size(count - 1)), size(count))
    return apply("div", reshape(row, (m,)), broadcast(chunk, (m,)))
