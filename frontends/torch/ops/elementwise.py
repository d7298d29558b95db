"""Elementwise ATen ops: unary math, arithmetic, comparisons, logic, where, clamp.

Operands are converted to the result dtype eager computed (type promotion
with Python scalars included) and broadcast to the result shape, then one
``lazy`` op (or a short formula) computes the value.
"""

from __future__ import annotations

import math

import torch

from lazycore.dialect.elementwise import UNARY as LAZY_UNARY
from lazycore.dialect.rules import DTYPE_CLASSES
from lazycore.dialect.types import is_float

from ..lowering import apply, broadcast, const, convert, lowers, operand, scalar
from ..dtypes import lazy_dtype

aten = torch.ops.aten
prims = torch.ops.prims


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
    accepts = DTYPE_CLASSES[LAZY_UNARY[lazy_op]]

    def lower(ctx, x):
        (x,) = _args(ctx, x)
        if not accepts(x.dtype):
            return NotImplemented  # eager's kernel has its say: it raises for these (abs of bool)
        return apply(lazy_op, x)

    lower.__name__ = f"lower_{lazy_op}"
    return lower


for _aten, _lazy in UNARY.items():
    # the prim of the same name too: torch._refs decompositions call prims directly
    _prim = getattr(prims, _aten.__name__, None)
    lowers(_aten.default, *([_prim.default] if _prim is not None else []))(_unary(_lazy))


@lowers(aten.floor.default, aten.ceil.default, aten.round.default, aten.trunc.default, prims.round.default)
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


# Inverse trigonometric and hyperbolic functions, from ops the dialect has, in the
# forms XLA's own expansions use (chlo): products like (1 - x)(1 + x) and log1p/expm1
# keep the digits near 0 and 1 that the textbook formulas lose.


def _c(x, value):
    return const(value, x.dtype, x.device, x.shape)


def _float_args(ctx, *xs):
    """The operands in the dtype to compute in: f32 for f16/bf16 (eager's CPU kernels
    compute those in float too; the formulas' intermediates would overflow a half)."""
    wide = "f32" if ctx.dtype in ("f16", "bf16") else ctx.dtype
    return [operand(x, wide, ctx.shape, ctx.device) for x in xs]


def _upcast(fn):
    """Round a lowering's result (computed per :func:`_float_args`) to the result dtype once."""

    def lower(ctx, *args):
        r = fn(ctx, *args)
        return r if r is NotImplemented else convert(r, ctx.dtype)

    lower.__name__ = fn.__name__
    return lower


@lowers(aten.asin.default, prims.asin.default)
@_upcast
def _asin(ctx, x):
    (x,) = _float_args(ctx, x)
    # asin(x) = 2 atan2(x, 1 + sqrt(1 - x^2))
    root = apply("sqrt", apply("mul", apply("sub", _c(x, 1), x), apply("add", _c(x, 1), x)))
    return apply("mul", _c(x, 2), apply("atan2", x, apply("add", _c(x, 1), root)))


@lowers(aten.acos.default, prims.acos.default)
@_upcast
def _acos(ctx, x):
    (x,) = _float_args(ctx, x)
    # acos(x) = 2 atan2(sqrt(1 - x^2), 1 + x), and pi at x = -1 (where that is atan2(0, 0))
    root = apply("sqrt", apply("mul", apply("sub", _c(x, 1), x), apply("add", _c(x, 1), x)))
    r = apply("mul", _c(x, 2), apply("atan2", root, apply("add", _c(x, 1), x)))
    return apply("select", apply("compare", x, _c(x, -1), direction="EQ"), _c(x, math.pi), r)


@lowers(aten.sinh.default, prims.sinh.default)
@_upcast
def _sinh(ctx, x):
    (x,) = _float_args(ctx, x)
    # small |x|: from expm1, exact near 0; otherwise e^(x - ln 2) - e^(-x - ln 2), which
    # stays finite where e^x alone would overflow
    e = apply("expm1", x)
    small = apply("mul", _c(x, 0.5), apply("add", e, apply("div", e, apply("add", e, _c(x, 1)))))
    half = _c(x, math.log(0.5))
    large = apply("sub", apply("exp", apply("add", x, half)), apply("exp", apply("sub", half, x)))
    return apply("select", apply("compare", apply("abs", x), _c(x, 1), direction="LT"), small, large)


@lowers(aten.cosh.default, prims.cosh.default)
@_upcast
def _cosh(ctx, x):
    (x,) = _float_args(ctx, x)
    half = _c(x, math.log(0.5))
    return apply("add", apply("exp", apply("add", x, half)), apply("exp", apply("sub", half, x)))


@lowers(aten.asinh.default, prims.asinh.default)
@_upcast
def _asinh(ctx, x):
    (x,) = _float_args(ctx, x)
    # asinh|x| = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); ln 2 + ln|x| once x^2 overflows
    a = apply("abs", x)
    sq = apply("mul", a, a)
    near = apply("log1p", apply("add", a, apply("div", sq, apply("add", _c(x, 1), apply("sqrt", apply("add", _c(x, 1), sq))))))
    far = apply("add", apply("log", a), _c(x, math.log(2.0)))
    big = apply("compare", a, _c(x, 1e18 if x.dtype != "f64" else 1e150), direction="GT")
    r = apply("select", big, far, near)
    return apply("select", apply("compare", x, _c(x, 0), direction="LT"), apply("neg", r), r)


@lowers(aten.acosh.default, prims.acosh.default)
@_upcast
def _acosh(ctx, x):
    (x,) = _float_args(ctx, x)
    # acosh(x) = log1p((x - 1) + sqrt((x - 1)(x + 1))); ln 2 + ln x once that product overflows
    xm1 = apply("sub", x, _c(x, 1))
    near = apply("log1p", apply("add", xm1, apply("sqrt", apply("mul", xm1, apply("add", x, _c(x, 1))))))
    far = apply("add", apply("log", x), _c(x, math.log(2.0)))
    big = apply("compare", x, _c(x, 1e18 if x.dtype != "f64" else 1e150), direction="GT")
    r = apply("select", big, far, near)
    # below 1 the product can be positive again (x very negative): NaN, as the domain says
    return apply("select", apply("compare", x, _c(x, 1), direction="LT"), _c(x, math.nan), r)


@lowers(aten.atanh.default, prims.atanh.default)
@_upcast
def _atanh(ctx, x):
    (x,) = _float_args(ctx, x)
    # atanh(x) = log1p(2x / (1 - x)) / 2: NaN beyond [-1, 1], +-inf at the ends
    r = apply("log1p", apply("div", apply("mul", _c(x, 2), x), apply("sub", _c(x, 1), x)))
    return apply("mul", _c(x, 0.5), r)


@lowers(aten.signbit.default, prims.signbit.default)
def _signbit(ctx, x):
    # prims.signbit's meta result has the input's dtype (aten's is bool)
    if not is_float(x.dtype):
        if x.dtype.startswith("ui") or x.dtype == "i1":
            return const(False, ctx.dtype, x.device, x.shape)
        return convert(apply("compare", x, _c(x, 0), direction="LT"), ctx.dtype)
    # -0.0 has the sign bit: atan2(-0.0, -1) = -pi. (The dialect has no bitcast, so the sign
    # bit of a NaN is not seen: NaN gives False.)
    neg_zero = apply("and", apply("compare", x, _c(x, 0), direction="EQ"),
                     apply("compare", apply("atan2", x, _c(x, -1)), _c(x, 0), direction="LT"))
    return convert(apply("or", apply("compare", x, _c(x, 0), direction="LT"), neg_zero), ctx.dtype)


@lowers(aten.angle.default)
@_upcast
def _angle(ctx, x):
    # real inputs only reach here (complex has no lazy element type): pi below 0, else 0
    (x,) = _float_args(ctx, x)
    r = apply("select", apply("compare", x, _c(x, 0), direction="LT"), _c(x, math.pi), _c(x, 0))
    return apply("select", apply("compare", x, x, direction="NE"), x, r)


@lowers(aten.hypot.default, prims.hypot.default)
@_upcast
def _hypot(ctx, a, b):
    a, b = _float_args(ctx, a, b)
    a, b = apply("abs", a), apply("abs", b)
    # m sqrt(1 + (n/m)^2) with m = max, n = min: no overflow from squaring
    m, n = apply("maximum", a, b), apply("minimum", a, b)
    r = apply("div", n, m)
    h = apply("mul", m, apply("sqrt", apply("add", _c(m, 1), apply("mul", r, r))))
    h = apply("select", apply("compare", m, _c(m, 0), direction="EQ"), _c(m, 0), h)
    # an infinite side wins over a NaN one, as C's hypot
    inf = apply("or", apply("compare", a, _c(a, math.inf), direction="EQ"),
                apply("compare", b, _c(b, math.inf), direction="EQ"))
    return apply("select", inf, _c(m, math.inf), h)


# Gamma-function family and erfinv, as XLA expands them: the Lanczos approximation
# (g = 7, 9 terms) with the reflection formula below 1/2, and Giles' single-precision
# erfinv polynomial.

_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)


def _lanczos(x):
    """z (x - 1, or -x where x < 1/2 reflects), the series sum, the sum of its derivative
    terms, log(t) and t = z + g + 1/2."""
    reflect = apply("compare", x, _c(x, 0.5), direction="LT")
    z = apply("select", reflect, apply("neg", x), apply("sub", x, _c(x, 1)))
    series, slope = _c(x, _LANCZOS[0]), _c(x, 0)
    for i, coeff in enumerate(_LANCZOS[1:], start=1):
        d = apply("add", z, _c(x, i))
        term = apply("div", _c(x, coeff), d)
        series = apply("add", series, term)
        slope = apply("sub", slope, apply("div", term, d))
    gh = _LANCZOS_G + 0.5
    t = apply("add", z, _c(x, gh))
    log_t = apply("add", _c(x, math.log(gh)), apply("log1p", apply("div", z, _c(x, gh))))
    return reflect, z, series, slope, log_t, t


def _is_int(x):
    return apply("compare", x, apply("floor", x), direction="EQ")


@lowers(aten.lgamma.default, prims.lgamma.default)
@_upcast
def _lgamma(ctx, x):
    (x,) = _float_args(ctx, x)
    reflect, z, series, _, log_t, t = _lanczos(x)
    lg = apply("add", apply("sub", apply("mul", apply("add", z, _c(x, 0.5)), log_t), t),
               apply("add", apply("log", series), _c(x, 0.5 * math.log(2 * math.pi))))
    # reflection: log(pi) - log|sin(pi x)| - lgamma(1 - x), the sine from x's distance to
    # the nearest integer so it is exact (and 0, giving +inf, at the poles)
    a = apply("abs", x)
    frac = apply("sub", a, apply("floor", a))
    frac = apply("select", apply("compare", frac, _c(x, 0.5), direction="GT"), apply("sub", _c(x, 1), frac), frac)
    sin = apply("sin", apply("mul", frac, _c(x, math.pi)))
    refl = apply("sub", apply("sub", _c(x, math.log(math.pi)), apply("log", sin)), lg)
    r = apply("select", reflect, refl, lg)
    return apply("select", apply("compare", a, _c(x, math.inf), direction="EQ"), _c(x, math.inf), r)


@lowers(aten.digamma.default, prims.digamma.default)
@_upcast
def _digamma(ctx, x):
    (x,) = _float_args(ctx, x)
    reflect, _, series, slope, log_t, t = _lanczos(x)
    y = apply("sub", apply("add", log_t, apply("div", slope, series)), apply("div", _c(x, _LANCZOS_G), t))
    # reflection: psi(x) = psi(1 - x) - pi cot(pi x), cot from x's offset to the nearest integer
    r = apply("mul", apply("sub", x, apply("round", x)), _c(x, math.pi))
    refl = apply("sub", y, apply("div", apply("mul", _c(x, math.pi), apply("cos", r)), apply("sin", r)))
    out = apply("select", reflect, refl, y)
    # eager: NaN at the negative integers, -inf at +0 and +inf at -0, +inf at +inf
    pole = apply("and", apply("compare", x, _c(x, 0), direction="LT"), _is_int(x))
    out = apply("select", pole, _c(x, math.nan), out)
    zero = apply("compare", x, _c(x, 0), direction="EQ")
    signed_inf = apply("select", apply("compare", apply("atan2", x, _c(x, -1)), _c(x, 0), direction="LT"),
                       _c(x, math.inf), _c(x, -math.inf))
    out = apply("select", zero, signed_inf, out)
    return apply("select", apply("compare", x, _c(x, math.inf), direction="EQ"), x, out)


@lowers(aten.polygamma.default)
def _polygamma(ctx, n, x):
    return _digamma(ctx, x) if n == 0 else NotImplemented


_ERFINV_NEAR = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _horner(w, coeffs):
    p = _c(w, coeffs[0])
    for c in coeffs[1:]:
        p = apply("add", _c(w, c), apply("mul", p, w))
    return p


@lowers(aten.erfinv.default, prims.erf_inv.default)
@_upcast
def _erfinv(ctx, x):
    if ctx.dtype == "f64":
        return NotImplemented  # the polynomials are single-precision ones
    (x,) = _float_args(ctx, x)
    w = apply("neg", apply("log", apply("mul", apply("sub", _c(x, 1), x), apply("add", _c(x, 1), x))))
    near = _horner(apply("sub", w, _c(x, 2.5)), _ERFINV_NEAR)
    tail = _horner(apply("sub", apply("sqrt", w), _c(x, 3)), _ERFINV_TAIL)
    r = apply("mul", apply("select", apply("compare", w, _c(x, 5), direction="LT"), near, tail), x)
    # at +-1 the tail polynomial's alternating signs meet infinities: the answer is +-inf
    one = apply("compare", apply("abs", x), _c(x, 1), direction="EQ")
    return apply("select", one, apply("mul", x, _c(x, math.inf)), r)


# Cephes' single-precision erfc for |x| >= 1: exp(-x^2) / |x| times a polynomial in 1/x^2
# (one below 2, one above); 1 - erf(x) loses nothing nearer 0.
_ERFC_BELOW_2 = (2.326819970068386e-2, -1.387039388740657e-1, 3.687424674597105e-1, -5.824733027278666e-1,
                 6.210004621745983e-1, -4.944515323274145e-1, 3.404879937665872e-1, -2.741127028184656e-1,
                 5.638259427386472e-1)
_ERFC_ABOVE_2 = (-1.047766399936249e1, 1.297719955372516e1, -7.495518717768503e0, 2.921019019210786e0,
                 -1.015265279202700e0, 4.218463358204948e-1, -2.820767439740514e-1, 5.641895067754075e-1)
_MAXLOG_F32 = 88.72283905206835


@lowers(aten.erfc.default, prims.erfc.default)
@_upcast
def _erfc(ctx, x):
    if ctx.dtype == "f64":
        return NotImplemented  # single-precision coefficients
    (x,) = _float_args(ctx, x)
    a = apply("abs", x)
    x2 = apply("mul", x, x)
    q = apply("div", _c(x, 1), a)
    y = apply("mul", q, q)
    poly = apply("select", apply("compare", a, _c(x, 2), direction="LT"),
                 _horner(y, _ERFC_BELOW_2), _horner(y, _ERFC_ABOVE_2))
    tail = apply("mul", apply("mul", apply("exp", apply("neg", x2)), q), poly)
    tail = apply("select", apply("compare", x2, _c(x, _MAXLOG_F32), direction="GT"), _c(x, 0), tail)
    tail = apply("select", apply("compare", x, _c(x, 0), direction="LT"), apply("sub", _c(x, 2), tail), tail)
    near = apply("sub", _c(x, 1), apply("erf", x))
    return apply("select", apply("compare", a, _c(x, 1), direction="LT"), near, tail)


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
    if is_float(x.dtype):
        return NotImplemented  # eager's kernel raises its NotImplementedError
    return apply("not", x)


# --- binary arithmetic ----------------------------------------------------------------------


def _scaled(b, alpha, ctx):
    if alpha == 1:
        return b
    return apply("mul", b, scalar(alpha, ctx.dtype, ctx.device, ctx.shape))


@lowers(aten.add.Tensor, aten.add.Scalar)
def _add(ctx, a, b, alpha=1):
    a, b = _args(ctx, a, b)
    if ctx.dtype == "i1":  # booleans add as "or" (alpha is a bool then)
        return apply("or", a, b) if alpha else a
    return apply("add", a, _scaled(b, alpha, ctx))


@lowers(aten.sub.Tensor, aten.sub.Scalar)
def _sub(ctx, a, b, alpha=1):
    a, b = _args(ctx, a, b)
    return apply("sub", a, _scaled(b, alpha, ctx))


@lowers(aten.mul.Tensor, aten.mul.Scalar, prims.mul.default)
def _mul(ctx, a, b):
    a, b = _args(ctx, a, b)
    return apply("and" if ctx.dtype == "i1" else "mul", a, b)


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


@lowers(prims.div.default)
def _prims_div(ctx, a, b):
    # true division for floats, truncation for integers: the dialect's div either way
    a, b = _args(ctx, a, b)
    return apply("div", a, b)


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


@lowers(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar, prims.where.default)
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


@lowers(aten.copy.default, prims.copy_to.default)
def _copy(ctx, x, src, non_blocking=False):
    return operand(src, ctx.dtype, ctx.shape, ctx.device)


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
