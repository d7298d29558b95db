"""Functions of shapes and integers only (issue 39, hunt 31n: ``triu_indices``,
``diag_indices``, ``tril_indices_from`` in a user's script were counted fallbacks) are
constants NumPy computes on the host, uploaded as ``fftfreq``'s are: NumPy's values and
dtypes, lazy arrays, no fallback. The ``*_from`` forms read only the array's shape."""

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics

_SQ = numpy.arange(16.0).reshape(4, 4)
_RECT = numpy.arange(12.0).reshape(3, 4)

_CALLS = {
    "triu_indices": lambda m, a, r: m.triu_indices(5, k=1),
    "tril_indices(m)": lambda m, a, r: m.tril_indices(4, -1, 6),
    "diag_indices": lambda m, a, r: m.diag_indices(3, ndim=3),
    "mask_indices": lambda m, a, r: m.mask_indices(4, numpy.triu, 1),
    "indices": lambda m, a, r: m.indices((2, 3)),
    "indices(sparse,int32)": lambda m, a, r: m.indices((2, 3, 4), dtype=numpy.int32, sparse=True),
    "tri": lambda m, a, r: m.tri(3, 5, k=1),
    "tri(int)": lambda m, a, r: m.tri(4, dtype=int),
    "hamming": lambda m, a, r: m.hamming(7),
    "hanning": lambda m, a, r: m.hanning(6),
    "bartlett": lambda m, a, r: m.bartlett(5),
    "blackman": lambda m, a, r: m.blackman(1),
    "kaiser": lambda m, a, r: m.kaiser(8, 3.5),
    "diag_indices_from": lambda m, a, r: m.diag_indices_from(a),
    "triu_indices_from": lambda m, a, r: m.triu_indices_from(r, 1),
    "tril_indices_from": lambda m, a, r: m.tril_indices_from(arr=r, k=-1),
    "numpy's tril_indices_from": lambda m, a, r: numpy.tril_indices_from(r),  # __array_function__
    "fromfunction": lambda m, a, r: m.fromfunction(lambda i, j: i * 10 + j, (3, 4), dtype=int),
    "fancy write at triu_indices": lambda m, a, r: _zero_upper(m, a),
}


def _zero_upper(m, a):
    a = a.copy()
    a[m.triu_indices_from(a, 1)] = 0.0
    return a


@pytest.mark.parametrize("name", list(_CALLS))
def test_host_constants_are_numpys_and_no_fallback(name, clean_runtime):
    got = _CALLS[name](np, np.asarray(_SQ), np.asarray(_RECT))
    want = _CALLS[name](numpy, _SQ, _RECT)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert isinstance(g, np.ndarray), type(g)
        h = numpy.asarray(g)
        assert (h.dtype, h.shape) == (w.dtype, w.shape)
        numpy.testing.assert_array_equal(h, w)
    assert metrics.fallbacks() == {}


def test_ndindex_is_numpys(clean_runtime):
    assert list(np.ndindex(2, 3)) == list(numpy.ndindex(2, 3))
    assert metrics.fallbacks() == {}


def test_shape_errors_are_numpys(clean_runtime):
    with pytest.raises(ValueError, match="All dimensions of input must be of equal length"):
        np.diag_indices_from(np.asarray(_RECT))
    with pytest.raises(ValueError, match="input array must be 2-d"):
        np.triu_indices_from(np.asarray(numpy.arange(3.0)))


def test_a_lazy_number_is_read_by_the_counted_fallback(clean_runtime):
    beta = np.asarray(numpy.float64(2.0)) + 1.5
    numpy.testing.assert_array_equal(numpy.asarray(np.kaiser(6, beta)), numpy.kaiser(6, 3.5))
    assert set(metrics.fallbacks()) == {"numpy.kaiser"}
