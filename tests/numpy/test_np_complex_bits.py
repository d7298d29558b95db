"""Complex multiply, square, divide and absolute in lazycore.numpy give NumPy's bits
(frontends/numpy/complex_loops.py), not eager torch's, which ``lazy.mul``, ``lazy.div``
and ``lazy.abs`` lower to (passes/lowering/complex_exact.py; torch's side:
tests/torch/test_complex_bits.py). NumPy's SIMD loops fuse a multiply-add in each
part of a product and in ``abs``, its Smith division rounds every step. Before
these loops about 30-40% of random elements were 1 ulp off NumPy's (mul 1,763 of
4,096, a * a 1,165, div 1,592, abs 1,464 for complex64). NaN matches NaN whatever
its bits; a zero's sign counts."""

import itertools
import warnings

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics

CDTYPES = [numpy.complex64, numpy.complex128]
_SPECIAL = [0.0, -0.0, 1.0, -1.5, 2.0**-20, -1e6, float("inf"), -float("inf"), float("nan")]
"""Parts whose products and quotients are never subnormal in float32 (XLA's CPU
backend flushes those to zero: docs/status.md)."""


def _random(n, dtype, seed):
    rng = numpy.random.default_rng(seed)
    return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)


def _operands(dtype):
    """4,096 random pairs, then every special against every special (81 x 81)."""
    s = numpy.array([complex(p, q) for p, q in itertools.product(_SPECIAL, _SPECIAL)], dtype)
    a = numpy.concatenate([_random(4096, dtype, 1), numpy.repeat(s, s.size)])
    b = numpy.concatenate([_random(4096, dtype, 2), numpy.tile(s, s.size)])
    return a, b


def _differ(got, want):
    got, want = numpy.asarray(got), numpy.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    if want.dtype.kind == "c":
        got, want = numpy.stack([got.real, got.imag], -1), numpy.stack([want.real, want.imag], -1)
    else:
        got, want = got[..., None], want[..., None]
    same = ((got == want) & (numpy.signbit(got) == numpy.signbit(want))) | (numpy.isnan(got) & numpy.isnan(want))
    return int((~same.all(-1)).sum())


_OPS = {
    "multiply": lambda m, a, b: a * b,
    "a * a": lambda m, a, b: a * a,
    "square": lambda m, a, b: m.square(a),
    "divide": lambda m, a, b: a / b,
    "absolute": lambda m, a, b: abs(a),
    "times a scalar": lambda m, a, b: a * numpy.complex128(0.3 - 1.7j).astype(a.dtype),
    "over a scalar": lambda m, a, b: a / numpy.complex128(0.3 - 1.7j).astype(a.dtype),
}


@pytest.fixture
def no_fallback():
    before = metrics.fallbacks()
    yield
    assert metrics.fallbacks() == before


@pytest.mark.parametrize("dtype", CDTYPES, ids=["complex64", "complex128"])
@pytest.mark.parametrize("op", list(_OPS))
def test_complex_loop_has_numpy_bits(op, dtype, no_fallback):
    a, b = _operands(dtype)
    with warnings.catch_warnings(), numpy.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = _OPS[op](numpy, a, b)
        got = _OPS[op](np, np.asarray(a), np.asarray(b))
    assert _differ(got, want) == 0


@pytest.mark.parametrize("dtype", CDTYPES, ids=["complex64", "complex128"])
def test_times_own_conjugate_has_numpy_bits(dtype):
    """LLVM turns a * (-b) into -(a * b) and shares it with the plain b * a (and (-b) * (-b)
    with b * b), which left the fused products uncontracted (all 4,096 imaginary and ~620
    real parts off) until lazy-keep-roundings tied each to its own sum."""
    a = _random(4096, dtype, 1)
    x = np.asarray(a)
    assert _differ(x * np.conj(x), a * numpy.conj(a)) == 0
