"""A float32 fused multiply-add in NumPy, for the folds that model eager's
kernels' steps (SLEEF's exp: :mod:`.folds`; MKL VML's: :mod:`.exp_f32`)."""

from __future__ import annotations

import numpy as np


def fma_f32(a, b, c):
    """float32 ``a * b + c`` rounded once, as a fused multiply-add: the product
    is exact in float64 and the sum's float64 rounding error (TwoSum) is exact;
    only where the float64 sum is a midpoint between two float32s would a
    second rounding go wrong, and there it is moved a float64 ulp toward the
    error first (float32 subnormal results aside)."""
    p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    s = p + c
    t = s - p
    err = (p - (s - t)) + (c - t)
    low = s.view(np.uint64) & np.uint64((1 << 29) - 1)
    tie = (low == np.uint64(1 << 28)) & (err != 0) & np.isfinite(err)
    s = np.where(tie, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)
