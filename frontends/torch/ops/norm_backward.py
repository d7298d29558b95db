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
- the weight's gradient is ``sum(dy * fma(a, x, -a * mean))`` over the rows and the
  bias's ``sum(dy)``, by XLA's reduce: eager's per-thread buffers (``fma`` chains
  over each thread's chunk of rows, ``lazy.lane_sum`` with one fused lane could
  build them) depend on the row count, which shape-bucket padding changes, and a
  reduce over padded rows is one padding masks. Not eager's bits.

Half types (eager's mixed-type kernel), rows of no elements, and rows longer
than :data:`.lane_sums.MAX_VECTORS` vectors keep the decomposition's formula.
"""

from __future__ import annotations

import numpy as np
import torch

from ..dtypes import lazy_dtype
from .. import lowering
from ..lowering import apply, broadcast, const, convert, fused_multiply_add, lowers, reshape, scalar
from . import lane_sums

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
    # The weight's and bias's gradients sum over the rows, which shape-bucket
    # padding pads: XLA's reduce (its padding rule masks the padded rows), not
    # eager's per-thread buffers (_column_sums: their chunks move with the row count)
    dims = tuple(range(len(lead)))
    if output_mask[1] and ctx.out[1] is not None:
        shift = apply("mul", apply("neg", a), mu)  # the kernel's b = -a * mean
        h = fused_multiply_add(wide(a), X, wide(shift))
        outs[1] = apply("reduce_sum", apply("mul", DY, h), dims=dims)
    if output_mask[2] and ctx.out[2] is not None:
        outs[2] = apply("reduce_sum", DY, dims=dims)
    return tuple(None if o is None or g is None else convert(reshape(g, tuple(o.shape)), lazy_dtype(o.dtype))
                 for o, g in zip(ctx.out, outs))
