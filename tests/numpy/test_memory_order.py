"""NumPy's memory orders on lazy arrays (issue 39): ``copy(order=)``, ``astype``,
``np.copy``, ``asarray(order=)``, the creation functions and ``*_like`` give
NumPy's strides, and what NumPy reads in memory order (``ravel("K")``,
``reshape(order="A")``, ``tobytes(order="A")``) gives NumPy's values.

Before: every lazy array was row-major whatever was asked, and the host copies
fallbacks handed NumPy were row-major too, so ``lnp.asfortranarray(x).ravel("K")``
read the elements in row order and ``x.T.tobytes(order="A")`` in the transpose's."""

import numpy
import pytest

import lazycore.numpy as np

_H = numpy.arange(24.0).reshape(2, 3, 4)
_VIEWS = {
    "base": lambda a: a, "T": lambda a: a.T, "reversed": lambda a: a[:, ::-1], "permuted": lambda a: a.transpose(1, 0, 2),
    "sliced": lambda a: a[::2, 1:], "swapped": lambda a: a.swapaxes(0, 1), "column": lambda a: a[:, 1:2].T,
    "fortran": lambda a: a.T.copy().T,
}


def _dims(a):
    """Strides of the dims that have more than one element (NumPy's strides of
    size-1 dims are arbitrary)."""
    return [s for s, n in zip(a.strides, a.shape) if n > 1]


@pytest.mark.parametrize("order", ["C", "F", "A", "K"])
@pytest.mark.parametrize("view", list(_VIEWS))
def test_copies_have_numpys_strides_and_memory_order(view, order):
    host = _VIEWS[view](_H)
    lazy = _VIEWS[view](np.asarray(_H))
    for got, want in [(lazy.copy(order=order), host.copy(order=order)), (np.copy(lazy, order=order), numpy.copy(host, order=order)),
                      (lazy.astype(numpy.float32, order=order), host.astype(numpy.float32, order=order)),
                      (np.zeros_like(lazy, order=order), numpy.zeros_like(host, order=order)),
                      (np.asarray(lazy, order=order), numpy.asarray(host, order=order))]:
        assert _dims(got) == _dims(want)
        assert (got.flags.c_contiguous, got.flags.f_contiguous) == (want.flags.c_contiguous, want.flags.f_contiguous)
        assert numpy.array_equal(numpy.asarray(got.ravel("K")), want.ravel("K"))
        assert numpy.array_equal(numpy.asarray(got), want)


@pytest.mark.parametrize("order", ["C", "F", "A", "K"])
@pytest.mark.parametrize("view", list(_VIEWS))
def test_what_numpy_reads_in_memory_order(view, order):
    host = _VIEWS[view](_H)
    lazy = _VIEWS[view](np.asarray(_H))
    assert lazy.tobytes(order=order) == host.tobytes(order=order)
    assert numpy.array_equal(numpy.asarray(lazy.ravel(order)), host.ravel(order))
    if order != "K":
        assert numpy.array_equal(numpy.asarray(lazy.reshape(-1, 2, order=order)), host.reshape(-1, 2, order=order))
    assert _dims(numpy.asarray(lazy)) == _dims(host)


@pytest.mark.parametrize("order", ["C", "F"])
def test_creation_functions_take_order(order):
    for got, want in [(np.zeros((2, 3), order=order), numpy.zeros((2, 3), order=order)),
                      (np.ones((2, 1, 3), order=order), numpy.ones((2, 1, 3), order=order)),
                      (np.full((3, 2), 7.0, order=order), numpy.full((3, 2), 7.0, order=order)),
                      (np.empty((4, 5), order=order), numpy.empty((4, 5), order=order)),
                      (np.array(_H, order=order), numpy.array(_H, order=order)),
                      (np.asarray(numpy.asfortranarray(_H)), numpy.asarray(numpy.asfortranarray(_H)))]:
        assert got.strides == want.strides
    with pytest.raises(ValueError, match="only 'C' or 'F' order is permitted"):
        np.zeros(3, order="K")
    with pytest.raises(ValueError, match="order must be one of"):
        np.asarray(_H).copy(order="X")


def test_asarray_copies_only_where_the_order_asks():
    a = np.asarray(_H)
    assert np.asarray(a) is a and np.asarray(a, order="C") is a and np.asarray(a.T, order="A").base is not None
    f = np.asarray(a, order="F")
    assert f is not a and f.flags.f_contiguous and np.asarray(f, order="F") is f
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        np.asarray(a, order="F", copy=False)


def test_a_fortran_array_computes_as_numpy():
    """The layout is metadata: values, views and writes through them are NumPy's."""
    host = numpy.asfortranarray(_H)
    lazy = np.asfortranarray(np.asarray(_H))
    host[1, :, 2] = -1.0
    lazy[1, :, 2] = -1.0
    assert numpy.array_equal(numpy.asarray(lazy * 2 + lazy[:, ::-1]), host * 2 + host[:, ::-1])
    assert numpy.array_equal(numpy.asarray(lazy.reshape(4, 6)), host.reshape(4, 6))
    assert numpy.array_equal(numpy.asarray(lazy.base), host.base) if host.base is not None else True
    assert lazy.flags.owndata
