"""Group norm, forward and backward, as eager's CPU kernels compute it, bit
for bit in float32 and float64 (``aten/src/ATen/native/cpu/group_norm_kernel.cpp``,
its contiguous path), where the decomposition's formula (``rsqrt``, XLA's
sums, ``((x - mean) * rstd) * w + b``) is off in about half the elements.
The backward's steps are in :func:`_native_group_norm_backward`.

Per group (a row of ``C / G`` channels times the image): mean and biased
variance by ``RowwiseMoments`` (``lazy.lane_moments``, as layer norm's),
``rstd = 1 / sqrt(max(var, 0) + eps)`` in double (the kernel's ``eps`` is a
``double``, so the expression promotes); then without weight and bias
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


@lowers(aten.native_group_norm_backward.default)
def _native_group_norm_backward(ctx, grad, x, mean, rstd, weight, n, c, image, groups, output_mask):
    """``GroupNormBackwardKernelImplInternal`` (contiguous, float32/float64):

    - per (sample, channel), ``ds = sum(dy * x)`` and ``db = sum(dy)`` over the
      image by ``vec::map2_reduce_all`` / ``vec::reduce_all`` (``lazy.lane_sum``);
    - per group, ``CalcDsDb``: the channels' ``ds * w`` and ``db * w`` in whole
      vectors, each lane a fused chain, the lanes added in order, then the last
      channels one fused multiply-add each; ``c2 = fma(db, mean, -ds) * rstd *
      rstd * rstd * s`` and ``c3 = fma(-(db * rstd), s, -(c2 * mean))`` with ``s =
      1 / (D * image)``; ``dx = fma(rstd * w, dy, c2 * x) + c3``;
    - the weight's gradient per channel ``acc = fma(fma(-db, mean, ds), rstd, acc)``
      over the samples in order, the bias's ``acc += db``."""
    source = ctx.margs[1]
    dt = lazy_dtype(source.dtype)
    if (ctx.device.platform != "cpu" or dt not in ("f32", "f64") or not source.is_contiguous()
            or n * c * image == 0 or (weight is not None and weight.dtype != dt)):
        return NotImplemented
    count = lane_sums.lanes(source.dtype, image)
    per = c // groups
    lanes = lane_sums.lanes(source.dtype, per)
    if count is None or lanes is None:
        return NotImplemented
    device = ctx.device
    planes = (n, c, image)
    X, DY = reshape(convert(x, dt), planes), reshape(convert(grad, dt), planes)
    # (this kernel's map2_reduce_all rounds the last partial vector's products too, unlike
    # layer norm's: the products are made first, and summed times one)
    ones = const(1, dt, device, planes)
    ds = lane_sums.row_sum(apply("mul", DY, X), ones, count)  # (n, c)
    db = lane_sums.row_sum(DY, ones, count)
    split = (n, groups, per)
    mu, a = reshape(convert(mean, dt), (n, groups)), reshape(convert(rstd, dt), (n, groups))
    w = None if weight is None else broadcast(reshape(weight, (1, groups, per)), split)
    outs = [None, None, None]
    if output_mask[0]:
        one = const(1, dt, device, split)
        tail = lane_sums.group_norm_tail_group(source.dtype, n * groups)
        ds_g = _channel_sum(reshape(ds, split), one if w is None else w, lanes, tail)
        db_g = _channel_sum(reshape(db, split), one if w is None else w, lanes, tail)
        s = apply("div", const(1, dt, device, (n, groups)), const(per * image, dt, device, (n, groups)))
        c2 = fused_multiply_add(db_g, mu, apply("neg", ds_g))
        for factor in (a, a, a, s):
            c2 = apply("mul", c2, factor)
        c3 = fused_multiply_add(apply("neg", apply("mul", db_g, a)), s, apply("neg", apply("mul", c2, mu)))
        c1 = broadcast(reshape(a, (n, groups, 1)), split)
        if w is not None:
            c1 = apply("mul", c1, w)
        grid = (n, groups, per, image)
        wide = lambda v: broadcast(reshape(v, (n, groups, 1, 1)), grid)  # noqa: E731
        xs, dys = reshape(X, grid), reshape(DY, grid)
        c1 = broadcast(reshape(c1, split + (1,)), grid)
        outs[0] = apply("add", fused_multiply_add(c1, dys, apply("mul", wide(c2), xs)), wide(c3))
    # the samples in order, per channel: the chains run along the last dimension
    along_n = lambda v: apply("permute", reshape(v, (n, c)), dims=(1, 0))  # noqa: E731
    spread = lambda v: reshape(broadcast(reshape(v, (n, groups, 1)), split), (n, c))  # noqa: E731
    if output_mask[1] and ctx.out[1] is not None:
        term = fused_multiply_add(apply("neg", db), spread(mu), ds)
        outs[1] = lane_sums.fma_chain(along_n(term), along_n(spread(a)))
    if output_mask[2] and ctx.out[2] is not None:
        outs[2] = lane_sums.fma_chain(along_n(db), const(1, dt, device, (c, n)))
    return tuple(None if o is None or g is None else convert(reshape(g, tuple(o.shape)), lazy_dtype(o.dtype))
                 for o, g in zip(ctx.out, outs))


def _channel_sum(p, q, lanes: int, tail: int):
    """``CalcDsDb``'s sum of ``p * q`` over the last dimension (a group's
    channels): whole vectors of ``lanes``, each lane a fused chain, the lanes
    added in order; then the channels after them in order, the first whole
    groups of ``tail`` channels' products rounded and added, the rest fused
    (:func:`.lane_sums.group_norm_tail_group`)."""
    per = p.shape[-1]
    whole = per // lanes * lanes
    kept = tuple(p.shape[:-1])
    cut = lambda v, lo, hi: apply("slice", v, start=(0,) * len(kept) + (lo,), limit=kept + (hi,),  # noqa: E731
                                  strides=(1,) * (len(kept) + 1))
    total = None
    if whole:
        total = apply("lane_sum", cut(p, 0, whole), cut(q, 0, whole), lanes=lanes, halving=False, fused=True)
    rounded = whole + (per - whole) // tail * tail if tail > 1 else whole
    for j in range(whole, per):
        pj, qj = reshape(cut(p, j, j + 1), kept), reshape(cut(q, j, j + 1), kept)
        if total is None:
            total = apply("mul", pj, qj)
        elif j < rounded:
            total = apply("add", total, apply("mul", pj, qj))
        else:
            total = fused_multiply_add(pj, qj, total)
    return total
