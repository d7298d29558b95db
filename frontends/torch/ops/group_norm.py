"""Group norm's forward as eager's CPU kernel computes it, bit for bit in
float32 and float64 (``aten/src/ATen/native/cpu/group_norm_kernel.cpp``,
its contiguous path), where the decomposition's formula (``rsqrt``, XLA's
sums, ``((x - mean) * rstd) * w + b``) is off in about half the elements.

Per group (a row of ``C / G`` channels times the image): mean and biased
variance by ``RowwiseMoments`` (``lazy.lane_moments``, as layer norm's),
``rstd = 1 / sqrt(max(var, 0) + eps)``; then without weight and bias
``y = (x - mean) * rstd``, else per channel ``scale = rstd * w`` (``w`` 1
where absent) and ``bias = -scale * mean + b`` (one fused multiply-add; ``b``
0 where absent), ``y = scale * x + bias`` (one fused multiply-add): eager's
scalar loops, contracted by its compiler (probed).

Elsewhere the decomposition answers: another platform, a half type (eager's
mixed-type kernel), a channels-last input (its own kernel), rows
:func:`.lane_sums.lanes` does not take, and export's symbolic sizes.
"""

from __future__ import annotations

import torch

from ..dtypes import lazy_dtype
from ..lowering import apply, broadcast, const, convert, fused_multiply_add, lowers, reshape, scalar
from . import lane_sums

aten = torch.ops.aten


@lowers(aten.native_group_norm.default)
def _native_group_norm(ctx, x, weight, bias, n, c, image, groups, eps):
    source = ctx.margs[0]
    if ctx.device.platform != "cpu" or not source.is_contiguous() or n * c * image == 0:
        return NotImplemented
    row = c // groups * image
    count = lane_sums.lanes(source.dtype, row)
    if count is None:
        return NotImplemented
    dt, device = x.dtype, ctx.device
    rows = (n, groups)
    mean, var = lane_sums.row_moments(reshape(x, rows + (row,)), count)
    var = apply("maximum", var, const(0, dt, device, rows))
    wide = convert(var, "f64")
    rstd = convert(apply("div", const(1, "f64", device, rows),
                         apply("sqrt", apply("add", wide, scalar(eps, "f64", device, rows)))), dt)
    # (n, groups, channels of a group, image): the channel's scale and bias broadcast along its image
    split = (n, groups, c // groups, image)
    xs = reshape(x, split)
    per_group = lambda v: broadcast(reshape(v, rows + (1,)), split[:3])  # noqa: E731
    if weight is None and bias is None:
        out = apply("mul", apply("sub", xs, broadcast(reshape(mean, rows + (1, 1)), split)),
                    broadcast(reshape(rstd, rows + (1, 1)), split))
    else:
        channels = lambda v: broadcast(reshape(convert(v, dt), (1, groups, c // groups)), split[:3])  # noqa: E731
        scale = per_group(rstd) if weight is None else apply("mul", per_group(rstd), channels(weight))
        shift = const(0, dt, device, split[:3]) if bias is None else channels(bias)
        offset = fused_multiply_add(apply("neg", scale), per_group(mean), shift)
        along = lambda v: broadcast(reshape(v, split[:3] + (1,)), split)  # noqa: E731
        out = fused_multiply_add(along(scale), xs, along(offset))
    out_t, mean_t, rstd_t = ctx.out
    return tuple(convert(reshape(v, tuple(t.shape)), lazy_dtype(t.dtype))
                 for v, t in ((out, out_t), (mean, mean_t), (rstd, rstd_t)))
