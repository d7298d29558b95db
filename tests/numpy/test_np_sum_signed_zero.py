"""NumPy's sums start from zero: a sum of ``-0.0`` over size-1 axes, over no
axes (``axis=()``) or of a 0-d array is ``+0.0`` (issue 39). XLA folded such a
reduce into a reshape and kept ``-0.0``."""

import numpy as np
import pytest

import lazycore.numpy as lnp

CASES = {
    "axis=()": lambda m, a: m.sum(a, axis=()),
    "size-1 axis": lambda m, a: m.sum(a, axis=0),
    "size-1 axis, float32": lambda m, a: m.sum(a.astype(np.float32) if m is np else m.astype(a, m.float32), axis=0),
    "0-d": lambda m, a: m.sum(a[0, 0]),
    "mean over a size-1 axis": lambda m, a: m.mean(a, axis=0),
    "whole array": lambda m, a: m.sum(a),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_sum_of_negative_zeros_is_positive_zero(case):
    a = np.array([[-0.0, 1.0, -0.0]])
    want = np.asarray(CASES[case](np, a))
    got = np.asarray(CASES[case](lnp, lnp.asarray(a)))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
