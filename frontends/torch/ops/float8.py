"""float8 arithmetic as eager's CPU kernels do it: in float32, rounded once.

Eager's CPU kernels take float8 tensors in few ops (the rest raise
NotImplementedError, which :mod:`..dispatch` probes for and raises at the
call). Of those, ``mul``, ``mm`` and ``addmm`` compute in float32 (a matrix
product accumulates there) and convert the result as c10 does
(:func:`..lowering.to_float8`: float8_e4m3fn saturates at +-448). Their
lowerings here run the float32 lowering of the op and convert its result,
rather than applying ``lazy.mul`` / ``lazy.dot_general`` to float8 operands,
whose overflow is XLA's (NaN for float8_e4m3fn) and whose product XLA's CPU
backend might accumulate in float8.
"""

from __future__ import annotations

import functools

import torch

from lazycore.dialect.types import is_float8

from ..lowering import Ctx, lookup, register, to_float8

aten = torch.ops.aten

IN_FLOAT32 = (aten.mul.Tensor, aten.mm.default, aten.addmm.default)


def _in_float32(inner):
    @functools.wraps(inner)
    def lowering(ctx, *args, **kwargs):
        if not is_float8(ctx.dtype):
            return inner(ctx, *args, **kwargs)
        wide = Ctx(ctx.func, ctx.out.to(torch.float32), ctx.margs, ctx.mkwargs, ctx.device)
        return to_float8(inner(wide, *args, **kwargs), ctx.dtype)

    lowering.__lazycore_float8__ = inner
    return lowering


for _op in IN_FLOAT32:
    _inner = lookup(_op)
    if not hasattr(_inner, "__lazycore_float8__"):
        register(_op, _in_float32(_inner))
