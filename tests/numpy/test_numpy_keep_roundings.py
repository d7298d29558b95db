"""NumPy's ``x * 0.3 + y`` through lazycore.numpy rounds the product before
the sum, as NumPy's two ufuncs do: ``lazy-keep-roundings`` is in the default
pipeline (XLA's CPU backend contracts them into one fused multiply-add
otherwise: a fifth of the values an ulp off)."""

import numpy
import pytest

import lazycore.numpy as np
from lazycore.ir import config
from lazycore.passes.pipeline import CHANNELS_LAST_PIPELINE

CASES = {
    "x*c+y": lambda x, y: x * x.dtype.type(0.3) + y,
    "y-x*y": lambda x, y: y - x * y,
    "x*y+x*x": lambda x, y: x * y + x * x,
}


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_a_product_then_a_sum_is_numpys_bits(case, dtype):
    rng = numpy.random.default_rng(0)
    x, y = rng.standard_normal(4099).astype(dtype), rng.standard_normal(4099).astype(dtype)
    want = CASES[case](x, y)
    got = numpy.asarray(CASES[case](np.asarray(x), np.asarray(y)))
    assert got.dtype == want.dtype
    assert numpy.array_equal(got, want), int((got != want).sum())


def test_without_the_pass_xla_contracts():
    """(so the test above shows the pass, not an XLA that stopped contracting)"""
    rng = numpy.random.default_rng(0)
    x, y = rng.standard_normal(4099).astype(numpy.float32), rng.standard_normal(4099).astype(numpy.float32)
    with config.override(pipeline=CHANNELS_LAST_PIPELINE.replace(",lazy-keep-roundings", "")):
        got = numpy.asarray(np.asarray(x) * numpy.float32(0.3) + np.asarray(y))
    assert not numpy.array_equal(got, x * numpy.float32(0.3) + y)


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_a_product_a_short_sum_takes_is_numpys_bits(dtype):
    """``sum(x * x, -1)`` over rows of 2 (a point's squared norm: SciPy's
    ``integrate.cubature`` rules): XLA unrolls the two-element reduction into
    an add and contracted the product into it (float32: 16% of 2,000 rows an
    ulp off NumPy's before the pass fenced products that a reduce sums)."""
    x = numpy.random.default_rng(0).standard_normal((2000, 2)).astype(dtype)
    got = numpy.asarray(np.sum(np.asarray(x) * np.asarray(x), -1))
    want = numpy.sum(x * x, -1)
    assert numpy.array_equal(got, want), int((got != want).sum())
