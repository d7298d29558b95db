"""``sliding_window_view`` and ``meshgrid`` are lazy (issue 39's hunt: a moving
average, a 2-D convolution by windows and a grid for a plot each ran NumPy, a
counted fallback and a barrier). The windows are a read-only view at NumPy's
strides; the grids NumPy's arrays."""

import numpy
import pytest
from numpy.lib.stride_tricks import sliding_window_view as swv

import lazycore.numpy as np
from lazycore.observe import metrics

_H = numpy.arange(30.0).reshape(5, 6)

_WINDOWS = {
    "moving": lambda m, x: m(x[0], 3), "2d": lambda m, x: m(x, (2, 3)), "axis": lambda m, x: m(x, 3, axis=1)[:, ::2],
    "transposed": lambda m, x: m(x.T, (2, 2)), "reversed": lambda m, x: m(x[::-1, 1:], 2, axis=0),
    "whole": lambda m, x: m(x, (5, 6)), "two axes": lambda m, x: m(x, (2, 2), axis=(1, 0)),
}


@pytest.mark.parametrize("name", list(_WINDOWS))
def test_sliding_windows_are_a_lazy_read_only_view(name, clean_runtime):
    got, want = _WINDOWS[name](swv, np.asarray(_H)), _WINDOWS[name](swv, _H)
    assert (got.shape, got.strides, got.flags.writeable) == (want.shape, want.strides, want.flags.writeable)
    assert numpy.array_equal(numpy.asarray(got), want)
    assert numpy.array_equal(numpy.asarray(got.mean(axis=-1)), want.mean(axis=-1))
    assert metrics.fallbacks() == {}


def test_sliding_windows_see_later_writes_and_refuse_their_own(clean_runtime):
    a = np.asarray(_H)
    w = swv(a, (2, 2))
    a[1, 1] = -5.0
    host = _H.copy()
    host[1, 1] = -5.0
    assert numpy.array_equal(numpy.asarray(w), swv(host, (2, 2)))
    with pytest.raises(ValueError, match="read-only"):
        w[0, 0, 0, 0] = 1.0
    with pytest.raises(ValueError, match="window shape cannot be larger than input array shape"):
        swv(a, (6, 1))


def test_a_convolution_by_windows(clean_runtime):
    img = numpy.random.default_rng(0).random((12, 10)).astype(numpy.float32)
    k = numpy.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]], numpy.float32) / 16
    want = numpy.einsum("ijkl,kl->ij", swv(numpy.pad(img, 1), (3, 3)), k)
    got = np.einsum("ijkl,kl->ij", swv(np.pad(np.asarray(img), 1), (3, 3)), np.asarray(k))
    assert numpy.allclose(numpy.asarray(got), want, rtol=1e-6, atol=1e-6)
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("kw", [{}, {"indexing": "ij"}, {"sparse": True}, {"copy": False}, {"sparse": True, "indexing": "ij"}])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_meshgrid_is_lazy(n, kw, clean_runtime):
    vs = [numpy.linspace(0, 1, 4), numpy.arange(3.0), numpy.array([5, 7])][:n]
    got, want = np.meshgrid(*map(np.asarray, vs), **kw), numpy.meshgrid(*vs, **kw)
    assert type(got) is type(want) and len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype and numpy.array_equal(numpy.asarray(g), w)
    assert metrics.fallbacks() == {}
    with pytest.raises(ValueError, match="Valid values for `indexing`"):
        np.meshgrid(*map(np.asarray, vs), indexing="yx")
