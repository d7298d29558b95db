"""Convolution and pooling, forward and backward, and the batch statistics batch norm needs.

Convolutions map onto ``lazy.convolution`` (PyTorch's N,C,spatial layouts).
A transposed convolution is a convolution over the input dilated by the
stride with the kernel flipped and its in/out channels swapped per group;
the weight gradient is a convolution with batch and channels exchanged.

Pooling has no window op in the dialect: a pooled value is a combination of
one strided slice of the padded input per kernel offset, and a pooling
gradient puts each offset's share back with interior padding (stride - 1
zeros between elements) and edge padding that may be negative (a crop).
All window arithmetic is static, so positions, divisors and first indices
are structural constants.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from lazycore.dialect.folds import identity_value
from lazycore.dialect.spec import spec_of
from lazycore.dialect.types import is_float

from ..dtypes import lazy_dtype
from ..lowering import apply, broadcast, const, convert, dims, fused_multiply_add, lowers, reshape, scalar
from . import lane_sums, moments

aten = torch.ops.aten


def _ntuple(v, n: int, default=None) -> tuple[int, ...]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    if isinstance(v, int):
        return (v,) * n
    v = tuple(int(e) for e in v)
    return v * n if len(v) == 1 else v


def _permute(h, order):
    order = tuple(order)
    return h if order == tuple(range(len(order))) else apply("permute", h, dims=order)


def _crop(h, sizes):
    """The leading ``sizes`` of each dim (sizes shorter than the rank apply to the last dims)."""
    lead = h.shape[: len(h.shape) - len(sizes)]
    limit = tuple(lead) + tuple(sizes)
    if limit == h.shape:
        return h
    return apply("slice", h, start=(0,) * len(h.shape), limit=limit, strides=(1,) * len(h.shape))


def _pad(h, value, low, high, interior):
    """``lazy.pad`` of the trailing dims (leading dims untouched)."""
    lead = (0,) * (len(h.shape) - len(low))
    return apply("pad", h, const(value, h.dtype, h.device), low=lead + tuple(low), high=lead + tuple(high),
                 interior=lead + tuple(interior))


# --- convolution -----------------------------------------------------------------------


def _conv(x, w, strides, lows, highs, lhs_dil, rhs_dil, groups):
    """``lazy.convolution`` allowing negative edge padding (done as a crop by ``lazy.pad`` first)."""
    n = len(strides)
    if any(v < 0 for v in tuple(lows) + tuple(highs)):
        x = _pad(x, 0, lows, highs, [d - 1 for d in lhs_dil])
        lows, highs, lhs_dil = (0,) * n, (0,) * n, (1,) * n
    padding = tuple(v for pair in zip(lows, highs) for v in pair)
    return apply("convolution", x, w, strides=tuple(strides), padding=padding, lhs_dilation=tuple(lhs_dil),
                 rhs_dilation=tuple(rhs_dil), groups=groups)


def _transposed(x, w, stride, padding, dilation, groups, out_spatial):
    """conv_transpose of ``x`` with ``w`` in its layout (C_in, C_out/groups, k...), sized ``out_spatial``."""
    n = len(stride)
    cin, cout_g = w.shape[:2]
    kernel = w.shape[2:]
    # per group, (C_in/g, C_out/g) becomes (C_out/g, C_in/g); the window runs backwards
    w = reshape(w, (groups, cin // groups, cout_g) + kernel)
    w = _permute(w, (0, 2, 1) + tuple(range(3, 3 + n)))
    w = reshape(w, (groups * cout_g, cin // groups) + kernel)
    w = apply("reverse", w, dims=tuple(range(2, 2 + n)))
    lows = [dilation[i] * (kernel[i] - 1) - padding[i] for i in range(n)]
    highs = [out_spatial[i] - 1 - (x.shape[2 + i] - 1) * stride[i] + padding[i] for i in range(n)]
    return _conv(x, w, (1,) * n, lows, highs, stride, dilation, groups)


def _weight_grad(x, gy, stride, padding, dilation, groups, kernel):
    """d(conv(x, w))/dw applied to ``gy``: batch becomes the contracted channel and
    each group's input channels the batch, so groups stay a grouped convolution."""
    n = len(stride)
    batch, c = x.shape[:2]
    if all(k == 1 for k in kernel) and not any(padding):
        return _pointwise_weight_grad(x, gy, stride, groups)
    sp = tuple(range(3, 3 + n))
    lhs = reshape(x, (batch, groups, c // groups) + x.shape[2:])
    lhs = reshape(_permute(lhs, (2, 1, 0) + sp), (c // groups, groups * batch) + x.shape[2:])
    rhs = _permute(gy, (1, 0) + tuple(range(2, 2 + n)))
    g = _conv(lhs, rhs, dilation, padding, padding, (1,) * n, stride, groups)
    g = _crop(g, kernel)
    return _permute(g, (1, 0) + tuple(range(2, 2 + n)))


def _pointwise_weight_grad(x, gy, stride, groups):
    """A 1x1 kernel's weight gradient as one matrix product over batch and
    positions: XLA's CPU backend runs it as a convolution whose window is the
    whole map, at about half a matrix product's speed (ResNet-50's 256 -> 64
    channels at 56x56, batch 8: 60 ms against 33).

    The product contracts both operands' leading (batch, position) dims, and
    XLA's CPU dot takes its left operand with the contracted dims last, so the
    kernel producing the left operand writes it transposed (a store per
    element across rows). The smaller of ``x`` and ``gy`` is that operand and
    the small (channels x channels) product is transposed after: a widening
    convolution (ResNet-50's 64 -> 256 at 56x56) otherwise transposes ``gy``,
    4x ``x``'s elements, inside batch norm backward's full-size loop
    (docs/dev/cpu_program_gap.md: that chain's program 0.41x the CPU time,
    the same bits)."""
    n = len(stride)
    batch, c = x.shape[:2]
    o = gy.shape[1]
    if any(s != 1 for s in stride):
        limit = (batch, c) + tuple((g - 1) * s + 1 for g, s in zip(gy.shape[2:], stride))
        x = apply("slice", x, start=(0,) * (2 + n), limit=limit, strides=(1, 1) + tuple(stride))
    dy = reshape(gy, (batch, groups, o // groups) + gy.shape[2:])
    xs = reshape(x, (batch, groups, c // groups) + x.shape[2:])
    positions = (0,) + tuple(range(3, 3 + n))
    if c < o:  # (groups, c / groups, o / groups), then transposed
        g = apply("dot_general", xs, dy, lhs_batch=(1,), rhs_batch=(1,), lhs_contract=positions,
                  rhs_contract=positions)
        g = _permute(g, (0, 2, 1))
    else:  # (groups, o / groups, c / groups)
        g = apply("dot_general", dy, xs, lhs_batch=(1,), rhs_batch=(1,), lhs_contract=positions,
                  rhs_contract=positions)
    return reshape(g, (o, c // groups) + (1,) * n)


_MAX_TAPS = 25
"""The most kernel taps a depthwise convolution is summed as a chain of (a node
each): a fwd+bwd of 8x96x28x28 by 5x5 taps 96 ms, XLA's grouped convolution
136 ms; by 7x7, 424 against 266 ms and 4.5 s to compile against 1.3 s."""


def _onednn_depthwise(ctx, x, w, bias, stride, padding, dilation, groups) -> bool:
    """Whether eager runs this float32 1-d or 2-d convolution (``x``, ``w``,
    ``bias``: the call's meta tensors) on the CPU as oneDNN's depthwise
    kernel: one filter per channel, and the backend eager's own dispatch
    picks (asked of it with empty stand-ins of the same sizes and strides).
    (3-d sums in another order: 1,727 of 2,688 values off as taps.)"""
    if (ctx.device.platform != "cpu" or x.dtype != torch.float32 or groups == 1 or len(stride) > 2
            or not x.shape[1] == w.shape[0] == groups or w.shape[1] != 1 or np.prod(w.shape[2:]) > _MAX_TAPS):
        return False
    stand = [None if t is None else torch.empty_strided(t.shape, t.stride(), dtype=t.dtype) for t in (x, w, bias)]
    backend = torch._C._select_conv_backend(*stand, list(stride), list(padding), list(dilation), False,
                                            [0] * len(stride), groups, None)
    return backend == torch._C._ConvBackend.Mkldnn


def _tap_chain(src, w, start, first, step):
    """Each channel's ``start + sum over w's taps of src's window * the tap``
    as oneDNN's depthwise kernels sum it (forward and input gradient, probed
    against eager: 0 of 25,000 values off): one fused multiply-add per kernel
    tap onto the running sum, taps in row-major order. ``first(tap)`` is the
    tap's window's first position in ``src`` (per spatial dim), ``step`` the
    window's stride; ``start`` (the bias or zeros) has the result's shape."""
    c, kernel = w.shape[0], w.shape[2:]
    out = start.shape
    taps = reshape(w, (c, int(np.prod(kernel))))
    acc = start
    for t, tap in enumerate(itertools.product(*(range(k) for k in kernel))):
        lo = tuple(first(tap))
        hi = tuple(lo[i] + step[i] * (out[2 + i] - 1) + 1 for i in range(len(kernel)))
        window = apply("slice", src, start=(0, 0) + lo, limit=tuple(out[:2]) + hi, strides=(1, 1) + tuple(step))
        weight = reshape(apply("slice", taps, start=(0, t), limit=(c, t + 1), strides=(1, 1)), (c,))
        acc = fused_multiply_add(window, apply("broadcast_in_dim", weight, dims=(1,), shape=out), acc)
    return acc


def _add_bias(y, b):
    b = convert(b, y.dtype)
    return apply("add", y, apply("broadcast_in_dim", b, dims=(1,), shape=y.shape))


@lowers(aten.convolution.default)
def _convolution(ctx, x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    x, w = convert(x, ctx.dtype), convert(w, ctx.dtype)
    n = len(w.shape) - 2
    stride, padding, dilation = _ntuple(stride, n), _ntuple(padding, n), _ntuple(dilation, n)
    if not transposed and _onednn_depthwise(ctx, *ctx.margs[:3], stride, padding, dilation, groups):
        start = const(0, ctx.dtype, ctx.device, ctx.shape) if bias is None else \
            apply("broadcast_in_dim", convert(bias, ctx.dtype), dims=(1,), shape=ctx.shape)
        src = _pad(x, 0, padding, padding, (0,) * n)
        return _tap_chain(src, w, start, lambda tap: (i * d for i, d in zip(tap, dilation)), stride)
    if transposed:
        y = _transposed(x, w, stride, padding, dilation, groups, ctx.shape[2:])
    else:
        y = _conv(x, w, stride, padding, padding, (1,) * n, dilation, groups)
    if bias is not None:
        y = _add_bias(y, bias)
    return y


@lowers(aten.convolution_backward.default)
def _convolution_backward(ctx, gy, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
                          groups, output_mask):
    n = len(w.shape) - 2
    stride, padding, dilation = _ntuple(stride, n), _ntuple(padding, n), _ntuple(dilation, n)
    dt = gy.dtype
    x, w = convert(x, dt), convert(w, dt)
    kernel = w.shape[2:]
    gi = gw = gb = None
    if output_mask[0]:
        if transposed:
            # the adjoint of conv_transpose is the plain convolution; output_padding rows are never read
            gi = _crop(_conv(gy, w, stride, padding, padding, (1,) * n, dilation, groups), x.shape[2:])
        elif all(d == 1 for d in dilation) and _onednn_depthwise(ctx, ctx.margs[1], ctx.margs[2], None, stride,
                                                                  padding, dilation, groups):
            # (oneDNN's dilated input gradient sums in another order: 1,076 of 2,304 off this way)
            lows = [k - 1 - p for k, p in zip(kernel, padding)]
            highs = [x.shape[2 + i] + kernel[i] - 1 - ((gy.shape[2 + i] - 1) * stride[i] + 1 + lows[i])
                     for i in range(n)]
            src = _pad(gy, 0, lows, highs, [s - 1 for s in stride])
            start = const(0, dt, ctx.device, x.shape)
            gi = _tap_chain(src, w, start, lambda tap: (k - 1 - i for i, k in zip(tap, kernel)), (1,) * n)
        else:
            gi = _transposed(gy, w, stride, padding, dilation, groups, x.shape[2:])
    if output_mask[1]:
        if transposed:
            # conv_transpose(x, w) = conv^T: its weight gradient is the plain one with x and gy exchanged
            gw = _weight_grad(gy, x, stride, padding, dilation, groups, kernel)
        else:
            gw = _weight_grad(x, gy, stride, padding, dilation, groups, kernel)
    if output_mask[2]:
        gb = apply("reduce_sum", gy, dims=(0,) + tuple(range(2, 2 + n)))
    return tuple(None if o is None else convert(h, lazy_dtype(o.dtype)) for o, h in zip(ctx.out, (gi, gw, gb)))


# --- pooling windows ---------------------------------------------------------------------


class _Window:
    """Static geometry of a pooling over the last ``n`` dims."""

    def __init__(self, in_sp, out_sp, kernel, stride, padding, dilation):
        self.in_sp, self.out_sp = tuple(in_sp), tuple(out_sp)
        self.kernel, self.stride, self.padding, self.dilation = kernel, stride, padding, dilation
        self.n = len(in_sp)

    def offsets(self):
        """Kernel offsets in eager's loop order (first spatial dim outermost)."""
        return itertools.product(*(range(k) for k in self.kernel))

    def slices(self, x, fill):
        """(offset, the input values that offset sees for every output position)."""
        n = self.n
        need = [(o - 1) * s + d * (k - 1) + 1
                for o, s, d, k in zip(self.out_sp, self.stride, self.dilation, self.kernel)]
        high = [max(0, m - size - p) for m, size, p in zip(need, self.in_sp, self.padding)]
        xp = _pad(x, fill, self.padding, high, (0,) * n)
        lead = xp.shape[:-n]
        for off in self.offsets():
            start = [o * d for o, d in zip(off, self.dilation)]
            limit = [b + (o - 1) * s + 1 for b, o, s in zip(start, self.out_sp, self.stride)]
            yield off, apply("slice", xp, start=(0,) * len(lead) + tuple(start), limit=tuple(lead) + tuple(limit),
                             strides=(1,) * len(lead) + tuple(self.stride))

    def scatter(self, per_offset):
        """Sum over offsets of each offset's output-shaped values placed back at
        the input positions it read, in eager's order: its pooling backward
        kernels add into an input position output position by output position
        (row-major), and a later output position reads it at an earlier kernel
        offset, so the offsets are taken last first."""
        total = None
        for off in reversed(list(self.offsets())):
            v = per_offset(off)
            low = [o * d - p for o, d, p in zip(off, self.dilation, self.padding)]
            high = [size - lo - (o - 1) * s - 1 for size, lo, o, s in zip(self.in_sp, low, self.out_sp, self.stride)]
            placed = _pad(v, 0, low, high, [s - 1 for s in self.stride])
            total = placed if total is None else apply("add", total, placed)
        return total

    def flat_positions(self, device, shape):
        """For each output position, the flat input index (over the spatial dims) of kernel offset 0,
        as an i64 handle of ``shape``; offset ``off`` adds :meth:`flat_shift`."""
        return _grid([np.arange(o) * s for o, s in zip(self.out_sp, self.stride)], self._flat_strides(),
                     device, shape)

    def flat_shift(self, off) -> int:
        return sum((o * d - p) * f for o, d, p, f in zip(off, self.dilation, self.padding, self._flat_strides()))

    def first_valid(self, device, shape):
        """Eager's initial index: the window's first position inside the input."""
        starts = []
        for o, s, p, d in zip(self.out_sp, self.stride, self.padding, self.dilation):
            h = np.arange(o) * s - p
            h = np.where(h < 0, h + (-h + d - 1) // d * d, h)
            starts.append(h)
        return _grid(starts, self._flat_strides(), device, shape)

    def _flat_strides(self):
        return [int(np.prod(self.in_sp[i + 1:], dtype=np.int64)) for i in range(self.n)]


def _grid(vectors, scales, device, shape):
    """sum_i vectors[i] * scales[i], the i-th varying along the i-th of the last len(vectors) dims of ``shape``."""
    rank, n = len(shape), len(vectors)
    total = None
    for i, (v, f) in enumerate(zip(vectors, scales)):
        c = const(np.asarray(v, dtype=np.int64) * f, "i64", device)
        c = apply("broadcast_in_dim", c, dims=(rank - n + i,), shape=tuple(shape))
        total = c if total is None else apply("add", total, c)
    return total


def _pool_args(n, kernel_size, stride, padding, dilation=1):
    kernel = _ntuple(kernel_size, n)
    return kernel, _ntuple(stride, n, kernel), _ntuple(padding, n), _ntuple(dilation, n)


def _lowest(dtype: str) -> np.ndarray:
    """Max-pool's start and padding: reduce_max's identity in the op table (a
    float type without infinities, float8 E4M3FN, starts from its finite
    extreme)."""
    return identity_value(spec_of("reduce_max").identity, dtype)


# --- max pooling -----------------------------------------------------------------------------

_MAX_POOL_RANK = {
    aten.max_pool2d_with_indices.default: 2,
    aten.max_pool3d_with_indices.default: 3,
    aten.max_pool2d_with_indices_backward.default: 2,
    aten.max_pool3d_with_indices_backward.default: 3,
}


@lowers(aten.max_pool2d_with_indices.default, aten.max_pool3d_with_indices.default)
def _max_pool(ctx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    n = _MAX_POOL_RANK[ctx.func]
    win = _Window(x.shape[-n:], ctx.shape[-n:], *_pool_args(n, kernel_size, stride, padding, dilation))
    shape, dev = ctx.shape, ctx.device
    lowest = _lowest(x.dtype)
    best = const(lowest, x.dtype, dev, shape)
    index = win.first_valid(dev, shape)
    base = win.flat_positions(dev, shape)
    for off, v in win.slices(x, lowest):
        # eager's loop: a later value wins if strictly greater, or if it is NaN
        take = apply("compare", v, best, direction="GT")
        if is_float(x.dtype):
            take = apply("or", take, apply("compare", v, v, direction="NE"))
        best = apply("select", take, v, best)
        at = apply("add", base, const(win.flat_shift(off), "i64", dev, shape))
        index = apply("select", take, at, index)
    return best, index


@lowers(aten.max_pool2d_with_indices_backward.default, aten.max_pool3d_with_indices_backward.default)
def _max_pool_backward(ctx, gy, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    n = _MAX_POOL_RANK[ctx.func]
    gy = convert(gy, ctx.dtype)
    win = _Window(x.shape[-n:], gy.shape[-n:], *_pool_args(n, kernel_size, stride, padding, dilation))
    dev, shape = ctx.device, gy.shape
    base = win.flat_positions(dev, shape)
    zero = const(0, gy.dtype, dev, shape)

    def share(off):
        # positions in the padding never match a real index once cropped, so no validity mask is needed
        at = apply("add", base, const(win.flat_shift(off), "i64", dev, shape))
        return apply("select", apply("compare", indices, at, direction="EQ"), gy, zero)

    return win.scatter(share)


# --- average pooling -------------------------------------------------------------------------

_AVG_POOL_RANK = {
    aten.avg_pool2d.default: 2,
    aten.avg_pool3d.default: 3,
    aten.avg_pool2d_backward.default: 2,
    aten.avg_pool3d_backward.default: 3,
}


def _avg_divisor(win, count_include_pad, divisor_override, dtype, dev, shape):
    """What eager divides each window's sum by, as a handle of ``shape``."""
    if divisor_override:
        return const(divisor_override, dtype, dev, shape)
    per_dim = []
    for o, s, p, k, size in zip(win.out_sp, win.stride, win.padding, win.kernel, win.in_sp):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, size + p)
        if count_include_pad:
            per_dim.append(end - start)
        else:
            per_dim.append(np.minimum(end, size) - np.maximum(start, 0))
    if all(np.all(v == v[0]) for v in per_dim):
        return const(int(np.prod([v[0] for v in per_dim])), dtype, dev, shape)
    rank, n = len(shape), len(per_dim)
    total = None
    for i, v in enumerate(per_dim):
        c = apply("broadcast_in_dim", const(v, dtype, dev), dims=(rank - n + i,), shape=tuple(shape))
        total = c if total is None else apply("mul", total, c)
    return total


@lowers(aten.avg_pool2d.default, aten.avg_pool3d.default)
def _avg_pool(ctx, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    n = _AVG_POOL_RANK[ctx.func]
    # eager's kernels sum a float16/bfloat16 window in float32 and divide there, rounding once at the end
    acc = "f32" if ctx.dtype in ("f16", "bf16") else ctx.dtype
    x = convert(x, acc)
    win = _Window(x.shape[-n:], ctx.shape[-n:], *_pool_args(n, kernel_size, stride, padding))
    total = None
    for _, v in win.slices(x, 0):  # (from zero, as eager's loops sum: an all -0 window gives +0)
        total = apply("add", const(0, acc, ctx.device, v.shape), v) if total is None else apply("add", total, v)
    mean = apply("div", total, _avg_divisor(win, count_include_pad, divisor_override, acc, ctx.device, ctx.shape))
    return convert(mean, ctx.dtype)


@lowers(aten.avg_pool2d_backward.default, aten.avg_pool3d_backward.default)
def _avg_pool_backward(ctx, gy, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    n = _AVG_POOL_RANK[ctx.func]
    gy = convert(gy, ctx.dtype)
    win = _Window(x.shape[-n:], gy.shape[-n:], *_pool_args(n, kernel_size, stride, padding))
    g = apply("div", gy, _avg_divisor(win, count_include_pad, divisor_override, gy.dtype, ctx.device, gy.shape))
    return win.scatter(lambda off: g)


# --- adaptive average pooling ------------------------------------------------------------------
# Adaptive windows are products of per-dim intervals, so the pooling is one
# averaging per spatial dim: a reshape and sum when the sizes divide, else a
# product with a constant (in, out) averaging matrix.

_ADAPTIVE_RANK = {
    aten._adaptive_avg_pool2d.default: 2,
    aten._adaptive_avg_pool3d.default: 3,
    aten._adaptive_avg_pool2d_backward.default: 2,
    aten._adaptive_avg_pool3d_backward.default: 3,
}


def _averaging_matrix(size: int, out: int) -> np.ndarray:
    m = np.zeros((size, out))
    for o in range(out):
        start, end = (o * size) // out, -(-((o + 1) * size) // out)
        m[start:end, o] = 1.0 / (end - start)
    return m


def _along(h, axis, matrix):
    """``h`` contracted with ``matrix`` along ``axis``; the new dim takes its place."""
    rank = len(h.shape)
    m = const(matrix, h.dtype, h.device)
    r = apply("dot_general", h, m, lhs_batch=(), rhs_batch=(), lhs_contract=(axis,), rhs_contract=(0,))
    return _permute(r, tuple(range(axis)) + (rank - 1,) + tuple(range(axis, rank - 1)))


def _adaptive_down(h, axis, out):
    size = h.shape[axis]
    if size == out:
        return h
    if size % out:
        return _along(h, axis, _averaging_matrix(size, out))
    k = size // out
    split = reshape(h, h.shape[:axis] + (out, k) + h.shape[axis + 1:])
    s = apply("reduce_sum", split, dims=(axis + 1,))
    return apply("div", s, const(k, h.dtype, h.device, s.shape))


def _adaptive_up(g, axis, size):
    out = g.shape[axis]
    if size == out:
        return g
    if size % out:
        return _along(g, axis, _averaging_matrix(size, out).T.copy())
    k = size // out
    g = apply("div", g, const(k, g.dtype, g.device, g.shape))
    shape = g.shape[:axis] + (out, k) + g.shape[axis + 1:]
    spread = apply("broadcast_in_dim", g, dims=tuple(d for d in range(len(shape)) if d != axis + 1), shape=shape)
    return reshape(spread, g.shape[:axis] + (size,) + g.shape[axis + 1:])


@lowers(aten._adaptive_avg_pool2d.default, aten._adaptive_avg_pool3d.default)
def _adaptive_avg_pool(ctx, x, output_size):
    n = _ADAPTIVE_RANK[ctx.func]
    h = convert(x, ctx.dtype)
    rank = len(h.shape)
    for i, out in enumerate(ctx.shape[-n:]):
        h = _adaptive_down(h, rank - n + i, out)
    return h


@lowers(aten._adaptive_avg_pool2d_backward.default, aten._adaptive_avg_pool3d_backward.default)
def _adaptive_avg_pool_backward(ctx, gy, x):
    n = _ADAPTIVE_RANK[ctx.func]
    g = convert(gy, ctx.dtype)
    rank = len(g.shape)
    for i, size in enumerate(x.shape[-n:]):
        g = _adaptive_up(g, rank - n + i, size)
    return g


# --- batch statistics ----------------------------------------------------------------------------

ONCE = True
"""Whether batch norm's per-channel values go through :func:`per_channel_once`
(a switch for same-process comparisons; the results are the same bits)."""


def per_channel_once(values):
    """``values`` (1-d, one length and element type) unchanged, each computed
    once per channel before a full-size loop reads it.

    XLA's CPU fusion copies a chain of cheap ops (multiplies, adds, the
    keep-roundings fences, an exact division's remainder correction) on a
    per-channel value into every loop that reads the value through a
    broadcast, so each element of ``(N, C, H, W)`` recomputes its channel's
    chain; only an expensive producer (a divide, a reduce) stays apart, and
    ``optimization_barrier`` is gone before fusion. So each value goes through
    a reduce that changes no bit: the values stacked as rows ``(k, C, 1)``,
    padded with ``-inf`` to ``(k, C, 2)`` and reduced by ``maximum``
    (``max(v, -inf)`` is ``v`` for every ``v``: -0.0, infinities and NaN
    included), then sliced back. BatchNorm2d forward and backward at
    ResNet-50's (8, 256, 56, 56): the full-size kernels' chains of 40-100
    per-channel ops per element go. On the CPU only (the platform whose
    roundings these chains are)."""
    if not ONCE or not values or values[0].device.platform != "cpu":
        return list(values)
    (c,), dtype = values[0].shape, values[0].dtype
    rows = [reshape(v, (1, c, 1)) for v in values]
    stacked = rows[0]
    for r in rows[1:]:
        stacked = apply("concatenate", stacked, r, dim=0)
    k = len(values)
    padded = apply("pad", stacked, const(float("-inf"), dtype, stacked.device), low=(0, 0, 0), high=(0, 0, 1),
                   interior=(0, 0, 0))
    once = apply("reduce_max", padded, dims=(2,))
    if k == 1:
        return [reshape(once, (c,))]
    return [reshape(apply("slice", once, start=[i, 0], limit=[i + 1, c], strides=[1, 1]), (c,)) for i in range(k)]


@lowers(aten.var_mean.correction, aten.std_mean.correction)
def _var_mean(ctx, x, dim=None, *, correction=None, keepdim=False):
    """Batch norm's statistics (its decomposition asks for var_mean, whose own decomposition is
    prims), and ``torch.std_mean`` (the root taken before the rounding, as eager's Welford)."""
    var_out, mean_out = ctx.out
    x = convert(x, lazy_dtype(mean_out.dtype))  # the mean keeps a complex type, the variance is real
    rank = len(x.shape)
    ds = dims(dim, rank) if rank else ()
    c = 1 if correction is None else correction
    if not x.dtype.startswith("complex"):
        var, mean = moments.var_mean(x, ds, c, moments.accumulator(x.dtype, x.device.platform),
                                     sqrt=ctx.func_name == "std_mean")
        return reshape(var, tuple(var_out.shape)), reshape(mean, tuple(mean_out.shape))
    count = int(np.prod([x.shape[d] for d in ds], dtype=np.int64))
    kept = tuple(1 if d in ds else n for d, n in enumerate(x.shape))
    total = apply("reduce_sum", x, dims=ds) if ds else x
    mean = apply("div", total, const(count, x.dtype, x.device, total.shape))
    centered = apply("sub", x, broadcast(reshape(mean, kept), x.shape))
    re, im = apply("real", centered), apply("imag", centered)
    sq = apply("add", apply("mul", re, re), apply("mul", im, im))
    sq_sum = apply("reduce_sum", sq, dims=ds) if ds else sq
    denom = max(0, count - c)
    var = apply("div", sq_sum, const(denom, sq.dtype, x.device, sq_sum.shape))
    if ctx.func_name == "std_mean":
        var = apply("sqrt", var)
    return reshape(var, tuple(var_out.shape)), reshape(mean, tuple(mean_out.shape))


PLANE_VECTORS = 64
"""The most whole vectors an image's plane may have for :func:`_plane_sums`
(512 float32s, 22 x 22); larger planes take the float64 sums, as the
forward's statistics bound their row loops (``batch_norm_stats.ROW_LOOP_STEPS``).
Each plane's lane sums are a sequence of slices and adds in the program:
ResNet-50's first step at 4 x 3 x 128 x 128 (planes up to 64 x 64, one
process, load 1.2-1.4) took 7.3-8.3 s with float64 sums everywhere, 9.3-10.1 s
with this bound and 10.6-11.9 s without one; its later steps alike."""


def _plane_lanes(ctx, h, comp, acc):
    """The vector lanes of ``batch_norm_cpu_backward_contiguous_impl``'s per-image
    sums where eager takes that kernel and :mod:`.lane_sums` models it (a
    contiguous float32/float64 input and output gradient on the CPU with more
    than one element per channel and image), else None: its channels-last and
    one-element-image kernels, half types, and planes past
    :data:`PLANE_VECTORS` vectors keep the float64 sums."""
    gy, x = ctx.margs[0], ctx.margs[1]
    image = int(np.prod(h.shape[2:], dtype=np.int64))
    if (ctx.device.platform != "cpu" or comp not in ("f32", "f64") or lazy_dtype(x.dtype) != comp or len(h.shape) < 3
            or image == 1 or acc != "f64" or not x.is_contiguous() or not gy.is_contiguous()):
        return None
    lanes = lane_sums.lanes(x.dtype, image)
    return None if lanes is None or image // lanes > PLANE_VECTORS else lanes


def _plane_sums(g, centered, lanes: int, acc: str):
    """Per channel, ``sum(dy)`` and ``sum((x - mean) * dy)`` as eager's contiguous
    kernel adds them: each image's plane by ``vec::reduce_all`` and
    ``vec::map2_reduce_all`` in the input's type (:func:`.lane_sums.row_sum`),
    the images' sums added into a double (eager adds them in order; XLA's
    float64 reduce in its own, the same double unless the images' float32 sums
    lie some 2**29 apart, and cheaper to compile than an ordered chain)."""
    n, c = g.shape[0], g.shape[1]
    planes = (n, c, int(np.prod(g.shape[2:], dtype=np.int64)))
    dy, xm = reshape(g, planes), reshape(centered, planes)
    per_image = (lane_sums.row_sum(dy, const(1, g.dtype, g.device, planes), lanes),
                 lane_sums.row_sum(xm, dy, lanes))
    return tuple(apply("reduce_sum", convert(v, acc), dims=(0,)) for v in per_image)


@lowers(aten.native_batch_norm_backward.default)
def _native_batch_norm_backward(ctx, gy, x, weight, running_mean, running_var, save_mean, save_invstd, train,
                                eps, output_mask):
    """Batch norm's gradients as eager's CPU kernel computes them
    (``batch_norm_cpu_backward_contiguous_impl``): per channel the sum of the
    output gradient and its dot product with ``x - mean`` (products in the
    computation type). Where eager takes that kernel (:func:`_plane_lanes`),
    as it adds them: each image's plane in float32 vector lanes, the planes
    into a double (:func:`_plane_sums`), eager's bits. Elsewhere (its
    channels-last and one-element-image kernels, whose per-thread float32
    buffers are not modelled) summed in ``moments.accumulator``'s type (float64
    for float32 on the CPU: eager's ``acc_type<float, false>``) and rounded
    once, one rounding of a nearly exact sum in whatever order XLA adds. Either
    is the same bits in the channels-last programs (``lazy-channels-last``) as
    in the N, C, H, W ones, where float32 reduces in each layout's order moved
    a channel's weight gradient by an ulp. Then eager's arithmetic: ``k =
    float(dotp) * invstd * invstd / N``, the mean gradient ``sum / N`` rounded
    once, ``dx = (dy - grad_mean - (x - mean) * k) * invstd * w`` (the product
    contracted into the difference in the contiguous kernel); the weight's
    gradient ``dotp * invstd`` and the bias's ``sum`` rounded once from the
    wide sums. Outside training ``invstd`` is
    ``1 / sqrt(running_var + eps)`` in the wide type, rounded once, as
    eager's kernel takes it. Float16/bfloat16 compute in float32 (the
    decomposition's computation type)."""
    comp = "f32" if x.dtype in ("f16", "bf16") else x.dtype
    acc = moments.accumulator(comp, ctx.device.platform)
    dev = ctx.device
    g, h = convert(gy, comp), convert(x, comp)
    rank = len(h.shape)
    c = h.shape[1]
    axes = (0,) + tuple(range(2, rank))
    count = 1
    for d in axes:
        count *= h.shape[d]

    def per_channel(v):  # (C,) along dimension 1 of the input's shape
        return apply("broadcast_in_dim", v, dims=(1,), shape=h.shape)

    if train:
        mean, invstd = convert(save_mean, comp), convert(save_invstd, comp)
    else:
        mean = convert(running_mean, comp)
        var = convert(running_var, acc)
        root = apply("sqrt", apply("add", var, scalar(eps, acc, dev, (c,))))
        invstd = convert(apply("div", const(1, acc, dev, (c,)), root), comp)
    mean, invstd = per_channel_once([mean, invstd])
    centered = apply("sub", h, per_channel(mean))
    lanes = _plane_lanes(ctx, h, comp, acc)
    if lanes is not None:
        total, dotp = _plane_sums(g, centered, lanes, acc)
    else:
        total = apply("reduce_sum", convert(g, acc), dims=axes)
        dotp = apply("reduce_sum", convert(apply("mul", centered, g), acc), dims=axes)
    gi = gw = gb = None
    if output_mask[0]:
        if train:
            # (N a number passed in, not baked: images padded to a shape bucket share one program)
            k = apply("mul", apply("mul", convert(dotp, comp), invstd), invstd)
            k = apply("div", k, scalar(count, comp, dev, (c,)))
            grad_mean = convert(apply("div", total, scalar(count, acc, dev, (c,))), comp)
            grad_mean, k = per_channel_once([grad_mean, k])
            if lanes is not None:  # (the kernel's vector loop contracts the product into the difference)
                gi = fused_multiply_add(apply("neg", centered), per_channel(k), apply("sub", g, per_channel(grad_mean)))
            else:
                gi = apply("sub", apply("sub", g, per_channel(grad_mean)), apply("mul", centered, per_channel(k)))
            gi = apply("mul", gi, per_channel(invstd))
        else:
            gi = apply("mul", g, per_channel(invstd))
        if weight is not None:
            gi = apply("mul", gi, per_channel(convert(weight, comp)))
    if output_mask[1]:
        gw = convert(apply("mul", dotp, convert(invstd, acc)), comp)
    if output_mask[2]:
        gb = convert(total, comp)
    return tuple(None if o is None else const(0, lazy_dtype(o.dtype), dev, tuple(o.shape)) if v is None
                 else convert(v, lazy_dtype(o.dtype)) for o, v in zip(ctx.out, (gi, gw, gb)))
