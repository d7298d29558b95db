"""Matrix products: mm, bmm, mv, dot (f32 at full precision, as eager)."""

from __future__ import annotations

import torch

from ..lowering import apply, convert, lowers

aten = torch.ops.aten


def _dot(lhs, rhs, lb, rb, lc, rc):
    return apply("dot_general", lhs, rhs, lhs_batch=lb, rhs_batch=rb, lhs_contract=lc, rhs_contract=rc)


@lowers(aten.mm.default)
def _mm(ctx, a, b):
    return _dot(convert(a, ctx.dtype), convert(b, ctx.dtype), (), (), (1,), (0,))


@lowers(aten.bmm.default)
def _bmm(ctx, a, b):
    return _dot(convert(a, ctx.dtype), convert(b, ctx.dtype), (0,), (0,), (2,), (1,))


@lowers(aten.mv.default)
def _mv(ctx, a, v):
    return _dot(convert(a, ctx.dtype), convert(v, ctx.dtype), (), (), (1,), (0,))


@lowers(aten.dot.default, aten.vdot.default)
def _vdot(ctx, a, b):
    return _dot(convert(a, ctx.dtype), convert(b, ctx.dtype), (), (), (0,), (0,))
