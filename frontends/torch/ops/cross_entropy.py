"""``softmax``, ``log_softmax`` and its backward as eager's CPU kernels compute
them: ``log_softmax`` and its backward are the two halves of every
``F.cross_entropy`` (issue 39).

Eager's float32 last-dim kernels (``aten/src/ATen/native/cpu/SoftMaxKernel.cpp``,
``_vec_log_softmax_lastdim`` and ``_vec_host_softmax_backward_lastdim``, taken
whenever the dims after ``dim`` are all 1) run on ``Vectorized<float>``:

- forward: ``m = max(x)``, ``s = sum(exp(x - m))`` (``vec::map_reduce_all``),
  ``out = (x - m) - log(s)``; exp is SLEEF's ``expf_u10`` (``lazy.exp_sleef``),
  log SLEEF's ``logf_u10`` (``lazy.log_sleef``; XLA's log is an ulp off in ~2%
  of sums, the correctly rounded one in fewer, each moving a whole row);
- backward: ``g - exp(out) * sum(g)``, the product-difference one fused
  multiply-add (the compiler contracts it): with every sum exact (integer
  gradients) the unfused form is 8-86 elements off per case, the fused 0.

Both sums are eager's vector sums (:func:`lane_sum`). Probed against eager
(torch 2.13, AVX512): the forward with SLEEF's exp and log and 16-lane sums
is 0 off at C = 2..50257; the backward 0 off with random gradients at C =
5..50257 (8-lane sums: 77-3,040 off from C = 40). Float64 is not modelled:
its exp is SLEEF's ``expd_u10`` (~8% of values off glibc's and XLA's) and
float64 products are not reliably fused on the CPU (``lazy.fma``)."""

from __future__ import annotations

import numpy as np
import torch

from lazycore.ir.context import TRACE
from lazycore.ir.memo import Memo

from ..lowering import apply, const, convert, fused_multiply_add, lowers, reshape
from . import eager_loops, lane_sums
from .lane_sums import kernel_lanes, softmax_backward_tail_fused
from .conv import per_channel_once
from .nn import _REDUCTIONS, _dim, _keep, _nll_parts, _reduce_keep

aten = torch.ops.aten

def lane_sum(x, d: int, lanes: int):
    """``x``'s sums over dim ``d`` (the dims after it of size 1) in eager's
    vector order with ``lanes`` lanes (``vec::reduce_all``): lane ``i`` adds
    elements ``i, i + L, ..`` in turn, a short tail goes into the first
    lanes, then the lanes are added in halves; a row shorter than a vector
    is summed in order. One ``lazy.lane_sum`` node (:mod:`.lane_sums`); rows
    of more than :data:`.lane_sums.MAX_VECTORS` vectors take XLA's reduce,
    eager's bits only where the order cannot matter (``nll_loss``'s gradient:
    one nonzero a row)."""
    shape = x.shape
    n = shape[d]
    if n // lanes > lane_sums.MAX_VECTORS:
        return apply("reduce_sum", x, dims=(d,))
    rows = reshape(x, (_count(shape[:d]), n))
    ones = const(1.0, x.dtype, x.device, rows.shape)
    total = apply("lane_sum", rows, ones, lanes=lanes, halving=True, fused=False)
    return reshape(total, shape[:d] + shape[d + 1:])


def _row_once(v):
    """``v`` (one value per row) computed once per row before the row's loop
    reads it: XLA's CPU fusion copies the cheap ops of a lane sum and of
    ``lazy.log_sleef``'s steps into each element's loop (10 exps, a sum and a log per
    element of a 128x10 batch); :func:`.conv.per_channel_once` keeps them apart."""
    flat = per_channel_once([reshape(v, (_count(v.shape),))])[0]
    return reshape(flat, v.shape)


def _count(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _modelled(x) -> bool:
    """Eager's float32 kernels are modelled for ``x``: not while
    ``lazycore.export`` traces one program for every size (``TRACE.symbolic``):
    their lanes, tails and column chunks change the graph with a dim's length."""
    return x.dtype == "f32" and not TRACE.symbolic and _count(x.shape) > 0


def _eager_kernel(x, d) -> bool:
    """Eager's float32 last-dim kernel computes this call (every dim after ``d``
    of size 1); other types and dims keep the plain form."""
    return _modelled(x) and len(x.shape) > 0 and all(s == 1 for s in x.shape[d + 1:])


@lowers(aten._softmax.default)
def _softmax(ctx, x, dim, half_to_float=False):
    """Float32 over the last dim (every dim after ``dim`` of size 1) as eager's
    CPU kernel (``SoftMaxKernel.cpp``, ``_vec_softmax_lastdim``): ``m = max(x)``,
    ``e = exp(x - m)`` with SLEEF's exp (the row's tail too: ``vec::map`` loads
    it as a short vector), ``s`` eager's 16-lane vector sum of ``e``
    (:func:`lane_sum`), then ``e * (1 / s)``. Before: XLA's exp
    and ``e / s``, 25,949 of 49,152 float32 of 2 * N(0, 1) in rows of 768 off.
    Other types and dims keep that form."""
    x = convert(x, ctx.dtype)
    d = _dim(dim, len(x.shape))
    shifted = apply("sub", x, _reduce_keep("reduce_max", x, d))
    if _eager_kernel(shifted, d):
        e = apply("exp_sleef", shifted)
        total = lane_sum(e, d, kernel_lanes(torch.float32))
        inverse = apply("div", const(1, "f32", ctx.device, total.shape), total)
        return apply("mul", e, _keep(_row_once(inverse), d, x.shape))
    inner = _count(x.shape[d + 1:])
    if _modelled(x) and inner > 1 and _count(x.shape) <= _MAX_COLUMNS_MODELLED * x.shape[d]:
        return _softmax_columns(ctx, shifted, d, inner)
    e = apply("exp", shifted)
    return apply("div", e, _reduce_keep("reduce_sum", e, d))


_MAX_COLUMNS_MODELLED = 2**20
"""The most ``(outer, inner)`` columns whose scalar-tail positions
:func:`_column_tails` works out (a Python walk of a vector step each)."""

_TAILS = Memo("torch.softmax_column_tails", 64)
"""(outer, dim, inner, threads) -> :func:`_column_tails`' answer."""


def _softmax_columns(ctx, shifted, d: int, inner: int):
    """Softmax over a dim with elements after it, float32, as eager's
    ``_vec_softmax``: 16 columns (along the inner elements) at a time, each
    column's ``e = exp(x - max)`` (SLEEF's; glibc's ``expf`` where the kernel
    runs its scalar code: :func:`_column_tails`), summed in order along
    ``d`` from zero, then ``e / sum`` correctly rounded."""
    shape = shifted.shape
    outer, n = _count(shape[:d]), shape[d]
    cube = reshape(shifted, (outer, n, inner))
    tails = _column_tails(outer, n, inner, kernel_lanes(torch.float32), eager_loops.threads())
    if not tails.any():
        e = apply("exp_sleef", cube)
    else:
        exact = convert(apply("exp", convert(cube, "f64")), "f32")
        if tails.all():
            e = exact
        else:
            where = apply("broadcast_in_dim", const(tails.reshape(outer, 1, inner), "i1", ctx.device),
                          dims=(0, 1, 2), shape=(outer, n, inner))
            e = apply("select", where, exact, apply("exp_sleef", cube))
    columns = reshape(apply("permute", e, dims=(0, 2, 1)), (outer * inner, n))
    total = apply("lane_sum", columns, const(1.0, "f32", ctx.device, columns.shape), lanes=1, halving=False,
                  fused=False)
    total = apply("broadcast_in_dim", reshape(total, (outer, 1, inner)), dims=(0, 1, 2), shape=(outer, n, inner))
    return reshape(apply("div", e, total), shape)


def _column_tails(outer: int, n: int, inner: int, lanes: int, threads: int) -> np.ndarray:
    """``(outer * inner,)`` bools: the columns ``_vec_softmax`` computes in its
    scalar code. ``at::parallel_for`` splits the columns by a grain of
    ``32768 / n`` among the threads; a thread's columns run ``lanes`` at a time
    while the vector stays inside its row of ``inner`` and its chunk, else the
    rest of the row (or of the chunk) in scalar code."""
    key = (outer, n, inner, threads)
    known = _TAILS.get(key)
    if known is not None:
        return known
    total = outer * inner
    grain = max(32768 // n, 1)
    chunk = total
    if total >= grain and threads > 1:
        chunk = -(-total // min(threads, -(-total // grain)))
    tails = np.zeros(total, bool)
    for begin in range(0, total, chunk):
        end, idx = min(begin + chunk, total), begin
        while idx < end:
            at = idx % inner
            if at + lanes <= inner and idx + lanes <= end:
                idx += lanes
                continue
            step = end - idx if idx + lanes > end else inner - at
            tails[idx:idx + step] = True
            idx += step
    _TAILS.put(key, tails)
    return tails


@lowers(aten._softmax_backward_data.default)
def _softmax_backward(ctx, grad, output, dim, input_dtype):
    """``output * (grad - s)``; float32 over the last dim, ``s`` is eager's
    ``vec::map2_reduce_all`` of ``grad * output`` in the softmax kernels'
    lanes (``_vec_host_softmax_backward_lastdim``): the whole vectors'
    products rounded, the short tail's as eager's build computes them
    (rounded in its threads: 8-76 of 75 rows of 19..31 off with it fused;
    fused where the AVX2 build runs it in the calling thread:
    :func:`.lane_sums.softmax_backward_tail_fused`),
    the lanes added by halving. Over a dim with elements after it
    (``_vec_softmax_backward``), each column's products are fused into its
    in-order sum from zero."""
    grad, output = convert(grad, ctx.dtype), convert(output, ctx.dtype)
    d = _dim(dim, len(grad.shape))
    if _eager_kernel(grad, d) and len(grad.shape) - 1 == d:
        shape = grad.shape
        rows = (_count(shape[:d]), shape[d])
        lanes = kernel_lanes(torch.float32)
        if softmax_backward_tail_fused(torch.float32, rows[0]) and rows[1] // lanes <= lane_sums.MAX_VECTORS:
            # (lane_sum contracts a partial vector's lhs * rhs into its lanes)
            total = apply("lane_sum", reshape(grad, rows), reshape(output, rows), lanes=lanes, halving=True,
                          fused=False)
        else:
            total = lane_sum(reshape(apply("mul", grad, output), rows), 1, lanes)
        inner = _keep(_row_once(reshape(total, shape[:d])), d, shape)
    elif _modelled(grad) and _count(grad.shape[d + 1:]) > 1:
        shape, columns = grad.shape, _count(grad.shape[d + 1:])
        outer, n = _count(shape[:d]), shape[d]
        # (_vec_softmax_backward: each column's products fused into its sum, in order from zero)
        g, y = (reshape(apply("permute", reshape(v, (outer, n, columns)), dims=(0, 2, 1)), (outer * columns, n))
                for v in (grad, output))
        total = apply("lane_sum", g, y, lanes=1, halving=False, fused=True)
        total = apply("broadcast_in_dim", reshape(total, (outer, 1, columns)), dims=(0, 1, 2),
                      shape=(outer, n, columns))
        inner = reshape(total, shape)
    else:
        inner = _reduce_keep("reduce_sum", apply("mul", grad, output), d)
    return apply("mul", output, apply("sub", grad, inner))


@lowers(aten._log_softmax.default)
def _log_softmax(ctx, x, dim, half_to_float=False):
    x = convert(x, ctx.dtype)
    d = _dim(dim, len(x.shape))
    shifted = apply("sub", x, _reduce_keep("reduce_max", x, d))
    if _eager_kernel(shifted, d):
        total = lane_sum(apply("exp_sleef", shifted), d, kernel_lanes(torch.float32))
        return apply("sub", shifted, _keep(_row_once(apply("log_sleef", total)), d, x.shape))
    inner = _count(x.shape[d + 1:])
    if _modelled(x) and inner > 1:
        return _log_softmax_columns(ctx, shifted, d, inner)
    total = _reduce_keep("reduce_sum", apply("exp", shifted), d)
    return apply("sub", shifted, apply("log", total))


def _log_softmax_columns(ctx, shifted, d: int, inner: int):
    """log_softmax over a dim with elements after it, float32, as eager's
    ``_vec_logsoftmax``: per column (an inner element) ``s`` the in-order sum
    of ``exp(x - max)`` from zero, SLEEF's exp in whole vectors of columns and
    glibc's ``expf`` (float64's exp rounded) in the last ``inner % 16``
    columns (the kernel's chunks of columns are multiples of 16, so only a
    row's last chunk has a scalar tail), then ``(x - max) - log(s)`` with
    SLEEF's log (``vec::map`` loads the tail as a short vector)."""
    shape = shifted.shape
    outer, n = _count(shape[:d]), shape[d]
    cube = reshape(shifted, (outer, n, inner))
    e = _column_exp(ctx, cube, inner)
    columns = reshape(apply("permute", e, dims=(0, 2, 1)), (outer * inner, n))
    total = apply("lane_sum", columns, const(1.0, "f32", ctx.device, columns.shape), lanes=1, halving=False,
                  fused=False)
    log = apply("broadcast_in_dim", reshape(apply("log_sleef", total), (outer, 1, inner)), dims=(0, 1, 2),
                shape=(outer, n, inner))
    return reshape(apply("sub", cube, log), shape)


@lowers(aten._log_softmax_backward_data.default)
def _log_softmax_backward(ctx, grad, output, dim, input_dtype):
    grad, output = convert(grad, ctx.dtype), convert(output, ctx.dtype)
    d = _dim(dim, len(grad.shape))
    if _eager_kernel(grad, d):
        total = _keep(_row_once(lane_sum(grad, d, kernel_lanes(torch.float32))), d, grad.shape)
        return fused_multiply_add(apply("neg", apply("exp_sleef", output)), total, grad)
    inner = _count(grad.shape[d + 1:])
    if _modelled(grad) and inner > 1:
        return _log_softmax_backward_columns(ctx, grad, output, d, inner)
    return apply("sub", grad, apply("mul", apply("exp", output), _reduce_keep("reduce_sum", grad, d)))


def _log_softmax_backward_columns(ctx, grad, output, d: int, inner: int):
    """``_vec_log_softmax_backward``: per column the in-order sum ``s`` of
    ``grad`` from zero, then ``grad - exp(output) * s`` as one fused
    multiply-add, SLEEF's exp in whole vectors of columns, glibc's in a
    row's last ``inner % 16`` (:func:`_log_softmax_columns`' split)."""
    shape = grad.shape
    outer, n = _count(shape[:d]), shape[d]
    g, out = reshape(grad, (outer, n, inner)), reshape(output, (outer, n, inner))
    columns = reshape(apply("permute", g, dims=(0, 2, 1)), (outer * inner, n))
    total = apply("lane_sum", columns, const(1.0, "f32", ctx.device, columns.shape), lanes=1, halving=False,
                  fused=False)
    total = apply("broadcast_in_dim", reshape(total, (outer, 1, inner)), dims=(0, 1, 2), shape=(outer, n, inner))
    e = _column_exp(ctx, out, inner)
    return reshape(fused_multiply_add(apply("neg", e), total, g), shape)


def _column_exp(ctx, cube, inner: int):
    """``exp`` of ``(outer, n, inner)`` as the column kernels compute it: SLEEF's
    in whole vectors of columns, float64's rounded (glibc's ``expf``) in a
    row's last ``inner % 16`` columns."""
    outer, n, _ = cube.shape
    cut = inner - inner % kernel_lanes(torch.float32)
    if cut == inner:
        return apply("exp_sleef", cube)
    exact = convert(apply("exp", convert(cube, "f64")), "f32")
    if cut == 0:
        return exact
    tails = const(np.arange(inner) >= cut, "i1", ctx.device)
    where = apply("broadcast_in_dim", tails, dims=(2,), shape=(outer, n, inner))
    return apply("select", where, exact, apply("exp_sleef", cube))


# --- nll_loss's reduction ------------------------------------------------------------------
#
# Eager's nll_loss (``LossNLL.cpp``, ``nll_loss_out_frame``; ``nll_loss2d`` over the
# flattened (batch, position) index alike) sums ``-x[b, t_b] * w[t_b]`` and the weights
# in a cascade of 8 float32 partial sums: row ``b`` goes into level 0, and after it,
# at each ``b`` divisible by ``16**j`` (b = 0 included), level ``j`` is added into level
# ``j + 1`` and cleared; the result is ``((0 + L0) + L1) + .. + L7``. Probed: the level
# step is 16 for every batch (513-9,000 rows; the ``max(4, CeilLog2(n) / 2)`` power of
# two its source computes did not match), each product rounded before its sum.
_CASCADE_STEP = 16
_CASCADE_LEVELS = 8


def cascade_sum(x):
    """Eager's cascade sum (above) of the float vector ``x``: one
    ``lazy.cascade_sum``, whose flushes depend on the index only, so a
    batch padded to its bucket sums as the unpadded one. A row that
    ``ignore_index`` skips (0 here) does not flush in eager, which this does
    not follow where it falls on a multiple of 16."""
    return apply("cascade_sum", x, step=_CASCADE_STEP, levels=_CASCADE_LEVELS)


@lowers(aten.nll_loss_forward.default, aten.nll_loss2d_forward.default)
def _nll_loss_forward(ctx, x, target, weight, reduction, ignore_index):
    rows, hit, w = _nll_parts(ctx, x, target, weight, ignore_index)
    n, c = rows.shape
    dt = rows.dtype
    picked = apply("reduce_sum", apply("select", hit, rows, const(0, dt, ctx.device, (n, c))), dims=(1,))
    losses = apply("neg", apply("mul", picked, w))
    kind = _REDUCTIONS[reduction]
    out_shape = tuple(ctx.out[0].shape)
    exact = dt == "f32" and n > 0 and kind != "none"
    total_weight = cascade_sum(w) if exact and weight is not None else apply("reduce_sum", w, dims=(0,))
    if kind == "none":
        out = reshape(losses, out_shape)
    else:
        out = cascade_sum(losses) if exact else apply("reduce_sum", losses, dims=(0,))
        if kind == "mean":
            out = apply("div", out, total_weight)
    return out, reshape(total_weight, tuple(ctx.out[1].shape))
