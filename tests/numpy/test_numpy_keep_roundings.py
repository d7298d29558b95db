"""NumPy's ``x * 0.3 + y`` through lazycore.numpy rounds the product before
the sum, as NumPy's two ufuncs do, with ``lazy-keep-roundings`` in the
pipeline (XLA's CPU backend contracts them into one fused multiply-add
otherwise: a fifth of the values an ulp off)."""

import numpy
import pytest

import lazycore.numpy as np
from lazycore.ir import config
from lazycore.passes.pipeline import CHANNELS_LAST_PIPELINE

KEPT = CHANNELS_LAST_PIPELINE + ",lazy-keep-roundings"


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_a_product_then_a_sum_is_numpys_bits(dtype):
    rng = numpy.random.default_rng(0)
    x, y = rng.standard_normal(4099).astype(dtype), rng.standard_normal(4099).astype(dtype)
    want = x * dtype(0.3) + y
    with config.override(pipeline=KEPT):
        got = numpy.asarray(np.asarray(x) * dtype(0.3) + np.asarray(y))
    assert got.dtype == want.dtype
    assert numpy.array_equal(got, want), int((got != want).sum())
