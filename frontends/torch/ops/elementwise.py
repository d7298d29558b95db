"""Elementwise ATen ops: unary math, arithmetic, comparisons, logic, where, clamp.

Operands are converted to the result dtype eager computed (type promotion
with Python scalars included) and broadcast to the result shape, then one
``lazy`` op (or a short formula) computes the value.
"""

from __future__ import annotations

import math

import torch

from lazycore.dialect.types import is_float, is_int

from ..lowering import apply, broadcast, const, convert, dims, lowers, operand, scalar
from ..dtypes import lazy_dtype

aten = torch.ops.aten


def _args(ctx, *xs):
    return [operand(x, ctx.dtype, ctx.shape, ctx.device) for x in xs]


# --- unary --------------------------------------------------------------------------

UNARY = {
    aten.abs: "abs",
    aten.neg: "neg",
    aten.exp: "exp",
    aten.log: "log",
    aten.log1p: "log1p",
    aten.expm1: "expm1",
    aten.tanh: "tanh",
    aten.sigmoid: "logistic",
    aten.sqrt: "sqrt",
    aten.rsqrt: "rsqrt",
    aten.erf: "erf",
    aten.sin: "sin",
    aten.cos: "cos",
}


def _unary(lazy_op):
    def lower(ctx, x):
        (x,) = _args(ctx, x)
        return apply(lazy_op, x)

    lower.__name__ = f"lower_{lazy_op}"
    return lower


for _aten, _lazy in UNARY.items():
    lowers(_aten.default)(_unary(_lazy))


@lowers(aten.floor.default, aten.ceil.default, aten.round.default, aten.trunc.default)
def _rounding(ctx, x):
    if not is_float(x.dtype):
        return x
    name = ctx.func_name
    if name == "trunc":
        return apply("select", _lt0(x), apply("ceil", x), apply("floor", x))
    return apply({"floor": "floor", "ceil": "ceil", "round": "round"}[name], x)


def _lt0(x):
    return apply("compare", x, const(0, x.dtype, x.device, x.shape), direction="LT")


@lowers(aten.sign.default, aten.sgn.default)
def _sign(ctx, x):
    if x.dtype == "i1":
        return x
    return apply("sign", x)


@lowers(aten.reciprocal.default)
def _reciprocal(ctx, x):
    (x,) = _args(ctx, x)
    return apply("div", const(1, x.dtype, x.device, x.shape), x)


@lowers(aten.relu.default)
def _relu(ctx, x):
    return apply("maximum", x, const(0, x.dtype, x.device, x.shape))


_LOG_BASES = {aten.log2.default: 2.0, aten.log10.default: 10.0}


@lowers(*_LOG_BASES)
def _log_base(ctx, x):
    (x,) = _args(ctx, x)
    base = 2.0 if ctx.func_name == "log2" else 10.0
    return apply("div", apply("log", x), const(math.log(base), x.dtype, x.device, x.shape))


@lowers(aten.exp2.default)
def _exp2(ctx, x):
    (x,) = _args(ctx, x)
    return apply("exp", apply("mul", x, const(math.log(2.0), x.dtype, x.device, x.shape)))


@lowers(aten.tan.default)
def _tan(ctx, x):
    (x,) = _args(ctx, x)
    return apply("div", apply("sin", x), apply("cos", x))


@lowers(aten.atan.default)
def _atan(ctx, x):
    (x,) = _args(ctx, x)
    return apply("atan2", x, const(1, x.dtype, x.device, x.shape))


@lowers(aten.isnan.default)
def _isnan(ctx, x):
    if not is_float(x.dtype):
        return const(False, "i1", x.device, x.shape)
    return apply("compare", x, x, direction="NE")


@lowers(aten.isinf.default)
def _isinf(ctx, x):
    if not is_float(x.dtype):
        return const(False, "i1", x.device, x.shape)
    return apply("compare", apply("abs", x), const(math.inf, x.dtype, x.device, x.shape), direction="EQ")


@lowers(aten.isfinite.default)
def _isfinite(ctx, x):
    if not is_float(x.dtype):
        return const(True, "i1", x.device, x.shape)
    return apply("is_finite", x)


@lowers(aten.logical_not.default)
def _logical_not(ctx, x):
    return apply("not", convert(x, "i1"))


@lowers(aten.bitwise_not.default)
def _bitwise_not(ctx, x):
    return apply("not", x)


# --- binary arithmetic ----------------------------------------------------------------------


def _scaled(b, alpha, ctx):
    if alpha == 1:
        return b
    return apply("mul", b, scalar(alpha, ctx.dtype, ctx.device, ctx.shape))


@lowers(aten.add.Tensor, aten.add.Scalar)
def _add(ctx, a, b, alpha=1):
    a, b = _args(ctx, a, b)
    return apply("add", a, _scaled(b, alpha, ctx))


@lowers(aten.sub.Tensor, aten.sub.Scalar)
def _sub(ctx, a, b, alpha=1):
    a, b = _args(ctx, a, b)
    return apply("sub", a, _scaled(b, alpha, ctx))


@lowers(aten.mul.Tensor, aten.mul.Scalar)
def _mul(ctx, a, b):
    a, b = _args(ctx, a, b)
    return apply("mul", a, b)


@lowers(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div(ctx, a, b, rounding_mode=None):
    a, b = _args(ctx, a, b)
    q = apply("div", a, b)
    if rounding_mode is None or not is_float(ctx.dtype) and rounding_mode == "trunc":
        return q
    if rounding_mode == "trunc":
        return apply("select", _lt0(q), apply("ceil", q), apply("floor", q))
    if is_float(ctx.dtype):
        # floor(a / b) as eager computes it: from fmod, so exact quotients stay exact
        r = apply("rem", a, b)
        qt = apply("div", apply("sub", a, r), b)
        fix = _sign_differs(r, b)
        qt = apply("select", fix, apply("sub", qt, const(1, ctx.dtype, ctx.device, ctx.shape)), qt)
        fl = apply("floor", qt)
        round_up = apply("compare", apply("sub", qt, fl), const(0.5, ctx.dtype, ctx.device, ctx.shape),
                         direction="GT")
        fl = apply("select", round_up, apply("add", fl, const(1, ctx.dtype, ctx.device, ctx.shape)), fl)
        zero_b = apply("compare", b, const(0, ctx.dtype, ctx.device, ctx.shape), direction="EQ")
        return apply("select", zero_b, q, fl)
    # integers: truncated quotient, one less where the remainder's sign differs from b's
    r = apply("rem", a, b)
    return apply("select", _sign_differs(r, b), apply("sub", q, const(1, ctx.dtype, ctx.device, ctx.shape)), q)


def _sign_differs(r, b):
    zero = const(0, r.dtype, r.device, r.shape)
    nonzero = apply("compare", r, zero, direction="NE")
    differ = apply("xor", apply("compare", r, zero, direction="LT"), apply("compare", b, zero, direction="LT"))
    return apply("and", nonzero, differ)


@lowers(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor)
def _remainder(ctx, a, b):
    a, b = _args(ctx, a, b)
    r = apply("rem", a, b)
    return apply("select", _sign_differs(r, b), apply("add", r, b), r)


@lowers(aten.fmod.Tensor, aten.fmod.Scalar)
def _fmod(ctx, a, b):
    a, b = _args(ctx, a, b)
    return apply("rem", a, b)


@lowers(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar)
def _pow(ctx, a, b):
    if isinstance(b, (int, float)) and not isinstance(b, bool) and b == 2:
        (a,) = _args(ctx, a)
        return apply("mul", a, a)
    a, b = _args(ctx, a, b)
    return apply("pow", a, b)


@lowers(aten.maximum.default, aten.minimum.default, aten.fmax.default, aten.fmin.default)
def _max_min(ctx, a, b):
    a, b = _args(ctx, a, b)
    name = ctx.func_name
    op = "maximum" if name in ("maximum", "fmax") else "minimum"
    out = apply(op, a, b)
    if name in ("fmax", "fmin") and is_float(ctx.dtype):
        # fmax/fmin ignore a NaN when the other operand is a number
        out = apply("select", apply("compare", a, a, direction="NE"), b, out)
        out = apply("select", apply("compare", b, b, direction="NE"), a, out)
    return out


@lowers(aten.atan2.default)
def _atan2(ctx, a, b):
    a, b = _args(ctx, a, b)
    return apply("atan2", a, b)


_BITWISE = {"bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor",
            "__and__": "and", "__or__": "or", "__xor__": "xor"}


@lowers(aten.bitwise_and.Tensor, aten.bitwise_and.Scalar, aten.bitwise_or.Tensor, aten.bitwise_or.Scalar,
        aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar, aten.__and__.Tensor, aten.__or__.Tensor,
        aten.__xor__.Tensor)
def _bitwise(ctx, a, b):
    a, b = _args(ctx, a, b)
    return apply(_BITWISE[ctx.func_name], a, b)


@lowers(aten.logical_and.default, aten.logical_or.default, aten.logical_xor.default)
def _logical(ctx, a, b):
    a = broadcast(convert(a, "i1"), ctx.shape)
    b = broadcast(convert(b, "i1"), ctx.shape)
    return apply(ctx.func_name.removeprefix("logical_"), a, b)


# --- comparisons -------------------------------------------------------------------------------

_DIRECTIONS = {"eq": "EQ", "ne": "NE", "lt": "LT", "le": "LE", "gt": "GT", "ge": "GE"}


@lowers(*(getattr(aten, n).Tensor for n in _DIRECTIONS), *(getattr(aten, n).Scalar for n in _DIRECTIONS))
def _compare(ctx, a, b):
    common = lazy_dtype(torch.result_type(ctx.margs[0], ctx.margs[1]))
    a = operand(a, common, ctx.shape, ctx.device)
    b = operand(b, common, ctx.shape, ctx.device)
    return apply("compare", a, b, direction=_DIRECTIONS[ctx.func_name])


# --- selection -----------------------------------------------------------------------------------


@lowers(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(ctx, cond, a, b):
    cond = broadcast(convert(cond, "i1"), ctx.shape)
    a, b = _args(ctx, a, b)
    return apply("select", cond, a, b)


@lowers(aten.clamp.default, aten.clamp.Tensor)
def _clamp(ctx, x, min=None, max=None):
    (x,) = _args(ctx, x)
    if min is not None:
        x = apply("maximum", x, operand(min, ctx.dtype, ctx.shape, ctx.device))
    if max is not None:
        x = apply("minimum", x, operand(max, ctx.dtype, ctx.shape, ctx.device))
    return x


@lowers(aten.clamp_min.default, aten.clamp_min.Tensor)
def _clamp_min(ctx, x, min):
    return _clamp(ctx, x, min=min)


@lowers(aten.clamp_max.default, aten.clamp_max.Tensor)
def _clamp_max(ctx, x, max):
    return _clamp(ctx, x, max=max)


# --- copies and fills ---------------------------------------------------------------------------------


@lowers(aten.clone.default)
def _clone(ctx, x, memory_format=None):
    return x


@lowers(aten.fill.Scalar, aten.fill.Tensor)
def _fill(ctx, x, value):
    return operand(value, ctx.dtype, ctx.shape, ctx.device)


@lowers(aten.zero.default)
def _zero(ctx, x):
    return const(0, ctx.dtype, ctx.device, ctx.shape)


@lowers(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(ctx, x, mask, value):
    mask = broadcast(convert(mask, "i1"), ctx.shape)
    (x,) = _args(ctx, x)
    return apply("select", mask, operand(value, ctx.dtype, ctx.shape, ctx.device), x)
