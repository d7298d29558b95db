"""NumPy's floating-point warnings and errors (np.errstate) from inside a
loop body: the body's check is a flag the loop carries, reported at the
barrier with the body's line."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lazycore
import lazycore.numpy as lnp


def test_numpy_floating_point_warnings_and_errors_from_a_loop_body():
    z = lnp.asarray(np.array([0.0, 1.0]))
    with np.errstate(divide="warn"):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            r = lazycore.fori_loop(0, 2, lambda i, v: v / z, lnp.ones(2))
            got = np.asarray(r)
    np.testing.assert_array_equal(got, [np.inf, 1.0])
    assert [str(w.message) for w in seen] == ["divide by zero encountered in divide"]
    assert seen[0].filename == __file__
    with np.errstate(divide="raise"):
        r = lazycore.fori_loop(0, 2, lambda i, v: v / z, lnp.ones(2))
        with pytest.raises(FloatingPointError, match="divide by zero"):
            np.asarray(r)
