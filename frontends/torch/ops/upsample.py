"""The backward of upsampling (``F.interpolate``'s nearest, nearest-exact,
linear, bilinear, trilinear and bicubic modes), and antialiased bilinear and
bicubic resampling both ways (below, after the plain modes).

The forward ops have decompositions in ``torch._decomp`` (gathers and
lerps), their backward ops none, so without these a segmentation head's
training step (torchvision's ``lraspp_mobilenet_v3_large``) ran eager's
kernel on the host every step (issue 39).

Each mode is separable: an output position along one spatial axis reads
one (nearest), two (linear) or four (cubic) input positions with weights
that depend on that axis's sizes alone. So the backward is, per spatial
axis, a scatter-add of the gradient times each tap's weight into the taps'
input positions: the transpose of the forward, exactly the terms eager's
kernel adds (no dense interpolation matrix, whose zeros would spread an
infinity of one position into its whole row). The indices and weights are
computed here on the host with eager's CPU formulas in eager's arithmetic
(``aten/src/ATen/native/UpSample.h``: float32 for float32 and the half
types, float64 for float64), taps interleaved per output position in
eager's order.
"""

from __future__ import annotations

import numpy as np
import torch

from ..lowering import apply, const, convert, lowers, reshape

aten = torch.ops.aten

_CUBIC_A = -0.75


def _scales_value(scale, in_size: int, out_size: int, t):
    """``compute_scales_value``: 1/scale when a positive scale was given, else in/out."""
    if scale is not None and scale > 0:
        return t(1.0 / scale)
    return t(in_size) / t(out_size)


def _area_scale(in_size: int, out_size: int, align_corners: bool, scale, t):
    """``area_pixel_compute_scale``."""
    if align_corners:
        return t(in_size - 1) / t(out_size - 1) if out_size > 1 else t(0)
    return _scales_value(scale, in_size, out_size, t)


def _source_index(scale, out_size: int, align_corners: bool, cubic: bool, t):
    """``area_pixel_compute_source_index`` of every output position."""
    o = np.arange(out_size).astype(t)
    if align_corners:
        return scale * o
    src = scale * (o + t(0.5)) - t(0.5)
    return src if cubic else np.where(src < 0, t(0), src)


def _guard(real, in_size: int, t):
    """``guard_index_and_lambda``: the floor (of the index as a C float, as
    ``floorf`` takes it), at most the last position, and the fraction in [0, 1]."""
    index = np.minimum(np.floor(real.astype(np.float32)).astype(np.int64), in_size - 1)
    lam = np.minimum(np.maximum(real - index.astype(t), t(0)), t(1))
    return index, lam


def _nearest_taps(in_size: int, out_size: int, scale, exact: bool):
    """``nearest_idx`` / ``nearest_exact_idx``: one tap of weight 1 (float32 index math)."""
    o = np.arange(out_size)
    if not exact and out_size == in_size:
        return o[:, None], None
    if not exact and out_size == 2 * in_size:
        return (o >> 1)[:, None], None
    s = _scales_value(scale, in_size, out_size, np.float32)
    if exact:  # (dst + 0.5) is a double there, the product rounded to float for floorf
        src = ((o + 0.5) * np.float64(s)).astype(np.float32)
    else:
        src = o.astype(np.float32) * s
    return np.minimum(np.floor(src).astype(np.int64), in_size - 1)[:, None], None


def _linear_taps(in_size: int, out_size: int, align_corners: bool, scale, t):
    """``compute_source_index_and_lambda``: indices (i0, i1) with weights (1 - l, l)."""
    if out_size == in_size:
        o = np.arange(out_size)
        return np.stack([o, o], 1), np.stack([np.ones(out_size, t), np.zeros(out_size, t)], 1)
    ratio = _area_scale(in_size, out_size, align_corners, scale, t)
    i0, l1 = _guard(_source_index(ratio, out_size, align_corners, False, t), in_size, t)
    i1 = i0 + (i0 < in_size - 1)
    return np.stack([i0, i1], 1), np.stack([t(1) - l1, l1], 1)


def _cubic_conv1(x, a, t):
    return ((t(a + 2) * x - t(a + 3)) * x) * x + t(1)


def _cubic_conv2(x, a, t):
    return ((t(a) * x - t(5 * a)) * x + t(8 * a)) * x - t(4 * a)


def _cubic_taps(in_size: int, out_size: int, align_corners: bool, scale, t):
    """Bicubic's four taps (index - 1 .. index + 2, clamped into the input, as
    ``upsample_increment_value_bounded``) with ``get_cubic_upsample_coefficients``."""
    ratio = _area_scale(in_size, out_size, align_corners, scale, t)
    index, lam = _guard(_source_index(ratio, out_size, align_corners, True, t), in_size, t)
    x2 = (1.0 - lam.astype(np.float64)).astype(t)
    weights = np.stack([_cubic_conv2((lam + 1.0).astype(t), _CUBIC_A, t), _cubic_conv1(lam, _CUBIC_A, t),
                        _cubic_conv1(x2, _CUBIC_A, t), _cubic_conv2((x2 + 1.0).astype(t), _CUBIC_A, t)], 1)
    taps = np.clip(index[:, None] + np.arange(-1, 3)[None, :], 0, in_size - 1)
    return taps, weights.astype(t)


def _spread(g, axis: int, size: int, taps: np.ndarray, weights, used=None):
    """``g`` (``out`` positions along ``axis``) added into ``size`` positions:
    output position ``o``'s value times ``weights[o, k]`` into ``taps[o, k]``;
    ``used``: only the taps it marks (the others add zero, an infinite
    gradient included)."""
    out, k = taps.shape
    shape = g.shape
    if weights is None and k == 1 and out == size and np.array_equal(taps[:, 0], np.arange(size)):
        return g
    updates = g
    if weights is not None:
        wide = shape[:axis + 1] + (k,) + shape[axis + 1:]
        keep = tuple(d for d in range(len(wide)) if d != axis + 1)
        spread = apply("broadcast_in_dim", g, dims=keep, shape=wide)
        w = apply("broadcast_in_dim", const(weights, g.dtype, g.device), dims=(axis, axis + 1), shape=wide)
        terms = apply("mul", spread, w)
        if used is not None:
            mask = apply("broadcast_in_dim", const(used, "i1", g.device), dims=(axis, axis + 1), shape=wide)
            terms = apply("select", mask, terms, const(0, g.dtype, g.device, wide))
        updates = reshape(terms, shape[:axis] + (out * k,) + shape[axis + 1:])
    rank = len(shape)
    zeros = const(0, g.dtype, g.device, shape[:axis] + (size,) + shape[axis + 1:])
    return apply(
        "scatter", zeros, const(taps.reshape(-1, 1), "i64", g.device), updates,
        update_window_dims=tuple(d for d in range(rank) if d != axis), inserted_window_dims=(axis,),
        input_batching_dims=(), scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(axis,),
        index_vector_dim=1, mode="add",
    )


def _work_type(dtype: str):
    """Eager's ``opmath_t``: the half types compute (and accumulate) in float32."""
    return ("f64", np.float64) if dtype == "f64" else ("f32", np.float32)


def _backward(ctx, grad, input_size, taps_of):
    """The gradient of every spatial axis spread back, last axis first (eager's inner loop)."""
    work, t = _work_type(ctx.dtype)
    g = convert(grad, work)
    spatial = len(input_size) - 2
    for i in reversed(range(spatial)):
        axis = 2 + i
        taps, weights = taps_of(i, input_size[axis], g.shape[axis], t)
        g = _spread(g, axis, input_size[axis], taps, weights)
    return convert(g, ctx.dtype)


_NEAREST = {
    aten.upsample_nearest1d_backward.default: False,
    aten.upsample_nearest2d_backward.default: False,
    aten.upsample_nearest3d_backward.default: False,
    aten._upsample_nearest_exact1d_backward.default: True,
    aten._upsample_nearest_exact2d_backward.default: True,
    aten._upsample_nearest_exact3d_backward.default: True,
}


@lowers(*_NEAREST)
def _nearest_backward(ctx, grad, output_size, input_size, *scales):
    exact = _NEAREST[ctx.func]
    return _backward(ctx, grad, tuple(input_size),
                     lambda i, n_in, n_out, t: _nearest_taps(n_in, n_out, scales[i] if scales else None, exact))


@lowers(aten.upsample_linear1d_backward.default, aten.upsample_bilinear2d_backward.default,
        aten.upsample_trilinear3d_backward.default)
def _linear_backward(ctx, grad, output_size, input_size, align_corners, *scales):
    return _backward(ctx, grad, tuple(input_size),
                     lambda i, n_in, n_out, t: _linear_taps(n_in, n_out, align_corners,
                                                            scales[i] if scales else None, t))


@lowers(aten.upsample_bicubic2d_backward.default)
def _bicubic_backward(ctx, grad, output_size, input_size, align_corners, scales_h=None, scales_w=None):
    scales = (scales_h, scales_w)
    return _backward(ctx, grad, tuple(input_size),
                     lambda i, n_in, n_out, t: _cubic_taps(n_in, n_out, align_corners, scales[i], t))


# --- antialiased bilinear and bicubic (torchvision v2's Resize on tensors) ---------------------
# Eager's CPU kernel (``_separable_upsample_generic_Nd_kernel_impl`` with
# ``compute_index_ranges_weights(antialias=True)``, PIL's resampling) reads, for
# each output position along an axis, the inputs from ``xmin`` on, ``xsize`` of
# them, with a filter's weights normalized to sum to 1; the filter's support
# widens with the downscaling factor, so a tap count is a property of the sizes.
# Positions take as many taps as the widest one: the ones past a position's own
# ``xsize`` are selected away after the product (not a zero weight times an
# input that may be infinite).


def _aa_linear(x, t):
    x = np.abs(x)
    return np.where(x < 1, t(1) - x, t(0)).astype(t)


def _aa_cubic(x, t):
    # PIL's bicubic, a = -0.5 (eager's antialiased bicubic; the plain one takes -0.75)
    a = -0.5
    x = np.abs(x)
    near = ((t(a + 2) * x - t(a + 3)) * x) * x + t(1)
    far = ((t(a) * x - t(5 * a)) * x + t(8 * a)) * x - t(4 * a)
    return np.where(x < 1, near, np.where(x < 2, far, t(0))).astype(t)


def _aa_taps(in_size: int, out_size: int, align_corners: bool, scale, interp_size: int, filt, t):
    """Per output position: ``taps`` input indices (clamped into the input),
    their normalized ``weights``, and ``used``, which of them the position reads
    (``_compute_indices_min_size_weights_aa``, in ``t``'s arithmetic as eager's:
    its ``scalar_t`` values, the sums with 0.5 in double)."""
    s = t(_area_scale(in_size, out_size, align_corners, scale, t))
    support = t(interp_size * 0.5 * np.float64(s)) if s >= 1 else t(interp_size * 0.5)
    invscale = t(1.0 / np.float64(s)) if s >= 1 else t(1)
    widest = int(np.ceil(np.float64(support))) * 2 + 1
    center = (np.float64(s) * (np.arange(out_size) + 0.5)).astype(t)
    xmin = np.maximum(np.trunc((center - support).astype(np.float64) + 0.5).astype(np.int64), 0)
    xsize = np.minimum(np.trunc((center + support).astype(np.float64) + 0.5).astype(np.int64), in_size) - xmin
    xsize = np.clip(xsize, 0, widest)
    j = np.arange(widest)[None, :]
    pos = xmin[:, None] + j
    used = j < xsize[:, None]
    arg = ((pos.astype(t) - center[:, None]).astype(np.float64) + 0.5) * np.float64(invscale)
    w = np.where(used, filt(arg.astype(t), t), t(0)).astype(t)
    total = np.zeros(out_size, t)
    for k in range(widest):  # (eager's running sum, in order)
        total = (total + w[:, k]).astype(t)
    w = np.where(total[:, None] != 0, (w / np.where(total == 0, t(1), total)[:, None]).astype(t), w)
    return np.minimum(pos, in_size - 1), w, used


def _aa_filter(func):
    return (2, _aa_linear) if "bilinear" in func._schema.name else (4, _aa_cubic)


def _aa_axis(x, axis: int, taps, weights, used):
    """``x`` resampled along ``axis``: each output position the sum of its used
    taps times their weights."""
    out, k = taps.shape
    shape = x.shape
    rank = len(shape)
    picked = apply(
        "gather", x, const(taps.reshape(-1, 1), "i64", x.device),
        offset_dims=tuple(d for d in range(rank) if d != axis), collapsed_slice_dims=(axis,),
        operand_batching_dims=(), start_indices_batching_dims=(), start_index_map=(axis,), index_vector_dim=1,
        slice_sizes=tuple(1 if d == axis else n for d, n in enumerate(shape)), indices_are_sorted=False,
    )
    wide = shape[:axis] + (out, k) + shape[axis + 1:]
    picked = reshape(picked, wide)
    terms = apply("mul", picked, apply("broadcast_in_dim", const(weights, x.dtype, x.device), dims=(axis, axis + 1),
                                       shape=wide))
    terms = apply("select", apply("broadcast_in_dim", const(used, "i1", x.device), dims=(axis, axis + 1), shape=wide),
                  terms, const(0, x.dtype, x.device, wide))
    return apply("reduce_sum", terms, dims=(axis + 1,))


_AA_TYPES = {"f32": np.float32, "f64": np.float64}
"""The float types eager's CPU kernel takes (uint8 is :func:`_fixed_point_axis`'s): the half types raise there."""


def _fixed_point(taps, weights, used, wt_max=None):
    """Eager's uint8 form of a pass's weights (``_compute_index_ranges_int16_weights``): scaled
    by 2**precision, the largest precision below 22 whose largest weight (``wt_max``: the
    largest of the used ones unless given), doubled, stays under 2**15, rounded half away
    from zero; 0 where a tap is not used."""
    if wt_max is None:
        wt_max = float(np.max(np.where(used, weights, 0.0), initial=0.0))
    precision = 0
    while precision < 22 and int(0.5 + wt_max * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    scaled = weights.astype(np.float64) * (1 << precision)
    fixed = np.where(scaled < 0, np.trunc(scaled - 0.5), np.trunc(scaled + 0.5)).astype(np.int64)
    return taps, np.where(used, fixed, 0), precision


def _fixed_point_axis(x, axis: int, taps, weights, precision: int):
    """One pass of eager's uint8 kernel along ``axis``: ``2**(precision - 1) + sum(w * x)`` in
    integers (exact in any order), shifted right by the precision, clamped to [0, 255]."""
    out, k = taps.shape
    shape = x.shape
    rank = len(shape)
    picked = apply(
        "gather", convert(x, "i32"), const(taps.reshape(-1, 1), "i64", x.device),
        offset_dims=tuple(d for d in range(rank) if d != axis), collapsed_slice_dims=(axis,),
        operand_batching_dims=(), start_indices_batching_dims=(), start_index_map=(axis,), index_vector_dim=1,
        slice_sizes=tuple(1 if d == axis else n for d, n in enumerate(shape)), indices_are_sorted=False,
    )
    wide = shape[:axis] + (out, k) + shape[axis + 1:]
    terms = apply("mul", reshape(picked, wide),
                  apply("broadcast_in_dim", const(weights, "i32", x.device), dims=(axis, axis + 1), shape=wide))
    total = apply("reduce_sum", terms, dims=(axis + 1,))
    total = apply("add", total, const(1 << (precision - 1), "i32", x.device, total.shape))
    total = apply("shift_right", total, const(precision, "i32", x.device, total.shape))
    total = apply("maximum", total, const(0, "i32", x.device, total.shape))
    return convert(apply("minimum", total, const(255, "i32", x.device, total.shape)), "ui8")


@lowers(aten._upsample_bilinear2d_aa.default, aten._upsample_bicubic2d_aa.default)
def _upsample_aa(ctx, x, output_size, align_corners, scales_h=None, scales_w=None):
    """Antialiased resampling; uint8 as eager's fixed-point kernel (the AVX2
    ``upsample_avx_bilinear_bicubic_uint8``, the separable generic kernel beyond 4
    channels: one arithmetic), its weights computed in double, each pass back to uint8."""
    fixed = ctx.dtype == "ui8"
    t = np.float64 if fixed else _AA_TYPES.get(ctx.dtype)
    if t is None or len(x.shape) != 4:
        return NotImplemented
    interp_size, filt = _aa_filter(ctx.func)
    scales = (scales_h, scales_w)
    h = x
    for i in (1, 0):  # width first, as eager's kernel; an axis whose size stays is not resampled
        axis = 2 + i
        n_in, n_out = x.shape[axis], output_size[i]
        if n_in != n_out:
            taps = _aa_taps(n_in, n_out, align_corners, scales[i], interp_size, filt, t)
            h = _fixed_point_axis(h, axis, *_fixed_point(*taps)) if fixed else _aa_axis(h, axis, *taps)
    return h


@lowers(aten._upsample_bilinear2d_aa_backward.default, aten._upsample_bicubic2d_aa_backward.default)
def _upsample_aa_backward(ctx, grad, output_size, input_size, align_corners, scales_h=None, scales_w=None):
    t = _AA_TYPES.get(ctx.dtype)
    if t is None or len(input_size) != 4:
        return NotImplemented
    interp_size, filt = _aa_filter(ctx.func)
    scales = (scales_h, scales_w)
    g = grad
    for i in (1, 0):
        axis = 2 + i
        n_in, n_out = input_size[axis], output_size[i]
        if n_in != n_out:
            g = _spread(g, axis, n_in, *_aa_taps(  # (the transpose of _aa_axis)
                n_in, n_out, align_corners, scales[i], interp_size, filt, t))
    return g


# --- linear, bilinear and trilinear forward as eager's CPU kernel (float32, float64) ----------
# torch._decomp's decomposition (gathers and lerps in XLA's order) differed from eager's
# kernel in 6,568 of 10,672 values of a 16x16 -> 23x29 resize (issue 39). Eager's kernel
# (``UpSampleKernel.cpp``, built for AVX2/AVX512 with contraction) fuses its products:
#
# - the source index ``scale * (o + 0.5) - 0.5`` is one fused multiply-add (in
#   ``opmath_t``), floored as a C float, its fraction the weight;
# - the generic kernel (``upsample_generic_Nd_kernel_impl``: 1d, 3d, and 2d unless below)
#   interpolates the last axis first, each axis ``fma(a0, w0, a1 * w1)``;
# - the 2d channels-last kernel (``cpu_upsample_linear_channels_last``: a channels-last
#   input with over 3 channels, or output height + width <= 128, or one thread and 3
#   channels) weighs the four corners by ``h_i * w_j`` (rounded), summed in one order over
#   the channels its 32-byte vectors cover, ``v00 w00 + (v01 w01 + (v10 w10 + v11 w11))``,
#   and in another over the rest (its scalar loop):
#   ``((v00 w00 + v01 w01) + v10 w10) + v11 w11``, each ``+`` a fused multiply-add.
#
# Measured bit for bit against eager on this machine (float32 and float64; sizes and
# scales given, align_corners both ways, 1, 3, 5, 8, 20 channels). The op below is
# lazycore's own (``lazycore::linear_resample``): :mod:`..upsample_linear` calls it
# for the types and kernels it covers, and torch._decomp's decomposition otherwise.

_LIB = torch.library.Library("lazycore", "FRAGMENT")
_LIB.define("linear_resample(Tensor self, int[] output_size, float[] scales, bool align_corners, "
            "bool channels_last) -> Tensor")

_ATEN_LINEAR = {3: aten.upsample_linear1d.default, 4: aten.upsample_bilinear2d.default,
                5: aten.upsample_trilinear3d.default}


def _resample_meta(x, output_size, scales, align_corners, channels_last):
    return x.new_empty((*x.shape[:2], *output_size))


def _resample_eager(x, output_size, scales, align_corners, channels_last):
    # (a materialized call: eager's own kernel; a scale <= 0 is no scale there too)
    return _ATEN_LINEAR[x.dim()](x, output_size, align_corners, *[s if s > 0 else None for s in scales])


_LIB.impl("linear_resample", _resample_meta, "Meta")
_LIB.impl("linear_resample", _resample_eager, "CPU")


def _host_fma(a, b: np.ndarray, c, t):
    """``a * b + c`` rounded once in ``t``. float32: the product is exact in float64 and
    the sum with c = -0.5 too wherever the result is not negative (a negative index is
    clamped to 0), so one rounding to float32; float64: exact rationals."""
    if t is np.float32:
        return (np.float64(a) * b.astype(np.float64) + np.float64(c)).astype(np.float32)
    from fractions import Fraction

    fa, fc = Fraction(float(a)), Fraction(float(c))
    return np.array([float(fa * Fraction(float(v)) + fc) for v in b], np.float64)


def _fused_linear_taps(in_size: int, out_size: int, align_corners: bool, scale, t):
    """``compute_source_index_and_lambda`` as eager's AVX2/AVX512 build computes it (the
    source index one fused multiply-add): (i0, i1, w0, w1) per output position."""
    if out_size == in_size:
        o = np.arange(out_size)
        return o, o, np.ones(out_size, t), np.zeros(out_size, t)
    ratio = _area_scale(in_size, out_size, align_corners, scale, t)
    o = np.arange(out_size).astype(t)
    if align_corners:
        src = (ratio * o).astype(t)
    else:
        src = _host_fma(ratio, (o + t(0.5)).astype(t), -0.5, t)
        src = np.where(src < 0, t(0), src).astype(t)
    i0, l1 = _guard(src, in_size, t)
    return i0, i0 + (i0 < in_size - 1), (t(1) - l1).astype(t), l1.astype(t)


def _take(x, axis: int, idx: np.ndarray):
    """``x``'s positions ``idx`` along ``axis`` (which keeps its place)."""
    shape = x.shape
    rank = len(shape)
    return apply(
        "gather", x, const(idx.reshape(-1, 1), "i64", x.device),
        offset_dims=tuple(d for d in range(rank) if d != axis), collapsed_slice_dims=(axis,),
        operand_batching_dims=(), start_indices_batching_dims=(), start_index_map=(axis,), index_vector_dim=1,
        slice_sizes=tuple(1 if d == axis else n for d, n in enumerate(shape)), indices_are_sorted=False,
    )


def _along(values: np.ndarray, dims, like):
    return apply("broadcast_in_dim", const(values, like.dtype, like.device), dims=dims, shape=like.shape)


def _generic_axis(h, axis: int, i0, i1, w0, w1):
    """One axis of the generic kernel: ``fma(h[i0], w0, h[i1] * w1)``."""
    a0, a1 = _take(h, axis, i0), _take(h, axis, i1)
    return apply("fma", a0, _along(w0, (axis,), a0), apply("mul", a1, _along(w1, (axis,), a1)))


def _corners(x, rows, cols, t):
    """The channels-last kernel's four corners (v00, v01, v10, v11) and weights ``h_i * w_j``."""
    ih0, ih1, h0, h1 = rows
    iw0, iw1, w0, w1 = cols
    top, bottom = _take(x, 2, ih0), _take(x, 2, ih1)
    vs = [_take(top, 3, iw0), _take(top, 3, iw1), _take(bottom, 3, iw0), _take(bottom, 3, iw1)]
    ws = [_along(np.multiply.outer(h, w).astype(t), (2, 3), vs[0]) for h in (h0, h1) for w in (w0, w1)]
    return vs, ws


def _channels_last_2d(x, rows, cols, t):
    channels = x.shape[1]
    lanes = 32 // np.dtype(t).itemsize  # (its Vectorized<T>: 8 floats, 4 doubles, measured)
    whole = channels - channels % lanes
    parts = []
    for lo, hi, vector in ((0, whole, True), (whole, channels, False)):
        if hi == lo:
            continue
        part = x
        if hi - lo != channels:
            n = len(x.shape)
            part = apply("slice", x, start=(0, lo) + (0,) * (n - 2), limit=(x.shape[0], hi) + tuple(x.shape[2:]),
                         strides=(1,) * n)
        (v00, v01, v10, v11), (w00, w01, w10, w11) = _corners(part, rows, cols, t)
        if vector:
            acc = apply("fma", v00, w00, apply("fma", v01, w01, apply("fma", v11, w11, apply("mul", v10, w10))))
        else:
            acc = apply("fma", v11, w11, apply("fma", v10, w10, apply("fma", v00, w00, apply("mul", v01, w01))))
        parts.append(acc)
    return parts[0] if len(parts) == 1 else apply("concatenate", *parts, dim=1)


@lowers(torch.ops.lazycore.linear_resample.default)
def _linear_resample(ctx, x, output_size, scales, align_corners, channels_last):
    t = np.float64 if ctx.dtype == "f64" else np.float32
    spatial = len(output_size)
    taps = [_fused_linear_taps(x.shape[2 + i], output_size[i], align_corners, scales[i] if scales[i] > 0 else None, t)
            for i in range(spatial)]
    if channels_last:
        return _channels_last_2d(x, taps[0], taps[1], t)
    h = x
    for i in reversed(range(spatial)):  # (the last axis innermost, as its Interpolate recursion)
        h = _generic_axis(h, 2 + i, *taps[i])
    return h
