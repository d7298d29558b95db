"""Shared by the NumPy-shim tests: random inputs, and comparing a lazy result with NumPy's."""

import numpy

import lazycore.numpy as np


def sample(rng, shape, dtype, low=-20, high=20, nan=False):
    """Random values of ``dtype``: normals for floats (some NaN if asked), small integers, coin flips."""
    dtype = numpy.dtype(dtype)
    if dtype.kind == "f":
        x = rng.standard_normal(shape).astype(dtype)
        if nan and x.size:
            x[rng.random(shape) < 0.2] = numpy.nan
        return x
    if dtype.kind == "b":
        return rng.random(shape) > 0.5
    if dtype.kind == "u":
        low, high = max(low, 1), max(high, 50)
    return rng.integers(low, high, shape).astype(dtype)


def same(got, want, rtol=1e-6, atol=1e-6):
    """A lazy array with NumPy's dtype, shape and values."""
    want = numpy.asarray(want)
    assert isinstance(got, np.ndarray), type(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    host = numpy.asarray(got)
    if want.dtype.kind == "f":
        numpy.testing.assert_allclose(host, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        numpy.testing.assert_array_equal(host, want)
