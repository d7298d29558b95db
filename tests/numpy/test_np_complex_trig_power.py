"""Complex sin, cos, sinh, cosh, expm1 and power on lazy arrays as NumPy computes
them: C99's csinh/ccosh special values (glibc's, which NumPy calls; sin and cos
through ``sin z = -i sinh(iz)``, ``cos z = cosh(iz)``), NumPy's nc_expm1 formula,
and npy_cpow's zero, zero-base and integer-exponent rules (products, not
``exp(b log a)``). sinh and cosh of complex values ran NumPy before (counted);
sin and cos took XLA's complex expansion (NaN at infinities, tiny parts lost)."""

import warnings

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics

INF, NAN = numpy.inf, numpy.nan
SPECIAL = [complex(a, b) for a in (0.0, -0.0, 1.5, -1.5, INF, -INF, NAN) for b in (0.0, -0.0, 2.0, -2.0, INF, -INF, NAN)]
FINITE = [1 + 1j, -2.5 + 0.3j, 1e-10 - 3e-11j, 0.5j, 3 - 4j, 1e-3 + 2j, -7 + 0.1j]


@pytest.fixture(autouse=True)
def lazy_only():
    metrics.reset()
    yield
    assert metrics.fallbacks() == {}


def _same_parts(got, want, rtol):
    """Each part: NaN where NumPy's is, equal infinities and zeros (with sign), else close."""
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        assert (numpy.isnan(g) == numpy.isnan(w)).all(), (got, want)
        exact = numpy.isinf(w) | (w == 0)  # (a NaN's sign bit is no part of its value)
        numpy.testing.assert_array_equal(g[exact], w[exact])
        numpy.testing.assert_array_equal(numpy.signbit(g[exact]), numpy.signbit(w[exact]))
        rest = ~exact & ~numpy.isnan(w)
        numpy.testing.assert_allclose(g[rest], w[rest], rtol=rtol, atol=0)


@pytest.mark.parametrize("dtype", [numpy.complex128, numpy.complex64])
@pytest.mark.parametrize("fn", ["sin", "cos", "sinh", "cosh", "expm1"])
def test_special_values_and_small_parts(fn, dtype):
    x = numpy.array(SPECIAL + FINITE, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(numpy, fn)(x)
    got = numpy.asarray(getattr(np, fn)(np.asarray(x)))
    assert got.dtype == want.dtype
    _same_parts(got, want, rtol=1e-12 if dtype == numpy.complex128 else 2e-6)


BASES = numpy.array([1 + 1j, 0.5j, 2j, -2j, -1.5 + 0.25j, 0j, -0.0 + 0j, 3 - 4j, 1e-3 + 7j, INF + 0j, 1 + INF * 1j])


@pytest.mark.parametrize("exponent", [2, 3, 1, -1, -2, 0, 5, 17, -6, 2 + 0j, 3 + 1j, 0.5, 1j])
def test_power_follows_npy_cpow(exponent):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = numpy.power(BASES, exponent)
    got = numpy.asarray(np.power(np.asarray(BASES), exponent))
    assert got.dtype == want.dtype
    if isinstance(exponent, int) or exponent == 2 + 0j:
        _same_parts(got, want, rtol=1e-13)
    else:  # exp(b log a): XLA's; finite bases only
        keep = numpy.isfinite(BASES)
        _same_parts(got[keep], want[keep], rtol=1e-12)


def test_power_with_an_array_of_exponents():
    e = numpy.array([2, -1, 0, 3 + 0j, 0.5, 4, -3, 2.5j, 1, 99, 100])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = numpy.power(BASES, e)
    got = numpy.asarray(np.power(np.asarray(BASES), np.asarray(e)))
    keep = numpy.isfinite(BASES) & numpy.isfinite(want)
    _same_parts(got[keep], want[keep], rtol=1e-12)
