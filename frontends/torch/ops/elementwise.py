"""Elementwise ATen ops: unary math, arithmetic, comparisons, logic, where, clamp.

Operands are converted to the result dtype eager computed (type promotion
with Python scalars included) and broadcast to the result shape, then one
``lazy`` op (or a short formula) computes the value.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from lazycore.dialect import exp_f32, exp_f64
from lazycore.dialect.rules import DTYPE_CLASSES
from lazycore.dialect.spec import spec_of
from lazycore.dialect.types import is_complex, is_float
from lazycore.trace import composites, core

from ..lowering import apply, broadcast, const, convert, fused_multiply_add, is_handle, lowers, operand, scalar, wrapped
from ..dtypes import chalf_rounded, check_chalf, lazy_dtype
from . import eager_loops

aten = torch.ops.aten
prims = torch.ops.prims


def _args(ctx, *xs):
    if _chalf(ctx):
        return [_chalf_operand(x, ctx.dtype, ctx.shape, ctx.device) for x in xs]
    return [operand(x, ctx.dtype, ctx.shape, ctx.device) for x in xs]


def _chalf_operand(x, dtype, shape, device):
    """An operand of an op computing in complex32, converted to it as eager's
    kernels do (c10: through complex<float>): a Python number, a wider float
    (a 0-dim tensor) or a large integer rounds to float16 parts. (A
    complex<f32> operand is a chalf value already: a complex64 one would have
    made the result complex64.) Rounded in the graph, so a recording's number
    parameter is rounded at each replay too."""
    h = operand(x, dtype, shape, device)
    if not is_handle(x) or x.dtype not in _CHALF_EXACT:
        h = chalf_rounded(h)
    return h


_CHALF_EXACT = frozenset({"complex<f32>", "f16", "i1", "i8", "ui8"})
"""Operand types every value of which a chalf holds."""


def _chalf(ctx) -> bool:
    """The op's result is complex32: eager computes each step in c10::complex<Half>,
    through complex<float> and rounded back to float16 parts."""
    out = ctx.out[0] if isinstance(ctx.out, (tuple, list)) else ctx.out
    return out.dtype is torch.complex32


def _operands(ctx, *xs):
    """The operands of arithmetic, bitwise and comparison ops: a Python int stands
    for a tensor there, and eager wraps it into an integer type (int8 ``x + 300``
    adds 44), where other Python numbers (``alpha=``, ``clamp``'s bounds, an
    exponent) must fit (:func:`~lazycore.frontends.torch.lowering.scalar`)."""
    return _args(ctx, *(wrapped(x, ctx.dtype) for x in xs))


_c = composites.full_like  # a constant like x: the formulas stay readable


# --- elementwise functions ----------------------------------------------------------


def _op(name):
    """One elementwise lazy op; element types its row refuses go to eager's
    kernel, so the op's own dtype rule decides, complex numbers included."""
    spec = spec_of(name)
    accepts = DTYPE_CLASSES[spec.dtypes] if spec.dtypes else None

    def fn(*xs):
        if accepts is not None and not accepts(xs[0].dtype):
            return NotImplemented  # eager's kernel has its say: it raises for these (abs of bool)
        return apply(name, *xs)

    fn.__name__ = name
    fn.lazy_op = spec
    return fn


_EXP_F64_PROBE = (-745.0, -720.5, -707.71, -1.0, 0.0, 2.0**-40, 0.5, 1.0, 3.25, 40.0, 707.71, 709.5, math.inf)


@functools.cache
def _eager_exp_f64_is_vml() -> bool:
    """Whether eager's float64 exp gives exp_f64's steps' bits here (MKL VML on
    AVX-512; probed once: another build or CPU may run other code)."""
    x = torch.linspace(-30, 30, 251, dtype=torch.float64)
    x = torch.cat([x * math.pi / 3, torch.tensor(_EXP_F64_PROBE, dtype=torch.float64)])
    return bool(np.array_equal(torch.exp(x).numpy(), exp_f64.exp(x.numpy())))


@functools.cache
def _eager_exp_f32_is_vml() -> bool:
    """Whether eager's float32 exp gives exp_f32's steps' bits here (MKL VML's
    vsExp; a build without MKL has other steps): asked once, of values over the
    vector path and the scalar routine's limits."""
    x = torch.linspace(-110.0, 95.0, 259, dtype=torch.float32)
    x = torch.cat([x, torch.tensor([0.0, 1e-3, -1e-3, 87.3366, -87.3366, 88.7228, 88.7229, float("inf"), float("-inf")])])
    return bool(np.array_equal(torch.exp(x).numpy().view(np.int32), exp_f32.exp(x.numpy()).view(np.int32)))


def _exp(x):
    """exp; float32's and float64's as eager's CPU kernel rounds them (MKL VML's
    steps: ``lazy.exp_vml``, ``lazy.exp_sleef``'s float64) where eager's CPU kernel runs those."""
    if x.dtype == "f64" and x.device.platform == "cpu" and _eager_exp_f64_is_vml():
        return apply("exp_sleef", x)
    if x.dtype == "f32" and x.device.platform == "cpu" and _eager_exp_f32_is_vml():
        return apply("exp_vml", x)
    return _exp_op(x)


_exp_op = _op("exp")
_exp.lazy_op = _exp_op.lazy_op  # (complex operands: the exp row's)

# one lazy op, or a composite of the core (shared with lazycore.numpy)
ELEMENTWISE = {
    aten.neg: _op("neg"),
    aten.exp: _exp,
    aten.log: _op("log"),
    aten.log1p: _op("log1p"),
    aten.expm1: _op("expm1"),
    aten.tanh: _op("tanh"),
    aten.sigmoid: _op("logistic"),
    aten.sqrt: _op("sqrt"),
    aten.rsqrt: _op("rsqrt"),
    aten.erf: _op("erf"),
    aten.sin: _op("sin"),
    aten.cos: _op("cos"),
    aten.atan2: _op("atan2"),
    aten.reciprocal: composites.reciprocal,
    aten.exp2: composites.exp2,
    aten.log2: composites.log2,
    aten.log10: composites.log10,
    aten.tan: composites.tan,
    aten.atan: composites.atan,
    aten.asin: composites.asin,
    aten.acos: composites.acos,
    aten.sinh: composites.sinh,
    aten.cosh: composites.cosh,
    aten.asinh: composites.asinh,
    aten.acosh: composites.acosh,
    aten.atanh: composites.atanh,
    aten.hypot: composites.hypot,
}


def _elementwise(fn):
    def lower(ctx, *xs):
        return fn(*_args(ctx, *xs))

    lower.__name__ = f"lower_{fn.__name__}"
    return lower


# The composites written for real numbers that hold for complex ones too (checked
# against eager by the OpInfo sweep over complex64); the others decline complex
# operands, which run eager's kernel (a counted fallback).
_COMPLEX_SAFE = {composites.reciprocal, composites.exp2, composites.log2, composites.log10, composites.tan}


def _real_only(fn):
    def lower(*xs):
        if any(is_handle(x) and is_complex(x.dtype) for x in xs):
            return NotImplemented
        return fn(*xs)

    lower.__name__ = fn.__name__
    return lower


for _aten, _fn in list(ELEMENTWISE.items()):
    if not hasattr(_fn, "lazy_op") and _fn not in _COMPLEX_SAFE:
        ELEMENTWISE[_aten] = _real_only(_fn)

for _aten, _fn in ELEMENTWISE.items():
    # the prim of the same name too: torch._refs decompositions call prims directly
    _prim = getattr(prims, _aten.__name__, None)
    lowers(_aten.default, *([_prim.default] if _prim is not None else []))(_elementwise(_fn))


@lowers(aten.floor.default, aten.ceil.default, aten.round.default, aten.trunc.default, prims.round.default)
def _rounding(ctx, x):
    if not is_float(x.dtype):
        return x
    name = ctx.func_name
    if name == "trunc":
        return composites.trunc(x)
    return apply({"floor": "floor", "ceil": "ceil", "round": "round"}[name], x)


@lowers(aten.sign.default, aten.sgn.default, prims.sign.default)
def _sign(ctx, x):
    if x.dtype == "i1":
        return x
    if is_complex(x.dtype):  # sgn: z / |z| (sign refuses complex at the meta call)
        return composites.complex_sign(x)
    s = apply("sign", x)
    if not is_float(x.dtype):
        return s
    # eager computes (0 < x) - (x < 0): NaN gives 0 (the op keeps NaN, NumPy's)
    return apply("select", composites.isnan(x), _c(x, 0), s)


# Eager's ties. The lazy ``maximum``/``minimum`` order signed zeros as IEEE does (+0.0 above
# -0.0); eager's CPU kernels pick an operand instead, and keep NaN from either side.
# maximum/minimum (and clamp's tensor bounds) run AVX's max/min, which give the second
# operand on a tie; a row's last few elements, and rows of under 2 vectors, take a
# scalar loop that gives the first: maximum/minimum and clamp's tensor bounds pass where
# (eager_loops.scalar_tail); relu and clamp's number bounds keep x on a tie at every size
# (relu(-0.0) is -0.0).


def _tie_second(direction):
    """``a`` where it is strictly beyond ``b`` (``direction``) or NaN, else ``b``;
    where ``first_on_tie`` (True, or an ``i1`` mask: eager's scalar loop, see
    :mod:`.eager_loops`) ``b`` only where it is strictly beyond ``a`` or NaN."""

    def pick(a, b, first_on_tie=False):
        if not is_float(a.dtype):
            return apply("maximum" if direction == "GT" else "minimum", a, b)
        second = composites.beyond_or_nan(a, b, direction, nan_in=a)
        if first_on_tie is False or first_on_tie is None:
            return second
        first = composites.beyond_or_nan(b, a, direction, nan_in=b)
        return first if first_on_tie is True else apply("select", first_on_tie, first, second)

    return pick


_larger = _tie_second("GT")
_smaller = _tie_second("LT")


@lowers(aten.relu.default)
def _relu(ctx, x):
    if not is_float(x.dtype):
        return apply("maximum", x, _c(x, 0))
    # x < 0 is false for NaN and -0.0: both stay, as eager keeps x on a tie
    zero = _c(x, 0)
    return apply("select", apply("compare", x, zero, direction="LT"), zero, x)


# Functions only torch has (NumPy's ufuncs do not include them), written as the core's
# composites are: over handles, f16/bf16 computed in f32 and rounded once
# (composites.rounded_once).


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


# abs and angle of a complex number are real: the operand keeps its own type


@lowers(aten.abs.default, prims.abs.default)
def _abs(ctx, x):
    if is_handle(x) and is_complex(x.dtype):
        return convert(composites.complex_abs(x), ctx.dtype)  # (complex32's is float16, computed in float32)
    return _elementwise(_op("abs"))(ctx, x)


@lowers(aten.angle.default)
def _angle(ctx, x):
    if is_handle(x) and is_complex(x.dtype):
        return apply("atan2", apply("imag", x), apply("real", x))
    return _real_angle(ctx, x)


@lowers(aten.polar.default)
def _polar(ctx, r, theta):
    """``r * (cos(theta) + i sin(theta))``, as torch's decomposition computes it."""
    if ctx.margs[0].dtype is torch.float16:
        return NotImplemented  # eager's CPU kernel refuses half: its error, at the call
    r, theta = broadcast(r, ctx.shape), broadcast(theta, ctx.shape)
    return apply("complex", apply("mul", r, apply("cos", theta)), apply("mul", r, apply("sin", theta)))


@_elementwise
@composites.rounded_once
def _real_angle(x):
    # pi below 0, else 0; NaN stays
    r = apply("select", apply("compare", x, _c(x, 0), direction="LT"), _c(x, math.pi), _c(x, 0))
    return apply("select", apply("compare", x, x, direction="NE"), x, r)


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
@_elementwise
@composites.rounded_once
def _lgamma(x):
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
@_elementwise
@composites.rounded_once
def _digamma(x):
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


@_elementwise
@composites.rounded_once
def _trigamma(x):
    """Eager's ``trigamma`` (ATen/native/Math.h), in the operand's type: below
    1/2 the reflection ``-pi^2 / sin(pi x)^2`` and ``x = 1 - x`` (the sign
    flipped at the end), six steps ``+= 1 / x^2`` up the recurrence, then the
    asymptotic series. (torch.distributions' Gamma, Beta, Dirichlet and
    StudentT train through it: lgamma's second derivative.)"""
    f32 = x.dtype == "f32"
    one = torch.ones((), dtype=torch.float32 if f32 else torch.float64)  # the constants in the operand's type
    pi2 = ((one * math.pi) * (one * math.pi)).item()
    reflect = apply("compare", x, _c(x, 0.5), direction="LT")
    s = apply("sin", apply("mul", _c(x, math.pi), x))
    result = apply("select", reflect, apply("neg", apply("div", _c(x, pi2), apply("mul", s, s))), _c(x, 0))
    x = apply("select", reflect, apply("sub", _c(x, 1), x), x)
    for _ in range(6):
        result = apply("add", result, apply("div", _c(x, 1), apply("mul", x, x)))
        x = apply("add", x, _c(x, 1))
    ixx = apply("div", _c(x, 1), apply("mul", x, x))
    k6, k30, k42 = ((one / d).item() for d in (6, 30, 42))
    series = apply("mul", ixx, apply("sub", _c(x, k6), apply("mul", ixx, apply("sub", _c(x, k30),
                                                                                 apply("mul", ixx, _c(x, k42))))))
    head = apply("add", _c(x, 1), apply("div", _c(x, 1), apply("mul", _c(x, 2), x)))
    result = apply("add", result, apply("div", apply("add", head, series), x))
    return apply("select", reflect, apply("neg", result), result)


@lowers(aten.polygamma.default)
def _polygamma(ctx, n, x):
    if n == 0:
        return _digamma(ctx, x)
    return _trigamma(ctx, x) if n == 1 else NotImplemented  # n >= 2: eager's zeta series, left to it


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
def _erfinv(ctx, x):
    if ctx.dtype == "f64":
        return NotImplemented  # the polynomials are single-precision ones
    return _erfinv_single(*_args(ctx, x))


@composites.rounded_once
def _erfinv_single(x):
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
def _erfc(ctx, x):
    if ctx.dtype == "f64":
        return NotImplemented  # single-precision coefficients
    return _erfc_single(*_args(ctx, x))


@composites.rounded_once
def _erfc_single(x):
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
    if is_complex(x.dtype):  # either part NaN
        return apply("compare", x, x, direction="NE")
    return composites.isnan(x)


@lowers(aten.isinf.default)
def _isinf(ctx, x):
    return composites.isinf(x)


@lowers(aten.isfinite.default)
def _isfinite(ctx, x):
    return composites.isfinite(x)


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
    if _chalf(ctx):  # (eager: a + round(round(alpha) * b))
        alpha = chalf_rounded(scalar(check_chalf(alpha), ctx.dtype, ctx.device, ctx.shape))
        return chalf_rounded(apply("mul", b, alpha))
    return apply("mul", b, scalar(alpha, ctx.dtype, ctx.device, ctx.shape))


def _multiply_added(ctx, op, a, b, alpha):
    """``a op alpha * b`` with ``alpha != 1`` as eager's CPU add and sub
    kernels compute it in their vectorized loop, ``fmadd(b, alpha, a)``: in
    float32 for a float32 result, rounded once (XLA contracts a product and
    a sum into a fused multiply-add only where it picks to, and picks the
    other product when ``a`` is one too: ``x.mul(0.3).add_(y, alpha=0.6)``
    differed from eager in a third of its values, and a uint8 image blended
    so, torchvision's saturation, by one level); for a float16/bfloat16
    result with ``alpha`` rounded to the result's type, in float32 and
    rounded once (the product of two halves is exact in float32; rounding
    the product to the result's type first differed in a quarter of the
    values; eager's chunk tails round it so, 0.01% of a large tensor's); for
    a float64 result, float64's fused multiply-add (:func:`.nn.fused_multiply_add`).
    None for the other types: integers and complex round nothing so."""
    if alpha == 1 or _chalf(ctx) or ctx.dtype not in ("f64", "f32", "f16", "bf16"):
        return None
    a, b = _operands(ctx, a, b)
    if ctx.dtype in ("f32", "f64"):
        term = scalar(-alpha if op == "sub" else alpha, ctx.dtype, ctx.device, ctx.shape)
        return fused_multiply_add(b, term, a)
    rounded = convert(scalar(alpha, ctx.dtype, ctx.device, ctx.shape), "f32")
    return convert(apply(op, convert(a, "f32"), apply("mul", convert(b, "f32"), rounded)), ctx.dtype)


@lowers(aten.add.Tensor, aten.add.Scalar)
def _add(ctx, a, b, alpha=1):
    out = _multiply_added(ctx, "add", a, b, alpha)
    if out is not None:
        return out
    a, b = _operands(ctx, a, b)
    if ctx.dtype == "i1":  # booleans add as "or" (alpha is a bool then)
        return apply("or", a, b) if alpha else a
    return apply("add", a, _scaled(b, alpha, ctx))


@lowers(aten.sub.Tensor, aten.sub.Scalar)
def _sub(ctx, a, b, alpha=1):
    out = _multiply_added(ctx, "sub", a, b, alpha)
    if out is not None:
        return out
    a, b = _operands(ctx, a, b)
    return apply("sub", a, _scaled(b, alpha, ctx))


def _in_opmath(ctx, op, a, b):
    """``a op b`` as eager's CPU mul and true-division kernels compute a
    float16/bfloat16 result whose second operand is a scalar (a Python number,
    or a 0-dim tensor): in float32 with that scalar's original value
    (TensorIterator's ``original_scalar_value<opmath_t>``), not rounded to the
    result's type first (``x * 0.999`` in float16 differs in 3% of values),
    and rounded once at the end. The number stays a float32
    parameter, so a new value compiles nothing. None where eager's kernel
    computes in the result's type (a first-operand scalar rounds; add and sub
    round theirs too)."""
    if ctx.dtype not in _REDUCED_FLOATS:
        return None
    if is_handle(b):
        if b.shape != ():
            return None
        # (one of the result's type too: XLA divides by a broadcast scalar as a
        # product with its reciprocal, far coarser in float16 than in float32)
        b = broadcast(convert(b, "f32"), ctx.shape)
    elif isinstance(b, (int, float)) and not isinstance(b, bool):
        b = scalar(b, "f32", ctx.device, ctx.shape)
    else:
        return None
    (a,) = _args(ctx, a)
    return convert(apply(op, convert(a, "f32"), b), ctx.dtype)


_REDUCED_FLOATS = frozenset({"f16", "bf16"})


@lowers(aten.mul.Tensor, aten.mul.Scalar, prims.mul.default)
def _mul(ctx, a, b):
    out = _in_opmath(ctx, "mul", a, b)
    if out is not None:
        return out
    a, b = _operands(ctx, a, b)
    return apply("and" if ctx.dtype == "i1" else "mul", a, b)


def _integer_division(ctx, fn, a, b):
    """``fn`` of the operands; for integers, eager's error for a zero divisor:
    a Python 0 raises here, a zero in a tensor fails the result at its barrier
    (its values decide; lazycore.runtime.checks). The values would be the
    dialect's 0."""
    if is_float(ctx.dtype) or is_complex(ctx.dtype):
        return fn(*_args(ctx, a, b))
    a, b = wrapped(a, ctx.dtype), wrapped(b, ctx.dtype)
    if not is_handle(b):
        if b == 0:
            raise RuntimeError("ZeroDivisionError")
        return fn(*_args(ctx, a, b))
    a, b = _args(ctx, a, b)
    return core.check(fn(a, b), apply("compare", b, _c(b, 0), direction="EQ"), "ZeroDivisionError")


def _truncating(a, b):
    return composites.trunc(apply("div", a, b))  # integers divide truncating already


_ROUNDING = {None: lambda a, b: apply("div", a, b), "floor": composites.floor_divide, "trunc": _truncating}


@lowers(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div(ctx, a, b, rounding_mode=None):
    out = _in_opmath(ctx, "div", a, b) if rounding_mode is None else None
    if out is not None:
        return out
    return _integer_division(ctx, _ROUNDING[rounding_mode], a, b)


@lowers(prims.div.default)
def _prims_div(ctx, a, b):
    # true division for floats, truncation for integers: the dialect's div either way
    out = _in_opmath(ctx, "div", a, b)
    if out is not None:
        return out
    return _integer_division(ctx, _ROUNDING[None], a, b)


@lowers(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor)
def _remainder(ctx, a, b):
    return _integer_division(ctx, composites.remainder, a, b)


@lowers(aten.fmod.Tensor, aten.fmod.Scalar)
def _fmod(ctx, a, b):
    return _integer_division(ctx, lambda a, b: apply("rem", a, b), a, b)


def _square(x):
    return apply("mul", x, x)


_POWERS = {
    0.5: lambda x: apply("sqrt", x),
    -0.5: lambda x: apply("rsqrt", x),
    -1.0: composites.reciprocal,
    2.0: _square,
    3.0: lambda x: apply("mul", _square(x), x),
    -2.0: lambda x: composites.reciprocal(_square(x)),
}
"""The exponents eager's CPU kernel (``pow_tensor_scalar_kernel``) computes
without ``pow``, for float, double, bfloat16 and complex tensors, each as
that kernel writes it (``x * x * x`` is ``(x * x) * x``): their bits, where
``pow`` rounds once and gives ``sqrt``'s ``-0`` and ``-inf`` other values;
and XLA's CPU ``pow`` of a program parameter is a general power function,
a third of GELU's time in a transformers decoding step."""


@lowers(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar)
def _pow(ctx, a, b):
    a = wrapped(a, ctx.dtype)  # a Python base wraps (300 ** int8 is 44 ** int8); the exponent must fit
    if type(b) is int and b < 0 and not (is_float(ctx.dtype) or is_complex(ctx.dtype)):
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if isinstance(b, (int, float)) and not isinstance(b, bool) and is_handle(a):
        # (float16's kernel calls pow for every exponent; squaring rounds as pow does there)
        special = _POWERS.get(float(b)) if ctx.dtype in ("f32", "f64", "bf16") or is_complex(ctx.dtype) else None
        if special is None and b == 2:
            special = _square
        if special is not None:
            (a,) = _args(ctx, a)
            return special(a)
    a, b = _args(ctx, a, b)
    return apply("pow", a, b)


def _fextreme(direction):
    """fmax/fmin as eager's scalar kernel (std::fmax): NaN only where both are, ``a`` on a tie."""

    def pick(a, b):
        if not is_float(a.dtype):
            return apply("maximum" if direction == "GT" else "minimum", a, b)
        return composites.beyond_or_nan(b, a, direction, nan_in=a)

    return pick


_MAX_MIN = {"maximum": _larger, "minimum": _smaller, "fmax": _fextreme("GT"), "fmin": _fextreme("LT")}


@lowers(aten.maximum.default, aten.minimum.default, aten.fmax.default, aten.fmin.default)
def _max_min(ctx, a, b):
    pick = _MAX_MIN[ctx.func_name]
    if pick in (_larger, _smaller) and is_float(ctx.dtype) and not is_complex(ctx.dtype):
        # a signed-zero tie: the operand eager's loop gives at each position
        tail = eager_loops.scalar_tail(ctx.shape, ctx.out.dtype, ctx.margs[:2], ctx.device)
        return pick(*_args(ctx, a, b), first_on_tie=tail)
    return pick(*_args(ctx, a, b))


_BITWISE = {"bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor",
            "__and__": "and", "__or__": "or", "__xor__": "xor",
            "bitwise_left_shift": "shift_left", "__lshift__": "shift_left",
            "bitwise_right_shift": "shift_right", "__rshift__": "shift_right"}


@lowers(aten.bitwise_and.Tensor, aten.bitwise_and.Scalar, aten.bitwise_or.Tensor, aten.bitwise_or.Scalar,
        aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar, aten.__and__.Tensor, aten.__or__.Tensor,
        aten.__xor__.Tensor, aten.bitwise_left_shift.Tensor, aten.bitwise_left_shift.Tensor_Scalar,
        aten.bitwise_left_shift.Scalar_Tensor, aten.__lshift__.Tensor, aten.__lshift__.Scalar,
        aten.bitwise_right_shift.Tensor, aten.bitwise_right_shift.Tensor_Scalar,
        aten.bitwise_right_shift.Scalar_Tensor, aten.__rshift__.Tensor, aten.__rshift__.Scalar)
def _bitwise(ctx, a, b):
    a, b = _operands(ctx, a, b)
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
    common = torch.result_type(ctx.margs[0], ctx.margs[1])
    if common is torch.complex32:  # compared as chalf values
        common = lazy_dtype(common)
        a, b = (_chalf_operand(x, common, ctx.shape, ctx.device) for x in (a, b))
        return apply("compare", a, b, direction=_DIRECTIONS[ctx.func_name])
    common = lazy_dtype(common)
    a = operand(wrapped(a, common), common, ctx.shape, ctx.device)
    b = operand(wrapped(b, common), common, ctx.shape, ctx.device)
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
    tail = False
    if is_float(ctx.dtype) and not is_complex(ctx.dtype) and (is_handle(min) or is_handle(max)):
        # tensor bounds: where eager's scalar loop runs (std::min(std::max(x, min), max)) x wins a tie
        tensors = [ctx.margs[0]] + [m for b, m in zip((min, max), ctx.margs[1:3]) if is_handle(b)]
        tail = eager_loops.scalar_tail(ctx.shape, ctx.out.dtype, tensors, ctx.device)
    for bound, pick in ((min, _larger), (max, _smaller)):
        if bound is None:
            continue
        # a number bound is a parameter even at 0 or 1, which fold nothing here: a clip that starts at
        # 1.0 and grows (timm's ADOPT: (step - 1) ** 0.25) is one program, not one more at its second value
        number = isinstance(bound, (bool, int, float, complex))
        b = scalar(bound, ctx.dtype, ctx.device, ctx.shape, fold=False) if number else \
            operand(bound, ctx.dtype, ctx.shape, ctx.device)
        # a tensor bound wins a tie (eager's vector loop), a number bound leaves x (see _larger)
        x = pick(x, b, first_on_tie=tail) if is_handle(bound) else pick(b, x)
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
