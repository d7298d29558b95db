"""Universal functions: NumPy's type resolution and broadcasting, lazy loops.

A lazy ufunc asks NumPy's own ufunc which loop it would run for these operand
dtypes (``ufunc.resolve_dtypes``, with Python scalars as weak scalars: NumPy 2
promotion), broadcasts the operands, converts them to the loop's input types
and applies the loop's lowering, one entry of :data:`LOOPS`. Adding a ufunc
is one entry there.

Steady state: a call whose signature (:func:`_signature`: the ufunc, the
arrays' shapes, dtypes and devices, the Python scalars' types and values,
``dtype=``, ``casting=``) was seen before replays a recording of the lowering
(:mod:`lazycore.recipes`) instead of resolving, converting and broadcasting
again; the same nodes, digests and results, for a fraction of the Python. A
recording that only made its Python floats scalar parameters serves every
value of their class (a time step that changes every iteration).
"""

from __future__ import annotations

import inspect
import math
import sys

import numpy as np

from lazycore.dialect.types import is_complex
from lazycore.ir.context import TRACE
from lazycore.ir.memo import Memo
from lazycore.trace import composites, core, recipes
from lazycore.ir.config import settings

from . import complex_loops, dtypes, fpe, minmax_loops, scipy_loops
from .array import asarray, contiguous, from_host, laid_out, ndarray, new_array, value, wrap, write
from .fallback import call_numpy
from .scalars import as_scalar, scalar

apply = core.apply


# --- operands ---------------------------------------------------------------------


def describe(x):
    """What ``resolve_dtypes`` needs: a dtype, or the Python type of a weak scalar."""
    if isinstance(x, ndarray):
        return x.dtype
    if isinstance(x, (bool, np.bool_)):
        return np.dtype(bool)
    if type(x) in (int, float, complex):
        return type(x)
    return np.asarray(x).dtype


def shape_of(x):
    if isinstance(x, ndarray):
        return x.shape
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return ()
    return np.shape(x)


def to_handle(x, dtype, device=None):
    """Any array-like as a lazycore handle of ``dtype`` (NumPy dtype); host
    data and Python numbers go to ``device`` (the lazy operands' device: a
    mesh's, for sharded arrays; default: where lazy arrays live)."""
    lt = dtypes.lazy_dtype(dtype)
    if isinstance(x, ndarray):
        return cast(value(x), dtype)
    if isinstance(x, (bool, int, float, np.generic)) or np.ndim(x) == 0:
        v = np.asarray(x).item() if not isinstance(x, (bool, int, float)) else x
        if lt == "i1":
            v = bool(v)
        elif lt.startswith(("i", "u")):
            v = int(v)
        elif lt.startswith("complex"):
            v = complex(v)
        elif not isinstance(v, float):  # a recorded float argument stays one (lazycore.recipes)
            v = float(v)
        return core.scalar(v, lt, device=device)
    return cast(value(from_host(np.asarray(x), device)), dtype)


def device_of(*xs):
    """The device of the first lazy array among ``xs`` (None: there is none)."""
    for x in xs:
        if isinstance(x, ndarray):
            return x._storage.handle.device
    return None


def asarray_like(x) -> ndarray:
    """A lazy array for any array-like argument (uploading host data)."""
    if isinstance(x, ndarray):
        return x
    return asarray(x)


def cast(h, dtype):
    """``h`` with NumPy dtype ``dtype`` (to bool: nonzero is True)."""
    return core.convert_to(h, dtypes.lazy_dtype(dtype))


broadcast_to_shape = core.broadcast_to


def const(v, h):
    """A constant like ``h`` (same dtype, shape and device)."""
    return composites.full_like(h, v)


# --- loops: one lowering per ufunc, on operands already of the loop's types ------------


def _is_bool(h):
    return h.dtype == "i1"


def _is_float(h):
    return h.dtype in ("f16", "bf16", "f32", "f64")


def _add(a, b):
    return apply("or" if _is_bool(a) else "add", a, b)


def _multiply(a, b):
    dtype = a.dtype
    if dtype in complex_loops.DTYPES:  # NumPy's roundings, not lazy.mul's (eager torch's)
        return complex_loops.multiply(a, b)
    return apply("and" if dtype == "i1" else "mul", a, b)


def _divide(a, b):
    if a.dtype in complex_loops.DTYPES:
        return complex_loops.divide(a, b)
    return apply("div", a, b)


_NEGATIVE_POWER = "Integers to negative integer powers are not allowed."


def _cmul(a, b):
    """The schoolbook complex product (NumPy's cmul): ``(ac - bd) + (ad + bc)i``."""
    (ar, ai), (br, bi) = _parts(a), _parts(b)
    return apply("complex", apply("sub", apply("mul", ar, br), apply("mul", ai, bi)),
                 apply("add", apply("mul", ar, bi), apply("mul", ai, br)))


def _one_over(z):
    """NumPy's cdiv(1, z) (Smith's division; 0 gives ``inf + NaN i``)."""
    br, bi = _parts(z)
    full = composites.full_like
    one, zero = full(br, 1), full(br, 0)
    abr, abi = apply("abs", br), apply("abs", bi)
    rat = apply("div", bi, br)  # |br| >= |bi|
    scl = apply("div", one, apply("add", br, apply("mul", bi, rat)))
    first = (  # ((1 + 0 rat) scl, (0 - 1 rat) scl), as cdiv writes it for 1 + 0i
        apply("mul", apply("add", one, apply("mul", zero, rat)), scl),
        apply("mul", apply("sub", zero, apply("mul", one, rat)), scl))
    rat2 = apply("div", br, bi)
    scl2 = apply("div", one, apply("add", bi, apply("mul", br, rat2)))
    second = (apply("mul", apply("add", apply("mul", one, rat2), zero), scl2),
              apply("mul", apply("sub", apply("mul", zero, rat2), one), scl2))
    both_zero = apply("and", apply("compare", abr, zero, direction="EQ"), apply("compare", abi, zero, direction="EQ"))
    at_zero = (apply("div", one, abr), apply("div", zero, abi))
    wide = apply("compare", abr, abi, direction="GE")
    re = apply("select", wide, apply("select", both_zero, at_zero[0], first[0]), second[0])
    im = apply("select", wide, apply("select", both_zero, at_zero[1], first[1]), second[1])
    return apply("complex", re, im)


def _cpow(a, b):
    """NumPy's npy_cpow: ``1`` for a zero exponent; a zero base gives ``0`` (exponent's real
    part positive) or NaN; an integer exponent below 100 in size multiplies (``a``, ``a a``,
    ``a (a a)`` for 1, 2, 3; else binary powering from 1, and ``1 / r`` for a negative
    one); any other, ``exp(b log a)`` (XLA's pow)."""
    full = composites.full_like
    ar, ai = _parts(a)
    br, bi = _parts(b)
    zero = full(br, 0)
    general = apply("pow", a, b)
    aa = apply("complex", full(ar, 1), full(ar, 0))
    p = a
    n = apply("abs", br)
    for bit in range(7):  # |n| < 100 < 2^7
        on = apply("compare", apply("rem", apply("floor", apply("div", n, full(n, 2.0 ** bit))), full(n, 2)),
                   full(n, 1), direction="EQ")
        aa = apply("select", on, _cmul(aa, p), aa)
        p = _cmul(p, p)
    aa = apply("select", apply("compare", br, zero, direction="LT"), _one_over(aa), aa)
    sq = _cmul(a, a)
    for k, v in ((1, a), (2, sq), (3, _cmul(a, sq))):
        aa = apply("select", apply("compare", br, full(br, k), direction="EQ"), v, aa)
    integer = apply("and", apply("compare", bi, zero, direction="EQ"),
                    apply("and", apply("compare", apply("floor", br), br, direction="EQ"),
                          apply("compare", n, full(n, 100), direction="LT")))
    r = apply("select", integer, aa, general)
    base_zero = apply("and", apply("compare", ar, zero, direction="EQ"), apply("compare", ai, zero, direction="EQ"))
    at_zero = apply("select", apply("compare", br, zero, direction="GT"), apply("complex", zero, zero),
                    apply("complex", full(br, float("nan")), full(br, float("nan"))))
    r = apply("select", base_zero, at_zero, r)
    exp_zero = apply("and", apply("compare", br, zero, direction="EQ"), apply("compare", bi, zero, direction="EQ"))
    return apply("select", exp_zero, apply("complex", full(br, 1), zero), r)


def _power(a, b):
    if is_complex(a.dtype):
        return _cpow(a, b)
    p = apply("pow", a, b)
    if a.dtype[0] != "i":  # floats; unsigned exponents are never negative
        return p
    # NumPy raises ValueError for a negative integer exponent: a Python one at the
    # call (:func:`call`), one in an array when its values are known
    return core.check(p, apply("compare", b, const(0, b), direction="LT"), _NEGATIVE_POWER, error="ValueError")


def _log1p(a):
    """NumPy's complex log1p at infinities and NaN is C99's clog's, +inf + NaN j
    (torch's, and so the shared lowering's, is NaN + NaN j). A real one is the op
    (its float64 lowering corrects XLA's log1p near -1: passes/lowering/elementwise.py ``_log1p_f64``)."""
    r = apply("log1p", a)
    if not is_complex(a.dtype):
        return r
    x, y = apply("real", a), apply("imag", a)
    lanes = apply("or", apply("and", composites.isinf(x), composites.isnan(y)),
                  apply("and", composites.isnan(x), composites.isinf(y)))
    special = apply("complex", composites.full_like(x, float("inf")), composites.full_like(x, float("nan")))
    return apply("select", lanes, special, r)


def _unary(name):
    return lambda a: apply(name, a)


# --- complex sinh, cosh, sin, cos, expm1: C99's (glibc's, which NumPy calls) from real parts ---


def _parts(z):
    return apply("real", z), apply("imag", z)


def _csinh_parts(x, y):
    """C99 Annex G's csinh of ``x + iy`` as (real, imaginary) handles: ``sinh x cos y +
    i cosh x sin y``; ``sinh x + iy`` at y = 0 (the infinities and NaN too); where y is
    infinite or NaN: ``x + i NaN`` at x = 0, ``inf + i NaN`` at infinite x, else NaN."""
    full = composites.full_like
    nan = full(x, float("nan"))
    re = apply("mul", composites.sinh(x), apply("cos", y))
    im = apply("mul", composites.cosh(x), apply("sin", y))
    y_zero = apply("compare", y, full(y, 0), direction="EQ")
    y_bad = apply("not", composites.isfinite(y))
    x_zero = apply("compare", x, full(x, 0), direction="EQ")
    x_inf = composites.isinf(x)
    bad_re = apply("select", x_zero, x, apply("select", x_inf, full(x, float("inf")), nan))
    re = apply("select", y_zero, composites.sinh(x), apply("select", y_bad, bad_re, re))
    im = apply("select", y_zero, y, apply("select", y_bad, nan, im))
    return re, im


def _ccosh_parts(x, y):
    """C99 Annex G's ccosh: ``cosh x cos y + i sinh x sin y``; ``cosh x + i (x y)`` at
    y = 0 (the sign of ``x y`` at infinite x, y itself at NaN); where y is infinite
    or NaN: ``NaN + 0i`` at x = 0, ``inf + i NaN`` at infinite x, else NaN."""
    full = composites.full_like
    nan = full(x, float("nan"))
    re = apply("mul", composites.cosh(x), apply("cos", y))
    im = apply("mul", composites.sinh(x), apply("sin", y))
    y_zero = apply("compare", y, full(y, 0), direction="EQ")
    y_bad = apply("not", composites.isfinite(y))
    x_zero = apply("compare", x, full(x, 0), direction="EQ")
    x_inf = composites.isinf(x)
    zero_im = apply("select", composites.isnan(x), y, apply("mul", _copysign(full(x, 0), x), y))
    re = apply("select", y_zero, composites.cosh(x), apply("select", y_bad, apply(
        "select", x_inf, full(x, float("inf")), nan), re))
    im = apply("select", y_zero, zero_im, apply("select", y_bad, apply("select", x_zero, full(x, 0), nan), im))
    return re, im


def _complex_only(real_loop, complex_loop):
    return lambda a: complex_loop(a) if is_complex(a.dtype) else real_loop(a)


def _csinh(z):
    return apply("complex", *_csinh_parts(*_parts(z)))


def _ccosh(z):
    return apply("complex", *_ccosh_parts(*_parts(z)))


def _csin(z):
    """``sin z = -i sinh(iz)``, C99's definition (``iz = -y + ix``); glibc's csin gives
    an infinite imaginary part beside an infinite or NaN real one ``NaN + inf i`` (the
    rotation: ``NaN - inf i``)."""
    x, y = _parts(z)
    re, im = _csinh_parts(apply("neg", y), x)
    both_inf = apply("and", apply("not", composites.isfinite(x)), composites.isinf(y))
    return apply("complex", im, apply("select", both_inf, apply("abs", re), apply("neg", re)))


def _ccos(z):
    """``cos z = cosh(iz)``."""
    x, y = _parts(z)
    return apply("complex", *_ccosh_parts(apply("neg", y), x))


def _cexpm1(z):
    """NumPy's nc_expm1: ``expm1 x cos y - 2 sin(y/2)^2 + i e^x sin y``."""
    x, y = _parts(z)
    a = apply("sin", apply("mul", y, composites.full_like(y, 0.5)))
    re = apply("sub", apply("mul", apply("expm1", x), apply("cos", y)),
               apply("mul", composites.full_like(a, 2), apply("mul", a, a)))
    return apply("complex", re, apply("mul", apply("exp", x), apply("sin", y)))


def _cmp(direction):
    def compare(a, b):
        if direction in ("EQ", "NE") or not a.dtype.startswith("complex"):
            return apply("compare", a, b, direction=direction)
        # NumPy orders complex numbers lexicographically: real parts, then imaginary ones
        (ra, ia), (rb, ib) = ((apply("real", h), apply("imag", h)) for h in (a, b))
        strict = "LT" if direction in ("LT", "LE") else "GT"
        first = apply("compare", ra, rb, direction=strict)
        tie = apply("and", apply("compare", ra, rb, direction="EQ"), apply("compare", ia, ib, direction=direction))
        return apply("or", first, tie)

    return compare


def _extreme(name, direction):
    def pick(a, b, first_on_tie=None):
        if _is_float(a):
            # NumPy's loops (SIMD max/min) give b on a tie, so maximum(-0.0, +0.0) is +0.0 and
            # maximum(+0.0, -0.0) is -0.0, where the lazy op orders signed zeros as IEEE does;
            # float16's loop gives a (first_on_tie, :func:`.minmax_loops.binary_tail`)
            second = composites.beyond_or_nan(a, b, _STRICT[direction], nan_in=a)
            if first_on_tie is None:
                return second
            first = composites.beyond_or_nan(b, a, _STRICT[direction], nan_in=b)
            first = apply("select", composites.isnan(a), a, first)  # (a NaN in a wins, as in the scalar loop)
            return first if first_on_tie is True else apply("select", first_on_tie, first, second)
        if not a.dtype.startswith("complex"):
            return apply(name, a, b)
        # NumPy's, for complex numbers: the lexicographic order, NaN (in either part) wins
        a_nan, b_nan = (apply("compare", h, h, direction="NE") for h in (a, b))
        a_wins = apply("or", a_nan, apply("and", apply("not", b_nan), _cmp(direction)(a, b)))
        return apply("select", a_wins, a, b)

    pick.first_on_tie = name
    return pick


_STRICT = {"GE": "GT", "LE": "LT"}


def _ignoring_nan(direction):
    """fmax/fmin: NaN only where both operands are; b on a tie, as NumPy's SIMD loop gives,
    a where ``first_on_tie`` (True or an i1 mask: where its scalar tail, C's fmax, keeps
    the first operand; :func:`.minmax_loops.binary_tail`)."""

    def pick(a, b, first_on_tie=None):
        if not _is_float(a):
            return apply("maximum" if direction == "GT" else "minimum", a, b)
        second = composites.beyond_or_nan(a, b, direction, nan_in=b)
        if first_on_tie is None:
            return second
        first = composites.beyond_or_nan(b, a, direction, nan_in=a)
        return first if first_on_tie is True else apply("select", first_on_tie, first, second)

    pick.first_on_tie = "fmax" if direction == "GT" else "fmin"
    return pick


def _sign(a):
    if not a.dtype.startswith("complex"):
        return apply("sign", a)
    # NumPy's nc_sign: z/|z| where |z| is finite and not 0; at an infinite |z| the
    # infinite part's sign alone (NaN where both parts are infinite), NaN at a NaN |z|
    re, im = apply("real", a), apply("imag", a)
    m = _abs(a)
    re_inf, im_inf = composites.isinf(re), composites.isinf(im)
    unit = lambda v: apply("select", composites.isinf(v), apply("sign", v), composites.full_like(v, 0))  # noqa: E731
    nan = composites.full_like(re, float("nan"))
    at_inf = apply("complex", apply("select", im_inf, apply("select", re_inf, nan, unit(re)), unit(re)),
                   apply("select", re_inf, apply("select", im_inf, nan, composites.full_like(im, 0)), unit(im)))
    # finite: each part over |z| (a complex division by |z| + 0j loses -0.0's sign)
    finite = apply("complex", apply("div", re, m), apply("div", im, m))
    zero = apply("compare", m, composites.full_like(m, 0), direction="EQ")
    finite = apply("select", zero, composites.full_like(a, 0), finite)
    return apply("select", composites.isinf(m), at_inf, finite)


def _abs(a):
    """``abs``; a complex one is C's ``hypot``: infinite where either part is, even with a NaN."""
    return composites.complex_abs(a) if a.dtype.startswith("complex") else apply("abs", a)


def _absolute(a):
    """The ``absolute`` loop: a complex64 or complex128 one is NumPy's SIMD loop's, not ``hypot``."""
    return complex_loops.absolute(a) if a.dtype in complex_loops.DTYPES else _abs(a)


def _logical(name):
    return lambda a, b: apply(name, cast(a, bool), cast(b, bool))


_SAME_WIDTH_INT = {"f16": "i16", "bf16": "i16", "f32": "i32", "f64": "i64"}


def _signbit(a):
    """The sign bit itself (-0.0 and NaNs with it set are negative): the bits as a signed integer."""
    bits = apply("bitcast_convert", a, dtype=_SAME_WIDTH_INT[a.dtype])
    return apply("compare", bits, const(0, bits), direction="LT")


def _copysign(a, b):
    magnitude = apply("abs", a)  # clears the sign bit, NaN's too
    return apply("select", _signbit(b), apply("neg", magnitude), magnitude)


def _heaviside(x, h0):
    """NumPy's ``npy_heaviside``: 0 below zero, ``h0`` at either zero, 1 above, NaN kept."""
    zero = const(0, x)
    r = apply("select", apply("compare", x, zero, direction="LT"), zero, const(1, x))
    r = apply("select", apply("compare", x, zero, direction="EQ"), h0, r)
    return apply("select", composites.isnan(x), x, r)


def _times(f64: float, f32: float):
    """NumPy's ``npy_deg2rad``/``npy_rad2deg``: ``x`` times the constant of the loop's type
    (``NPY_PIf / 180.0f`` is its own float32 rounding, not float32(pi / 180)); halves in
    float32, rounded once."""

    @composites.rounded_once
    def loop(x):
        return apply("mul", x, const(f64 if x.dtype == "f64" else f32, x))

    return loop


_PI32, _180_32 = np.float32(math.pi), np.float32(180.0)
_DEG2RAD = _times(math.pi / 180.0, float(_PI32 / _180_32))
_RAD2DEG = _times(180.0 / math.pi, float(_180_32 / _PI32))


def _log_add(exp_fn, log_of_two, log1p_scale):
    """NumPy's ``npy_logaddexp``/``npy_logaddexp2``: equal operands (infinities of one sign
    too) give ``a`` plus the log of 2; else the larger plus ``log1p(exp(-|a - b|))`` (in base
    2: ``exp2`` and ``log1p / ln 2``); NaN when either is. Half types in float32, rounded once."""

    @composites.rounded_once
    def loop(a, b):
        d = apply("sub", a, b)
        larger = apply("select", apply("compare", d, const(0, d), direction="GT"), a, b)
        tail = apply("log1p", exp_fn(apply("neg", apply("abs", d))))
        if log1p_scale != 1:
            tail = apply("mul", tail, const(log1p_scale, tail))
        r = apply("add", larger, tail)
        return apply("select", apply("compare", a, b, direction="EQ"), apply("add", a, const(log_of_two, a)), r)

    return loop


def _nextafter(a, b):
    """The float next to ``a`` toward ``b``: ``a``'s bits one step up or down in magnitude.
    Compared as integers (a float's magnitude bits order as the float does, the sign
    negating them), so subnormals count though XLA's CPU flushes them in float compares."""
    it = _SAME_WIDTH_INT[a.dtype]
    width = {"i16": 16, "i32": 32, "i64": 64}[it]
    bits_a, bits_b = (apply("bitcast_convert", x, dtype=it) for x in (a, b))
    lowest = const(-(1 << (width - 1)), bits_a)  # the sign bit alone

    def key(bits):
        magnitude = apply("and", bits, const((1 << (width - 1)) - 1, bits))
        return magnitude, apply("select", apply("compare", bits, const(0, bits), direction="LT"),
                                apply("neg", magnitude), magnitude)

    mag_a, key_a = key(bits_a)
    _, key_b = key(bits_b)
    negative = apply("compare", bits_a, const(0, bits_a), direction="LT")
    grows = apply("xor", apply("compare", key_a, key_b, direction="LT"), negative)  # away from zero
    one = const(1, bits_a)
    step = apply("select", grows, apply("add", bits_a, one), apply("sub", bits_a, one))
    tiniest = apply("select", apply("compare", bits_b, const(0, bits_b), direction="LT"), apply("or", lowest, one), one)
    bits = apply("select", apply("compare", mag_a, const(0, mag_a), direction="EQ"), tiniest, step)
    # a == b: b (C's nextafter: the zero's sign is b's); NumPy's half-precision loop keeps a
    bits = apply("select", apply("compare", key_a, key_b, direction="EQ"), bits_a if width == 16 else bits_b, bits)
    out = apply("bitcast_convert", bits, dtype=a.dtype)
    either_nan = apply("or", composites.isnan(a), composites.isnan(b))
    return apply("select", either_nan, apply("add", a, b), out)


LOOPS = {
    "add": _add,
    "subtract": lambda a, b: apply("sub", a, b),
    "multiply": _multiply,
    "divide": _divide,
    "true_divide": _divide,
    "floor_divide": composites.floor_divide,
    "remainder": lambda a, b: composites.remainder(a, b, zero_sign="divisor"),
    "fmod": lambda a, b: apply("rem", a, b),
    "power": _power,
    "float_power": _power,
    "negative": _unary("neg"),
    "positive": lambda a: a,
    "absolute": lambda a: a if _is_bool(a) or a.dtype.startswith("ui") else _absolute(a),  # abs: signed types
    "fabs": _unary("abs"),
    "sign": _sign,
    "conjugate": composites.conj,
    "sqrt": _unary("sqrt"),
    "square": lambda a: _multiply(a, a),
    "reciprocal": composites.reciprocal,
    "exp": _unary("exp"),
    "exp2": composites.exp2,
    "expm1": _complex_only(_unary("expm1"), _cexpm1),
    "log": _unary("log"),
    "log2": composites.log2,
    "log10": composites.log10,
    "log1p": _log1p,
    "sin": _complex_only(_unary("sin"), _csin),
    "cos": _complex_only(_unary("cos"), _ccos),
    "tan": composites.tan,
    "arctan": composites.atan,
    "arctan2": lambda a, b: apply("atan2", a, b),
    "arcsin": composites.asin,
    "arccos": composites.acos,
    "sinh": _complex_only(composites.sinh, _csinh),
    "cosh": _complex_only(composites.cosh, _ccosh),
    "tanh": _unary("tanh"),
    "arcsinh": composites.asinh,
    "arccosh": composites.acosh,
    "arctanh": composites.atanh,
    "hypot": composites.hypot,
    "floor": lambda a: apply("floor", a) if _is_float(a) else a,
    "ceil": lambda a: apply("ceil", a) if _is_float(a) else a,
    "trunc": composites.trunc,
    "rint": lambda a: apply("round", a) if _is_float(a) else a,
    "maximum": _extreme("maximum", "GE"),
    "minimum": _extreme("minimum", "LE"),
    "fmax": _ignoring_nan("GT"),
    "fmin": _ignoring_nan("LT"),
    "greater": _cmp("GT"),
    "greater_equal": _cmp("GE"),
    "less": _cmp("LT"),
    "less_equal": _cmp("LE"),
    "equal": _cmp("EQ"),
    "not_equal": _cmp("NE"),
    "logical_and": _logical("and"),
    "logical_or": _logical("or"),
    "logical_xor": _logical("xor"),
    "logical_not": lambda a: apply("not", cast(a, bool)),
    "bitwise_and": lambda a, b: apply("and", a, b),
    "bitwise_or": lambda a, b: apply("or", a, b),
    "bitwise_xor": lambda a, b: apply("xor", a, b),
    "invert": _unary("not"),
    "bitwise_not": _unary("not"),
    "left_shift": lambda a, b: apply("shift_left", a, b),
    "right_shift": lambda a, b: apply("shift_right", a, b),
    "isnan": composites.isnan,
    "isinf": composites.isinf,
    "isfinite": composites.isfinite,
    "signbit": _signbit,
    "copysign": _copysign,
    "nextafter": _nextafter,
    "heaviside": _heaviside,
    "deg2rad": _DEG2RAD,
    "radians": _DEG2RAD,
    "rad2deg": _RAD2DEG,
    "degrees": _RAD2DEG,
    "logaddexp": _log_add(lambda x: apply("exp", x), math.log(2), 1),
    "logaddexp2": _log_add(composites.exp2, 1.0, 1 / math.log(2)),
}


SCIPY_LOOPS = scipy_loops.LOOPS
"""SciPy's special-function ufuncs reach ``__array_ufunc__`` as NumPy's do: the ones
:mod:`.scipy_loops` computes as SciPy's xsf library does (its algorithms op for op, in
SciPy's precision), for real operands. Others (``stdtr``, ``betainc``, ``dawsn``, ...) and
complex operands run SciPy, counted."""


def _loop(uf, name: str):
    """The lazy loop of ufunc ``uf`` (None: it runs NumPy or SciPy itself): NumPy's by
    name; a SciPy loop only for SciPy's own ufunc of that name (looked up where SciPy
    is already loaded: the frontend never imports it)."""
    fn = LOOPS.get(name)
    if fn is None and name in SCIPY_LOOPS:
        special = sys.modules.get("scipy.special._ufuncs")
        if special is not None and getattr(special, name, None) is uf:
            return SCIPY_LOOPS[name]
    return fn


# Loops written for real numbers whose ufuncs NumPy also has for complex ones:
# complex operands run NumPy (counted). Every other loop takes complex operands
# as NumPy does, or NumPy has no complex loop for it (and raises).
_REAL_ONLY = frozenset({"arctan", "arcsin", "arccos", "arcsinh", "arccosh", "arctanh", "rint",
                        "fmax", "fmin"})


# --- application ---------------------------------------------------------------------------

_RESOLVED = Memo("numpy.ufunc_loops", 4096)


def resolve(uf, descr: tuple, signature=None, casting="same_kind"):
    """The loop NumPy runs for operands ``descr``: its input and output dtypes.
    ``signature`` fixes some of them (``dtype=x`` fixes the outputs); NumPy's
    own errors for loops it has not or casts ``casting`` forbids."""
    key = (uf, descr, signature, casting)
    loop = _RESOLVED.get(key)
    if loop is None:
        fixed = {} if signature is None else {"signature": signature}
        # NumPy's own call on 0-d stand-ins first: it raises NumPy's errors exactly,
        # where resolve_dtypes words some apart and crashes on one (a Python float
        # under casting="equiv" with a fixed signature: a segfault in NumPy 2.4)
        standins = [d(0) if isinstance(d, type) else np.zeros((), d) for d in descr]
        with np.errstate(all="ignore"):
            uf(*standins, casting=casting, **fixed)
        loop = _RESOLVED.put(key, uf.resolve_dtypes(descr + (None,) * uf.nout, casting=casting, **fixed))
    return loop


def _fixed(uf, dtype, signature):
    """``signature=`` as ``resolve_dtypes`` takes it, with ``dtype=`` folded in
    (``dtype=x`` is ``signature=(None, ..., x)``: it fixes the outputs)."""
    if dtype is not None:
        if signature is not None:
            raise TypeError("cannot specify both 'signature' and 'dtype'")
        # a DType class (np.linspace's ``dtype=type(dt)``) is one as NumPy takes it: np.dtype()
        # of it would be object
        fixed = dtype if isinstance(dtype, type) and issubclass(dtype, np.dtype) else np.dtype(dtype)
        return (None,) * uf.nin + (fixed,) * uf.nout
    if isinstance(signature, list):
        return tuple(signature)
    return signature


# the ufunc keywords a lazy call takes; any other goes to NumPy, which takes it or
# raises its own error (``axes=`` of a generalized ufunc, a misspelled name)
_ORDERS = ("K", "C", "A", None)


def call(uf, inputs, out=None, dtype=None, where=True, casting="same_kind", order="K", signature=None,
         subok=True, **rest):
    """Apply NumPy ufunc ``uf`` lazily; unsupported forms go to NumPy (counted)."""
    name = uf.__name__
    loop_fn = _loop(uf, name)
    # F order lays the result out column-major (NumPy's strides); a mask with no
    # out= leaves NumPy's uninitialized values where it is False
    masked = where is not True

    def numpy_itself():
        # only what was given: NumPy refuses dtype= and signature= together, even as None
        kw = dict(rest, **{k: v for k, v in (("dtype", dtype), ("signature", given), ("out", out)) if v is not None})
        kw.update({k: v for k, v, default in (("casting", casting, "same_kind"), ("order", order, "K"),
                                               ("subok", subok, True)) if v != default})
        if masked:
            kw["where"] = where
        return call_numpy(uf, inputs, kw, name=f"numpy.{name}")

    given = signature
    if out is not None and _host_target(out):
        # NumPy's own array as out= (``host += lazy`` in code written for NumPy, as
        # scikit-learn's LDA eigen solver): NumPy computes into it, on the materialized
        # inputs (counted), and the result is that array, as NumPy's is
        numpy_itself()
        return out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if loop_fn is None or order not in _ORDERS or subok is not True or rest or (
            masked and (out is None or not _boolean(where))):
        return numpy_itself()
    if len(inputs) != uf.nin:
        raise TypeError(f"{name}() takes from {uf.nin} to {uf.nin + uf.nout} positional arguments but {len(inputs)} were given")
    signature = _fixed(uf, dtype, signature)
    plan, key, handles, floats = _planned(uf, inputs, signature, casting)
    if plan is not None:
        arrays = plan.run(handles, floats)
        if out is None and order in ("K", None):
            arrays = _order_k(inputs, arrays)
        return _store(arrays, out, casting, uf, plan.loop, where)
    loop = resolve(uf, tuple(describe(x) for x in inputs), signature, casting)
    in_dt, out_dt = loop[: uf.nin], loop[uf.nin:]
    if (name in _REAL_ONLY or loop_fn is SCIPY_LOOPS.get(name)) and any(dt.kind == "c" for dt in in_dt):
        return numpy_itself()
    if loop_fn is _power and in_dt[1].kind == "i" and _negative_number(inputs[1]):
        raise ValueError(_NEGATIVE_POWER)
    if name in _COMPARISONS and _int_out_of_range(inputs, in_dt):
        # NumPy compares integer arrays with out-of-range Python ints exactly
        in_dt = (np.dtype(np.int64),) * uf.nin
    for dt in in_dt + out_dt:
        dtypes.lazy_dtype(dt)  # unsupported types (complex, strings) fail here
    if out is not None:
        _check_targets(out, out_dt, casting, uf, loop)  # NumPy checks the output casts before broadcasting
    shape = np.broadcast_shapes(*(shape_of(x) for x in inputs))
    fp = (name, fpe.modes())
    if key is None:
        results = _lower(loop_fn, inputs, None, in_dt, out_dt, shape, fp)
    else:
        # the Python floats as arguments of their own: the recording may hold for any value
        results, recipe = recipes.record_call(_lower_flat, handles,
                                              (loop_fn, handles, in_dt, out_dt, shape, fp, *inputs), {})
        if recipe is not None:
            # under these values too: a loop whose floats repeat finds it at the first lookup
            plan = _PLANS.put(key, _Plan(recipe, loop, out_dt, shape))
            vkey = _any_value_key(key, floats) if recipe.parametric else None
            if vkey is not None:
                _PLANS.put(vkey, plan)
    arrays = [wrap(r, dt) for r, dt in zip(results, out_dt)]
    if not shape:  # every input 0-d: NumPy returns scalars (out= aside)
        arrays = [as_scalar(a) for a in arrays]
    elif out is None and order in ("K", None):
        arrays = _order_k(inputs, arrays)
    return _store(arrays, out, casting, uf, loop, where)


def _unordered(x) -> bool:
    """Whether ``x`` (an operand) lays its axes out in another order than row-major
    (a Fortran-ordered array, a transpose): only then can NumPy's order K differ.
    (On every ufunc call: a plain loop, no allocation.)"""
    if isinstance(x, ndarray):
        st = x._estrides
        if len(st) < 2:
            return False
        if len(st) == 2:  # the common case, unrolled
            return x._shape[0] > 1 and x._shape[1] > 1 and abs(st[0]) < abs(st[1])
        sh, last = x._shape, 0
        for i in range(len(st) - 1, -1, -1):  # strides grow from the last axis on, row-major
            if sh[i] > 1:
                v = st[i] if st[i] >= 0 else -st[i]
                if v < last:
                    return True
                last = v
        return False
    return isinstance(x, np.ndarray) and x.ndim > 1 and not x.flags.c_contiguous


def _order_k(inputs, arrays):
    """The results laid out as NumPy's order K lays them out: its iterator orders the
    axes by the operands' strides (asked of the operands' stand-ins), so a ufunc of
    Fortran-ordered arrays gives a Fortran-ordered one. Row-major operands (the
    common case) ask nothing."""
    for x in inputs:
        if _unordered(x):
            break
    else:
        return arrays
    ops = [x._standin() if isinstance(x, ndarray) else x if isinstance(x, np.ndarray) else np.empty((), np.int8)
           for x in inputs]
    it = np.nditer(ops + [None], flags=["zerosize_ok", "refs_ok"], order="K",
                   op_flags=[["readonly"]] * len(ops) + [["writeonly", "allocate"]],
                   op_dtypes=[None] * len(ops) + [np.dtype(np.int8)])
    proto = it.operands[-1]
    return [laid_out(a, "K", proto) if a.shape == proto.shape else a for a in arrays]


def quick(uf, inputs):
    """``call(uf, inputs)`` without keywords (operators, ``lnp.exp(a)``): a
    recorded signature replays without the checks; a signature is recorded only
    after a call passed them all, so any other call goes to :func:`call`."""
    plan, _, handles, floats = _planned(uf, inputs, None, "same_kind")
    if plan is not None:
        arrays = _order_k(inputs, plan.run(handles, floats))
        return arrays[0] if len(arrays) == 1 else tuple(arrays)
    return call(uf, inputs)


def _planned(uf, inputs, signature, casting):
    """``(plan, key, handles, floats)`` for the call's signature: the plan None
    when none was recorded yet, the key None when the call is not keyed
    (replay off, a recording running, host arrays among the inputs);
    ``floats``: the Python float inputs. A recording for these very values
    comes first, then one for any values of their class."""
    if not settings.replay or TRACE.recorder is not None:
        return None, None, None, None
    key, handles, floats = _signature(uf, inputs, signature, casting)
    if key is None:
        return None, None, None, None
    plan = _PLANS.get(key)
    if plan is None and floats:
        vkey = _any_value_key(key, floats)
        if vkey is not None:
            plan = _PLANS.get(vkey)
    return plan, key, handles, floats


def _any_value_key(key, floats):
    """The signature without the floats' values, for a recording that holds for
    any value of their class (None: these values have no such recordings)."""
    vclass = recipes.value_class(floats)
    if vclass is None:
        return None
    return tuple(p[0] if type(p) is tuple and p[0] is float else p for p in key) + (vclass,)


def _lower_flat(loop_fn, handles, in_dt, out_dt, shape, fp, *inputs):
    return _lower(loop_fn, inputs, handles, in_dt, out_dt, shape, fp)


def _lower(loop_fn, inputs, handles, in_dt, out_dt, shape, fp):
    """The loop's result handles: operands converted and broadcast, the loop,
    the results converted to the loop's output types, then NumPy's
    floating-point checks (``fp``: the ufunc's name and the ``np.errstate``
    modes, :mod:`.fpe`). ``handles`` are the array inputs' handles, in order
    (None: read them here)."""
    operands = []
    arrays = iter(handles) if handles is not None else None
    dev = device_of(*inputs)
    for x, dt in zip(inputs, in_dt):
        keyed = arrays is not None and (type(x) is ndarray or type(x) is scalar)
        h = cast(next(arrays), dt) if keyed else to_handle(x, dt, dev)
        operands.append(broadcast_to_shape(h, shape))
    tie = getattr(loop_fn, "first_on_tie", None)  # (max/min, fmax/fmin: the operand NumPy's loop keeps on a tie)
    if tie is not None and in_dt[0].kind == "f":
        results = loop_fn(*operands, first_on_tie=minmax_loops.binary_tail(tie, in_dt[0], inputs, shape, dev))
    else:
        results = loop_fn(*operands)
    results = results if isinstance(results, tuple) else (results,)
    results = tuple(cast(r, dt) for r, dt in zip(results, out_dt))
    if len(results) == 1:
        results = (fpe.checked(fp[0], fp[1], operands, results[0]),)
    return results


def store_out(res: ndarray, out, wrong_shape: str) -> ndarray:
    """``res``, or ``res`` written into the lazy array ``out`` (cast unsafely, as
    NumPy's reductions and products do); ``wrong_shape``: the ValueError's
    message when the shapes differ, with ``{got}`` and ``{want}`` in it."""
    if out is None:
        return res
    if not isinstance(out, ndarray):
        raise TypeError("lazycore.numpy: out= must be a lazy array")
    if type(out) is scalar:
        raise TypeError("return arrays must be of ArrayType")
    if out.shape != res.shape:
        raise ValueError(wrong_shape.format(got=out.shape, want=res.shape))
    write(out, cast(value(res), out.dtype))
    return out


def _store(arrays, out, casting, uf, loop, where=True):
    """The call's return value; with ``out=``, the results written into the targets
    where ``where`` is True (``loop``: the dtypes NumPy's loop takes and gives)."""
    if out is not None:
        outs = _check_targets(out, [a.dtype for a in arrays], casting, uf, loop)
        for target, res in zip(outs, arrays):
            if np.broadcast_shapes(res.shape, shape_of(where), target.shape) != target.shape:
                raise ValueError(
                    f"non-broadcastable output operand with shape {target.shape} doesn't match the broadcast "
                    f"shape {np.broadcast_shapes(res.shape, shape_of(where), target.shape)}"
                )
            new = broadcast_to_shape(cast(value(res), target.dtype), target.shape)
            if where is not True:
                mask = broadcast_to_shape(to_handle(where, np.dtype(bool), device_of(target)), target.shape)
                new = apply("select", mask, new, value(target))
            write(target, new)
        return outs[0] if len(outs) == 1 else outs
    return arrays[0] if len(arrays) == 1 else tuple(arrays)


def _host_target(out) -> bool:
    return any(isinstance(o, np.ndarray) for o in (out if isinstance(out, tuple) else (out,)))


def _check_targets(out, out_dt, casting, uf, loop) -> tuple:
    """The ``out=`` targets, each a lazy array the result of type ``out_dt``
    casts to under ``casting`` (NumPy's errors otherwise)."""
    outs = out if isinstance(out, tuple) else (out,)
    for target, dt in zip(outs, out_dt):
        if not isinstance(target, ndarray):
            raise TypeError("lazycore.numpy: out= must be a lazy array")
        if type(target) is scalar:
            raise TypeError("return arrays must be of ArrayType")
        if not target._writeable:
            raise ValueError("output array is read-only")
        if not np.can_cast(dt, target.dtype, casting):
            _refuse_output_cast(uf, loop, outs, casting)
    return outs


def _boolean(where) -> bool:
    """A ``where=`` lazycore takes: booleans (NumPy refuses or casts the others itself)."""
    if isinstance(where, (bool, np.bool_)):
        return True
    dt = where.dtype if isinstance(where, (ndarray, np.ndarray)) else np.asarray(where).dtype
    return dt == np.dtype(bool)


def _refuse_output_cast(uf, loop, outs, casting):
    """Raise NumPy's own error (type and message) for writing the results of
    ``loop`` into ``outs`` under ``casting``: the same call on 0-d stand-ins."""
    inputs = [np.zeros((), dt) for dt in loop[:uf.nin]]
    uf(*inputs, out=tuple(np.empty((), o.dtype) for o in outs), signature=tuple(loop), casting=casting)
    raise AssertionError(f"NumPy wrote {uf.__name__}'s {loop} into {[o.dtype for o in outs]} under {casting!r}")


# --- replay: one recorded lowering per call signature (lazycore.recipes) ---------------------

_PLANS = Memo("numpy.ufunc_plans", 4096)  # a long run's signatures drift (scalar values)


class _Plan:
    """A signature's recorded lowering and its results' NumPy metadata."""

    __slots__ = ("recipe", "loop", "meta", "scalars")

    def __init__(self, recipe, loop, out_dt, shape):
        self.recipe = recipe
        self.loop = loop
        strides = contiguous(shape)
        self.meta = tuple((dt, shape, strides) for dt in out_dt)
        self.scalars = not shape  # every input 0-d: NumPy returns scalars

    def run(self, handles, floats):
        # replay makes fresh handles nobody else holds: they become the results' storages
        results = self.recipe.replay(handles, floats)
        arrays = [new_array(h, dt, shape, strides) for h, (dt, shape, strides) in zip(results, self.meta)]
        return [as_scalar(a) for a in arrays] if self.scalars else arrays


_LAYOUT_KEYED = (np.fmax, np.fmin)
"""Ufuncs whose lowering looks at the operands' layout (:func:`.minmax_loops.binary_tail`)."""


def _signature(uf, inputs, signature, casting):
    """``(key, handles, floats)``: everything the lowering looks at (the loop
    NumPy picks depends on dtypes and weak scalars' types, the comparison rule
    and the baked scalars on Python values), the array inputs' handles and the
    Python floats; ``(None, None, None)`` for calls not worth keying (host
    arrays and other array-likes)."""
    parts = [uf, signature, casting, fpe.modes()]
    handles = []
    floats = []
    for x in inputs:
        tx = type(x)
        if tx is ndarray or tx is scalar:
            h = value(x)
            handles.append(h)
            parts.append((x._shape, x._dtype, h.device) if uf not in _LAYOUT_KEYED
                         else (x._shape, x._dtype, h.device, x._estrides))
        elif tx is float:
            floats.append(x)
            parts.append((tx, recipes.float_key(x)))
        elif tx is int or tx is bool:
            parts.append((tx, x))
        elif isinstance(x, np.generic) and x.dtype.kind in "biuf":
            parts.append((tx, x.tobytes()))
        else:
            return None, None, None
    if len(handles) > 1:
        parts.append(recipes.alias_pattern(handles))  # ``a * a``: the recording has one input twice
    return tuple(parts), handles, floats


def _negative_number(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) and x < 0


_COMPARISONS = {"greater", "greater_equal", "less", "less_equal", "equal", "not_equal"}


def _int_out_of_range(inputs, in_dt) -> bool:
    for x, dt in zip(inputs, in_dt):
        if type(x) is int and dt.kind in "iu":
            info = np.iinfo(dt)
            if not info.min <= x <= info.max:
                return True
    return False


class ufunc:
    """A lazy ufunc: ``lazycore.numpy.add(a, b)`` and ``np.add(a, b)`` on lazy arrays alike."""

    def __init__(self, uf):
        self._uf = uf
        self.__name__ = uf.__name__
        self.__doc__ = uf.__doc__
        self.nin, self.nout, self.nargs = uf.nin, uf.nout, uf.nargs
        try:  # inspect.signature(lnp.add) is NumPy's (x1, x2, /, out=None, *, where=True, ...)
            self.__signature__ = inspect.signature(uf)
        except (TypeError, ValueError):
            pass

    def __call__(self, *inputs, **kwargs):
        if not kwargs:
            return quick(self._uf, inputs)
        return call(self._uf, inputs, **kwargs)

    # reduce, accumulate, outer, at and reduceat are bound by :mod:`.ufunc_methods`:
    # they run reductions and joins, which are written with the calls above

    @property
    def identity(self):
        return self._uf.identity

    @property
    def ntypes(self):
        return self._uf.ntypes

    @property
    def types(self):
        return self._uf.types

    @property
    def signature(self):
        return self._uf.signature

    def resolve_dtypes(self, *args, **kwargs):
        return self._uf.resolve_dtypes(*args, **kwargs)

    def __repr__(self):
        return f"<lazy ufunc '{self.__name__}'>"


UFUNCS = {name: ufunc(getattr(np, name)) for name in LOOPS}

OTHER_UFUNCS = {name: UFUNCS.get(uf.__name__) or ufunc(uf) for name, uf in vars(np).items()
                if isinstance(uf, np.ufunc) and uf.signature is None and name not in UFUNCS}
"""NumPy's other ufuncs (and other names of lazy ones: ``mod`` is ``remainder``) as
ufunc objects too, so every ufunc has its methods and attributes: a call with no
lazy loop, like its methods, is NumPy's on materialized inputs, counted
(:func:`call`). The generalized ufuncs (``matmul``, ``vecdot``) are
:mod:`.linalg`'s functions."""
