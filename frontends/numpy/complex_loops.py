"""NumPy's complex ``multiply``, ``square``, ``divide`` and ``absolute`` loops, from real parts.

``lazy.mul``, ``lazy.div`` and ``lazy.abs`` of complex numbers lower to eager
torch's roundings (``passes/lowering/complex_exact.py``), and NumPy's loops
round otherwise: of 4,096 random complex64 elements, products differed from
NumPy's in 1,763 (complex128: 1,785), ``a * a`` in 1,165, ``abs`` in 1,464,
``a / b`` in 1,592. So the NumPy frontend records its own loops' arithmetic on the parts
(measured against NumPy 2.4 on x86-64 with AVX512; every form below is 0 of
4,096 off for complex64 and complex128):

- ``multiply`` (and ``square``, the same loop): the SIMD loop's
  ``fma(a, c, -(b*d)) + fma(a, d, b*c) i``, one fused multiply-add per part.
- ``divide``: its C loop's Smith division, every step rounded (no fused
  multiply-add: with them 1,592 of 4,096 differ), ``a / |c| + b / |c| i`` by zero.
- ``absolute``: the SIMD loop's ``big * sqrt(fma(r, r, 1))``, ``r = small / big``
  (C's ``hypot``: 1,457 differ); 0 at 0, ``inf`` at an infinite part, else NaN at a NaN.

``lazy.fma`` is one fused multiply-add and every other product is rounded on
its own (``lazy-keep-roundings``), so the roundings here are the loops'.
"""

from __future__ import annotations

import math

from lazycore.trace import composites
from lazycore.trace.core import apply

DTYPES = frozenset(("complex<f32>", "complex<f64>"))
"""The element types these loops are for (complex32 has no NumPy loop)."""


def _parts(z):
    return apply("real", z), apply("imag", z)


def multiply(a, b):
    x, y = _parts(a)
    u, v = _parts(b)
    # -(b*d) as (-b)*d, the same bits: with ``a * a`` LLVM's vectorizer makes b*b and the fused a*a one
    # product of the interleaved parts, and the fused one is not contracted (1,140 of 4,096 real parts off)
    re = apply("fma", x, u, apply("mul", apply("neg", y), v))
    im = apply("fma", x, v, apply("mul", y, u))
    return apply("complex", re, im)


def divide(a, b):
    x, y = _parts(a)  # a + bi
    c, d = _parts(b)  # c + di
    full = composites.full_like
    one = full(c, 1.0)
    abs_c, abs_d = apply("abs", c), apply("abs", d)
    rat = apply("div", d, c)  # |c| >= |d|
    scl = apply("div", one, apply("add", c, apply("mul", d, rat)))
    re_c = apply("mul", apply("add", x, apply("mul", y, rat)), scl)
    im_c = apply("mul", apply("sub", y, apply("mul", x, rat)), scl)
    rat2 = apply("div", c, d)
    scl2 = apply("div", one, apply("add", d, apply("mul", c, rat2)))
    re_d = apply("mul", apply("add", apply("mul", x, rat2), y), scl2)
    im_d = apply("mul", apply("sub", apply("mul", y, rat2), x), scl2)
    zero = full(c, 0.0)
    both_zero = apply("and", apply("compare", abs_c, zero, direction="EQ"),
                      apply("compare", abs_d, zero, direction="EQ"))
    re_c = apply("select", both_zero, apply("div", x, abs_c), re_c)
    im_c = apply("select", both_zero, apply("div", y, abs_c), im_c)
    wide = apply("compare", abs_c, abs_d, direction="GE")  # false at a NaN: the second branch, as the C loop
    return apply("complex", apply("select", wide, re_c, re_d), apply("select", wide, im_c, im_d))


def absolute(z):
    x, y = _parts(z)
    full = composites.full_like
    ax, ay = apply("abs", x), apply("abs", y)
    big, small = apply("maximum", ax, ay), apply("minimum", ax, ay)
    r = apply("div", small, big)
    out = apply("mul", big, apply("sqrt", apply("fma", r, r, full(r, 1.0))))
    out = apply("select", apply("compare", big, full(big, 0.0), direction="EQ"), full(big, 0.0), out)
    nan = apply("or", composites.isnan(x), composites.isnan(y))
    out = apply("select", nan, full(big, math.nan), out)
    inf = apply("or", composites.isinf(x), composites.isinf(y))
    return apply("select", inf, full(big, math.inf), out)
