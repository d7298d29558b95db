"""NumPy users' own code run unchanged with ``import lazycore.numpy as np`` (issue 39's
hunt): calls that ran NumPy on the host (counted fallbacks) for work that needs no host,
now lazy with NumPy's values and dtypes."""

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics
from npcheck import same


def _lazy(x):
    return np.asarray(x) if isinstance(x, numpy.ndarray) else x


# --- count_nonzero: a Monte Carlo estimate's count -------------------------------------------------


@pytest.mark.parametrize("kw", [{}, {"axis": 0}, {"axis": -1, "keepdims": True}, {"axis": (0, 1), "keepdims": True}])
@pytest.mark.parametrize("kind", ["float64", "bool", "complex128", "int8"])
def test_count_nonzero_is_lazy(kind, kw, clean_runtime):
    x = numpy.array([[0, 1.5, numpy.nan], [0, 0, -2]])
    if kind == "complex128":
        x = x.astype(complex)
        x[0, 0] = 1j
    elif kind == "bool":
        x = x > 0
    elif kind == "int8":
        x = numpy.nan_to_num(x).astype(numpy.int8)
    got, want = np.count_nonzero(np.asarray(x), **kw), numpy.asarray(numpy.count_nonzero(x, **kw))
    assert numpy.asarray(got).dtype == want.dtype and numpy.array_equal(numpy.asarray(got), want)
    assert metrics.fallbacks() == {}


# --- einsum: diagonals and the sublist form ---------------------------------------------------------

_RNG = numpy.random.default_rng(0)
_M, _T, _B = _RNG.normal(size=(4, 4)), _RNG.normal(size=(3, 3, 3)), _RNG.normal(size=(2, 3, 3))
_A, _W = _RNG.normal(size=(3, 4, 5)), _RNG.normal(size=(5, 6))


@pytest.mark.parametrize("args", [
    ("ii", _M), ("ii->i", _M), ("ij,jj->i", _M, _M), ("iii->i", _T), ("iij->j", _T), ("bii->b", _B),
    ("...ii->...i", _B), ("ii,i->", _M, _M[0]),
    (_A, [0, 1, 2], _W, [2, 3], [0, 3]), (_A, [0, 1, 2], _W, [2, 3]), (_M, [0, 0]), (_B, [Ellipsis, 1, 1], [Ellipsis, 1]),
], ids=lambda a: a if isinstance(a, str) else None)
def test_einsum_diagonals_and_sublists_are_lazy(args, clean_runtime):
    same(np.einsum(*map(_lazy, args)), numpy.einsum(*args), rtol=1e-12, atol=1e-12)
    assert metrics.fallbacks() == {}


def test_einsum_diagonal_is_a_writeable_view_as_numpys(clean_runtime):
    host = _M.copy()
    lazy = np.asarray(host)
    numpy.einsum("ii->i", host)[1] = 100.0
    np.einsum("ii->i", lazy)[1] = 100.0
    same(lazy, host)
    with pytest.raises(ValueError, match="collapsing index 'i' don't match"):
        np.einsum("ii", np.asarray(_A[0]))  # NumPy's own error (NumPy runs it)
