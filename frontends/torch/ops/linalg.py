"""Matrix products (mm, bmm, mv, dot, addbmm; f32 at full precision, as eager) and cdist."""

from __future__ import annotations

import math

import torch

from lazycore.dialect.types import is_complex
from lazycore.trace import composites

from ..lowering import apply, broadcast, const, convert, fused_multiply_add, lowers, reshape, scalar
from . import eager_loops

aten = torch.ops.aten


def _dot(lhs, rhs, lb, rb, lc, rc):
    return apply("dot_general", lhs, rhs, lhs_batch=lb, rhs_batch=rb, lhs_contract=lc, rhs_contract=rc)


@lowers(aten.mm.default)
def _mm(ctx, a, b):
    a, b = convert(a, ctx.dtype), convert(b, ctx.dtype)
    chain = eager_loops.gemm_chain(a, b, fused_multiply_add, ctx.margs[1])  # (eager's order)
    if chain is None:
        chain = eager_loops.ordered_dot(a, b)
    return _dot(a, b, (), (), (1,), (0,)) if chain is None else chain


_BMM_OWN_KERNEL = 400
"""Eager's ``bmm`` runs its own loop (not its GEMM) below this many
multiply-adds a matrix (``LinearAlgebra.cpp``, ``bmm_out_or_baddbmm_``)."""


@lowers(aten.bmm.default)
def _bmm(ctx, a, b):
    a, b = convert(a, ctx.dtype), convert(b, ctx.dtype)
    (_, m, k), n = a.shape, b.shape[2]
    ordered = eager_loops.ordered_dot(a, b) if m * k * n >= _BMM_OWN_KERNEL else None  # (eager's GEMM order)
    return _dot(a, b, (0,), (0,), (2,), (1,)) if ordered is None else ordered


@lowers(aten.mv.default)
def _mv(ctx, a, v):
    return _dot(convert(a, ctx.dtype), convert(v, ctx.dtype), (), (), (1,), (0,))


@lowers(aten.dot.default, aten.vdot.default)
def _vdot(ctx, a, b):
    a = convert(a, ctx.dtype)
    if ctx.func_name == "vdot" and is_complex(ctx.dtype):  # vdot conjugates its first argument
        a = composites.conj(a)
    return _dot(a, convert(b, ctx.dtype), (), (), (0,), (0,))


_ORDERED_BATCHES = 256
"""``addbmm`` adds its batches' products in eager's order up to this many batches
(two nodes a batch); more are one contraction, summed in the dot's own order."""


@lowers(aten.addbmm.default)
def _addbmm(ctx, x, b1, b2, beta=1, alpha=1):
    # eager's CPU kernel (LinearAlgebra.cpp, addbmm_impl_) runs result.addmm_(b1[i], b2[i],
    # beta, alpha) batch by batch, beta 1 after the first: beta * self + alpha * (b1[0] @ b2[0]),
    # then each later alpha * (b1[i] @ b2[i]) added in batch order. Each addmm_ adds in
    # float32 for float16/bfloat16 and rounds its result once (as _addmm in nn.py). With
    # alpha 1 and beta 0 or 1 that is eager's rounding wherever the products are; other
    # scales eager's GEMM applies inside its kernel, in its own order
    count = b1.shape[0]
    if count == 0:  # result.mul_(beta) in its own type, or zeros
        if beta == 0:
            return const(0, ctx.dtype, ctx.device, ctx.shape)
        x = broadcast(convert(x, ctx.dtype), ctx.shape)
        return x if beta == 1 else apply("mul", x, scalar(beta, ctx.dtype, ctx.device, ctx.shape))
    dt = "f32" if ctx.dtype in ("f16", "bf16") else ctx.dtype
    b1, b2 = convert(b1, dt), convert(b2, dt)
    if count <= _ORDERED_BATCHES:
        prods = _dot(b1, b2, (0,), (0,), (2,), (1,))
        if alpha != 1:
            prods = apply("mul", prods, scalar(alpha, dt, ctx.device, prods.shape))
        n, p = ctx.shape
        terms = [reshape(apply("slice", prods, start=(i, 0, 0), limit=(i + 1, n, p), strides=(1, 1, 1)), ctx.shape)
                 for i in range(count)]
    else:
        prod = _dot(b1, b2, (), (), (0, 2), (0, 1))
        if alpha != 1:
            prod = apply("mul", prod, scalar(alpha, dt, ctx.device, ctx.shape))
        terms = [prod]
    out = terms[0]
    if beta != 0:  # (eager ignores self when beta is 0, NaNs included)
        x = broadcast(convert(convert(x, ctx.dtype), dt), ctx.shape)
        if beta != 1:
            x = apply("mul", x, scalar(beta, dt, ctx.device, ctx.shape))
        out = apply("add", x, out)
    out = convert(out, ctx.dtype)
    for term in terms[1:]:
        out = convert(apply("add", convert(out, dt), term), ctx.dtype)
    return out


@lowers(aten._cdist_forward.default)
def _cdist(ctx, x1, x2, p, compute_mode=None):
    x1, x2 = convert(x1, ctx.dtype), convert(x2, ctx.dtype)
    *batch, r1, r2 = ctx.shape
    m = x1.shape[-1]
    if m == 0 or r1 == 0 or r2 == 0:
        return const(0, ctx.dtype, ctx.device, ctx.shape)
    batch = tuple(batch)
    if p == 2 and (compute_mode == 1 or compute_mode in (None, 0) and (r1 > 25 or r2 > 25)):
        return _euclid_mm(ctx, x1, x2, batch, r1, r2, m)
    full = batch + (r1, r2, m)
    a = broadcast(reshape(x1, x1.shape[:-1] + (1, m)), full)
    b = broadcast(reshape(x2, x2.shape[:-2] + (1, r2, m)), full)
    d = apply("abs", apply("sub", a, b))
    last = (len(full) - 1,)
    if p == 0:
        return _agg(convert(apply("compare", d, _zero(d), direction="NE"), ctx.dtype))
    if p == 1:
        return _agg(d)
    if p == 2:
        return apply("sqrt", _agg(d, square=True))
    if p == math.inf:
        return apply("reduce_max", d, dims=last)
    s = _agg(apply("pow", d, scalar(p, ctx.dtype, ctx.device, full)))
    # std::pow(agg, 1.0 / p): the float sum to a double power, rounded back
    return convert(apply("pow", convert(s, "f64"), scalar(1.0 / p, "f64", ctx.device, ctx.shape)), ctx.dtype)


_SEQUENTIAL_AGG = 64  # coordinates summed as eager's loop up to here (a node each), XLA's reduction beyond


def _agg(t, square=False):
    """``t`` (squared, asked) summed over its last dim as eager's ``run_parallel_cdist`` does:
    ``agg = 0``, then each coordinate in order, ``agg + diff * diff`` one fused multiply-add
    where eager's kernel is built for AVX2/AVX512 (the compiler contracts it). XLA's reduction
    of a row sums in another order: the distances, and the gradients through them, were an
    ulp off eager's."""
    *lead, m = t.shape
    fma = square and torch.backends.cpu.get_cpu_capability().startswith("AVX")
    if m > _SEQUENTIAL_AGG:
        return apply("reduce_sum", apply("mul", t, t) if square else t, dims=(len(lead),))
    n = len(t.shape)

    def col(k):
        h = apply("slice", t, start=(0,) * (n - 1) + (k,), limit=tuple(lead) + (k + 1,), strides=(1,) * n)
        return reshape(h, tuple(lead))

    acc = const(0, t.dtype, t.device, tuple(lead))
    for k in range(m):
        c = col(k)
        acc = fused_multiply_add(c, c, acc) if fma else apply("add", acc, apply("mul", c, c) if square else c)
    return acc


def _zero(h):
    return const(0, h.dtype, h.device, h.shape)


def _euclid_mm(ctx, x1, x2, batch, r1, r2, m):
    """Eager's matrix-product form, |a|^2 - 2ab + |b|^2, so rounding matches it."""
    x1 = broadcast(x1, batch + (r1, m))
    x2 = broadcast(x2, batch + (r2, m))
    last = len(batch) + 1
    n1 = reshape(apply("reduce_sum", apply("mul", x1, x1), dims=(last,)), batch + (r1, 1))
    n2 = reshape(apply("reduce_sum", apply("mul", x2, x2), dims=(last,)), batch + (r2, 1))
    one1 = const(1, ctx.dtype, ctx.device, batch + (r1, 1))
    one2 = const(1, ctx.dtype, ctx.device, batch + (r2, 1))
    lhs = apply("concatenate", apply("concatenate", apply("mul", x1, const(-2, ctx.dtype, ctx.device, x1.shape)),
                                     n1, dim=last), one1, dim=last)
    rhs = apply("concatenate", apply("concatenate", x2, one2, dim=last), n2, dim=last)
    nb = tuple(range(len(batch)))
    sq = _dot(lhs, rhs, nb, nb, (last,), (last,))
    return apply("sqrt", apply("maximum", sq, _zero(sq)))


from . import decompositions  # noqa: E402,F401  (the factorizations: torch.linalg's cholesky, solve, qr, ...)
