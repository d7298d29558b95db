"""What elementwise ops compute, evaluated with NumPy: the ``fold`` of their rows.

A fold is called as the rule is, ``fold(*operand_arrays, **attrs,
**result_params)`` (result parameters as the rule sees them: ``dtype`` a
dialect element-type name), and returns the result array, or None where the
value is the backend's call and a constant folder must leave the op alone
(``INT_MIN / -1``, an integer to a negative power, float -> int out of
range). The answers are the dialect's semantics, which NumPy's defaults do
not always share: integer division truncates toward zero, ``rem`` takes the
dividend's sign, integer division or remainder by zero is 0, ``maximum`` and
``minimum`` order signed zeros as IEEE does. Transcendentals are evaluated in
f64 and rounded once to the element type.

``lazy-canonicalize`` folds with these (:mod:`lazycore.passes.folding`); the
op-table test compares every lowering with them for ops without a reference
of their own.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .fused_f32 import fma_f32
from .types import FLOAT_DTYPES, is_complex, is_float, to_numpy_dtype

# Without infinities (float8 E4M3FN and the FNUZ types) -inf would become NaN,
# which wins every max: the finite extremes stand in.
_NO_INFINITY = ("f8E4M3FN", "f8E4M3FNUZ", "f8E5M2FNUZ")


# NumPy counts bf16 and the float8 types (ml_dtypes) as no floating type.
_FLOATS = frozenset(to_numpy_dtype(d) for d in FLOAT_DTYPES)


def _float(a) -> bool:
    return a.dtype in _FLOATS


def via_f64(f):
    """Transcendentals: evaluated in f64 (complex128 for complex numbers) and
    rounded once to the element type."""
    def g(x):
        wide = np.complex128 if x.dtype.kind == "c" else np.float64
        return np.asarray(f(x.astype(wide))).astype(x.dtype)

    return g


def logical_not(x):
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


logistic = via_f64(lambda x: 1 / (1 + np.exp(-x)))
erf = via_f64(np.vectorize(math.erf, otypes=[np.float64]))
_complex_rsqrt = via_f64(lambda x: 1 / np.sqrt(x))


# Eager torch's float32 vectorized kernels take exp from SLEEF (``Sleef_expf16_u10``
# on AVX512, the same algorithm on AVX2): a round-to-nearest ``q = rint(d /
# ln2)``, a two-part Cody-Waite reduction, a degree-5 polynomial in fused
# multiply-adds, and ``2**q`` applied in two halves. XLA's float32 exp and the
# correctly rounded one each differ from it by an ulp in ~4% of values (157 of
# 4,096 silu gradients off with a correctly rounded exp); these steps give its
# bits (65,536 sigmoids of N(0, 36): 0 off). ``lazy.exp_sleef`` is this exp;
# its lowering (passes/lowering/elementwise.py) builds the same steps.
SLEEF_EXPF_LOG2E = 1.442695040888963407359924681001892137426645954152985934135449406931
SLEEF_EXPF_LN2 = (-0.693145751953125, -1.428606765330187045e-06)
"""``-ln2`` in two parts (the first with its low bits clear: ``q * part`` is exact)."""
SLEEF_EXPF_POLY = (0.000198527617612853646278381, 0.00139304355252534151077271, 0.00833336077630519866943359,
                   0.0416664853692054748535156, 0.166666671633720397949219, 0.5)
"""The polynomial's coefficients, highest first (float32 values)."""
SLEEF_EXPF_RANGE = (-104.0, 88.72283935546875)
"""Below the first, 0; above the second, infinity."""


def exp_sleef(x):
    """``lazy.exp_sleef``: float32 (and the narrower floats, in float32, rounded
    once more) with SLEEF's ``expf_u10`` steps, each multiply-add rounded once
    (:func:`.fused_f32.fma_f32`); float64 with MKL VML's ``vdExp`` steps, eager's float64
    exp (:mod:`.exp_f64`). Subnormal results are kept (eager's; XLA's CPU
    loops flush them)."""
    if x.dtype == np.float64:
        from . import exp_f64

        return exp_f64.exp(x)
    f32 = np.float32
    d = x.astype(f32)

    def k(v):
        return f32(v)

    with np.errstate(all="ignore"):
        q = np.rint(d * k(SLEEF_EXPF_LOG2E))
        s = fma_f32(q, k(SLEEF_EXPF_LN2[0]), d)
        s = fma_f32(q, k(SLEEF_EXPF_LN2[1]), s)
        u = np.full_like(d, k(SLEEF_EXPF_POLY[0]))
        for c in SLEEF_EXPF_POLY[1:]:
            u = fma_f32(u, s, k(c))
        u = k(1) + fma_f32(s * s, u, s)
        q = np.nan_to_num(np.clip(q, -151, 128))  # (NaN: u is NaN already)
        half = np.floor(q * k(0.5))

        def power(m):
            return ((m.astype(np.int32) + 127) * (1 << 23)).astype(np.int32).view(f32)

        u = (u * power(half)) * power(q - half)
        u = np.where(d < k(SLEEF_EXPF_RANGE[0]), k(0), u)
        u = np.where(d > k(SLEEF_EXPF_RANGE[1]), k(np.inf), u)
    return np.asarray(u, f32).astype(x.dtype)


def log_sleef(x):
    """``lazy.log_sleef``: float32 (and the narrower floats, in float32, rounded
    once more) with SLEEF's ``logf_u10`` steps (:mod:`.log_f32`), the log of
    eager torch's vectorized float32 kernels (``log_softmax``); float64 as
    NumPy's log (its lowering takes XLA's: eager's float64 kernels, SLEEF's
    ``logd_u10`` and VML's ``vdLn``, are not modelled)."""
    if x.dtype == np.float64:
        with np.errstate(all="ignore"):
            return np.log(x)
    from . import log_f32

    return log_f32.log(x.astype(np.float32)).astype(x.dtype)


def rsqrt(x):
    """Eager's CPU rsqrt, ``1 / sqrt(x)`` with each step rounded (float16,
    bfloat16 and float8 in float32, rounded once more at the end), which the
    CPU compile path lowers it to; complex numbers as the transcendentals."""
    if x.dtype.kind == "c":
        return _complex_rsqrt(x)
    wide = x.astype(np.float64 if x.dtype == np.float64 else np.float32)
    return (wide.dtype.type(1) / np.sqrt(wide)).astype(x.dtype)


def _int_division_defined(a, b) -> bool:
    """INT_MIN / -1 is left to the backend."""
    if np.issubdtype(a.dtype, np.signedinteger):
        return not np.any((a == np.iinfo(a.dtype).min) & (b == -1))
    return True


def div(a, b):
    if _float(a) or a.dtype.kind == "c":
        return np.divide(a, b)
    if not _int_division_defined(a, b):
        return None
    # Truncating division; a - fmod(a, b) is an exact multiple of b. NumPy's
    # integer loops give 0 for a zero divisor, as the op does.
    return (a - np.fmod(a, b)) // b


def rem(a, b):
    if np.issubdtype(a.dtype, np.integer) and not _int_division_defined(a, b):
        return None
    return np.fmod(a, b)  # sign of the dividend; 0 for a zero divisor


def power(a, b):
    if _float(a) or a.dtype.kind == "c":
        return via_f64(lambda x: np.power(x, b.astype(x.dtype)))(a)
    if np.any(b < 0):
        return None  # integer x ** -n is left to the backend
    return np.power(a, b)  # wraps like XLA's square-and-multiply


def _extremum(npf, prefer_negative_zero: bool):
    def f(a, b):
        if not _float(a):
            return npf(a, b)
        # IEEE: max(-0.0, +0.0) is +0.0 and min is -0.0, whatever the order;
        # NumPy returns whichever operand came first.
        tie = np.where(np.signbit(a) == prefer_negative_zero, a, b)
        return np.where(a == b, tie, npf(a, b))

    return f


maximum = _extremum(np.maximum, prefer_negative_zero=False)
minimum = _extremum(np.minimum, prefer_negative_zero=True)


def atan2(a, b):
    return via_f64(lambda x: np.arctan2(x, b.astype(np.float64)))(a)


_DIRECTIONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
               "GT": np.greater, "GE": np.greater_equal}


def compare(a, b, *, direction):
    return _DIRECTIONS[direction](a, b)


def convert(x, *, dtype):
    target = to_numpy_dtype(dtype)
    if _float(x) and np.issubdtype(target, np.integer):
        # float -> int truncates; NaN and out-of-range values are the backend's call.
        info = np.iinfo(target)
        t = np.trunc(x.astype(np.float64))
        if np.any(np.isnan(t)) or np.any(t < info.min) or np.any(t > info.max):
            return None
    if x.dtype == np.float64 and dtype in ("f16", "bf16"):
        # rounded once, as the lowering: ml_dtypes before 0.7 makes a bfloat16
        # from a double through float32 (rounding twice)
        return rounded_to_odd_float32(x).astype(target)
    return x.astype(target)


def rounded_to_odd_float32(x: np.ndarray) -> np.ndarray:
    """float64 ``x`` rounded to float32 toward zero, the lowest bit set where
    that was inexact: a later rounding to a type of at most 22 bits is then the
    one rounding of ``x`` (the convert lowering does the same in StableHLO)."""
    near = x.astype(np.float32)
    back = near.astype(np.float64)
    finite = np.isfinite(near)
    with np.errstate(invalid="ignore"):
        inexact = (back != x) & finite
        away = (np.abs(back) > np.abs(x)) & finite
    bits = (near.view(np.uint32) - away.astype(np.uint32)) | inexact.astype(np.uint32)
    return bits.view(np.float32)


def bitcast_convert(x, *, dtype):
    return x.view(to_numpy_dtype(dtype))


def identity_value(kind: str, dtype: str) -> np.ndarray:
    """The rank-0 value of reduction identity ``kind`` (``dialect.spec.IDENTITIES``)
    for element type ``dtype``: ``low`` and ``high`` are the type's extremes
    (infinities where it has them). ValueError where there is none (complex
    numbers have no order)."""
    dt = to_numpy_dtype(dtype)
    if kind in ("zero", "one"):
        return np.asarray(0 if kind == "zero" else 1).astype(dt)
    if kind not in ("low", "high") or is_complex(dtype):
        raise ValueError(f"no {kind} identity for element type {dtype}")
    if dtype == "i1":
        return np.asarray(kind == "high", dtype=dt)
    if is_float(dtype):
        if dtype in _NO_INFINITY:
            info = ml_dtypes.finfo(dt)
            return np.asarray(info.min if kind == "low" else info.max, dtype=dt)
        return np.asarray(-np.inf if kind == "low" else np.inf).astype(dt)
    info = np.iinfo(dt)
    return np.asarray(info.min if kind == "low" else info.max, dtype=dt)


def exp_vml(x):
    """``lazy.exp_vml``: MKL VML's exp steps, float32's (:mod:`.exp_f32`) or float64's
    (:mod:`.exp_f64`). Subnormal results are kept (eager's; XLA's CPU loops flush them)."""
    from . import exp_f32, exp_f64

    if x.dtype == np.float64:
        return exp_f64.exp(x)
    return exp_f32.exp(x.astype(np.float32)).astype(x.dtype)
