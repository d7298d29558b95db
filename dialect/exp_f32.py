"""Eager torch's float32 exp on the CPU, as its steps in NumPy (``lazy.exp_vml``'s
fold; passes/lowering/elementwise.py builds the same steps).

Eager's float32 ``torch.exp`` is MKL's ``vsExp`` (VML, high accuracy; calling
``vmsExp`` with VML_HA gives its bits, VML_LA 138,049 of 200,000 off), whose
AVX-512 kernel is all float32: not SLEEF's ``expf_u10`` (which eager's sigmoid
and silu use: ``lazy.exp_sleef``), not glibc's expf, not NumPy's float32 exp,
not the float64 exp rounded (2,102 of 200,000 off). It has no scalar tail.

For ``|x| <`` :data:`RARE` (results normal): ``n = x * log2(e)`` cut toward -inf
to 32nds of the exact product (a fused multiply-add rounding toward zero past a
positive shifter), ``r = x - n * ln2`` in two fused multiply-adds,
``2**(j/32)`` as a float32 and its relative low part, and
``T = 2**(j/32) * 2**floor(n)`` (``vscalefps``, exact): ``T + T * (lo + r + r*r
* (c2 + c3 * r))``, every multiply-add fused. Beyond (and for the infinities) VML
calls a scalar routine: float64 exp's (:func:`.exp_f64._scalar`) rounded to
float32, with its own limits and its subnormal split below -RARE.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from . import exp_f64
from .fused_f32 import fma_f32

_F32 = np.float32


def _h(text: str) -> np.float32:
    return _F32(float.fromhex(text))


def _table():
    """``2**(j/32)`` for j in 0..31 as (nearest float32s, nearest float32s to
    ``2**(j/32) / hi - 1``): the 5-fold integer square root of ``2**(j + 32 * 200)``
    is ``2**(j/32)`` to 200 bits."""
    his, los = [], []
    for j in range(32):
        v = 1 << (j + 32 * 200)
        for _ in range(5):
            v = math.isqrt(v)
        exact = Fraction(v, 1 << 200)
        hi = _F32(float(exact))
        his.append(hi)
        los.append(_F32(float(exact / Fraction(float(hi)) - 1)))
    return np.array(his, _F32), np.array(los, _F32)


TABLE_HI, TABLE_LO = _table()
LOG2E = _h("0x1.715476p+0")
LN2 = (_h("0x1.62e430p-1"), _h("-0x1.05c610p-29"))
POLY = (_h("0x1.5557e6p-3"), _h("0x1.0001ecp-1"))
"""``c3, c2``: ``exp(r) - 1 ~ r + r * r * (c2 + c3 * r)``."""
RARE = _h("0x1.5d589ep+6")
"""``|x| >=`` this (87.336...) takes the scalar routine."""
RARE_OVERFLOW = float.fromhex("0x1.62e42ep+6")
"""The scalar routine: above, infinity."""
RARE_UNDERFLOW = float.fromhex("-0x1.9fe368p+6")
"""The scalar routine: below, zero."""


def _scalar(x: float) -> np.float32:
    if math.isinf(x):
        return _F32(0.0 if x < 0 else x)
    if x > RARE_OVERFLOW:
        return _F32(math.inf)
    if x < RARE_UNDERFLOW:
        return _F32(0.0)
    return _F32(exp_f64._scalar(x, subnormal=-float(RARE)))


def exp(x: np.ndarray) -> np.ndarray:
    """float32 ``x``'s exp as eager's, elementwise."""
    x = np.asarray(x, _F32)
    far = ~(np.abs(x) < RARE)  # (NaN too: its own path below)
    xs = np.where(far, _F32(0), x)
    k = np.floor(xs.astype(np.float64) * np.float64(LOG2E) * 32)  # (exact product)
    n = (k / 32).astype(_F32)
    j = np.mod(k, 32).astype(np.int64)
    r = fma_f32(-LN2[0], n, xs)
    r = fma_f32(-LN2[1], n, r)
    lo = fma_f32(fma_f32(r, POLY[0], POLY[1]), (r * r).astype(_F32), (TABLE_LO[j] + r).astype(_F32))
    t = np.ldexp(TABLE_HI[j], np.floor(n).astype(np.int64)).astype(_F32)
    out = fma_f32(t, lo, t)
    for i in np.flatnonzero(far):
        out.flat[i] = x.flat[i] if np.isnan(x.flat[i]) else _scalar(float(x.flat[i]))
    return out.reshape(x.shape)
