"""Composite functions: math both frontends need, written once over the core API.

The dialect has the primitive ops (``exp``, ``log1p``, ``atan2``, ...); these
are the functions built from them that torch and NumPy both offer (``tan``,
``asin``, ``hypot``, floor division, ...). ``lazycore.torch`` lowers its ATen
ops to them and ``lazycore.numpy`` its ufunc loops, so a formula and the
reasoning behind it live here once.

Each function takes handles of the result's element type and shape (the
frontend has already promoted and broadcast them) and returns a handle of
the same type. The numbers a formula needs are constants baked into the
program (:func:`full_like`), never scalar parameters: they are part of the
formula, not data. Results follow eager (torch's CPU kernels, NumPy's loops),
including infinities, NaN and signed zeros at the edges of the domains.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from lazycore.dialect.types import is_complex, is_float, to_numpy_dtype
from lazycore.trace.core import apply, broadcast_to, convert_to

# --- constants ---------------------------------------------------------------------------


def constant(value, dtype: str, device, shape=()):
    """``value`` (a number, or an array of numbers) of element type ``dtype`` baked
    into the program, broadcast to ``shape`` (``()``: as it is)."""
    c = apply("constant", value=np.asarray(value, dtype=to_numpy_dtype(dtype)), device=device)
    return broadcast_to(c, shape) if tuple(shape) != () else c


def conj(x):
    """The complex conjugate (a real ``x`` is its own)."""
    if not x.dtype.startswith("complex"):
        return x
    return apply("complex", apply("real", x), apply("neg", apply("imag", x)))


def complex_abs(x):
    """|z| as C's ``hypot`` (NumPy's and torch's eager kernels): infinite where either
    part is, even with a NaN in the other."""
    m = apply("abs", x)
    return apply("select", isinf(x), full_like(m, math.inf), m)


def complex_sign(x):
    """z / |z|, and 0 for 0 (torch's ``sgn``, NumPy 2's ``sign``)."""
    m = apply("abs", x)
    zero = apply("compare", m, full_like(m, 0), direction="EQ")
    return apply("select", zero, full_like(x, 0), apply("div", x, apply("complex", m, full_like(m, 0))))


def full_like(x, value):
    """``value`` baked into the program with ``x``'s element type, shape and device."""
    return constant(value, x.dtype, x.device, x.shape)


def _below(x, value):
    return apply("compare", x, full_like(x, value), direction="LT")


# --- rounding once ---------------------------------------------------------------------

_HALF = ("f16", "bf16")


def rounded_once(fn):
    """Half-precision operands compute in f32 and the result is rounded once.

    Eager does the same (torch's CPU kernels and NumPy's ``e`` loops convert
    f16/bf16 to float, call the float function, round the result), and the
    formulas' intermediates (``x^2``, ``e^x``, ``1 - x`` next to ``1 + x``)
    would overflow a half or lose the digits that matter.
    """

    @functools.wraps(fn)
    def composite(x, *more):
        dtype = x.dtype
        if dtype not in _HALF:
            return fn(x, *more)
        r = fn(convert_to(x, "f32"), *(convert_to(m, "f32") for m in more))
        return convert_to(r, dtype)

    return composite


# --- exponentials, logarithms, trigonometry ----------------------------------------------


def reciprocal(x):
    """``1 / x``: integers divide too (NumPy's integer loop truncates, as C does)."""
    return apply("div", full_like(x, 1), x)


@rounded_once
def exp2(x):
    """``2^x`` as ``pow(2, x)``: exact at whole x and within an ulp or two elsewhere,
    where ``e^(x ln 2)`` inherits the rounding of ``x ln 2`` (hundreds of ulps at large |x|)."""
    return apply("pow", full_like(x, 2), x)


@rounded_once
def log2(x):
    """``log2 x = ln x / ln 2``: ``ln`` keeps its relative accuracy down to 0 and
    its infinities and NaN; one division adds one rounding."""
    return _over_real(apply("log", x), math.log(2.0))


@rounded_once
def log10(x):
    """``log10 x = ln x / ln 10``, as :func:`log2`."""
    return _over_real(apply("log", x), math.log(10.0))


def _over_real(x, c: float):
    """``x / c``; a complex ``x`` part by part: a complex division by ``c + 0j`` makes
    NaN of an infinite part (its ``inf * 0``), where ``log10(-inf)`` is ``inf + 1.36j``."""
    if not is_complex(x.dtype):
        return apply("div", x, full_like(x, c))
    re, im = apply("real", x), apply("imag", x)
    return apply("complex", apply("div", re, full_like(re, c)), apply("div", im, full_like(im, c)))


@rounded_once
def tan(x):
    """``tan x = sin x / cos x``: both keep -0.0 and give NaN at the infinities."""
    return apply("div", apply("sin", x), apply("cos", x))


def atan(x):
    """``atan x = atan2(x, 1)``: exact, +-pi/2 at the infinities."""
    return apply("atan2", x, full_like(x, 1))


# Inverse trigonometric and hyperbolic functions, from ops the dialect has, in the
# forms XLA's own expansions (chlo) use where they hold up for real numbers: products
# like (1 - x)(1 + x) and log1p/expm1 keep the digits near 0 and 1 that the textbook
# formulas lose. Where a form departs from chlo's, its docstring says why (measured
# against NumPy in tests/test_composites.py).


def _one_minus_square(x):
    """``1 - x^2`` as ``(1 - x)(1 + x)``: exact factors near |x| = 1, where the square would round."""
    one = full_like(x, 1)
    return apply("mul", apply("sub", one, x), apply("add", one, x))


@rounded_once
def asin(x):
    """``asin x = atan2(x, sqrt(1 - x^2))``: NaN beyond [-1, 1] (the root's), x itself
    where x is tiny (a half-angle form would halve it into the subnormals, which XLA
    flushes)."""
    return apply("atan2", x, apply("sqrt", _one_minus_square(x)))


@rounded_once
def acos(x):
    """``acos x = atan2(sqrt(1 - x^2), x)``: pi at x = -1, +0 at 1, NaN beyond."""
    return apply("atan2", apply("sqrt", _one_minus_square(x)), x)


def _with_sign_of(x, r):
    """``r`` (computed from |x|) with x's sign, for odd functions with f(0) = 0:
    ``sign`` keeps NaN but makes -0.0 +0.0 (eager's and NumPy's sign), so a zero
    gives x itself."""
    return apply("select", apply("compare", x, full_like(x, 0), direction="EQ"), x, apply("mul", apply("sign", x), r))


@rounded_once
def sinh(x):
    """From |x|, then x's sign. Below 1: ``(e + e / (e + 1)) / 2`` with ``e = expm1 |x|``,
    exact near 0 where ``e^x - e^-x`` cancels. Above: ``e^|x| / 2 - e^-|x| / 2``, and
    where e^|x| overflows though sinh does not, ``(h / 2) h`` with ``h = e^(|x| / 2)``
    (|x| / 2 is exact: an exponent shifted by ``x - ln 2`` would carry the rounding of
    that sum, hundreds of ulps at large |x|)."""
    a = apply("abs", x)
    e = apply("expm1", a)
    small = apply("mul", full_like(x, 0.5), apply("add", e, apply("div", e, apply("add", e, full_like(x, 1)))))
    return _with_sign_of(x, apply("select", _below(a, 1), small, _exp_halves(a, "sub")))


@rounded_once
def cosh(x):
    """``e^|x| / 2 + e^-|x| / 2``; ``(h / 2) h`` with ``h = e^(|x| / 2)`` where e^|x|
    overflows though cosh does not (as :func:`sinh`)."""
    return _exp_halves(apply("abs", x), "add")


def _exp_halves(a, op):
    """``e^a / 2 (op) e^-a / 2`` for a >= 0, finite as long as the result is."""
    half = full_like(a, 0.5)
    e = apply("exp", a)
    r = apply(op, apply("mul", half, e), apply("div", half, e))
    h = apply("exp", apply("mul", a, half))
    huge = apply("mul", apply("mul", half, h), h)  # e^-a / 2 is far below an ulp of it
    return apply("select", apply("compare", e, full_like(a, math.inf), direction="EQ"), huge, r)


def _huge(x):
    """Where ``x^2`` overflows: the formulas switch to ``ln 2 + ln |x|`` (exact there)."""
    return apply("compare", x, full_like(x, 1e18 if x.dtype != "f64" else 1e150), direction="GT")


@rounded_once
def asinh(x):
    """``asinh |x| = log1p(|x| + x^2 / (1 + sqrt(1 + x^2)))``; ``ln 2 + ln |x|`` once x^2
    overflows; then x's sign."""
    a = apply("abs", x)
    sq = apply("mul", a, a)
    one = full_like(x, 1)
    near = apply("log1p", apply("add", a, apply("div", sq, apply("add", one, apply("sqrt", apply("add", one, sq))))))
    far = apply("add", apply("log", a), full_like(x, math.log(2.0)))
    return _with_sign_of(x, apply("select", _huge(a), far, near))


@rounded_once
def acosh(x):
    """``acosh x = log1p((x - 1) + sqrt((x - 1)(x + 1)))``; ``ln 2 + ln x`` once that
    product overflows."""
    xm1 = apply("sub", x, full_like(x, 1))
    near = apply("log1p", apply("add", xm1, apply("sqrt", apply("mul", xm1, apply("add", x, full_like(x, 1))))))
    far = apply("add", apply("log", x), full_like(x, math.log(2.0)))
    r = apply("select", _huge(x), far, near)
    # below 1 the product can be positive again (x very negative): NaN, as the domain says
    return apply("select", _below(x, 1), full_like(x, math.nan), r)


@rounded_once
def atanh(x):
    """``atanh |x| = log1p(2|x| / (1 - |x|)) / 2``, then x's sign: NaN beyond [-1, 1],
    +-inf at the ends. From |x| because log1p near -1 (x near -1 in the signed form)
    turns one rounding of its argument into hundreds of ulps."""
    a = apply("abs", x)
    r = apply("log1p", apply("div", apply("mul", full_like(x, 2), a), apply("sub", full_like(x, 1), a)))
    return _with_sign_of(x, apply("mul", full_like(x, 0.5), r))


@rounded_once
def hypot(a, b):
    """``|a + bi|``: the complex ``abs`` lowering's ``hypot`` (passes/lowering/complex_exact.py), so
    float32 rounds ``sqrt(a*a + b*b)`` computed in float64 once, as glibc's ``hypotf`` does (NumPy's
    and eager torch's float32 ``hypot``), and float64 is correctly rounded (eager torch's bits; NumPy's
    glibc ``hypot`` is off in about 0.6% of values, each time farther from the true value); float16
    and bfloat16 are float32's, rounded to the type (:func:`rounded_once`). An infinite side wins over
    a NaN one, as in C. (The quotient form ``max * sqrt(1 + (min/max)^2)`` this replaced was off an ulp
    in a third of them.)"""
    return apply("abs", apply("complex", a, b))


# --- rounding and division ------------------------------------------------------------


def trunc(x):
    """Toward zero: ceil below 0, floor otherwise (integers are already whole)."""
    if not is_float(x.dtype):
        return x
    return apply("select", _below(x, 0), apply("ceil", x), apply("floor", x))


def _sign_differs(r, b):
    """Where a remainder is nonzero with a sign other than the divisor's: where the
    truncating ``rem`` and the flooring remainder part ways."""
    zero = full_like(r, 0)
    nonzero = apply("compare", r, zero, direction="NE")
    differ = apply("xor", apply("compare", r, zero, direction="LT"), _below(b, 0))
    return apply("and", nonzero, differ)


def remainder(a, b, *, zero_sign="dividend"):
    """The remainder with the divisor's sign (Python's ``%``): ``rem`` truncates, so
    add ``b`` once where the signs differ. A zero remainder of floats keeps the
    dividend's sign, as fmod's does (torch), or takes the divisor's
    (``zero_sign="divisor"``: NumPy, as Python)."""
    if zero_sign not in ("dividend", "divisor"):
        raise ValueError(f"zero_sign must be 'dividend' or 'divisor', not {zero_sign!r}")
    r = apply("rem", a, b)
    r = apply("select", _sign_differs(r, b), apply("add", r, b), r)
    if zero_sign == "dividend" or not is_float(r.dtype):
        return r
    signed = apply("select", _below(b, 0), full_like(r, -0.0), full_like(r, 0.0))
    return apply("select", apply("compare", r, full_like(r, 0), direction="EQ"), signed, r)


def floor_divide(a, b):
    """``floor(a / b)``, as torch's ``div(rounding_mode="floor")`` and NumPy's ``//``."""
    if not is_float(a.dtype):
        # the truncated quotient, one less where the remainder's sign differs from b's
        q = apply("div", a, b)
        r = apply("rem", a, b)
        return apply("select", _sign_differs(r, b), apply("sub", q, full_like(q, 1)), q)
    # as eager's divmod: from fmod, so exact quotients stay exact, then rounded to the
    # nearest whole number (the division may land a hair beside it)
    quotient = apply("div", a, b)
    r = apply("rem", a, b)
    q = apply("div", apply("sub", a, r), b)
    q = apply("select", _sign_differs(r, b), apply("sub", q, full_like(q, 1)), q)
    fl = apply("floor", q)
    up = apply("compare", apply("sub", q, fl), full_like(q, 0.5), direction="GT")
    fl = apply("select", up, apply("add", fl, full_like(fl, 1)), fl)
    # a zero has the sign of a / b (a - r lost it); a / b is finite there (|a| < |b|)
    zero = apply("compare", q, full_like(q, 0), direction="EQ")
    fl = apply("select", zero, apply("mul", full_like(q, 0), quotient), fl)
    # division by zero: the plain quotient's inf or NaN
    return apply("select", apply("compare", b, full_like(b, 0), direction="EQ"), quotient, fl)



# --- NaN-aware selection -----------------------------------------------------------------


def _ignoring_nan(op):
    def pick(a, b):
        out = apply(op, a, b)
        if is_float(a.dtype):
            # a NaN loses to a number; two NaNs stay NaN
            out = apply("select", isnan(a), b, out)
            out = apply("select", isnan(b), a, out)
        return out

    pick.__name__ = f"f{op[:3]}"
    pick.__doc__ = f"``{op}`` that ignores a NaN when the other operand is a number (C's ``f{op[:3]}``)."
    return pick


fmax = _ignoring_nan("maximum")
fmin = _ignoring_nan("minimum")


def beyond_or_nan(first, second, direction: str, nan_in):
    """``first`` where it is strictly beyond ``second`` (``direction``: ``"GT"``
    or ``"LT"``) or where ``nan_in`` (one of the two) is NaN, else ``second``.

    Eager's float maximum/minimum and fmax/fmin, in torch's CPU kernels and in
    NumPy's loops, each pick an operand rather than order signed zeros as
    IEEE does (the lazy ``maximum`` puts +0.0 above -0.0): which operand they
    give on a tie is the order of ``first`` and ``second``, and whether a NaN
    wins (from either side) or loses to a number is which one ``nan_in`` is."""
    beyond = apply("compare", first, second, direction=direction)
    return apply("select", apply("or", beyond, isnan(nan_in)), first, second)


# --- classification ---------------------------------------------------------------------


def isnan(x):
    """``x != x`` (a complex number: either part NaN); integers are never NaN."""
    if is_complex(x.dtype):
        return apply("or", isnan(apply("real", x)), isnan(apply("imag", x)))
    if not is_float(x.dtype):
        return constant(False, "i1", x.device, x.shape)
    return apply("compare", x, x, direction="NE")


def isinf(x):
    """Either part of a complex number infinite (C99's, NumPy's and torch's)."""
    if is_complex(x.dtype):
        return apply("or", isinf(apply("real", x)), isinf(apply("imag", x)))
    if not is_float(x.dtype):
        return constant(False, "i1", x.device, x.shape)
    return apply("compare", apply("abs", x), full_like(x, math.inf), direction="EQ")


def isfinite(x):
    """Both parts of a complex number finite."""
    if is_complex(x.dtype):
        return apply("and", isfinite(apply("real", x)), isfinite(apply("imag", x)))
    if not is_float(x.dtype):
        return constant(True, "i1", x.device, x.shape)
    return apply("is_finite", x)
