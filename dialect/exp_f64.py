"""Eager torch's float64 exp on the CPU, as its steps in NumPy (``lazy.exp_sleef``'s
float64 fold; the lowering, passes/lowering/elementwise.py, builds the same steps).

Eager's float64 ``torch.exp`` is MKL's ``vdExp`` (VML, high accuracy), whose AVX-512
code is Intel's SVML ``exp8_ha`` (NumPy's float64 exp on AVX-512 is the same
routine: the two agree on every value probed). It is neither glibc's exp nor the
correctly rounded one (on 4,096 values of N(0, 36): 185 differ from the correctly
rounded, glibc's 2), nor SLEEF's ``expd_u10`` (436 differ); the steps here give its
bits, subnormal results and the overflow edge included (0 of 52,000 off). It has
no scalar tail: VML's loop ends on a masked vector.

For ``|x| <`` :data:`RARE` (results normal): ``n = x * log2(e)`` cut (toward -inf)
to sixteenths, ``r = x - n * ln2`` in two fused multiply-adds, a degree-6
polynomial in fused multiply-adds, ``2**(j/16)`` from a table with a relative
low part, and ``2**floor(n)`` applied exactly (AVX-512's ``vscalefpd``). Beyond
it (and for the infinities) VML calls its scalar routine: ``2**(j/64)``,
plain multiplies and adds, and an exact split where the result is subnormal.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import numpy as np


def _table():
    """``2**(j/64)`` for j in 0..63 as pairs (nearest double ``hi``, nearest double
    to ``2**(j/64) / hi - 1``), flattened: the 6-fold integer square root of
    ``2**(j + 64 * 200)`` is ``2**(j/64)`` to 200 bits, far past the roundings."""
    out = []
    for j in range(64):
        v = 1 << (j + 64 * 200)
        for _ in range(6):
            v = math.isqrt(v)
        exact = Fraction(v, 1 << 200)
        hi = float(exact)
        out += [hi, float(exact / Fraction(hi) - 1)]
    return tuple(out)


TABLE = _table()
"""``TABLE[2j], TABLE[2j + 1]``: ``2**(j/64)`` as a double and its relative low part."""

LOG2E = float.fromhex("0x1.71547652b82fep+0")
LN2 = (float.fromhex("0x1.62e42fefa39efp-1"), float.fromhex("0x1.abc9e3b39803fp-56"))
POLY = tuple(float.fromhex(h) for h in (
    "0x1.7411836940c04p-10", "0x1.1101cbbc265c0p-7", "0x1.55557242d68fep-5",
    "0x1.5555553939732p-3", "0x1.000000000d008p-1", "0x1.fffffffffff70p-1"))
"""The vector path's polynomial, ``c6`` first (``exp(r) - 1 ~ r * P(r)``)."""
RARE = float.fromhex("0x1.61da04cbafe44p+9")
"""``|x| >=`` this (707.70...) takes the scalar routine."""

# the scalar routine's constants
RARE_INV_LN2_64 = float.fromhex("0x1.71547652b82fep+6")
RARE_SHIFT = float.fromhex("0x1.8p+52")
RARE_LN2_64 = (float.fromhex("0x1.62e42fefa0000p-7"), float.fromhex("0x1.cf79abc9e3b3ap-46"))
RARE_POLY = tuple(float.fromhex(h) for h in (
    "0x1.6c16a1c2a3ffdp-10", "0x1.111123aaf20d3p-7", "0x1.5555555558fccp-5", "0x1.55555555548f8p-3", "0x1p-1"))
"""``c6`` first; ``exp(r) ~ 1 + r + r * r * P(r)``."""
RARE_OVERFLOW = float.fromhex("0x1.62e42fefa39efp+9")
"""Above: infinity."""
RARE_SUBNORMAL = float.fromhex("-0x1.6232bdd7abcd2p+9")
"""Below: a subnormal result, scaled by 2**60 first and split to round once."""
RARE_UNDERFLOW = float.fromhex("-0x1.74910d52d3051p+9")
"""Below: zero."""
RARE_SPLIT = float.fromhex("0x1.8p+32")


def _fma(a: float, b: float, c: float) -> float:
    """``a * b + c`` rounded once (Python's float() of a Fraction rounds to nearest even)."""
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return a * b + c  # the sign of zero
    try:
        return float(exact)
    except OverflowError:
        return math.copysign(math.inf, exact)


def _bits(x: float) -> int:
    return int(np.float64(x).view(np.uint64))


def _power(e: int) -> float:
    """The double whose exponent field is ``e`` (mantissa zero)."""
    return float(np.uint64(e << 52).view(np.float64))


def _vector(x: float) -> float:
    n16 = math.floor(Fraction(x) * Fraction(LOG2E) * 16)  # (round toward zero past a positive shifter)
    n = n16 / 16
    hi, lo = TABLE[8 * (n16 % 16)], TABLE[8 * (n16 % 16) + 1]
    r = _fma(-n, LN2[0], x)
    r = _fma(-n, LN2[1], r)
    r2 = r * r
    c6, c5, c4, c3, c2, c1 = POLY
    p = _fma(_fma(c6, r, c5), r2, _fma(c4, r, c3))
    p = _fma(p, r2, _fma(c2, r, c1))
    p = _fma(p, r, lo)
    return math.ldexp(_fma(hi, p, hi), math.floor(n))


def _scalar(x: float, subnormal: float = RARE_SUBNORMAL) -> float:
    """VML's scalar routine (float32's too, :mod:`.exp_f32`, with its subnormal limit)."""
    if math.isinf(x):
        return 0.0 if x < 0 else x
    if x > RARE_OVERFLOW:
        return math.inf
    if x < RARE_UNDERFLOW:
        return 0.0
    t = x * RARE_INV_LN2_64 + RARE_SHIFT
    index = _bits(t) & 0xFFFFFFFF
    j, m = index & 63, index >> 6  # (m: the 32-bit word shifted logically)
    n = t - RARE_SHIFT
    r = (x - n * RARE_LN2_64[0]) - n * RARE_LN2_64[1]
    p = RARE_POLY[0]
    for c in RARE_POLY[1:]:
        p = p * r + c
    p = p * r * r + r
    hi = TABLE[2 * j]
    p = (p + TABLE[2 * j + 1]) * hi
    if x < subnormal:
        e = (m + 1083) & 2047
        scale = _power(e)
        p, top = p * scale, scale * hi
        s = top + p
        if e <= 50:
            return s * 2.0**-60
        low = (top - s) + p
        t = s * RARE_SPLIT
        head = (s + t) - t
        return head * 2.0**-60 + ((s - head) + low) * 2.0**-60
    e = (m + 1023) & 2047
    p = p + hi
    if e > 2046:
        return p * _power((e - 1) & 2047) * 2.0
    return p * _power(e)


def exp_one(x: float) -> float:
    """One float64 exp as eager's (VML's) steps."""
    if math.isnan(x):
        return x
    return _scalar(x) if abs(x) >= RARE else _vector(x)


@cache
def _ufunc():
    return np.frompyfunc(exp_one, 1, 1)


def exp(x: np.ndarray) -> np.ndarray:
    """float64 ``x``'s exp as eager's, elementwise (a Python loop: folds and tests)."""
    x = np.asarray(x, np.float64)
    return np.asarray(_ufunc()(x), np.float64).reshape(x.shape)
