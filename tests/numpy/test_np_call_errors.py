"""lazycore.numpy raises NumPy's errors from types and flags at the call, with
NumPy's type and message, and a call that raises changes no array (issue 41,
item 5). NumPy decides each case."""

import numpy
import pytest

import lazycore.numpy as np


def same_error(fn):
    """fn(numpy) and fn(lazycore.numpy) raise the same type with the same message."""
    with pytest.raises(Exception) as eager:
        fn(numpy)
    with pytest.raises(type(eager.value)) as lazy:
        fn(np)
    assert type(lazy.value) is type(eager.value)
    assert str(lazy.value) == str(eager.value)


@pytest.mark.parametrize("kind", ["lazy", "numpy"])
def test_take_of_float_index_arrays_raises_numpys_type_error(kind):
    def index(m):
        i = numpy.array([0.0, 1.0])
        return m.asarray(i) if kind == "lazy" and m is np else i

    same_error(lambda m: m.take(m.arange(3.0), index(m)))


@pytest.mark.parametrize("indices", [[True, False], numpy.array([True, False]), [0.0, 1.7]])
def test_take_casts_what_numpy_casts(indices):
    want = numpy.take(numpy.arange(3.0), indices)
    got = np.take(np.arange(3.0), np.asarray(indices) if isinstance(indices, numpy.ndarray) else indices)
    assert numpy.asarray(got).tolist() == want.tolist()


@pytest.mark.parametrize("dtype", [numpy.float64, numpy.bool_])
@pytest.mark.parametrize("op", ["take_along_axis", "put_along_axis"])
def test_along_axis_with_a_non_integer_index_array_raises_numpys_index_error(op, dtype):
    def call(m):
        a = m.arange(3.0)
        i = m.asarray(numpy.array([0, 1]).astype(dtype))
        if op == "take_along_axis":
            return m.take_along_axis(a, i, 0)
        return m.put_along_axis(a, i, 1.0, 0)

    same_error(call)


def test_writing_through_diagonal_raises_and_changes_nothing():
    def write(m):
        a = m.arange(4.0).reshape(2, 2)
        d = m.diagonal(a)
        try:
            d[...] = 7.0
        finally:
            assert numpy.asarray(a).tolist() == [[0.0, 1.0], [2.0, 3.0]]

    same_error(write)


def test_float_index_arrays_raise_at_the_call_and_write_nothing():
    a = np.arange(3.0)

    def put(m, target):
        target[m.asarray(numpy.array([0.0, 1.0]))] = 5.0

    with pytest.raises(IndexError) as eager:
        put(numpy, numpy.arange(3.0))
    with pytest.raises(IndexError, match=str(eager.value).replace("(", r"\(").replace(")", r"\)")):
        put(np, a)
    assert numpy.asarray(a).tolist() == [0.0, 1.0, 2.0]
