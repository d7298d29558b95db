"""SLEEF's float32 ``logf_u10`` (``xlogf_u1``, its AVX-512 build: ``Sleef_logf16_u10``)
as its steps in NumPy: ``lazy.log_sleef``'s fold, and the reference its lowering
(passes/lowering/elementwise.py) builds the same steps for.

``d = m * 2**e`` with ``m`` in [0.75, 1.5) (``e`` the exponent of ``d * (1/0.75)``
rounded, ``m`` exact: AVX-512's getexp/getmant; a subnormal ``d`` as the same
steps on ``d * 2**64``), ``x = (m - 1) / (m + 1)`` as a double-float quotient
(``dfdiv``), then ``e * ln2 + 2x + x**3 * t(x**2)`` in double-float sums
(``dfmul``, ``dfadd``), each multiply-add fused (SLEEF's FMA builds); then
SLEEF's fixups: +inf -> inf, +-0 -> -inf, negative or NaN -> NaN.

Eager torch uses it where its vectorized kernels take ``Vectorized<float>::log``
(``log_softmax``'s last-dim kernel: cross-entropy). ``torch.log`` itself is
MKL VML's ``vsLn`` (ATen's vml.h), another function (tests/torch/test_log_sleef.py
counts how far apart)."""

from __future__ import annotations

import numpy as np

from .fused_f32 import fma_f32

LN2 = (0.69314718246459960938, -1.904654323148236017e-09)
"""``ln2`` as a float32 pair (high, low)."""
POLY = (0.3027294874, 0.3996108174, 0.6666694880)
"""The polynomial in ``x**2``, highest coefficient first (float32 values)."""
INV_075 = 1.0 / 0.75
"""The factor whose rounded product with ``d`` gives ``e`` (float32: 1.3333334)."""

_F32 = np.float32


def _two_sum(a, b):
    """``a + b`` rounded and its exact error (``dfadd2_vf2_vf_vf``)."""
    s = (a + b).astype(_F32)
    err = (a.astype(np.float64) + b.astype(np.float64)) - s.astype(np.float64)
    return s, err.astype(_F32)


def log(d):
    """float32 ``log(d)`` as ``Sleef_logf16_u10`` computes it (float32 in, float32 out)."""
    d = np.asarray(d, _F32)
    k = _F32
    with np.errstate(all="ignore"):
        bits = d.view(np.int32)
        tiny = (bits > 0) & (bits < (1 << 23))  # positive subnormals: the steps on d * 2**64
        ds = np.where(tiny, d * k(2.0**64), d).astype(_F32)
        p = (ds * k(INV_075)).astype(_F32).view(np.int32)
        e = ((p >> 23) & 0xFF) - 127
        m = np.ldexp(ds, -e).astype(_F32)
        e = (e - np.where(tiny, 64, 0)).astype(_F32)
        num, den = _two_sum(np.full_like(m, -1), m), _two_sum(np.full_like(m, 1), m)
        # x = num / den (dfdiv_vf2_vf2_vf2)
        t = (k(1) / den[0]).astype(_F32)
        xh = (num[0] * t).astype(_F32)
        u = fma_f32(t, num[0], -xh)
        v = fma_f32(-den[1], t, fma_f32(-den[0], t, k(1)))
        xl = fma_f32(xh, v, fma_f32(num[1], t, u))
        x2 = (xh * xh).astype(_F32)
        poly = fma_f32(fma_f32(k(POLY[0]), x2, k(POLY[1])), x2, k(POLY[2]))
        # s = ln2 * e (dfmul_vf2_vf2_vf), + 2x (dfadd_vf2_vf2_vf2), + x**3 t (dfadd_vf2_vf2_vf)
        sh = (k(LN2[0]) * e).astype(_F32)
        sl = fma_f32(k(LN2[1]), e, fma_f32(k(LN2[0]), e, -sh))
        yh, yl = (xh * k(2)).astype(_F32), (xl * k(2)).astype(_F32)
        s2 = (sh + yh).astype(_F32)
        s2l = ((((sh - s2).astype(_F32) + yh).astype(_F32) + sl).astype(_F32) + yl).astype(_F32)
        w = ((x2 * xh).astype(_F32) * poly).astype(_F32)
        s3 = (s2 + w).astype(_F32)
        r = (s3 + ((((s2 - s3).astype(_F32) + w).astype(_F32) + s2l).astype(_F32))).astype(_F32)
        r = np.where(d == k(np.inf), k(np.inf), r)
        r = np.where(d == 0, k(-np.inf), r)
        r = np.where((d < 0) | np.isnan(d), k(np.nan), r)
    return np.asarray(r, _F32)
